//! Cgroups a test creates, removed on drop (also when the test fails) after their processes
//! are killed, and processes started inside them.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

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

    /// Whether this cgroup lives on a cgroup v2 hierarchy (only v2 cgroups have
    /// `cgroup.controllers`).
    pub fn is_v2(&self) -> bool {
        self.path.join("cgroup.controllers").exists()
    }

    /// CFS bandwidth: `cpu.max` on v2, `cpu.cfs_period_us` and `cpu.cfs_quota_us` on v1.
    pub fn set_cpu_quota(&self, quota_us: u64, period_us: u64) {
        if self.is_v2() {
            self.write("cpu.max", &format!("{quota_us} {period_us}"));
        } else {
            self.write("cpu.cfs_period_us", &period_us.to_string());
            self.write("cpu.cfs_quota_us", &quota_us.to_string());
        }
    }

    /// `cpu.stat`'s `nr_throttled` and throttled time in ns (v1 `throttled_time` is ns, v2
    /// `throttled_usec` µs).
    pub fn cpu_throttled(&self) -> (u64, u64) {
        let periods = self.stat("cpu.stat", "nr_throttled ");
        let ns = if self.is_v2() {
            self.stat("cpu.stat", "throttled_usec ") * 1000
        } else {
            self.stat("cpu.stat", "throttled_time ")
        };
        (periods, ns)
    }

    /// The memory limit: `memory.max` on v2, `memory.limit_in_bytes` on v1.
    pub fn set_memory_limit(&self, bytes: u64) {
        let file = if self.is_v2() {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        self.write(file, &bytes.to_string());
    }

    /// OOM kills in this cgroup: `memory.events` on v2, `memory.oom_control` on v1.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.is_v2() {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        self.stat(file, "oom_kill ")
    }

    /// A `memory.stat` counter, if this kernel has it (v1 has no `pgscan`/`pgsteal`).
    pub fn memory_stat(&self, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.path.join("memory.stat")).ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The cgroup's kernfs id, as the probes report it.
    pub fn id(&self) -> u64 {
        std::fs::metadata(&self.path).expect("stat the test cgroup").ino()
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
