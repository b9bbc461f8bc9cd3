//! The single aggregator thread: owns all mutable state, turns cumulative counters into rates and
//! publishes immutable snapshots.

use std::{
    collections::{HashMap, VecDeque},
    hash::{BuildHasherDefault, Hasher},
    sync::{Arc, atomic::Ordering},
    thread,
    time::{Duration, Instant, SystemTime},
};

use arc_swap::ArcSwap;
use crossbeam::channel;
use headroom_common::{CgroupKey, EventKind, ProbeEvent};
use headroom_node_model::{NodeHeadroom, ReservationLedger, Resources, node_headroom, room_once_gone};
use tokio::sync::watch;

use super::reservations_file::{ReservationsFile, ReservationsFileError};
use super::{
    CgroupFiles, CgroupSample, Control, LedgerReply, PipelineConfig, PipelineInput, ProbeCounters,
    PsiReading, ReserveError, ReserveRequest, Shared, Slot,
    pods::{CgroupOwner, PodResolver, PodSet, PodSource},
    snapshot::{
        ContainerView, Figure, KERNEL_EVENTS_KEPT, KernelEventView, NodeFigures, PipelineStats, PodRef,
        PodView, Pressure, PsiFigures, ReservationView, Snapshot,
    },
};

/// Records handled (at least) between two looks at the control channel and the clock; a batch
/// is always applied whole.
const BATCH: usize = 4_096;
/// Longest park when idle (bounds a lost wake-up).
const MAX_PARK: Duration = Duration::from_millis(50);
/// At most one overflow warning per this interval.
const DROP_WARN_INTERVAL: Duration = Duration::from_secs(1);

/// Publications are spaced by at least this many times the last snapshot build time.
const PUBLISH_COST_FACTOR: u32 = 2;
/// The longest a quiet pipeline goes without publishing a snapshot: well inside the shim's
/// default 2 s freshness bound.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// Multiplicative hasher for [`CgroupKey`] (ids are inode numbers: well spread, never hostile).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        let mut tail = [0; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.write_u64(u64::from_le_bytes(tail) ^ ((bytes.len() as u64) << 56));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type KeyMap<V> = HashMap<CgroupKey, V, BuildHasherDefault<KeyHasher>>;

/// Converts monotonic instants to wall-clock time from one fixed base.
#[derive(Clone, Copy)]
struct Clock {
    base_instant: Instant,
    base_wall: SystemTime,
}

impl Clock {
    fn wall(&self, at: Instant) -> SystemTime {
        match at.checked_duration_since(self.base_instant) {
            Some(d) => self.base_wall + d,
            None => self.base_wall - self.base_instant.duration_since(at),
        }
    }

    fn stamp(&self, at: Instant) -> Stamp {
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let ns = match at.checked_duration_since(self.base_instant) {
            Some(d) => nanos(d),
            None => -nanos(self.base_instant.duration_since(at)),
        };
        Stamp {
            wall: self.wall(at),
            ns,
        }
    }
}

/// An instant as the aggregator uses it: wall-clock time, and nanoseconds from the clock's base
/// (so that intervals are integer subtractions).
#[derive(Clone, Copy)]
struct Stamp {
    wall: SystemTime,
    ns: i64,
}

/// What every record of a cgroup reads and writes, kept together in a few adjacent cache lines:
/// each cgroup gets a probe sample every cycle, while the rest of its state (all of its
/// `Pressure` figures, the last file reading) is over a kilobyte. Probe figures wait here and
/// are written into `pressure` when a snapshot is built ([`CgroupState::flush`]).
#[derive(Default)]
struct Hot {
    /// `owner` is known.
    owned: bool,
    /// Something here changed since the last flush.
    pending: bool,
    next_resolve: Option<Instant>,
    last_update: Option<Instant>,
    /// The last probe counters, with when they were read ([`Stamp::ns`]).
    probe_last: Option<(i64, ProbeCounters)>,
    /// Probe figures, each with when it was measured: throttle episodes per second, throttled
    /// seconds per second, mean run-queue latency, reclaim stall seconds per second.
    probe: [Option<(f64, SystemTime)>; 4],
    /// OOM kills: probe counter, `memory.events`, events seen.
    oom_probe: u64,
    oom_files: u64,
    oom_events: u64,
    /// When the OOM figure was last measured (see [`update_oom`]).
    oom_at: Option<SystemTime>,
}

#[derive(Default)]
struct CgroupState {
    hot: Hot,
    owner: Option<CgroupOwner>,
    files_last: Option<CgroupFiles>,
    pressure: Pressure,
}

