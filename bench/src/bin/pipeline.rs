//! `pipeline`: headroomd's userspace pipeline (probe records → lock-free queue → aggregator →
//! snapshot), against a `Mutex<HashMap>` + `std::sync::mpsc` baseline doing the same aggregation,
//! measured in one run, rounds alternating so machine noise hits both sides alike.
//!
//! `cargo xtask bench pipeline` (or `target/release/pipeline --out target/bench [--quick]`).
//!
//! 1. Throughput: one producer thread pushes synthetic per-cgroup probe records (250 Pods: the
//!    Pod cgroup and 2 containers each, plus the node's root cgroup) as fast as the consumer
//!    takes them (a window keeps the queue from overflowing, so nothing is dropped; drops are
//!    still counted and reported); records/s end to end and per CPU-second of the aggregating
//!    thread. A second run pushes without any flow control and reports what was dropped.
//! 2. Per-cycle latency: one collector cycle (751 records) pushed, until a reader can see all of
//!    it (ours: the published snapshot; baseline: the locked map), cycles 2 ms apart.
//! 3. Freshness: a sample entering the pipeline (as the collector sends it) to a `WatchHeadroom`
//!    subscriber seeing its figure, over real gRPC on a Unix socket.
//! 4. Resident memory of a process running only headroomd's pipeline and gRPC server, fed 250
//!    Pods' worth of cgroups, with one `WatchHeadroom` subscriber (in this process, outside it).

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use headroom_bench::{
    BenchArgs, Comparison, Summary, fmt_ns, new_histogram, plot_histogram, plot_percentiles,
    print_comparison, write_json,
};
use headroom_common::{CgroupKey, CgroupStats};
use headroom_node_model::Resources;
use headroom_proto::v1::WatchHeadroomRequest;
use headroomd::{
    config::Config,
    pipeline::{
        self, CgroupFiles, CgroupOwner, CgroupSample, CpuStat, InMemoryPodSource, MemoryStat, PipelineConfig,
        PipelineInput, PipelineSender, PodEntry, PodRef, PsiLine, PsiReading, SnapshotReader,
        StaticPodResolver,
    },
    serve::{Components, Daemon},
    server::{UnavailableActuator, client::headroom_client},
};
use serde_json::json;

const NAME: &str = "pipeline";
const PODS: usize = 250;
const CONTAINERS: [&str; 2] = ["app", "sidecar"];
/// Records of one collector cycle: the node's root cgroup, then each Pod's cgroup and containers.
const CYCLE: usize = 1 + PODS * (1 + CONTAINERS.len());
/// Records pushed between two looks at the consumer's progress.
const BATCH: usize = 4_096;
/// Queue capacity for both sides (headroomd's default).
const CAPACITY: usize = 65_536;
const MIB: u64 = 1 << 20;
/// Thread names, to find their CPU time in /proc/self/task/*/schedstat.
const AGGREGATOR_THREAD: &str = "headroom-aggregator";
const BASELINE_THREAD: &str = "baseline-agg";
const BASELINE_READER: &str = "baseline-read";

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: BenchArgs,
    /// Throughput rounds per side (default 7, 2 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Records per throughput round (default 4,000,000; 300,000 with --quick).
    #[arg(long)]
    records: Option<u64>,
    /// Collector cycles timed per side for the per-cycle latency (default 2000, 200 with --quick).
    #[arg(long)]
    cycles: Option<usize>,
    /// Freshness samples (default 1000, 100 with --quick).
    #[arg(long)]
    freshness: Option<usize>,
    /// Most records a producer keeps ahead of what readers see (default: queue capacity - 4096).
    #[arg(long)]
    window: Option<u64>,
    /// Internal: run as the resident-memory child process.
    #[arg(long, hide = true)]
    rss_child: bool,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[allow(clippy::cast_precision_loss)]
fn per_second(count: u64, d: Duration) -> f64 {
    count as f64 / d.as_secs_f64().max(1e-9)
}

// === The node: 250 Pods' cgroups ===

struct Topology {
    keys: Vec<CgroupKey>,
    resolver: Arc<StaticPodResolver>,
    pods: Arc<InMemoryPodSource>,
}

fn topology() -> Topology {
    let resolver = Arc::new(StaticPodResolver::new());
    let mut keys = vec![CgroupKey::new(0, 1)];
    resolver.insert(keys[0], CgroupOwner::Node);
    let mut entries = Vec::new();
    for p in 0..PODS as u64 {
        let pod = PodRef::new("bench", format!("pod-{p:03}"), format!("bench-uid-{p:03}"));
        let base = 1_000 + p * 4;
        let key = CgroupKey::new(0, base);
        resolver.insert(
            key,
            CgroupOwner::Pod {
                pod: pod.clone(),
                container: None,
            },
        );
        keys.push(key);
        for (c, name) in (1..).zip(CONTAINERS) {
            let key = CgroupKey::new(0, base + c);
            resolver.insert(
                key,
                CgroupOwner::Pod {
                    pod: pod.clone(),
                    container: Some(name.into()),
                },
            );
            keys.push(key);
        }
        entries.push(PodEntry {
            pod,
            requests: Resources::new(100, 256 << 20),
        });
    }
    Topology {
        keys,
        resolver,
        pods: Arc::new(InMemoryPodSource::new(entries)),
    }
}

