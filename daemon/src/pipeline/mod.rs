//! The lock-free pipeline: probe readers → bounded [`ArrayQueue`] → one aggregator thread →
//! immutable [`Snapshot`] published through an [`ArcSwap`].
//!
//! - Producers ([`PipelineSender`], cloneable) never block: a full queue drops the record and
//!   counts it (`dropped_total`, in every snapshot and in `/metrics`, and a rate-limited warning).
//! - A producer that reads a whole collector cycle at once hands it over as one batch
//!   ([`PipelineSender::send_batch`]): one queue slot, one hand-over, instead of one per record.
//!   The queue is bounded in records, not slots; a batch that does not fit is dropped whole and
//!   every record in it is counted.
//! - Probe samples are reduced at the producer to the counters the aggregator uses
//!   ([`ProbeCounters`]); the rest of a probe-map value (the run-queue histogram above all) never
//!   enters the queue. Every record is small ([`PipelineInput`] is at most 96 bytes).
//! - The aggregator owns every piece of mutable state (per-cgroup counters, the reservation
//!   ledger, the Pod set), so no lock is needed anywhere; state-changing requests (`Reserve`,
//!   `Release`) reach it as [`Control`] messages with a reply channel.
//! - Readers ([`SnapshotReader`]) load the current `Arc<Snapshot>` without locking; watchers wait
//!   on a [`tokio::sync::watch`] channel that carries only the version, so a slow watcher always
//!   reads the newest snapshot and never a backlog.

mod aggregator;
pub mod pods;
pub mod reservations_file;
pub mod snapshot;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use crossbeam::{channel, queue::ArrayQueue, utils::CachePadded};
use headroom_common::{CgroupKey, CgroupStats, ProbeEvent};
use headroom_node_model::{LedgerError, NodeHeadroom, Resources};
use tokio::sync::{oneshot, watch};

pub use pods::{CgroupOwner, InMemoryPodSource, PodEntry, PodResolver, PodSet, PodSource, StaticPodResolver};
pub use snapshot::{
    ContainerView, Figure, KERNEL_EVENTS_KEPT, KernelEventView, NodeFigures, PipelineStats, PodRef, PodView,
    Pressure, PsiFigures, ReservationView, Snapshot,
};

// === Input ===

/// The probe counters the aggregator derives figures from: cumulative, summed over CPUs.
///
/// A probe-map value ([`CgroupStats`]) also carries a 32-bucket run-queue latency histogram and
/// reclaim episode counts that no served figure uses (`headroomd observe` reads them from the
/// probes directly); producers reduce each value to this before queueing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProbeCounters {
    /// Throttle episodes.
    pub throttle_episodes: u64,
    /// Throttled time, nanoseconds.
    pub throttled_ns: u64,
    /// Run-queue latency samples.
    pub runq_count: u64,
    /// Sum of run-queue latency samples, nanoseconds.
    pub runq_total_ns: u64,
    /// Memcg limit reclaim plus direct reclaim stall time, nanoseconds.
    pub reclaim_stall_ns: u64,
    /// OOM victims.
    pub oom_kills: u64,
}

impl From<&CgroupStats> for ProbeCounters {
    fn from(s: &CgroupStats) -> Self {
        Self {
            throttle_episodes: s.throttle_episodes,
            throttled_ns: s.throttled_ns,
            runq_count: s.runq_count,
            runq_total_ns: s.runq_total_ns,
            reclaim_stall_ns: s.memcg_reclaim_stall_ns.saturating_add(s.direct_reclaim_stall_ns),
            oom_kills: s.oom_kills,
        }
    }
}

/// Cumulative probe counters of one cgroup (summed over CPUs), read at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupSample {
    /// Which cgroup.
    pub key: CgroupKey,
    /// What the aggregator uses of the probe map's value.
    pub counters: ProbeCounters,
    /// When the map was read.
    pub at: Instant,
}

