//! headroom's probes. Attached only through BTF tracepoints (tp_btf): kprobes are compiled
//! out and fentry is refused on the nodes we target (see `shared/notes/toolchain-and-kernel.md`).
//!
//! Struct offsets are not known at compile time (Rust eBPF has no CO-RE): userspace reads
//! them from `/sys/kernel/btf/vmlinux` and stores them in [`HEADROOM_CONFIG`] before load.
//! Everything is aggregated per cgroup in per-CPU maps; only discrete events go through the
//! ring buffer: OOM kills, cgroup creation and removal, a cgroup's throttle episode beginning
//! and ending, and reclaim stalls ending. Each is stamped with CLOCK_BOOTTIME
//! (`bpf_ktime_get_boot_ns`, Linux 5.8+), so userspace can tell how old it is on its own clock.
#![deny(clippy::undocumented_unsafe_blocks)]
#![no_std]
#![no_main]
// `atomic_xadd`: see `add_pending`. The probes are built with RUSTC_BOOTSTRAP (build-std).
#![allow(internal_features)]
#![feature(core_intrinsics, adt_const_params)]

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task_btf, bpf_ktime_get_boot_ns, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::BtfTracePointContext,
};
use aya_log_ebpf::debug;
use headroom_common::{
    CgroupKey, CgroupMode, CgroupStats, EventKind, MAX_CGROUPS, ProbeConfig, ProbeEvent, RUNQ_HIST_BUCKETS,
    RUNQ_SLOTS, RunqModel, RunqSlot, ThrottleModel, UNIFIED_HIERARCHY_ID, counter,
};

/// Offsets and layout, overridden by the loader. All zero means "not configured".
///
/// A plain `.rodata` static read field by field through [`config!`]: the verifier sees the
/// frozen value as constants and drops the branches this kernel never takes, and a program
/// loads only the fields it uses (a whole-struct volatile copy costs every program ~100 bytes
/// of stack traffic per run).
#[unsafe(no_mangle)]
static HEADROOM_CONFIG: ProbeConfig = ProbeConfig::UNCONFIGURED;

/// One field of [`HEADROOM_CONFIG`]. Volatile, or the compiler would fold the all-zero value
/// compiled into the object.
macro_rules! config {
    ($field:ident) => {
        // SAFETY: a plain read of a field of a static.
        unsafe { core::ptr::read_volatile(&raw const HEADROOM_CONFIG.$field) }
    };
}

/// Per-cgroup counters (see [`CgroupStats`]); userspace sums the per-CPU values.
#[map]
static CGROUP_STATS: PerCpuHashMap<CgroupKey, CgroupStats> = PerCpuHashMap::with_max_entries(MAX_CGROUPS, 0);

/// Run-queue counters by the cpu controller's css id (see [`RunqSlot`]): the per-switch sample
/// costs two inlined array lookups, where [`CGROUP_STATS`] costs a hash lookup (about 40 ns
/// under hackbench, a quarter of the probe).
#[map]
static RUNQ_SLOT: PerCpuArray<RunqSlot> = PerCpuArray::with_max_entries(RUNQ_SLOTS, 0);

/// One past the highest [`RUNQ_SLOT`] index taken, so userspace reads only those. Raised
/// without atomics (a race can lose a raise: userspace reads a margin beyond it).
#[map]
static RUNQ_SLOTS_USED: Array<u64> = Array::with_max_entries(1, 0);

/// One all-zero [`CgroupStats`] to insert from, so the 336-byte value never sits on the
/// 512-byte BPF stack.
#[map]
static ZERO_STATS: PerCpuArray<CgroupStats> = PerCpuArray::with_max_entries(1, 0);

/// A cgroup's open throttle episode.
#[repr(C)]
#[derive(Clone, Copy)]
struct EpisodeOpen {
    /// When it began (CLOCK_BOOTTIME, as the events are stamped).
    since: u64,
    /// The group's `nr_periods` then.
    periods: u32,
    pad: u32,
}

/// When a cgroup's current throttle episode began and the group's `nr_periods` then (absent
/// when it is not throttled).
///
/// Node-wide, not per CPU: a throttled task is often unthrottled and run on another CPU than
/// the one it was throttled on, and a per-CPU episode would then stay open (and swallow the
/// next episodes) on the old one. `BPF_NOEXIST` inserts and deletes decide races between
/// CPUs: only the CPU whose insert (delete) succeeds opens (closes) the episode.
#[map]
static THROTTLED_SINCE: HashMap<CgroupKey, EpisodeOpen> = HashMap::with_max_entries(MAX_CGROUPS, 0);

