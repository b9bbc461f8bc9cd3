#![allow(clippy::unwrap_used)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use headroom_common::{CgroupKey, CgroupStats, EventKind, ProbeEvent};
use headroom_node_model::{LedgerError, Resources};

use super::*;

fn key(id: u64) -> CgroupKey {
    CgroupKey::new(0, id)
}

fn pod(n: u32) -> PodRef {
    PodRef::new("default", format!("pod-{n}"), format!("uid-{n}"))
}

struct Fixture {
    handle: PipelineHandle,
    reader: SnapshotReader,
    resolver: Arc<StaticPodResolver>,
    pods: Arc<InMemoryPodSource>,
}

fn fixture(config: PipelineConfig) -> Fixture {
    let resolver = Arc::new(StaticPodResolver::new());
    resolver.insert(key(1), CgroupOwner::Node);
    resolver.insert(
        key(10),
        CgroupOwner::Pod {
            pod: pod(1),
            container: None,
        },
    );
    resolver.insert(
        key(11),
        CgroupOwner::Pod {
            pod: pod(1),
            container: Some("app".into()),
        },
    );
    let pods = Arc::new(InMemoryPodSource::new(vec![PodEntry {
        pod: pod(1),
        requests: Resources::new(1000, 1 << 30),
        pending_resize: Resources::ZERO,
    }]));
    let (handle, reader) = spawn(config, resolver.clone(), pods.clone()).unwrap();
    Fixture {
        handle,
        reader,
        resolver,
        pods,
    }
}

fn config() -> PipelineConfig {
    PipelineConfig {
        allocatable: Resources::new(8000, 16 << 30),
        ..PipelineConfig::default()
    }
}