impl CgroupSample {
    /// The sample of a probe-map value: `stats` reduced to [`ProbeCounters`].
    pub fn new(key: CgroupKey, stats: &CgroupStats, at: Instant) -> Self {
        Self {
            key,
            counters: stats.into(),
            at,
        }
    }
}

// The readings of cgroup files are cgroupfs's types.
pub use headroom_cgroupfs::{CpuStat, MemoryStat, PsiLine, PsiReading, StatReadings};

/// What was read from a cgroup's files at `at`. Absent parts were not available.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgroupFiles {
    /// Which cgroup.
    pub key: CgroupKey,
    /// When the files were read.
    pub at: Instant,
    /// The files' values.
    pub readings: StatReadings,
}

impl CgroupFiles {
    /// A reading of `key` at `at` with nothing in it yet.
    pub fn new(key: CgroupKey, at: Instant) -> Self {
        Self {
            key,
            at,
            readings: StatReadings::default(),
        }
    }
}

/// A record for the aggregator.
#[derive(Clone, Debug, PartialEq)]
pub enum PipelineInput {
    /// Probe counters of one cgroup.
    Sample(CgroupSample),
    /// A discrete probe event (OOM kill, cgroup created or removed), received at the given instant.
    Event(ProbeEvent, Instant),
    /// A reading of a cgroup's files (boxed: it is several times the size of the other records,
    /// and read at the pace of file system calls, so one allocation per reading costs nothing).
    CgroupFiles(Box<CgroupFiles>),
}

// Records are copied into batches and queue slots: keep them within a cache line and a half.
const _: () = assert!(std::mem::size_of::<PipelineInput>() <= 96);

impl From<CgroupSample> for PipelineInput {
    fn from(sample: CgroupSample) -> Self {
        Self::Sample(sample)
    }
}

impl From<CgroupFiles> for PipelineInput {
    fn from(files: CgroupFiles) -> Self {
        Self::CgroupFiles(Box::new(files))
    }
}

// === Configuration ===

/// Tuning of the pipeline.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Node name served in snapshots.
    pub node_name: String,
    /// The node's allocatable resources.
    pub allocatable: Resources,
    /// Queue capacity, in records (a batch takes as many as it holds).
    pub queue_capacity: usize,
    /// Figures older than this are served with `stale = true`.
    pub stale_after: Duration,
    /// At most one snapshot per this interval (changes in between are coalesced).
    pub min_publish_interval: Duration,
    /// Housekeeping: reservation expiry, staleness, Pod-source polling.
    pub tick_interval: Duration,
    /// Cgroups without an owner are resolved again after this long.
    pub resolve_retry: Duration,
    /// Where the ledger is kept across restarts (`None`: in memory only).
    pub reservations_file: Option<std::path::PathBuf>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            node_name: "standalone".into(),
            allocatable: Resources::new(8_000, 32 << 30),
            queue_capacity: 65_536,
            stale_after: Duration::from_secs(5),
            min_publish_interval: Duration::from_millis(1),
            tick_interval: Duration::from_millis(100),
            resolve_retry: Duration::from_secs(1),
            reservations_file: None,
        }
    }
}

// === Producers ===

/// One queue slot: a record, or a producer's batch of records (in order).
#[derive(Debug)]
enum Slot {
    One(PipelineInput),
    Batch(Vec<PipelineInput>),
}

/// State shared by producers, the aggregator and readers (all atomics; no locks).
#[derive(Debug)]
struct Shared {
    /// As many slots as records fit (every slot holds at least one record), so a push admitted
    /// by `queued` always finds a free slot.
    queue: ArrayQueue<Slot>,
    /// Records in the queue (admitted, not yet taken by the aggregator); at most `capacity`.
    queued: CachePadded<AtomicUsize>,
    /// Queue capacity in records.
    capacity: usize,
    dropped: AtomicU64,
    /// The aggregator is (about to be) parked and wants an unpark after the next push.
    sleeping: AtomicBool,
    shutdown: AtomicBool,
}

