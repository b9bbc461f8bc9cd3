//! Kubernetes' resource → cgroup conversions, exactly as the kubelet and the runtimes do them.
//!
//! Sources: `pkg/kubelet/cm/helpers_linux.go` (shares, quota, `ResourceConfigForPod`),
//! `pkg/kubelet/cm/cgroup_manager_linux.go` (`getCPUWeight`, the linear v2 weight used for Pod
//! and QoS cgroups) and runc ≥ 1.3.2 / crun ≥ 1.23 (`ConvertCPUSharesToCgroupV2Value`, the
//! log-quadratic v2 weight that container scopes get; kubernetes#131216, runc#4785).

use serde::{Deserialize, Serialize};

use crate::values::{
    CgroupValues, CpuMax, CpuQuota, CpuRequest, DEFAULT_CFS_PERIOD_US, MemoryMax, PodValues,
};
use headroom_cgroupfs::CgroupVersion;

pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
pub const SHARES_PER_CPU: u64 = 1024;
pub const MILLI_CPU_TO_CPU: u64 = 1000;
/// The kernel refuses a CFS quota below 1 ms.
pub const MIN_QUOTA_PERIOD_US: u64 = 1000;
pub const MIN_WEIGHT: u64 = 1;
pub const MAX_WEIGHT: u64 = 10_000;

/// `MilliCPUToShares`: `m*1024/1000` clamped to [2, 262144]; 0 (no request) → 2.
pub fn milli_cpu_to_shares(milli_cpu: u64) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    (milli_cpu.saturating_mul(SHARES_PER_CPU) / MILLI_CPU_TO_CPU).clamp(MIN_SHARES, MAX_SHARES)
}

/// `MilliCPUToQuota`: `m*period/1000`, at least 1 ms; 0 (no limit) → no quota.
pub fn milli_cpu_to_quota(milli_cpu: u64, period_us: u64) -> CpuQuota {
    if milli_cpu == 0 {
        return CpuQuota::Max;
    }
    let quota = milli_cpu.saturating_mul(period_us) / MILLI_CPU_TO_CPU;
    CpuQuota::Micros(quota.max(MIN_QUOTA_PERIOD_US))
}

/// `SharesToMilliCPU`: `ceil(shares*1000/1024)`, 0 below the minimum.
pub fn shares_to_milli_cpu(shares: u64) -> u64 {
    if shares < MIN_SHARES {
        return 0;
    }
    (shares * MILLI_CPU_TO_CPU).div_ceil(SHARES_PER_CPU)
}

/// `QuotaToMilliCPU`: `quota*1000/period`; `None` for no quota.
pub fn quota_to_milli_cpu(max: CpuMax) -> Option<u64> {
    match max.quota {
        CpuQuota::Max => None,
        CpuQuota::Micros(_) if max.period_us == 0 => None,
        CpuQuota::Micros(q) => Some(q.saturating_mul(MILLI_CPU_TO_CPU) / max.period_us),
    }
}

/// The kubelet's linear map for Pod and QoS cgroups: `1 + ((shares-2)*9999)/262142`.
pub fn shares_to_weight_linear(shares: u64) -> u64 {
    let shares = shares.max(MIN_SHARES);
    if shares >= MAX_SHARES {
        return MAX_WEIGHT;
    }
    1 + ((shares - MIN_SHARES) * 9999) / 262_142
}

/// Inverse of [`shares_to_weight_linear`]: `((weight-1)*262142)/9999 + 2`.
pub fn weight_linear_to_shares(weight: u64) -> u64 {
    let weight = weight.clamp(MIN_WEIGHT, MAX_WEIGHT);
    ((weight - 1) * 262_142) / 9999 + MIN_SHARES
}

/// runc/crun's log-quadratic map (fits 2→1, 1024→100, 262144→10000):
/// `l = log2(shares); weight = ceil(10^((l²+125l)/612 − 7/34))`; 0 stays 0 ("unset").
pub fn shares_to_weight_quadratic(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    if shares <= MIN_SHARES {
        return MIN_WEIGHT;
    }
    if shares >= MAX_SHARES {
        return MAX_WEIGHT;
    }
    // shares < 2^18: exact in f64
    let l = (shares as f64).log2();
    let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    let weight = 10f64.powf(exponent).ceil();
    // in [1, 10000] by construction
    let weight = weight as u64;
    weight.clamp(MIN_WEIGHT, MAX_WEIGHT)
}