/// Waits (bounded) until the newest snapshot satisfies `pred`.
fn wait_for(reader: &SnapshotReader, what: &str, pred: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = reader.load();
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last snapshot: {s:#?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn files(
    k: CgroupKey,
    at: Instant,
    periods: u64,
    throttled: u64,
    throttled_ns: u64,
    usage_ns: u64,
) -> PipelineInput {
    let mut f = CgroupFiles::new(k, at);
    f.readings.cpu = Some(CpuStat {
        usage_ns,
        nr_periods: periods,
        nr_throttled: throttled,
        throttled_ns,
    });
    f.readings.memory = Some(MemoryStat {
        usage_bytes: 300 << 20,
        working_set_bytes: 200 << 20,
    });
    f.into()
}

#[test]
fn throttling_rate_from_successive_cpu_stat_readings() {
    let f = fixture(config());
    let tx = f.handle.sender();
    let t0 = Instant::now();
    tx.send(files(key(11), t0, 100, 10, 1_000_000_000, 5_000_000_000))
        .unwrap();
    // One second later: 10 more periods, 5 of them throttled, 0.25 s throttled, 1.5 s of CPU.
    tx.send(files(
        key(11),
        t0 + Duration::from_secs(1),
        110,
        15,
        1_250_000_000,
        6_500_000_000,
    ))
    .unwrap();
    let s = wait_for(&f.reader, "throttle ratio", |s| {
        s.pod("uid-1").is_some_and(|p| {
            p.containers
                .first()
                .is_some_and(|c| c.pressure.cpu_throttled_ratio.is_some())
        })
    });
    let c = &s.pod("default/pod-1").unwrap().containers[0];
    assert_eq!(c.name, "app");
    let p = &c.pressure;
    assert!((p.cpu_throttled_ratio.unwrap().value - 0.5).abs() < 1e-9, "{p:?}");
    assert!((p.cpu_throttled_seconds_per_second.unwrap().value - 0.25).abs() < 1e-9);
    assert!((p.cpu_usage_cores.unwrap().value - 1.5).abs() < 1e-9);
    assert_eq!(p.cpu_throttled_periods_total.unwrap().value, 15.0);
    assert_eq!(p.memory_working_set_bytes.unwrap().value, (200u64 << 20) as f64);
    assert!(!p.cpu_throttled_ratio.unwrap().stale);
}

#[test]
fn probe_rates_and_oom_events() {
    let f = fixture(config());
    let tx = f.handle.sender();
    let t0 = Instant::now();
    let mut stats = CgroupStats::ZERO;
    tx.send(CgroupSample::new(key(10), &stats, t0).into()).unwrap();
    stats.throttle_episodes = 20;
    stats.throttled_ns = 500_000_000;
    stats.memcg_reclaim_stall_ns = 100_000_000;
    stats.direct_reclaim_stall_ns = 100_000_000;
    stats.runq_count = 10;
    stats.runq_total_ns = 10_000_000;
    stats.oom_kills = 1;
    // What no figure uses (and producers leave out of the queue) must not matter.
    stats.runq_hist[7] = 10;
    stats.memcg_reclaim_episodes = 3;
    stats.direct_reclaim_episodes = 4;
    tx.send(CgroupSample::new(key(10), &stats, t0 + Duration::from_secs(2)).into())
        .unwrap();
    let event = ProbeEvent {
        kind: EventKind::OomKill as u32,
        pid: 42,
        timestamp_ns: 0,
        cgroup: key(10),
        cpu_cgroup: key(10),
        comm: [0; 16],
        duration_ns: 0,
    };
    tx.send(PipelineInput::Event(event, t0 + Duration::from_secs(2)))
        .unwrap();
    tx.send(PipelineInput::Event(event, t0 + Duration::from_secs(2)))
        .unwrap();
    let s = wait_for(&f.reader, "oom 2", |s| {
        s.pod("uid-1")
            .and_then(|p| p.pod_cgroup.oom_kills_total)
            .is_some_and(|f| f.value == 2.0)
    });
    let p = &s.pod("uid-1").unwrap().pod_cgroup;
    assert!((p.probe_throttle_episodes_per_second.unwrap().value - 10.0).abs() < 1e-9);
    assert!((p.probe_throttled_seconds_per_second.unwrap().value - 0.25).abs() < 1e-9);
    assert!((p.memory_reclaim_stall_seconds_per_second.unwrap().value - 0.1).abs() < 1e-9);
    assert!((p.runq_latency_mean_seconds.unwrap().value - 0.001).abs() < 1e-12);
}

#[test]
fn counter_reset_gives_no_bogus_rate() {
    let f = fixture(config());
    let tx = f.handle.sender();
    let t0 = Instant::now();
    tx.send(files(key(11), t0, 1000, 500, 0, 0)).unwrap();
    tx.send(files(key(11), t0 + Duration::from_secs(1), 10, 5, 0, 0))
        .unwrap();
    let s = wait_for(&f.reader, "second reading", |s| s.stats.processed_total >= 2);
    let p = &s.pod("uid-1").unwrap().containers[0].pressure;
    assert!(
        p.cpu_throttled_ratio.is_none(),
        "a counter that went backwards must not yield a rate: {p:?}"
    );
}

#[test]
fn overflow_is_counted_never_silent() {
    let f = fixture(PipelineConfig {
        queue_capacity: 4,
        ..config()
    });
    let tx = f.handle.sender();
    let now = Instant::now();
    let mut full = 0;
    for i in 0..100_000u64 {
        if tx.send(files(key(1000 + i % 64), now, i, 0, 0, 0)).is_err() {
            full += 1;
        }
    }
    assert!(
        full > 0,
        "a 4-slot queue fed 100k records without a pause must overflow"
    );
    assert_eq!(tx.dropped(), full);
    let s = wait_for(&f.reader, "dropped in snapshot", |s| {
        s.stats.dropped_total == full
    });
    assert_eq!(
        s.stats.processed_total + full,
        100_000,
        "every record is either processed or counted as dropped"
    );
    assert!(s.stats.unattributed_total > 0);
}

#[test]
fn stale_figures_are_marked() {
    let f = fixture(PipelineConfig {
        stale_after: Duration::from_millis(50),
        ..config()
    });
    let tx = f.handle.sender();
    // Measured long ago.
    let old = Instant::now().checked_sub(Duration::from_secs(10)).unwrap();
    tx.send(files(key(1), old, 1, 0, 0, 0)).unwrap();
    let s = wait_for(&f.reader, "node pressure", |s| {
        s.node_pressure.cpu_periods_total.is_some()
    });
    assert!(s.node_pressure.cpu_periods_total.unwrap().stale);
    // Fresh now, stale later: watchers are told when it turns stale.
    tx.send(files(key(1), Instant::now(), 2, 0, 0, 0)).unwrap();
    let s = wait_for(&f.reader, "fresh", |s| {
        s.node_pressure.cpu_periods_total.is_some_and(|f| f.value == 2.0)
    });
    assert!(!s.node_pressure.cpu_periods_total.unwrap().stale);
    wait_for(&f.reader, "turns stale", |s| {
        s.node_pressure.cpu_periods_total.is_some_and(|f| f.stale)
    });
}

#[test]
fn watchers_see_newest_not_backlog() {
    let f = fixture(config());
    let mut rx = f.reader.subscribe();
    let tx = f.handle.sender();
    let t0 = Instant::now();
    for i in 0..1000u64 {
        tx.send(files(key(11), t0 + Duration::from_millis(i), i, 0, 0, 0))
            .unwrap();
    }
    let s = wait_for(&f.reader, "all processed", |s| s.stats.processed_total == 1000);
    // The snapshot is stored before watchers are told, so the version may arrive a moment
    // after the snapshot is readable.
    let deadline = Instant::now() + Duration::from_secs(5);
    while *rx.borrow() < s.version {
        assert!(
            Instant::now() < deadline,
            "watchers were never told of version {}",
            s.version
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The receiver holds one version, the newest, however many were published.
    assert!(rx.has_changed().unwrap());
    let v = *rx.borrow_and_update();
    assert!(v >= s.version);
    assert!(!rx.has_changed().unwrap());
    assert_eq!(
        f.reader.load().pod("uid-1").unwrap().containers[0]
            .pressure
            .cpu_periods_total
            .unwrap()
            .value,
        999.0
    );
}

#[test]
fn late_pods_are_resolved_and_removed_cgroups_forgotten() {
    let f = fixture(PipelineConfig {
        resolve_retry: Duration::from_millis(10),
        ..config()
    });
    let tx = f.handle.sender();
    let t0 = Instant::now();
    tx.send(files(key(20), t0, 1, 0, 0, 0)).unwrap();
    wait_for(&f.reader, "processed", |s| s.stats.processed_total == 1);
    assert!(f.reader.load().pod("uid-2").is_none());
    f.resolver.insert(
        key(20),
        CgroupOwner::Pod {
            pod: pod(2),
            container: Some("c".into()),
        },
    );
    tx.send(files(key(20), t0 + Duration::from_millis(20), 2, 0, 0, 0))
        .unwrap();
    wait_for(&f.reader, "pod 2 appears", |s| s.pod("uid-2").is_some());
    let rmdir = ProbeEvent {
        kind: EventKind::CgroupRmdir as u32,
        pid: 0,
        timestamp_ns: 0,
        cgroup: key(20),
        cpu_cgroup: CgroupKey::default(),
        comm: [0; 16],
        duration_ns: 0,
    };
    tx.send(PipelineInput::Event(rmdir, Instant::now())).unwrap();
    wait_for(&f.reader, "pod 2 gone", |s| s.pod("uid-2").is_none());
}

#[test]
fn kernel_events_are_published_at_once_attributed_and_bounded() {
    let f = fixture(config());
    let tx = f.handle.sender();
    let event = |kind: EventKind, cgroup: u64, stamp: u64| ProbeEvent {
        kind: kind as u32,
        pid: 7,
        timestamp_ns: stamp,
        cgroup: key(cgroup),
        cpu_cgroup: key(cgroup),
        comm: [0; 16],
        duration_ns: if kind == EventKind::ThrottleEnd { 5_000 } else { 0 },
    };
    let before = f.reader.load().version;
    // One batch (as one ring-buffer drain is): one snapshot carries both, in order.
    tx.send_batch(vec![
        PipelineInput::Event(event(EventKind::ThrottleBegin, 11, 100), Instant::now()),
        PipelineInput::Event(event(EventKind::ThrottleEnd, 11, 200), Instant::now()),
    ])
    .unwrap();
    let s = wait_for(&f.reader, "both events", |s| s.kernel_events.len() == 2);
    assert!(s.version > before);
    let [begin, end] = &s.kernel_events[..] else {
        unreachable!()
    };
    assert_eq!(
        (begin.kind, begin.sequence, begin.boottime_ns),
        (EventKind::ThrottleBegin, 0, 100)
    );
    assert_eq!(begin.pod_uid.as_deref(), Some("uid-1"));
    assert_eq!(begin.container.as_deref(), Some("app"));
    assert_eq!(
        (end.kind, end.sequence, end.duration_ns),
        (EventKind::ThrottleEnd, 1, 5_000)
    );
    // A cgroup nobody owns is still reported, without a Pod; an unknown kind is not kept.
    tx.send(PipelineInput::Event(
        event(EventKind::MemcgReclaimStall, 99, 300),
        Instant::now(),
    ))
    .unwrap();
    let mut unknown = event(EventKind::OomKill, 99, 301);
    unknown.kind = 1_000;
    tx.send(PipelineInput::Event(unknown, Instant::now())).unwrap();
    let s = wait_for(&f.reader, "unowned stall", |s| s.stats.processed_total >= 4);
    let last = s.kernel_events.last().unwrap();
    assert_eq!(
        (last.kind, last.pod_uid.as_ref()),
        (EventKind::MemcgReclaimStall, None)
    );
    assert_eq!(s.kernel_events.len(), 3);
    // The window keeps the newest KERNEL_EVENTS_KEPT.
    let burst = (0..100)
        .map(|i| PipelineInput::Event(event(EventKind::ThrottleBegin, 10, 1_000 + i), Instant::now()))
        .collect();
    tx.send_batch(burst).unwrap();
    let s = wait_for(&f.reader, "window", |s| {
        s.kernel_events.last().is_some_and(|e| e.boottime_ns == 1_099)
    });
    assert_eq!(s.kernel_events.len(), KERNEL_EVENTS_KEPT);
    assert_eq!(
        s.kernel_events[0].boottime_ns,
        1_099 - KERNEL_EVENTS_KEPT as u64 + 1
    );
    assert!(
        s.kernel_events
            .windows(2)
            .all(|w| w[1].sequence == w[0].sequence + 1)
    );
}

#[tokio::test]
async fn ledger_reserves_releases_and_counts_pods() {
    let f = fixture(config());
    let ledger = f.handle.ledger();
    let req = |id: &str, cpu: i64| ReserveRequest {
        id: id.into(),
        pod: "default/pod-1".into(),
        amount: Resources::new(cpu, 0),
        ttl: Duration::from_secs(30),
        require_known_pod: true,
        releasing: Vec::new(),
    };
    // allocatable 8000m, allocated 1000m.
    let (view, node) = ledger.reserve(req("r1", 6000)).await.unwrap();
    assert_eq!(view.id, "r1");
    assert_eq!(node.reserved.cpu_millis, 6000);
    assert_eq!(node.headroom.cpu_millis, 1000);
    assert_eq!(
        f.reader.load().node.headroom.headroom.cpu_millis,
        1000,
        "published before the reply"
    );
    assert_eq!(f.reader.load().reservations.len(), 1);
    let err = ledger.reserve(req("r2", 1001)).await.unwrap_err();
    assert!(matches!(err, ReserveError::Ledger(_)), "{err}");
    let err = ledger
        .reserve(ReserveRequest {
            pod: "nope/nope".into(),
            ..req("r3", 1)
        })
        .await
        .unwrap_err();
    assert_eq!(err, ReserveError::UnknownPod("nope/nope".into()));
    let (released, node) = ledger.release("r1".into()).await.unwrap().unwrap();
    assert_eq!(released.amount.cpu_millis, 6000);
    assert_eq!(node.headroom.cpu_millis, 7000);
    assert!(ledger.release("r1".into()).await.unwrap().is_none());
    // Pods change: allocated follows.
    f.pods.upsert(PodEntry {
        pod: pod(3),
        requests: Resources::new(2000, 0),
        pending_resize: Resources::ZERO,
    });
    wait_for(&f.reader, "allocated follows pods", |s| {
        s.node.headroom.allocated.cpu_millis == 3000
    });
}

#[tokio::test]
async fn reservations_expire() {
    let f = fixture(PipelineConfig {
        tick_interval: Duration::from_millis(5),
        ..config()
    });
    let ledger = f.handle.ledger();
    let req = ReserveRequest {
        id: "short".into(),
        pod: "uid-1".into(),
        amount: Resources::new(100, 0),
        ttl: Duration::from_millis(30),
        require_known_pod: true,
        releasing: Vec::new(),
    };
    ledger.reserve(req).await.unwrap();
    let mut rx = f.reader.subscribe();
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            rx.changed().await.unwrap();
            if f.reader.load().reservations.is_empty() {
                break;
            }
        }
    })
    .await
    .expect("expiry is published to watchers");
    assert_eq!(f.reader.load().node.headroom.reserved, Resources::ZERO);
}

