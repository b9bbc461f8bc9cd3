//! Loads headroom's eBPF probes into the running kernel and reads what they aggregate.
//!
//! Each program is loaded and attached on its own: one that the kernel refuses (a missing
//! tracepoint on an older kernel, say) is reported in [`Probes::programs`] and the others keep
//! working.
pub mod btf;

use crate::error_chain;
use std::{
    collections::{HashMap, HashSet},
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, Map, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::BtfTracePoint,
};
use headroom_common::{
    CgroupKey, CgroupStats, ProbeEvent, RUNQ_HIST_BUCKETS, RUNQ_SLOTS, RunqModel, RunqSlot, ThrottleModel,
    counter,
};
use tracing::{debug, info, warn};

pub use self::btf::{BtfError, KernelBtf, Needed, PROGRAM_NEEDS, ProbeOffsets};
use crate::cgroups::{CgroupHost, HostError};

/// The probe object built by `cargo xtask build-ebpf` (empty when it was not built).
/// The probe object embedded at build time (empty when the probes were not built).
pub static PROBE_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/headroom-probes.o"));

/// Programs only [`RunqModel::WakeupMap`] needs (not attached otherwise).
const WAKEUP_MAP_ONLY: &[&str] = &["sched_wakeup", "sched_wakeup_new"];

/// Programs in the object and the BTF tracepoint each one attaches to.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("sched_switch", "sched_switch"),
    ("sched_wakeup", "sched_wakeup"),
    ("sched_wakeup_new", "sched_wakeup_new"),
    ("sched_process_exit", "sched_process_exit"),
    ("memcg_reclaim_begin", "mm_vmscan_memcg_reclaim_begin"),
    ("memcg_reclaim_end", "mm_vmscan_memcg_reclaim_end"),
    ("direct_reclaim_begin", "mm_vmscan_direct_reclaim_begin"),
    ("direct_reclaim_end", "mm_vmscan_direct_reclaim_end"),
    ("oom_mark_victim", "mark_victim"),
    ("cgroup_mkdir", "cgroup_mkdir"),
    ("cgroup_rmdir", "cgroup_rmdir"),
];

/// Why the probes could not be loaded. Each message is one sentence an operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Not root (or lacking CAP_BPF + CAP_PERFMON).
    #[error("loading eBPF probes needs root (or CAP_BPF and CAP_PERFMON); run headroomd as root")]
    NotPrivileged,
    /// The binary was built without the probe object.
    #[error("this headroomd was built without its probes; build with `cargo xtask build` (needs bpf-linker)")]
    NotBuilt,
    /// The kernel's type information is missing or lacks what the probes need.
    #[error(transparent)]
    Btf(#[from] BtfError),
    /// The cgroup layout could not be read.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The kernel refused the object as a whole.
    #[error("the kernel refused headroom's probes: {0}")]
    Load(String),
    /// Every program failed to attach.
    #[error("no probe could be attached: {0}")]
    NothingAttached(String),
    /// A map the object should have is missing or has the wrong shape.
    #[error("probe map `{name}` is unusable: {reason}")]
    Map {
        /// The map.
        name: &'static str,
        /// Why.
        reason: String,
    },
}

/// Options for [`Probes::load`].
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// Kernel BTF, normally `/sys/kernel/btf/vmlinux`.
    pub btf_path: PathBuf,
    /// Where cgroups are mounted, normally `/sys/fs/cgroup`.
    pub cgroup_mount: PathBuf,
    /// Keep the probes' aya-log diagnostics (off by default: the verifier then prunes them).
    pub probe_log: bool,
    /// Turn on kernel BPF run-time statistics (`bpf_prog_info.run_time_ns`/`run_cnt`).
    pub run_time_stats: bool,
    /// Cgroups the per-cgroup maps hold; `None`: sized from the cgroups present at load
    /// ([`MapSizing::for_cgroups`]).
    pub max_cgroups: Option<u32>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self {
            btf_path: PathBuf::from("/sys/kernel/btf/vmlinux"),
            cgroup_mount: PathBuf::from(headroom_cgroupfs::setup::DEFAULT_MOUNT),
            probe_log: false,
            run_time_stats: false,
            max_cgroups: None,
        }
    }
}

