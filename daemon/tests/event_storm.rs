//! An event storm against the real headroomd with its probes attached: a thousand cgroups
//! created and removed per second under a throwaway parent while a hundred cgroups throttle at
//! once. What must hold is bookkeeping, not speed: every event the probes emitted is either read
//! or counted as lost, every cgroup id is either known to the index or counted as unresolved, a
//! pipeline that fell behind says so, and headroomd's memory stays bounded.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    collections::HashMap,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use headroom_testkit::process::TerminatedOnDrop as Daemon;
use support::{TestCgroup, skip_reason, spawn_in, stop};

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

/// Cgroups created (and removed) per second, and for how long.
const CREATED_PER_SECOND: usize = 1_000;
const STORM: Duration = Duration::from_secs(4);
/// Cgroups throttling at once. Each has a 1 ms quota per 50 ms period (2 % of a CPU, so every
/// period ends in a throttle episode: two events each), and their parent caps them together at
/// 20 % of one CPU: the 2-core machine stays usable.
const THROTTLED: usize = 100;

/// How much headroomd's RSS may grow over the storm. What the storm can make it hold: the
/// pipeline queue when full (65,536 records of at most 96 bytes: 6 MiB), the drained events of
/// one wake-up (the 256 KiB ring buffer's worth, copied), the cgroup index (a few hundred
/// cgroups alive at once, well under 1 MiB) and the unresolved-counter set (bounded by the probe
/// map). Every per-cgroup structure is dropped with the cgroup's removal. 16 MiB is twice that.
const RSS_GROWTH_BOUND_KIB: u64 = 16 * 1024;

/// The cpu controller's hierarchy: the v1 `cpu` mount on a hybrid host, the root on pure v2.
fn cpu_mount() -> PathBuf {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        root.to_path_buf()
    } else {
        root.join("cpu")
    }
}