/// One CPU's run queue of a cgroup (a `struct cfs_rq`) while it is throttled.
#[repr(C)]
#[derive(Clone, Copy)]
struct RqThrottle {
    /// When the throttle began (BPF clock).
    since: u64,
    /// The group's `nr_periods` then.
    periods: u32,
    pad: u32,
    /// Whose run queue it is.
    key: CgroupKey,
}

/// Throttled run queues by `struct cfs_rq` address: the kernel's throttled time is summed
/// over each CPU's queue (`cpu.stat`), so the probes time each queue on its own.
///
/// Opened at a throttled switch-out, closed at the switch-in (or exit) of a task of that queue
/// that was switched out throttled. LRU: a queue whose close was missed (its tasks moved to
/// another CPU before running again) is overwritten at its next throttle, and one of a removed
/// cgroup ages out instead of filling the map.
#[map]
static RQ_THROTTLED: LruHashMap<u64, RqThrottle> = LruHashMap::with_max_entries(MAX_CGROUPS, 0);

/// Marks a [`RUNNABLE_SINCE`] slot of a task switched out throttled: its next switch-in
/// closes the cgroup's episode instead of sampling run-queue latency.
const THROTTLED_MARK: u64 = 1 << 63;

/// Thread id → when it became runnable, or (with [`THROTTLED_MARK`]) when it was switched out
/// throttled.
///
/// [`RunqModel::WakeupMap`]: an entry per thread, stamped at wakeup and preemption, zeroed
/// rather than deleted on switch-in and deleted when the thread exits (a delete and re-insert
/// per context switch would cost more than everything else the probe does).
///
/// [`RunqModel::SchedInfo`]: only threads switched out throttled have an entry (deleted on
/// their switch-in or exit), counted in [`THROTTLED_PENDING`] so that switch-ins skip the
/// lookup while there are none.
#[map]
static RUNNABLE_SINCE: HashMap<u32, u64> = HashMap::with_max_entries(65_536, 0);

/// [`RunqModel::SchedInfo`]: entries in [`RUNNABLE_SINCE`] (threads switched out throttled that
/// have not come back), node-wide. Updated with atomic adds; a plain array slot, which the
/// verifier inlines, so reading it costs a load.
#[map]
static THROTTLED_PENDING: Array<u64> = Array::with_max_entries(1, 0);

/// (thread id | kind << 32) → when it entered reclaim.
#[map]
static RECLAIM_SINCE: HashMap<u64, u64> = HashMap::with_max_entries(65_536, 0);

/// The probes' own health counters (indexes in [`counter`]).
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Discrete events ([`ProbeEvent`]).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

const TASK_RUNNING: u32 = 0;
const RECLAIM_MEMCG: u64 = 1 << 32;
const RECLAIM_DIRECT: u64 = 2 << 32;

#[derive(Clone, Copy)]
enum Controller {
    Cpu,
    Memory,
}

#[inline(always)]
fn bump(index: u32) {
    if let Some(value) = COUNTERS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, only this CPU writes it while this program runs.
        unsafe { *value += 1 };
    }
}

/// Reads a `T` at `base + offset` with a plain load.
///
/// In BTF tracepoints the verifier types task and cgroup pointers (PTR_TO_BTF_ID), checks the
/// (constant, `.rodata`) offset against the kernel's BTF and turns the load into a
/// fault-tolerant PROBE_MEM load: no helper call, which matters on the sched_switch hot path.
/// A bad pointer reads as zero instead of faulting.
#[inline(always)]
fn load<T: Copy>(base: *const u8, offset: u32) -> T {
    // SAFETY: see above; the verifier rejects the program if the access is not to a field.
    unsafe { core::ptr::read_volatile(base.wrapping_add(offset as usize) as *const T) }
}

/// [`load`] behind a null check, so a broken pointer chain is an error the caller sees.
#[inline(always)]
fn read<T: Copy>(base: *const u8, offset: u32) -> Result<T, i32> {
    if base.is_null() {
        bump(counter::READ_FAILURES);
        return Err(-1);
    }
    Ok(load(base, offset))
}