impl CgroupState {
    /// Writes the probe and OOM figures waiting in `hot` into `pressure`.
    fn flush(&mut self) {
        let h = &mut self.hot;
        if !h.pending {
            return;
        }
        h.pending = false;
        let figure = |f: Option<(f64, SystemTime)>| {
            f.map(|(value, measured_at)| Figure {
                value,
                measured_at,
                stale: false,
            })
        };
        let p = &mut self.pressure;
        let [episodes, throttled, runq, reclaim] = h.probe;
        p.probe_throttle_episodes_per_second = figure(episodes);
        p.probe_throttled_seconds_per_second = figure(throttled);
        p.runq_latency_mean_seconds = figure(runq);
        p.memory_reclaim_stall_seconds_per_second = figure(reclaim);
        if let Some(at) = h.oom_at {
            let total = h.oom_probe.max(h.oom_files).max(h.oom_events);
            p.oom_kills_total = figure(Some((total as f64, at)));
        }
    }
}

fn delta(cur: u64, prev: u64) -> Option<u64> {
    cur.checked_sub(prev)
}

pub(crate) struct Aggregator {
    config: PipelineConfig,
    resolver: Arc<dyn PodResolver>,
    pod_source: Arc<dyn PodSource>,
    shared: Arc<Shared>,
    control: channel::Receiver<Control>,
    clock: Clock,
    /// The last instant stamped (the samples of one map read share their instant).
    last_stamp: Option<(Instant, Stamp)>,
    /// The last interval between two probe samples of a cgroup: nanoseconds, seconds.
    last_interval: (u64, f64),
    cgroups: KeyMap<Box<CgroupState>>,
    ledger: ReservationLedger,
    /// Where `ledger` is kept across restarts.
    reservations_file: Option<ReservationsFile>,
    pods: PodSet,
    pods_read_at: Instant,
    /// Whether the node figures (from a live Pod source) were stale at the last tick.
    pods_stale: bool,
    allocated: Resources,
    processed: u64,
    unattributed: u64,
    version: u64,
    dirty: bool,
    last_publish: Option<Instant>,
    /// Gap to keep after the last publication: `min_publish_interval`, or more when building
    /// a snapshot is slow (see [`Aggregator::publish`]).
    publish_gap: Duration,
    last_tick: Instant,
    dropped_reported: u64,
    last_drop_warning: Option<Instant>,
    /// The last [`KERNEL_EVENTS_KEPT`] kernel events, and the sequence number of the next.
    kernel_events: VecDeque<KernelEventView>,
    kernel_events_seq: u64,
    /// `kernel_events` as the last snapshot shared it (`None`: changed since).
    kernel_events_shared: Option<Arc<[KernelEventView]>>,
}

/// Takes back the reservations a previous headroomd made. A file that cannot be read is set
/// aside with a WARN (the daemon still starts: refusing would take the node's agent down with it).
fn restore_ledger(file: &mut ReservationsFile, ledger: &mut ReservationLedger, now: Instant) {
    match file.load(ledger, now, SystemTime::now()) {
        Ok(restored) => {
            if restored.kept > 0 {
                tracing::info!(kept = restored.kept, file = %file.path().display(), "reservations restored");
            }
            for (id, why) in &restored.dropped {
                tracing::info!(%id, "reservation not restored: {why}");
            }
        }
        Err(e) => match file.set_aside() {
            Ok(aside) => tracing::warn!(
                "{e}; moved to {} and starting with no reservations",
                aside.display()
            ),
            Err(moved) => {
                tracing::warn!("{e}; starting with no reservations (and it cannot be moved aside: {moved})")
            }
        },
    }
}

impl Aggregator {
    pub(crate) fn new(
        config: PipelineConfig,
        resolver: Arc<dyn PodResolver>,
        pod_source: Arc<dyn PodSource>,
        shared: Arc<Shared>,
        control: channel::Receiver<Control>,
    ) -> Self {
        let now = Instant::now();
        let pods = pod_source.pods();
        let allocated = sum_requests(&pods);
        let mut reservations_file = config.reservations_file.clone().map(ReservationsFile::new);
        let mut ledger = ReservationLedger::new();
        if let Some(file) = &mut reservations_file {
            restore_ledger(file, &mut ledger, now);
        }
        Self {
            config,
            resolver,
            pod_source,
            shared,
            control,
            clock: Clock {
                base_instant: now,
                base_wall: SystemTime::now(),
            },
            last_stamp: None,
            last_interval: (0, 0.0),
            cgroups: KeyMap::default(),
            ledger,
            reservations_file,
            pods_read_at: now,
            pods,
            pods_stale: false,
            allocated,
            processed: 0,
            unattributed: 0,
            version: 0,
            dirty: false,
            last_publish: None,
            publish_gap: Duration::ZERO,
            last_tick: now,
            dropped_reported: 0,
            last_drop_warning: None,
            kernel_events: VecDeque::with_capacity(KERNEL_EVENTS_KEPT),
            kernel_events_seq: 0,
            kernel_events_shared: None,
        }
    }