/// Synthetic probe records: record `i` is cgroup `i % CYCLE` in collector cycle `i / CYCLE`,
/// counters growing and timestamps 100 ms apart per cycle (so every record yields rates).
#[derive(Clone)]
struct Records {
    keys: Arc<[CgroupKey]>,
    t0: Instant,
}

impl Records {
    fn new(keys: &[CgroupKey]) -> Self {
        Self {
            keys: keys.into(),
            t0: Instant::now(),
        }
    }

    fn get(&self, i: u64) -> PipelineInput {
        let n = self.keys.len() as u64;
        let cycle = i / n;
        let mut stats = CgroupStats::ZERO;
        stats.throttle_episodes = cycle * 3;
        stats.throttled_ns = cycle * 1_500_000;
        stats.runq_count = cycle * 40;
        stats.runq_total_ns = cycle * 200_000;
        stats.memcg_reclaim_stall_ns = cycle * 1_000;
        #[allow(clippy::cast_possible_truncation)] // i % n < n = keys.len()
        let key = self.keys[(i % n) as usize];
        PipelineInput::Sample(CgroupSample {
            key,
            stats,
            at: self.t0 + Duration::from_millis(cycle * 100),
        })
    }
}

// === The two sides ===

/// A producer's view of one side.
trait Side {
    /// Pushes without blocking; `false` when the record was dropped (queue full).
    fn push(&self, r: PipelineInput) -> bool;
    /// Records whose effect a reader can see.
    fn visible(&self) -> u64;
    /// Records dropped so far, as the side itself counts them.
    fn dropped(&self) -> u64;
    /// CPU time of the aggregating thread so far.
    fn consumer_cpu(&self) -> Option<Duration>;
}

struct Ours {
    _topology: Topology,
    handle: Option<pipeline::PipelineHandle>,
    sender: PipelineSender,
    reader: SnapshotReader,
    tid: Option<u32>,
}

impl Ours {
    fn start() -> Result<Self> {
        let topology = topology();
        let config = PipelineConfig {
            node_name: "bench".into(),
            queue_capacity: CAPACITY,
            ..PipelineConfig::default()
        };
        let (handle, reader) = pipeline::spawn(config, topology.resolver.clone(), topology.pods.clone())
            .context("spawn the pipeline")?;
        let sender = handle.sender();
        let tid = find_thread(AGGREGATOR_THREAD);
        Ok(Self {
            _topology: topology,
            handle: Some(handle),
            sender,
            reader,
            tid,
        })
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

impl Side for Ours {
    fn push(&self, r: PipelineInput) -> bool {
        self.sender.send(r).is_ok()
    }
    fn visible(&self) -> u64 {
        self.reader.load().stats.processed_total
    }
    fn dropped(&self) -> u64 {
        self.reader.dropped()
    }
    fn consumer_cpu(&self) -> Option<Duration> {
        self.tid.and_then(thread_cpu)
    }
}

/// One cgroup as the baseline's reader copies it out.
type BaselineView = (CgroupKey, Option<CgroupOwner>, [Option<(f64, SystemTime)>; 4]);

/// What the baseline keeps per cgroup: the same figures our aggregator derives from a sample.
#[derive(Default)]
struct BaselineState {
    owner: Option<CgroupOwner>,
    last: Option<(Instant, [u64; 5])>,
    /// throttle episodes/s, throttled s/s, mean run-queue latency s, reclaim stall s/s.
    rates: [Option<(f64, SystemTime)>; 4],
    oom: u64,
    last_update: Option<Instant>,
}

/// A straightforward design: `std::sync::mpsc` bounded channel into a consumer thread that
/// updates a `Mutex<HashMap>` (std hasher), which readers lock; one reader copies a view out of
/// it every 1 ms (the rate at which ours publishes snapshots).
struct Baseline {
    tx: Option<mpsc::SyncSender<PipelineInput>>,
    visible: Arc<AtomicU64>,
    dropped: AtomicU64,
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
    /// The consumer and the reader thread: both do the baseline's aggregation work.
    tids: Vec<u32>,
}

impl Baseline {
    fn start() -> Result<Self> {
        let topology = topology();
        let (tx, rx) = mpsc::sync_channel::<PipelineInput>(CAPACITY);
        let map: Arc<Mutex<HashMap<CgroupKey, BaselineState>>> = Arc::default();
        let visible = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (map, visible, resolver) = (map.clone(), visible.clone(), topology.resolver.clone());
            let base = (Instant::now(), SystemTime::now());
            thread::Builder::new()
                .name(BASELINE_THREAD.into())
                .spawn(move || baseline_consume(&rx, &map, &visible, &resolver, base))?
        };
        let reader = {
            let (map, stop) = (map.clone(), stop.clone());
            thread::Builder::new()
                .name(BASELINE_READER.into())
                .spawn(move || {
                    let mut views = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let view: Vec<BaselineView> = {
                            let m = map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            m.iter().map(|(k, s)| (*k, s.owner.clone(), s.rates)).collect()
                        };
                        views += u64::from(!view.is_empty());
                        thread::sleep(Duration::from_millis(1));
                    }
                    std::hint::black_box(views);
                })?
        };
        let tids = [BASELINE_THREAD, BASELINE_READER]
            .iter()
            .filter_map(|n| find_thread(n))
            .collect();
        Ok(Self {
            tx: Some(tx),
            visible,
            dropped: AtomicU64::new(0),
            stop,
            threads: vec![consumer, reader],
            tids,
        })
    }
}