/// The cgroup `task` belongs to for `controller`, as the map key.
#[inline(always)]
fn task_cgroup(task: *const u8, controller: Controller) -> Result<CgroupKey, i32> {
    let css_set: *const u8 = read(task, config!(task_cgroups))?;
    let (cgroup, hierarchy_id): (*const u8, u32) = if config!(cgroup_mode) == CgroupMode::Unified as u32 {
        (read(css_set, config!(css_set_dfl_cgrp))?, UNIFIED_HIERARCHY_ID)
    } else {
        let (index, hierarchy_id) = match controller {
            Controller::Cpu => (config!(cpu_subsys_index), config!(cpu_hierarchy_id)),
            Controller::Memory => (config!(memory_subsys_index), config!(memory_hierarchy_id)),
        };
        let css: *const u8 = read(css_set, config!(css_set_subsys) + index * 8)?;
        (read(css, config!(css_cgroup))?, hierarchy_id)
    };
    let kn: *const u8 = read(cgroup, config!(cgroup_kn))?;
    let id: u64 = read(kn, config!(kernfs_node_id))?;
    Ok(CgroupKey::new(hierarchy_id, id))
}

/// This CPU's counters for `key`, created on first use.
#[inline(always)]
fn stats_for(key: &CgroupKey) -> Option<*mut CgroupStats> {
    if let Some(stats) = CGROUP_STATS.get_ptr_mut(key) {
        return Some(stats);
    }
    let zero = ZERO_STATS.get_ptr(0)?;
    // SAFETY: `zero` points to a map value of the right type, never written.
    let inserted = CGROUP_STATS.insert(key, unsafe { *zero }, u64::from(BPF_NOEXIST));
    if inserted.is_err() {
        // Either another program on this CPU raced us (fine) or the map is full.
        if CGROUP_STATS.get_ptr_mut(key).is_none() {
            bump(counter::STATS_DROPPED);
            return None;
        }
    }
    CGROUP_STATS.get_ptr_mut(key)
}

/// Index of the log2 bucket for `value` (0 for 0 and 1), without `ctlz` which BPF lacks.
#[inline(always)]
fn log2_bucket(mut value: u64) -> usize {
    let mut bucket = 0usize;
    if value >= 1 << 32 {
        value >>= 32;
        bucket += 32;
    }
    if value >= 1 << 16 {
        value >>= 16;
        bucket += 16;
    }
    if value >= 1 << 8 {
        value >>= 8;
        bucket += 8;
    }
    if value >= 1 << 4 {
        value >>= 4;
        bucket += 4;
    }
    if value >= 1 << 2 {
        value >>= 2;
        bucket += 2;
    }
    if value >= 1 << 1 {
        bucket += 1;
    }
    if bucket >= RUNQ_HIST_BUCKETS {
        RUNQ_HIST_BUCKETS - 1
    } else {
        bucket
    }
}

/// Whether `task` is being switched out because its CFS bandwidth ran out.
#[inline(always)]
fn switched_out_throttled(task: *const u8) -> bool {
    if config!(throttle_model) == ThrottleModel::TaskThrottled as u32 {
        matches!(read::<u8>(task, config!(task_throttled)), Ok(v) if v != 0)
    } else if config!(throttle_model) == ThrottleModel::CfsRqThrottled as u32 {
        match read::<*const u8>(task, config!(task_se_cfs_rq)) {
            Ok(cfs_rq) => matches!(read::<i32>(cfs_rq, config!(cfs_rq_throttled)), Ok(v) if v != 0),
            Err(_) => false,
        }
    } else {
        false
    }
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let prev: *const u8 = ctx.arg(1);
    let next: *const u8 = ctx.arg(2);
    let prev_state: u32 = ctx.arg(3);
    if config!(runq_model) == RunqModel::SchedInfo as u32 {
        // `__schedule` updated this run queue's clock a moment ago; `next` runs on it.
        let Ok(now) = rq_clock(next) else { return 0 };
        switch_out(prev, prev_state, now);
        switch_in_sched_info(next, now);
    } else {
        // SAFETY: plain helper call.
        let now = unsafe { bpf_ktime_get_ns() };
        switch_out(prev, prev_state, now);
        switch_in_wakeup_map(next, now);
    }
    0
}

/// The clock of the run queue `task` is on (`task->se.cfs_rq->rq->clock`): the clock the
/// scheduler stamps `sched_info.last_queued` with.
#[inline(always)]
fn rq_clock(task: *const u8) -> Result<u64, i32> {
    let cfs_rq: *const u8 = read(task, config!(task_se_cfs_rq))?;
    let rq: *const u8 = read(cfs_rq, config!(cfs_rq_rq))?;
    read(rq, config!(rq_clock))
}