/// Entries of the per-cgroup maps, chosen at load time.
///
/// The per-CPU maps ([`CgroupStats`] and [`RunqSlot`] values, about 620 bytes per cgroup and
/// CPU) dominate the probes' kernel memory, so their size follows the node: a compiled-in
/// 16,384 entries cost 6.7 MiB per CPU whatever the node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MapSizing {
    /// `max_entries` of `CGROUP_STATS` and `THROTTLED_SINCE` (keys: one per cgroup and
    /// hierarchy the probes count in).
    pub cgroups: u32,
    /// `max_entries` of `RUNQ_SLOT`, indexed by the cpu controller's css id. css ids are dense
    /// (the lowest free id is reused), so as many slots as cgroups cover them; a css with a
    /// larger id falls back to `CGROUP_STATS`.
    pub runq_slots: u32,
    /// `max_entries` of `RQ_THROTTLED` (an LRU of throttled run queues, one per cgroup and CPU
    /// while throttled): eight per cgroup at once on average, so a throttled cgroup spread
    /// over many CPUs does not push out the others' open episodes.
    pub throttled_queues: u32,
}

/// Entries of the maps keyed by thread, for threads caught in the middle of something: in
/// the sched_info model `RUNNABLE_SINCE` holds only threads switched out throttled and not
/// back yet, and `RECLAIM_SINCE` only threads inside reclaim at this moment. Thousands at once
/// is a node in trouble; preallocating 65,536 cost 5 MiB per map whatever the node did.
pub const THREADS_IN_FLIGHT: u32 = 8_192;
/// `RUNNABLE_SINCE` in the wakeup-map model, which keeps an entry per thread.
pub const THREADS_ALL: u32 = 65_536;

impl MapSizing {
    /// Fewest entries: a node starting nearly empty still has room for its first Pods.
    pub const MIN_CGROUPS: u32 = 256;
    /// Most entries (the compiled-in size).
    pub const MAX_CGROUPS: u32 = headroom_common::MAX_CGROUPS;

    /// Room for `present` cgroups plus a quarter for the Pods still to come, rounded up to 64,
    /// within [`Self::MIN_CGROUPS`]..=[`Self::MAX_CGROUPS`]. A full map is counted
    /// (`stats_dropped`), not silent.
    pub fn for_cgroups(present: u32) -> Self {
        let wanted = present
            .saturating_add(present / 4)
            .div_ceil(64)
            .saturating_mul(64);
        Self::exactly(wanted)
    }

    /// Exactly `cgroups` entries (clamped to the range the probes support).
    pub fn exactly(cgroups: u32) -> Self {
        let cgroups = cgroups.clamp(Self::MIN_CGROUPS, Self::MAX_CGROUPS);
        Self {
            cgroups,
            runq_slots: cgroups.min(RUNQ_SLOTS),
            throttled_queues: cgroups.saturating_mul(8).min(Self::MAX_CGROUPS),
        }
    }
}

/// Cgroup directories under `mount` (every hierarchy on v1), bounded by `limit`: the walk
/// stops there, so a huge tree costs no more than the largest size the maps take.
pub fn count_cgroups(mount: &Path, limit: u32) -> u32 {
    let mut count = 0u32;
    let mut stack = vec![mount.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // file_type does not follow symlinks: v1's `cpu -> cpu,cpuacct` is walked once.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                count += 1;
                if count >= limit {
                    return count;
                }
                stack.push(entry.path());
            }
        }
    }
    count
}

/// One probe map's kernel memory, as the kernel accounts it (`memlock` in the map fd's fdinfo).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MapMemory {
    /// Map name in the object.
    pub map: String,
    /// `max_entries`.
    pub max_entries: u32,
    /// Bytes.
    pub memlock: u64,
}

/// `memlock` of the map behind `fd`, from `/proc/self/fdinfo`.
fn fdinfo_memlock(fd: BorrowedFd<'_>) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some((u32::try_from(field("max_entries:")?).ok()?, field("memlock:")?))
}

