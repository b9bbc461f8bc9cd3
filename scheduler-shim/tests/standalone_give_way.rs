//! Shrink before evict on the standalone node: real cgroups, real processes, headroomd's live
//! figures from the cgroup files. The seed's scenario with `low-priority-pod` offering to give
//! way down to 1 CPU ends with it still running at 1 CPU and `high-priority-pod` at 6; a Pod whose
//! working set leaves no room above it is evicted instead; a Pod without the annotation is
//! evicted as upstream would.
//!
//! Each node has a cgroup root of its own (`--cgroup-root`), so these tests also show that the
//! configured root reaches headroomd's resolver: without that, no Pod has live figures and
//! nobody is ever shrunk. The scenarios run one after another (their timing depends on the CPU).
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use headroom_node_model::{Resources, pod_requests, pod_requests_admitted};
use headroom_shim::give_way::live_of;
use headroom_shim::standalone::DEMO_MANIFEST;
use headroom_shim::standalone::run::{Running, start};
use headroom_shim::standalone::shim::{LIVE_MAX_AGE, is_pending};
use headroom_shim::standalone::verify::cpu_limit_file;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MI: i64 = 1 << 20;

fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

/// Stops the node's Pods and removes their cgroups even when an assertion fails first.
struct Cleanup(std::sync::Arc<headroom_shim::standalone::StandaloneNode>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.0.cleanup();
    }
}

async fn node(allocatable: Resources, manifest: &str) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (mut config, _) = common::scratch_node("headroom-test-give-way", dir.path());
    config.allocatable = allocatable;
    let running = start(config).await.unwrap();
    running.node.apply_manifest(manifest).unwrap();
    (running, dir)
}

fn cleanup_on_panic(running: &Running) -> Cleanup {
    Cleanup(running.node.clone())
}

/// The demo's manifest with `low-priority-pod` annotated.
fn seed_manifest(annotation: Option<&str>) -> String {
    match annotation {
        None => DEMO_MANIFEST.to_string(),
        Some(value) => DEMO_MANIFEST.replacen(
            "  name: low-priority-pod\n",
            &format!("  name: low-priority-pod\n  annotations:\n    headroom.io/give-way: \"{value}\"\n"),
            1,
        ),
    }
}