/// Whether the cgroup's CFS bandwidth fields can be read on this kernel.
#[inline(always)]
fn have_bandwidth() -> bool {
    config!(task_sched_task_group) != 0 && config!(tg_nr_periods) != 0
}

/// `task->sched_task_group->cfs_bandwidth.nr_periods`: the bandwidth periods the kernel's
/// period timer has accounted for `task`'s group (0 when unknown).
///
/// Plain integers, not `Option`s, here and in [`last_period_boundary`]: LLVM may compute with
/// the undefined payload of a `None`, which the verifier of older kernels (6.1) refuses as a
/// read of an uninitialised register.
#[inline(always)]
fn group_periods(task: *const u8) -> u32 {
    if !have_bandwidth() {
        return 0;
    }
    match read::<*const u8>(task, config!(task_sched_task_group)) {
        Ok(tg) => read::<u32>(tg, config!(tg_nr_periods)).unwrap_or(0),
        Err(_) => 0,
    }
}

/// The last period boundary of `task`'s group: its period timer's next expiry minus the period
/// (the timer is forwarded when it fires, before it refills the quota and unthrottles).
/// 0 when unknown.
#[inline(always)]
fn last_period_boundary(task: *const u8) -> u64 {
    if !have_bandwidth() || config!(tg_period) == 0 || config!(tg_period_expires) == 0 {
        return 0;
    }
    let Ok(tg) = read::<*const u8>(task, config!(task_sched_task_group)) else {
        return 0;
    };
    let expires: i64 = read(tg, config!(tg_period_expires)).unwrap_or(0);
    let period: i64 = read(tg, config!(tg_period)).unwrap_or(0);
    if expires > period && period > 0 {
        (expires - period) as u64
    } else {
        0
    }
}

/// Opens the throttle of `task`'s run queue now, unless it is open already (another of its
/// tasks was switched out throttled first).
#[inline(always)]
fn open_rq_throttle(task: *const u8, key: CgroupKey) {
    if config!(task_se_cfs_rq) == 0 {
        return;
    }
    let Ok(cfs_rq) = read::<*const u8>(task, config!(task_se_cfs_rq)) else {
        return;
    };
    let address = cfs_rq as u64;
    let entry = RqThrottle {
        // The BPF clock, the period timer's: not the run queue's clock of the caller.
        // SAFETY: plain helper call.
        since: unsafe { bpf_ktime_get_ns() },
        periods: group_periods(task),
        pad: 0,
        key,
    };
    // SAFETY: the value is copied out at once.
    if let Some(open) = RQ_THROTTLED.get_ptr(address).map(|p| unsafe { *p }) {
        // The same throttle seen from another of its tasks, unless the period timer has run
        // since: then the old entry's close was missed (its task ran elsewhere) and it is
        // replaced rather than counted.
        if !have_bandwidth() || open.periods == entry.periods {
            return;
        }
    }
    if RQ_THROTTLED.insert(address, entry, 0).is_err() {
        bump(counter::STATS_DROPPED);
    }
}

/// Closes the throttle of `task`'s run queue now, if open, and adds its length to the cgroup.
#[inline(always)]
fn close_rq_throttle(task: *const u8) {
    if config!(task_se_cfs_rq) == 0 {
        return;
    }
    let Ok(cfs_rq) = read::<*const u8>(task, config!(task_se_cfs_rq)) else {
        return;
    };
    let address = cfs_rq as u64;
    // SAFETY: the value is copied out at once.
    let Some(open) = RQ_THROTTLED.get_ptr(address).map(|p| unsafe { *p }) else {
        return;
    };
    // Only the CPU whose delete succeeds counts it.
    if RQ_THROTTLED.remove(address).is_err() {
        return;
    }
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    // Unthrottled by the period timer: the queue stopped being throttled at the boundary,
    // however long its task then waited for the CPU.
    let mut end = now;
    if have_bandwidth() {
        let boundary = last_period_boundary(task);
        if group_periods(task) != open.periods && boundary > open.since && boundary < now {
            end = boundary;
        }
    }
    if let Some(stats) = stats_for(&open.key) {
        // SAFETY: per-CPU value of this CPU.
        unsafe { (*stats).throttled_ns += end.saturating_sub(open.since) };
    }
}