fn baseline_consume(
    rx: &mpsc::Receiver<PipelineInput>,
    map: &Mutex<HashMap<CgroupKey, BaselineState>>,
    visible: &AtomicU64,
    resolver: &StaticPodResolver,
    (base_instant, base_wall): (Instant, SystemTime),
) {
    use headroomd::pipeline::PodResolver as _;
    let wall = |at: Instant| match at.checked_duration_since(base_instant) {
        Some(d) => base_wall + d,
        None => base_wall - base_instant.duration_since(at),
    };
    let mut done = 0u64;
    let mut next = rx.recv().ok();
    while let Some(input) = next {
        if let PipelineInput::Sample(sample) = input {
            let s = &sample.stats;
            let cur = [
                s.throttle_episodes,
                s.throttled_ns,
                s.runq_count,
                s.runq_total_ns,
                s.memcg_reclaim_stall_ns.saturating_add(s.direct_reclaim_stall_ns),
            ];
            let mut m = map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let state = m.entry(sample.key).or_default();
            if state.owner.is_none() {
                state.owner = resolver.resolve(&sample.key);
            }
            let at_wall = wall(sample.at);
            if let Some((prev_at, prev)) = state.last
                && let Some(dt) = sample.at.checked_duration_since(prev_at).filter(|d| !d.is_zero())
            {
                let dt = dt.as_secs_f64();
                let d = |i: usize| cur[i].checked_sub(prev[i]);
                #[allow(clippy::cast_precision_loss)]
                {
                    if let Some(x) = d(0) {
                        state.rates[0] = Some((x as f64 / dt, at_wall));
                    }
                    if let Some(x) = d(1) {
                        state.rates[1] = Some((x as f64 / 1e9 / dt, at_wall));
                    }
                    if let (Some(c), Some(t)) = (d(2), d(3)) {
                        let mean = if c == 0 { 0.0 } else { t as f64 / c as f64 / 1e9 };
                        state.rates[2] = Some((mean, at_wall));
                    }
                    if let Some(x) = d(4) {
                        state.rates[3] = Some((x as f64 / 1e9 / dt, at_wall));
                    }
                }
            }
            if state.last.is_none_or(|(p, _)| sample.at >= p) {
                state.last = Some((sample.at, cur));
            }
            state.oom = state.oom.max(s.oom_kills);
            state.last_update = Some(sample.at);
        }
        done += 1;
        next = match rx.try_recv() {
            Ok(r) => {
                if done.is_multiple_of(BATCH as u64) {
                    visible.store(done, Ordering::Release);
                }
                Some(r)
            }
            Err(mpsc::TryRecvError::Empty) => {
                visible.store(done, Ordering::Release);
                rx.recv().ok()
            }
            Err(mpsc::TryRecvError::Disconnected) => None,
        };
    }
    visible.store(done, Ordering::Release);
}

impl Drop for Baseline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.tx.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Side for Baseline {
    fn push(&self, r: PipelineInput) -> bool {
        let ok = self.tx.as_ref().is_some_and(|tx| tx.try_send(r).is_ok());
        if !ok {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }
    fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }
    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    fn consumer_cpu(&self) -> Option<Duration> {
        (self.tids.len() == 2)
            .then(|| self.tids.iter().map(|t| thread_cpu(*t)).sum::<Option<Duration>>())
            .flatten()
    }
}

/// The id of this process's thread called `name` (waits briefly for it to be named). The kernel
/// keeps the first 15 bytes of a thread's name.
fn find_thread(name: &str) -> Option<u32> {
    let name = &name[..name.len().min(15)];
    for _ in 0..100 {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for e in dir.flatten() {
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                if comm.trim_end() == name {
                    return e.file_name().to_str().and_then(|s| s.parse().ok());
                }
            }
        }
        thread::sleep(Duration::from_millis(1));
    }
    None
}

