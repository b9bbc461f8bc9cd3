//! The standalone backend's shim loop on real cgroups and processes, where preemption must not
//! happen: a resize that evicting every lower-priority Pod would still not fit stays Deferred with
//! nobody evicted, and a resizing Pod with `preemptionPolicy: Never` preempts nobody. And on one
//! cluster file, the victims `headroom-shim plan` names are the ones the standalone node evicts
//! (the Kubernetes backend's side of the same scenarios is in tests/kube_flow.rs).
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use headroom_node_model::parse_cpu_millis;
use headroom_shim::decide::Outcome;
use headroom_shim::standalone::run::{Running, start};
use headroom_shim::standalone::shim::{is_pending, pending_condition, run_cycle};

/// Creates cgroups under /sys/fs/cgroup: root only.
fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

struct Node {
    running: Running,
    root: String,
    _dir: tempfile::TempDir,
}

async fn node(manifest: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let (config, root) = common::scratch_node("headroom-test-policy", dir.path());
    let running = start(config).await.unwrap();
    running.node.apply_manifest(manifest).unwrap();
    Node {
        running,
        root,
        _dir: dir,
    }
}

impl Node {
    fn pids(&self, key: &str) -> Vec<u32> {
        let store = self.running.node.store();
        store.pods[key].runtime.as_ref().expect("running").pids()
    }

    async fn stop(self) {
        self.running.stop().await.unwrap();
        for controller in ["cpu", "memory"] {
            let dir = format!("/sys/fs/cgroup/{controller}/{}", self.root);
            assert!(!Path::new(&dir).exists(), "{dir} was left behind");
        }
    }
}

const CLASSES: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1000
"#;

