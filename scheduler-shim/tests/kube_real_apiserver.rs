//! `headroom-shim kube` against a real kube-apiserver v1.37.2 (with etcd and
//! kube-controller-manager's disruption controller), started by `headroom_testkit` from the
//! programs `cargo xtask build-k8s` builds. The shim runs as the DaemonSet's ServiceAccount with
//! the RBAC from `deploy/kubernetes/`, applied with the real kubectl: a missing permission fails.
//!
//! No kubelet runs: the test writes the Pods' status and the `PodResizePending`/`Deferred`
//! condition itself, as upstream's `TestDeferredResizePodPreemption` does, and an evicted Pod stays
//! `Terminating` (nobody confirms its containers stopped), which is what the test looks for.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use headroom_testkit::{ControlPlane, ControlPlaneOptions, LoggedChild, load_cluster_file};
use serde_json::Value;

mod real_cluster;
use real_cluster::{Shim, defer_the_seed_resize, workspace};

const NODE: &str = "kind-control-plane";

/// The control plane with headroom's namespace, ServiceAccount and RBAC applied, and the seed's
/// cluster loaded.
fn seed_cluster() -> ControlPlane {
    seed_cluster_with(ControlPlaneOptions::default())
}

/// Runs `f` with the client configuration of `kubeconfig`, on a runtime of its own.
fn with_kube_config<T, F: std::future::Future<Output = T>>(
    kubeconfig: &Path,
    f: impl FnOnce(kube::Config) -> F,
) -> T {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(kubeconfig).unwrap(),
            &KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        f(config).await
    })
}

/// A list of at most one Pod in `default`: a list, not a get, because the DaemonSet's role lists
/// and watches Pods and may not get one.
fn list_one_pod() -> http::Request<kube::client::Body> {
    http::Request::get("/api/v1/namespaces/default/pods?limit=1")
        .body(kube::client::Body::empty())
        .unwrap()
}

/// A kubeconfig of the DaemonSet's service account (`deploy/kubernetes/rbac.yaml`), as both of
/// its containers authenticate.
fn daemonset_kubeconfig(plane: &ControlPlane) -> PathBuf {
    plane
        .service_account_kubeconfig("headroom-system", "headroom")
        .unwrap()
}

fn seed_cluster_with(options: ControlPlaneOptions) -> ControlPlane {
    let plane =
        ControlPlane::start(options).unwrap_or_else(|e| panic!("the real control plane must start: {e}"));
    let deploy = workspace().join("deploy/kubernetes");
    for manifest in ["namespace.yaml", "rbac.yaml", "flowschema.yaml"] {
        let path = deploy.join(manifest);
        plane
            .kubectl_ok(&["apply", "-f", path.to_str().unwrap()])
            .unwrap();
    }
    let seed =
        std::fs::read_to_string(workspace().join("scheduler-shim/examples/seed-cluster.yaml")).unwrap();
    load_cluster_file(&plane, &seed).unwrap();
    plane
}

/// headroomd for the seed's node, without the probes (these tests are about the API server;
/// the kernel tests cover them).
fn start_headroomd(plane: &ControlPlane, kubeconfig: &Path) -> (LoggedChild, PathBuf, PathBuf) {
    real_cluster::start_headroomd(plane, kubeconfig, NODE, &["--probes", "off"])
}

fn pod(plane: &ControlPlane, namespace: &str, name: &str) -> Option<Value> {
    plane.get_json("pod", namespace, name)
}

fn condition<'a>(pod: &'a Value, kind: &str) -> Option<&'a Value> {
    pod.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn events_of(plane: &ControlPlane, name: &str) -> Vec<Value> {
    plane.events_of("default", name)
}

/// Polls `probe` until it returns `Some`, or fails with the shim's log.
fn wait_for<T>(shim: &Shim, what: &str, timeout: Duration, probe: impl FnMut() -> Option<T>) -> T {
    real_cluster::wait_for(what, timeout, probe, || {
        format!("headroom-shim's log:\n{}", shim.log())
    })
}