/// CPU time of a thread of this process (`schedstat`: nanoseconds on a CPU).
fn thread_cpu(tid: u32) -> Option<Duration> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Duration::from_nanos)
}

// === 1. Throughput ===

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    offered: u64,
    accepted: u64,
    dropped: u64,
    elapsed: Duration,
    consumer_cpu: Option<Duration>,
}

impl Run {
    fn rate(&self) -> f64 {
        per_second(self.accepted, self.elapsed)
    }
    fn per_cpu_second(&self) -> Option<f64> {
        self.consumer_cpu.map(|c| per_second(self.accepted, c))
    }
}

fn wait_visible(side: &dyn Side, target: u64, deadline: Duration) -> Result<()> {
    let start = Instant::now();
    while side.visible() < target {
        if start.elapsed() > deadline {
            bail!(
                "consumer stuck: {} of {target} records visible after {deadline:?}",
                side.visible()
            );
        }
        thread::yield_now();
    }
    Ok(())
}

/// Pushes `n` records; with `window`, never more than that many ahead of what is visible.
fn throughput(side: &dyn Side, records: &Records, n: u64, window: Option<u64>) -> Result<Run> {
    let cpu0 = side.consumer_cpu();
    let dropped0 = side.dropped();
    let start = Instant::now();
    let mut sent = 0u64;
    let mut accepted = 0u64;
    while sent < n {
        if let Some(w) = window {
            let wait = Instant::now();
            while sent - side.visible().min(sent) + BATCH as u64 > w {
                if wait.elapsed() > Duration::from_secs(30) {
                    bail!("consumer stuck at {} of {sent}", side.visible());
                }
                thread::yield_now();
            }
        }
        let end = (sent + BATCH as u64).min(n);
        for i in sent..end {
            accepted += u64::from(side.push(records.get(i)));
        }
        sent = end;
    }
    // `visible` counts accepted records; dropped ones never arrive.
    wait_visible(side, accepted, Duration::from_secs(60))?;
    let elapsed = start.elapsed();
    Ok(Run {
        offered: n,
        accepted,
        dropped: side.dropped() - dropped0,
        elapsed,
        consumer_cpu: cpu0.zip(side.consumer_cpu()).map(|(a, b)| b.saturating_sub(a)),
    })
}

// === 2. Per-cycle latency ===

fn cycle_latency(side: &dyn Side, records: &Records, cycles: usize, h: &mut Histogram<u64>) -> Result<u64> {
    let mut i = 0u64;
    let mut dropped = 0;
    // Warm-up: every cgroup known, owners resolved.
    for _ in 0..CYCLE * 3 {
        dropped += u64::from(!side.push(records.get(i)));
        i += 1;
    }
    wait_visible(side, i - dropped, Duration::from_secs(10))?;
    for _ in 0..cycles {
        thread::sleep(Duration::from_millis(2));
        let start = Instant::now();
        for _ in 0..CYCLE {
            dropped += u64::from(!side.push(records.get(i)));
            i += 1;
        }
        wait_visible(side, i - dropped, Duration::from_secs(10))?;
        h.saturating_record(ns(start.elapsed()));
    }
    Ok(dropped)
}

// === 3. Freshness over gRPC ===

fn daemon_config(socket: &Path) -> Config {
    let mut config = Config::default();
    config.server.socket_path = socket.to_path_buf();
    config.metrics_listen = None;
    config.pipeline.node_name = "bench".into();
    config.pipeline.allocatable = Resources::new(64_000, 256 << 30);
    config
}

fn components(t: &Topology) -> Components {
    Components {
        resolver: t.resolver.clone(),
        pod_source: t.pods.clone(),
        actuator: Arc::new(UnavailableActuator),
    }
}

/// One collector cycle in which the node's root cgroup shows `marker` throttle episodes per
/// second (the cycle is 1 s after the previous one; the counter grew by `marker`).
fn marked_cycle(keys: &[CgroupKey], t0: Instant, cycle: u64, episodes: u64) -> Vec<PipelineInput> {
    let at = t0 + Duration::from_secs(cycle);
    keys.iter()
        .map(|&key| {
            let mut stats = CgroupStats::ZERO;
            stats.throttle_episodes = if key == keys[0] { episodes } else { cycle * 2 };
            stats.runq_count = cycle * 10;
            stats.runq_total_ns = cycle * 50_000;
            PipelineInput::Sample(CgroupSample { key, stats, at })
        })
        .collect()
}

struct Freshness {
    hist: Histogram<u64>,
    missed: u64,
    dropped: u64,
    snapshots_received: u64,
}

