//! Standalone Pods run their containers' own `command` and `args` as host processes (no images),
//! inside their container's cgroup from the first instruction, so that someone trying headroom
//! on one machine sees real workloads' pressure: here a busy loop under a 100m limit is
//! throttled by the kernel, and a process it forks at once is charged to the same cgroup.
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use headroom_shim::standalone::run::start;

fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

fn manifest(out: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: busy}}
spec:
  containers:
  - name: loop
    image: busybox
    command: ["sh", "-c"]
    args: ["echo $(GREETING) > $(OUT); while :; do :; done & echo $! >> $(OUT); wait"]
    env:
    - {{name: GREETING, value: hello}}
    - {{name: OUT, value: "{}"}}
    resources:
      requests: {{cpu: 100m, memory: 64Mi}}
      limits: {{cpu: 100m, memory: 64Mi}}
"#,
        out.display()
    )
}

/// The cgroup path of `pid` in the hierarchy with controller `cpu` (v1) or the unified one.
fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// Running or runnable, not exited (a zombie has exited).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

fn nr_throttled(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("cpu.stat"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("nr_throttled ").map(|v| v.trim().parse().unwrap()))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_runs_its_own_command_in_its_cgroup_and_is_throttled() {
    if !privileged("a_container_runs_its_own_command_in_its_cgroup_and_is_throttled") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (config, _root) = common::scratch_node("headroom-test-workloads", dir.path());
    let running = start(config).await.unwrap();
    let out = dir.path().join("out.txt");
    running.node.apply_manifest(&manifest(&out)).unwrap();

    // The shell wrote the expanded greeting, then the pid of the loop it forked.
    let deadline = Instant::now() + Duration::from_secs(10);
    let child: u32 = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() >= 2 {
            assert_eq!(lines[0], "hello", "$(GREETING) expanded from env");
            break lines[1].trim().parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the container never wrote {}: {text:?}",
            out.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (shell, cpu_dir): (u32, PathBuf) = {
        let store = running.node.store();
        let runtime = store.pods["default/busy"].runtime.as_ref().unwrap();
        let dirs = runtime.cgroups().container_dirs("loop").unwrap();
        (runtime.pids()[0], dirs.paths()[0].to_path_buf())
    };
    let leaf = cpu_dir.file_name().unwrap().to_string_lossy().into_owned();
    let uid_dir = cpu_dir
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for (what, pid) in [("the shell", shell), ("the loop it forked", child)] {
        let cgroups = cgroup_of(pid);
        assert!(
            cgroups
                .lines()
                .any(|l| l.contains(&uid_dir) && l.ends_with(&format!("/{leaf}"))),
            "{what} (pid {pid}) is not in the container's cgroup {}:\n{cgroups}",
            cpu_dir.display()
        );
    }
    // A busy loop under 100m is throttled by the kernel within a few periods.
    let deadline = Instant::now() + Duration::from_secs(10);
    while nr_throttled(&cpu_dir) == 0 {
        assert!(Instant::now() < deadline, "{} never throttled", cpu_dir.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop().await.unwrap();
    assert!(!cpu_dir.exists(), "the container's cgroup is removed at stop");
    // Killed with its Pod; its parent is gone, so it may linger as a zombie until init reaps it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) {
        assert!(
            Instant::now() < deadline,
            "the forked loop (pid {child}) outlived its Pod"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_start_is_one_clear_error_and_leaves_nothing() {
    if !privileged("a_command_that_cannot_start_is_one_clear_error_and_leaves_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (config, root) = common::scratch_node("headroom-test-workloads", dir.path());
    let roots = config.roots.clone();
    let running = start(config).await.unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec:\n  containers:\n  - name: ok\n    image: busybox\n  - name: missing\n    image: busybox\n    command: [/nonexistent/program, --flag]\n";
    let error = running.node.apply_manifest(pod).unwrap_err().to_string();
    assert!(
        error.contains("container missing") && error.contains("/nonexistent/program --flag"),
        "{error}"
    );
    assert!(!running.node.store().pods.contains_key("default/broken"));
    let left: Vec<PathBuf> = roots
        .dirs()
        .paths()
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert!(left.is_empty(), "cgroups left under {root}: {left:?}");
    running.stop().await.unwrap();
}