#[test]
fn probe_counters_keep_what_the_aggregator_uses() {
    let mut stats = CgroupStats::ZERO;
    stats.throttle_episodes = 1;
    stats.throttled_ns = 2;
    stats.runq_hist = [9; headroom_common::RUNQ_HIST_BUCKETS];
    stats.runq_count = 3;
    stats.runq_total_ns = 4;
    stats.memcg_reclaim_episodes = 9;
    stats.memcg_reclaim_stall_ns = 5;
    stats.direct_reclaim_episodes = 9;
    stats.direct_reclaim_stall_ns = u64::MAX;
    stats.oom_kills = 6;
    let sample = CgroupSample::new(key(3), &stats, Instant::now());
    assert_eq!(
        sample.counters,
        ProbeCounters {
            throttle_episodes: 1,
            throttled_ns: 2,
            runq_count: 3,
            runq_total_ns: 4,
            reclaim_stall_ns: u64::MAX,
            oom_kills: 6,
        }
    );
    assert!(std::mem::size_of::<PipelineInput>() * 3 <= std::mem::size_of::<CgroupStats>());
}

/// A mixed stream for the Pod cgroup `pod_key` and its container `app_key`: probe samples (full
/// map values, reduced by the producer), file readings, OOM events, a counter reset and a sample
/// that arrives late.
fn mixed_stream(pod_key: CgroupKey, app_key: CgroupKey, t0: Instant) -> Vec<PipelineInput> {
    let oom = ProbeEvent {
        kind: EventKind::OomKill as u32,
        pid: 7,
        timestamp_ns: 0,
        cgroup: app_key,
        cpu_cgroup: app_key,
        comm: [0; 16],
        duration_ns: 0,
    };
    let mut out = Vec::new();
    for i in 0..60u64 {
        let at = t0 + Duration::from_millis(100 * i);
        let mut stats = CgroupStats::ZERO;
        // Counters reset half-way (a cgroup id reused, a map entry forgotten).
        let c = if i < 30 { i } else { i - 30 };
        stats.throttle_episodes = c * c;
        stats.throttled_ns = c * 3_000_000;
        let bucket = (c % 32) as usize;
        stats.runq_hist[bucket] = c;
        stats.runq_count = c * 7;
        stats.runq_total_ns = c * c * 11_000;
        stats.memcg_reclaim_stall_ns = c * 1_000;
        stats.direct_reclaim_stall_ns = c * 500;
        stats.oom_kills = c / 10;
        out.push(CgroupSample::new(pod_key, &stats, at).into());
        out.push(CgroupSample::new(app_key, &stats, at).into());
        out.push(files(
            app_key,
            at,
            i * 10,
            i * i / 8,
            i * 1_000_000,
            i * 50_000_000,
        ));
        if i % 17 == 0 {
            out.push(PipelineInput::Event(oom, at));
        }
        if i == 40 {
            let mut late = stats;
            late.throttle_episodes = 1_000_000;
            out.push(CgroupSample::new(pod_key, &late, at - Duration::from_millis(150)).into());
        }
    }
    out
}

