//! The probe and cgroupfs readers that feed the pipeline.
//!
//! One thread, one cycle per interval: drain the probes' ring buffer, read their per-cgroup
//! counters (sending only what changed), re-walk cgroupfs when cgroups came or went, and read
//! the files of every Pod cgroup (kept open between cycles, see [`CgroupFileReaders`]). Sending
//! never blocks: a full queue drops and counts.
//!
//! Kernel events are pushed ([`KernelEvents::Push`], the default): between cycles the thread
//! waits in poll(2) on the ring buffer's fd, timed out at the next cycle, and forwards the
//! events as soon as the kernel wakes it (the probes output with the adaptive wake-up: one
//! wake-up per burst). A wake-up drains events only; counters and files keep the cycle.
//! [`KernelEvents::Poll`] sleeps instead and takes events at the cycle (the poll-only peer the
//! freshness benchmark measures against).
//!
//! What is read at once is sent at once: the events of one drain are one batch, and so are the
//! probe counters of one map read, each value reduced to the counters the aggregator uses
//! ([`ProbeCounters`]); a batch holds at most a quarter of the queue ([`max_batch`]). So are the
//! file readings of one cycle: with the files kept open a cgroup's reading takes microseconds,
//! and one batch makes one snapshot and one wake-up of every `WatchHeadroom` subscriber per
//! cycle, where a record each made several.
use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use headroom_common::{CgroupKey, CgroupStats, EventKind, ProbeEvent};
use tracing::{info_span, warn};

use crate::{
    cgroups::{
        CgroupHost, CgroupIndex,
        files::{CgroupFileReaders, DEFAULT_MAX_OPEN_FILES},
    },
    pipeline::{CgroupSample, PipelineInput, PipelineSender, ProbeCounters},
    probes::{ProbeHealth, Probes},
};

/// What the probes report besides the pipeline's figures, for `/metrics` and readiness: each
/// cgroup's cumulative map value (with the run-queue histogram, which the pipeline never
/// carries) and the probes' own health. Published whole once per cycle; the map is the one the
/// cycle read anyway, so publishing costs no copy.
#[derive(Clone, Debug, Default)]
pub struct ProbeReport {
    /// Whether probes are loaded at all.
    pub loaded: bool,
    /// Programs attached, of `programs_total`.
    pub programs_attached: usize,
    /// Programs the probe object has.
    pub programs_total: usize,
    /// The probes' own counters (ring buffer and map overflows, failed kernel reads).
    pub health: ProbeHealth,
    /// Kernel memory of all probe maps (fdinfo `memlock`), bytes.
    pub map_memory_bytes: u64,
    /// Cgroups the per-cgroup maps hold.
    pub map_cgroups: u32,
    /// Why the last map read failed, if it did.
    pub read_error: Option<String>,
    /// What became of the cgroup ids in probe events and counters (see [`CgroupResolution`]).
    pub resolution: CgroupResolution,
    /// When the collector last read the probes.
    pub updated_at: Option<Instant>,
    /// Cumulative counters per cgroup, summed over CPUs.
    pub stats: HashMap<CgroupKey, CgroupStats>,
}

/// How the probes' cgroup ids met the cgroup index, cumulative. An id of a hierarchy headroom
/// indexes that the index does not hold is re-scanned for once; one still unknown after that
/// (created and removed between walks, or beyond the walk's depth) is counted here and logged,
/// never dropped silently. Ids of other v1 hierarchies (`pids`, `devices`, …) are not headroom's
/// and are not looked up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupResolution {
    /// Events read from the ring buffer.
    pub events_received: u64,
    /// Events, and cgroups of the counter map (each once), whose cgroup the index did not know
    /// even after a re-scan.
    pub unresolved: u64,
    /// Walks of cgroupfs made because an id was not in the index, or a cgroup came or went.
    pub rescans: u64,
}

/// At most one warning about unresolved cgroup ids per this interval.
const UNRESOLVED_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// The newest [`ProbeReport`], shared between the collector (writer) and its readers.
pub type ProbeReportCell = Arc<ArcSwap<ProbeReport>>;

/// How kernel events reach the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum KernelEvents {
    /// Woken by the ring buffer: forwarded as the kernel reports them.
    #[default]
    Push,
    /// Taken at each collector cycle only.
    Poll,
}

