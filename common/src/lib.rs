//! Records shared by the probes (`ebpf/`, `no_std`) and userspace (`daemon/`).
//!
//! Everything here is `#[repr(C)]`, `Copy`, padded explicitly (no implicit holes, so the
//! byte image is the same on both sides) and free of logic.
#![no_std]

/// Hierarchy id used in [`CgroupKey`] for cgroup v2 (the unified hierarchy).
///
/// v1 hierarchy ids start at 1 (`/proc/cgroups`, second column), so 0 never collides.
pub const UNIFIED_HIERARCHY_ID: u32 = 0;

/// Number of log2 buckets in the run-queue latency histogram: bucket `i` counts waits
/// of `[2^i, 2^(i+1))` nanoseconds; the last bucket also holds everything longer.
pub const RUNQ_HIST_BUCKETS: usize = 32;

/// Maximum number of cgroups the per-cgroup statistics map holds.
pub const MAX_CGROUPS: u32 = 16_384;

/// Slots of the per-CPU run-queue counters ([`RunqSlot`]), indexed by the cpu controller's css
/// id. css ids are small and dense (`idr_alloc` from 2, freed ids reused), so this covers every
/// cpu cgroup of a node; a css with a larger id falls back to the per-cgroup hash map.
pub const RUNQ_SLOTS: u32 = 4_096;

/// Identifies one cgroup in one hierarchy.
///
/// `id` is the cgroup's kernfs node id, which on 64-bit kernels equals the inode number
/// of its directory (`stat(dir).st_ino`). Each cgroup v1 hierarchy allocates ids on its
/// own, so ids of the cpu and memory hierarchies collide: the hierarchy id is part of the key.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CgroupKey {
    /// `cgroup_root.hierarchy_id` for v1, [`UNIFIED_HIERARCHY_ID`] for v2.
    pub hierarchy_id: u32,
    /// Explicit padding; always zero.
    pub pad: u32,
    /// `cgroup.kn->id` (the directory's inode number).
    pub id: u64,
}

impl CgroupKey {
    /// A key for cgroup `id` of hierarchy `hierarchy_id`.
    pub const fn new(hierarchy_id: u32, id: u64) -> Self {
        Self {
            hierarchy_id,
            pad: 0,
            id,
        }
    }
}

/// Per-cgroup counters, aggregated in the kernel in a per-CPU hash map.
///
/// CPU fields are filled under the key of the task's cpu-controller cgroup, memory fields
/// under its memory-controller cgroup (on cgroup v2 both are the same key).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupStats {
    /// Throttled periods, as `cpu.stat` `nr_throttled` (and cAdvisor's
    /// `container_cpu_cfs_throttled_periods_total`) count them. An episode runs from a task of
    /// the cgroup switched out because its CFS bandwidth ran out (while none was open) to the
    /// switch-in or exit of one of its throttled tasks; it adds the bandwidth periods the
    /// kernel's period timer accounted meanwhile (`cfs_bandwidth.nr_periods`), which is one
    /// per episode unless the timer ran late and refilled several periods at once. Where the
    /// kernel's BTF lacks those fields, each episode adds one.
    pub throttle_episodes: u64,
    /// Nanoseconds the cgroup's run queues spent throttled, summed over CPUs as the kernel's
    /// `cpu.stat` `throttled_time`/`throttled_usec` (and cAdvisor's
    /// `container_cpu_cfs_throttled_seconds_total`) do: each CPU's queue counts from its
    /// throttled switch-out to the switch-in (or exit) of one of its throttled tasks, cut back
    /// to the period boundary when the period timer refilled the quota meanwhile (the task
    /// may wait for its CPU after the kernel unthrottled it). Two CPUs throttled for 80 ms
    /// count 160 ms.
    pub throttled_ns: u64,
    /// Number of run-queue latency samples. (Before the histogram: every context switch
    /// updates these two and one bucket, so they share the cache line of the fields above.)
    pub runq_count: u64,
    /// Sum of run-queue latency samples in nanoseconds.
    pub runq_total_ns: u64,
    /// Run-queue latency (enqueued — woken or preempted — to switch-in), log2 buckets of
    /// nanoseconds.
    pub runq_hist: [u64; RUNQ_HIST_BUCKETS],
    /// `mm_vmscan_memcg_reclaim_begin`/`end` pairs (memcg limit reclaim).
    pub memcg_reclaim_episodes: u64,
    /// Nanoseconds spent in memcg limit reclaim.
    pub memcg_reclaim_stall_ns: u64,
    /// `mm_vmscan_direct_reclaim_begin`/`end` pairs (global direct reclaim).
    pub direct_reclaim_episodes: u64,
    /// Nanoseconds spent in direct reclaim.
    pub direct_reclaim_stall_ns: u64,
    /// Tasks of this cgroup chosen as OOM victims (`oom:mark_victim`).
    pub oom_kills: u64,
}