/// Waits until headroomd has read every Pod's cgroup files again after this call (it walks the
/// tree every 500 ms without probes; a throttling ratio needs two readings), and holds fresh
/// figures of all three kinds for each, as the shim will ask for them. A fixed sleep was not
/// enough on a loaded CI machine: the shim then found no fresh figures and evicted instead.
async fn wait_for_live_figures(running: &Running) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let uids: Vec<(String, String)> = {
        let store = running.node.store();
        store
            .pods
            .iter()
            .map(|(key, p)| (key.clone(), p.pod.metadata.uid.clone().unwrap_or_default()))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snapshot = running.node.headroomd().get_headroom(true).await.unwrap();
        let missing: Vec<String> = uids
            .iter()
            .filter_map(|(key, uid)| {
                let live = live_of(&snapshot, uid, SystemTime::now(), LIVE_MAX_AGE);
                let complete = live.cpu_usage_millis.is_some()
                    && live.cpu_throttled_permille.is_some()
                    && live.memory_working_set_bytes.is_some();
                (!complete).then(|| format!("{key}: {live:?}"))
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no fresh live figures from headroomd 20 s on: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_resized(running: &Running, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while is_pending(&running.node, key) {
        assert!(
            Instant::now() < deadline,
            "{key}: resize still pending after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn reasons(running: &Running, name: &str) -> Vec<String> {
    running
        .node
        .store()
        .events
        .list(Some(name))
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

fn uid(running: &Running, key: &str) -> String {
    running.node.store().pods[key].pod.metadata.uid.clone().unwrap()
}

fn cpu_limit(running: &Running, key: &str, container: &str) -> String {
    let uid = uid(running, key);
    cpu_limit_file(&running.node.config.roots, &uid, container)
        .unwrap()
        .1
}

/// The cgroup files' CPU limit text for `cpu` cores at the 100 ms period.
fn quota_text(cores: u64) -> Vec<String> {
    let quota = cores * 100_000;
    vec![quota.to_string(), format!("{quota} 100000")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_low_priority_pod_gives_way_in_place_and_nobody_is_evicted() {
    if !privileged("seed give way") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let (running, _dir) = node(Resources::new(8000, 16 << 30), &seed_manifest(Some("cpu=1"))).await;
    let _cleanup = cleanup_on_panic(&running);
    let low = "default/low-priority-pod";
    let high = "default/high-priority-pod";
    let low_pids = running.node.store().pods[low].runtime.as_ref().unwrap().pids();
    wait_for_live_figures(&running).await;

    let result = running.node.resize(high, None, Some("6"), None).await.unwrap();
    assert_eq!(result.status, "Deferred", "{result:?}");
    wait_resized(&running, high).await;

    {
        let store = running.node.store();
        let Some(low_pod) = store.pods.get(low) else {
            panic!(
                "low-priority-pod was evicted instead of giving way: {:?}",
                store.events.list(Some("low-priority-pod"))
            );
        };
        assert!(
            low_pod.runtime.is_some() && !low_pod.terminating,
            "low-priority-pod is not running"
        );
        assert_eq!(pod_requests(&low_pod.pod).unwrap().cpu_millis, 1000);
        assert_eq!(pod_requests_admitted(&low_pod.pod).unwrap().cpu_millis, 1000);
        assert_eq!(
            pod_requests_admitted(&store.pods[high].pod).unwrap().cpu_millis,
            6000
        );
    }
    for pid in &low_pids {
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "low-priority-pod's process {pid} is gone"
        );
    }
    assert!(
        quota_text(1).contains(&cpu_limit(&running, low, "worker")),
        "{}",
        cpu_limit(&running, low, "worker")
    );
    assert!(
        quota_text(6).contains(&cpu_limit(&running, high, "app")),
        "{}",
        cpu_limit(&running, high, "app")
    );

    let low_events = reasons(&running, "low-priority-pod");
    assert!(low_events.contains(&"GaveWay".to_string()), "{low_events:?}");
    assert!(
        low_events.contains(&"ResizeCompleted".to_string()),
        "{low_events:?}"
    );
    assert!(
        !low_events.iter().any(|r| r == "Preempted" || r == "Killing"),
        "{low_events:?}"
    );
    let message = running
        .node
        .store()
        .events
        .list(Some("low-priority-pod"))
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("GaveWay"))
        .and_then(|e| e.message)
        .unwrap();
    assert!(
        message.contains("from cpu=3 memory=500Mi to cpu=1 memory=500Mi")
            && message.contains("default/high-priority-pod"),
        "{message}"
    );
    assert!(reasons(&running, "high-priority-pod").contains(&"ResizeCompleted".to_string()));
    // The resize's actuation consumed its reservation, though nobody was evicted (it was kept
    // until its TTL, refusing the next resize's room).
    let snapshot = running.node.headroomd().get_headroom(false).await.unwrap();
    assert!(
        snapshot.reservations.is_empty(),
        "reservations left after the resize: {:?}",
        snapshot.reservations
    );

    // Six busy loops in the shrunk Pod: at 1 CPU on this 2-CPU machine it is throttled in most
    // periods even while other work competes for the CPUs, so the watch after the shrink
    // reports it.
    let mut spinners: Vec<std::process::Child> = (0..6)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    {
        let store = running.node.store();
        let runtime = store.pods[low].runtime.as_ref().unwrap();
        for s in &spinners {
            runtime.cgroups().add_process("worker", s.id()).unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let pressure = loop {
        let found = running
            .node
            .store()
            .events
            .list(Some("low-priority-pod"))
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("GiveWayPressure"));
        if let Some(e) = found {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no GiveWayPressure Event 15 s after the shrunk Pod got busy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(pressure.type_.as_deref(), Some("Warning"));
    let why = pressure.message.unwrap_or_default();
    assert!(
        why.contains("throttled in") && why.contains("default/high-priority-pod"),
        "{why}"
    );
    for s in &mut spinners {
        let _ = s.kill();
        let _ = s.wait();
    }
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_without_the_annotation_is_evicted_as_upstream_does() {
    if !privileged("no annotation") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let (running, _dir) = node(Resources::new(8000, 16 << 30), &seed_manifest(None)).await;
    let _cleanup = cleanup_on_panic(&running);
    wait_for_live_figures(&running).await;
    let result = running
        .node
        .resize("default/high-priority-pod", None, Some("6"), None)
        .await
        .unwrap();
    assert_eq!(result.status, "Deferred");
    wait_resized(&running, "default/high-priority-pod").await;
    assert!(!running.node.store().pods.contains_key("default/low-priority-pod"));
    let low_events = reasons(&running, "low-priority-pod");
    assert!(low_events.contains(&"Preempted".to_string()), "{low_events:?}");
    assert!(!low_events.contains(&"GaveWay".to_string()), "{low_events:?}");
    running.stop().await.unwrap();
}

const MEMORY_MANIFEST: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: cache
  annotations: {headroom.io/give-way: "memory=64Mi"}
spec:
  priorityClassName: low
  containers:
  - name: c
    image: busybox
    resources:
      requests: {cpu: 100m, memory: 512Mi}
      limits: {cpu: 100m, memory: 512Mi}
---
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  priorityClassName: high
  containers:
  - name: c
    image: busybox
    resources:
      requests: {cpu: 100m, memory: 1Gi}
      limits: {cpu: 100m, memory: 1Gi}
"#;

/// A process that allocates and touches `mib` MiB once it is in `cache`'s container cgroup (as
/// `kubectl exec` would add one: the standalone runtime's containers only sleep). A thread
/// reaps it the moment it exits, as a container runtime's shim reaps what it started.
fn working_set(running: &Running, mib: usize) -> std::thread::JoinHandle<std::process::ExitStatus> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import sys, time\nsys.stdin.readline()\nb = b'x' * (int(sys.argv[1]) << 20)\nprint('ready', flush=True)\ntime.sleep(120)",
            &mib.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    {
        let store = running.node.store();
        let runtime = store.pods["default/cache"].runtime.as_ref().unwrap();
        runtime.cgroups().add_process("c", child.id()).unwrap();
    }
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    std::thread::spawn(move || {
        let _stdin = stdin;
        child.wait().unwrap()
    })
}

/// `app` grows by 512Mi on a 1.75Gi node: 256Mi short. `cache` (512Mi) offers down to 64Mi.
type Hog = std::thread::JoinHandle<std::process::ExitStatus>;

struct MemoryScenario {
    running: Running,
    _dir: tempfile::TempDir,
    hog: Hog,
    cache_uid: String,
    _cleanup: Cleanup,
}

async fn memory_scenario(hog_mib: usize) -> MemoryScenario {
    let (running, dir) = node(Resources::new(8000, 1792 * MI), MEMORY_MANIFEST).await;
    let cleanup = cleanup_on_panic(&running);
    let cache_uid = uid(&running, "default/cache");
    let hog = working_set(&running, hog_mib);
    wait_for_live_figures(&running).await;
    let result = running
        .node
        .resize("default/app", None, None, Some("1536Mi"))
        .await
        .unwrap();
    assert_eq!(result.status, "Deferred", "{result:?}");
    wait_resized(&running, "default/app").await;
    MemoryScenario {
        running,
        _dir: dir,
        hog,
        cache_uid,
        _cleanup: cleanup,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_gives_way_down_to_the_working_set_plus_margin() {
    if !privileged("memory give way") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let MemoryScenario {
        running,
        hog,
        _dir,
        _cleanup,
        ..
    } = memory_scenario(40).await;
    {
        let store = running.node.store();
        let cache = &store.pods["default/cache"];
        assert!(cache.runtime.is_some(), "cache was evicted");
        let memory = pod_requests_admitted(&cache.pod).unwrap().memory_bytes;
        // 40Mi touched (+ the interpreter) + 32Mi margin, rounded up to MiB: well under 512Mi.
        assert!(
            (72 * MI..256 * MI).contains(&memory),
            "cache at {} MiB",
            memory / MI
        );
    }
    assert!(!hog.is_finished(), "the working set's process was killed");
    let events = reasons(&running, "cache");
    assert!(events.contains(&"GaveWay".to_string()), "{events:?}");
    running.stop().await.unwrap();
    // Stopping the node stops the process added from outside too.
    assert!(!hog.join().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_set_near_the_requests_means_eviction_instead() {
    if !privileged("memory eviction") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let MemoryScenario {
        running,
        hog,
        cache_uid,
        _dir,
        _cleanup,
    } = memory_scenario(400).await;
    assert!(
        !running.node.store().pods.contains_key("default/cache"),
        "cache was kept although its 400Mi working set leaves no 256Mi to give"
    );
    let events = reasons(&running, "cache");
    assert!(events.contains(&"Preempted".to_string()), "{events:?}");
    assert!(!events.contains(&"GaveWay".to_string()), "{events:?}");
    // Eviction stops every process in the victim's cgroups, the one added from outside too, and
    // removes the cgroups.
    let status = hog.join().unwrap();
    assert!(
        !status.success(),
        "the process added from outside was not stopped: {status:?}"
    );
    for dir in running.node.config.roots.pod_dirs(&cache_uid).unwrap().paths() {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    running.stop().await.unwrap();
}