/// Tuning of the collector.
#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// Kernel events pushed or taken at the cycle.
    pub kernel_events: KernelEvents,
    /// Time between cycles.
    pub interval: Duration,
    /// cgroupfs is walked again at least this often, even without mkdir/rmdir events (the
    /// probes may be absent, or an event may have been dropped).
    pub rewalk_every: Duration,
    /// Cgroup roots beside `kubepods*` and `headroom` whose `pod<uid>` children are Pods (a
    /// standalone node's `--cgroup-root`).
    pub pod_roots: Vec<String>,
    /// Cgroup files kept open between cycles at most (and at most a quarter of the open-file
    /// soft limit); the Pod cgroups beyond it are read with an open and a close each cycle.
    pub max_open_files: usize,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            kernel_events: KernelEvents::Push,
            interval: Duration::from_millis(100),
            rewalk_every: Duration::from_secs(10),
            pod_roots: Vec::new(),
            max_open_files: DEFAULT_MAX_OPEN_FILES,
        }
    }
}

/// The longest walk period when no probe reports cgroup creation.
pub const REWALK_WITHOUT_PROBES: Duration = Duration::from_millis(500);

/// A running collector; stops and joins on drop.
pub struct Collector {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    /// Starts the collector thread. `probes` may be `None` (not root, no BTF): cgroup files
    /// are still read, so the node model and cAdvisor-style figures keep working.
    pub fn spawn(
        probes: Option<Probes>,
        host: CgroupHost,
        index: Arc<ArcSwap<CgroupIndex>>,
        sender: PipelineSender,
        config: CollectorConfig,
        report: ProbeReportCell,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        // Without probes no `cgroup_mkdir` says a Pod appeared: walk often enough that its
        // cgroup-file figures are attributed within a moment, not after the full period.
        let rewalk_every = if probes.is_some() {
            config.rewalk_every
        } else {
            config.rewalk_every.min(REWALK_WITHOUT_PROBES)
        };
        let thread = std::thread::Builder::new()
            .name("headroom-collector".into())
            .spawn(move || {
                let mut state = State {
                    probes,
                    host,
                    index,
                    sender,
                    last_sent: HashMap::new(),
                    dirty: true,
                    pod_roots: config.pod_roots.clone(),
                    report,
                    unknown: UnknownCgroups::default(),
                    files: CgroupFileReaders::new(config.max_open_files),
                };
                let mut last_walk = Instant::now();
                while !stop_flag.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    if last_walk.elapsed() >= rewalk_every {
                        state.dirty = true;
                    }
                    if state.dirty {
                        last_walk = Instant::now();
                    }
                    state.cycle();
                    let next_cycle = started + config.interval;
                    match config.kernel_events {
                        KernelEvents::Push if state.probes.is_some() => {
                            state.forward_events_until(next_cycle, &stop_flag);
                        }
                        _ => std::thread::sleep(next_cycle.saturating_duration_since(Instant::now())),
                    }
                }
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The largest batch the collector queues: a quarter of the queue, so that a read still fits
/// while other records wait, even in a queue configured smaller than the node's cgroup count.
fn max_batch(sender: &PipelineSender) -> usize {
    (sender.capacity() / 4).max(1)
}

/// Queues `records` in order, in batches of at most [`max_batch`]. Whatever does not fit is
/// dropped and counted by the pipeline (the aggregator reports it).
fn send_in_batches(sender: &PipelineSender, mut records: Vec<PipelineInput>) {
    let max = max_batch(sender);
    while records.len() > max {
        let rest = records.split_off(max);
        let _ = sender.send_batch(std::mem::replace(&mut records, rest));
    }
    let _ = sender.send_batch(records);
}

struct State {
    probes: Option<Probes>,
    host: CgroupHost,
    index: Arc<ArcSwap<CgroupIndex>>,
    sender: PipelineSender,
    /// What was last queued per cgroup (unchanged counters are not sent again).
    last_sent: HashMap<CgroupKey, ProbeCounters>,
    dirty: bool,
    pod_roots: Vec<String>,
    report: ProbeReportCell,
    unknown: UnknownCgroups,
    files: CgroupFileReaders,
}

/// The collector's side of [`CgroupResolution`].
#[derive(Default)]
struct UnknownCgroups {
    counts: CgroupResolution,
    /// Counter-map cgroups already re-scanned for and counted: a dead cgroup's counters stay in
    /// the map, and would otherwise cost a walk and a count every cycle. Kept to the keys of
    /// the last map read, so it never outgrows the map.
    counted: HashSet<CgroupKey>,
    /// `counts.unresolved` at the last warning, and when it was.
    warned: u64,
    last_warning: Option<Instant>,
}

impl UnknownCgroups {
    fn note(&mut self, unknown: &[CgroupKey], what: &'static str, now: Instant) {
        let Some(first) = unknown.first() else {
            return;
        };
        self.counts.unresolved += unknown.len() as u64;
        if self
            .last_warning
            .is_none_or(|t| now.duration_since(t) >= UNRESOLVED_WARN_INTERVAL)
        {
            warn!(
                unresolved_since_last = self.counts.unresolved - self.warned,
                unresolved_total = self.counts.unresolved,
                hierarchy_id = first.hierarchy_id,
                cgroup_id = first.id,
                what,
                "probe data for cgroups cgroupfs does not hold even after a re-scan \
                 (created and removed between walks, or their events were lost)"
            );
            self.warned = self.counts.unresolved;
            self.last_warning = Some(now);
        }
    }
}

impl State {
    fn cycle(&mut self) {
        let _span = info_span!("collect").entered();
        self.drain_events();
        if self.dirty {
            self.rebuild_index();
            self.dirty = false;
        }
        self.send_probe_counters();
        self.send_cgroup_files();
    }

    /// Until `deadline` (or a stop): waits for the ring buffer and forwards what it holds.
    fn forward_events_until(&mut self, deadline: Instant, stop: &AtomicBool) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        while !stop.load(Ordering::Relaxed) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let Some(probes) = self.probes.as_ref() else {
                return;
            };
            // Rounded up: a timeout that rounds to 0 ms would spin until the deadline.
            let ms = u16::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(probes.events_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => {}
                Ok(_) => {
                    let _span = info_span!("events").entered();
                    self.drain_events();
                }
                Err(e) => {
                    // Not expected on a ring buffer; wait the cycle out rather than spin.
                    warn!("poll on the probes' ring buffer failed: {e}");
                    std::thread::sleep(left);
                    return;
                }
            }
        }
    }

    fn rebuild_index(&self) {
        self.index.store(Arc::new(CgroupIndex::build_with(
            &self.host.hierarchies(),
            &self.pod_roots,
        )));
    }

    /// Whether `key` is of a hierarchy the index walks.
    fn tracked(&self, key: &CgroupKey) -> bool {
        self.host.hierarchies().iter().any(|h| h.id == key.hierarchy_id)
    }

    /// Of `keys` (tracked hierarchies only; one per event, repeats kept), those the index does
    /// not hold even after one re-scan, made only when some key is missing or `rescan` asks.
    fn unknown_after_rescan(&mut self, mut keys: Vec<CgroupKey>, rescan: bool) -> Vec<CgroupKey> {
        let index = self.index.load();
        keys.retain(|key| self.tracked(key) && index.get(key).is_none());
        drop(index);
        if keys.is_empty() && !rescan {
            return keys;
        }
        self.rebuild_index();
        self.unknown.counts.rescans += 1;
        let index = self.index.load();
        keys.retain(|key| index.get(key).is_none());
        keys
    }

    fn drain_events(&mut self) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        let mut events = Vec::new();
        let malformed = probes.drain_events(|event| events.push(event));
        if malformed > 0 {
            warn!(malformed, "skipped malformed probe events");
        }
        let removed = self.forward_events(events, Instant::now());
        // A removed cgroup's counters are final: forget them in the kernel map too, or it grows
        // with every Pod the node ever ran.
        if let Some(probes) = self.probes.as_mut() {
            for key in removed {
                probes.forget_cgroup(&key);
            }
        }
    }