impl CgroupStats {
    /// All counters zero.
    pub const ZERO: Self = Self {
        throttle_episodes: 0,
        throttled_ns: 0,
        runq_hist: [0; RUNQ_HIST_BUCKETS],
        runq_count: 0,
        runq_total_ns: 0,
        memcg_reclaim_episodes: 0,
        memcg_reclaim_stall_ns: 0,
        direct_reclaim_episodes: 0,
        direct_reclaim_stall_ns: 0,
        oom_kills: 0,
    };
}

/// How the kernel marks a task that was switched out for lack of CFS bandwidth.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrottleModel {
    /// Throttling is not observed (the fields are missing from the kernel's BTF).
    Unavailable = 0,
    /// Linux ≥ 6.18, task-based throttling: `task_struct.throttled` is set.
    TaskThrottled = 1,
    /// Older kernels: `task_struct.se.cfs_rq->throttled` is non-zero.
    CfsRqThrottled = 2,
}

/// Where run-queue latency comes from.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunqModel {
    /// Not observed (neither model's fields are in the kernel's BTF).
    Unavailable = 0,
    /// The scheduler's own bookkeeping (`CONFIG_SCHED_INFO`): at `sched_switch` the incoming
    /// task's `sched_info.last_queued` still holds when it was enqueued, stamped with its run
    /// queue's `clock`, which `__schedule` has just updated. No wakeup probes, no per-task map,
    /// no clock read.
    SchedInfo = 1,
    /// Wakeup probes (`sched_wakeup`, `sched_wakeup_new`) stamp a per-thread hash map with
    /// `bpf_ktime_get_ns`, as runqlat does.
    WakeupMap = 2,
}

/// Which cgroup a probe attributes a task to.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupMode {
    /// cgroup v2: `task->cgroups->dfl_cgrp`.
    Unified = 2,
    /// cgroup v1 (legacy or hybrid): `task->cgroups->subsys[controller]->cgroup`.
    Legacy = 1,
}

