//! v1 `cpu` controller: `cpu.shares`, `cpu.cfs_quota_us` (-1 = no limit), `cpu.cfs_period_us`.

use std::path::Path;

use crate::cgroup::{CgFile, CgroupError, CgroupVersion, CpuStat, NumBuf, parse_cpu_stat};
use crate::values::{CpuMax, CpuQuota, CpuRequest, Setting};

pub(super) const SHARES: &str = "cpu.shares";
pub(super) const QUOTA: &str = "cpu.cfs_quota_us";
pub(super) const PERIOD: &str = "cpu.cfs_period_us";
const STAT: &str = "cpu.stat";

#[derive(Debug)]
pub(super) struct Cpu {
    shares: CgFile,
    quota: CgFile,
    period: CgFile,
    stat: CgFile,
    /// The period only changes through us; reading it again on every verification would double
    /// the reads of `CpuMax`.
    period_us: Option<u64>,
}

impl Cpu {
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            shares: CgFile::new(dir, SHARES),
            quota: CgFile::new(dir, QUOTA),
            period: CgFile::new(dir, PERIOD),
            stat: CgFile::new(dir, STAT),
            period_us: None,
        }
    }

    pub(super) fn read_shares(&mut self) -> Result<CpuRequest, CgroupError> {
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

    pub(super) fn read_max(&mut self) -> Result<CpuMax, CgroupError> {
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

    pub(super) fn write_shares(&mut self, r: CpuRequest) -> Result<(), CgroupError> {
        match r {
            CpuRequest::Shares(s) => self.shares.write(NumBuf::new().push_u64(s).as_bytes()),
            CpuRequest::Weight(_) => Err(CgroupError::Unsupported {
                setting: Setting::CpuRequest(r),
                version: CgroupVersion::V1,
            }),
        }
    }

    pub(super) fn write_max(&mut self, m: CpuMax) -> Result<(), CgroupError> {
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

    pub(super) fn stat(&mut self) -> Result<CpuStat, CgroupError> {
        let mut buf = [0u8; 1024];
        let s = self.stat.read(&mut buf)?;
        Ok(parse_cpu_stat(s, "throttled_time", 1))
    }
}
