//! Faults on the standalone node, on real cgroups and processes (issue #17, docs/reliability.md):
//! a resize issued the moment a Pod is applied is actuated (headroomd's snapshot lags the store),
//! and a resize whose cgroup writes fail is not left allocated: the node counts what the cgroups
//! hold, and asking again actuates again instead of answering Completed.
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_actuator::layout::DEFAULT_MOUNT;
use headroom_node_model::Resources;
use headroom_shim::standalone::run::{RunConfig, Running, start};
use headroomd::node::ProbeMode;

fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {cpu: \"1\", memory: 100Mi}\n      limits: {cpu: \"1\", memory: 100Mi}\n";

async fn node() -> (Running, String, tempfile::TempDir) {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let root = format!(
        "headroom-test-faults-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = tempfile::tempdir().unwrap();
    let setup = headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).unwrap();
    let running = start(RunConfig {
        node_name: "test-node".into(),
        allocatable: Resources::new(8_000, 16 << 30),
        roots: Roots::standalone(Path::new(DEFAULT_MOUNT), setup, &root),
        grace_period_override: Some(Duration::ZERO),
        headroomd_socket: dir.path().join("headroomd.sock"),
        shim_socket: None,
        reservation_ttl: Duration::from_secs(30),
        probes: ProbeMode::Off,
        give_way: Default::default(),
    })
    .await
    .unwrap();
    (running, root, dir)
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
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !dir.path().join("shim.sock").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the standalone node did not start"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the standalone node exited at start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No new task from here on, and past tokio's 10 s keep-alive of idle blocking threads.
    jail.write("pids.max", jail.read("pids.current").trim());
    std::thread::sleep(Duration::from_secs(11));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "SIGTERM did not stop the node"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
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
