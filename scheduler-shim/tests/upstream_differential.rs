//! headroom's victims held against upstream's: every scenario goes, as one cluster file, to
//! - `headroom-shim plan --cluster FILE` (the pure decision core; single-resize scenarios),
//! - `headroom-shim kube` on a real kube-apiserver v1.37.2 (no kube-scheduler),
//! - upstream kube-scheduler v1.37.2 with `InPlacePodVerticalScalingSchedulerPreemption` on, on
//!   another real control plane.
//!
//! Each scenario gets its own node (and namespace) on the two control planes; the Pods are
//! created already Deferred (spec at the desired size, `allocatedResources` at the old one,
//! `PodResizePending`/`Deferred`), as upstream's `TestDeferredResizePodPreemption` does: there is
//! no kubelet. A Pod counts as evicted once it has a `deletionTimestamp` or is gone.
//!
//! The test prints the comparison table and fails on any difference that
//! `docs/upstream-differences.md` does not list for that scenario.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use headroom_testkit::{ControlPlane, ControlPlaneOptions, LoggedChild, SchedulerGate, load_cluster_file};
use serde_json::Value;

struct PodSpec {
    name: &'static str,
    priority: i32,
    never: bool,
    /// The spec's cpu request (the desired size for a resizing Pod).
    cpu: &'static str,
    memory: &'static str,
    /// `Some(allocated cpu)`: this Pod's resize is Deferred.
    deferred_from: Option<&'static str>,
    labels: &'static [(&'static str, &'static str)],
    /// `status.startTime`: upstream's tie-break between victims of equal priority.
    started: &'static str,
    /// Deleted (gracefully; no kubelet confirms it, so it stays terminating) before any resize
    /// is Deferred: an earlier victim in its grace period.
    terminating: bool,
    /// Not bound: `status.nominatedNodeName` is the scenario's node, as a scheduler's
    /// preemption leaves a Pod waiting for its victims.
    nominated: bool,
}

const fn pod(name: &'static str, priority: i32, cpu: &'static str) -> PodSpec {
    PodSpec {
        name,
        priority,
        never: false,
        cpu,
        memory: "100",
        deferred_from: None,
        labels: &[],
        started: "2026-01-01T00:00:00Z",
        terminating: false,
        nominated: false,
    }
}

