//! v2 `memory` controller: `memory.max` (`max` or bytes), `memory.current`.

use std::path::Path;

use crate::cgroup::{CgFile, CgroupError, NumBuf};
use crate::values::MemoryMax;

pub(super) const MAX: &str = "memory.max";
const CURRENT: &str = "memory.current";

#[derive(Debug)]
pub(super) struct Memory {
    max: CgFile,
    current: CgFile,
}

impl Memory {
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            max: CgFile::new(dir, MAX),
            current: CgFile::new(dir, CURRENT),
        }
    }

    pub(super) fn read_max(&mut self) -> Result<MemoryMax, CgroupError> {
        let mut buf = [0u8; 1024];
        let s = self.max.read(&mut buf)?;
        if s == "max" {
            return Ok(MemoryMax::Max);
        }
        match s.parse() {
            Ok(b) => Ok(MemoryMax::Bytes(b)),
            Err(_) => Err(self.max.parse_error(s)),
        }
    }

    pub(super) fn write_max(&mut self, m: MemoryMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m {
            MemoryMax::Max => buf.push_str("max"),
            MemoryMax::Bytes(b) => buf.push_u64(b),
        };
        self.max.write(buf.as_bytes())
    }

    pub(super) fn current(&mut self) -> Result<u64, CgroupError> {
        self.current.read_u64()
    }
}