    pub(crate) fn run(mut self, current: &ArcSwap<Snapshot>, changed: &watch::Sender<u64>) {
        let _span = tracing::info_span!("aggregator").entered();
        tracing::info!(capacity = self.shared.capacity, "pipeline aggregator started");
        loop {
            let mut handled = 0;
            while handled < BATCH {
                let Some(slot) = self.shared.queue.pop() else {
                    break;
                };
                handled += self.apply_slot(slot);
            }
            let mut now = Instant::now();
            while let Ok(control) = self.control.try_recv() {
                self.handle_control(control, now, current, changed);
                now = Instant::now();
            }
            if now.duration_since(self.last_tick) >= self.config.tick_interval {
                self.tick(now);
            }
            let publish_due = self
                .last_publish
                .is_none_or(|at| now.duration_since(at) >= self.publish_gap);
            if self.dirty && publish_due {
                self.publish(now, current, changed);
            }
            if self.shared.shutdown.load(Ordering::SeqCst) {
                break;
            }
            if handled == 0 {
                let mut deadline = self.last_tick + self.config.tick_interval;
                if self.dirty
                    && let Some(at) = self.last_publish
                {
                    deadline = deadline.min(at + self.publish_gap);
                }
                let wait = deadline.saturating_duration_since(now).min(MAX_PARK);
                if wait.is_zero() {
                    continue;
                }
                self.shared.sleeping.store(true, Ordering::SeqCst);
                if self.shared.queue.is_empty() && self.control.is_empty() {
                    thread::park_timeout(wait);
                }
                self.shared.sleeping.store(false, Ordering::SeqCst);
            }
        }
        // Publish what was aggregated last, so nothing accepted is lost from view.
        while let Some(slot) = self.shared.queue.pop() {
            self.apply_slot(slot);
        }
        if self.dirty {
            self.publish(Instant::now(), current, changed);
        }
        tracing::info!(processed = self.processed, "pipeline aggregator stopped");
    }

    // === Input ===

    /// Applies the records of one queue slot, in order; returns how many there were.
    fn apply_slot(&mut self, slot: Slot) -> usize {
        match slot {
            Slot::One(input) => {
                self.shared.taken(1);
                self.apply(input);
                1
            }
            Slot::Batch(batch) => {
                let records = batch.len();
                // Free the room now: producers need not wait for the batch to be applied.
                self.shared.taken(records);
                for input in batch {
                    self.apply(input);
                }
                records
            }
        }
    }

    fn apply(&mut self, input: PipelineInput) {
        self.processed += 1;
        self.dirty = true;
        match input {
            PipelineInput::Sample(sample) => self.apply_sample(&sample),
            PipelineInput::CgroupFiles(files) => self.apply_files(&files),
            PipelineInput::Event(event, at) => {
                let key = event.cgroup;
                // Before a removed cgroup's state goes: its owner names the event.
                self.keep_kernel_event(&event);
                if event.kind == EventKind::CgroupRmdir as u32 {
                    self.cgroups.remove(&key);
                } else if event.kind == EventKind::OomKill as u32 {
                    let clock = self.clock;
                    let h = &mut self.state(key, at).hot;
                    h.oom_events += 1;
                    h.last_update = Some(at);
                    update_oom(h, clock.wall(at));
                }
            }
        }
    }

    /// Adds `event` to the window the snapshots carry. Every kernel event is decision-relevant:
    /// `apply` marks the pipeline dirty, so the run loop publishes once the batch it came in
    /// is applied (a burst of events is one publication, not one each).
    fn keep_kernel_event(&mut self, event: &ProbeEvent) {
        let Some(kind) = EventKind::from_raw(event.kind) else {
            tracing::debug!(kind = event.kind, "unknown probe event kind");
            return;
        };
        // The owner as known now. A cgroup without state yet (just created, or no sample
        // read yet) is resolved here without caching the answer: one just created may be
        // indexed a moment later, and its samples must not wait for the retry interval.
        let owner = match self.cgroups.get(&event.cgroup) {
            Some(state) => state.owner.clone(),
            None => self.resolver.resolve(&event.cgroup),
        };
        let (pod_uid, container) = match owner {
            Some(CgroupOwner::Pod { pod, container }) => (Some(pod.uid), container),
            _ => (None, None),
        };
        if self.kernel_events.len() == KERNEL_EVENTS_KEPT {
            self.kernel_events.pop_front();
        }
        self.kernel_events.push_back(KernelEventView {
            sequence: self.kernel_events_seq,
            kind,
            cgroup: event.cgroup,
            pod_uid,
            container,
            pid: event.pid,
            boottime_ns: event.timestamp_ns,
            duration_ns: event.duration_ns,
        });
        self.kernel_events_seq += 1;
        self.kernel_events_shared = None;
    }

