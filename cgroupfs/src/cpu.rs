//! The `cpu` controller. Written: v1 `cpu.shares`, `cpu.cfs_quota_us` (-1 = no limit) and
//! `cpu.cfs_period_us`; v2 `cpu.weight` [1, 10000] and `cpu.max` (`"<quota|max> <period>"`).
//! Read: `cpu.stat` (v1 `throttled_time` in ns, v2 `throttled_usec` and `usage_usec`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::file::{CgFile, NumBuf, READ_BUF};
use crate::values::{CpuMax, CpuQuota, CpuRequest, Setting};
use crate::{CgroupError, CgroupVersion, flat_keyed};

pub(crate) const V1_SHARES: &str = "cpu.shares";
pub(crate) const V1_QUOTA: &str = "cpu.cfs_quota_us";
pub(crate) const V1_PERIOD: &str = "cpu.cfs_period_us";
pub(crate) const V2_WEIGHT: &str = "cpu.weight";
pub(crate) const V2_MAX: &str = "cpu.max";
/// `cpu.stat`, in both versions.
pub const STAT: &str = "cpu.stat";

/// `cpu.stat` (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStat {
    /// `usage_usec` (v2) or `cpuacct.usage` (v1, see [`crate::cpuacct`]), in nanoseconds.
    pub usage_ns: u64,
    /// `nr_periods`.
    pub nr_periods: u64,
    /// `nr_throttled`.
    pub nr_throttled: u64,
    /// `throttled_usec` (v2) or `throttled_time` (v1), in nanoseconds.
    pub throttled_ns: u64,
}

/// Parses `cpu.stat`; `None` without the bandwidth counters (the controller is not enabled
/// for that cgroup, or the text is not a `cpu.stat`).
pub fn parse_cpu_stat(text: &str, version: CgroupVersion) -> Option<CpuStat> {
    let nr_periods = flat_keyed(text, "nr_periods")?;
    let nr_throttled = flat_keyed(text, "nr_throttled")?;
    Some(match version {
        CgroupVersion::V1 => CpuStat {
            usage_ns: 0,
            nr_periods,
            nr_throttled,
            throttled_ns: flat_keyed(text, "throttled_time")?,
        },
        CgroupVersion::V2 => CpuStat {
            usage_ns: flat_keyed(text, "usage_usec").unwrap_or(0).saturating_mul(1000),
            nr_periods,
            nr_throttled,
            throttled_ns: flat_keyed(text, "throttled_usec")?.saturating_mul(1000),
        },
    })
}

/// Parses v2 `cpu.max`: `"max 100000"` or `"50000 100000"`.
pub fn parse_cpu_max(s: &str) -> Option<CpuMax> {
    let mut it = s.split_ascii_whitespace();
    let quota = match it.next()? {
        "max" => CpuQuota::Max,
        q => CpuQuota::Micros(q.parse().ok()?),
    };
    let period_us = it.next()?.parse().ok()?;
    it.next().is_none().then_some(CpuMax { quota, period_us })
}

fn stat_of(file: &mut CgFile, version: CgroupVersion) -> Result<CpuStat, CgroupError> {
    let mut buf = [0u8; READ_BUF];
    let s = file.read(&mut buf)?;
    parse_cpu_stat(s, version).ok_or_else(|| file.parse_error(s))
}

/// The v1 `cpu` files of one cgroup, opened on first use and kept open.
#[derive(Debug)]
pub(crate) struct V1Cpu {
    shares: CgFile,
    quota: CgFile,
    period: CgFile,
    stat: CgFile,
    /// The period only changes through us; reading it again on every verification would double
    /// the reads of `CpuMax`.
    period_us: Option<u64>,
}