#[test]
fn seed_resize_evicts_the_low_priority_pod_through_the_eviction_api() {
    let plane = seed_cluster();
    let kubeconfig = daemonset_kubeconfig(&plane);
    let high_uid = pod(&plane, "default", "high-priority-pod").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    defer_the_seed_resize(&plane);
    let shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "eviction"]);

    let victim = wait_for(
        &shim,
        "low-priority-pod to be evicted",
        Duration::from_secs(60),
        || {
            pod(&plane, "default", "low-priority-pod")
                .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
        },
    );
    let target = condition(&victim, "DisruptionTarget")
        .unwrap_or_else(|| panic!("the victim carries DisruptionTarget: {victim:#}"));
    assert_eq!(target["status"], "True", "{target:#}");

    let high = pod(&plane, "default", "high-priority-pod").unwrap();
    assert!(
        high.pointer("/metadata/deletionTimestamp").is_none(),
        "the resizing Pod is never a victim"
    );
    // Nobody of equal or higher priority is touched: the kube-system Pods stay.
    for system in ["etcd-kind-control-plane", "kube-apiserver-kind-control-plane"] {
        let p = pod(&plane, "kube-system", system).unwrap();
        assert!(
            p.pointer("/metadata/deletionTimestamp").is_none(),
            "{system} was evicted"
        );
    }

    let events = wait_for(&shim, "the Preempted event", Duration::from_secs(20), || {
        let events = events_of(&plane, "low-priority-pod");
        events
            .iter()
            .any(|e| e["reason"] == "Preempted")
            .then_some(events)
    });
    let preempted = events.iter().find(|e| e["reason"] == "Preempted").unwrap();
    assert_eq!(
        preempted["message"],
        format!("Preempted by pod {high_uid} on node {NODE}"),
        "upstream's message, with the preemptor's UID"
    );
    let table = plane
        .kubectl_ok(&[
            "get",
            "events",
            "-n",
            "default",
            "--sort-by=.metadata.creationTimestamp",
        ])
        .unwrap();
    println!("kubectl get events -n default:\n{table}");
}

#[test]
fn a_pdb_with_no_disruptions_allowed_refuses_the_eviction_and_the_victim_keeps_running() {
    let plane = seed_cluster();
    plane
        .kubectl_ok(&["label", "pod", "low-priority-pod", "-n", "default", "app=low"])
        .unwrap();
    let pdb = serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "low", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "low"}}},
    });
    plane
        .kubectl_stdin(&["create", "-f", "-"], &pdb.to_string())
        .unwrap();
    // The real disruption controller decides: one healthy Pod, minAvailable 1, none allowed.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = plane
            .kubectl_ok(&["get", "pdb", "low", "-n", "default", "-o", "json"])
            .unwrap();
        let pdb: Value = serde_json::from_str(&out).unwrap();
        if pdb.pointer("/status/observedGeneration").is_some() {
            assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb:#}");
            assert_eq!(pdb["status"]["currentHealthy"], 1, "{pdb:#}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the disruption controller never computed the PDB"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let kubeconfig = daemonset_kubeconfig(&plane);
    defer_the_seed_resize(&plane);
    let shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "eviction"]);

    let refusal = wait_for(
        &shim,
        "an Event saying the eviction was refused",
        Duration::from_secs(60),
        || {
            let mut events = events_of(&plane, "high-priority-pod");
            events.extend(events_of(&plane, "low-priority-pod"));
            events.into_iter().find(|e| {
                e["type"] == "Warning"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("disruption budget"))
            })
        },
    );
    println!("refusal event: {} {}", refusal["reason"], refusal["message"]);
    let low = pod(&plane, "default", "low-priority-pod").unwrap();
    assert!(
        low.pointer("/metadata/deletionTimestamp").is_none(),
        "a refused eviction leaves the victim running: {low:#}"
    );
    let high = pod(&plane, "default", "high-priority-pod").unwrap();
    let pending = condition(&high, "PodResizePending").unwrap();
    assert_eq!(pending["reason"], "Deferred", "the resize stays Deferred");
}

#[test]
fn with_headroomd_watching_the_api_server_the_shim_reserves_in_its_ledger_and_evicts_on_fresh_headroom() {
    let plane = seed_cluster();
    let kubeconfig = daemonset_kubeconfig(&plane);
    let (_daemon, socket, daemon_log) = start_headroomd(&plane, &kubeconfig);
    defer_the_seed_resize(&plane);
    let socket_arg = socket.to_str().unwrap().to_string();
    let mut shim = Shim::start_with_ledger(
        &plane,
        &kubeconfig,
        NODE,
        &["--ledger", "headroomd", "--headroomd-socket", &socket_arg],
    );
    shim.beside.push(daemon_log.clone());
    wait_for(
        &shim,
        "low-priority-pod to be preempted",
        Duration::from_secs(60),
        || {
            pod(&plane, "default", "low-priority-pod")
                .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
        },
    );
    let log = shim.log();
    assert!(
        log.contains("freshness_gate=true"),
        "the shim decided with headroomd's live headroom as its gate:\n{log}"
    );
    assert!(
        !log.contains("ResizePreemptionBlocked"),
        "headroom was fresh: nothing blocked:\n{log}"
    );
}

/// A Pod's cgroups as the kubelet's cgroupfs driver lays them out (`kubepods/pod<uid>/<container>`)
/// with one sleeping process, so that headroomd (`--pods-from kube`) has live figures for it. No
/// kubelet runs here, so the test makes them; removed on drop.
struct KubeletCgroups {
    cgroups: headroom_actuator::layout::PodCgroups,
    process: std::process::Child,
}