/// Which shares → weight map a v2 cgroup gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WeightFormula {
    /// The kubelet's `getCPUWeight` (Pod and QoS cgroups; containers with runc < 1.3.2).
    #[default]
    Linear,
    /// runc ≥ 1.3.2 / crun ≥ 1.23 container scopes.
    Quadratic,
}

impl WeightFormula {
    pub fn weight(self, shares: u64) -> u64 {
        match self {
            Self::Linear => shares_to_weight_linear(shares),
            Self::Quadratic => shares_to_weight_quadratic(shares),
        }
    }
}

/// Kubernetes-level resources of a container (or of a Pod with `spec.resources`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeResources {
    /// CPU request in milli-CPU; 0 = none (BestEffort → 2 shares).
    pub cpu_request_milli: u64,
    /// CPU limit in milli-CPU; `None` = no limit.
    pub cpu_limit_milli: Option<u64>,
    /// Memory limit in bytes; `None` = no limit. (Memory requests are not written to cgroups.)
    pub memory_limit_bytes: Option<u64>,
}

/// How conversions are configured on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversionConfig {
    /// CFS period (µs); the kubelet's default is 100 ms.
    pub period_us: u64,
    /// `--cpu-cfs-quota=false` → no quota is ever written (`max`).
    pub cfs_quota: bool,
    /// Weight map for container cgroups on v2 (Pod cgroups always use the kubelet's linear map).
    pub container_weight: WeightFormula,
}

impl Default for ConversionConfig {
    fn default() -> Self {
        Self {
            period_us: DEFAULT_CFS_PERIOD_US,
            cfs_quota: true,
            container_weight: WeightFormula::Linear,
        }
    }
}

/// Pod-level resources as the kubelet's `ResourceConfigForPod` derives them for a Burstable or
/// Guaranteed Pod: requests summed; a limit only if *every* container has one.
pub fn pod_resources<'a>(containers: impl IntoIterator<Item = &'a KubeResources>) -> KubeResources {
    let mut pod = KubeResources {
        cpu_request_milli: 0,
        cpu_limit_milli: Some(0),
        memory_limit_bytes: Some(0),
    };
    for c in containers {
        pod.cpu_request_milli = pod.cpu_request_milli.saturating_add(c.cpu_request_milli);
        pod.cpu_limit_milli = pod
            .cpu_limit_milli
            .zip(c.cpu_limit_milli)
            .map(|(a, b)| a.saturating_add(b));
        pod.memory_limit_bytes = pod
            .memory_limit_bytes
            .zip(c.memory_limit_bytes)
            .map(|(a, b)| a.saturating_add(b));
    }
    pod
}

/// Whether values are for a Pod cgroup or a container cgroup (matters for the v2 weight map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Pod,
    Container,
}

/// Kubernetes resources → the full set of cgroup values for `version`.
pub fn cgroup_values(
    res: &KubeResources,
    version: CgroupVersion,
    level: Level,
    cfg: &ConversionConfig,
) -> CgroupValues {
    let shares = milli_cpu_to_shares(res.cpu_request_milli);
    let cpu_request = match (version, level) {
        (CgroupVersion::V1, _) => CpuRequest::Shares(shares),
        (CgroupVersion::V2, Level::Pod) => CpuRequest::Weight(shares_to_weight_linear(shares)),
        (CgroupVersion::V2, Level::Container) => CpuRequest::Weight(cfg.container_weight.weight(shares)),
    };
    let quota = match res.cpu_limit_milli {
        Some(m) if cfg.cfs_quota => milli_cpu_to_quota(m, cfg.period_us),
        _ => CpuQuota::Max,
    };
    CgroupValues {
        cpu_request: Some(cpu_request),
        cpu_max: Some(CpuMax {
            quota,
            period_us: cfg.period_us,
        }),
        memory_max: Some(res.memory_limit_bytes.map_or(MemoryMax::Max, MemoryMax::Bytes)),
    }
}