impl Shared {
    /// The aggregator took a slot of `records` records off the queue.
    fn taken(&self, records: usize) {
        self.queued.fetch_sub(records, Ordering::AcqRel);
    }
}

/// Why a record (or a batch) was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The queue was full; the record, or every record of the batch, was dropped and counted.
    #[error("pipeline queue full: record(s) dropped")]
    Full,
}

/// A cheap, cloneable producer. Sending never blocks.
#[derive(Clone)]
pub struct PipelineSender {
    shared: Arc<Shared>,
    aggregator: thread::Thread,
}

impl PipelineSender {
    /// Queues a record; on a full queue drops it, counts it and returns [`SendError::Full`].
    pub fn send(&self, input: PipelineInput) -> Result<(), SendError> {
        self.push(Slot::One(input), 1)
    }

    /// Queues a batch of records in one slot (the aggregator applies them in order, before
    /// anything sent after it). The batch is taken whole or not at all: if its records do not fit
    /// in the queue's remaining capacity (or it holds more than the capacity), every one of them
    /// is dropped and counted, and [`SendError::Full`] is returned. An empty batch is a no-op.
    pub fn send_batch(&self, mut batch: Vec<PipelineInput>) -> Result<(), SendError> {
        match batch.len() {
            0 => Ok(()),
            1 => match batch.pop() {
                Some(input) => self.send(input),
                None => Ok(()),
            },
            n => self.push(Slot::Batch(batch), n),
        }
    }

    fn push(&self, slot: Slot, records: usize) -> Result<(), SendError> {
        let shared = &*self.shared;
        let admitted = shared
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued
                    .checked_add(records)
                    .filter(|&total| total <= shared.capacity)
            })
            .is_ok();
        if !admitted {
            shared.dropped.fetch_add(records as u64, Ordering::Relaxed);
            return Err(SendError::Full);
        }
        if shared.queue.push(slot).is_err() {
            // Unreachable while every slot holds a record and `queued` <= capacity = slots; if
            // it ever happens, the records are still counted, never silently lost.
            shared.taken(records);
            shared.dropped.fetch_add(records as u64, Ordering::Relaxed);
            return Err(SendError::Full);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        if shared.sleeping.load(Ordering::Relaxed) && shared.sleeping.swap(false, Ordering::AcqRel) {
            self.aggregator.unpark();
        }
        Ok(())
    }

    /// Records dropped so far.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Queue capacity, in records.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }
}

// === Control ===

/// Why a reservation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// The ledger refused it.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The Pod is not on this node.
    #[error("unknown pod {0:?}: not among this node's Pods")]
    UnknownPod(String),
    /// The aggregator is gone (shutting down).
    #[error("the pipeline is shutting down")]
    Closed,
    /// The reservation could not be kept on disk, so it was not made.
    #[error("the reservation was not made: {0}")]
    Persist(String),
}

/// A reservation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveRequest {
    /// Reservation id.
    pub id: String,
    /// Pod (uid or `namespace/name`).
    pub pod: String,
    /// Amount.
    pub amount: Resources,
    /// Time to live.
    pub ttl: Duration,
    /// Refuse Pods that neither the Pod source nor the cgroup resolver knows.
    pub require_known_pod: bool,
    /// Uids of Pods being evicted for this reservation: the room is computed as if they were
    /// gone. Uids the Pod source does not hold are ignored (already gone: nothing to discount).
    pub releasing: Vec<String>,
}

/// Result of a ledger change: the reservation and the node's headroom after it.
pub type LedgerReply = (ReservationView, NodeHeadroom);

/// A state-changing request for the aggregator.
#[derive(Debug)]
pub(crate) enum Control {
    Reserve(ReserveRequest, oneshot::Sender<Result<LedgerReply, ReserveError>>),
    Release(String, oneshot::Sender<Option<LedgerReply>>),
}

/// Sends ledger requests to the aggregator.
#[derive(Clone)]
pub struct LedgerHandle {
    control: channel::Sender<Control>,
    aggregator: thread::Thread,
}