fn freshness(samples: usize) -> Result<Freshness> {
    let dir = tempfile::tempdir().context("socket dir")?;
    let socket = dir.path().join("headroomd.sock");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let topology = topology();
    let daemon = rt.block_on(Daemon::start(&daemon_config(&socket), components(&topology)))?;
    let sender = daemon.pipeline.sender();
    let (seen_tx, seen_rx) = mpsc::channel::<(u64, Instant)>();
    let received = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (socket, received) = (socket.clone(), received.clone());
        rt.spawn(async move {
            let mut client = headroom_client(&socket).await?;
            let mut stream = client
                .watch_headroom(WatchHeadroomRequest {
                    include_pods: true,
                    min_interval_ms: 0,
                })
                .await?
                .into_inner();
            let mut last = 0u64;
            while let Some(msg) = stream.message().await? {
                let now = Instant::now();
                received.fetch_add(1, Ordering::Relaxed);
                let value = msg
                    .node_pressure
                    .and_then(|p| p.probe_throttle_episodes_per_second)
                    .map_or(0.0, |f| f.value);
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let marker = value.round() as u64;
                if marker > last {
                    last = marker;
                    if seen_tx.send((marker, now)).is_err() {
                        break;
                    }
                }
            }
            anyhow::Ok(())
        })
    };
    let keys = topology.keys.clone();
    let t0 = Instant::now();
    let mut hist = new_histogram();
    let mut missed = 0u64;
    let mut episodes = 0u64;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    // Cycle 0 sets the baseline counters; the subscriber's first message arrives meanwhile.
    for r in marked_cycle(&keys, t0, 0, 0) {
        let _ = sender.send(r);
    }
    thread::sleep(Duration::from_millis(200));
    for k in 1..=samples as u64 {
        // marker k: the node's episodes/s figure becomes exactly k.
        episodes += k;
        let cycle = marked_cycle(&keys, t0, k, episodes);
        let start = Instant::now();
        for r in cycle {
            let _ = sender.send(r);
        }
        loop {
            match seen_rx.recv_timeout(Duration::from_secs(2)) {
                Ok((m, at)) if m == k => {
                    hist.saturating_record(ns(at.saturating_duration_since(start)));
                    break;
                }
                Ok((m, _)) if m < k => continue,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {
                    missed += 1;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let why = rt
                        .block_on(watcher)
                        .map_err(anyhow::Error::from)
                        .and_then(|r| r)
                        .err()
                        .map_or_else(|| "stream ended".to_owned(), |e| format!("{e:#}"));
                    bail!("WatchHeadroom subscriber stopped: {why}");
                }
            }
        }
        // 2–10 ms apart, jittered (collector cycles are 100 ms apart; shorter keeps the run short).
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        thread::sleep(Duration::from_micros(2_000 + rng % 8_000));
    }
    let dropped = daemon.reader.dropped();
    watcher.abort();
    rt.block_on(daemon.shutdown())?;
    Ok(Freshness {
        hist,
        missed,
        dropped,
        snapshots_received: received.load(Ordering::Relaxed),
    })
}

// === 4. Resident memory ===

/// `VmRSS` and `VmHWM` of this process, bytes.
fn rss_self() -> Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Ok((
        field("VmRSS:").context("VmRSS")?,
        field("VmHWM:").context("VmHWM")?,
    ))
}

/// Files a collector cycle reads for each cgroup.
fn files_cycle(keys: &[CgroupKey], at: Instant, cycle: u64) -> impl Iterator<Item = PipelineInput> + '_ {
    #[allow(clippy::cast_precision_loss)]
    let psi = |c: u64| PsiReading {
        some: PsiLine {
            avg10: 1.0,
            avg60: 0.5,
            avg300: 0.1,
            total_us: c * 1_000,
        },
        full: Some(PsiLine {
            total_us: c * 100,
            ..PsiLine::default()
        }),
    };
    keys.iter().map(move |&key| {
        let mut f = CgroupFiles::new(key, at);
        f.cpu = Some(CpuStat {
            usage_ns: cycle * 50_000_000,
            nr_periods: cycle * 10,
            nr_throttled: cycle,
            throttled_ns: cycle * 1_000_000,
        });
        f.memory = Some(MemoryStat {
            usage_bytes: 300 * MIB,
            working_set_bytes: 200 * MIB,
        });
        f.oom_kills = Some(0);
        f.psi_cpu = Some(psi(cycle));
        f.psi_memory = Some(psi(cycle));
        f.psi_io = Some(psi(cycle));
        PipelineInput::CgroupFiles(f)
    })
}