    /// The state of `key`, resolving its owner when it is new (or due for another try).
    fn state(&mut self, key: CgroupKey, at: Instant) -> &mut CgroupState {
        cgroup_state(
            &mut self.cgroups,
            &*self.resolver,
            self.config.resolve_retry,
            &mut self.unattributed,
            key,
            at,
        )
    }

    /// `Duration::from_nanos(ns).as_secs_f64()`, remembered: the samples of one map read
    /// usually all follow the previous read by the same interval.
    fn interval_secs(memo: &mut (u64, f64), ns: u64) -> f64 {
        if memo.0 != ns {
            *memo = (ns, Duration::from_nanos(ns).as_secs_f64());
        }
        memo.1
    }

    fn stamp(&mut self, at: Instant) -> Stamp {
        match self.last_stamp {
            Some((last, stamp)) if last == at => stamp,
            _ => {
                let stamp = self.clock.stamp(at);
                self.last_stamp = Some((at, stamp));
                stamp
            }
        }
    }

    fn apply_sample(&mut self, sample: &CgroupSample) {
        let Stamp {
            wall: measured_at,
            ns,
        } = self.stamp(sample.at);
        let cur = sample.counters;
        // Only `hot` is touched: the figures reach `pressure` when a snapshot is built.
        let h = &mut cgroup_state(
            &mut self.cgroups,
            &*self.resolver,
            self.config.resolve_retry,
            &mut self.unattributed,
            sample.key,
            sample.at,
        )
        .hot;
        let fig = |value: f64| Some((value, measured_at));
        if let Some((prev_ns, prev)) = h.probe_last
            && let Some(dt) = ns
                .checked_sub(prev_ns)
                .and_then(|d| u64::try_from(d).ok())
                .filter(|&d| d > 0)
        {
            let dt = Self::interval_secs(&mut self.last_interval, dt);
            let [episodes, throttled, runq, reclaim] = &mut h.probe;
            if let Some(d) = delta(cur.throttle_episodes, prev.throttle_episodes) {
                *episodes = fig(d as f64 / dt);
            }
            if let Some(d) = delta(cur.throttled_ns, prev.throttled_ns) {
                *throttled = fig(d as f64 / 1e9 / dt);
            }
            if let (Some(dc), Some(dt_ns)) = (
                delta(cur.runq_count, prev.runq_count),
                delta(cur.runq_total_ns, prev.runq_total_ns),
            ) {
                *runq = fig(if dc == 0 {
                    0.0
                } else {
                    dt_ns as f64 / dc as f64 / 1e9
                });
            }
            if let Some(d) = delta(cur.reclaim_stall_ns, prev.reclaim_stall_ns) {
                *reclaim = fig(d as f64 / 1e9 / dt);
            }
        }
        if h.probe_last.is_none_or(|(prev_ns, _)| ns >= prev_ns) {
            h.probe_last = Some((ns, cur));
        }
        h.oom_probe = h.oom_probe.max(cur.oom_kills);
        h.last_update = Some(sample.at);
        h.pending = true;
        update_oom(h, measured_at);
    }