/// The map data behind any map the object can hold.
fn map_data(map: &Map) -> &MapData {
    match map {
        Map::Array(d)
        | Map::ArrayOfMaps(d)
        | Map::BloomFilter(d)
        | Map::CgroupArray(d)
        | Map::CgroupStorage(d)
        | Map::CgrpStorage(d)
        | Map::CpuMap(d)
        | Map::DevMap(d)
        | Map::DevMapHash(d)
        | Map::HashMap(d)
        | Map::HashOfMaps(d)
        | Map::InodeStorage(d)
        | Map::LpmTrie(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuCgroupStorage(d)
        | Map::PerCpuHashMap(d)
        | Map::PerCpuLruHashMap(d)
        | Map::PerfEventArray(d)
        | Map::ProgramArray(d)
        | Map::Queue(d)
        | Map::ReusePortSockArray(d)
        | Map::RingBuf(d)
        | Map::SockHash(d)
        | Map::SockMap(d)
        | Map::SkStorage(d)
        | Map::Stack(d)
        | Map::StackTraceMap(d)
        | Map::Unsupported(d)
        | Map::XskMap(d) => d,
    }
}

/// One program's state after loading.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProgramStatus {
    /// Program name in the object.
    pub program: &'static str,
    /// BTF tracepoint.
    pub tracepoint: &'static str,
    /// Why it is not attached, if it is not.
    pub error: Option<String>,
}

/// The probes' own health counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProbeHealth {
    /// Ring-buffer events lost because the buffer was full.
    pub events_dropped: u64,
    /// Counter updates lost because the per-cgroup map was full.
    pub stats_dropped: u64,
    /// Kernel reads that failed (a pointer chain broke mid-read).
    pub read_failures: u64,
}

/// Run time of one program from the kernel's BPF statistics.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProgramRunTime {
    /// Program name.
    pub program: &'static str,
    /// Times it ran.
    pub run_count: u64,
    /// Total nanoseconds spent in it.
    pub run_time_ns: u64,
}

/// Loaded and attached probes.
pub struct Probes {
    ebpf: Ebpf,
    events: RingBuf<MapData>,
    logger: Option<aya_log::EbpfLogger<&'static dyn log_facade::Log>>,
    _stats_enabled: Option<OwnedFd>,
    /// The cgroup layout the probes were configured for.
    pub host: CgroupHost,
    /// How throttling is observed on this kernel.
    pub throttle_model: ThrottleModel,
    /// Where run-queue latency comes from on this kernel.
    pub runq_model: RunqModel,
    /// Per-program load and attach results.
    pub programs: Vec<ProgramStatus>,
    /// How the per-cgroup maps were sized.
    pub sizing: MapSizing,
    /// Every map's kernel memory, read once after loading: preallocated maps keep it.
    pub memory: Vec<MapMemory>,
    /// Things that work but less well than they could (missing optional kernel fields).
    pub warnings: Vec<String>,
    /// Removed cgroups whose run-queue slot copies may still carry their key (a CPU restarts
    /// a copy only when it next counts for the slot's new owner): not reported again.
    forgotten: HashSet<CgroupKey>,
}

/// Run-queue slots read beyond the highest one the probes say they took: that mark is raised
/// without atomics and a race between CPUs can lose a raise.
const RUNQ_SLOTS_MARGIN: u32 = 64;

// aya-log speaks the `log` facade; tracing-subscriber forwards it.
use log as log_facade;