impl KubeletCgroups {
    fn create(uid: &str, container: &str) -> Self {
        let mount = Path::new(headroom_actuator::layout::DEFAULT_MOUNT);
        let setup = headroom_actuator::detect_setup(mount).unwrap();
        let roots = headroom_actuator::Roots::standalone(mount, setup, "kubepods");
        let cgroups = headroom_actuator::layout::PodCgroups::create(&roots, uid, &[container], None).unwrap();
        let process = Command::new("sleep").arg("600").spawn().unwrap();
        cgroups.add_process(container, process.id()).unwrap();
        KubeletCgroups { cgroups, process }
    }
}

impl Drop for KubeletCgroups {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = self.cgroups.remove();
        let mount = Path::new(headroom_actuator::layout::DEFAULT_MOUNT);
        if let Ok(setup) = headroom_actuator::detect_setup(mount) {
            for dir in headroom_actuator::Roots::standalone(mount, setup, "kubepods")
                .dirs()
                .paths()
            {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// The kubelet's part of a resize it actuated: `allocatedResources` and `resources` of the
/// Pod's first container to the spec's, no resize condition left.
fn actuate_as_the_kubelet(plane: &ControlPlane, name: &str) {
    let pod = pod(plane, "default", name).unwrap();
    let resources = pod.pointer("/spec/containers/0/resources").unwrap().clone();
    let patch = serde_json::json!([
        {"op": "replace", "path": "/status/containerStatuses/0/allocatedResources", "value": resources["requests"]},
        {"op": "replace", "path": "/status/containerStatuses/0/resources", "value": resources},
    ])
    .to_string();
    plane
        .kubectl_ok(&[
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=json",
            "-p",
            &patch,
        ])
        .unwrap();
}

#[test]
fn a_pod_that_offered_gives_way_through_its_resize_subresource_and_nobody_is_evicted() {
    if !headroom_testkit::gate::privileged("give way through /resize", headroom_testkit::gate::not_root()) {
        return;
    }
    let plane = seed_cluster();
    plane
        .kubectl_ok(&[
            "annotate",
            "pod",
            "low-priority-pod",
            "headroom.io/give-way=cpu=1",
        ])
        .unwrap();
    let low_uid = pod(&plane, "default", "low-priority-pod").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let _cgroups = KubeletCgroups::create(&low_uid, "worker");
    let kubeconfig = daemonset_kubeconfig(&plane);
    let (daemon, socket, daemon_log) = start_headroomd(&plane, &kubeconfig);
    // Two readings of the new cgroup's files (headroomd walks the tree every 500 ms without probes).
    thread::sleep(Duration::from_millis(1500));
    defer_the_seed_resize(&plane);
    let socket_arg = socket.to_str().unwrap().to_string();
    let mut shim = Shim::start_with_ledger(
        &plane,
        &kubeconfig,
        NODE,
        &["--ledger", "headroomd", "--headroomd-socket", &socket_arg],
    );
    shim.beside.push(daemon_log.clone());

    // The shim resizes low-priority-pod through /resize: visible in `kubectl get pod -o yaml`.
    let yaml = wait_for(
        &shim,
        "low-priority-pod's resize to 1 CPU",
        Duration::from_secs(60),
        || {
            let yaml = plane
                .kubectl_ok(&["get", "pod", "low-priority-pod", "-o", "yaml"])
                .ok()?;
            yaml.contains("cpu: \"1\"").then_some(yaml)
        },
    );
    let low = pod(&plane, "default", "low-priority-pod").unwrap();
    assert_eq!(
        low.pointer("/spec/containers/0/resources/requests/cpu").unwrap(),
        "1",
        "{yaml}"
    );
    assert_eq!(
        low.pointer("/spec/containers/0/resources/limits/cpu").unwrap(),
        "1",
        "{yaml}"
    );
    assert_eq!(
        low.pointer("/spec/containers/0/resources/requests/memory")
            .unwrap(),
        "500Mi"
    );
    let gave_way = wait_for(&shim, "the GaveWay Event", Duration::from_secs(30), || {
        events_of(&plane, "low-priority-pod")
            .into_iter()
            .find(|e| e["reason"] == "GaveWay")
    });
    let message = gave_way["message"].as_str().unwrap_or_default();
    assert!(message.contains("default/high-priority-pod"), "{gave_way}");
    let table = plane
        .kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=low-priority-pod",
        ])
        .unwrap();
    assert!(table.contains("GaveWay"), "{table}");

    // Until the kubelet actuates the shrink, the room is not free: nobody evicted, nothing reserved.
    thread::sleep(Duration::from_secs(2));
    assert!(shim.log().contains("gave way in place"), "{}", shim.log());
    assert!(
        !shim.log().contains("reserved in headroomd's ledger"),
        "reserved before the shrink was actuated:\n{}",
        shim.log()
    );
    // headroomd counts the node from its own watch, a moment behind the shim's: paused while the
    // kubelet actuates the shrink, it first refuses the room the shim's count already has (under
    // load that happens by itself). The shim asks again on headroomd's next snapshot.
    let paused = daemon.pause().unwrap();
    actuate_as_the_kubelet(&plane, "low-priority-pod");
    thread::sleep(Duration::from_millis(500));
    drop(paused);
    wait_for(&shim, "the room to be reserved", Duration::from_secs(30), || {
        shim.log()
            .contains("reserved in headroomd's ledger")
            .then_some(())
    });
    // The kubelet admits and actuates high-priority-pod's resize; the shim follows it to the end.
    actuate_as_the_kubelet(&plane, "high-priority-pod");
    let no_conditions = serde_json::json!([{"op": "remove", "path": "/status/conditions"}]).to_string();
    plane
        .kubectl_ok(&[
            "patch",
            "pod",
            "high-priority-pod",
            "--subresource=status",
            "--type=json",
            "-p",
            &no_conditions,
        ])
        .unwrap();
    wait_for(
        &shim,
        "the resize to be followed to completion",
        Duration::from_secs(30),
        || shim.log().contains("resize actuated").then_some(()),
    );
    let low = pod(&plane, "default", "low-priority-pod").unwrap();
    assert!(
        low.pointer("/metadata/deletionTimestamp").is_none(),
        "low-priority-pod was evicted"
    );
    let reasons: Vec<Value> = events_of(&plane, "low-priority-pod")
        .into_iter()
        .map(|e| e["reason"].clone())
        .collect();
    assert!(!reasons.iter().any(|r| r == "Preempted"), "{reasons:?}");
}

/// The Preempted Events the shim posted for `name` (one per eviction: each Event has its own name).
fn preempted_events(plane: &ControlPlane, name: &str) -> usize {
    events_of(plane, name)
        .iter()
        .filter(|e| e["reason"] == "Preempted")
        .count()
}

/// The real API server goes away twice under a running shim: before the resize (the shim's
/// watches fail, it says so, and must resynchronise to see the resize at all) and after the
/// eviction, while the resize waits for a kubelet (none runs here). The victim is evicted once,
/// nobody else is, and the shim keeps running.
#[test]
fn the_api_server_restarting_under_the_shim_evicts_nobody_twice() {
    let mut plane = seed_cluster();
    let kubeconfig = daemonset_kubeconfig(&plane);
    let mut shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "eviction"]);
    // The shim has listed (its first resync has run) before the API server goes.
    thread::sleep(Duration::from_secs(3));
    plane.restart_apiserver(Duration::from_secs(3)).unwrap();
    wait_for(
        &shim,
        "the shim to report its failed watches",
        Duration::from_secs(20),
        || {
            shim.log()
                .contains("watch failed; retrying with backoff")
                .then_some(())
        },
    );

    defer_the_seed_resize(&plane);
    wait_for(
        &shim,
        "low-priority-pod to be evicted after the restart",
        Duration::from_secs(60),
        || {
            pod(&plane, "default", "low-priority-pod")
                .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
        },
    );
    wait_for(&shim, "the Preempted event", Duration::from_secs(20), || {
        (preempted_events(&plane, "low-priority-pod") > 0).then_some(())
    });

    // Mid-preemption: evicted, the resize not yet actuated. The shim re-lists afterwards and
    // resynchronises every second; it must see its eviction done, not do it again.
    plane.restart_apiserver(Duration::from_secs(3)).unwrap();
    thread::sleep(Duration::from_secs(6));
    assert!(
        shim.process.try_wait().unwrap().is_none(),
        "the shim exited:\n{}",
        shim.log()
    );
    assert_eq!(
        preempted_events(&plane, "low-priority-pod"),
        1,
        "the victim was evicted more than once; headroom-shim's log:\n{}",
        shim.log()
    );
    let high = pod(&plane, "default", "high-priority-pod").unwrap();
    assert!(
        high.pointer("/metadata/deletionTimestamp").is_none(),
        "the resizing Pod was evicted"
    );
    for system in ["etcd-kind-control-plane", "kube-apiserver-kind-control-plane"] {
        let p = pod(&plane, "kube-system", system).unwrap();
        assert!(
            p.pointer("/metadata/deletionTimestamp").is_none(),
            "{system} was evicted"
        );
    }
}

