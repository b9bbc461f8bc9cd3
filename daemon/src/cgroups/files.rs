//! Parsers for the cgroup files the collector reads (pure, so they are tested on text), and
//! the reading of one cgroup's files into a pipeline record.
use std::{path::Path, time::Instant};

use headroom_common::{CgroupKey, CgroupMode};

use crate::pipeline::{CgroupFiles, CpuStat, MemoryStat, PsiLine, PsiReading};

/// Value of `key` in a flat-keyed file (`cpu.stat`, `memory.stat`, `memory.events`).
pub fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// `cpu.stat`: v1 reports `throttled_time` in ns, v2 `throttled_usec` and `usage_usec`.
pub fn parse_cpu_stat(text: &str, mode: CgroupMode) -> Option<CpuStat> {
    let nr_periods = flat_keyed(text, "nr_periods")?;
    let nr_throttled = flat_keyed(text, "nr_throttled")?;
    Some(match mode {
        CgroupMode::Legacy => CpuStat {
            usage_ns: 0,
            nr_periods,
            nr_throttled,
            throttled_ns: flat_keyed(text, "throttled_time")?,
        },
        CgroupMode::Unified => CpuStat {
            usage_ns: flat_keyed(text, "usage_usec").unwrap_or(0).saturating_mul(1000),
            nr_periods,
            nr_throttled,
            throttled_ns: flat_keyed(text, "throttled_usec")?.saturating_mul(1000),
        },
    })
}

/// Working set as cAdvisor computes it: usage minus inactive file pages.
pub fn working_set(usage: u64, memory_stat: &str, mode: CgroupMode) -> MemoryStat {
    let inactive_key = match mode {
        CgroupMode::Legacy => "total_inactive_file",
        CgroupMode::Unified => "inactive_file",
    };
    let inactive = flat_keyed(memory_stat, inactive_key).unwrap_or(0);
    MemoryStat {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(inactive),
    }
}

/// A PSI file (`some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and maybe a `full` line).
pub fn parse_psi(text: &str) -> Option<PsiReading> {
    let line = |kind: &str| -> Option<PsiLine> {
        let rest = text.lines().find_map(|l| l.strip_prefix(kind))?;
        let field = |name: &str| rest.split_whitespace().find_map(|f| f.strip_prefix(name));
        Some(PsiLine {
            avg10: field("avg10=")?.parse().ok()?,
            avg60: field("avg60=")?.parse().ok()?,
            avg300: field("avg300=")?.parse().ok()?,
            total_us: field("total=")?.parse().ok()?,
        })
    };
    Some(PsiReading {
        some: line("some ")?,
        full: line("full "),
    })
}

/// Reads what the pipeline needs from the cgroup `dir` of the cpu and/or memory controller.
/// Missing or unreadable files (the cgroup vanished) leave their part `None`.
pub fn read_cgroup_files(
    key: CgroupKey,
    dir: &Path,
    mode: CgroupMode,
    cpu: bool,
    memory: bool,
    cpuacct_dir: Option<&Path>,
) -> CgroupFiles {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let mut files = CgroupFiles::new(key, Instant::now());
    if cpu {
        files.cpu = read("cpu.stat")
            .and_then(|t| parse_cpu_stat(&t, mode))
            .map(|mut stat| {
                if let Some(usage) = cpuacct_dir
                    .and_then(|d| std::fs::read_to_string(d.join("cpuacct.usage")).ok())
                    .and_then(|t| t.trim().parse().ok())
                {
                    stat.usage_ns = usage;
                }
                stat
            });
        files.psi_cpu = read("cpu.pressure").and_then(|t| parse_psi(&t));
    }
    if memory {
        let (usage_file, stat_file) = match mode {
            CgroupMode::Legacy => ("memory.usage_in_bytes", "memory.stat"),
            CgroupMode::Unified => ("memory.current", "memory.stat"),
        };
        let usage = read(usage_file).and_then(|t| t.trim().parse().ok());
        files.memory = usage.map(|u| working_set(u, &read(stat_file).unwrap_or_default(), mode));
        if mode == CgroupMode::Unified {
            files.oom_kills = read("memory.events").and_then(|t| flat_keyed(&t, "oom_kill"));
            files.psi_memory = read("memory.pressure").and_then(|t| parse_psi(&t));
            files.psi_io = read("io.pressure").and_then(|t| parse_psi(&t));
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_v1_and_v2() {
        let v1 = "nr_periods 33\nnr_throttled 31\nthrottled_time 2754365905\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(
            parse_cpu_stat(v1, CgroupMode::Legacy),
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
            parse_cpu_stat(v2, CgroupMode::Unified),
            Some(CpuStat {
                usage_ns: 5_000_000,
                nr_periods: 10,
                nr_throttled: 9,
                throttled_ns: 700_000
            })
        );
        assert_eq!(parse_cpu_stat("garbage\n", CgroupMode::Legacy), None);
        assert_eq!(
            parse_cpu_stat("nr_periods x\nnr_throttled 1\n", CgroupMode::Legacy),
            None
        );
    }

    #[test]
    fn working_set_subtracts_inactive_file() {
        let stat = "cache 100\ntotal_inactive_file 4096\ninactive_file 1\n";
        assert_eq!(
            working_set(10_000, stat, CgroupMode::Legacy).working_set_bytes,
            10_000 - 4096
        );
        assert_eq!(
            working_set(10, "inactive_file 4096\n", CgroupMode::Unified).working_set_bytes,
            0
        );
    }

    #[test]
    fn psi_lines() {
        let text = "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";
        let psi = parse_psi(text).expect("psi");
        assert!((psi.some.avg10 - 1.5).abs() < 1e-9);
        assert_eq!(psi.some.total_us, 12345);
        assert_eq!(psi.full.map(|f| f.total_us), Some(7));
        assert!(parse_psi("some avg10=x\n").is_none());
    }

    #[test]
    fn vanished_cgroup_reads_as_absent() {
        let files = read_cgroup_files(
            CgroupKey::new(1, 2),
            Path::new("/nonexistent/cgroup"),
            CgroupMode::Legacy,
            true,
            true,
            None,
        );
        assert!(files.cpu.is_none() && files.memory.is_none());
    }
}