impl V1Cpu {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            shares: CgFile::new(dir, V1_SHARES),
            quota: CgFile::new(dir, V1_QUOTA),
            period: CgFile::new(dir, V1_PERIOD),
            stat: CgFile::new(dir, STAT),
            period_us: None,
        }
    }

    pub(crate) fn read_shares(&mut self) -> Result<CpuRequest, CgroupError> {
        self.shares.read_u64().map(CpuRequest::Shares)
    }

    fn period(&mut self) -> Result<u64, CgroupError> {
        match self.period_us {
            Some(p) => Ok(p),
            None => {
                let p = self.period.read_u64()?;
                self.period_us = Some(p);
                Ok(p)
            }
        }
    }

    pub(crate) fn read_max(&mut self) -> Result<CpuMax, CgroupError> {
        let raw = self.quota.read_i64()?;
        let quota = match u64::try_from(raw) {
            Ok(q) => CpuQuota::Micros(q),
            // The kernel reports "no limit" as -1 (RUNTIME_INF).
            Err(_) if raw == -1 => CpuQuota::Max,
            Err(_) => return Err(self.quota.parse_error(&raw.to_string())),
        };
        Ok(CpuMax {
            quota,
            period_us: self.period()?,
        })
    }

    pub(crate) fn write_shares(&mut self, r: CpuRequest) -> Result<(), CgroupError> {
        match r {
            CpuRequest::Shares(s) => self.shares.write(NumBuf::new().push_u64(s).as_bytes()),
            CpuRequest::Weight(_) => Err(CgroupError::Unsupported {
                setting: Setting::CpuRequest(r),
                version: CgroupVersion::V1,
            }),
        }
    }

    pub(crate) fn write_max(&mut self, m: CpuMax) -> Result<(), CgroupError> {
        if self.period()? != m.period_us {
            // Rare (CPUCFSQuotaPeriod): the kernel checks quota/period against the parent, so a
            // period change can fail where the same ratio with the old period would not.
            self.period_us = None;
            self.period
                .write(NumBuf::new().push_u64(m.period_us).as_bytes())?;
            self.period_us = Some(m.period_us);
        }
        let mut buf = NumBuf::new();
        match m.quota {
            CpuQuota::Max => buf.push_str("-1"),
            CpuQuota::Micros(q) => buf.push_u64(q),
        };
        self.quota.write(buf.as_bytes())
    }

    pub(crate) fn stat(&mut self) -> Result<CpuStat, CgroupError> {
        stat_of(&mut self.stat, CgroupVersion::V1)
    }
}

/// The v2 `cpu` files of one cgroup, opened on first use and kept open.
#[derive(Debug)]
pub(crate) struct V2Cpu {
    weight: CgFile,
    max: CgFile,
    stat: CgFile,
}

impl V2Cpu {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            weight: CgFile::new(dir, V2_WEIGHT),
            max: CgFile::new(dir, V2_MAX),
            stat: CgFile::new(dir, STAT),
        }
    }

    pub(crate) fn read_weight(&mut self) -> Result<CpuRequest, CgroupError> {
        self.weight.read_u64().map(CpuRequest::Weight)
    }

    pub(crate) fn read_max(&mut self) -> Result<CpuMax, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.max.read(&mut buf)?;
        match parse_cpu_max(s) {
            Some(m) => Ok(m),
            None => Err(self.max.parse_error(s)),
        }
    }

    pub(crate) fn write_weight(&mut self, r: CpuRequest) -> Result<(), CgroupError> {
        match r {
            CpuRequest::Weight(w) => self.weight.write(NumBuf::new().push_u64(w).as_bytes()),
            CpuRequest::Shares(_) => Err(CgroupError::Unsupported {
                setting: Setting::CpuRequest(r),
                version: CgroupVersion::V2,
            }),
        }
    }

    pub(crate) fn write_max(&mut self, m: CpuMax) -> Result<(), CgroupError> {
        let mut buf = NumBuf::new();
        match m.quota {
            CpuQuota::Max => buf.push_str("max"),
            CpuQuota::Micros(q) => buf.push_u64(q),
        };
        buf.push_str(" ").push_u64(m.period_us);
        self.max.write(buf.as_bytes())
    }

    pub(crate) fn stat(&mut self) -> Result<CpuStat, CgroupError> {
        stat_of(&mut self.stat, CgroupVersion::V2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_v1_and_v2() {
        let v1 = "nr_periods 33\nnr_throttled 31\nthrottled_time 2754365905\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(
            parse_cpu_stat(v1, CgroupVersion::V1),
            Some(CpuStat {
                usage_ns: 0,
                nr_periods: 33,
                nr_throttled: 31,
                throttled_ns: 2_754_365_905
            })
        );
        let v2 = "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 10\nnr_throttled 9\n\
                  throttled_usec 700\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(
            parse_cpu_stat(v2, CgroupVersion::V2),
            Some(CpuStat {
                usage_ns: 5_000_000,
                nr_periods: 10,
                nr_throttled: 9,
                throttled_ns: 700_000
            })
        );
        assert_eq!(parse_cpu_stat("garbage\n", CgroupVersion::V1), None);
        assert_eq!(
            parse_cpu_stat("nr_periods x\nnr_throttled 1\n", CgroupVersion::V1),
            None
        );
    }

    #[test]
    fn cpu_stat_parses_both_formats() {
        let v1 = "nr_periods 10\nnr_throttled 4\nthrottled_time 123456\n";
        assert_eq!(
            parse_cpu_stat(v1, CgroupVersion::V1),
            Some(CpuStat {
                usage_ns: 0,
                nr_periods: 10,
                nr_throttled: 4,
                throttled_ns: 123_456
            })
        );
        let v2 = "usage_usec 5\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7\n";
        assert_eq!(
            parse_cpu_stat(v2, CgroupVersion::V2).map(|s| s.throttled_ns),
            Some(7000)
        );
    }

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