    fn apply_files(&mut self, files: &CgroupFiles) {
        let clock = self.clock;
        let state = self.state(files.key, files.at);
        let measured_at = clock.wall(files.at);
        let fig = |value: f64| {
            Some(Figure {
                value,
                measured_at,
                stale: false,
            })
        };
        let prev = state.files_last.filter(|p| files.at > p.at);
        let dt = prev.map(|p| files.at.duration_since(p.at).as_secs_f64());
        let p = &mut state.pressure;
        if let Some(cpu) = files.readings.cpu {
            p.cpu_usage_seconds_total = fig(cpu.usage_ns as f64 / 1e9);
            p.cpu_periods_total = fig(cpu.nr_periods as f64);
            p.cpu_throttled_periods_total = fig(cpu.nr_throttled as f64);
            p.cpu_throttled_seconds_total = fig(cpu.throttled_ns as f64 / 1e9);
            if let (Some(prev_cpu), Some(dt)) = (prev.and_then(|p| p.readings.cpu), dt) {
                if let Some(d) = delta(cpu.usage_ns, prev_cpu.usage_ns) {
                    p.cpu_usage_cores = fig(d as f64 / 1e9 / dt);
                }
                if let (Some(dp), Some(dthr)) = (
                    delta(cpu.nr_periods, prev_cpu.nr_periods),
                    delta(cpu.nr_throttled, prev_cpu.nr_throttled),
                ) {
                    let ratio = if dp == 0 {
                        0.0
                    } else {
                        (dthr as f64 / dp as f64).min(1.0)
                    };
                    p.cpu_throttled_ratio = fig(ratio);
                }
                if let Some(d) = delta(cpu.throttled_ns, prev_cpu.throttled_ns) {
                    p.cpu_throttled_seconds_per_second = fig(d as f64 / 1e9 / dt);
                }
            }
        }
        if let Some(mem) = files.readings.memory {
            p.memory_usage_bytes = fig(mem.usage_bytes as f64);
            p.memory_working_set_bytes = fig(mem.working_set_bytes as f64);
        }
        let psi = |cur: Option<PsiReading>, prev: Option<PsiReading>| {
            cur.map(|r| psi_figures(r, prev.zip(dt), measured_at))
        };
        if files.readings.psi_cpu.is_some() {
            p.psi_cpu = psi(files.readings.psi_cpu, prev.and_then(|p| p.readings.psi_cpu));
        }
        if files.readings.psi_memory.is_some() {
            p.psi_memory = psi(
                files.readings.psi_memory,
                prev.and_then(|p| p.readings.psi_memory),
            );
        }
        if files.readings.psi_io.is_some() {
            p.psi_io = psi(files.readings.psi_io, prev.and_then(|p| p.readings.psi_io));
        }
        if let Some(oom) = files.readings.oom_kills {
            state.hot.oom_files = state.hot.oom_files.max(oom);
        }
        if state.files_last.is_none_or(|p| files.at >= p.at) {
            // Keep what this reading lacks from the previous one, so that rates of files read at
            // different paces (e.g. PSI less often) still have a previous value.
            let mut merged = *files;
            if let Some(old) = state.files_last {
                merged.readings.cpu = merged.readings.cpu.or(old.readings.cpu);
                merged.readings.memory = merged.readings.memory.or(old.readings.memory);
                merged.readings.psi_cpu = merged.readings.psi_cpu.or(old.readings.psi_cpu);
                merged.readings.psi_memory = merged.readings.psi_memory.or(old.readings.psi_memory);
                merged.readings.psi_io = merged.readings.psi_io.or(old.readings.psi_io);
            }
            state.files_last = Some(merged);
        }
        state.hot.last_update = Some(files.at);
        update_oom(&mut state.hot, measured_at);
    }

    // === Control ===

    fn handle_control(
        &mut self,
        control: Control,
        now: Instant,
        current: &ArcSwap<Snapshot>,
        changed: &watch::Sender<u64>,
    ) {
        match control {
            Control::Reserve(request, reply) => {
                let _span = tracing::info_span!("reserve", id = %request.id, pod = %request.pod).entered();
                self.refresh_pods(now);
                let result = self.reserve(&request, now);
                match &result {
                    Ok(_) => tracing::info!(amount = %request.amount, "reserved"),
                    Err(e) => tracing::info!(error = %e, "reservation refused"),
                }
                if result.is_ok() {
                    self.publish(now, current, changed);
                }
                let _ = reply.send(result);
            }
            Control::Release(id, reply) => {
                let _span = tracing::info_span!("release", id = %id).entered();
                let released = self.ledger.release(&id);
                let result = released.map(|r| (self.reservation_view(&r), self.headroom(now)));
                if result.is_some() {
                    tracing::info!("released");
                    // Kept on disk until it expires there: room held too long, never promised twice.
                    if let Err(e) = self.save_ledger() {
                        tracing::warn!(
                            "{e}; after a restart the reservation holds its room until it expires"
                        );
                    }
                    self.publish(now, current, changed);
                }
                let _ = reply.send(result);
            }
        }
    }

    fn reserve(&mut self, request: &ReserveRequest, now: Instant) -> Result<LedgerReply, ReserveError> {
        if request.require_known_pod && !self.knows_pod(&request.pod) {
            return Err(ReserveError::UnknownPod(request.pod.clone()));
        }
        self.ledger.expire(now);
        // Pods evicted for this very reservation are leaving: their room is what it holds.
        let leaving = self
            .pods
            .pods
            .iter()
            .filter(|p| request.releasing.contains(&p.pod.uid))
            .fold(Resources::ZERO, |sum, p| sum.saturating_add(p.requests));
        if !leaving.is_zero() {
            tracing::debug!(%leaving, "counting the releasing Pods as gone");
        }
        // What the count of a resizing Pod at its desired size already holds, for this
        // reservation and the live ones: the ledger adds every reservation whole.
        let held = self.held_by_counts(now, Some((&request.pod, request.amount)));
        let available = room_once_gone(self.allocatable(), self.allocated, leaving).saturating_add(held);
        let expires_at = now + request.ttl;
        self.ledger.reserve(
            &request.id,
            &request.pod,
            request.amount,
            expires_at,
            now,
            available,
        )?;
        // A promise a restart would forget is not made.
        if let Err(e) = self.save_ledger() {
            self.ledger.release(&request.id);
            return Err(ReserveError::Persist(e.to_string()));
        }
        let view = ReservationView {
            id: request.id.clone(),
            pod: request.pod.clone(),
            amount: request.amount,
            expires_at: self.clock.wall(expires_at),
        };
        Ok((view, self.headroom(now)))
    }