struct Scenario {
    name: &'static str,
    node_cpu: &'static str,
    node_memory: &'static str,
    disable_resize_preemption: bool,
    pods: Vec<PodSpec>,
    /// (selector label `app=VALUE`, minAvailable)
    pdbs: Vec<(&'static str, i32)>,
}

fn scenarios() -> Vec<Scenario> {
    let resizer = |name, priority, from, to| PodSpec {
        deferred_from: Some(from),
        ..pod(name, priority, to)
    };
    vec![
        // Upstream's TestDeferredResizePodPreemption table.
        Scenario {
            name: "upstream-preempt-single-low-priority-pod",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: false,
            pods: vec![
                pod("victim-1", 100, "200m"),
                resizer("preemptor", 1000, "100m", "300m"),
            ],
            pdbs: vec![],
        },
        Scenario {
            name: "upstream-preempt-multiple-low-priority-pods",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: false,
            pods: vec![
                PodSpec {
                    memory: "50",
                    ..pod("victim-1", 100, "100m")
                },
                PodSpec {
                    memory: "50",
                    ..pod("victim-2", 100, "100m")
                },
                resizer("preemptor", 1000, "100m", "300m"),
            ],
            pdbs: vec![],
        },
        Scenario {
            name: "upstream-no-preemption-when-preemptor-policy-is-never",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: false,
            pods: vec![
                pod("victim-1", 100, "200m"),
                PodSpec {
                    never: true,
                    ..resizer("preemptor", 1000, "100m", "300m")
                },
            ],
            pdbs: vec![],
        },
        Scenario {
            name: "upstream-parking-when-the-resize-fits",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: false,
            pods: vec![resizer("preemptor", 1000, "100m", "300m")],
            pdbs: vec![],
        },
        Scenario {
            name: "upstream-node-policy-disables-preemption",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: true,
            pods: vec![
                pod("victim-1", 100, "200m"),
                resizer("preemptor", 1000, "100m", "300m"),
            ],
            pdbs: vec![],
        },
        // Upstream asks PodEligibleToPreemptOthers before it looks at the node: Never on a node
        // that disabled resize preemption (nobody evicted either way; the messages differ).
        Scenario {
            name: "never-on-a-disabled-node",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: true,
            pods: vec![
                pod("victim-1", 100, "200m"),
                PodSpec {
                    never: true,
                    ..resizer("preemptor", 1000, "100m", "300m")
                },
            ],
            pdbs: vec![],
        },
        // A disabled node is reported even when the resize fits; nobody is evicted.
        Scenario {
            name: "fits-on-a-disabled-node",
            node_cpu: "400m",
            node_memory: "300",
            disable_resize_preemption: true,
            pods: vec![
                pod("other", 100, "100m"),
                resizer("preemptor", 1000, "100m", "300m"),
            ],
            pdbs: vec![],
        },
        // A PDB changes the victim: without it low-a (started later, less important) goes; with
        // it low-a is reprieved first and low-b goes.
        Scenario {
            name: "pdb-changes-the-victim",
            node_cpu: "1000m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                PodSpec {
                    labels: &[("app", "a")],
                    started: "2026-01-02T00:00:00Z",
                    ..pod("low-a", 100, "400m")
                },
                PodSpec {
                    labels: &[("app", "b")],
                    ..pod("low-b", 100, "400m")
                },
                resizer("preemptor", 1000, "200m", "500m"),
            ],
            pdbs: vec![("a", 1)],
        },
        // Two competing Deferred resizes, one of lower priority than the other.
        Scenario {
            name: "two-competing-resizes",
            node_cpu: "1000m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                pod("low-1", 100, "300m"),
                PodSpec {
                    started: "2026-01-02T00:00:00Z",
                    ..pod("low-2", 100, "300m")
                },
                resizer("mid", 500, "200m", "400m"),
                resizer("high", 1000, "200m", "400m"),
            ],
            pdbs: vec![],
        },
        // Even with every lower-priority Pod gone the resize does not fit: nobody is evicted.
        Scenario {
            name: "no-fit-even-after-every-eviction",
            node_cpu: "300m",
            node_memory: "300",
            disable_resize_preemption: false,
            pods: vec![
                pod("victim-1", 100, "100m"),
                pod("system", 2000, "150m"),
                resizer("preemptor", 1000, "100m", "300m"),
            ],
            pdbs: vec![],
        },
        // The KEP's "Risk of Additional Preemption": upstream counts every other pending resize
        // at its desired size, so the `Never` Pod's resize, which may preempt nobody, makes
        // room for `high` look short and `low` goes. headroom counts a resize not yet served at
        // its allocated size: `high` fits as the node stands and nobody is evicted.
        Scenario {
            name: "competing-resize-of-a-never-pod",
            node_cpu: "1000m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                pod("low", 100, "300m"),
                pod("system", 2000, "200m"),
                PodSpec {
                    never: true,
                    ..resizer("mid", 500, "200m", "400m")
                },
                resizer("high", 1000, "200m", "300m"),
            ],
            pdbs: vec![],
        },
        // A lower-priority Pod already terminating, less important than the running one
        // (started later): upstream reprieves the running Pod and takes the terminating one
        // (no API call), as headroom does.
        Scenario {
            name: "terminating-victim-taken-by-both",
            node_cpu: "600m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                PodSpec {
                    terminating: true,
                    started: "2026-01-02T00:00:00Z",
                    ..pod("leaving", 100, "200m")
                },
                pod("running", 100, "200m"),
                resizer("preemptor", 1000, "200m", "400m"),
            ],
            pdbs: vec![],
        },
        // The terminating Pod is the more important one (started earlier): upstream reprieves it
        // and evicts the running Pod as well; headroom takes the room already on its way out and
        // evicts nobody running.
        Scenario {
            name: "terminating-victim-reprieved-by-upstream",
            node_cpu: "600m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                PodSpec {
                    terminating: true,
                    ..pod("leaving", 100, "200m")
                },
                PodSpec {
                    started: "2026-01-02T00:00:00Z",
                    ..pod("running", 100, "200m")
                },
                resizer("preemptor", 1000, "200m", "400m"),
            ],
            pdbs: vec![],
        },
        // A higher-priority Pod nominated to the node (not bound): the shim counts it as placed
        // (its second watch, `status.nominatedNodeName`); upstream's own scheduler places it,
        // preempting for it. Either way `low` goes and the nominated Pod stays.
        Scenario {
            name: "a-nominated-pod-counts-as-placed",
            node_cpu: "1000m",
            node_memory: "1000",
            disable_resize_preemption: false,
            pods: vec![
                pod("low", 100, "300m"),
                PodSpec {
                    nominated: true,
                    ..pod("nominated", 2000, "400m")
                },
                resizer("preemptor", 1000, "200m", "400m"),
            ],
            pdbs: vec![],
        },
        // headroom's own example: the seed's shape at a tenth of its size.
        Scenario {
            name: "seed-shape",
            node_cpu: "800m",
            node_memory: "16Gi",
            disable_resize_preemption: false,
            pods: vec![
                pod("system", 2_000_000, "95m"),
                PodSpec {
                    memory: "500Mi",
                    ..pod("low-priority-pod", 1000, "300m")
                },
                PodSpec {
                    memory: "1Gi",
                    ..resizer("high-priority-pod", 1_000_000, "400m", "600m")
                },
            ],
            pdbs: vec![],
        },
    ]
}

