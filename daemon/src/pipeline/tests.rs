#![allow(clippy::unwrap_used)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use headroom_common::{CgroupKey, CgroupStats, EventKind, ProbeEvent};
use headroom_node_model::Resources;

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
    f.cpu = Some(CpuStat {
        usage_ns,
        nr_periods: periods,
        nr_throttled: throttled,
        throttled_ns,
    });
    f.memory = Some(MemoryStat {
        usage_bytes: 300 << 20,
        working_set_bytes: 200 << 20,
    });
    PipelineInput::CgroupFiles(f)
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
    tx.send(PipelineInput::Sample(CgroupSample {
        key: key(10),
        stats,
        at: t0,
    }))
    .unwrap();
    stats.throttle_episodes = 20;
    stats.throttled_ns = 500_000_000;
    stats.memcg_reclaim_stall_ns = 100_000_000;
    stats.direct_reclaim_stall_ns = 100_000_000;
    stats.runq_count = 10;
    stats.runq_total_ns = 10_000_000;
    stats.oom_kills = 1;
    tx.send(PipelineInput::Sample(CgroupSample {
        key: key(10),
        stats,
        at: t0 + Duration::from_secs(2),
    }))
    .unwrap();
    let event = ProbeEvent {
        kind: EventKind::OomKill as u32,
        pid: 42,
        timestamp_ns: 0,
        cgroup: key(10),
        cpu_cgroup: key(10),
        comm: [0; 16],
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
    // The receiver holds one version, the newest, however many were published.
    assert!(rx.has_changed().unwrap());
    let v = *rx.borrow_and_update();
    assert_eq!(v, s.version);
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
    };
    tx.send(PipelineInput::Event(rmdir, Instant::now())).unwrap();
    wait_for(&f.reader, "pod 2 gone", |s| s.pod("uid-2").is_none());
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