    /// Writes the ledger to its file, if it has one.
    fn save_ledger(&mut self) -> Result<(), ReservationsFileError> {
        match &mut self.reservations_file {
            Some(file) => file.save(&self.ledger, |at| self.clock.wall(at)),
            None => Ok(()),
        }
    }

    fn knows_pod(&self, id: &str) -> bool {
        self.pods.pods.iter().any(|p| p.pod.matches(id))
            || self
                .cgroups
                .values()
                .any(|s| matches!(&s.owner, Some(CgroupOwner::Pod { pod, .. }) if pod.matches(id)))
    }

    fn headroom(&self, now: Instant) -> NodeHeadroom {
        let reserved = self
            .ledger
            .total(now)
            .saturating_sub(self.held_by_counts(now, None));
        node_headroom(self.allocatable(), self.allocated, reserved)
    }

    /// The pending resize counted in `pod`'s requests (zero for an unknown Pod).
    fn pending_resize_of(&self, pod: &str) -> Resources {
        self.pods
            .pods
            .iter()
            .find(|p| p.pod.matches(pod))
            .map_or(Resources::ZERO, |p| p.pending_resize)
    }

    /// [`headroom_node_model::ReservationLedger::held_by_counts`] with this node's Pods.
    fn held_by_counts(&self, now: Instant, adding: Option<(&str, Resources)>) -> Resources {
        self.ledger
            .held_by_counts(now, adding, |pod| self.pending_resize_of(pod))
    }

    /// The Pod source's allocatable (from the Node object) when it has one, else the config's.
    fn allocatable(&self) -> Resources {
        self.pods.allocatable.unwrap_or(self.config.allocatable)
    }

    fn reservation_view(&self, r: &headroom_node_model::Reservation) -> ReservationView {
        ReservationView {
            id: r.id.clone(),
            pod: r.pod.clone(),
            amount: r.amount,
            expires_at: self.clock.wall(r.expires_at),
        }
    }

    // === Housekeeping ===

    /// When the node's Pod set (and allocatable) was last known current.
    fn pods_as_of(&self, now: Instant) -> SystemTime {
        self.pod_source
            .live_as_of()
            .map(|t| t.min(self.clock.wall(now)))
            .unwrap_or_else(|| self.clock.wall(self.pods_read_at).max(self.pods.as_of))
    }

    fn refresh_pods(&mut self, now: Instant) {
        if self.pod_source.generation() != self.pods.generation {
            self.pods = self.pod_source.pods();
            self.pods_read_at = now;
            self.allocated = sum_requests(&self.pods);
            self.dirty = true;
        }
    }

    fn tick(&mut self, now: Instant) {
        let _span = tracing::debug_span!("tick").entered();
        self.refresh_pods(now);
        // A quiet node still publishes now and then: a snapshot's `generated_at` is what says
        // the pipeline is alive, and the shim evicts only on a recent one.
        if self
            .last_publish
            .is_none_or(|at| now.duration_since(at) >= HEARTBEAT)
        {
            self.dirty = true;
        }
        let expired = self.ledger.expire(now);
        for r in &expired {
            tracing::info!(id = %r.id, pod = %r.pod, amount = %r.amount, "reservation expired");
        }
        if !expired.is_empty() {
            self.dirty = true;
            if let Err(e) = self.save_ledger() {
                tracing::warn!("{e}; a restart drops the expired reservations itself");
            }
        }
        // A figure turning stale is a change watchers must see.
        let stale_after = self.config.stale_after;
        if self.pod_source.live_as_of().is_some() {
            let as_of = self.pods_as_of(now);
            let stale = self
                .clock
                .wall(now)
                .duration_since(as_of)
                .is_ok_and(|age| age > stale_after);
            if stale != self.pods_stale {
                self.pods_stale = stale;
                self.dirty = true;
            }
        }
        let crossed = |t: Instant| {
            let turns = t + stale_after;
            turns > self.last_tick && turns <= now
        };
        if self
            .cgroups
            .values()
            .any(|s| s.hot.last_update.is_some_and(crossed))
        {
            self.dirty = true;
        }
        let dropped = self.shared.dropped.load(Ordering::Relaxed);
        if dropped != self.dropped_reported {
            self.dirty = true;
            if self
                .last_drop_warning
                .is_none_or(|t| now.duration_since(t) >= DROP_WARN_INTERVAL)
            {
                tracing::warn!(
                    dropped_since_last = dropped - self.dropped_reported,
                    dropped_total = dropped,
                    capacity = self.shared.capacity,
                    "pipeline queue overflowed: records dropped"
                );
                self.dropped_reported = dropped;
                self.last_drop_warning = Some(now);
            }
        }
        self.last_tick = now;
    }

