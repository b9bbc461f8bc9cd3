//! headroom's one view of cgroupfs, v1 and v2: where the controllers are mounted, the typed
//! values headroom writes, and one file per controller holding both what is read from it (for
//! the collector) and what is written to it (for the actuator).
//!
//! - [`setup`]: the host's setup (unified, hybrid, legacy) and controller hierarchies, detected
//!   under an injected root.
//! - [`cgroup`]: one cgroup's files behind the [`Cgroup`] trait, with a v1 and a v2 implementation.
//! - [`cpu`], [`cpuacct`], [`memory`], [`pressure`]: the controllers' files, parsers and writers.
//! - [`values`]: typed values (`max` and `-1` are variants, never strings).
//! - [`stats`]: the files a collector reads every cycle, kept open between reads.
//! - [`path`]: confinement of written paths below configured roots.
//! - [`file`]: kept-open interface files and allocation-free number formatting.

pub mod cgroup;
pub mod cpu;
pub mod cpuacct;
mod error;
pub mod file;
pub mod memory;
pub mod path;
pub mod pressure;
pub mod setup;
pub mod stats;
pub mod values;

use serde::{Deserialize, Serialize};

pub use cgroup::{AnyCgroup, Cgroup, CgroupDirs, V1Cgroup, V2Cgroup};
pub use cpu::CpuStat;
pub use error::CgroupError;
pub use memory::MemoryStat;
pub use pressure::{PsiLine, PsiReading};
pub use setup::{CgroupHost, CgroupSetup, Hierarchy, HostError, detect_setup};
pub use stats::{StatFiles, StatReadings};

/// Which cgroup version holds a controller: the one version enum of headroom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CgroupVersion {
    /// Legacy hierarchies, one per controller (also the controllers of a hybrid host).
    V1,
    /// The unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// The encoding the probes' load-time configuration carries (`ProbeConfig::cgroup_mode`).
    pub const fn probe_mode(self) -> headroom_common::CgroupMode {
        match self {
            Self::V1 => headroom_common::CgroupMode::Legacy,
            Self::V2 => headroom_common::CgroupMode::Unified,
        }
    }
}

/// Value of `key` in a flat-keyed file (`cpu.stat`, `memory.stat`, `memory.events`): `None`
/// when the key is absent or its value is not a number.
pub fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}
