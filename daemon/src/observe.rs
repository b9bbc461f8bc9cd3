//! `headroomd observe`: load the probes, watch every cgroup of the cpu and memory
//! hierarchies for a while, then report each cgroup that saw activity.
use std::{
    collections::HashMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use headroom_common::{CgroupKey, CgroupStats, EventKind, ProbeEvent, RUNQ_HIST_BUCKETS};
use serde::Serialize;

use crate::{
    cgroups::{CgroupIndex, CgroupInfo},
    probes::{ProbeOptions, Probes},
};

/// Arguments of `headroomd observe`.
#[derive(Clone, Debug, clap::Args)]
pub struct ObserveArgs {
    /// How long to watch, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Print one JSON object per cgroup (JSON Lines) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Kernel BTF to read struct offsets from.
    #[arg(long, default_value = "/sys/kernel/btf/vmlinux")]
    pub btf: PathBuf,
    /// Keep the probes' aya-log diagnostics (debug level).
    #[arg(long)]
    pub probe_log: bool,
    /// Cgroups the probes' per-cgroup maps hold (default: those present plus a quarter).
    #[arg(long, value_name = "N")]
    pub max_cgroups: Option<u32>,
}

/// One OOM kill the probes reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OomVictim {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
}

/// What one cgroup went through during the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CgroupReport {
    /// Hierarchy id of the key (0 = cgroup v2).
    pub hierarchy_id: u32,
    /// kernfs id (inode) of the cgroup.
    pub cgroup_id: u64,
    /// Path(s) of the cgroup; empty when it vanished before it could be indexed.
    pub paths: Vec<PathBuf>,
    /// Pod UID when the path is a Pod's.
    pub pod_uid: Option<String>,
    /// Container id (or standalone container name).
    pub container_id: Option<String>,
    /// Throttle episodes.
    pub throttle_episodes: u64,
    /// Throttled time.
    pub throttled_ns: u64,
    /// Run-queue latency histogram: `[lower bound ns, count]` of non-empty log2 buckets.
    pub runq_latency_hist: Vec<[u64; 2]>,
    /// Run-queue latency samples.
    pub runq_latency_count: u64,
    /// Memcg limit reclaim episodes.
    pub memcg_reclaim_episodes: u64,
    /// Memcg limit reclaim stall time.
    pub memcg_reclaim_stall_ns: u64,
    /// Direct reclaim episodes.
    pub direct_reclaim_episodes: u64,
    /// Direct reclaim stall time.
    pub direct_reclaim_stall_ns: u64,
    /// OOM kills.
    pub oom_kills: u64,
    /// The OOM victims, from the ring buffer.
    pub oom_victims: Vec<OomVictim>,
}

impl CgroupReport {
    fn new(key: CgroupKey, stats: &CgroupStats, info: Option<&CgroupInfo>, victims: Vec<OomVictim>) -> Self {
        let runq_latency_hist = (0..RUNQ_HIST_BUCKETS)
            .filter(|&b| stats.runq_hist[b] > 0)
            .map(|b| [if b == 0 { 0 } else { 1u64 << b }, stats.runq_hist[b]])
            .collect();
        let pod = info.and_then(|i| i.pod.as_ref());
        Self {
            hierarchy_id: key.hierarchy_id,
            cgroup_id: key.id,
            paths: info.map(|i| vec![i.path.clone()]).unwrap_or_default(),
            pod_uid: pod.map(|p| p.pod_uid.clone()),
            container_id: pod.and_then(|p| p.container.clone()),
            throttle_episodes: stats.throttle_episodes,
            throttled_ns: stats.throttled_ns,
            runq_latency_hist,
            runq_latency_count: stats.runq_count,
            memcg_reclaim_episodes: stats.memcg_reclaim_episodes,
            memcg_reclaim_stall_ns: stats.memcg_reclaim_stall_ns,
            direct_reclaim_episodes: stats.direct_reclaim_episodes,
            direct_reclaim_stall_ns: stats.direct_reclaim_stall_ns,
            oom_kills: stats.oom_kills,
            oom_victims: victims,
        }
    }

    /// Run-queue latency percentile `q` (0..=1), as the upper bound of its log2 bucket.
    pub fn runq_percentile_ns(&self, q: f64) -> Option<u64> {
        let total: u64 = self.runq_latency_hist.iter().map(|[_, c]| c).sum();
        if total == 0 {
            return None;
        }
        let rank = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for [lower, count] in &self.runq_latency_hist {
            seen += count;
            if seen >= rank {
                return Some(if *lower == 0 { 1 } else { lower * 2 });
            }
        }
        None
    }
}

/// Collects events and keeps the index current while a window runs.
pub struct Observation {
    /// Every cgroup seen during the window (removed ones stay, so late reports keep paths).
    pub index: HashMap<CgroupKey, CgroupInfo>,
    /// OOM victims by memory cgroup.
    pub victims: HashMap<CgroupKey, Vec<OomVictim>>,
    /// Malformed ring-buffer records skipped.
    pub malformed_events: usize,
    index_dirty: bool,
}

impl Observation {
    /// Starts with a fresh walk of the probes' hierarchies.
    pub fn new(probes: &Probes) -> Self {
        let mut observation = Self {
            index: HashMap::new(),
            victims: HashMap::new(),
            malformed_events: 0,
            index_dirty: true,
        };
        observation.refresh_index(probes);
        observation
    }