/// A whole Pod: containers converted one by one; the Pod level from `pod` (PodLevelResources)
/// or derived with [`pod_resources`].
pub fn pod_values(
    containers: &[(String, KubeResources)],
    pod: Option<&KubeResources>,
    version: CgroupVersion,
    cfg: &ConversionConfig,
) -> PodValues {
    let derived;
    let pod = match pod {
        Some(p) => p,
        None => {
            derived = pod_resources(containers.iter().map(|(_, r)| r));
            &derived
        }
    };
    PodValues {
        pod: cgroup_values(pod, version, Level::Pod, cfg),
        containers: containers
            .iter()
            .map(|(name, r)| (name.clone(), cgroup_values(r, version, Level::Container, cfg)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_match_kubelet() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
        assert_eq!(shares_to_milli_cpu(1024), 1000);
        assert_eq!(shares_to_milli_cpu(102), 100);
        assert_eq!(shares_to_milli_cpu(1), 0);
    }

    #[test]
    fn quota_matches_kubelet() {
        assert_eq!(milli_cpu_to_quota(0, 100_000), CpuQuota::Max);
        assert_eq!(milli_cpu_to_quota(5, 100_000), CpuQuota::Micros(1000)); // 500 µs → 1 ms minimum
        assert_eq!(milli_cpu_to_quota(250, 100_000), CpuQuota::Micros(25_000));
        assert_eq!(milli_cpu_to_quota(2000, 100_000), CpuQuota::Micros(200_000));
        assert_eq!(quota_to_milli_cpu(CpuMax::micros(25_000, 100_000)), Some(250));
        assert_eq!(quota_to_milli_cpu(CpuMax::unlimited()), None);
    }

    #[test]
    fn weights_match_published_values() {
        assert_eq!(shares_to_weight_linear(1024), 39);
        assert_eq!(shares_to_weight_quadratic(1024), 100);
        assert_eq!(shares_to_weight_linear(2000), 77);
        assert_eq!(shares_to_weight_quadratic(2000), 170);
        assert_eq!(shares_to_weight_linear(2), 1);
        assert_eq!(shares_to_weight_linear(MAX_SHARES), 10_000);
        assert_eq!(shares_to_weight_quadratic(0), 0);
        assert_eq!(shares_to_weight_quadratic(2), 1);
        assert_eq!(shares_to_weight_quadratic(MAX_SHARES), 10_000);
        assert_eq!(weight_linear_to_shares(39), 998); // lossy round trip, as in the kubelet
        assert_eq!(weight_linear_to_shares(1), 2);
    }

    #[test]
    fn weight_maps_are_monotonic_and_in_range() {
        let mut last = (0, 0);
        for shares in (2..=MAX_SHARES).step_by(97) {
            let l = shares_to_weight_linear(shares);
            let q = shares_to_weight_quadratic(shares);
            assert!(
                (1..=10_000).contains(&l) && (1..=10_000).contains(&q),
                "shares {shares}"
            );
            assert!(l >= last.0 && q >= last.1, "not monotonic at {shares}");
            last = (l, q);
        }
    }

    #[test]
    fn pod_level_limits_only_when_all_containers_have_one() {
        let a = KubeResources {
            cpu_request_milli: 500,
            cpu_limit_milli: Some(1000),
            memory_limit_bytes: Some(1 << 30),
        };
        let b = KubeResources {
            cpu_request_milli: 250,
            cpu_limit_milli: None,
            memory_limit_bytes: Some(1 << 29),
        };
        let p = pod_resources([&a, &b]);
        assert_eq!(p.cpu_request_milli, 750);
        assert_eq!(p.cpu_limit_milli, None);
        assert_eq!(p.memory_limit_bytes, Some((1 << 30) + (1 << 29)));
        let p = pod_resources([&a, &a]);
        assert_eq!(p.cpu_limit_milli, Some(2000));
    }

    #[test]
    fn cgroup_values_per_version_and_level() {
        let r = KubeResources {
            cpu_request_milli: 1000,
            cpu_limit_milli: Some(1500),
            memory_limit_bytes: None,
        };
        let cfg = ConversionConfig {
            container_weight: WeightFormula::Quadratic,
            ..ConversionConfig::default()
        };
        let v1 = cgroup_values(&r, CgroupVersion::V1, Level::Container, &cfg);
        assert_eq!(v1.cpu_request, Some(CpuRequest::Shares(1024)));
        assert_eq!(v1.cpu_max, Some(CpuMax::micros(150_000, 100_000)));
        assert_eq!(v1.memory_max, Some(MemoryMax::Max));
        assert_eq!(
            cgroup_values(&r, CgroupVersion::V2, Level::Pod, &cfg).cpu_request,
            Some(CpuRequest::Weight(39))
        );
        assert_eq!(
            cgroup_values(&r, CgroupVersion::V2, Level::Container, &cfg).cpu_request,
            Some(CpuRequest::Weight(100))
        );
        let no_quota = ConversionConfig {
            cfs_quota: false,
            ..cfg
        };
        assert_eq!(
            cgroup_values(&r, CgroupVersion::V1, Level::Pod, &no_quota).cpu_max,
            Some(CpuMax::unlimited())
        );
    }
}