/// etcd goes away with the resize Deferred, and the shim starts during the outage: whatever it
/// gets from the API server's cache, it cannot evict until etcd is back; then it evicts the
/// victim exactly once and nobody else, and keeps running.
#[test]
fn etcd_stopping_under_a_deferred_resize_evicts_the_victim_once_after_it_returns() {
    let mut plane = seed_cluster();
    let kubeconfig = daemonset_kubeconfig(&plane);
    defer_the_seed_resize(&plane);
    plane.stop("etcd");
    let mut shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "eviction"]);
    thread::sleep(Duration::from_secs(8));
    assert!(
        shim.process.try_wait().unwrap().is_none(),
        "the shim exited while etcd was away:\n{}",
        shim.log()
    );
    plane.start_etcd_again().unwrap();
    wait_for(
        &shim,
        "low-priority-pod to be evicted once etcd is back",
        Duration::from_secs(90),
        || {
            pod(&plane, "default", "low-priority-pod")
                .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
        },
    );
    wait_for(&shim, "the Preempted event", Duration::from_secs(30), || {
        (preempted_events(&plane, "low-priority-pod") > 0).then_some(())
    });
    // Several resyncs later, still one eviction.
    thread::sleep(Duration::from_secs(5));
    let metrics = shim.metrics();
    println!(
        "after the etcd outage: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("headroom_shim_watch") || l.starts_with("headroom_shim_preemption"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert_eq!(
        preempted_events(&plane, "low-priority-pod"),
        1,
        "the victim was evicted more than once; headroom-shim's log:\n{}",
        shim.log()
    );
    assert_eq!(
        real_cluster::sample(&metrics, "headroom_shim_victims_total{mode=\"eviction\"}"),
        Some(1.0),
        "the shim counts one victim:\n{metrics}"
    );
    assert!(
        pod(&plane, "default", "high-priority-pod")
            .unwrap()
            .pointer("/metadata/deletionTimestamp")
            .is_none(),
        "the resizing Pod was evicted"
    );
    assert!(
        shim.process.try_wait().unwrap().is_none(),
        "the shim exited:\n{}",
        shim.log()
    );
}