impl Probes {
    /// Loads the probes, configured for this kernel's BTF and cgroup layout, and attaches
    /// every program that the kernel accepts.
    pub fn load(options: &ProbeOptions) -> Result<Self, ProbeError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(ProbeError::NotPrivileged);
        }
        if PROBE_OBJECT.is_empty() {
            return Err(ProbeError::NotBuilt);
        }
        let host = CgroupHost::detect(&options.cgroup_mount)?;
        let kernel = KernelBtf::from_file(&options.btf_path)?;
        let offsets = kernel.probe_offsets();
        let mut config = offsets.config;
        let warnings = offsets.warnings.clone();
        config.cgroup_mode = host.version.probe_mode() as u32;
        config.cpu_hierarchy_id = host.cpu.id;
        config.memory_hierarchy_id = host.memory.id;
        let throttle_model = match config.throttle_model {
            1 => ThrottleModel::TaskThrottled,
            2 => ThrottleModel::CfsRqThrottled,
            _ => ThrottleModel::Unavailable,
        };
        let runq_model = match config.runq_model {
            1 => RunqModel::SchedInfo,
            2 => RunqModel::WakeupMap,
            _ => RunqModel::Unavailable,
        };
        for warning in &warnings {
            warn!("{warning}");
        }
        raise_memlock_limit();
        let stats_fd = if options.run_time_stats {
            match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    warn!("BPF run-time statistics unavailable: {e}");
                    None
                }
            }
        } else {
            None
        };

        let sizing = match options.max_cgroups {
            Some(n) => MapSizing::exactly(n),
            None => MapSizing::for_cgroups(count_cgroups(&options.cgroup_mount, MapSizing::MAX_CGROUPS)),
        };
        let mut loader = EbpfLoader::new();
        loader.override_global("HEADROOM_CONFIG", &config, true);
        loader
            .map_max_entries("CGROUP_STATS", sizing.cgroups)
            .map_max_entries("THROTTLED_SINCE", sizing.cgroups)
            .map_max_entries("RQ_THROTTLED", sizing.throttled_queues)
            .map_max_entries("RUNQ_SLOT", sizing.runq_slots)
            .map_max_entries(
                "RUNNABLE_SINCE",
                if runq_model == RunqModel::WakeupMap {
                    THREADS_ALL
                } else {
                    THREADS_IN_FLIGHT
                },
            )
            .map_max_entries("RECLAIM_SINCE", THREADS_IN_FLIGHT);
        if !options.probe_log {
            // Level 0: every log call is dead code and the verifier drops it.
            loader.override_global(aya_log::LEVEL, &0u8, false);
        }
        let mut ebpf = loader
            .load(PROBE_OBJECT)
            .map_err(|e| ProbeError::Load(error_chain(&e)))?;
        let logger = if options.probe_log {
            aya_log::EbpfLogger::init(&mut ebpf)
                .map_err(|e| warn!("probe diagnostics unavailable: {e}"))
                .ok()
        } else {
            None
        };
        let aya_btf = aya::Btf::parse_file(&options.btf_path, aya::Endianness::default())
            .map_err(|e| ProbeError::Load(format!("kernel BTF: {e}")))?;
        let mut programs = Vec::with_capacity(PROGRAMS.len());
        for &(program, tracepoint) in PROGRAMS {
            if config.runq_model != RunqModel::WakeupMap as u32 && WAKEUP_MAP_ONLY.contains(&program) {
                debug!(
                    program,
                    "not attached: run-queue latency comes from the scheduler's sched_info"
                );
                continue;
            }
            // A program whose kernel fields this BTF lacks is not loaded: it would read the
            // wrong memory. The others still load.
            let error = match offsets.refusal(program) {
                Some(refused) => Some(refused),
                None => attach(&mut ebpf, program, tracepoint, &aya_btf).err(),
            };
            if let Some(error) = &error {
                warn!(program, tracepoint, "probe not attached: {error}");
            }
            programs.push(ProgramStatus {
                program,
                tracepoint,
                error,
            });
        }
        if programs.iter().all(|p| p.error.is_some()) {
            let reasons: Vec<String> = programs
                .iter()
                .filter_map(|p| p.error.as_ref().map(|e| format!("{}: {e}", p.program)))
                .collect();
            return Err(ProbeError::NothingAttached(reasons.join("; ")));
        }
        let events = ebpf
            .take_map("EVENTS")
            .ok_or(ProbeError::Map {
                name: "EVENTS",
                reason: "missing".into(),
            })
            .and_then(|map| {
                RingBuf::try_from(map).map_err(|e| ProbeError::Map {
                    name: "EVENTS",
                    reason: e.to_string(),
                })
            })?;
        let probes = Self {
            ebpf,
            events,
            logger,
            _stats_enabled: stats_fd,
            host,
            throttle_model,
            runq_model,
            programs,
            sizing,
            memory: Vec::new(),
            warnings,
            forgotten: HashSet::new(),
        };
        let mut probes = probes;
        probes.memory = probes.map_memory();
        let memory = &probes.memory;
        info!(
            cgroups = sizing.cgroups,
            runq_slots = sizing.runq_slots,
            cpus = aya::util::nr_cpus().unwrap_or(0),
            total_bytes = memory.iter().map(|m| m.memlock).sum::<u64>(),
            "probe maps' kernel memory"
        );
        info!(
            version = ?probes.host.version,
            throttle_model = ?probes.throttle_model,
            runq_model = if config.runq_model == RunqModel::SchedInfo as u32 { "sched_info" } else { "wakeup map" },
            attached = probes.programs.iter().filter(|p| p.error.is_none()).count(),
            "probes loaded"
        );
        Ok(probes)
    }

    /// The ring buffer's fd: readable (poll(2), level-triggered) while events wait. The probes
    /// output with the kernel's adaptive wake-up, so a reader blocked in poll is woken once per
    /// burst, when it has caught up.
    pub fn events_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Every probe map's kernel memory, from the kernel's own accounting (fdinfo `memlock`).
    pub fn map_memory(&self) -> Vec<MapMemory> {
        let maps = self
            .ebpf
            .maps()
            .map(|(name, map)| (name.to_string(), map_data(map).fd().as_fd()))
            .chain(std::iter::once(("EVENTS".to_string(), self.events.as_fd())));
        let mut out: Vec<MapMemory> = maps
            .filter_map(|(map, fd)| {
                let (max_entries, memlock) = fdinfo_memlock(fd)?;
                Some(MapMemory {
                    map,
                    max_entries,
                    memlock,
                })
            })
            .collect();
        out.sort_by(|a, b| a.map.cmp(&b.map));
        out
    }

    /// Cumulative counters of every cgroup seen so far, summed over CPUs.
    pub fn read_stats(&mut self) -> Result<HashMap<CgroupKey, CgroupStats>, ProbeError> {
        let map = self.ebpf.map("CGROUP_STATS").ok_or(ProbeError::Map {
            name: "CGROUP_STATS",
            reason: "missing".into(),
        })?;
        let stats: PerCpuHashMap<_, CgroupKey, CgroupStats> =
            PerCpuHashMap::try_from(map).map_err(|e| ProbeError::Map {
                name: "CGROUP_STATS",
                reason: e.to_string(),
            })?;
        let mut out = HashMap::new();
        for entry in stats.iter() {
            // An entry deleted while iterating is skipped, not fatal.
            let Ok((key, per_cpu)) = entry else { continue };
            let mut total = CgroupStats::ZERO;
            for value in per_cpu.iter() {
                add_stats(&mut total, value);
            }
            out.insert(key, total);
        }
        self.add_runq_slots(&mut out)?;
        Ok(out)
    }

    /// Adds the run-queue slots' counters to `out`, by the key each CPU's copy carries.
    fn add_runq_slots(&mut self, out: &mut HashMap<CgroupKey, CgroupStats>) -> Result<(), ProbeError> {
        let map_error = |name: &'static str| {
            move |e: aya::maps::MapError| ProbeError::Map {
                name,
                reason: e.to_string(),
            }
        };
        let used = {
            let map = self.ebpf.map("RUNQ_SLOTS_USED").ok_or(ProbeError::Map {
                name: "RUNQ_SLOTS_USED",
                reason: "missing".into(),
            })?;
            let used: Array<_, u64> = Array::try_from(map).map_err(map_error("RUNQ_SLOTS_USED"))?;
            used.get(&0, 0).map_err(map_error("RUNQ_SLOTS_USED"))?
        };
        let end = u32::try_from(used)
            .unwrap_or(RUNQ_SLOTS)
            .saturating_add(RUNQ_SLOTS_MARGIN)
            .min(self.sizing.runq_slots);
        let map = self.ebpf.map("RUNQ_SLOT").ok_or(ProbeError::Map {
            name: "RUNQ_SLOT",
            reason: "missing".into(),
        })?;
        let slots: PerCpuArray<_, RunqSlot> = PerCpuArray::try_from(map).map_err(map_error("RUNQ_SLOT"))?;
        let mut seen_forgotten = HashSet::new();
        for index in 0..end {
            let per_cpu = slots.get(&index, 0).map_err(map_error("RUNQ_SLOT"))?;
            for slot in per_cpu.iter().filter(|s| s.key != CgroupKey::default()) {
                if self.forgotten.contains(&slot.key) {
                    seen_forgotten.insert(slot.key);
                    continue;
                }
                let total = out.entry(slot.key).or_insert(CgroupStats::ZERO);
                total.runq_count += slot.runq_count;
                total.runq_total_ns += slot.runq_total_ns;
                for (sum, add) in total.runq_hist.iter_mut().zip(&slot.runq_hist) {
                    *sum += add;
                }
            }
        }
        // A forgotten key no copy carries any more cannot come back (cgroup ids are unique).
        self.forgotten = seen_forgotten;
        Ok(())
    }

    /// Drops the counters of a cgroup that was removed: the kernel map is bounded
    /// ([`headroom_common::MAX_CGROUPS`]), and a node that creates and removes Pods all day
    /// would otherwise fill it with the dead.
    pub fn forget_cgroup(&mut self, key: &CgroupKey) {
        let Some(map) = self.ebpf.map_mut("CGROUP_STATS") else {
            return;
        };
        if let Ok(mut stats) = PerCpuHashMap::<_, CgroupKey, CgroupStats>::try_from(map) {
            // Absent (never active) is fine.
            let _ = stats.remove(key);
        }
        self.forgotten.insert(*key);
    }

    /// Calls `handle` for every event waiting in the ring buffer; returns how many records
    /// were malformed (too short), which are skipped.
    pub fn drain_events(&mut self, mut handle: impl FnMut(ProbeEvent)) -> usize {
        let mut malformed = 0;
        while let Some(item) = self.events.next() {
            if item.len() < size_of::<ProbeEvent>() {
                malformed += 1;
                continue;
            }
            // SAFETY: the record holds at least size_of::<ProbeEvent>() bytes written by the
            // probe from a `ProbeEvent`; read_unaligned makes no alignment assumption.
            let event = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<ProbeEvent>()) };
            handle(event);
        }
        if let Some(logger) = &mut self.logger {
            logger.flush();
        }
        malformed
    }

    /// The probes' own health counters.
    pub fn health(&self) -> Result<ProbeHealth, ProbeError> {
        let map = self.ebpf.map("COUNTERS").ok_or(ProbeError::Map {
            name: "COUNTERS",
            reason: "missing".into(),
        })?;
        let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(map).map_err(|e| ProbeError::Map {
            name: "COUNTERS",
            reason: e.to_string(),
        })?;
        let sum = |index: u32| {
            counters
                .get(&index, 0)
                .map(|v| v.iter().sum::<u64>())
                .unwrap_or(0)
        };
        Ok(ProbeHealth {
            events_dropped: sum(counter::EVENTS_DROPPED),
            stats_dropped: sum(counter::STATS_DROPPED),
            read_failures: sum(counter::READ_FAILURES),
        })
    }

    /// Kernel run-time statistics per program (zero unless `run_time_stats` was set).
    pub fn run_times(&self) -> Vec<ProgramRunTime> {
        PROGRAMS
            .iter()
            .filter_map(|&(program, _)| {
                let info = self.ebpf.program(program)?.info().ok()?;
                Some(ProgramRunTime {
                    program,
                    run_count: info.run_count(),
                    run_time_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                })
            })
            .collect()
    }

    /// Number of attached programs.
    pub fn attached(&self) -> usize {
        self.programs.iter().filter(|p| p.error.is_none()).count()
    }
}

