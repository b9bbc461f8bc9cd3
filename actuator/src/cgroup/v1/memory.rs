//! v1 `memory` controller: `memory.limit_in_bytes` (-1 = no limit), `memory.usage_in_bytes`.
//!
//! A limit below usage makes the kernel reclaim and, failing that, return EBUSY (v2 would
//! OOM-kill instead): the actuator checks usage before it writes, as the kubelet does.

use std::path::Path;

use crate::cgroup::{CgFile, CgroupError, NumBuf};
use crate::values::{MemoryMax, V1_MEMORY_UNLIMITED_THRESHOLD};

pub(super) const LIMIT: &str = "memory.limit_in_bytes";
const USAGE: &str = "memory.usage_in_bytes";

#[derive(Debug)]
pub(super) struct Memory {
    limit: CgFile,
    usage: CgFile,
}

impl Memory {
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            limit: CgFile::new(dir, LIMIT),
            usage: CgFile::new(dir, USAGE),
        }
    }

    pub(super) fn read_limit(&mut self) -> Result<MemoryMax, CgroupError> {
        let v = self.limit.read_u64()?;
        // "No limit" reads back as PAGE_COUNTER_MAX * PAGE_SIZE, not -1.
        Ok(if v >= V1_MEMORY_UNLIMITED_THRESHOLD {
            MemoryMax::Max
        } else {
            MemoryMax::Bytes(v)
        })
    }

    pub(super) fn write_limit(&mut self, m: MemoryMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m {
            MemoryMax::Max => buf.push_str("-1"),
            MemoryMax::Bytes(b) => buf.push_u64(b),
        };
        self.limit.write(buf.as_bytes())
    }

    pub(super) fn usage(&mut self) -> Result<u64, CgroupError> {
        self.usage.read_u64()
    }
}