/// Load-time configuration of the probes: kernel struct offsets read from
/// `/sys/kernel/btf/vmlinux` (Rust eBPF has no CO-RE) and the host's cgroup layout.
///
/// Stored in the `.rodata` global `HEADROOM_CONFIG`, overridden before load, so the
/// verifier sees constants and prunes branches that cannot run.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProbeConfig {
    /// [`CgroupMode`] as `u32`; 0 means "not configured": the probes do nothing.
    pub cgroup_mode: u32,
    /// [`ThrottleModel`] as `u32`.
    pub throttle_model: u32,
    /// v1 hierarchy id of the cpu controller.
    pub cpu_hierarchy_id: u32,
    /// v1 hierarchy id of the memory controller.
    pub memory_hierarchy_id: u32,
    /// `enum cgroup_subsys_id` value of `cpu_cgrp_id`.
    pub cpu_subsys_index: u32,
    /// `enum cgroup_subsys_id` value of `memory_cgrp_id`.
    pub memory_subsys_index: u32,
    /// `task_struct.cgroups` (`struct css_set *`).
    pub task_cgroups: u32,
    /// `task_struct.pid`.
    pub task_pid: u32,
    /// `task_struct.tgid`.
    pub task_tgid: u32,
    /// `task_struct.throttled` (byte offset of the `bool`), [`ThrottleModel::TaskThrottled`].
    pub task_throttled: u32,
    /// `task_struct.se` plus `sched_entity.cfs_rq`, [`ThrottleModel::CfsRqThrottled`] and
    /// [`RunqModel::SchedInfo`].
    pub task_se_cfs_rq: u32,
    /// `cfs_rq.throttled`, [`ThrottleModel::CfsRqThrottled`].
    pub cfs_rq_throttled: u32,
    /// `task_struct.comm`.
    pub task_comm: u32,
    /// `css_set.subsys` (array of `struct cgroup_subsys_state *`).
    pub css_set_subsys: u32,
    /// `css_set.dfl_cgrp`.
    pub css_set_dfl_cgrp: u32,
    /// `cgroup_subsys_state.cgroup`.
    pub css_cgroup: u32,
    /// `cgroup.kn`.
    pub cgroup_kn: u32,
    /// `kernfs_node.id`.
    pub kernfs_node_id: u32,
    /// `cgroup.root`.
    pub cgroup_root: u32,
    /// `cgroup_root.hierarchy_id`.
    pub cgroup_root_hierarchy_id: u32,
    /// [`RunqModel`] as `u32`.
    pub runq_model: u32,
    /// `task_struct.sched_info` plus `sched_info.last_queued`, [`RunqModel::SchedInfo`].
    pub task_last_queued: u32,
    /// `cfs_rq.rq`, [`RunqModel::SchedInfo`] (with `task_se_cfs_rq`).
    pub cfs_rq_rq: u32,
    /// `rq.clock`, [`RunqModel::SchedInfo`].
    pub rq_clock: u32,
    /// `cgroup_subsys_state.id` (the index into the run-queue slots).
    pub css_id: u32,
    /// `task_struct.sched_task_group` (the task's `struct task_group`); 0 when the group's
    /// CFS bandwidth fields below are not in this kernel's BTF.
    pub task_sched_task_group: u32,
    /// `task_group.cfs_bandwidth.nr_periods`: bandwidth periods the kernel's timer accounted.
    pub tg_nr_periods: u32,
    /// `task_group.cfs_bandwidth.period` (ns).
    pub tg_period: u32,
    /// `task_group.cfs_bandwidth.period_timer.node.expires`: the next period boundary
    /// (CLOCK_MONOTONIC, the BPF clock).
    pub tg_period_expires: u32,
    /// Padding (keeps the size a multiple of 8).
    pub pad: u32,
}

/// Run-queue counters of one cpu cgroup on one CPU, at index `css->id` of the cpu controller's
/// css: the hot path of `sched_switch` reaches it with two inlined array lookups instead of a
/// hash lookup. `key` says whose counters these are; a CPU finding another key in its copy
/// (the css id was freed and reused) starts the copy afresh.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunqSlot {
    /// The cgroup counted here (zero: unused).
    pub key: CgroupKey,
    /// As [`CgroupStats::runq_count`].
    pub runq_count: u64,
    /// As [`CgroupStats::runq_total_ns`].
    pub runq_total_ns: u64,
    /// As [`CgroupStats::runq_hist`].
    pub runq_hist: [u64; RUNQ_HIST_BUCKETS],
}

impl ProbeConfig {
    /// All zero: "not configured", the probes do nothing (the value compiled into the object).
    pub const UNCONFIGURED: Self = Self {
        cgroup_mode: 0,
        throttle_model: 0,
        cpu_hierarchy_id: 0,
        memory_hierarchy_id: 0,
        cpu_subsys_index: 0,
        memory_subsys_index: 0,
        task_cgroups: 0,
        task_pid: 0,
        task_tgid: 0,
        task_throttled: 0,
        task_se_cfs_rq: 0,
        cfs_rq_throttled: 0,
        task_comm: 0,
        css_set_subsys: 0,
        css_set_dfl_cgrp: 0,
        css_cgroup: 0,
        cgroup_kn: 0,
        kernfs_node_id: 0,
        cgroup_root: 0,
        cgroup_root_hierarchy_id: 0,
        runq_model: 0,
        task_last_queued: 0,
        cfs_rq_rq: 0,
        rq_clock: 0,
        css_id: 0,
        task_sched_task_group: 0,
        tg_nr_periods: 0,
        tg_period: 0,
        tg_period_expires: 0,
        pad: 0,
    };
}