    // === Publication ===

    fn publish(&mut self, now: Instant, current: &ArcSwap<Snapshot>, changed: &watch::Sender<u64>) {
        let _span = tracing::trace_span!("publish", version = self.version + 1).entered();
        self.version += 1;
        for state in self.cgroups.values_mut() {
            state.flush();
        }
        if self.kernel_events_shared.is_none() {
            self.kernel_events_shared = Some(self.kernel_events.iter().cloned().collect());
        }
        let snapshot = self.build_snapshot(now);
        current.store(Arc::new(snapshot));
        changed.send_replace(self.version);
        self.dirty = false;
        self.last_publish = Some(now);
        // Under a flood of records, rebuilding the snapshot at every `min_publish_interval`
        // would eat the aggregator (a node with hundreds of Pods takes a few hundred µs to
        // build). Waiting PUBLISH_COST_FACTOR times the build time between publications bounds
        // that share to about 1/(1 + PUBLISH_COST_FACTOR), and costs freshness only when
        // building is slow.
        let build = now.elapsed();
        self.publish_gap = self.config.min_publish_interval.max(build * PUBLISH_COST_FACTOR);
    }

    /// The snapshot of the current state. Figures still waiting in [`Hot`] are not in it:
    /// [`Aggregator::publish`] flushes them first (a new aggregator has none).
    pub(crate) fn build_snapshot(&self, now: Instant) -> Snapshot {
        let wall_now = self.clock.wall(now);
        let stale_after = self.config.stale_after;
        let is_stale = |t: SystemTime| wall_now.duration_since(t).is_ok_and(|age| age > stale_after);
        // Each Pod once, found by reference (a Pod's cgroups clone nothing to look it up), then
        // sorted by namespace, name, uid.
        let mut pods: Vec<PodView> = Vec::with_capacity(self.pods.pods.len());
        let mut index = PodIndex::default();
        index.reserve(self.pods.pods.len());
        for entry in self.pods.pods.iter() {
            view_index(&mut index, &mut pods, &entry.pod, entry.requests);
        }
        let mut node_pressure = Pressure::default();
        for state in self.cgroups.values() {
            let (pod, container) = match &state.owner {
                None => continue,
                Some(CgroupOwner::Node) => {
                    node_pressure.merge_newer(&state.pressure);
                    continue;
                }
                Some(CgroupOwner::Pod { pod, container }) => (pod, container),
            };
            let i = view_index(&mut index, &mut pods, pod, Resources::ZERO);
            let view = &mut pods[i];
            let pressure = &state.pressure;
            match container {
                None => view.pod_cgroup.merge_newer(pressure),
                Some(name) => match view.containers.iter_mut().find(|c| &c.name == name) {
                    Some(c) => c.pressure.merge_newer(pressure),
                    None => view.containers.push(ContainerView {
                        name: name.clone(),
                        pressure: pressure.clone(),
                    }),
                },
            }
        }
        pods.sort_unstable_by(|a, b| a.pod.cmp(&b.pod));
        for pod in &mut pods {
            pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
            mark_stale(&mut pod.pod_cgroup, &is_stale);
            for c in &mut pod.containers {
                mark_stale(&mut c.pressure, &is_stale);
            }
        }
        mark_stale(&mut node_pressure, &is_stale);
        let pods_as_of = self.pods_as_of(now);
        Snapshot {
            version: self.version,
            node_name: self.config.node_name.clone(),
            generated_at: wall_now,
            stale_after,
            node: NodeFigures {
                headroom: self.headroom(now),
                measured_at: pods_as_of,
                stale: is_stale(pods_as_of),
            },
            node_pressure,
            pods,
            reservations: self
                .ledger
                .iter()
                .filter(|r| r.is_live(now))
                .map(|r| self.reservation_view(r))
                .collect(),
            stats: PipelineStats {
                processed_total: self.processed,
                dropped_total: self.shared.dropped.load(Ordering::Relaxed),
                unattributed_total: self.unattributed,
                queue_capacity: self.shared.capacity as u64,
            },
            kernel_events: self
                .kernel_events_shared
                .clone()
                .unwrap_or_else(|| self.kernel_events.iter().cloned().collect()),
        }
    }
}