/// The shim's watches resume after an API server restart from a resource version etcd has
/// compacted away (`--etcd-compaction-interval=2s`, writes in between): the API server answers
/// 410 Gone, the shim says so, re-lists (its log and `headroom_shim_watch_lists_total`), and
/// then decides on the fresh list: the victim is evicted once.
#[test]
fn a_watch_expired_with_410_gone_is_relisted_and_the_shim_decides_on_the_fresh_list() {
    let mut plane = seed_cluster_with(ControlPlaneOptions {
        apiserver_args: vec!["--etcd-compaction-interval=2s".to_string()],
        ..ControlPlaneOptions::default()
    });
    let kubeconfig = daemonset_kubeconfig(&plane);
    let shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "eviction"]);
    wait_for(&shim, "the shim's first lists", Duration::from_secs(20), || {
        let metrics = shim.try_metrics()?;
        (real_cluster::sample(&metrics, "headroom_shim_watch_lists_total{resource=\"pods\"}") == Some(1.0))
            .then_some(())
    });
    // Revisions past everything the shim has seen, then compacted away.
    for i in 0..5 {
        plane
            .kubectl_ok(&["create", "configmap", &format!("revision-{i}"), "-n", "default"])
            .unwrap();
    }
    thread::sleep(Duration::from_secs(6));
    plane.restart_apiserver(Duration::from_secs(1)).unwrap();
    wait_for(
        &shim,
        "the shim to re-list its Pods",
        Duration::from_secs(60),
        || {
            let metrics = shim.try_metrics()?;
            (real_cluster::sample(&metrics, "headroom_shim_watch_lists_total{resource=\"pods\"}")
                >= Some(2.0))
            .then_some(())
        },
    );
    let log = shim.log();
    assert!(
        log.contains("410") || log.contains("too old resource version") || log.contains("Expired"),
        "the re-list followed a 410 Gone, which the shim logged:\n{log}"
    );
    // The list counter moves when the list starts; the shim says so once its last page is in.
    wait_for(
        &shim,
        "the shim to say it is in step",
        Duration::from_secs(30),
        || shim.log().contains("re-listed: in step again").then_some(()),
    );

    defer_the_seed_resize(&plane);
    wait_for(&shim, "the Preempted event", Duration::from_secs(60), || {
        (preempted_events(&plane, "low-priority-pod") > 0).then_some(())
    });
    thread::sleep(Duration::from_secs(3));
    assert_eq!(preempted_events(&plane, "low-priority-pod"), 1, "{}", shim.log());
}

/// The seed's resize with the shim evicting through the Eviction API, when the API server
/// refuses the eviction for a reason other than a PDB: the victim keeps running, the resize stays
/// Deferred, and a Warning `ResizePreemptionFailed` on the resizer says why (with the API
/// server's words, `match`ed).
fn an_eviction_refused_leaves_everything_and_says_why(plane: &ControlPlane, kubeconfig: &Path, said: &str) {
    a_removal_refused_leaves_everything_and_says_why(plane, kubeconfig, "eviction", said);
}