/// A cgroup under `parent`, removed on drop (after its processes are killed).
fn child(parent: &TestCgroup, name: &str) -> std::io::Result<TestCgroup> {
    let path = parent.path.join(name);
    std::fs::create_dir(&path)?;
    Ok(TestCgroup { path })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `/metrics` as (name, value) of every unlabelled series.
fn scrape(port: u16) -> std::io::Result<HashMap<String, f64>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    Ok(body
        .lines()
        .filter(|line| !line.starts_with('#') && !line.contains('{'))
        .filter_map(|line| {
            let (name, value) = line.split_once(' ')?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect())
}

fn metric(m: &HashMap<String, f64>, name: &str) -> u64 {
    let value = m
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing from /metrics: {m:?}"));
    *value as u64
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Throttled busy loops, killed and reaped on drop (before their cgroups go).
struct Loops(Vec<Child>);

impl Drop for Loops {
    fn drop(&mut self) {
        for child in self.0.drain(..) {
            stop(child);
        }
    }
}

#[test]
fn an_event_storm_is_counted_not_lost_and_memory_stays_bounded() {
    let test = "event_storm";
    if skip_reason(test).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let daemon = Daemon(
        Command::new(HEADROOMD)
            .args(["serve", "--probes", "required", "--actuation", "off"])
            .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
            .arg("--socket")
            .arg(tmp.path().join("headroomd.sock"))
            .arg("--intent-dir")
            .arg(tmp.path().join("intents"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = daemon.0.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(m) = scrape(port)
            && m.get("headroom_probes_loaded") == Some(&1.0)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "headroomd did not serve /metrics with probes loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Dropped in reverse order: the loops, then the throttled cgroups, then the parent.
    let parent = TestCgroup::create(&cpu_mount(), "storm");
    if parent.is_v2() {
        parent.write("cgroup.subtree_control", "+cpu");
    }
    parent.set_cpu_quota(20_000, 100_000);
    let throttled: Vec<TestCgroup> = (0..THROTTLED)
        .map(|i| {
            let cgroup = child(&parent, &format!("throttled-{i}")).unwrap();
            cgroup.set_cpu_quota(1_000, 50_000);
            cgroup
        })
        .collect();
    let loops = Loops(
        throttled
            .iter()
            .map(|cgroup| spawn_in(&[cgroup], "sh -c 'while :; do :; done'"))
            .collect(),
    );
    // Settled: the throttled cgroups indexed and their episodes flowing.
    std::thread::sleep(Duration::from_secs(2));
    let rss_before = rss_kib(pid);
    let at_start = scrape(port).unwrap();

    // The storm: every 10 ms, ten cgroups created and the previous ten removed.
    let mut created = 0usize;
    let mut alive: Vec<TestCgroup> = Vec::new();
    let mut rss_max = rss_before;
    let mut queued_max = 0;
    let started = Instant::now();
    let mut next_tick = started;
    let mut last_sample = started;
    while started.elapsed() < STORM {
        let removed = std::mem::take(&mut alive);
        for i in 0..CREATED_PER_SECOND / 100 {
            alive.push(child(&parent, &format!("storm-{created}-{i}")).unwrap());
        }
        created += CREATED_PER_SECOND / 100;
        drop(removed);
        if last_sample.elapsed() >= Duration::from_millis(250) {
            rss_max = rss_max.max(rss_kib(pid));
            if let Ok(m) = scrape(port) {
                queued_max = queued_max.max(metric(&m, "headroom_pipeline_queued"));
            }
            last_sample = Instant::now();
        }
        next_tick += Duration::from_millis(10);
        std::thread::sleep(next_tick.saturating_duration_since(Instant::now()));
    }
    drop(alive);
    let storm_took = started.elapsed();
    drop(loops);
    drop(throttled);
    drop(parent);

    // Every mkdir and rmdir of the storm is either read or counted lost once the collector has
    // drained the ring buffer; the aggregator's queue then empties. (Waited for, with a generous
    // bound: a failure here is a count that never adds up, not slowness.)
    let storm_events = 2 * created as u64;
    let accounted = |m: &HashMap<String, f64>| {
        (metric(m, "headroom_probe_events_total") - metric(&at_start, "headroom_probe_events_total"))
            + (metric(m, "headroom_probe_events_dropped_total")
                - metric(&at_start, "headroom_probe_events_dropped_total"))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let m = scrape(port).unwrap();
        rss_max = rss_max.max(rss_kib(pid));
        if accounted(&m) >= storm_events && metric(&m, "headroom_pipeline_queued") == 0 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "{test}: {storm_events} cgroup events of the storm, {} read or counted lost; queued {}",
            accounted(&m),
            metric(&m, "headroom_pipeline_queued"),
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let rss_after = rss_kib(pid);
    drop(daemon);

    let delta = |name: &str| metric(&after, name) - metric(&at_start, name);
    let received = delta("headroom_probe_events_total");
    let lost = delta("headroom_probe_events_dropped_total");
    let unresolved = delta("headroom_probe_events_unresolved_total");
    let rescans = delta("headroom_probe_cgroup_rescans_total");
    let map_full = delta("headroom_probe_map_full_total");
    let pipeline_dropped = delta("headroom_pipeline_dropped_total");
    let processed = delta("headroom_pipeline_processed_total");
    eprintln!(
        "{test}: {created} cgroups created and removed in {:.1} s beside {THROTTLED} throttled; \
         probe events read {received}, lost (ring buffer full) {lost}, unresolved {unresolved}, \
         re-scans {rescans}; map full {map_full}; pipeline processed {processed}, dropped \
         {pipeline_dropped}, queued at most {queued_max}; RSS {rss_before} KiB before, {rss_max} \
         KiB at most, {rss_after} KiB after",
        storm_took.as_secs_f64(),
    );
    assert!(
        created >= CREATED_PER_SECOND * 3,
        "only {created} cgroups created"
    );
    // Each cgroup's mkdir and rmdir is read or counted lost (other cgroups of the node only
    // add to both sides).
    assert!(
        received + lost >= storm_events,
        "{received} read + {lost} lost < {storm_events}"
    );
    // An unresolved event is one that was read; a re-scan is made per drain at most, so never
    // more than there were events.
    assert!(
        unresolved <= received,
        "{unresolved} unresolved of {received} read"
    );
    assert!(rescans <= received, "{rescans} re-scans for {received} events");
    // The throttled cgroups' episodes came through beside the storm: more than the storm's own.
    assert!(
        received + lost > storm_events,
        "no throttle events beside the storm's {storm_events}"
    );
    // A pipeline that fell behind dropped and counted, and its queue emptied again.
    assert!(
        processed + pipeline_dropped >= received,
        "{processed} processed + {pipeline_dropped} dropped < {received} events forwarded"
    );
    assert!(
        rss_max <= rss_before + RSS_GROWTH_BOUND_KIB,
        "RSS grew from {rss_before} KiB to {rss_max} KiB (bound: +{RSS_GROWTH_BOUND_KIB} KiB)"
    );
}