impl LedgerHandle {
    /// Reserves room; the new snapshot is published before this returns.
    pub async fn reserve(&self, request: ReserveRequest) -> Result<LedgerReply, ReserveError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(Control::Reserve(request, tx))
            .map_err(|_| ReserveError::Closed)?;
        self.aggregator.unpark();
        rx.await.map_err(|_| ReserveError::Closed)?
    }

    /// Releases a reservation; `Ok(None)` if there was none with this id.
    pub async fn release(&self, id: String) -> Result<Option<LedgerReply>, ReserveError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(Control::Release(id, tx))
            .map_err(|_| ReserveError::Closed)?;
        self.aggregator.unpark();
        rx.await.map_err(|_| ReserveError::Closed)
    }
}

// === Readers ===

/// Lock-free access to the newest snapshot, and change notification.
#[derive(Clone)]
pub struct SnapshotReader {
    current: Arc<ArcSwap<Snapshot>>,
    changed: watch::Receiver<u64>,
    shared: Arc<Shared>,
}

impl SnapshotReader {
    /// The newest snapshot (no lock: an atomic load and a reference-count increment).
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// A receiver that is marked changed whenever a newer snapshot is published. It carries only
    /// the version: call [`SnapshotReader::load`] after `changed()` to read the newest one.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.clone()
    }

    /// Records dropped so far (live, not as of the last snapshot).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Records in the queue now, not yet taken by the aggregator: near the capacity, it is
    /// not keeping up (and `dropped` says what that cost).
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }
}

/// Owns the aggregator thread: stops and joins it on [`PipelineHandle::shutdown`] or drop.
pub struct PipelineHandle {
    sender: PipelineSender,
    ledger: LedgerHandle,
    thread: Option<JoinHandle<()>>,
}

impl PipelineHandle {
    /// A producer for probe readers (clone it freely).
    pub fn sender(&self) -> PipelineSender {
        self.sender.clone()
    }

    /// The ledger's request channel.
    pub fn ledger(&self) -> LedgerHandle {
        self.ledger.clone()
    }

    /// Stops the aggregator and waits for it.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.sender.shared.shutdown.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            if thread.join().is_err() {
                tracing::error!("pipeline aggregator thread panicked");
            }
        }
    }
}

impl Drop for PipelineHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the aggregator thread.
pub fn spawn(
    config: PipelineConfig,
    resolver: Arc<dyn PodResolver>,
    pod_source: Arc<dyn PodSource>,
) -> std::io::Result<(PipelineHandle, SnapshotReader)> {
    let capacity = config.queue_capacity.max(1);
    let shared = Arc::new(Shared {
        queue: ArrayQueue::new(capacity),
        queued: CachePadded::new(AtomicUsize::new(0)),
        capacity,
        dropped: AtomicU64::new(0),
        sleeping: AtomicBool::new(false),
        shutdown: AtomicBool::new(false),
    });
    let (control_tx, control_rx) = channel::unbounded();
    let aggregator = aggregator::Aggregator::new(config, resolver, pod_source, shared.clone(), control_rx);
    let first = aggregator.build_snapshot(Instant::now());
    let current = Arc::new(ArcSwap::from_pointee(first));
    let (changed_tx, changed_rx) = watch::channel(0);
    let thread = {
        let current = current.clone();
        thread::Builder::new()
            .name("headroom-aggregator".into())
            .spawn(move || aggregator.run(&current, &changed_tx))?
    };
    let handle_thread = thread.thread().clone();
    let sender = PipelineSender {
        shared: shared.clone(),
        aggregator: handle_thread.clone(),
    };
    let ledger = LedgerHandle {
        control: control_tx,
        aggregator: handle_thread,
    };
    let reader = SnapshotReader {
        current,
        changed: changed_rx,
        shared,
    };
    Ok((
        PipelineHandle {
            sender,
            ledger,
            thread: Some(thread),
        },
        reader,
    ))
}

#[cfg(test)]
mod tests;