#[inline(always)]
fn add_pending(delta: u64) {
    if let Some(slot) = THROTTLED_PENDING.get_ptr_mut(0) {
        // SAFETY: an array slot. The BPF target has no `AtomicU64` (no compare-and-swap before
        // BPF v3), but an atomic add whose result is unused is one BPF_XADD on every kernel.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                slot, delta,
            )
        };
    }
}

#[inline(always)]
fn throttled_pending() -> u64 {
    match THROTTLED_PENDING.get_ptr(0) {
        // SAFETY: an array slot, read once.
        Some(slot) => unsafe { core::ptr::read_volatile(slot) },
        None => 0,
    }
}

#[inline(always)]
fn switch_out(prev: *const u8, prev_state: u32, now: u64) {
    let Ok(pid) = read::<u32>(prev, config!(task_pid)) else {
        return;
    };
    if pid == 0 {
        return; // idle
    }
    if switched_out_throttled(prev) {
        let Ok(key) = task_cgroup(prev, Controller::Cpu) else {
            return;
        };
        if THROTTLED_SINCE.get_ptr(key).is_none() {
            let open = EpisodeOpen {
                since: boot_ns(),
                periods: group_periods(prev),
                pad: 0,
            };
            // Only the CPU whose insert succeeds opens the episode, and pushes its one event:
            // this runs once per episode, never per switch.
            if THROTTLED_SINCE.insert(key, open, u64::from(BPF_NOEXIST)).is_ok() {
                if !have_bandwidth() {
                    // Without the kernel's period count, an episode counts one period.
                    if let Some(stats) = stats_for(&key) {
                        // SAFETY: per-CPU value of this CPU.
                        unsafe { (*stats).throttle_episodes += 1 };
                    }
                }
                emit_throttle(EventKind::ThrottleBegin, prev, key, open.since, 0);
            }
        }
        open_rq_throttle(prev, key);
        // A throttled task is not runnable: it waits for quota, not for a CPU. Its next
        // switch-in ends the episode.
        let marked = now | THROTTLED_MARK;
        if config!(runq_model) == RunqModel::SchedInfo as u32 {
            // Only counted entries may exist in this model (switch-ins look entries up only while
            // the count is non-zero): an existing entry is updated, never inserted a second way.
            if RUNNABLE_SINCE.insert(pid, marked, u64::from(BPF_NOEXIST)).is_ok() {
                add_pending(1);
            } else if let Some(slot) = RUNNABLE_SINCE.get_ptr_mut(pid) {
                // SAFETY: a map value of this task.
                unsafe { *slot = marked };
            }
        } else {
            set_runnable(pid, marked);
        }
        return;
    }
    // Preempted while runnable: it queues again from now on (the scheduler's own
    // `sched_info` does this in the other model).
    if prev_state == TASK_RUNNING && config!(runq_model) == RunqModel::WakeupMap as u32 {
        set_runnable(pid, now);
    }
}

/// Ends the throttle episode of `task`'s cpu cgroup, if it is still open (several throttled
/// tasks of the cgroup may come back: the first one to delete the entry closes it), and the
/// throttle of the run queue `task` now runs on.
#[inline(always)]
fn close_episode(task: *const u8) {
    close_rq_throttle(task);
    let Ok(key) = task_cgroup(task, Controller::Cpu) else {
        return;
    };
    // SAFETY: the value is copied out at once.
    let Some(opened) = THROTTLED_SINCE.get_ptr(key).map(|p| unsafe { *p }) else {
        return;
    };
    if THROTTLED_SINCE.remove(key).is_err() {
        return;
    }
    let now = boot_ns();
    emit_throttle(
        EventKind::ThrottleEnd,
        task,
        key,
        now,
        now.saturating_sub(opened.since),
    );
    // The periods the kernel's timer accounted while the episode was open: what
    // `nr_throttled` adds for it (several when a late timer refills more than one period).
    if have_bandwidth() {
        let spanned = group_periods(task).wrapping_sub(opened.periods);
        if spanned > 0
            && let Some(stats) = stats_for(&key)
        {
            // SAFETY: per-CPU value of this CPU.
            unsafe { (*stats).throttle_episodes += u64::from(spanned) };
        }
    }
}

