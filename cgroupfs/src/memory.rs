//! The `memory` controller. Written: v1 `memory.limit_in_bytes` (-1 = no limit), v2
//! `memory.max` (`max` or bytes). Read: usage (v1 `memory.usage_in_bytes`, v2
//! `memory.current`), `memory.stat` (the working set) and v2 `memory.events` (OOM kills).
//!
//! On v1 a limit below usage makes the kernel reclaim and, failing that, return EBUSY (v2 would
//! OOM-kill instead): the actuator checks usage before it writes, as the kubelet does.

use std::path::Path;

use crate::file::{CgFile, NumBuf, READ_BUF};
use crate::values::{MemoryMax, V1_MEMORY_UNLIMITED_THRESHOLD};
use crate::{CgroupError, CgroupVersion, flat_keyed};

pub(crate) const V1_LIMIT: &str = "memory.limit_in_bytes";
const V1_USAGE: &str = "memory.usage_in_bytes";
pub(crate) const V2_MAX: &str = "memory.max";
const V2_CURRENT: &str = "memory.current";
/// `memory.stat`, in both versions.
pub const STAT: &str = "memory.stat";
/// `memory.events` (v2).
pub const EVENTS: &str = "memory.events";

/// Memory usage of a cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MemoryStat {
    /// `memory.current` (v2) or `memory.usage_in_bytes` (v1).
    pub usage_bytes: u64,
    /// Usage minus inactive file pages, as cAdvisor computes it.
    pub working_set_bytes: u64,
}

/// Working set as cAdvisor computes it: usage minus inactive file pages.
pub fn working_set(usage: u64, memory_stat: &str, version: CgroupVersion) -> MemoryStat {
    let inactive_key = match version {
        CgroupVersion::V1 => "total_inactive_file",
        CgroupVersion::V2 => "inactive_file",
    };
    let inactive = flat_keyed(memory_stat, inactive_key).unwrap_or(0);
    MemoryStat {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(inactive),
    }
}

/// The file holding a cgroup's current usage.
pub const fn usage_file(version: CgroupVersion) -> &'static str {
    match version {
        CgroupVersion::V1 => V1_USAGE,
        CgroupVersion::V2 => V2_CURRENT,
    }
}

/// The v1 `memory` files of one cgroup, opened on first use and kept open.
#[derive(Debug)]
pub(crate) struct V1Memory {
    limit: CgFile,
    usage: CgFile,
}

impl V1Memory {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            limit: CgFile::new(dir, V1_LIMIT),
            usage: CgFile::new(dir, V1_USAGE),
        }
    }

    pub(crate) fn read_limit(&mut self) -> Result<MemoryMax, CgroupError> {
        let v = self.limit.read_u64()?;
        // "No limit" reads back as PAGE_COUNTER_MAX * PAGE_SIZE, not -1.
        Ok(if v >= V1_MEMORY_UNLIMITED_THRESHOLD {
            MemoryMax::Max
        } else {
            MemoryMax::Bytes(v)
        })
    }

    pub(crate) fn write_limit(&mut self, m: MemoryMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m {
            MemoryMax::Max => buf.push_str("-1"),
            MemoryMax::Bytes(b) => buf.push_u64(b),
        };
        self.limit.write(buf.as_bytes())
    }

    pub(crate) fn usage(&mut self) -> Result<u64, CgroupError> {
        self.usage.read_u64()
    }
}

/// The v2 `memory` files of one cgroup, opened on first use and kept open.
#[derive(Debug)]
pub(crate) struct V2Memory {
    max: CgFile,
    current: CgFile,
}

impl V2Memory {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            max: CgFile::new(dir, V2_MAX),
            current: CgFile::new(dir, V2_CURRENT),
        }
    }

    pub(crate) fn read_max(&mut self) -> Result<MemoryMax, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.max.read(&mut buf)?;
        if s == "max" {
            return Ok(MemoryMax::Max);
        }
        match s.parse() {
            Ok(b) => Ok(MemoryMax::Bytes(b)),
            Err(_) => Err(self.max.parse_error(s)),
        }
    }

    pub(crate) fn write_max(&mut self, m: MemoryMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m {
            MemoryMax::Max => buf.push_str("max"),
            MemoryMax::Bytes(b) => buf.push_u64(b),
        };
        self.max.write(buf.as_bytes())
    }

    pub(crate) fn current(&mut self) -> Result<u64, CgroupError> {
        self.current.read_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_set_subtracts_inactive_file() {
        let stat = "cache 100\ntotal_inactive_file 4096\ninactive_file 1\n";
        assert_eq!(
            working_set(10_000, stat, CgroupVersion::V1).working_set_bytes,
            10_000 - 4096
        );
        assert_eq!(
            working_set(10, "inactive_file 4096\n", CgroupVersion::V2).working_set_bytes,
            0
        );
    }
}