/// The state of `key` in `cgroups`, resolving its owner when it is new (or due for another
/// try); counts the record as unattributed while no owner is known.
fn cgroup_state<'a>(
    cgroups: &'a mut KeyMap<Box<CgroupState>>,
    resolver: &dyn PodResolver,
    resolve_retry: Duration,
    unattributed: &mut u64,
    key: CgroupKey,
    at: Instant,
) -> &'a mut CgroupState {
    let state = cgroups.entry(key).or_default();
    if !state.hot.owned && state.hot.next_resolve.is_none_or(|t| at >= t) {
        state.owner = resolver.resolve(&key);
        state.hot.owned = state.owner.is_some();
        state.hot.next_resolve = Some(at + resolve_retry);
    }
    if !state.hot.owned {
        *unattributed += 1;
    }
    state
}

/// Where each Pod's view is in the snapshot being built.
type PodIndex<'a> = HashMap<&'a PodRef, usize, BuildHasherDefault<KeyHasher>>;

/// The index of `pod`'s view in `pods`, added (with `requests`) if it is not there yet.
fn view_index<'a>(
    index: &mut PodIndex<'a>,
    pods: &mut Vec<PodView>,
    pod: &'a PodRef,
    requests: Resources,
) -> usize {
    *index.entry(pod).or_insert_with(|| {
        pods.push(PodView {
            pod: pod.clone(),
            requests,
            ..PodView::default()
        });
        pods.len() - 1
    })
}

fn sum_requests(pods: &PodSet) -> Resources {
    pods.pods
        .iter()
        .fold(Resources::ZERO, |sum, p| sum.saturating_add(p.requests))
}

/// One of the OOM counts was updated at `measured_at`: once any is non-zero, the OOM figure
/// (the largest of the three, written by [`CgroupState::flush`]) is measured then.
fn update_oom(h: &mut Hot, measured_at: SystemTime) {
    let total = h.oom_probe.max(h.oom_files).max(h.oom_events);
    if total > 0 || h.oom_at.is_some() {
        h.oom_at = Some(measured_at);
        h.pending = true;
    }
}

fn psi_figures(cur: PsiReading, prev: Option<(PsiReading, f64)>, measured_at: SystemTime) -> PsiFigures {
    let full = cur.full.unwrap_or_default();
    let rate = |c: u64, p: u64, dt: f64| {
        if dt > 0.0 {
            c.saturating_sub(p) as f64 / 1e6 / dt
        } else {
            0.0
        }
    };
    let (some_rate, full_rate) = match prev {
        Some((p, dt)) => (
            rate(cur.some.total_us, p.some.total_us, dt),
            rate(full.total_us, p.full.unwrap_or_default().total_us, dt),
        ),
        None => (0.0, 0.0),
    };
    PsiFigures {
        some_avg: [cur.some.avg10, cur.some.avg60, cur.some.avg300],
        some_total_seconds: cur.some.total_us as f64 / 1e6,
        full_avg: [full.avg10, full.avg60, full.avg300],
        full_total_seconds: full.total_us as f64 / 1e6,
        some_seconds_per_second: some_rate,
        full_seconds_per_second: full_rate,
        measured_at: Some(measured_at),
        stale: false,
    }
}

fn mark_stale(p: &mut Pressure, is_stale: &impl Fn(SystemTime) -> bool) {
    for f in [
        &mut p.cpu_usage_cores,
        &mut p.cpu_usage_seconds_total,
        &mut p.cpu_periods_total,
        &mut p.cpu_throttled_periods_total,
        &mut p.cpu_throttled_seconds_total,
        &mut p.cpu_throttled_ratio,
        &mut p.cpu_throttled_seconds_per_second,
        &mut p.probe_throttle_episodes_per_second,
        &mut p.probe_throttled_seconds_per_second,
        &mut p.runq_latency_mean_seconds,
        &mut p.memory_usage_bytes,
        &mut p.memory_working_set_bytes,
        &mut p.memory_reclaim_stall_seconds_per_second,
        &mut p.oom_kills_total,
    ]
    .into_iter()
    .flatten()
    {
        f.stale = is_stale(f.measured_at);
    }
    for psi in [&mut p.psi_cpu, &mut p.psi_memory, &mut p.psi_io]
        .into_iter()
        .flatten()
    {
        psi.stale = psi.measured_at.is_none_or(is_stale);
    }
}