/// Takes `pid`'s [`RUNNABLE_SINCE`] entry out in the sched_info model; whether it was marked
/// throttled.
#[inline(always)]
fn take_throttled_mark(pid: u32) -> bool {
    if throttled_pending() == 0 {
        return false;
    }
    // SAFETY: the value is copied out at once.
    let Some(value) = RUNNABLE_SINCE.get_ptr(pid).map(|p| unsafe { *p }) else {
        return false;
    };
    if RUNNABLE_SINCE.remove(pid).is_ok() {
        add_pending(u64::MAX); // -1
    }
    value & THROTTLED_MARK != 0
}

#[inline(always)]
fn switch_in_sched_info(next: *const u8, now: u64) {
    let Ok(pid) = read::<u32>(next, config!(task_pid)) else {
        return;
    };
    if pid == 0 {
        return;
    }
    if take_throttled_mark(pid) {
        close_episode(next);
        return;
    }
    // Cleared by `sched_info_arrive` right after this tracepoint; 0 when the task did not wait.
    let Ok(queued_since) = read::<u64>(next, config!(task_last_queued)) else {
        return;
    };
    if queued_since == 0 {
        return;
    }
    record_runq_wait(next, now.saturating_sub(queued_since));
}

#[inline(always)]
fn switch_in_wakeup_map(next: *const u8, now: u64) {
    let Ok(pid) = read::<u32>(next, config!(task_pid)) else {
        return;
    };
    if pid == 0 {
        return;
    }
    let slot = RUNNABLE_SINCE.get_ptr_mut(pid);
    // SAFETY: a map value; only this task's wakeup and switch-in write it, and those are
    // serialised by the scheduler for one task.
    let queued_since = slot.and_then(|p| unsafe {
        let since = *p;
        *p = 0;
        (since != 0).then_some(since)
    });
    let Some(queued_since) = queued_since else { return };
    if queued_since & THROTTLED_MARK != 0 {
        close_episode(next);
        return;
    }
    record_runq_wait(next, now.saturating_sub(queued_since));
}

#[inline(always)]
fn record_runq_wait(task: *const u8, waited: u64) {
    let bucket = log2_bucket(waited);
    if let Some(slot) = runq_slot(task) {
        // SAFETY: this CPU's copy of an array slot; bucket < RUNQ_HIST_BUCKETS.
        unsafe {
            (*slot).runq_count += 1;
            (*slot).runq_total_ns += waited;
            if let Some(count) = (*slot).runq_hist.get_mut(bucket) {
                *count += 1;
            }
        }
        return;
    }
    let Ok(key) = task_cgroup(task, Controller::Cpu) else {
        return;
    };
    if let Some(stats) = stats_for(&key) {
        // SAFETY: per-CPU value of this CPU; bucket < RUNQ_HIST_BUCKETS.
        unsafe {
            (*stats).runq_count += 1;
            (*stats).runq_total_ns += waited;
            if let Some(count) = (*stats).runq_hist.get_mut(bucket) {
                *count += 1;
            }
        }
    }
}

/// This CPU's [`RUNQ_SLOT`] for `task`'s cpu cgroup, started afresh if it held another
/// cgroup's counters; `None` if the css id is beyond the slots (use [`CGROUP_STATS`]).
///
/// The slot belongs to the cpu controller's css, on v1 and v2 alike, and so does the key: on v2
/// a task in a cgroup without the cpu controller counts towards the nearest ancestor with it,
/// as the kernel's own `cpu.stat` does.
#[inline(always)]
fn runq_slot(task: *const u8) -> Option<*mut RunqSlot> {
    let css_set: *const u8 = read(task, config!(task_cgroups)).ok()?;
    let css: *const u8 = read(css_set, config!(css_set_subsys) + config!(cpu_subsys_index) * 8).ok()?;
    let index = read::<i32>(css, config!(css_id)).ok()? as u32;
    if index >= RUNQ_SLOTS {
        return None;
    }
    let cgroup: *const u8 = read(css, config!(css_cgroup)).ok()?;
    let kn: *const u8 = read(cgroup, config!(cgroup_kn)).ok()?;
    let id: u64 = read(kn, config!(kernfs_node_id)).ok()?;
    let hierarchy_id = if config!(cgroup_mode) == CgroupMode::Unified as u32 {
        UNIFIED_HIERARCHY_ID
    } else {
        config!(cpu_hierarchy_id)
    };
    let key = CgroupKey::new(hierarchy_id, id);
    let slot = RUNQ_SLOT.get_ptr_mut(index)?;
    // SAFETY: this CPU's copy of the slot; only this CPU writes it, with preemption off.
    unsafe {
        if (*slot).key != key {
            core::ptr::write_bytes(slot, 0, 1);
            (*slot).key = key;
            if let Some(used) = RUNQ_SLOTS_USED.get_ptr_mut(0)
                && core::ptr::read_volatile(used) <= u64::from(index)
            {
                core::ptr::write_volatile(used, u64::from(index) + 1);
            }
        }
    }
    Some(slot)
}