/// Which objects a cluster file holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The scenario as it stands when the resizes are Deferred: what `plan` reads
    /// (terminating Pods carry their `deletionTimestamp`).
    Whole,
    /// What is loaded into a live cluster first: a scenario with terminating Pods has its
    /// resizes not yet Deferred ([`defer_resizes`] writes them once those Pods are deleted,
    /// as the API server sets a `deletionTimestamp` only on a delete).
    Live,
}

fn has_terminating(scenario: &Scenario) -> bool {
    scenario.pods.iter().any(|p| p.terminating)
}

/// The status conditions of a running Pod, with the kubelet's `Deferred` one when `deferred`.
fn pod_conditions(started: &str, deferred: bool) -> Vec<Value> {
    let mut conditions = vec![
        serde_json::json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": started}),
        serde_json::json!({"type": "Ready", "status": "True", "lastTransitionTime": started}),
    ];
    if deferred {
        conditions.push(serde_json::json!({
            "type": "PodResizePending", "status": "True", "reason": "Deferred",
            "message": "Node didn't have enough resource: cpu",
            "lastTransitionTime": started,
        }));
    }
    conditions
}

/// Deletes the scenario's terminating Pods (they stay terminating: no kubelet confirms), then
/// writes the resizers' `Deferred` condition, as the kubelet would.
fn defer_resizes(plane: &ControlPlane, scenario: &Scenario, ns: &str) {
    for p in scenario.pods.iter().filter(|p| p.terminating) {
        plane
            .kubectl_ok(&["delete", "pod", p.name, "-n", ns, "--wait=false"])
            .unwrap();
        // Still there, terminating: otherwise the scenario would test a node with room free.
        let stamp = plane
            .kubectl_ok(&[
                "get",
                "pod",
                p.name,
                "-n",
                ns,
                "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            ])
            .unwrap();
        assert!(
            !stamp.trim().is_empty(),
            "{ns}/{} is not terminating after its delete",
            p.name
        );
    }
    for p in scenario.pods.iter().filter(|p| p.deferred_from.is_some()) {
        let patch = serde_json::json!({"status": {"conditions": pod_conditions(p.started, true)}});
        plane
            .kubectl_ok(&[
                "patch",
                "pod",
                p.name,
                "-n",
                ns,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch.to_string(),
            ])
            .unwrap();
    }
}

/// The scenario as the objects `kubectl get -o yaml` would print, on node `node`, namespace `ns`.
fn cluster_file(scenario: &Scenario, node: &str, ns: &str, stage: Stage) -> String {
    let defer_later = stage == Stage::Live && has_terminating(scenario);
    let mut docs = Vec::new();
    let mut node_spec = serde_json::json!({});
    if scenario.disable_resize_preemption {
        node_spec =
            serde_json::json!({"podPreemptionPolicy": {"disableResizePreemption": ["test-operator"]}});
    }
    let capacity =
        serde_json::json!({"cpu": scenario.node_cpu, "memory": scenario.node_memory, "pods": "32"});
    docs.push(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
        "spec": node_spec,
        "status": {"capacity": capacity, "allocatable": capacity, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }));
    // No Namespace object: `plan` reads Nodes, Pods, PriorityClasses and PDBs only, and the
    // loader creates the namespaces it meets.
    let mut classes = BTreeSet::new();
    for p in &scenario.pods {
        classes.insert((p.priority, p.never));
    }
    for (priority, never) in &classes {
        docs.push(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": class_name(ns, *priority, *never)},
            "value": priority,
            "preemptionPolicy": if *never { "Never" } else { "PreemptLowerPriority" },
        }));
    }
    for (app, min_available) in &scenario.pdbs {
        // The status is what the disruption controller computes for one healthy Pod; the real
        // control planes compute it themselves, `plan` reads it from here.
        docs.push(serde_json::json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": format!("pdb-{app}"), "namespace": ns},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": (1 - min_available).max(0), "currentHealthy": 1,
                       "desiredHealthy": min_available, "expectedPods": 1},
        }));
    }
    for p in &scenario.pods {
        let requests = serde_json::json!({"cpu": p.cpu, "memory": p.memory});
        let allocated = serde_json::json!({"cpu": p.deferred_from.unwrap_or(p.cpu), "memory": p.memory});
        let conditions = pod_conditions(p.started, p.deferred_from.is_some() && !defer_later);
        let labels: serde_json::Map<String, Value> = p
            .labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
            .collect();
        let mut doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": p.name, "namespace": ns, "labels": labels},
            "spec": {
                "nodeName": node,
                "priorityClassName": class_name(ns, p.priority, p.never),
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": requests}}],
            },
            "status": {
                "phase": "Running", "startTime": p.started, "conditions": conditions,
                "containerStatuses": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "imageID": "",
                    "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": p.started}},
                    "allocatedResources": allocated, "resources": {"requests": allocated}}],
            },
        });
        if p.terminating && stage == Stage::Whole {
            doc["metadata"]["deletionTimestamp"] = Value::from("2026-01-03T00:00:00Z");
            doc["metadata"]["deletionGracePeriodSeconds"] = Value::from(30);
        }
        if p.nominated {
            // Waiting for this node, not on it: the node selector keeps upstream's scheduler
            // from placing it on another scenario's node.
            doc["spec"] = serde_json::json!({
                "priorityClassName": class_name(ns, p.priority, p.never),
                "nodeSelector": {"kubernetes.io/hostname": node},
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": requests}}],
            });
            doc["status"] = serde_json::json!({
                "phase": "Pending", "nominatedNodeName": node,
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "lastTransitionTime": p.started}],
            });
        }
        docs.push(doc);
    }
    docs.iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn class_name(ns: &str, priority: i32, never: bool) -> String {
    format!("{ns}-p{priority}{}", if never { "-never" } else { "" })
}