/// The child: headroomd's pipeline and gRPC server, fed 250 Pods' cgroups. Protocol on
/// stdin/stdout: prints `socket <path>`, waits for a line (the parent's subscriber is
/// connected), feeds, prints one JSON line with the figures, waits for a line, exits.
fn rss_child() -> Result<()> {
    let (rss_start, _) = rss_self()?;
    let dir = tempfile::tempdir().context("socket dir")?;
    let socket = dir.path().join("headroomd.sock");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("headroomd")
        .build()
        .context("tokio runtime")?;
    let topology = topology();
    let daemon = rt.block_on(Daemon::start(&daemon_config(&socket), components(&topology)))?;
    let sender = daemon.pipeline.sender();
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    println!("socket {}", socket.display());
    std::io::stdout().flush()?;
    stdin.read_line(&mut line)?;
    let records = Records::new(&topology.keys);
    let cycles = 30u64;
    let mut i = 0u64;
    for cycle in 0..cycles {
        let at = Instant::now();
        for _ in 0..CYCLE {
            let _ = sender.send(records.get(i));
            i += 1;
        }
        for r in files_cycle(&topology.keys, at, cycle) {
            let _ = sender.send(r);
        }
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(200));
    let snapshot = daemon.reader.load();
    let (rss, hwm) = rss_self()?;
    let figures = json!({
        "rss_bytes": rss, "hwm_bytes": hwm, "rss_at_start_bytes": rss_start,
        "cgroups": topology.keys.len(), "pods": snapshot.pods.len(), "cycles": cycles,
        "records": snapshot.stats.processed_total, "dropped": snapshot.stats.dropped_total,
        "queue_capacity": snapshot.stats.queue_capacity,
        "record_size_bytes": std::mem::size_of::<PipelineInput>(),
    });
    println!("{figures}");
    std::io::stdout().flush()?;
    line.clear();
    stdin.read_line(&mut line)?;
    rt.block_on(daemon.shutdown())?;
    Ok(())
}

fn rss_parent() -> Result<serde_json::Value> {
    let exe = std::env::current_exe().context("own path")?;
    let mut child = Command::new(exe)
        .arg("--rss-child")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn the resident-memory child")?;
    let result = (|| {
        let mut stdin = child.stdin.take().context("child stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("child stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let socket = PathBuf::from(
            line.trim()
                .strip_prefix("socket ")
                .with_context(|| format!("unexpected line from the child: {line:?}"))?,
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let received = Arc::new(AtomicU64::new(0));
        let watcher = {
            let received = received.clone();
            rt.block_on(async {
                let mut client = headroom_client(&socket).await?;
                let mut stream = client
                    .watch_headroom(WatchHeadroomRequest {
                        include_pods: true,
                        min_interval_ms: 0,
                    })
                    .await?
                    .into_inner();
                anyhow::Ok(tokio::spawn(async move {
                    while let Ok(Some(_)) = stream.message().await {
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                }))
            })?
        };
        // Keep the runtime driving the subscriber while the child feeds.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let driver = thread::spawn(move || {
            rt.block_on(async {
                while done_rx.try_recv().is_err() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                watcher.abort();
            });
        });
        writeln!(stdin, "go")?;
        line.clear();
        stdout.read_line(&mut line)?;
        let mut figures: serde_json::Value =
            serde_json::from_str(line.trim()).with_context(|| format!("child figures: {line:?}"))?;
        let _ = done_tx.send(());
        let _ = driver.join();
        figures["subscriber_messages"] = json!(received.load(Ordering::Relaxed));
        writeln!(stdin, "bye")?;
        anyhow::Ok(figures)
    })();
    if result.is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    let figures = result?;
    if !status.success() {
        bail!("resident-memory child failed: {status}");
    }
    Ok(figures)
}

// === Main ===

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(*x), hi.max(*x))
    })
}

