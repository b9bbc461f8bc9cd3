//! The benchmarks' background load: `stress-ng --cpu 1 --vm 1 --vm-bytes 256M`, the load the
//! targets name, in its own process group and killed with it on drop.
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

pub struct Load(Child);

impl Load {
    /// Starts the load; `timeout` (stress-ng's own) bounds it should this process die first.
    pub fn start(timeout: Option<Duration>) -> Result<Self> {
        use std::os::unix::process::CommandExt as _;
        let mut command = Command::new("stress-ng");
        command.args(["--cpu", "1", "--vm", "1", "--vm-bytes", "256M", "--quiet"]);
        if let Some(t) = timeout {
            command.args(["--timeout", &format!("{}s", t.as_secs().max(1))]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("start stress-ng (cargo xtask setup installs it)")?;
        let mut load = Self(child);
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(Some(status)) = load.0.try_wait() {
            bail!("stress-ng exited at once: {status}");
        }
        Ok(load)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::SIGKILL);
        }
        let _ = self.0.wait();
    }
}
