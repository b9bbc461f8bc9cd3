//! The real `headroomd` binary as the benchmarks run it beside its peer (`events`, `idle`): where
//! it is, how it is started observing only, how to wait until it serves, and how much CPU time a
//! process has used.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use headroom_client::headroom_client;
use headroom_proto::v1::GetHeadroomRequest;
/// A headroomd child, stopped (SIGTERM) on drop.
pub use headroom_testkit::process::TerminatedOnDrop as Daemon;

/// `headroomd` beside the running benchmark binary (`target/release/`).
pub fn headroomd_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .context("own path")?
        .with_file_name("headroomd");
    if !exe.exists() {
        bail!(
            "{} is missing: build the workspace's binaries first",
            exe.display()
        );
    }
    Ok(exe)
}

/// Starts `headroomd serve --kernel-events MODE` with the probes, serving on `DIR/MODE.sock`,
/// logging to `DIR/MODE.log`. Both daemons of a benchmark observe the same cgroups side by side,
/// so neither actuates: an actuating daemon holds the node's cgroup roots for itself, and a
/// second one would be refused.
pub fn start_headroomd(exe: &Path, dir: &Path, mode: &str) -> Result<Daemon> {
    let log = std::fs::File::create(dir.join(format!("{mode}.log")))?;
    let child = Command::new(exe)
        .args([
            "serve",
            "--probes",
            "required",
            "--metrics-listen",
            "",
            "--actuation",
            "off",
        ])
        .args(["--kernel-events", mode])
        .arg("--socket")
        .arg(dir.join(format!("{mode}.sock")))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", exe.display()))?;
    Ok(Daemon(child))
}

/// Waits until the daemon answers; if it exits or stays silent, fails with its log's tail.
pub async fn wait_for_socket(daemon: &mut Daemon, dir: &Path, mode: &str) -> Result<()> {
    let path = dir.join(format!("{mode}.sock"));
    let tail = || {
        let log = std::fs::read_to_string(dir.join(format!("{mode}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(status) = daemon.0.try_wait()? {
            bail!(
                "headroomd --kernel-events {mode} exited ({status}) before serving:\n{}",
                tail()
            );
        }
        if let Ok(mut client) = headroom_client(&path).await
            && client.get_headroom(GetHeadroomRequest::default()).await.is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "headroomd did not serve on {} within 20 s:\n{}",
        path.display(),
        tail()
    )
}

/// CPU time a process has used, from two sources read together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// `utime + stime` of `/proc/PID/stat`, in clock ticks: every thread, exited ones included,
    /// but sampled at the tick (10 ms at USER_HZ 100), so only long spans are exact.
    pub ticks: u64,
    /// The sum of `/proc/PID/task/*/schedstat`'s first field (time on a CPU), in nanoseconds:
    /// exact, but only of the threads alive now.
    pub schedstat_ns: u64,
}

impl CpuTime {
    /// Reads both for `pid`; `None` once it is gone.
    pub fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command may hold spaces and parentheses: fields count from the last `)`.
        let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
        // After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let ticks = field(14)?.checked_add(field(15)?)?;
        let mut schedstat_ns = 0u64;
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            // A thread that exits between the listing and the read is skipped.
            if let Ok(line) = std::fs::read_to_string(task.path().join("schedstat"))
                && let Some(ns) = line.split_whitespace().next().and_then(|v| v.parse::<u64>().ok())
            {
                schedstat_ns = schedstat_ns.saturating_add(ns);
            }
        }
        Some(Self { ticks, schedstat_ns })
    }
}

/// Clock ticks per second of [`CpuTime::ticks`]: `/proc` reports in USER_HZ, which is 100 on
/// every architecture headroom builds for (x86-64 and aarch64), whatever the kernel's HZ.
pub const USER_HZ: u64 = 100;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cpu_time_of_this_process_grows_with_work() {
        let pid = std::process::id();
        let before = CpuTime::read(pid).unwrap();
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = CpuTime::read(pid).unwrap();
        assert!(
            after.schedstat_ns >= before.schedstat_ns + 100_000_000,
            "{before:?} {after:?}"
        );
        assert!(after.ticks > before.ticks, "{before:?} {after:?}");
        assert!(CpuTime::read(u32::MAX).is_none());
    }
}