fn still_running(plane: &ControlPlane, ns: &str) -> BTreeSet<String> {
    let out = plane
        .kubectl_ok(&["get", "pods", "-n", ns, "-o", "json"])
        .unwrap();
    let list: Value = serde_json::from_str(&out).unwrap();
    let present: BTreeSet<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    present
}

/// Who was evicted, once nothing has changed for `quiet` (or `limit` has passed).
/// A side has decided once nothing changed for this long (upstream's scheduler acts on the
/// status update at once; the shim within its first reconcile)...
const QUIET: Duration = Duration::from_secs(5);
/// ...or once this much has passed.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

fn settle(
    plane: &ControlPlane,
    ns: &str,
    all: &BTreeSet<String>,
    quiet: Duration,
    limit: Duration,
) -> BTreeSet<String> {
    let started = Instant::now();
    let mut last = BTreeSet::new();
    let mut since = Instant::now();
    loop {
        let remaining = still_running(plane, ns);
        let gone: BTreeSet<String> = all.difference(&remaining).cloned().collect();
        if gone != last {
            last = gone;
            since = Instant::now();
        }
        if since.elapsed() >= quiet || started.elapsed() >= limit {
            return last;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

fn plan(file: &Path, scenario: &Scenario, ns: &str) -> Option<BTreeSet<String>> {
    let resizers: Vec<&PodSpec> = scenario
        .pods
        .iter()
        .filter(|p| p.deferred_from.is_some())
        .collect();
    let [resizer] = resizers.as_slice() else {
        return None; // `plan` decides one resize at a time
    };
    let out = Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
        .args(["plan", "--json", "--cluster"])
        .arg(file)
        .args(["--resize", &format!("{ns}/{}", resizer.name)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(
        decision["victims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_string())
            .collect(),
    )
}

fn start_shim(kubeconfig: &Path, node: &str, log: &Path) -> LoggedChild {
    LoggedChild::spawn(
        Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
            .args([
                "kube",
                "--node-name",
                node,
                "--ledger",
                "local",
                "--metrics-addr",
                "127.0.0.1:0",
                "--resync-seconds",
                "1",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            // The shim reads its own variable (it ignores RUST_LOG today).
            .env("HEADROOM_LOG", "info"),
        log,
    )
    .unwrap()
}

/// `docs/upstream-differences.md`'s table rows: `| scenario | headroom | upstream | reason |`.
fn listed_differences() -> Vec<(String, String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/upstream-differences.md");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells.len() >= 4).then(|| {
                (
                    cells[0].trim_matches('`').to_string(),
                    cells[1].to_string(),
                    cells[2].to_string(),
                )
            })
        })
        .collect()
}

fn names(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "none".to_string()
    } else {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[test]
fn headroom_evicts_whom_upstream_kube_scheduler_evicts() {
    let upstream = ControlPlane::start(ControlPlaneOptions {
        scheduler: Some(SchedulerGate::On),
        ..ControlPlaneOptions::default()
    })
    .unwrap_or_else(|e| panic!("upstream's control plane must start: {e}"));
    let headroom = ControlPlane::start(ControlPlaneOptions::default())
        .unwrap_or_else(|e| panic!("headroom's control plane must start: {e}"));
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    for manifest in ["namespace.yaml", "rbac.yaml"] {
        headroom
            .kubectl_ok(&["apply", "-f", deploy.join(manifest).to_str().unwrap()])
            .unwrap();
    }
    let kubeconfig = headroom
        .service_account_kubeconfig("headroom-system", "headroom")
        .unwrap();
    let listed = listed_differences();

    let mut table = String::new();
    writeln!(
        table,
        "{:<52} {:<24} {:<24} {:<24} verdict",
        "scenario", "plan", "headroom-shim kube", "kube-scheduler"
    )
    .unwrap();
    let mut failures = Vec::new();
    for (index, scenario) in scenarios().iter().enumerate() {
        let node = format!("node-{index}");
        let ns = format!("s{index}");
        let file_text = cluster_file(scenario, &node, &ns, Stage::Whole);
        let live_text = cluster_file(scenario, &node, &ns, Stage::Live);
        let file: PathBuf = headroom.dir().join(format!("{}.yaml", scenario.name));
        std::fs::write(&file, &file_text).unwrap();
        let all: BTreeSet<String> = scenario.pods.iter().map(|p| p.name.to_string()).collect();

        load_cluster_file(&upstream, &live_text).unwrap();
        if has_terminating(scenario) {
            defer_resizes(&upstream, scenario, &ns);
        }
        let by_upstream = settle(&upstream, &ns, &all, QUIET, SETTLE_LIMIT);

        load_cluster_file(&headroom, &live_text).unwrap();
        if has_terminating(scenario) {
            defer_resizes(&headroom, scenario, &ns);
        }
        let log = headroom.dir().join(format!("shim-{}.log", scenario.name));
        let shim = start_shim(&kubeconfig, &node, &log);
        let by_shim = settle(&headroom, &ns, &all, QUIET, SETTLE_LIMIT);
        drop(shim);

        let by_plan = plan(&file, scenario, &ns);
        let shown = |s: &BTreeSet<String>| names(s);
        let plan_shown = by_plan
            .as_ref()
            .map_or_else(|| "(two resizes)".to_string(), shown);
        let agree = by_shim == by_upstream && by_plan.as_ref().is_none_or(|p| *p == by_upstream);
        let verdict = if agree {
            "same".to_string()
        } else if listed
            .iter()
            .any(|(name, h, u)| name == scenario.name && *h == names(&by_shim) && *u == names(&by_upstream))
        {
            "differs (listed in docs/upstream-differences.md)".to_string()
        } else {
            failures.push(format!(
                "{}: plan {plan_shown}, headroom-shim {}, kube-scheduler {}; shim log:\n{}",
                scenario.name,
                names(&by_shim),
                names(&by_upstream),
                std::fs::read_to_string(&log).unwrap_or_default()
            ));
            "DIFFERS".to_string()
        };
        writeln!(
            table,
            "{:<52} {:<24} {:<24} {:<24} {verdict}",
            scenario.name,
            plan_shown,
            names(&by_shim),
            names(&by_upstream)
        )
        .unwrap();
    }
    println!("{table}");
    assert!(
        failures.is_empty(),
        "differences from upstream not listed in docs/upstream-differences.md:\n{}\nscheduler log tail:\n{}",
        failures.join("\n\n"),
        upstream.log_tail("kube-scheduler", 40)
    );
}
