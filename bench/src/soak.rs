//! What the two soak runs share (`soak` on the standalone node, `kube_soak` on the real one):
//! how long they run, when warm-up ends, and how a process's memory is read.
use std::time::Duration;

/// `--minutes N` (default 10) or `--seconds S` (a short run, as `cargo xtask test` makes).
#[derive(Debug, Clone, clap::Args)]
pub struct SoakLength {
    /// Length of the run in minutes (default 10).
    #[arg(long, conflicts_with = "seconds")]
    pub minutes: Option<f64>,
    /// Length of the run in seconds (a short run, as in CI).
    #[arg(long)]
    pub seconds: Option<f64>,
}

impl SoakLength {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(match (self.minutes, self.seconds) {
            (_, Some(s)) => s,
            (Some(m), None) => m * 60.0,
            (None, None) => 600.0,
        })
    }

    /// Runs shorter than two minutes: their figures are sampled more often.
    pub fn is_short(&self) -> bool {
        self.duration() < Duration::from_secs(120)
    }

    /// The first minute, or the first 20 % of a short run: memory before it is not a leak
    /// (allocators, caches and connections settle).
    pub fn warmup(&self) -> Duration {
        if self.is_short() {
            self.duration().mul_f64(0.2)
        } else {
            Duration::from_secs(60)
        }
    }
}

/// The resident set of process `pid` (`VmRSS` in /proc), in KiB; `None` once it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
