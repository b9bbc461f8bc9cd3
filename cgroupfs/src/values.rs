//! Typed cgroup values. Sentinels such as `max` (v2) or `-1` (v1) are variants, never strings.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The CFS period the kubelet uses unless `CPUCFSQuotaPeriod` is enabled (µs).
pub const DEFAULT_CFS_PERIOD_US: u64 = 100_000;

/// v1 `memory.limit_in_bytes` reads back `PAGE_COUNTER_MAX * PAGE_SIZE` (9223372036854771712 on
/// x86_64 with 4 KiB pages) when unlimited. Anything at or above 2^62 is treated as "no limit".
pub const V1_MEMORY_UNLIMITED_THRESHOLD: u64 = 1 << 62;

/// A CFS bandwidth quota: unlimited, or a number of microseconds per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CpuQuota {
    /// `max` on v2, `-1` on v1.
    Max,
    /// Runtime allowed per period, in microseconds.
    Micros(u64),
}

/// `cpu.max` on v2; `cpu.cfs_quota_us` + `cpu.cfs_period_us` on v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CpuMax {
    pub quota: CpuQuota,
    pub period_us: u64,
}

impl CpuMax {
    pub const fn unlimited() -> Self {
        Self {
            quota: CpuQuota::Max,
            period_us: DEFAULT_CFS_PERIOD_US,
        }
    }

    pub const fn micros(quota_us: u64, period_us: u64) -> Self {
        Self {
            quota: CpuQuota::Micros(quota_us),
            period_us,
        }
    }

    /// Compares the CPU bandwidth the two values allow (quota / period), `max` being infinite.
    pub fn cmp_bandwidth(&self, other: &Self) -> Ordering {
        match (self.quota, other.quota) {
            (CpuQuota::Max, CpuQuota::Max) => Ordering::Equal,
            (CpuQuota::Max, CpuQuota::Micros(_)) => Ordering::Greater,
            (CpuQuota::Micros(_), CpuQuota::Max) => Ordering::Less,
            (CpuQuota::Micros(a), CpuQuota::Micros(b)) => {
                // a/pa vs b/pb without division; u128 cannot overflow.
                (u128::from(a) * u128::from(other.period_us))
                    .cmp(&(u128::from(b) * u128::from(self.period_us)))
            }
        }
    }
}

impl fmt::Display for CpuMax {
    /// The v2 `cpu.max` format: `"<quota> <period>"` or `"max <period>"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.quota {
            CpuQuota::Max => write!(f, "max {}", self.period_us),
            CpuQuota::Micros(q) => write!(f, "{q} {}", self.period_us),
        }
    }
}

/// `memory.max` on v2, `memory.limit_in_bytes` on v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemoryMax {
    /// `max` on v2, `-1` on v1.
    Max,
    Bytes(u64),
}

impl MemoryMax {
    /// The value the kernel stores: limits are rounded down to a whole page (v1 and v2).
    pub const fn kernel_normalized(self, page_size: u64) -> Self {
        match self {
            Self::Max => Self::Max,
            Self::Bytes(b) if page_size > 0 => Self::Bytes(b / page_size * page_size),
            Self::Bytes(b) => Self::Bytes(b),
        }
    }
}

impl Ord for MemoryMax {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Max, Self::Max) => Ordering::Equal,
            (Self::Max, Self::Bytes(_)) => Ordering::Greater,
            (Self::Bytes(_), Self::Max) => Ordering::Less,
            (Self::Bytes(a), Self::Bytes(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for MemoryMax {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for MemoryMax {
    /// The v2 `memory.max` format.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Max => f.write_str("max"),
            Self::Bytes(b) => write!(f, "{b}"),
        }
    }
}

/// The CPU request, in the unit of the cgroup version: v1 `cpu.shares`, v2 `cpu.weight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CpuRequest {
    /// v1 `cpu.shares`, in [2, 262144].
    Shares(u64),
    /// v2 `cpu.weight`, in [1, 10000].
    Weight(u64),
}

impl CpuRequest {
    pub const fn raw(self) -> u64 {
        match self {
            Self::Shares(v) | Self::Weight(v) => v,
        }
    }
}

/// Which value of a cgroup a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Knob {
    CpuRequest,
    CpuMax,
    MemoryMax,
}

impl Knob {
    pub const ALL: [Knob; 3] = [Knob::CpuRequest, Knob::CpuMax, Knob::MemoryMax];

    /// Requests are the soft side (shares/weight), limits the hard side.
    pub const fn is_limit(self) -> bool {
        !matches!(self, Knob::CpuRequest)
    }