#[inline(always)]
fn mark_runnable(ctx: &BtfTracePointContext) -> i32 {
    if config!(cgroup_mode) == 0 || config!(runq_model) != RunqModel::WakeupMap as u32 {
        return 0;
    }
    let task: *const u8 = ctx.arg(0);
    if let Ok(pid) = read::<u32>(task, config!(task_pid))
        && pid != 0
    {
        // SAFETY: plain helper call.
        set_runnable(pid, unsafe { bpf_ktime_get_ns() });
    }
    0
}

/// Records that `pid` became runnable at `now`, reusing its slot when it has one.
#[inline(always)]
fn set_runnable(pid: u32, now: u64) {
    match RUNNABLE_SINCE.get_ptr_mut(pid) {
        // SAFETY: a map value of this task (see RUNNABLE_SINCE).
        Some(slot) => unsafe { *slot = now },
        None => {
            let _ = RUNNABLE_SINCE.insert(pid, now, 0);
        }
    }
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(struct task_struct *p, ...): frees the exiting thread's slot.
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let task: *const u8 = ctx.arg(0);
    let Ok(pid) = read::<u32>(task, config!(task_pid)) else {
        return 0;
    };
    let throttled = if config!(runq_model) == RunqModel::SchedInfo as u32 {
        take_throttled_mark(pid)
    } else {
        // SAFETY: the value is copied out at once.
        let slot = RUNNABLE_SINCE.get_ptr(pid).map(|p| unsafe { *p });
        let _ = RUNNABLE_SINCE.remove(pid);
        slot.is_some_and(|since| since & THROTTLED_MARK != 0)
    };
    // A task that dies while throttled never switches in again: end its cgroup's episode
    // here, or it would stay open and swallow the next ones.
    if throttled {
        close_episode(task);
    }
    0
}

#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    mark_runnable(&ctx)
}

#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    mark_runnable(&ctx)
}

#[inline(always)]
fn reclaim_begin(kind: u64) -> i32 {
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    let _ = RECLAIM_SINCE.insert(u64::from(tid) | kind, now, 0);
    0
}

#[inline(always)]
fn reclaim_end(kind: u64) -> i32 {
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let slot = u64::from(tid) | kind;
    // SAFETY: the value is copied out at once.
    let Some(since) = (unsafe { RECLAIM_SINCE.get(slot) }).copied() else {
        return 0;
    };
    let _ = RECLAIM_SINCE.remove(slot);
    // SAFETY: plain helper call.
    let stalled = unsafe { bpf_ktime_get_ns() }.saturating_sub(since);
    // SAFETY: plain helper call; the BTF-typed `current` allows direct, verifier-checked loads.
    let task = unsafe { bpf_get_current_task_btf() } as *const u8;
    let Ok(key) = task_cgroup(task, Controller::Memory) else {
        return 0;
    };
    emit(ProbeEvent {
        kind: if kind == RECLAIM_MEMCG {
            EventKind::MemcgReclaimStall as u32
        } else {
            EventKind::DirectReclaimStall as u32
        },
        pid: (bpf_get_current_pid_tgid() >> 32) as u32,
        timestamp_ns: boot_ns(),
        cgroup: key,
        cpu_cgroup: CgroupKey::default(),
        comm: [0; 16],
        duration_ns: stalled,
    });
    if let Some(stats) = stats_for(&key) {
        // SAFETY: per-CPU value of this CPU.
        unsafe {
            if kind == RECLAIM_MEMCG {
                (*stats).memcg_reclaim_episodes += 1;
                (*stats).memcg_reclaim_stall_ns += stalled;
            } else {
                (*stats).direct_reclaim_episodes += 1;
                (*stats).direct_reclaim_stall_ns += stalled;
            }
        }
    }
    0
}

#[btf_tracepoint(function = "mm_vmscan_memcg_reclaim_begin")]
pub fn memcg_reclaim_begin(_ctx: BtfTracePointContext) -> i32 {
    reclaim_begin(RECLAIM_MEMCG)
}