    /// Sends one drain's events as one batch, once the index holds their cgroups (or they are
    /// counted as unresolved); returns the cgroups removed.
    fn forward_events(&mut self, events: Vec<ProbeEvent>, now: Instant) -> Vec<CgroupKey> {
        if events.is_empty() {
            return Vec::new();
        }
        self.unknown.counts.events_received += events.len() as u64;
        let is = |e: &ProbeEvent, kind: EventKind| e.kind == kind as u32;
        let removed: Vec<CgroupKey> = events
            .iter()
            .filter(|e| is(e, EventKind::CgroupRmdir))
            .map(|e| e.cgroup)
            .collect();
        // A removed cgroup is gone from cgroupfs: it is known if the index held it before.
        let index = self.index.load();
        let unknown_removed: Vec<CgroupKey> = removed
            .iter()
            .filter(|key| self.tracked(key) && index.get(key).is_none())
            .copied()
            .collect();
        drop(index);
        // Cgroups created or removed make the index stale; any other id it lacks asks for the
        // same single walk. So a created cgroup is indexed before its event goes out and the
        // aggregator can name its Pod.
        let came_or_went = events.iter().any(|e| {
            (is(e, EventKind::CgroupMkdir) || is(e, EventKind::CgroupRmdir)) && self.tracked(&e.cgroup)
        });
        let others: Vec<CgroupKey> = events
            .iter()
            .filter(|e| !is(e, EventKind::CgroupRmdir))
            .map(|e| e.cgroup)
            .collect();
        let mut unknown = self.unknown_after_rescan(others, came_or_went);
        unknown.extend(unknown_removed);
        self.unknown.note(&unknown, "events", now);
        let batch = events
            .into_iter()
            .map(|event| PipelineInput::Event(event, now))
            .collect();
        send_in_batches(&self.sender, batch);
        for key in &removed {
            self.last_sent.remove(key);
        }
        removed
    }

