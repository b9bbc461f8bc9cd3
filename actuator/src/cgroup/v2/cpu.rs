//! v2 `cpu` controller: `cpu.weight` [1, 10000], `cpu.max` (`"<quota|max> <period>"`).

use std::path::Path;

use crate::cgroup::{CgFile, CgroupError, CgroupVersion, CpuStat, NumBuf, parse_cpu_stat};
use crate::values::{CpuMax, CpuQuota, CpuRequest, Setting};

pub(super) const WEIGHT: &str = "cpu.weight";
pub(super) const MAX: &str = "cpu.max";
const STAT: &str = "cpu.stat";

#[derive(Debug)]
pub(super) struct Cpu {
    weight: CgFile,
    max: CgFile,
    stat: CgFile,
}

/// Parses `cpu.max`: `"max 100000"` or `"50000 100000"`.
pub fn parse_cpu_max(s: &str) -> Option<CpuMax> {
    let mut it = s.split_ascii_whitespace();
    let quota = match it.next()? {
        "max" => CpuQuota::Max,
        q => CpuQuota::Micros(q.parse().ok()?),
    };
    let period_us = it.next()?.parse().ok()?;
    it.next().is_none().then_some(CpuMax { quota, period_us })
}

impl Cpu {
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            weight: CgFile::new(dir, WEIGHT),
            max: CgFile::new(dir, MAX),
            stat: CgFile::new(dir, STAT),
        }
    }

    pub(super) fn read_weight(&mut self) -> Result<CpuRequest, CgroupError> {
        self.weight.read_u64().map(CpuRequest::Weight)
    }

    pub(super) fn read_max(&mut self) -> Result<CpuMax, CgroupError> {
        let mut buf = [0u8; 1024];
        let s = self.max.read(&mut buf)?;
        match parse_cpu_max(s) {
            Some(m) => Ok(m),
            None => Err(self.max.parse_error(s)),
        }
    }

    pub(super) fn write_weight(&mut self, r: CpuRequest) -> Result<(), CgroupError> {
        match r {
            CpuRequest::Weight(w) => self.weight.write(NumBuf::new().push_u64(w).as_bytes()),
            CpuRequest::Shares(_) => Err(CgroupError::Unsupported {
                setting: Setting::CpuRequest(r),
                version: CgroupVersion::V2,
            }),
        }
    }

    pub(super) fn write_max(&mut self, m: CpuMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m.quota {
            CpuQuota::Max => buf.push_str("max"),
            CpuQuota::Micros(q) => buf.push_u64(q),
        };
        buf.push_str(" ").push_u64(m.period_us);
        self.max.write(buf.as_bytes())
    }

    pub(super) fn stat(&mut self) -> Result<CpuStat, CgroupError> {
        let mut buf = [0u8; 1024];
        let s = self.stat.read(&mut buf)?;
        Ok(parse_cpu_stat(s, "throttled_usec", 1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parses() {
        assert_eq!(parse_cpu_max("max 100000"), Some(CpuMax::unlimited()));
        assert_eq!(
            parse_cpu_max("25000 100000\n"),
            Some(CpuMax::micros(25_000, 100_000))
        );
        for bad in ["", "max", "-1 100000", "1 2 3", "x 100000"] {
            assert_eq!(parse_cpu_max(bad), None, "{bad:?}");
        }
    }
}