/// As above, with `--preemption` `mode`; with `delete`, the victim's `DisruptionTarget` mark
/// (sent while the room was being reserved) is taken back: status `False`, no reason.
fn a_removal_refused_leaves_everything_and_says_why(
    plane: &ControlPlane,
    kubeconfig: &Path,
    mode: &str,
    said: &str,
) {
    defer_the_seed_resize(plane);
    let shim = Shim::start(plane, kubeconfig, NODE, &["--preemption", mode]);
    let refusal = wait_for(
        &shim,
        "the ResizePreemptionFailed Event",
        Duration::from_secs(60),
        || {
            events_of(plane, "high-priority-pod")
                .into_iter()
                .find(|e| e["reason"] == "ResizePreemptionFailed")
        },
    );
    assert_eq!(refusal["type"], "Warning", "{refusal:#}");
    let message = refusal["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(said) && message.contains("default/low-priority-pod"),
        "the Event names the victim and the API server's refusal ({said}): {message}"
    );
    // Retries (every resync) must not evict either.
    thread::sleep(Duration::from_secs(3));
    let low = pod(plane, "default", "low-priority-pod").unwrap();
    assert!(
        low.pointer("/metadata/deletionTimestamp").is_none(),
        "a refused eviction leaves the victim running: {low:#}"
    );
    // Retried with kube-scheduler's backoff (1 s, then 2 s, …), never in a loop: within the
    // 3 s above at most a handful of attempts.
    let attempts = shim.log().matches("preemption failed").count();
    assert!(
        (1..=5).contains(&attempts),
        "{attempts} failed attempts in about 3 s:\n{}",
        shim.log()
    );
    if mode == "delete" {
        // Between two attempts (one may be under way now) the mark is back to False, no reason.
        let unmarked = || {
            let low = pod(plane, "default", "low-priority-pod").unwrap();
            condition(&low, "DisruptionTarget")
                .filter(|mark| mark["status"] == "False" && mark.get("reason").is_none())
                .cloned()
        };
        wait_for(&shim, "the mark taken back", Duration::from_secs(5), unmarked);
        // The API server names the condition's field manager after the shim's User-Agent, as it
        // names kube-scheduler's marks `kube-scheduler`.
        let low: Value = serde_json::from_str(
            &plane
                .kubectl_ok(&[
                    "get",
                    "pod",
                    "low-priority-pod",
                    "-n",
                    "default",
                    "-o",
                    "json",
                    "--show-managed-fields",
                ])
                .unwrap(),
        )
        .unwrap();
        let managers: Vec<&str> = low["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| {
                m["subresource"] == "status"
                    && m["fieldsV1"]["f:status"]["f:conditions"]
                        .get(r#"k:{"type":"DisruptionTarget"}"#)
                        .is_some()
            })
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert_eq!(
            managers,
            ["headroom-shim"],
            "{:#}",
            low["metadata"]["managedFields"]
        );
    }
    let high = pod(plane, "default", "high-priority-pod").unwrap();
    let pending = condition(&high, "PodResizePending").unwrap();
    assert_eq!(pending["reason"], "Deferred", "the resize stays Deferred");
    println!("refusal: {message}");
}

/// 403: the shim's ClusterRole without `pods/eviction` (an operator who trimmed it, or a
/// `--preemption eviction` flag without the RBAC that goes with it).
#[test]
fn an_eviction_forbidden_by_rbac_leaves_the_victim_running_and_says_why() {
    let plane = seed_cluster();
    let role: Value = serde_json::from_str(
        &plane
            .kubectl_ok(&["get", "clusterrole", "headroom-shim", "-o", "json"])
            .unwrap(),
    )
    .unwrap();
    let rules: Vec<Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| !rule["resources"].to_string().contains("pods/eviction"))
        .cloned()
        .collect();
    assert!(
        rules.len() < role["rules"].as_array().unwrap().len(),
        "deploy/kubernetes/rbac.yaml grants pods/eviction: {role:#}"
    );
    let patch = serde_json::json!({"rules": rules}).to_string();
    plane
        .kubectl_ok(&[
            "patch",
            "clusterrole",
            "headroom-shim",
            "--type=merge",
            "-p",
            &patch,
        ])
        .unwrap();
    let kubeconfig = daemonset_kubeconfig(&plane);
    an_eviction_refused_leaves_everything_and_says_why(&plane, &kubeconfig, "forbidden");
}

/// A validating admission webhook named `name` on `operation` of `resource` whose server is
/// down, with `failurePolicy: Fail`: the API server answers every such call `InternalError`,
/// `failed calling webhook`.
fn webhook_down(plane: &ControlPlane, name: &str, operation: &str, resource: &str) {
    webhook_down_for(plane, name, operation, resource, &serde_json::json!({}));
}

/// [`webhook_down`] for the objects `object_selector` selects (`{}`: all of them).
fn webhook_down_for(
    plane: &ControlPlane,
    name: &str,
    operation: &str,
    resource: &str,
    object_selector: &Value,
) {
    let webhook = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("{name}.headroom.invalid"),
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": [operation],
                       "resources": [resource]}],
            "objectSelector": object_selector,
            // Nothing listens on port 1: every call fails, and Fail turns that into a 500.
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    });
    plane
        .kubectl_stdin(&["create", "-f", "-"], &webhook.to_string())
        .unwrap();
}

/// `--preemption=delete` (the DaemonSet's): the mark goes through, the delete fails in admission:
/// the victim keeps running without the mark, the resize stays Deferred, and an Event says why.
#[test]
fn a_delete_failing_in_admission_takes_the_mark_back_and_says_why() {
    let plane = seed_cluster();
    webhook_down(&plane, "deletes-down", "DELETE", "pods");
    let kubeconfig = daemonset_kubeconfig(&plane);
    a_removal_refused_leaves_everything_and_says_why(&plane, &kubeconfig, "delete", "failed calling webhook");
}

