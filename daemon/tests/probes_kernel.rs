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
use support::{KERNEL, TestCgroup, skip_reason, spawn_in, stop};

fn load_probes(test: &str) -> Option<Probes> {
    if skip_reason(test).is_some() {
        return None;
    }
    match Probes::load(&ProbeOptions::default()) {
        Ok(probes) => Some(probes),
        Err(ProbeError::NotBuilt) if std::env::var_os("HEADROOM_REQUIRE_PRIVILEGED").is_none() => {
            eprintln!("SKIPPED {test}: probes not built (run `cargo xtask build-ebpf`)");
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

fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= expected * tolerance
}

#[test]
fn throttling_matches_cpu_stat_and_spares_the_unthrottled_sibling() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("throttling_matches_cpu_stat") else {
        return;
    };
    let cpu = probes.host.cpu.clone();
    let throttled = TestCgroup::create(&cpu.mount, "throttled");
    let sibling = TestCgroup::create(&cpu.mount, "unthrottled");
    // 10% quota at the default 100 ms period. The kernel's `nr_throttled` counts throttled
    // *periods*; with a 10 ms quota (twice the 5 ms bandwidth slice) each episode lasts one
    // period, so episodes and periods agree. (With a quota below the slice, one episode can
    // span several periods while the cgroup repays overrun runtime: then they differ.)
    throttled.write("cpu.cfs_period_us", "100000");
    throttled.write("cpu.cfs_quota_us", "10000");
    assert_eq!(throttled.stat("cpu.stat", "nr_throttled "), 0);

    let busy = spawn_in(&[&throttled], "sh -c 'while :; do :; done'");
    let free = spawn_in(&[&sibling], "sh -c 'while :; do :; done'");
    // About 60 episodes: a window edge can cut one, which stays within 5%.
    std::thread::sleep(Duration::from_secs(6));
    let busy_status = stop(busy);
    stop(free);
    // One more period, so the kernel's period timer books the last episode too.
    std::thread::sleep(Duration::from_millis(250));
    assert!(
        busy_status.signal().is_some(),
        "the busy loop ran until killed: {busy_status:?}"
    );

    let kernel_episodes = throttled.stat("cpu.stat", "nr_throttled ") as f64;
    let kernel_ns = throttled.stat("cpu.stat", "throttled_time ") as f64;
    let ours = stats_of(&mut probes, CgroupKey::new(cpu.id, throttled.id()));
    let theirs = stats_of(&mut probes, CgroupKey::new(cpu.id, sibling.id()));
    eprintln!(
        "episodes: probes {} vs cpu.stat {kernel_episodes}; throttled: probes {} ns vs cpu.stat {kernel_ns} ns",
        ours.throttle_episodes, ours.throttled_ns
    );
    assert!(
        kernel_episodes > 40.0,
        "the quota throttled the loop ({kernel_episodes} episodes)"
    );
    assert!(
        within(ours.throttle_episodes as f64, kernel_episodes, 0.05),
        "throttle episodes {} not within 5% of nr_throttled {kernel_episodes}",
        ours.throttle_episodes
    );
    assert!(
        within(ours.throttled_ns as f64, kernel_ns, 0.10),
        "throttled time {} ns not within 10% of throttled_time {kernel_ns} ns",
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
}

/// `run_delay` (ns spent waiting on a run queue) from `/proc/<pid>/schedstat`.
fn run_delay_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn runq_latency_matches_the_schedulers_run_delay() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("runq_latency_matches_run_delay") else {
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
    let Some(mut probes) = load_probes("memcg_reclaim_is_attributed") else {
        return;
    };
    let memory = probes.host.memory.clone();
    let limited = TestCgroup::create(&memory.mount, "limited");
    let sibling = TestCgroup::create(&memory.mount, "unlimited");
    limited.write("memory.limit_in_bytes", &(32u64 << 20).to_string());
    let file = cold_file(200);
    let before = probes.read_stats().unwrap();

    let reader = spawn_in(&[&limited], &format!("cat '{}'", file.path().display()));
    let output = reader.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "reader failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file_again = cold_file(8);
    let sibling_reader = spawn_in(&[&sibling], &format!("cat '{}'", file_again.path().display()));
    assert!(sibling_reader.wait_with_output().unwrap().status.success());

    let after = probes.read_stats().unwrap();
    let limited_key = CgroupKey::new(memory.id, limited.id());
    let ours = after.get(&limited_key).copied().unwrap_or(CgroupStats::ZERO);
    eprintln!(
        "memcg reclaim: {} episodes, {} ns stalled",
        ours.memcg_reclaim_episodes, ours.memcg_reclaim_stall_ns
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
}

#[test]
fn oom_kill_is_reported_with_pid_and_cgroup() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut probes) = load_probes("oom_kill_is_reported") else {
        return;
    };
    let memory = probes.host.memory.clone();
    let small = TestCgroup::create(&memory.mount, "oom");
    small.write("memory.limit_in_bytes", &(16u64 << 20).to_string());
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
    assert_eq!(stats_of(&mut probes, key).oom_kills, 1);
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
}