#[test]
fn batched_input_is_aggregated_like_single_records() {
    let f = fixture(config());
    // Pod 2: the same shape as Pod 1 (Pod cgroup 20, container `app` 21).
    for (k, container) in [(key(20), None), (key(21), Some("app".to_owned()))] {
        f.resolver.insert(
            k,
            CgroupOwner::Pod {
                pod: pod(2),
                container,
            },
        );
    }
    let tx = f.handle.sender();
    let t0 = Instant::now();
    let single = mixed_stream(key(10), key(11), t0);
    let batched = mixed_stream(key(20), key(21), t0);
    let total = (single.len() + batched.len()) as u64;
    // Pod 1 one record at a time, Pod 2 in batches of assorted sizes, interleaved.
    let mut single = single.into_iter();
    let mut batched = batched.into_iter();
    for size in [1usize, 7, 64, 0, 2, 200].into_iter().cycle() {
        let batch: Vec<_> = batched.by_ref().take(size).collect();
        let done = batch.is_empty() && size > 0;
        tx.send_batch(batch).unwrap();
        for r in single.by_ref().take(size) {
            tx.send(r).unwrap();
        }
        if done {
            break;
        }
    }
    for r in single {
        tx.send(r).unwrap();
    }
    let s = wait_for(&f.reader, "every record", |s| s.stats.processed_total == total);
    assert_eq!(s.stats.dropped_total, 0);
    assert_eq!(s.stats.unattributed_total, 0);
    let (one, two) = (s.pod("uid-1").unwrap(), s.pod("uid-2").unwrap());
    let p = &one.pod_cgroup;
    assert!(p.probe_throttle_episodes_per_second.is_some(), "{p:?}");
    assert!(p.runq_latency_mean_seconds.is_some());
    assert!(p.memory_reclaim_stall_seconds_per_second.is_some());
    let app = &one.containers[0].pressure;
    assert!(app.cpu_throttled_ratio.is_some(), "{app:?}");
    assert_eq!(app.oom_kills_total.map(|f| f.value), Some(4.0));
    assert_eq!(one.pod_cgroup, two.pod_cgroup);
    assert_eq!(one.containers, two.containers);
}