/// Two victims, removed at once as kube-scheduler's executor removes its victims: the delete of
/// one fails in admission (a webhook down for Pods labelled `deny-delete`), the other goes
/// through. The removed one is on its way with its `Preempted` Event; the other keeps running, its
/// mark taken back; the resize stays Deferred and the Warning names the one that stayed.
#[test]
fn of_two_victims_removed_together_one_refused_stays_unmarked_and_the_other_goes() {
    let plane = seed_cluster();
    // A second low-priority Pod like the seed's, at 1 CPU and started later.
    let mut second = pod(&plane, "default", "low-priority-pod").unwrap();
    second["metadata"]["name"] = serde_json::json!("low-priority-pod-2");
    let one_cpu = serde_json::json!({"cpu": "1", "memory": "100Mi"});
    let resources = serde_json::json!({"requests": one_cpu, "limits": one_cpu});
    second["spec"]["containers"][0]["resources"] = resources.clone();
    second["status"]["startTime"] = serde_json::json!("2026-09-10T10:05:00Z");
    let running = &mut second["status"]["containerStatuses"][0];
    running["allocatedResources"] = one_cpu;
    running["resources"] = resources;
    load_cluster_file(&plane, &second.to_string()).unwrap();
    // The first victim in the scheduler's order (same priority, earlier start) is the one
    // refused: removed one after the other, the second would never have been tried.
    plane
        .kubectl_ok(&["label", "pod", "low-priority-pod", "deny-delete=yes"])
        .unwrap();
    webhook_down_for(
        &plane,
        "deletes-down-for-one",
        "DELETE",
        "pods",
        &serde_json::json!({"matchLabels": {"deny-delete": "yes"}}),
    );
    // 4950m in use; 7 CPUs need 3950m more: both low-priority Pods (3 + 1 CPU), neither reprieved.
    real_cluster::resize_and_defer(
        &plane,
        "high-priority-pod",
        "app",
        "7",
        "Node didn't have enough resource: cpu, requested: 7000, used: 4950, capacity: 8000",
    );
    let kubeconfig = daemonset_kubeconfig(&plane);
    let shim = Shim::start(&plane, &kubeconfig, NODE, &["--preemption", "delete"]);
    let refusal = wait_for(
        &shim,
        "the ResizePreemptionFailed Event",
        Duration::from_secs(60),
        || {
            events_of(&plane, "high-priority-pod")
                .into_iter()
                .find(|e| e["reason"] == "ResizePreemptionFailed")
        },
    );
    let message = refusal["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("default/low-priority-pod:") && message.contains("failed calling webhook"),
        "the Warning names the victim that stayed and why: {message}"
    );
    let other = pod(&plane, "default", "low-priority-pod-2").unwrap();
    assert!(
        other.pointer("/metadata/deletionTimestamp").is_some(),
        "the other victim was deleted: {other:#}"
    );
    assert_eq!(preempted_events(&plane, "low-priority-pod-2"), 1);
    let stayed = || {
        let refused = pod(&plane, "default", "low-priority-pod").unwrap();
        let unmarked = refused.pointer("/metadata/deletionTimestamp").is_none()
            && condition(&refused, "DisruptionTarget")
                .is_some_and(|mark| mark["status"] == "False" && mark.get("reason").is_none());
        unmarked.then_some(())
    };
    wait_for(
        &shim,
        "the refused victim's mark taken back",
        Duration::from_secs(10),
        stayed,
    );
    assert_eq!(preempted_events(&plane, "low-priority-pod"), 0);
    // The one removed is counted although the other was refused (retries take neither again).
    assert_eq!(
        real_cluster::sample(&shim.metrics(), "headroom_shim_victims_total{mode=\"delete\"}"),
        Some(1.0)
    );
    let high = pod(&plane, "default", "high-priority-pod").unwrap();
    assert_eq!(
        condition(&high, "PodResizePending").unwrap()["reason"],
        "Deferred"
    );
}

/// 500: the Eviction API failing in admission.
#[test]
fn an_eviction_failing_in_admission_with_500_leaves_the_victim_running_and_says_why() {
    let plane = seed_cluster();
    webhook_down(&plane, "evictions-down", "CREATE", "pods/eviction");
    let kubeconfig = daemonset_kubeconfig(&plane);
    an_eviction_refused_leaves_everything_and_says_why(&plane, &kubeconfig, "failed calling webhook");
}