/// Bound to the file's Node (`plan` counts only bound Pods; the standalone node binds every Pod
/// to itself anyway).
fn pod(name: &str, class: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: test-node\n  priorityClassName: {class}\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {{cpu: \"{cpu}\", memory: 100Mi}}\n      limits: {{cpu: \"{cpu}\", memory: 100Mi}}\n"
    )
}

async fn assert_nobody_evicted(n: Node, resizer: &str, want: Outcome) {
    let node = &n.running.node;
    let low_pids = n.pids("default/low");
    let result = node.resize(resizer, None, Some("6"), None).await.unwrap();
    assert_eq!(result.status, "Deferred", "{result:?}");
    let served = run_cycle(node).await.unwrap();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(served[0].decision.outcome, want, "{:?}", served[0].decision);
    assert!(served[0].decision.victims.is_empty());

    // Still Deferred; the victim candidate untouched: running, its processes alive, no events.
    let (reason, message) = pending_condition(node, &format!("default/{resizer}")).expect("PodResizePending");
    assert_eq!(reason, "Deferred");
    assert!(
        message.starts_with("Node didn't have enough resource: cpu, requested: 6000"),
        "{message}"
    );
    assert_eq!(n.pids("default/low"), low_pids);
    for pid in &low_pids {
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "victim process {pid} is gone"
        );
    }
    assert!(node.store().events.list(Some("low")).is_empty());
    assert!(node.latencies().is_empty());
    n.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_that_cannot_fit_even_after_evicting_every_lower_priority_pod_stays_deferred() {
    if !privileged("cannot fit") {
        return;
    }
    // 8 CPU: resizer 2 -> 6, an equal-priority peer 3, low 1: 10 > 8. Evicting low still leaves
    // 6 + 3 = 9 > 8, and the peer is not of lower priority: nobody may be evicted.
    let manifest = format!(
        "{CLASSES}{}{}{}",
        pod("resizer", "high", "2"),
        pod("peer", "high", "3"),
        pod("low", "low", "1")
    );
    let n = node(&manifest).await;
    assert_nobody_evicted(n, "resizer", Outcome::Deferred).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_policy_never_preempts_nobody() {
    if !privileged("never") {
        return;
    }
    // The seed's scenario, but the resizer's class says preemptionPolicy: Never.
    let manifest = format!(
        "{CLASSES}{}{}",
        pod("resizer", "high-never", "4"),
        pod("low", "low", "3")
    );
    let n = node(&manifest).await;
    assert_nobody_evicted(n, "resizer", Outcome::NotEligible).await;
}

type Scenario = (
    Vec<(&'static str, &'static str, &'static str)>,
    &'static str,
    Outcome,
    Vec<&'static str>,
);

/// One cluster file for `headroom-shim plan` and the standalone node (which ignores the Node: it
/// is this machine, configured with the same 8 CPU and 16 GiB).
fn cluster(pods: &[(&str, &str, &str)]) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Node\nmetadata: {name: test-node}\nstatus:\n  allocatable: {cpu: \"8\", memory: 16Gi}\n  capacity: {cpu: \"8\", memory: 16Gi}\n",
    );
    for (value, name) in [
        (1000, "low-priority"),
        (10000, "high-priority"),
        (50000, "critical-priority"),
    ] {
        yaml.push_str(&format!(
            "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"
        ));
    }
    for (name, class, cpu) in pods {
        yaml.push_str(&pod(name, class, cpu));
    }
    yaml
}

/// `headroom-shim plan --cluster FILE --resize default/high-priority-pod --cpu CPU`.
fn plan(yaml: &str, cpu: &str) -> (Outcome, Vec<String>) {
    use headroom_shim::cluster_file::{ResizeSpec, node_state_for, parse_cluster};
    let spec = ResizeSpec {
        namespace: "default".into(),
        name: "high-priority-pod".into(),
        cpu: Some(cpu.into()),
        ..ResizeSpec::default()
    };
    let (state, request) = node_state_for(&parse_cluster(yaml).unwrap(), &spec).unwrap();
    let decision = headroom_shim::decide(&state, &request).unwrap();
    (decision.outcome, decision.victim_keys())
}

/// The same scenarios as the Kubernetes backend's `mock_apiserver_backend_preempts_the_victims_plan_names`
/// (tests/kube_flow.rs): `plan` and the standalone backend give the same outcome and victims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_backend_preempts_the_victims_plan_names() {
    if !privileged("same victims") {
        return;
    }
    // (name, class, cpu) of each Pod; the resize; the outcome and victims both must give.
    let scenarios: [Scenario; 3] = [
        (
            vec![
                ("low-priority-pod", "low-priority", "3"),
                ("high-priority-pod", "high-priority", "4"),
            ],
            "6",
            Outcome::Preempt,
            vec!["default/low-priority-pod"],
        ),
        (
            vec![
                ("low-priority-pod", "low-priority", "3"),
                ("batch-pod", "low-priority", "1"),
                ("high-priority-pod", "high-priority", "4"),
            ],
            "7",
            Outcome::Preempt,
            vec!["default/low-priority-pod"],
        ),
        (
            vec![
                ("low-priority-pod", "low-priority", "3"),
                ("critical-pod", "critical-priority", "1"),
                ("high-priority-pod", "high-priority", "4"),
            ],
            "8",
            Outcome::Deferred,
            vec![],
        ),
    ];
    for (pods, cpu, outcome, victims) in scenarios {
        let yaml = cluster(&pods);
        let want = (outcome, victims.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        assert_eq!(plan(&yaml, cpu), want, "plan, resize to {cpu}");

        let n = node(&yaml).await;
        let node = &n.running.node;
        let result = node
            .resize("high-priority-pod", None, Some(cpu), None)
            .await
            .unwrap();
        assert_eq!(result.status, "Deferred", "{result:?}");
        // The node's own shim loop is woken by the Deferred resize and serves it.
        let (got_outcome, error) = if outcome == Outcome::Preempt {
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            while is_pending(node, "default/high-priority-pod") {
                assert!(
                    std::time::Instant::now() < deadline,
                    "resize to {cpu} still pending"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let allocated = node.store().pods["default/high-priority-pod"]
                .pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].allocated_resources.as_ref())
                .and_then(|a| a.get("cpu"))
                .map(|q| parse_cpu_millis(&q.0).unwrap());
            assert_eq!(
                allocated,
                Some(parse_cpu_millis(cpu).unwrap()),
                "resize to {cpu} actuated"
            );
            (Outcome::Preempt, None)
        } else {
            // Nobody to evict: a cycle run here decides as the loop does, and changes nothing.
            let served = run_cycle(node).await.unwrap();
            assert_eq!(served.len(), 1, "{served:?}");
            assert!(served[0].decision.victims.is_empty(), "{:?}", served[0]);
            (served[0].decision.outcome, served[0].error.clone())
        };
        let mut preempted: Vec<String> = node
            .store()
            .events
            .list(None)
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Preempted"))
            .filter_map(|e| e.involved_object.name.map(|name| format!("default/{name}")))
            .collect();
        preempted.sort();
        assert_eq!((got_outcome, preempted), want, "standalone, resize to {cpu}");
        assert_eq!(error, None);
        for victim in &victims {
            assert!(
                !node.store().pods.contains_key(*victim),
                "{victim} still on the node"
            );
        }
        n.stop().await;
    }
}
