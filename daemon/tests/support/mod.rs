//! Helpers for the privileged tests: a throwaway cgroup per test, cleaned up on drop (also
//! when the test fails), and the loud-skip rule.
#![allow(dead_code, clippy::unwrap_used)]

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

/// Serialises the kernel tests of one binary: they measure timing and share the machine.
pub static KERNEL: Mutex<()> = Mutex::new(());

/// Returns `Some(reason)` when privileged tests cannot run here. Panics instead when
/// `HEADROOM_REQUIRE_PRIVILEGED` is set (CI on these machines): they must run there.
pub fn skip_reason(test: &str) -> Option<String> {
    let reason = if !nix::unistd::geteuid().is_root() {
        Some("needs root to load eBPF and create cgroups".to_string())
    } else if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("kernel has no BTF (/sys/kernel/btf/vmlinux)".to_string())
    } else {
        None
    };
    if let Some(reason) = &reason {
        assert!(
            std::env::var_os("HEADROOM_REQUIRE_PRIVILEGED").is_none(),
            "{test}: privileged test cannot run ({reason}) but HEADROOM_REQUIRE_PRIVILEGED is set"
        );
        eprintln!("SKIPPED {test}: {reason}");
    }
    reason
}

/// A cgroup this test created, removed on drop after its processes are killed.
pub struct TestCgroup {
    pub path: PathBuf,
}

impl TestCgroup {
    /// Creates `<hierarchy mount>/headroom-test-<pid>-<name>`.
    pub fn create(mount: &Path, name: &str) -> Self {
        let path = mount.join(format!("headroom-test-{}-{name}", std::process::id()));
        if path.exists() {
            drop(Self { path: path.clone() });
        }
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        Self { path }
    }

    pub fn write(&self, file: &str, value: &str) {
        std::fs::write(self.path.join(file), value)
            .unwrap_or_else(|e| panic!("write {value} to {}/{file}: {e}", self.path.display()));
    }

    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.path.join(file))
            .unwrap_or_else(|e| panic!("read {}/{file}: {e}", self.path.display()))
    }

    /// A flat-keyed file (`cpu.stat`) as (key, value) pairs.
    pub fn stat(&self, file: &str, key: &str) -> u64 {
        self.read(file)
            .lines()
            .find_map(|line| line.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{key} in {}/{file}", self.path.display()))
    }

    /// The cgroup's kernfs id, as the probes report it.
    pub fn id(&self) -> u64 {
        std::fs::metadata(&self.path).unwrap().ino()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let procs = std::fs::read_to_string(self.path.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs.lines().filter_map(|l| l.trim().parse().ok()).collect();
            for pid in &pids {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
            }
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts `command` (a shell command line) inside every cgroup of `cgroups`: the shell
/// moves itself in, then execs the command, so no instruction runs outside them.
pub fn spawn_in(cgroups: &[&TestCgroup], command: &str) -> Child {
    let mut script = String::new();
    for cgroup in cgroups {
        script.push_str(&format!(
            "echo $$ > '{}/cgroup.procs' || exit 99; ",
            cgroup.path.display()
        ));
    }
    script.push_str("exec ");
    script.push_str(command);
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh")
}

/// Kills and reaps a child.
pub fn stop(mut child: Child) -> std::process::ExitStatus {
    let _ = child.kill();
    child.wait().expect("wait")
}