/// The shim's client reaches the real API server over HTTP/2, with the ServiceAccount's token
/// and the control plane's CA (a typed read goes through), while kube's own client, given the
/// same kubeconfig, answers over HTTP/1.1: the version check tells the two apart.
#[test]
fn the_shims_client_speaks_http2_to_the_api_server_with_kubes_auth() {
    use k8s_openapi::api::core::v1::Pod;

    let plane = seed_cluster();
    let kubeconfig = daemonset_kubeconfig(&plane);
    with_kube_config(&kubeconfig, |config| async move {
        let version_of = |client: kube::Client| async move {
            let response = client.send(list_one_pod()).await.unwrap();
            assert_eq!(response.status(), http::StatusCode::OK);
            response.version()
        };

        let ours = headroom_shim::kube::client::http2_client(config.clone()).unwrap();
        assert_eq!(version_of(ours.clone()).await, http::Version::HTTP_2);
        let pods = kube::Api::<Pod>::namespaced(ours, "default")
            .list(&kube::api::ListParams::default().fields("metadata.name=low-priority-pod"))
            .await
            .unwrap();
        let names: Vec<_> = pods
            .items
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["low-priority-pod"]);

        let kubes_own = kube::Client::try_from(config).unwrap();
        assert_eq!(version_of(kubes_own).await, http::Version::HTTP_11);
    });
}

/// This process's established TCP connections to `port` (its socket inodes matched against the
/// kernel's table), so a test can see how many connections a client keeps.
fn connections_to(port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields
                .get(2)
                .and_then(|remote| remote.rsplit_once(':'))
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            remote_port == Some(port)
                && fields.get(3) == Some(&"01")
                && fields.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

/// The shim's watches and its calls go over two connections (`ApiClients::new`): an answer to a
/// call must not wait behind watch events the API server is writing on the same connection.
/// One client for both (`ApiClients::from`) keeps one.
#[test]
fn the_shims_watches_and_calls_have_a_connection_each() {
    use headroom_shim::kube::client::{ApiClients, http2_client};
    use k8s_openapi::api::core::v1::Pod;

    let plane = seed_cluster();
    let port: u16 = plane.server().rsplit_once(':').unwrap().1.parse().unwrap();
    let kubeconfig = daemonset_kubeconfig(&plane);
    with_kube_config(&kubeconfig, |config| async move {
        let open = |clients: ApiClients| async move {
            let pods = kube::Api::<Pod>::namespaced(clients.watches.clone(), "default");
            let mut watch = Box::pin(
                pods.watch(&kube::api::WatchParams::default().timeout(30), "0")
                    .await
                    .unwrap(),
            );
            // The watch is open (its first event is in) before the call goes out.
            futures::StreamExt::next(&mut watch).await.unwrap().unwrap();
            let response = clients.calls.send(list_one_pod()).await.unwrap();
            assert_eq!(response.status(), http::StatusCode::OK);
            (clients, watch)
        };
        let baseline = connections_to(port);
        let (separate, watch) = open(ApiClients::new(config.clone()).unwrap()).await;
        assert_eq!(connections_to(port), baseline + 2, "ApiClients::new");
        drop((separate, watch));
        let deadline = Instant::now() + Duration::from_secs(10);
        while connections_to(port) != baseline {
            assert!(
                Instant::now() < deadline,
                "the dropped clients' connections stay open"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (shared, watch) = open(ApiClients::from(http2_client(config).unwrap())).await;
        assert_eq!(connections_to(port), baseline + 1, "one client for both");
        drop((shared, watch));
    });
}

/// API Priority and Fairness: the DaemonSet's service account, with deploy/'s FlowSchema, is
/// served at kube-scheduler's priority level (`workload-high`), as the API server itself says in
/// the response headers of the shim's own client; another service account of the same namespace
/// stays in the default `service-accounts` schema (`workload-low`).
#[test]
fn the_shims_calls_get_the_schedulers_priority_level() {
    let plane = seed_cluster();
    let uid_of = |kind: &str, name: &str| {
        plane
            .kubectl_ok(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"])
            .unwrap()
            .trim()
            .to_string()
    };
    let (high, low) = (
        uid_of("prioritylevelconfiguration", "workload-high"),
        uid_of("prioritylevelconfiguration", "workload-low"),
    );
    let (ours, default_schema) = (
        uid_of("flowschema", "headroom"),
        uid_of("flowschema", "service-accounts"),
    );
    plane
        .kubectl_ok(&[
            "create",
            "serviceaccount",
            "someone-else",
            "-n",
            "headroom-system",
        ])
        .unwrap();
    let classified = |account: &str| {
        let kubeconfig = plane
            .service_account_kubeconfig("headroom-system", account)
            .unwrap();
        with_kube_config(&kubeconfig, |config| async move {
            let client = headroom_shim::kube::client::http2_client(config).unwrap();
            // Classification happens before authorisation: a refused call is classified too.
            let response = client.send(list_one_pod()).await.unwrap();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string()
            };
            (
                header("X-Kubernetes-PF-FlowSchema-UID"),
                header("X-Kubernetes-PF-PriorityLevel-UID"),
            )
        })
    };
    assert_eq!(classified("headroom"), (ours, high));
    assert_eq!(classified("someone-else"), (default_schema, low));
}