/// Kinds of [`ProbeEvent`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `oom:mark_victim`: the task `pid` was chosen by the OOM killer.
    OomKill = 1,
    /// `cgroup:cgroup_mkdir`: a cgroup was created (`cgroup` holds it).
    CgroupMkdir = 2,
    /// `cgroup:cgroup_rmdir`: a cgroup was removed (`cgroup` holds it).
    CgroupRmdir = 3,
    /// A cpu cgroup's node-wide throttle episode began: the first of its tasks switched out for
    /// lack of CFS bandwidth while none was open (`cgroup` and `cpu_cgroup` hold the cpu cgroup,
    /// `pid` the task's process).
    ThrottleBegin = 4,
    /// That episode ended: a throttled task of the cgroup switched in (or exited);
    /// `duration_ns` is how long it was open.
    ThrottleEnd = 5,
    /// A task's memcg limit reclaim ended (`mm_vmscan_memcg_reclaim_end`): `cgroup` is its
    /// memory cgroup, `duration_ns` the stall.
    MemcgReclaimStall = 6,
    /// A task's direct (global) reclaim ended (`mm_vmscan_direct_reclaim_end`), as above.
    DirectReclaimStall = 7,
}

impl EventKind {
    /// The kind of a raw `ProbeEvent::kind`, `None` for one this build does not know.
    pub const fn from_raw(kind: u32) -> Option<Self> {
        Some(match kind {
            1 => Self::OomKill,
            2 => Self::CgroupMkdir,
            3 => Self::CgroupRmdir,
            4 => Self::ThrottleBegin,
            5 => Self::ThrottleEnd,
            6 => Self::MemcgReclaimStall,
            7 => Self::DirectReclaimStall,
            _ => return None,
        })
    }
}

/// A discrete event, sent through the ring buffer (counters never are).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeEvent {
    /// [`EventKind`] as `u32`.
    pub kind: u32,
    /// Thread group id (the process id) for task events, 0 otherwise.
    pub pid: u32,
    /// `bpf_ktime_get_boot_ns()` when the event fired: CLOCK_BOOTTIME, which userspace reads
    /// with `clock_gettime(CLOCK_BOOTTIME)` to tell how old the event is.
    pub timestamp_ns: u64,
    /// OOM kills and reclaim stalls: the task's memory cgroup; throttle episodes: its cpu cgroup;
    /// cgroup events: the cgroup itself.
    pub cgroup: CgroupKey,
    /// OOM kills and throttle episodes: the task's cpu cgroup; zero otherwise.
    pub cpu_cgroup: CgroupKey,
    /// `task_struct.comm` for OOM kills (zero otherwise: the other events skip the read).
    pub comm: [u8; 16],
    /// How long the episode or stall lasted (throttle end, reclaim stalls), nanoseconds; 0
    /// otherwise.
    pub duration_ns: u64,
}

/// Indexes of the `COUNTERS` per-CPU array: the probes' own health.
pub mod counter {
    /// Ring buffer reservations that failed (buffer full): events lost.
    pub const EVENTS_DROPPED: u32 = 0;
    /// Per-cgroup map updates that failed (map full).
    pub const STATS_DROPPED: u32 = 1;
    /// Kernel memory reads that failed (a pointer chain broke).
    pub const READ_FAILURES: u32 = 2;
    /// Number of counters.
    pub const COUNT: u32 = 3;
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: all four types are `#[repr(C)]`, `Copy`, contain only integers and
    // have no implicit padding (checked by the size assertions below).
    unsafe impl aya::Pod for super::CgroupKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::CgroupStats {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::RunqSlot {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::ProbeConfig {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::ProbeEvent {}

    const _: () = assert!(core::mem::size_of::<super::CgroupKey>() == 16);
    const _: () = assert!(core::mem::size_of::<super::CgroupStats>() == 8 * (2 + 32 + 2 + 5));
    const _: () = assert!(core::mem::size_of::<super::ProbeConfig>() == 4 * 30);
    const _: () = assert!(core::mem::size_of::<super::RunqSlot>() == 16 + 8 * (2 + 32));
    const _: () = assert!(core::mem::size_of::<super::ProbeEvent>() == 4 + 4 + 8 + 16 + 16 + 16 + 8);
}
