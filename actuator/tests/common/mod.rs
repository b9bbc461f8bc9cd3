//! Shared helpers for the actuator's tests: the privileged gate, processes in cgroups, and the
//! resize request every container of a Pod gets alike.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};

use headroom_actuator::{CgroupSetup, KubeResources, ResizeRequest, detect_setup};

pub const MOUNT: &str = "/sys/fs/cgroup";

/// Whether the privileged tests can run here. If not, prints `SKIPPED (<reason>)` and returns
/// false — unless `HEADROOM_REQUIRE_PRIVILEGED=1` (CI), which turns the skip into a failure.
pub fn privileged(test: &str) -> bool {
    let reason = headroom_testkit::gate::not_root().or_else(|| match detect_setup(Path::new(MOUNT)) {
        Err(e) => Some(format!("no cgroup mount: {e}")),
        Ok(CgroupSetup::Unified) => {
            Some("cgroup v2 only host; these tests need the v1 cpu and memory hierarchies".into())
        }
        Ok(_) => ["cpu/cpu.cfs_quota_us", "memory/memory.limit_in_bytes"]
            .iter()
            .find(|f| !Path::new(MOUNT).join(f).exists())
            .map(|f| format!("{MOUNT}/{f} missing")),
    });
    headroom_testkit::gate::privileged(test, reason)
}

/// A child process killed (and reaped) on drop, even when the test fails.
pub struct Proc(pub Child);

impl Proc {
    pub fn sh(script: &str) -> Self {
        Self(
            Command::new("/bin/sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn sh"),
        )
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn read_file(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_owned()
}

/// A resize of Pod `uid` giving each of `containers` the same cpu request and limit (millicores)
/// and memory limit (bytes).
pub fn uniform_request(
    uid: &str,
    containers: &[&str],
    cpu_request_milli: u64,
    cpu_limit_milli: u64,
    memory_limit_bytes: u64,
) -> ResizeRequest {
    ResizeRequest {
        pod_uid: uid.into(),
        containers: containers
            .iter()
            .map(|c| {
                (
                    (*c).to_owned(),
                    KubeResources {
                        cpu_request_milli,
                        cpu_limit_milli: Some(cpu_limit_milli),
                        memory_limit_bytes: Some(memory_limit_bytes),
                    },
                )
            })
            .collect(),
        pod: None,
    }
}

/// Runs this test binary's test `child_test` with `envs` (a crash child that writes `marker`
/// once it has paused between two writes), and SIGKILLs it there: the crash the intent records
/// must survive.
pub fn sigkill_when_paused(child_test: &str, envs: &[(&str, &std::ffi::OsStr)], marker: &Path) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::null());
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = Proc(command.spawn().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{child_test} never paused between writes"
        );
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("{child_test} exited early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}