#[btf_tracepoint(function = "mm_vmscan_memcg_reclaim_end")]
pub fn memcg_reclaim_end(_ctx: BtfTracePointContext) -> i32 {
    reclaim_end(RECLAIM_MEMCG)
}

#[btf_tracepoint(function = "mm_vmscan_direct_reclaim_begin")]
pub fn direct_reclaim_begin(_ctx: BtfTracePointContext) -> i32 {
    reclaim_begin(RECLAIM_DIRECT)
}

#[btf_tracepoint(function = "mm_vmscan_direct_reclaim_end")]
pub fn direct_reclaim_end(_ctx: BtfTracePointContext) -> i32 {
    reclaim_end(RECLAIM_DIRECT)
}

#[btf_tracepoint(function = "mark_victim")]
pub fn oom_mark_victim(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(struct task_struct *task, uid_t uid) (6.8+)
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let task: *const u8 = ctx.arg(0);
    let pid: u32 = read(task, config!(task_tgid)).unwrap_or(0);
    let memory = task_cgroup(task, Controller::Memory).unwrap_or_default();
    let cpu = task_cgroup(task, Controller::Cpu).unwrap_or_default();
    if memory.id != 0
        && let Some(stats) = stats_for(&memory)
    {
        // SAFETY: per-CPU value of this CPU.
        unsafe { (*stats).oom_kills += 1 };
    }
    debug!(&ctx, "oom victim pid {} memcg {}", pid, memory.id);
    let comm: [u8; 16] = read(task, config!(task_comm)).unwrap_or([0; 16]);
    emit(ProbeEvent {
        kind: EventKind::OomKill as u32,
        pid,
        timestamp_ns: boot_ns(),
        cgroup: memory,
        cpu_cgroup: cpu,
        comm,
        duration_ns: 0,
    });
    0
}

#[inline(always)]
fn cgroup_event(ctx: &BtfTracePointContext, kind: EventKind) -> i32 {
    // TP_PROTO(struct cgroup *cgrp, const char *path)
    if config!(cgroup_mode) == 0 {
        return 0;
    }
    let cgroup: *const u8 = ctx.arg(0);
    let Ok(root) = read::<*const u8>(cgroup, config!(cgroup_root)) else {
        return 0;
    };
    let Ok(hierarchy_id) = read::<i32>(root, config!(cgroup_root_hierarchy_id)) else {
        return 0;
    };
    let Ok(kn) = read::<*const u8>(cgroup, config!(cgroup_kn)) else {
        return 0;
    };
    let Ok(id) = read::<u64>(kn, config!(kernfs_node_id)) else {
        return 0;
    };
    emit(ProbeEvent {
        kind: kind as u32,
        pid: 0,
        timestamp_ns: boot_ns(),
        cgroup: CgroupKey::new(hierarchy_id as u32, id),
        cpu_cgroup: CgroupKey::default(),
        comm: [0; 16],
        duration_ns: 0,
    });
    0
}

#[btf_tracepoint(function = "cgroup_mkdir")]
pub fn cgroup_mkdir(ctx: BtfTracePointContext) -> i32 {
    cgroup_event(&ctx, EventKind::CgroupMkdir)
}

#[btf_tracepoint(function = "cgroup_rmdir")]
pub fn cgroup_rmdir(ctx: BtfTracePointContext) -> i32 {
    cgroup_event(&ctx, EventKind::CgroupRmdir)
}

/// CLOCK_BOOTTIME now, the clock every event is stamped with.
#[inline(always)]
fn boot_ns() -> u64 {
    // SAFETY: plain helper call.
    unsafe { bpf_ktime_get_boot_ns() }
}

/// Pushes a throttle episode's begin or end for the cpu cgroup `key` of `task`.
#[inline(always)]
fn emit_throttle(kind: EventKind, task: *const u8, key: CgroupKey, at: u64, duration_ns: u64) {
    emit(ProbeEvent {
        kind: kind as u32,
        pid: load::<u32>(task, config!(task_tgid)),
        timestamp_ns: at,
        cgroup: key,
        cpu_cgroup: key,
        comm: [0; 16],
        duration_ns,
    });
}

/// Pushes `event` through the ring buffer. Flags 0: the kernel's adaptive wake-up, which
/// notifies the reader only when it has caught up (one wake-up per burst, not per event).
#[inline(always)]
fn emit(event: ProbeEvent) {
    if EVENTS.output::<ProbeEvent>(&event, 0).is_err() {
        bump(counter::EVENTS_DROPPED);
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