fn attach(ebpf: &mut Ebpf, program: &str, tracepoint: &str, btf: &aya::Btf) -> Result<(), String> {
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| "not in the probe object".to_string())?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| e.to_string())?;
    prog.load(tracepoint, btf).map_err(|e| error_chain(&e))?;
    prog.attach().map_err(|e| error_chain(&e))?;
    Ok(())
}

/// Adds one CPU's counters into `total`.
pub fn add_stats(total: &mut CgroupStats, value: &CgroupStats) {
    total.throttle_episodes += value.throttle_episodes;
    total.throttled_ns += value.throttled_ns;
    for bucket in 0..RUNQ_HIST_BUCKETS {
        total.runq_hist[bucket] += value.runq_hist[bucket];
    }
    total.runq_count += value.runq_count;
    total.runq_total_ns += value.runq_total_ns;
    total.memcg_reclaim_episodes += value.memcg_reclaim_episodes;
    total.memcg_reclaim_stall_ns += value.memcg_reclaim_stall_ns;
    total.direct_reclaim_episodes += value.direct_reclaim_episodes;
    total.direct_reclaim_stall_ns += value.direct_reclaim_stall_ns;
    total.oom_kills += value.oom_kills;
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK
/// (https://lwn.net/Articles/837122/); newer ones use memcg accounting and ignore it.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid, initialised struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } != 0 {
        tracing::debug!(
            "could not raise RLIMIT_MEMLOCK (fine on Linux ≥ 5.11): {}",
            std::io::Error::last_os_error()
        );
    }
}

/// CLOCK_BOOTTIME now, nanoseconds: the clock the probes stamp events with
/// (`bpf_ktime_get_boot_ns`), so `boottime_ns() - event.timestamp_ns` is an event's age.
pub fn boottime_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec()).unwrap_or(0)
        })
        .unwrap_or(0)
}