    pub const fn resource(self) -> Resource {
        match self {
            Knob::CpuRequest | Knob::CpuMax => Resource::Cpu,
            Knob::MemoryMax => Resource::Memory,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Resource {
    Cpu,
    Memory,
}

/// One value of one knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Setting {
    CpuRequest(CpuRequest),
    CpuMax(CpuMax),
    MemoryMax(MemoryMax),
}

impl Setting {
    pub const fn knob(&self) -> Knob {
        match self {
            Setting::CpuRequest(_) => Knob::CpuRequest,
            Setting::CpuMax(_) => Knob::CpuMax,
            Setting::MemoryMax(_) => Knob::MemoryMax,
        }
    }

    /// How `self → next` changes the resource; `None` when the knobs or request units differ.
    pub fn direction_to(&self, next: &Setting) -> Option<Ordering> {
        match (self, next) {
            (Setting::CpuRequest(CpuRequest::Shares(a)), Setting::CpuRequest(CpuRequest::Shares(b)))
            | (Setting::CpuRequest(CpuRequest::Weight(a)), Setting::CpuRequest(CpuRequest::Weight(b))) => {
                Some(b.cmp(a))
            }
            (Setting::CpuMax(a), Setting::CpuMax(b)) if a == b => Some(Ordering::Equal),
            (Setting::CpuMax(a), Setting::CpuMax(b)) => match b.cmp_bandwidth(a) {
                // Same bandwidth, different period: treat as a change (written, order irrelevant).
                Ordering::Equal => Some(Ordering::Greater),
                o => Some(o),
            },
            (Setting::MemoryMax(a), Setting::MemoryMax(b)) => Some(b.cmp(a)),
            _ => None,
        }
    }

    /// The value the kernel will report after this one is written.
    pub const fn kernel_normalized(self, page_size: u64) -> Self {
        match self {
            Setting::MemoryMax(m) => Setting::MemoryMax(m.kernel_normalized(page_size)),
            other => other,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::CpuRequest(CpuRequest::Shares(s)) => write!(f, "cpu.shares={s}"),
            Setting::CpuRequest(CpuRequest::Weight(w)) => write!(f, "cpu.weight={w}"),
            Setting::CpuMax(m) => write!(f, "cpu.max={m}"),
            Setting::MemoryMax(m) => write!(f, "memory.max={m}"),
        }
    }
}

/// The values of one cgroup; `None` means "not managed / leave as is".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupValues {
    pub cpu_request: Option<CpuRequest>,
    pub cpu_max: Option<CpuMax>,
    pub memory_max: Option<MemoryMax>,
}

impl CgroupValues {
    pub fn get(&self, knob: Knob) -> Option<Setting> {
        match knob {
            Knob::CpuRequest => self.cpu_request.map(Setting::CpuRequest),
            Knob::CpuMax => self.cpu_max.map(Setting::CpuMax),
            Knob::MemoryMax => self.memory_max.map(Setting::MemoryMax),
        }
    }

    pub fn set(&mut self, setting: Setting) {
        match setting {
            Setting::CpuRequest(v) => self.cpu_request = Some(v),
            Setting::CpuMax(v) => self.cpu_max = Some(v),
            Setting::MemoryMax(v) => self.memory_max = Some(v),
        }
    }
}

/// The values of a Pod cgroup and of its containers' cgroups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodValues {
    pub pod: CgroupValues,
    /// `(container name, values)`, in the caller's order.
    pub containers: Vec<(String, CgroupValues)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_formats_and_compares() {
        assert_eq!(CpuMax::unlimited().to_string(), "max 100000");
        assert_eq!(CpuMax::micros(50_000, 100_000).to_string(), "50000 100000");
        assert_eq!(
            CpuMax::micros(50_000, 100_000).cmp_bandwidth(&CpuMax::micros(10_000, 20_000)),
            Ordering::Equal
        );
        assert_eq!(
            CpuMax::micros(50_000, 100_000).cmp_bandwidth(&CpuMax::micros(10_000, 40_000)),
            Ordering::Greater
        );
        assert_eq!(
            CpuMax::unlimited().cmp_bandwidth(&CpuMax::micros(u64::MAX, 1)),
            Ordering::Greater
        );
    }

    #[test]
    fn memory_normalization_rounds_down_to_page() {
        assert_eq!(
            MemoryMax::Bytes(100_000_000).kernel_normalized(4096),
            MemoryMax::Bytes(99_999_744)
        );
        assert_eq!(MemoryMax::Max.kernel_normalized(4096), MemoryMax::Max);
        assert!(MemoryMax::Max > MemoryMax::Bytes(u64::MAX));
    }

    #[test]
    fn direction() {
        let a = Setting::CpuRequest(CpuRequest::Shares(2));
        let b = Setting::CpuRequest(CpuRequest::Shares(1024));
        assert_eq!(a.direction_to(&b), Some(Ordering::Greater));
        assert_eq!(b.direction_to(&a), Some(Ordering::Less));
        assert_eq!(a.direction_to(&Setting::MemoryMax(MemoryMax::Max)), None);
    }
}