fn mrps(x: f64) -> String {
    format!("{:.2} M/s", x / 1e6)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.rss_child {
        return rss_child();
    }
    let quick = args.common.quick;
    let rounds = args.rounds.unwrap_or(if quick { 2 } else { 7 }).max(1);
    let n = args
        .records
        .unwrap_or(if quick { 300_000 } else { 4_000_000 })
        .max(1);
    let cycles = args.cycles.unwrap_or(if quick { 200 } else { 2000 }).max(1);
    let n_fresh = args.freshness.unwrap_or(if quick { 100 } else { 1000 }).max(1);
    let keys = topology().keys;
    let records = Records::new(&keys);
    let window = Some(args.window.unwrap_or((CAPACITY - BATCH) as u64).max(BATCH as u64));

    // 1. Throughput, alternating sides round by round.
    let (mut ours_runs, mut base_runs) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for ours_first in [round % 2 == 0, round % 2 != 0] {
            if ours_first {
                let side = Ours::start()?;
                ours_runs.push(throughput(&side, &records, n, window)?);
            } else {
                let side = Baseline::start()?;
                base_runs.push(throughput(&side, &records, n, window)?);
            }
        }
    }
    // Pushed with no flow control at all: what a burst beyond the queue does.
    let burst_n = n.min(1_000_000);
    let ours_burst = throughput(&Ours::start()?, &records, burst_n, None)?;
    let base_burst = throughput(&Baseline::start()?, &records, burst_n, None)?;

    // 2. Per-cycle latency.
    let mut ours_cycle = new_histogram();
    let mut base_cycle = new_histogram();
    let ours_cycle_drops = cycle_latency(&Ours::start()?, &records, cycles, &mut ours_cycle)?;
    let base_cycle_drops = cycle_latency(&Baseline::start()?, &records, cycles, &mut base_cycle)?;

    // 3. Freshness.
    let fresh = freshness(n_fresh)?;

    // 4. Resident memory.
    let rss = rss_parent();

    // === Report ===
    let rates = |runs: &[Run]| runs.iter().map(Run::rate).collect::<Vec<_>>();
    let (mut ours_rates, mut base_rates) = (rates(&ours_runs), rates(&base_runs));
    let (ours_lo, ours_hi) = min_max(&ours_rates);
    let (base_lo, base_hi) = min_max(&base_rates);
    let ours_rate = median(&mut ours_rates);
    let base_rate = median(&mut base_rates);
    let ratio = ours_rate / base_rate;
    let cpu_rates = |runs: &[Run]| runs.iter().filter_map(Run::per_cpu_second).collect::<Vec<_>>();
    let ours_cpu_rate = median(&mut cpu_rates(&ours_runs));
    let base_cpu_rate = median(&mut cpu_rates(&base_runs));
    let ours_dropped: u64 = ours_runs.iter().map(|r| r.dropped).sum();
    let base_dropped: u64 = base_runs.iter().map(|r| r.dropped).sum();

    println!(
        "pipeline: {CYCLE} cgroups (250 Pods × (Pod + {} containers) + node), records of {} bytes, queue {CAPACITY}",
        CONTAINERS.len(),
        std::mem::size_of::<PipelineInput>()
    );
    println!("-- throughput: one producer, {rounds} rounds × {n} records per side, alternating --");
    println!(
        "{:<34} {:>12} {:>22} {:>16} {:>9}",
        "", "median", "min–max", "per CPU-second", "dropped"
    );
    println!(
        "{:<34} {:>12} {:>22} {:>16} {:>9}",
        "headroom pipeline",
        mrps(ours_rate),
        format!("{} – {}", mrps(ours_lo), mrps(ours_hi)),
        mrps(ours_cpu_rate),
        ours_dropped
    );
    println!(
        "{:<34} {:>12} {:>22} {:>16} {:>9}",
        "baseline Mutex<HashMap> + mpsc",
        mrps(base_rate),
        format!("{} – {}", mrps(base_lo), mrps(base_hi)),
        mrps(base_cpu_rate),
        base_dropped
    );
    println!(
        "ratio ours/baseline: {ratio:.2}x (target >= 3x); ours {} (target >= 5 M records/s)",
        mrps(ours_rate)
    );
    for (label, b) in [("headroom", &ours_burst), ("baseline", &base_burst)] {
        #[allow(clippy::cast_precision_loss)]
        let pct = 100.0 * b.dropped as f64 / b.offered.max(1) as f64;
        println!(
            "burst without flow control, {label}: offered {} records, accepted {}, DROPPED {} ({pct:.1}%), {} accepted end to end",
            b.offered,
            b.accepted,
            b.dropped,
            mrps(b.rate())
        );
    }

    let mut c = Comparison::new(
        NAME,
        Summary::from_histogram("headroom: cycle → snapshot", &ours_cycle),
    )
    .with_peer(Summary::from_histogram("baseline: cycle → map", &base_cycle));
    c.details
        .push(Summary::from_histogram("freshness → WatchHeadroom", &fresh.hist));
    let mut notes = vec![
        format!(
            "latency rows: one collector cycle ({CYCLE} records) pushed until a reader sees all of it, cycles 2 ms apart; \
             ours publishes a snapshot at most every 1 ms, the baseline's readers lock the map"
        ),
        format!(
            "throughput: median of {rounds} rounds, ours {} vs baseline {} = {ratio:.2}x (target >= 3x, >= 5 M/s); \
             dropped in those rounds: ours {ours_dropped}, baseline {base_dropped}",
            mrps(ours_rate),
            mrps(base_rate)
        ),
        format!(
            "burst with no flow control ({burst_n} records): ours dropped {}, baseline dropped {} (both drop on a full queue of {CAPACITY})",
            ours_burst.dropped, base_burst.dropped
        ),
        format!(
            "freshness: sample entering the pipeline → WatchHeadroom subscriber (gRPC, Unix socket, include_pods, 250 Pods): \
             p50 {}, p99 {} (target p99 <= 10 ms); {} missed, {} dropped",
            fmt_ns(c.details[0].p50_ns),
            fmt_ns(c.details[0].p99_ns),
            fresh.missed,
            fresh.dropped
        ),
        "published, not measured here: cAdvisor housekeeping 10 s (kubelet's embedded cAdvisor); \
         Koordinator koordlet collection 1 s (usage) to 60 s (CPI), NodeMetric report 60 s"
            .into(),
    ];
    let rss_json = match rss {
        Ok(fig) => {
            #[allow(clippy::cast_precision_loss)]
            let mib = |k: &str| fig[k].as_u64().unwrap_or(0) as f64 / MIB as f64;
            notes.push(format!(
                "resident memory, 250 Pods ({} cgroups) fed through pipeline + gRPC server, one subscriber: \
                 VmRSS {:.1} MiB, peak {:.1} MiB (target <= 40 MiB); published, not measured here: koordlet ~240 MB RSS (koordinator#1046)",
                fig["cgroups"],
                mib("rss_bytes"),
                mib("hwm_bytes")
            ));
            fig
        }
        Err(e) => {
            notes.push(format!("resident memory not measured: {e:#}"));
            json!({"error": format!("{e:#}")})
        }
    };
    c.notes = notes;
    let run_json = |r: &Run| {
        json!({
            "offered": r.offered, "accepted": r.accepted, "dropped": r.dropped,
            "elapsed_s": r.elapsed.as_secs_f64(), "records_per_s": r.rate(),
            "records_per_consumer_cpu_s": r.per_cpu_second(),
        })
    };
    c.extra = json!({
        "throughput": {
            "unit": "records/s",
            "ours_label": "headroom pipeline", "peer_label": "Mutex<HashMap> + mpsc",
            "ours": ours_rate, "peer": base_rate, "ratio": ratio,
            "ours_min": ours_lo, "ours_max": ours_hi, "peer_min": base_lo, "peer_max": base_hi,
            "ours_per_consumer_cpu_s": ours_cpu_rate, "peer_per_consumer_cpu_s": base_cpu_rate,
            "ours_dropped": ours_dropped, "peer_dropped": base_dropped,
            "targets": {"ours_min_records_per_s": 5e6, "min_ratio": 3.0},
            "rounds": {"ours": ours_runs.iter().map(run_json).collect::<Vec<_>>(),
                       "peer": base_runs.iter().map(run_json).collect::<Vec<_>>()},
        },
        "burst_no_flow_control": {"ours": run_json(&ours_burst), "peer": run_json(&base_burst)},
        "cycle_latency": {"records_per_cycle": CYCLE, "cycles": cycles,
                          "ours_dropped": ours_cycle_drops, "peer_dropped": base_cycle_drops},
        "freshness": {
            "samples": n_fresh, "missed": fresh.missed, "dropped": fresh.dropped,
            "snapshots_received": fresh.snapshots_received, "target_p99_ns": 10_000_000u64,
            "summary": Summary::from_histogram("freshness", &fresh.hist),
        },
        "rss": rss_json,
        "noise": {
            "ours": {"min_ns": ours_cycle.min(), "max_ns": ours_cycle.max()},
            "peer": {"min_ns": base_cycle.min(), "max_ns": base_cycle.max()},
            "freshness": {"min_ns": fresh.hist.min(), "max_ns": fresh.hist.max()},
        },
        "published": [
            {"figure": "cAdvisor housekeeping interval (kubelet)", "value": "10 s",
             "source": "kubernetes pkg/kubelet/cadvisor/cadvisor_linux.go defaultHousekeepingInterval"},
            {"figure": "Koordinator koordlet collection / report intervals", "value": "1–60 s",
             "source": "koordinator pkg/koordlet/metricsadvisor/framework/config.go; NodeMetric report 60 s"},
            {"figure": "koordlet resident memory", "value": "~240 MB", "source": "koordinator#1046"},
        ],
    });
    print_comparison(&c);
    let out = &args.common.out;
    let path = write_json(out, &c)?;
    let series = [
        ("headroom pipeline", &ours_cycle),
        ("Mutex<HashMap> + mpsc", &base_cycle),
    ];
    plot_percentiles(
        &out.join(format!("{NAME}-percentiles.svg")),
        "collector cycle (751 records) → visible to readers",
        &series,
    )?;
    plot_histogram(
        &out.join(format!("{NAME}-histogram.svg")),
        "collector cycle (751 records) → visible to readers",
        &series,
    )?;
    plot_percentiles(
        &out.join(format!("{NAME}-freshness.svg")),
        "freshness: sample → WatchHeadroom subscriber",
        &[("headroom (gRPC, Unix socket)", &fresh.hist)],
    )?;
    println!(
        "wrote {} and {NAME}-{{percentiles,histogram,freshness}}.svg",
        path.display()
    );
    Ok(())
}
