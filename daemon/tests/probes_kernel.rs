//! The probes against the real kernel of this machine: their figures must agree with the
//! kernel's own accounting (`cpu.stat`), land in the right cgroup, and report OOM kills with
//! the right pid. Privileged: skipped loudly when not root (and failed when CI requires them).
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    fs::File,
    io::Write,
    os::unix::process::ExitStatusExt,
    time::{Duration, Instant},
};

use headroom_common::{CgroupKey, CgroupStats, EventKind};
use headroomd::probes::{ProbeError, ProbeOptions, Probes};
use support::{
    KERNEL, TestCgroup, cgroup_layout, figure, kernel_release, passed, record, skip_reason, spawn_in, stop,
    within,
};

fn load_probes(test: &str) -> Option<Probes> {
    load_probes_with(test, &ProbeOptions::default())
}

fn load_probes_with(test: &str, options: &ProbeOptions) -> Option<Probes> {
    if skip_reason(test).is_some() {
        return None;
    }
    match Probes::load(options) {
        Ok(probes) => {
            let names = |attached: bool| {
                probes
                    .programs
                    .iter()
                    .filter(|p| p.error.is_none() == attached)
                    .map(|p| p.program)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            // What the kernel support table (docs/kernels.md) is made of.
            record(&format!(
                "headroom-kernel test={test} release={} mode={} throttle={:?} runq={:?} attached={} refused={}",
                kernel_release(),
                cgroup_layout(),
                probes.throttle_model,
                probes.runq_model,
                names(true),
                names(false)
            ));
            Some(probes)
        }
        Err(ProbeError::NotBuilt) => {
            headroom_testkit::gate::privileged(
                test,
                Some("probes not built (run `cargo xtask build-ebpf`)".into()),
            );
            None
        }
        Err(e) => panic!("{test}: loading probes failed: {e}"),
    }
}

fn stats_of(probes: &mut Probes, key: CgroupKey) -> CgroupStats {
    probes
        .read_stats()
        .unwrap()
        .get(&key)
        .copied()
        .unwrap_or(CgroupStats::ZERO)
}

/// A busy loop, pinned to one CPU or not.
fn busy_loop(pin: Option<u32>) -> String {
    match pin {
        Some(cpu) => format!("taskset -c {cpu} sh -c 'while :; do :; done'"),
        None => "sh -c 'while :; do :; done'".to_owned(),
    }
}

/// How much of the run the throttled cgroup must have spent throttled, as the kernel counts it.
#[derive(Clone)]
enum Expect {
    /// Throttled in most of its periods (a loop that never sleeps).
    MostPeriods,
    /// Throttled and unthrottled again and again: at least `episodes` throttled periods, and
    /// periods that ran out of work before the quota (the loop slept). The loop appends a line
    /// to `sleeps` before each sleep.
    OnAndOff {
        episodes: u64,
        sleeps: std::path::PathBuf,
    },
}

/// The throttled periods `nr_throttled` may count beyond the tasks the probes saw stopped.
///
/// A queue can run out of quota just as the group goes to sleep: charged when its last task
/// leaves the CPU, or when a forked child is queued on another CPU's empty queue. It is then
/// throttled until the next period with no task stopped: `nr_throttled` counts that period, and
/// nobody waits in it (task-based throttling, Linux ≥ 6.18, books `throttled_time` only from
/// the first task stopped). The probes count tasks stopped, so they may miss at most one such
/// period per sleep of the workload. A one-off measurement on 6.18 (not a command here), with
/// the former fixed 20 000-iteration burst that ended at the quota about half the time: 59 begins
/// for 75 throttled periods; bursts of several periods miss 0–2 (this test prints its figures).
fn stop_free_allowance(expect: &Expect) -> u64 {
    match expect {
        Expect::OnAndOff { sleeps, .. } => {
            std::fs::read_to_string(sleeps).map_or(0, |s| s.lines().count() as u64)
        }
        Expect::MostPeriods => 0,
    }
}

/// Iterations of a shell counting loop that take about `cpu` of one CPU here (timed unthrottled,
/// the quickest of three runs, as a busy machine only ever slows a run), so that a burst spans the
/// same periods on a fast host and in a slow guest.
fn calibrated_iterations(cpu: Duration) -> u64 {
    const PROBE: u64 = 50_000;
    let took = (0..3)
        .map(|_| {
            let started = Instant::now();
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(counting_loop(PROBE))
                .status()
                .unwrap();
            assert!(status.success(), "the counting loop ran: {status:?}");
            started.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    ((PROBE as f64 * cpu.as_secs_f64() / took) as u64).clamp(2_000, 5_000_000)
}

fn counting_loop(iterations: u64) -> String {
    format!("i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done")
}

/// [`episodes_agree`]'s tolerance, as the figures print it.
fn episodes_tolerance(allowance: u64) -> String {
    if allowance == 0 {
        "5%".to_owned()
    } else {
        format!("5%, less up to {allowance} stop-free periods (one per sleep)")
    }
}

/// `ours` within 5% of the kernel's `nr_throttled`, less at most `allowance` stop-free periods.
fn episodes_agree(ours: u64, kernel: u64, allowance: u64) -> bool {
    let lowest = kernel.saturating_sub(allowance) as f64 * 0.95;
    (lowest..=kernel as f64 * 1.05).contains(&(ours as f64))
}

/// `workloads` (shell commands) run for `seconds` in a cgroup limited to `quota_us` per
/// 100 ms, beside an unthrottled busy sibling; the probes' episodes and throttled time must
/// agree with `cpu.stat`, and the sibling shows none.
fn throttle_case(test: &str, workloads: &[String], quota_us: u64, seconds: u64, expect: Expect) {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes(test) else {
        return;
    };
    let cpu = probes.host.cpu.clone();
    let throttled = TestCgroup::create(&cpu.mount, "throttled");
    let sibling = TestCgroup::create(&cpu.mount, "unthrottled");
    // The kernel's `nr_throttled` counts throttled *periods*; with a quota of at least twice
    // the 5 ms bandwidth slice each episode lasts one period, so episodes and periods agree.
    // (With a quota below the slice, one episode can span several periods while the cgroup
    // repays overrun runtime: then they differ.)
    throttled.set_cpu_quota(quota_us, 100_000);
    assert_eq!(throttled.cpu_throttled().0, 0);

    let busy: Vec<_> = workloads
        .iter()
        .map(|command| spawn_in(&[&throttled], command))
        .collect();
    let free = spawn_in(&[&sibling], &busy_loop(None));
    let started_boottime = headroomd::probes::boottime_ns();
    let dropped_before = probes.health().unwrap().events_dropped;
    // Drained as it runs (as the collector does), so the ring buffer never fills.
    let mut events = Vec::new();
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        probes.drain_events(|e| events.push(e));
        std::thread::sleep(Duration::from_millis(50));
    }
    let statuses: Vec<_> = busy.into_iter().map(stop).collect();
    stop(free);
    // One more period, so the kernel's period timer books the last episode too.
    std::thread::sleep(Duration::from_millis(250));
    for status in &statuses {
        assert!(
            status.signal().is_some(),
            "the busy loop ran until killed: {status:?}"
        );
    }

    probes.drain_events(|e| events.push(e));
    let drained_boottime = headroomd::probes::boottime_ns();
    let (kernel_episodes, kernel_ns) = throttled.cpu_throttled();
    let allowance = stop_free_allowance(&expect);
    let ours = stats_of(&mut probes, CgroupKey::new(cpu.id, throttled.id()));
    throttle_events_agree(
        test,
        &events,
        CgroupKey::new(cpu.id, throttled.id()),
        CgroupKey::new(cpu.id, sibling.id()),
        (started_boottime, drained_boottime),
        (kernel_episodes, allowance),
        probes.health().unwrap().events_dropped - dropped_before,
    );
    let theirs = stats_of(&mut probes, CgroupKey::new(cpu.id, sibling.id()));
    eprintln!(
        "{test}: episodes: probes {} vs cpu.stat nr_throttled {kernel_episodes}; throttled: probes {} ns vs cpu.stat {kernel_ns} ns",
        ours.throttle_episodes, ours.throttled_ns
    );
    let tolerance = episodes_tolerance(allowance);
    figure(
        test,
        "throttle episodes vs nr_throttled",
        ours.throttle_episodes,
        kernel_episodes,
        &tolerance,
    );
    figure(
        test,
        "throttled ms vs cpu.stat",
        ours.throttled_ns / 1_000_000,
        kernel_ns / 1_000_000,
        "10%",
    );
    figure(
        test,
        "unthrottled sibling's episodes",
        theirs.throttle_episodes,
        0,
        "exact",
    );
    match expect {
        Expect::MostPeriods => {
            let periods = seconds * 10;
            assert!(
                kernel_episodes as f64 > periods as f64 * 0.6,
                "the quota throttled the loops ({kernel_episodes} throttled periods of about {periods})"
            );
        }
        Expect::OnAndOff { episodes, .. } => {
            let active_periods = throttled.stat("cpu.stat", "nr_periods");
            figure(
                test,
                "throttled periods of active periods (kernel: nr_throttled/nr_periods)",
                kernel_episodes,
                active_periods,
                "some, not all",
            );
            assert!(
                kernel_episodes >= episodes && kernel_episodes < active_periods,
                "the cgroup throttled and unthrottled again and again: nr_throttled {kernel_episodes} of nr_periods {active_periods}"
            );
            // Long bursts keep the sleeps, and so the allowance, a small part of the episodes
            // (about one in nine with 100 ms bursts; CI once saw one in four with 60 ms).
            assert!(
                allowance * 3 <= kernel_episodes,
                "{allowance} sleeps for {kernel_episodes} throttled periods: the bursts are too short to tell"
            );
        }
    }
    assert!(
        episodes_agree(ours.throttle_episodes, kernel_episodes, allowance),
        "throttle episodes {} not within {tolerance} of nr_throttled {kernel_episodes}",
        ours.throttle_episodes
    );
    assert!(
        within(ours.throttled_ns as f64, kernel_ns as f64, 0.10),
        "throttled time {} ns not within 10% of cpu.stat's {kernel_ns} ns",
        ours.throttled_ns
    );
    assert_eq!(
        theirs.throttle_episodes, 0,
        "the unthrottled sibling shows no throttling"
    );
    assert_eq!(theirs.throttled_ns, 0);
    assert!(
        theirs.runq_count > 0 || ours.runq_count > 0,
        "run-queue latency was sampled"
    );
    passed(test);
}

/// The pushed episode events of `ours`: one begin per episode the kernel counted (the node-wide
/// episode, within 5% of `nr_throttled` as the counter is, less the stop-free periods allowed),
/// begins and ends alternating, each
/// end with the length since its begin, stamped on CLOCK_BOOTTIME within `window`; none for the
/// unthrottled sibling.
fn throttle_events_agree(
    test: &str,
    events: &[headroom_common::ProbeEvent],
    ours: CgroupKey,
    sibling: CgroupKey,
    window: (u64, u64),
    (kernel_episodes, allowance): (u64, u64),
    dropped: u64,
) {
    let kind = |e: &headroom_common::ProbeEvent| EventKind::from_raw(e.kind);
    let mine: Vec<_> = events
        .iter()
        .filter(|e| {
            e.cgroup == ours && matches!(kind(e), Some(EventKind::ThrottleBegin | EventKind::ThrottleEnd))
        })
        .collect();
    let begins = mine
        .iter()
        .filter(|e| kind(e) == Some(EventKind::ThrottleBegin))
        .count() as u64;
    let tolerance = episodes_tolerance(allowance);
    figure(
        test,
        "pushed throttle-begin events vs nr_throttled",
        begins,
        kernel_episodes,
        &tolerance,
    );
    assert_eq!(dropped, 0, "no event was lost");
    assert!(
        episodes_agree(begins, kernel_episodes, allowance),
        "{begins} throttle-begin events, not within {tolerance} of nr_throttled {kernel_episodes}"
    );
    let mut open: Option<u64> = None;
    for e in &mine {
        assert!(
            (window.0..=window.1).contains(&e.timestamp_ns),
            "stamp {} outside the run's CLOCK_BOOTTIME window {window:?}",
            e.timestamp_ns
        );
        assert_eq!(e.cpu_cgroup, ours);
        match (kind(e), open) {
            (Some(EventKind::ThrottleBegin), None) => open = Some(e.timestamp_ns),
            (Some(EventKind::ThrottleEnd), Some(since)) => {
                assert_eq!(
                    e.duration_ns,
                    e.timestamp_ns - since,
                    "an end's duration is since its begin"
                );
                assert!(e.duration_ns > 0);
                open = None;
            }
            other => panic!("begin and end do not alternate: {other:?} at {e:?}"),
        }
    }
    assert!(
        !events.iter().any(|e| e.cgroup == sibling
            && matches!(kind(e), Some(EventKind::ThrottleBegin | EventKind::ThrottleEnd))),
        "the unthrottled sibling has no throttle events"
    );
}

#[test]
fn throttling_one_task_matches_cpu_stat_and_spares_the_unthrottled_sibling() {
    // 10% of a CPU: throttled and unthrottled about 60 times.
    throttle_case(
        "throttling_one_task",
        &[busy_loop(None)],
        10_000,
        6,
        Expect::MostPeriods,
    );
}

#[test]
fn throttling_on_and_off_matches_cpu_stat() {
    // A loop that works about 100 ms, then sleeps 100 ms, over and over, under 10% of a CPU: each
    // burst is throttled for several periods, then the group goes idle mid-period and its run
    // queue is no longer throttled when the task next runs. Episodes must open and close
    // with the kernel's periods through all of it.
    let sleeps = std::env::temp_dir().join(format!("headroom-on-and-off-{}", std::process::id()));
    let _ = std::fs::remove_file(&sleeps);
    let burst = counting_loop(calibrated_iterations(Duration::from_millis(100)));
    throttle_case(
        "throttling_on_and_off",
        &[format!(
            "sh -c 'while :; do {burst}; echo >> {}; sleep 0.1; done'",
            sleeps.display()
        )],
        10_000,
        10,
        Expect::OnAndOff {
            episodes: 30,
            sleeps: sleeps.clone(),
        },
    );
    let _ = std::fs::remove_file(&sleeps);
}

#[test]
fn throttling_two_tasks_on_two_cpus_sums_the_run_queues() {
    // 20% of a CPU shared by two loops on two CPUs: both run queues throttle each period, and
    // the kernel adds up both queues' throttled time.
    throttle_case(
        "throttling_two_cpus",
        &[busy_loop(Some(0)), busy_loop(Some(1))],
        20_000,
        6,
        Expect::MostPeriods,
    );
}

/// `run_delay` (ns spent waiting on a run queue) from `/proc/<pid>/schedstat`.
fn run_delay_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn runq_latency_matches_the_schedulers_run_delay() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("runq_latency") else {
        return;
    };
    let cpu = probes.host.cpu.clone();
    let crowded = TestCgroup::create(&cpu.mount, "crowded");
    // Two busy loops on one CPU: each waits while the other runs, and every wait ends in a
    // switch-in the probes sample.
    let loops: Vec<_> = (0..2)
        .map(|_| spawn_in(&[&crowded], "taskset -c 0 sh -c 'while :; do :; done'"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let key = CgroupKey::new(cpu.id, crowded.id());
    let pids: Vec<u32> = loops.iter().map(|c| c.id()).collect();
    let (probe_before, kernel_before) = (
        stats_of(&mut probes, key),
        pids.iter().map(|&p| run_delay_ns(p)).sum::<u64>(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let (probe_after, kernel_after) = (
        stats_of(&mut probes, key),
        pids.iter().map(|&p| run_delay_ns(p)).sum::<u64>(),
    );
    for child in loops {
        stop(child);
    }
    let ours = probe_after.runq_total_ns - probe_before.runq_total_ns;
    let samples = probe_after.runq_count - probe_before.runq_count;
    let kernel = kernel_after - kernel_before;
    let in_hist: u64 = probe_after.runq_hist.iter().sum::<u64>() - probe_before.runq_hist.iter().sum::<u64>();
    eprintln!(
        "run-queue wait: probes {ours} ns over {samples} samples vs the kernel's run_delay {kernel} ns"
    );
    figure(
        "runq_latency",
        "run-queue wait ms vs schedstat run_delay",
        ours / 1_000_000,
        kernel / 1_000_000,
        "5%",
    );
    assert!(
        kernel > 1_000_000_000,
        "two loops on one CPU waited about half the time ({kernel} ns)"
    );
    assert!(
        within(ours as f64, kernel as f64, 0.05),
        "probes' run-queue wait {ours} ns not within 5% of run_delay {kernel} ns"
    );
    assert_eq!(in_hist, samples, "every sample is in one histogram bucket");

    // Removed and forgotten, the cgroup is not reported again, although per-CPU run-queue
    // slots may still carry its counters until the css id is reused.
    drop(crowded);
    probes.forget_cgroup(&key);
    assert!(
        !probes.read_stats().unwrap().contains_key(&key),
        "a forgotten cgroup comes back from the run-queue slots"
    );
    passed("runq_latency");
}

/// Writes a file of `mib` MiB and drops it from the page cache, so reading it charges the
/// reader's memory cgroup.
fn cold_file(mib: usize) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..mib {
        file.write_all(&chunk).unwrap();
    }
    file.as_file().sync_all().unwrap();
    let fd = File::open(file.path()).unwrap();
    nix::fcntl::posix_fadvise(&fd, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
    file
}

#[test]
fn memcg_reclaim_is_attributed_to_the_limited_cgroup_only() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("memcg_reclaim") else {
        return;
    };
    let memory = probes.host.memory.clone();
    let limited = TestCgroup::create(&memory.mount, "limited");
    let sibling = TestCgroup::create(&memory.mount, "unlimited");
    limited.set_memory_limit(32 << 20);
    let file = cold_file(200);
    probes.drain_events(|_| {});
    let before = probes.read_stats().unwrap();
    let dropped_before = probes.health().unwrap().events_dropped;
    let started_boottime = headroomd::probes::boottime_ns();

    let mut reader = spawn_in(&[&limited], &format!("cat '{}'", file.path().display()));
    // Drained while the reader runs (as the collector does), so the ring buffer never fills.
    let mut events = Vec::new();
    let status = loop {
        probes.drain_events(|e| events.push(e));
        if let Some(status) = reader.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    probes.drain_events(|e| events.push(e));
    let drained_boottime = headroomd::probes::boottime_ns();
    assert!(status.success(), "reader failed: {status:?}");
    let file_again = cold_file(8);
    let sibling_reader = spawn_in(&[&sibling], &format!("cat '{}'", file_again.path().display()));
    assert!(sibling_reader.wait_with_output().unwrap().status.success());

    let after = probes.read_stats().unwrap();
    let limited_key = CgroupKey::new(memory.id, limited.id());
    let ours = after.get(&limited_key).copied().unwrap_or(CgroupStats::ZERO);
    // Every stall the counters saw was pushed as an event, with its duration, stamped within
    // the run on CLOCK_BOOTTIME.
    let earlier = before.get(&limited_key).copied().unwrap_or(CgroupStats::ZERO);
    let stalls: Vec<_> = events
        .iter()
        .filter(|e| e.cgroup == limited_key && e.kind == EventKind::MemcgReclaimStall as u32)
        .collect();
    let pushed_ns: u64 = stalls.iter().map(|e| e.duration_ns).sum();
    figure(
        "memcg_reclaim",
        "pushed stall events vs reclaim episodes",
        stalls.len(),
        ours.memcg_reclaim_episodes - earlier.memcg_reclaim_episodes,
        "exact",
    );
    assert_eq!(
        probes.health().unwrap().events_dropped,
        dropped_before,
        "no event was lost"
    );
    assert_eq!(
        stalls.len() as u64,
        ours.memcg_reclaim_episodes - earlier.memcg_reclaim_episodes,
        "one pushed stall per reclaim episode"
    );
    assert_eq!(
        pushed_ns,
        ours.memcg_reclaim_stall_ns - earlier.memcg_reclaim_stall_ns,
        "the stalls' durations add up to the stall counter"
    );
    assert!(
        stalls.iter().all(|e| {
            (started_boottime..=drained_boottime).contains(&e.timestamp_ns) && e.duration_ns > 0
        })
    );
    eprintln!(
        "memcg reclaim: {} episodes, {} ns stalled",
        ours.memcg_reclaim_episodes, ours.memcg_reclaim_stall_ns
    );
    // v2 counts the pages reclaim scanned and took back per cgroup (v1 has no such counters):
    // reclaim the probes saw must be reclaim the kernel did, in this cgroup.
    if let (Some(pgscan), Some(pgsteal)) = (limited.memory_stat("pgscan"), limited.memory_stat("pgsteal")) {
        figure(
            "memcg_reclaim",
            "reclaim episodes (kernel: memory.stat pgscan/pgsteal pages)",
            ours.memcg_reclaim_episodes,
            format!("{pgscan}/{pgsteal}"),
            "both >0",
        );
        assert!(
            pgsteal > 0 && pgscan >= pgsteal,
            "memory.stat pgscan {pgscan} pgsteal {pgsteal}"
        );
        let sibling_steal = sibling.memory_stat("pgsteal").unwrap_or(0);
        assert_eq!(sibling_steal, 0, "the unlimited sibling was not reclaimed from");
    } else {
        figure(
            "memcg_reclaim",
            "reclaim episodes (v1: no per-cgroup pgscan)",
            ours.memcg_reclaim_episodes,
            "-",
            ">0",
        );
    }
    figure(
        "memcg_reclaim",
        "reclaim stall ms",
        ours.memcg_reclaim_stall_ns / 1_000_000,
        "-",
        ">0",
    );
    assert!(
        ours.memcg_reclaim_episodes > 0,
        "reading 200 MiB through a 32 MiB cgroup reclaims"
    );
    assert!(ours.memcg_reclaim_stall_ns > 0);
    let sibling_stats = after
        .get(&CgroupKey::new(memory.id, sibling.id()))
        .copied()
        .unwrap_or(CgroupStats::ZERO);
    assert_eq!(
        sibling_stats.memcg_reclaim_episodes, 0,
        "the unlimited sibling never hits its limit"
    );
    // Nothing else on the machine was charged with this reclaim.
    for (key, stats) in &after {
        let earlier = before.get(key).map_or(0, |s| s.memcg_reclaim_episodes);
        if *key != limited_key && key.hierarchy_id == memory.id {
            assert_eq!(
                stats.memcg_reclaim_episodes, earlier,
                "memcg reclaim wrongly attributed to {key:?}"
            );
        }
    }
    passed("memcg_reclaim");
}

/// A `/proc/meminfo` field in MiB.
fn meminfo_mib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/meminfo"));
    kib / 1024
}

/// The kswapd threads' pids.
fn kswapd_pids() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("comm")).is_ok_and(|comm| comm.starts_with("kswapd"))
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Sets the kswapd threads' nice value and CPU mask (hex), or fails naming the command.
fn set_kswapd(pids: &[String], nice: &str, mask: &str) {
    for pid in pids {
        for args in [vec!["renice", nice, "-p", pid], vec!["taskset", "-p", mask, pid]] {
            let status = std::process::Command::new(args[0])
                .args(&args[1..])
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(status.success(), "{args:?}: {status}");
        }
    }
}

/// Direct reclaim episodes the kernel counted machine-wide: every `allocstall_*` of
/// `/proc/vmstat` (one per `try_to_free_pages` that reclaimed, as the tracepoints fire).
fn allocstalls() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .filter(|line| line.starts_with("allocstall"))
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Machine-wide (direct) reclaim is charged to the cgroup of the task that had to do it: an
/// allocation larger than the free memory, in a cgroup without a limit, beside an idle
/// sibling. The probes' direct-reclaim episodes, over every cgroup, must agree with the
/// kernel's `allocstall` count.
///
/// Only the whole machine running short makes the kernel reclaim directly, so this runs in
/// `cargo xtask vm-test`'s guest (its own 2 GiB kernel, `--include-ignored`); on a shared host
/// it would push every other process into reclaim, and it refuses to start on a machine with
/// more than 4 GiB.
#[test]
#[ignore = "exhausts the machine's memory: run in the 6.1 guest by `cargo xtask vm-test`"]
fn direct_reclaim_is_attributed_to_the_allocating_cgroup() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let total = meminfo_mib("MemTotal");
    assert!(
        total <= 4096,
        "refusing to exhaust a machine of {total} MiB: this test runs in `cargo xtask vm-test`'s guest"
    );
    let Some(mut probes) = load_probes("direct_reclaim") else {
        return;
    };
    // kswapd wakes at the low watermark and the allocator reclaims itself below min: bring
    // the two together, and starve kswapd (nice 19, on the second CPU beside an allocator),
    // so that the allocations, not kswapd, do the reclaim. Put back at the end.
    let _ = std::fs::write("/proc/sys/vm/watermark_scale_factor", "1");
    let kswapd = kswapd_pids();
    assert!(!kswapd.is_empty(), "no kswapd thread in /proc");
    set_kswapd(&kswapd, "19", "2");
    let memory = probes.host.memory.clone();
    let hog = TestCgroup::create(&memory.mount, "hog");
    let idle = TestCgroup::create(&memory.mount, "idle");
    let sleeper = spawn_in(&[&idle], "sleep 600");
    let cache_mib = (meminfo_mib("MemFree") / 2).min(600) as usize;
    let file = cold_file(cache_mib);
    probes.drain_events(|_| {});
    let before = probes.read_stats().unwrap();
    let stalls_before = allocstalls();
    let dropped_before = probes.health().unwrap().events_dropped;
    let mut events = Vec::new();
    for round in 0..4 {
        // Page cache that reclaim can take back, then two allocations at once (one per vCPU,
        // faster than kswapd alone frees) past the free memory, but within the free memory
        // plus the file pages (`Cached` would count shmem, which cannot be reclaimed here).
        let mut reader = spawn_in(&[&idle], &format!("cat '{}' > /dev/null", file.path().display()));
        assert!(reader.wait().unwrap().success());
        let file_pages = meminfo_mib("Active(file)") + meminfo_mib("Inactive(file)");
        let each = (meminfo_mib("MemFree") + file_pages * 2 / 3) / 2;
        eprintln!(
            "direct reclaim round {round}: allocating 2 x {each} MiB in hog ({file_pages} MiB of file pages)"
        );
        let mut hogs: Vec<_> = (0..2)
            .map(|cpu| {
                spawn_in(
                    &[&hog],
                    &format!("taskset -c {cpu} dd if=/dev/zero of=/dev/null bs={each}M count=1 2>/dev/null"),
                )
            })
            .collect();
        while hogs.iter_mut().any(|h| h.try_wait().unwrap().is_none()) {
            probes.drain_events(|e| events.push(e));
            std::thread::sleep(Duration::from_millis(5));
        }
        for mut h in hogs {
            let status = h.wait().unwrap();
            assert!(status.success(), "the allocation was not OOM-killed: {status:?}");
        }
    }
    probes.drain_events(|e| events.push(e));
    let kernel = allocstalls() - stalls_before;
    set_kswapd(&kswapd, "0", "ffffffff");
    stop(sleeper);
    let after = probes.read_stats().unwrap();
    let episodes = |key: &CgroupKey| {
        let now = after.get(key).map_or(0, |s| s.direct_reclaim_episodes);
        now - before.get(key).map_or(0, |s| s.direct_reclaim_episodes)
    };
    let hog_key = CgroupKey::new(memory.id, hog.id());
    let idle_key = CgroupKey::new(memory.id, idle.id());
    let ours: u64 = after.keys().map(episodes).sum();
    let in_hog = episodes(&hog_key);
    let stall_ns = after.get(&hog_key).map_or(0, |s| s.direct_reclaim_stall_ns);
    let pushed = events
        .iter()
        .filter(|e| e.cgroup == hog_key && e.kind == EventKind::DirectReclaimStall as u32)
        .count() as u64;
    eprintln!(
        "direct reclaim: probes {ours} episodes ({in_hog} in hog, {} ms stalled) vs allocstall {kernel}",
        stall_ns / 1_000_000
    );
    figure(
        "direct_reclaim",
        "direct reclaim episodes, every cgroup, vs /proc/vmstat allocstall",
        ours,
        kernel,
        "5%",
    );
    figure(
        "direct_reclaim",
        "direct reclaim episodes in the allocating cgroup / idle sibling",
        format!("{in_hog}/{}", episodes(&idle_key)),
        "-",
        ">0/0",
    );
    assert!(
        kernel > 0,
        "the kernel did no direct reclaim: the test did not make the pressure it needs"
    );
    assert!(
        within(ours as f64, kernel as f64, 0.05),
        "probes' direct reclaim episodes {ours} not within 5% of allocstall {kernel}"
    );
    assert!(in_hog > 0, "the allocating cgroup did the reclaim");
    assert!(stall_ns > 0);
    assert_eq!(episodes(&idle_key), 0, "the idle sibling never reclaimed");
    assert_eq!(
        probes.health().unwrap().events_dropped,
        dropped_before,
        "no event was lost"
    );
    assert_eq!(
        pushed, in_hog,
        "one pushed stall per episode in the allocating cgroup"
    );
    passed("direct_reclaim");
}

#[test]
fn oom_kill_is_reported_with_pid_and_cgroup() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("oom_kill") else {
        return;
    };
    let memory = probes.host.memory.clone();
    let small = TestCgroup::create(&memory.mount, "oom");
    small.set_memory_limit(16 << 20);
    // dd allocates and touches one 64 MiB buffer: the OOM killer must pick it.
    let child = spawn_in(&[&small], "dd if=/dev/zero of=/dev/null bs=64M count=4");
    let pid = child.id();
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(status.signal(), Some(9), "dd was OOM-killed: {status:?}");

    let key = CgroupKey::new(memory.id, small.id());
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut victims = Vec::new();
    while victims.is_empty() && Instant::now() < deadline {
        probes.drain_events(|event| {
            if event.kind == EventKind::OomKill as u32 {
                victims.push(event);
            }
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    let victim = victims
        .iter()
        .find(|v| v.pid == pid)
        .unwrap_or_else(|| panic!("no OOM event for pid {pid}: {victims:?}"));
    assert_eq!(victim.cgroup, key, "the victim's memory cgroup");
    assert!(
        victim.comm.starts_with(b"dd"),
        "comm {:?}",
        String::from_utf8_lossy(&victim.comm)
    );
    let ours = stats_of(&mut probes, key).oom_kills;
    let kernel = small.oom_kills();
    let file = if small.is_v2() {
        "memory.events"
    } else {
        "memory.oom_control"
    };
    figure(
        "oom_kill",
        &format!("OOM kills vs {file} oom_kill"),
        ours,
        kernel,
        "exact",
    );
    assert_eq!(ours, 1);
    assert_eq!(kernel, 1, "the kernel counted one OOM kill in the cgroup");
    passed("oom_kill");
}

/// A copy of this kernel's BTF in which the members named `field` are renamed (`#` for its
/// last letter, which no C name holds): a kernel whose BTF lacks that field, with every type
/// id unchanged, so that the other programs still attach to the real kernel's tracepoints.
fn btf_without(field: &str) -> tempfile::NamedTempFile {
    let mut bytes = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    let needle = format!("\0{field}\0").into_bytes();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap_or_else(|| panic!("`{field}` in this kernel's BTF strings"));
    bytes[at + needle.len() - 2] = b'#';
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&bytes).unwrap();
    file
}

/// The programs refused with this BTF, each with its reason.
fn refused_programs(probes: &Probes) -> Vec<(&'static str, String)> {
    probes
        .programs
        .iter()
        .filter_map(|p| Some((p.program, p.error.clone()?)))
        .collect()
}

#[test]
fn a_field_missing_from_btf_refuses_only_the_programs_that_read_it() {
    let test = "btf_missing_field";
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    if skip_reason(test).is_some() {
        return;
    }
    // Only the cgroup mkdir/rmdir programs read `cgroup_root.hierarchy_id`.
    let btf = btf_without("hierarchy_id");
    let options = ProbeOptions {
        btf_path: btf.path().to_path_buf(),
        ..ProbeOptions::default()
    };
    let probes = Probes::load(&options).unwrap_or_else(|e| panic!("{test}: the others must load: {e}"));
    let refused = refused_programs(&probes);
    let names: Vec<_> = refused.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["cgroup_mkdir", "cgroup_rmdir"], "{refused:?}");
    for (program, why) in &refused {
        assert_eq!(
            why, "refused: kernel BTF has no field `hierarchy_id` in `struct cgroup_root`",
            "{program}"
        );
    }
    let attached = probes.programs.iter().filter(|p| p.error.is_none()).count();
    assert!(
        attached >= 7,
        "the other programs attached: {:?}",
        probes.programs
    );
    figure(
        test,
        "programs refused for a missing BTF field / attached",
        format!("{}/{attached}", refused.len()),
        "-",
        "only the readers of the field",
    );
    // A field every task-reading program needs: they are all refused, and so is the whole
    // load when nothing is left to attach — with the field named.
    let btf = btf_without("dfl_cgrp");
    let options = ProbeOptions {
        btf_path: btf.path().to_path_buf(),
        ..ProbeOptions::default()
    };
    match Probes::load(&options) {
        Ok(probes) => {
            let refused = refused_programs(&probes);
            for program in ["sched_switch", "oom_mark_victim", "memcg_reclaim_end"] {
                let why = refused
                    .iter()
                    .find(|(name, _)| *name == program)
                    .unwrap_or_else(|| panic!("{program} attached without `css_set.dfl_cgrp`"));
                assert!(why.1.contains("`dfl_cgrp` in `struct css_set`"), "{why:?}");
            }
            assert!(
                refused.iter().all(|(name, _)| *name != "cgroup_mkdir"),
                "cgroup_mkdir does not read tasks: {refused:?}"
            );
        }
        Err(e) => panic!("{test}: the cgroup programs need no task field and must load: {e}"),
    }
    passed(test);
}

/// headroomd itself, given a BTF that lacks a field: it serves, and its log names the field
/// and the programs it refused.
#[test]
fn headroomd_serves_with_a_btf_that_lacks_a_field() {
    let test = "btf_missing_field_serves";
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    if skip_reason(test).is_some() {
        return;
    }
    let btf = btf_without("hierarchy_id");
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("headroomd.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_headroomd"))
        .arg("serve")
        .args(["--probes", "required", "--metrics-listen", ""])
        .args(["--allocatable-cpu", "2", "--allocatable-memory", "1Gi"])
        .arg("--btf")
        .arg(btf.path())
        .arg("--socket")
        .arg(&socket)
        .arg("--intent-dir")
        .arg(tmp.path().join("intents"))
        .arg("--actuation")
        .arg("off")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let served = loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("headroomd exited ({status}):\n{err}");
        }
        let answer = socket.exists().then(|| {
            runtime.block_on(async {
                let mut c = headroom_client::headroom_client(&socket).await?;
                c.get_headroom(headroom_proto::v1::GetHeadroomRequest::default())
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(anyhow::Error::from)
            })
        });
        match answer {
            Some(Ok(snapshot)) => break snapshot,
            _ if Instant::now() > deadline => panic!("headroomd did not serve within 30 s: {answer:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    drop(runtime);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(served.node.unwrap().cpu_millis.unwrap().allocatable, 2000);
    for program in ["cgroup_mkdir", "cgroup_rmdir"] {
        assert!(
            err.lines().any(|l| l.contains(program)
                && l.contains("kernel BTF has no field `hierarchy_id` in `struct cgroup_root`")),
            "the log names {program} and the field:\n{err}"
        );
    }
    assert!(status.success(), "clean shutdown on SIGTERM: {status}\n{err}");
    passed(test);
}

#[test]
fn every_probe_attaches_on_this_kernel() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(probes) = load_probes("every_probe_attaches") else {
        return;
    };
    let failed: Vec<_> = probes.programs.iter().filter(|p| p.error.is_some()).collect();
    assert!(failed.is_empty(), "probes that did not attach: {failed:?}");
    assert_eq!(
        probes.health().unwrap().read_failures,
        0,
        "no pointer chain broke"
    );
    passed("every_probe_attaches");
}

/// The per-cgroup maps take the size asked for, and their kernel memory (fdinfo `memlock`, the
/// kernel's own accounting) grows with cgroups times CPUs: each added cgroup costs at least
/// one `CgroupStats` and one `RunqSlot` value on every possible CPU.
#[test]
fn maps_are_sized_at_load_and_their_memory_is_the_kernels() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "map_sizing";
    let options = |n| ProbeOptions {
        max_cgroups: Some(n),
        ..ProbeOptions::default()
    };
    // Each size loaded on its own (one set of probes at a time), its maps' kernel figures kept.
    let memory_at =
        |cgroups: u32| load_probes_with(test, &options(cgroups)).map(|probes| probes.memory.clone());
    let Some(small) = memory_at(512) else {
        return;
    };
    let Some(large) = memory_at(1024) else {
        return;
    };
    // As headroomd sizes the maps at start on a node with 500 cgroups (the target).
    let node_cgroups = headroomd::probes::MapSizing::for_cgroups(500).cgroups;
    let Some(node) = memory_at(node_cgroups) else {
        return;
    };
    let of = |memory: &[headroomd::probes::MapMemory], map: &str| {
        memory
            .iter()
            .find(|m| m.map == map)
            .unwrap_or_else(|| panic!("{map} has no kernel memory figure: {memory:?}"))
            .clone()
    };
    assert_eq!(of(&small, "CGROUP_STATS").max_entries, 512);
    assert_eq!(of(&small, "RUNQ_SLOT").max_entries, 512);
    assert_eq!(of(&large, "CGROUP_STATS").max_entries, 1024);
    assert_eq!(of(&large, "THROTTLED_SINCE").max_entries, 1024);
    assert_eq!(of(&node, "CGROUP_STATS").max_entries, node_cgroups);
    let cpus = aya::util::nr_cpus().unwrap() as u64;
    let per_cgroup_and_cpu =
        (std::mem::size_of::<CgroupStats>() + std::mem::size_of::<headroom_common::RunqSlot>()) as u64;
    let total = |memory: &[headroomd::probes::MapMemory]| memory.iter().map(|m| m.memlock).sum::<u64>();
    let growth = total(&large) - total(&small);
    for m in &node {
        record(&format!(
            "headroom-map test={test} cpus={cpus} map={} max_entries={} memlock={}",
            m.map, m.max_entries, m.memlock
        ));
    }
    record(&format!(
        "headroom-map-total test={test} cpus={cpus} bytes_512={} bytes_1024={} node_cgroups={node_cgroups} bytes_node_500={} growth_per_cgroup_and_cpu={}",
        total(&small),
        total(&large),
        total(&node),
        growth / 512 / cpus
    ));
    assert!(
        growth >= 512 * cpus * per_cgroup_and_cpu,
        "512 more cgroups cost {growth} bytes, less than their per-CPU values ({} each on {cpus} CPUs)",
        per_cgroup_and_cpu
    );
    passed(test);
}