    /// Makes sure the index holds the cgroups of a counter-map read: each one it lacks is
    /// re-scanned for once (one walk for all of them) and, still unknown, counted once.
    fn resolve_counter_keys(&mut self, stats: &HashMap<CgroupKey, CgroupStats>, now: Instant) {
        self.unknown.counted.retain(|key| stats.contains_key(key));
        let fresh: Vec<CgroupKey> = stats
            .keys()
            .filter(|key| !self.unknown.counted.contains(key))
            .copied()
            .collect();
        let unknown = self.unknown_after_rescan(fresh, false);
        self.unknown.counted.extend(unknown.iter().copied());
        self.unknown.note(&unknown, "counters", now);
    }

    fn send_probe_counters(&mut self) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        let (health, health_error) = match probes.health() {
            Ok(h) => (h, None),
            Err(e) => (self.report.load().health, Some(e.to_string())),
        };
        let before = self.report.load().health;
        if health.stats_dropped > before.stats_dropped {
            warn!(
                lost = health.stats_dropped - before.stats_dropped,
                max_cgroups = probes.sizing.cgroups,
                "probe per-cgroup map full: counter updates lost (raise --max-cgroups)"
            );
        }
        if health.events_dropped > before.events_dropped {
            warn!(
                lost = health.events_dropped - before.events_dropped,
                "probe ring buffer full: events lost"
            );
        }
        let mut report = ProbeReport {
            loaded: true,
            programs_attached: probes.attached(),
            programs_total: probes.programs.len(),
            health,
            map_memory_bytes: probes.memory.iter().map(|m| m.memlock).sum(),
            map_cgroups: probes.sizing.cgroups,
            read_error: health_error,
            resolution: self.unknown.counts,
            updated_at: Some(Instant::now()),
            stats: HashMap::new(),
        };
        let stats = match probes.read_stats() {
            Ok(stats) => stats,
            Err(e) => {
                warn!("cannot read probe counters: {e}");
                report.read_error = Some(e.to_string());
                self.report.store(Arc::new(report));
                return;
            }
        };
        let at = Instant::now();
        self.resolve_counter_keys(&stats, at);
        report.resolution = self.unknown.counts;
        let changed: Vec<CgroupSample> = stats
            .iter()
            .map(|(key, value)| CgroupSample::new(*key, value, at))
            .filter(|sample| self.last_sent.get(&sample.key) != Some(&sample.counters))
            .collect();
        // One map read, one batch (more only on a queue smaller than four times the cgroups). A
        // batch is dropped whole (and counted) on a full queue, in which case `last_sent` keeps
        // the old values and the next cycle sends these cgroups again.
        for part in changed.chunks(max_batch(&self.sender)) {
            let batch = part.iter().map(|&sample| sample.into()).collect();
            if self.sender.send_batch(batch).is_ok() {
                self.last_sent
                    .extend(part.iter().map(|sample| (sample.key, sample.counters)));
            }
        }
        report.stats = stats;
        self.report.store(Arc::new(report));
    }

    fn send_cgroup_files(&mut self) {
        let index = self.index.load_full();
        let mut batch = Vec::new();
        self.files
            .read_all(&self.host, &index, |files| batch.push(files.into()));
        send_in_batches(&self.sender, batch);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use headroom_common::CgroupStats;

    use super::*;
    use crate::pipeline::{self, InMemoryPodSource, PipelineConfig, StaticPodResolver};

    #[test]
    fn a_read_larger_than_the_queue_still_gets_through_in_batches() {
        // 40 records into a 16-record queue: one batch of 40 could never fit; batches of 4 do
        // (the first four always, into the empty queue).
        let (handle, reader) = pipeline::spawn(
            PipelineConfig {
                queue_capacity: 16,
                ..PipelineConfig::default()
            },
            Arc::new(StaticPodResolver::new()),
            Arc::new(InMemoryPodSource::default()),
        )
        .unwrap();
        let sender = handle.sender();
        assert_eq!(max_batch(&sender), 4);
        let at = Instant::now();
        let records = (0..40)
            .map(|id| CgroupSample::new(CgroupKey::new(0, id), &CgroupStats::ZERO, at).into())
            .collect();
        send_in_batches(&sender, records);
        let deadline = Instant::now() + Duration::from_secs(5);
        let s = loop {
            let s = reader.load();
            if s.stats.processed_total + s.stats.dropped_total == 40 {
                break s;
            }
            assert!(Instant::now() < deadline, "{:?}", s.stats);
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(s.stats.processed_total >= 16, "{:?}", s.stats);
        assert_eq!(s.stats.dropped_total % 4, 0, "whole batches: {:?}", s.stats);
    }

    fn event(kind: EventKind, cgroup: CgroupKey) -> ProbeEvent {
        ProbeEvent {
            kind: kind as u32,
            pid: 0,
            timestamp_ns: 1,
            cgroup,
            cpu_cgroup: cgroup,
            comm: [0; 16],
            duration_ns: 0,
        }
    }

    #[test]
    fn an_unknown_cgroup_id_is_rescanned_for_once_then_counted() {
        use std::os::unix::fs::MetadataExt as _;

        use crate::cgroups::Hierarchy;

        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("system.slice")).unwrap();
        let unified = Hierarchy {
            id: 0,
            mount: tmp.path().to_path_buf(),
        };
        let host = CgroupHost {
            version: headroom_cgroupfs::CgroupVersion::V2,
            cpu: unified.clone(),
            memory: unified,
            cpuacct: None,
        };
        let index = Arc::new(ArcSwap::from_pointee(CgroupIndex::build(&host.hierarchies())));
        let (handle, reader) = pipeline::spawn(
            PipelineConfig::default(),
            Arc::new(StaticPodResolver::new()),
            Arc::new(InMemoryPodSource::default()),
        )
        .unwrap();
        let mut state = State {
            probes: None,
            host,
            index,
            sender: handle.sender(),
            last_sent: HashMap::new(),
            dirty: false,
            pod_roots: Vec::new(),
            report: ProbeReportCell::default(),
            unknown: UnknownCgroups::default(),
            files: CgroupFileReaders::new(DEFAULT_MAX_OPEN_FILES),
        };
        let counts = |received, unresolved, rescans| CgroupResolution {
            events_received: received,
            unresolved,
            rescans,
        };
        let now = Instant::now();

        // Created after the walk, and its mkdir event lost: a throttle event names it first.
        std::fs::create_dir(tmp.path().join("late")).unwrap();
        let late = CgroupKey::new(0, std::fs::metadata(tmp.path().join("late")).unwrap().ino());
        assert!(state.index.load().get(&late).is_none());
        state.forward_events(vec![event(EventKind::ThrottleBegin, late)], now);
        assert!(state.index.load().get(&late).is_some(), "re-scanned for");
        assert_eq!(state.unknown.counts, counts(1, 0, 1));

        // Ids cgroupfs does not hold: one walk for the drain, then each event counted.
        let gone = CgroupKey::new(0, u64::MAX - 1);
        state.forward_events(
            vec![
                event(EventKind::OomKill, gone),
                event(EventKind::ThrottleEnd, gone),
            ],
            now,
        );
        assert_eq!(state.unknown.counts, counts(3, 2, 2));

        // Created and removed between walks: its removal is unknown too.
        let between = CgroupKey::new(0, u64::MAX - 2);
        let removed = state.forward_events(vec![event(EventKind::CgroupRmdir, between)], now);
        assert_eq!(removed, vec![between]);
        assert_eq!(state.unknown.counts, counts(4, 3, 3));

        // A cgroup of a v1 hierarchy headroom does not index (`pids`): not looked up.
        state.forward_events(vec![event(EventKind::CgroupMkdir, CgroupKey::new(7, 1))], now);
        assert_eq!(state.unknown.counts, counts(5, 3, 3));

        // A dead cgroup left in the counter map is counted once, not at every read.
        let stats: HashMap<CgroupKey, CgroupStats> = [(gone, CgroupStats::ZERO), (late, CgroupStats::ZERO)]
            .into_iter()
            .collect();
        state.resolve_counter_keys(&stats, now);
        assert_eq!(state.unknown.counts, counts(5, 4, 4));
        state.resolve_counter_keys(&stats, now);
        assert_eq!(state.unknown.counts, counts(5, 4, 4));

        // Unresolved or not, every event went on to the aggregator.
        let deadline = Instant::now() + Duration::from_secs(5);
        while reader.load().stats.processed_total < 5 {
            assert!(Instant::now() < deadline, "{:?}", reader.load().stats);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