#[test]
fn batch_overflow_counts_records_not_batches() {
    let f = fixture(PipelineConfig {
        queue_capacity: 8,
        ..config()
    });
    let tx = f.handle.sender();
    let now = Instant::now();
    let batch = |n: u64, first: u64| -> Vec<PipelineInput> {
        (first..first + n)
            .map(|i| files(key(1000 + i % 64), now, i, 0, 0, 0))
            .collect()
    };
    // More records than the whole queue holds: never fits; every record is counted.
    assert_eq!(tx.send_batch(batch(9, 0)), Err(SendError::Full));
    assert_eq!(tx.dropped(), 9);
    // An empty batch is no record at all.
    assert_eq!(tx.send_batch(Vec::new()), Ok(()));
    assert_eq!(tx.dropped(), 9);
    let (batches, size) = (50_000u64, 3u64);
    let mut refused = 0;
    for b in 0..batches {
        if tx.send_batch(batch(size, b * size)).is_err() {
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "an 8-record queue fed 50k batches without a pause must overflow"
    );
    let dropped = 9 + refused * size;
    assert_eq!(tx.dropped(), dropped, "dropped counts records, not batches");
    let s = wait_for(&f.reader, "dropped in snapshot", |s| {
        s.stats.dropped_total == dropped && s.stats.processed_total + refused * size == batches * size
    });
    assert_eq!(s.stats.queue_capacity, 8);
}

#[test]
fn shutdown_applies_every_accepted_batch() {
    let Fixture { handle, reader, .. } = fixture(config());
    let tx = handle.sender();
    let t0 = Instant::now();
    let mut accepted = 0u64;
    for b in 0..200u64 {
        let batch: Vec<PipelineInput> = (0..100u64)
            .map(|i| {
                let mut stats = CgroupStats::ZERO;
                stats.throttle_episodes = b;
                CgroupSample::new(key(10 + i % 2), &stats, t0 + Duration::from_millis(b)).into()
            })
            .collect();
        if tx.send_batch(batch).is_ok() {
            accepted += 100;
        }
    }
    handle.shutdown();
    let s = reader.load();
    assert_eq!(accepted, 20_000, "the default queue holds 20k records");
    assert_eq!(
        s.stats.processed_total, accepted,
        "the last snapshot shows every record accepted before shutdown"
    );
}

#[tokio::test]
async fn reserve_counts_the_releasing_pods_as_gone() {
    let f = fixture(config());
    // allocatable 8000m; pod-1 1000m, pod-2 (the victim) 5000m: 2000m free.
    f.pods.upsert(PodEntry {
        pod: pod(2),
        requests: Resources::new(5000, 1 << 30),
        pending_resize: Resources::ZERO,
    });
    wait_for(&f.reader, "pod-2 counted", |s| {
        s.node.headroom.allocated.cpu_millis == 6000
    });
    let ledger = f.handle.ledger();
    let req = |id: &str, releasing: Vec<String>| ReserveRequest {
        id: id.into(),
        pod: "uid-1".into(),
        amount: Resources::new(4000, 0),
        ttl: Duration::from_secs(30),
        require_known_pod: true,
        releasing,
    };
    let err = ledger.reserve(req("without", Vec::new())).await.unwrap_err();
    assert!(
        matches!(
            err,
            ReserveError::Ledger(LedgerError::InsufficientHeadroom { .. })
        ),
        "{err}"
    );
    // An unknown uid (a victim already gone) changes nothing.
    let err = ledger
        .reserve(req("gone", vec!["uid-404".into()]))
        .await
        .unwrap_err();
    assert!(matches!(err, ReserveError::Ledger(_)), "{err}");
    let (view, node) = ledger
        .reserve(req("with", vec!["uid-2".into(), "uid-404".into()]))
        .await
        .unwrap();
    assert_eq!(view.amount.cpu_millis, 4000);
    // Until the victim has left, the node is over-promised by its room...
    assert_eq!(node.allocated.cpu_millis, 6000);
    assert_eq!(node.reserved.cpu_millis, 4000);
    assert!(node.headroom.cpu_millis <= 0, "{node:?}");
    // ...and once it has, the reservation holds exactly the room it left.
    assert!(f.pods.remove("uid-2"));
    wait_for(&f.reader, "victim gone", |s| {
        s.node.headroom.allocated.cpu_millis == 1000 && s.node.headroom.headroom.cpu_millis == 3000
    });
}

#[tokio::test]
async fn a_resizing_pod_counted_at_its_desired_size_holds_that_part_of_its_reservation() {
    let f = fixture(config());
    // allocatable 8000m; pod-1 1000m; pod-2 admitted at 4000m, resizing to 6000m and counted at
    // 6000m as the scheduler counts it (pending 2000m); pod-3 (the victim) 1000m: 0 free.
    for (n, cpu, pending) in [(2, 6000, 2000), (3, 1000, 0)] {
        f.pods.upsert(PodEntry {
            pod: pod(n),
            requests: Resources::new(cpu, 0),
            pending_resize: Resources::new(pending, 0),
        });
    }
    wait_for(&f.reader, "pods counted", |s| {
        s.node.headroom.allocated.cpu_millis == 8000
    });
    let ledger = f.handle.ledger();
    let req = |id: &str, pod: &str, cpu: i64| ReserveRequest {
        id: id.into(),
        pod: pod.into(),
        amount: Resources::new(cpu, 0),
        ttl: Duration::from_secs(30),
        require_known_pod: true,
        releasing: Vec::new(),
    };
    // The resize's 2000m are already in the count: reserving them needs no further room...
    let (_, node) = ledger.reserve(req("resize", "uid-2", 2000)).await.unwrap();
    // ...and is not subtracted twice from the headroom.
    assert_eq!(node.reserved.cpu_millis, 0, "{node:?}");
    assert_eq!(node.headroom.cpu_millis, 0, "{node:?}");
    // Anything beyond the pending part needs real room, which there is not.
    let err = ledger.reserve(req("more", "uid-2", 1)).await.unwrap_err();
    assert!(matches!(err, ReserveError::Ledger(_)), "{err}");
    // Another Pod's reservation gets no such credit.
    let err = ledger.reserve(req("other", "uid-3", 500)).await.unwrap_err();
    assert!(matches!(err, ReserveError::Ledger(_)), "{err}");
}

#[tokio::test]
async fn allocatable_and_liveness_come_from_a_live_source() {
    let f = fixture(PipelineConfig {
        tick_interval: Duration::from_millis(5),
        stale_after: Duration::from_millis(50),
        ..config()
    });
    f.pods.set_live(true);
    f.pods.set_allocatable(Some(Resources::new(3920, 8 << 30)));
    let s = wait_for(&f.reader, "allocatable from the source", |s| {
        s.node.headroom.allocatable.cpu_millis == 3920
    });
    assert_eq!(s.node.headroom.headroom.cpu_millis, 2920);
    std::thread::sleep(Duration::from_millis(120));
    assert!(!f.reader.load().node.stale, "a live source stays fresh");
    f.pods.set_live(false);
    wait_for(&f.reader, "a source that went down turns stale", |s| s.node.stale);
    f.pods.set_live(true);
    wait_for(&f.reader, "and fresh again once it is back", |s| !s.node.stale);
    f.pods.set_allocatable(None);
    wait_for(&f.reader, "back to the configured allocatable", |s| {
        s.node.headroom.allocatable.cpu_millis == 8000
    });
}
