//! Faults on the standalone node, on real cgroups and processes (issue #17, docs/reliability.md):
//! a resize issued the moment a Pod is applied is actuated (headroomd's snapshot lags the store),
//! and a resize whose cgroup writes fail is not left allocated: the node counts what the cgroups
//! hold, and asking again actuates again instead of answering Completed.
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_actuator::layout::DEFAULT_MOUNT;
use headroom_shim::standalone::run::{Running, start};

fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {cpu: \"1\", memory: 100Mi}\n      limits: {cpu: \"1\", memory: 100Mi}\n";

async fn node() -> (Running, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (config, root) = common::scratch_node("headroom-test-faults", dir.path());
    (start(config).await.unwrap(), root, dir)
}

/// The container's `allocatedResources.cpu`, as the store holds it.
fn allocated_cpu(running: &Running) -> String {
    let store = running.node.store();
    let pod = &store.pods["default/web"].pod;
    let status = &pod.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    status.allocated_resources.as_ref().unwrap()["cpu"].0.clone()
}

/// Every cgroup directory under `dir`, deepest first.
fn cgroup_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().unwrap().is_dir() {
            cgroup_dirs(&entry.path(), out);
            out.push(entry.path());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_right_after_apply_manifest_is_actuated() {
    if !privileged("a_resize_right_after_apply_manifest_is_actuated") {
        return;
    }
    let (running, _root, _dir) = node().await;
    running.node.apply_manifest(POD).unwrap();
    // No wait: headroomd's snapshot does not list the Pod yet.
    let result = running.node.resize("web", None, Some("2"), None).await.unwrap();
    assert_eq!(result.status, "Completed", "{}", result.message);
    assert_eq!(allocated_cpu(&running), "2");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_actuation_is_rolled_back_and_asking_again_actuates_again() {
    if !privileged("a_failed_actuation_is_rolled_back_and_asking_again_actuates_again") {
        return;
    }
    let (running, root, _dir) = node().await;
    running.node.apply_manifest(POD).unwrap();
    // The Pod's cgroups go away under the node (as an operator or a cleaner might): its
    // processes are killed, the directories removed, so the cgroup writes must fail.
    let pids = {
        let store = running.node.store();
        store.pods["default/web"].runtime.as_ref().unwrap().pids()
    };
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(DEFAULT_MOUNT).unwrap().flatten() {
        cgroup_dirs(&entry.path().join(&root), &mut dirs);
    }
    if Path::new(DEFAULT_MOUNT).join(&root).is_dir() {
        cgroup_dirs(&Path::new(DEFAULT_MOUNT).join(&root), &mut dirs);
    }
    assert!(!dirs.is_empty(), "no cgroups of the Pod under {root}");
    for d in &dirs {
        std::fs::remove_dir(d).unwrap_or_else(|e| panic!("rmdir {}: {e}", d.display()));
    }

    let first = running.node.resize("web", None, Some("2"), None).await.unwrap();
    assert_eq!(first.status, "Error", "the cgroups are gone: {first:?}");
    assert_eq!(
        allocated_cpu(&running),
        "1",
        "the allocation ran ahead of the cgroups"
    );
    let again = running.node.resize("web", None, Some("2"), None).await.unwrap();
    assert_ne!(
        again.status, "Completed",
        "Completed for cgroups that were never written: {again:?}"
    );
    assert_eq!(allocated_cpu(&running), "1");
    running.stop().await.unwrap();
}

/// The cgroup hierarchy with the pids controller (v1: its own mount; v2: the unified one).
fn pids_mount() -> PathBuf {
    let v1 = Path::new(DEFAULT_MOUNT).join("pids");
    if v1.join("cgroup.procs").exists() {
        v1
    } else {
        PathBuf::from(DEFAULT_MOUNT)
    }
}

/// Defect 7's shutdown panic: with every task the node may have in use (its cgroup's
/// `pids.max` reached), SIGTERM still stops it cleanly. The clean-up ran on tokio's blocking
/// pool, which panics (exit 101) when it cannot spawn a thread, and left the Pods running.
#[test]
fn sigterm_with_no_thread_to_spare_still_cleans_up() {
    if !privileged("sigterm at pids.max") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    let root = format!("headroom-test-faults-pids-{}", std::process::id());
    let jail = headroom_testkit::scratch::TestCgroup::create(&pids_mount(), "pids-jail");
    let command = format!(
        "{} standalone --manifest {} --socket {} --headroomd-socket {} --cgroup-root {root} --probes off --grace-period 0",
        env!("CARGO_BIN_EXE_headroom-shim"),
        manifest.display(),
        dir.path().join("shim.sock").display(),
        dir.path().join("headroomd.sock").display(),
    );
    let mut child = headroom_testkit::scratch::spawn_in(&[&jail], &command);
    // The Pod's cgroup appears once the manifest is applied.
    let layout = headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).unwrap();
    let pod_root = Roots::standalone(Path::new(DEFAULT_MOUNT), layout, &root);
    wait_started(&mut child, &dir.path().join("shim.sock"));
    // The socket serves before the manifest is applied: freeze only once its container runs.
    let roots: Vec<PathBuf> = pod_root
        .dirs()
        .paths()
        .into_iter()
        .map(|p| p.to_path_buf())
        .collect();
    wait_for_a_process_under(&mut child, &roots);
    // No new task from here on, and past tokio's 10 s keep-alive of idle blocking threads.
    jail.write("pids.max", jail.read("pids.current").trim());
    std::thread::sleep(Duration::from_secs(11));
    signal(&child, nix::sys::signal::SIGTERM);
    let status = wait_exit(
        &mut child,
        Duration::from_secs(30),
        "SIGTERM did not stop the node",
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let left: Vec<PathBuf> = pod_root
        .dirs()
        .paths()
        .into_iter()
        .map(|p| p.to_path_buf())
        .filter(|p| p.exists())
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

/// Whether `pid` runs (a zombie does not: it only waits for its parent, init, to reap it).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command name.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

/// Starts the real `headroom-shim standalone` on `root` with `manifest` and waits for its socket.
fn standalone_binary(dir: &Path, root: &str, manifest: &Path) -> std::process::Child {
    let shim_socket = dir.join("shim.sock");
    let _ = std::fs::remove_file(&shim_socket);
    let stderr =
        std::fs::File::create(dir.join(format!("node-{}.log", SEQ.fetch_add(1, Ordering::Relaxed)))).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
        .args([
            "standalone",
            "--probes",
            "off",
            "--grace-period",
            "0",
            "--cgroup-root",
            root,
        ])
        .arg("--manifest")
        .arg(manifest)
        .arg("--socket")
        .arg(&shim_socket)
        .arg("--headroomd-socket")
        .arg(dir.join("headroomd.sock"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_started(&mut child, &shim_socket);
    child
}

/// Waits until the node serves its control socket.
fn wait_started(child: &mut std::process::Child, socket: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the standalone node did not start"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the standalone node exited at start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until some cgroup under `roots` holds a process.
fn wait_for_a_process_under(child: &mut std::process::Child, roots: &[PathBuf]) {
    fn any_process(dir: &Path) -> bool {
        std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty())
            || std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_type().is_ok_and(|t| t.is_dir()) && any_process(&e.path()))
            })
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !roots.iter().any(|root| any_process(root)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the manifest's container never started under {roots:?}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the standalone node exited while applying its manifest"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        signal,
    )
    .unwrap();
}

/// Waits (bounded) for `child` to exit; `what` is the failure.
fn wait_exit(child: &mut std::process::Child, within: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

static SEQ: AtomicU32 = AtomicU32::new(100);

/// Every log the nodes of this test wrote, in order.
fn node_logs(dir: &Path) -> String {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
}

/// Defect 4: a node SIGKILLed in the middle of a preemption left every Pod's processes running,
/// unowned, with their cgroups and intent records; its successor started empty, and applying
/// the manifest again started a second copy of every Pod. Now the containers die with the node
/// (PR_SET_PDEATHSIG), and the next node reaps what is left (a process added from outside, the
/// cgroups, the records) before it applies anything, so one copy of each Pod runs.
#[test]
fn a_sigkilled_node_takes_its_containers_along_and_its_successor_reaps_the_rest() {
    if !privileged("sigkill mid-preemption") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("demo.yaml");
    std::fs::write(&manifest, headroom_shim::standalone::DEMO_MANIFEST).unwrap();
    let root = format!("headroom-test-faults-kill-{}", std::process::id());
    let setup = headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).unwrap();
    let roots = Roots::standalone(Path::new(DEFAULT_MOUNT), setup, &root);
    let pods = || headroom_actuator::PodCgroups::found_under(&roots).unwrap();
    let pids = || -> Vec<u32> { pods().iter().flat_map(|p| p.pids().unwrap()).collect() };

    let mut first = standalone_binary(dir.path(), &root, &manifest);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pids().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo's two Pods did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let containers = pids();
    assert_eq!(containers.len(), 2, "one process per container: {containers:?}");
    // A process added from outside, as `kubectl exec` adds one: not the node's child.
    let mut foreign = std::process::Command::new("sleep").arg("1000").spawn().unwrap();
    // Into the resizing Pod, which no outcome of the preemption evicts.
    let high = pods().into_iter().find(|p| p.containers() == ["app"]).unwrap();
    high.add_process("app", foreign.id()).unwrap();
    // The resize that preempts the low-priority Pod; the node dies as soon as it is Deferred.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = rt.block_on(async {
        let channel = headroom_client::connect_uds(&dir.path().join("shim.sock"))
            .await
            .unwrap();
        headroom_proto::v1::standalone_client::StandaloneClient::new(channel)
            .resize(headroom_proto::v1::ResizePodRequest {
                pod: "high-priority-pod".into(),
                cpu: "6".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    });
    signal(&first, nix::sys::signal::SIGKILL);
    first.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while containers.iter().any(|&pid| running(pid)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the dead node's containers still run: {containers:?} (resize answered {answer:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        foreign.try_wait().unwrap().is_none(),
        "the foreign process outlives the node"
    );
    assert!(!pods().is_empty(), "the dead node left its cgroups");

    let mut second = standalone_binary(dir.path(), &root, &manifest);
    let reaped = wait_exit(
        &mut foreign,
        Duration::from_secs(10),
        "the foreign process was not reaped",
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&reaped),
        Some(9),
        "killed by the successor"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pids().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the successor did not start the Pods"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let now = pids();
    assert_eq!(now.len(), 2, "one copy of each Pod: {now:?}");
    assert!(now.iter().all(|pid| !containers.contains(pid)));
    assert_eq!(pods().len(), 2, "two Pod cgroups, the old ones gone");
    let logs = node_logs(dir.path());
    assert!(
        logs.contains("reaped a Pod an earlier run of this node left"),
        "{logs}"
    );
    signal(&second, nix::sys::signal::SIGTERM);
    let status = second.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", node_logs(dir.path()));
    assert!(pods().is_empty(), "a clean stop leaves no Pod cgroup");
    let intents = headroom_shim::standalone::run::intent_dir_for(&roots);
    assert!(
        !intents.exists(),
        "a clean stop leaves no intent directory: {}",
        intents.display()
    );
}