    /// Re-walks cgroupfs if cgroups were created since the last walk.
    pub fn refresh_index(&mut self, probes: &Probes) {
        if !self.index_dirty {
            return;
        }
        self.merge(CgroupIndex::build(&probes.host.hierarchies()));
        self.index_dirty = false;
    }

    fn merge(&mut self, index: CgroupIndex) {
        for (key, info) in index.into_entries() {
            self.index.insert(key, info);
        }
    }

    /// Drains the ring buffer.
    pub fn poll(&mut self, probes: &mut Probes) {
        let mut dirty = false;
        let mut victims = Vec::new();
        self.malformed_events += probes.drain_events(|event: ProbeEvent| match event.kind {
            k if k == EventKind::OomKill as u32 => victims.push(event),
            k if k == EventKind::CgroupMkdir as u32 => dirty = true,
            _ => {}
        });
        for event in victims {
            let comm_len = event
                .comm
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(event.comm.len());
            let comm = String::from_utf8_lossy(&event.comm[..comm_len]).into_owned();
            self.victims
                .entry(event.cgroup)
                .or_default()
                .push(OomVictim { pid: event.pid, comm });
        }
        if dirty {
            self.index_dirty = true;
            self.refresh_index(probes);
        }
    }

    /// Reports for every cgroup with activity, ordered by path.
    pub fn reports(&self, stats: &HashMap<CgroupKey, CgroupStats>) -> Vec<CgroupReport> {
        let mut reports: Vec<CgroupReport> = stats
            .iter()
            .filter(|(key, s)| **s != CgroupStats::ZERO || self.victims.contains_key(key))
            .map(|(key, s)| {
                CgroupReport::new(
                    *key,
                    s,
                    self.index.get(key),
                    self.victims.get(key).cloned().unwrap_or_default(),
                )
            })
            .collect();
        reports.sort_by(|a, b| a.paths.cmp(&b.paths).then(a.cgroup_id.cmp(&b.cgroup_id)));
        reports
    }
}

/// Runs `headroomd observe`.
pub fn run(args: &ObserveArgs) -> Result<()> {
    ensure_tracefs();
    let options = ProbeOptions {
        btf_path: args.btf.clone(),
        probe_log: args.probe_log,
        max_cgroups: args.max_cgroups,
        ..ProbeOptions::default()
    };
    let mut probes = Probes::load(&options).context("cannot observe")?;
    let duration = Duration::try_from_secs_f64(args.duration)
        .with_context(|| format!("--duration {} is not a usable number of seconds", args.duration))?;
    let mut observation = Observation::new(&probes);
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        std::thread::sleep(
            Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now())),
        );
        observation.poll(&mut probes);
    }
    observation.poll(&mut probes);
    let stats = probes.read_stats()?;
    let reports = observation.reports(&stats);
    let health = probes.health()?;
    if args.json {
        for report in &reports {
            println!("{}", serde_json::to_string(report)?);
        }
    } else {
        print_table(&reports);
        println!(
            "\n{} cgroups with activity; {} of {} probes attached; events dropped {}, map-full drops {}",
            reports.len(),
            probes.attached(),
            probes.programs.len(),
            health.events_dropped,
            health.stats_dropped
        );
    }
    Ok(())
}

fn print_table(reports: &[CgroupReport]) {
    println!(
        "{:<60} {:>9} {:>11} {:>10} {:>10} {:>9} {:>11} {:>11} {:>4}",
        "CGROUP",
        "THROTTLED",
        "THROTTLE_MS",
        "RUNQ_P50",
        "RUNQ_P99",
        "RECLAIMS",
        "MEMCG_STALL",
        "DIRECT_MS",
        "OOM"
    );
    for r in reports {
        let path = r.paths.first().map_or_else(
            || format!("<gone {}:{}>", r.hierarchy_id, r.cgroup_id),
            |p| p.display().to_string(),
        );
        let fmt_us = |ns: Option<u64>| ns.map_or_else(|| "-".to_string(), |ns| format!("{}us", ns / 1000));
        println!(
            "{:<60} {:>9} {:>11.1} {:>10} {:>10} {:>9} {:>9.1}ms {:>9.1}ms {:>4}",
            truncate_left(&path, 60),
            r.throttle_episodes,
            r.throttled_ns as f64 / 1e6,
            fmt_us(r.runq_percentile_ns(0.5)),
            fmt_us(r.runq_percentile_ns(0.99)),
            r.memcg_reclaim_episodes,
            r.memcg_reclaim_stall_ns as f64 / 1e6,
            r.direct_reclaim_stall_ns as f64 / 1e6,
            r.oom_kills
        );
    }
}

fn truncate_left(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let tail: String = text.chars().skip(count - width + 1).collect();
    format!("…{tail}")
}

/// Mounts tracefs when it is missing. The BTF tracepoints headroom uses do not need it,
/// but bpftool and classic tracepoints do, so it is mounted when possible and a failure is
/// only a warning.
pub fn ensure_tracefs() {
    let tracing = std::path::Path::new("/sys/kernel/tracing");
    if tracing.join("events").exists() {
        return;
    }
    let result = nix::mount::mount(
        Some("nodev"),
        tracing,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    );
    if let Err(e) = result {
        tracing::warn!("tracefs is not mounted at /sys/kernel/tracing and mounting it failed: {e}");
    }
}
