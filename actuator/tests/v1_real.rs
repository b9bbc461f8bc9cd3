//! Privileged tests on this host's real cgroup v1 hierarchies, with real processes.
//! Each test works in its own `/sys/fs/cgroup/{cpu,memory}/headroom-test-*` tree, removed on
//! drop (processes left inside are killed). Skips loudly when not root (see `common`).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{MOUNT, Proc, privileged, read_file};
use headroom_actuator::{
    ActuateError, Actuator, ActuatorConfig, CgroupVersion, ConversionConfig, KubeResources, PodCgroups,
    Recovery, ResizeRequest, ScratchRoots, convert,
};
use headroom_cgroupfs::CgroupDirs;

const CONTAINERS: [&str; 3] = ["app", "sidecar", "logger"];
const MIB: u64 = 1 << 20;

struct Setup {
    // Field order = drop order: actuator and pod handles first, the scratch tree last.
    actuator: Actuator,
    pod: PodCgroups,
    _intents: tempfile::TempDir,
    scratch: ScratchRoots,
}

fn resources(cpu: u64, limit: u64, mem: u64) -> KubeResources {
    KubeResources {
        cpu_request_milli: cpu,
        cpu_limit_milli: Some(limit),
        memory_limit_bytes: Some(mem),
    }
}

fn request(uid: &str, per_container: [KubeResources; 3]) -> ResizeRequest {
    ResizeRequest {
        pod_uid: uid.into(),
        containers: CONTAINERS
            .iter()
            .zip(per_container)
            .map(|(c, r)| ((*c).to_owned(), r))
            .collect(),
        pod: None,
    }
}

fn setup(initial: [KubeResources; 3]) -> Setup {
    let scratch = ScratchRoots::create_v1(Path::new(MOUNT), "headroom-test").unwrap();
    let uid = "3f2b6c1d-0000-4000-8000-00000000test";
    let req = request(uid, initial);
    let values = convert::pod_values(
        &req.containers,
        None,
        CgroupVersion::V1,
        &ConversionConfig::default(),
    );
    let pod = PodCgroups::create(scratch.roots(), uid, &CONTAINERS, Some(&values)).unwrap();
    let intents = tempfile::tempdir().unwrap();
    let actuator = Actuator::new(ActuatorConfig::new(
        scratch.roots().clone(),
        intents.path().to_path_buf(),
    ))
    .unwrap();
    Setup {
        actuator,
        pod,
        _intents: intents,
        scratch,
    }
}

fn cpu_dir(pod: &PodCgroups, container: Option<&str>) -> PathBuf {
    let dirs = match container {
        Some(c) => pod.container_dirs(c).unwrap(),
        None => pod.pod_dirs().unwrap(),
    };
    match dirs {
        CgroupDirs::V1 { cpu, .. } => cpu,
        CgroupDirs::V2 { dir } => dir,
    }
}

fn mem_dir(pod: &PodCgroups, container: Option<&str>) -> PathBuf {
    let dirs = match container {
        Some(c) => pod.container_dirs(c).unwrap(),
        None => pod.pod_dirs().unwrap(),
    };
    match dirs {
        CgroupDirs::V1 { memory, .. } => memory,
        CgroupDirs::V2 { dir } => dir,
    }
}

/// `(shares, quota, memory limit)` as the kernel reports them, Pod first.
fn kernel_values(pod: &PodCgroups) -> Vec<(String, String, String)> {
    std::iter::once(None)
        .chain(CONTAINERS.iter().map(|c| Some(*c)))
        .map(|c| {
            (
                read_file(&cpu_dir(pod, c).join("cpu.shares")),
                read_file(&cpu_dir(pod, c).join("cpu.cfs_quota_us")),
                read_file(&mem_dir(pod, c).join("memory.limit_in_bytes")),
            )
        })
        .collect()
}

fn row(shares: u64, quota: u64, mem: u64) -> (String, String, String) {
    (shares.to_string(), quota.to_string(), mem.to_string())
}

#[test]
fn grow_and_shrink_a_three_container_pod() {
    if !privileged("grow_and_shrink_a_three_container_pod") {
        return;
    }
    let small = [
        resources(250, 500, 64 * MIB),
        resources(100, 200, 32 * MIB),
        resources(100, 100, 16 * MIB),
    ];
    let big = [
        resources(1000, 2000, 256 * MIB),
        resources(500, 1000, 128 * MIB),
        resources(200, 400, 64 * MIB),
    ];
    let mut s = setup(small);
    let uid = s.pod.uid().to_owned();
    let small_rows = vec![
        row(460, 80_000, 112 * MIB),
        row(256, 50_000, 64 * MIB),
        row(102, 20_000, 32 * MIB),
        row(102, 10_000, 16 * MIB),
    ];
    assert_eq!(
        kernel_values(&s.pod),
        small_rows,
        "initial values from PodCgroups::create"
    );

    let report = s.actuator.resize(&request(&uid, big), Instant::now()).unwrap();
    assert_eq!(report.writes, 12);
    assert_eq!(
        kernel_values(&s.pod),
        vec![
            row(1740, 340_000, 448 * MIB),
            row(1024, 200_000, 256 * MIB),
            row(512, 100_000, 128 * MIB),
            row(204, 40_000, 64 * MIB),
        ]
    );
    let l = report.latency;
    assert!(l.planned_ns <= l.first_write_ns.unwrap());
    assert!(l.first_write_ns <= l.last_write_ns && l.last_write_ns.unwrap() <= l.verified_ns);

    // Shrink back: on v1 the kernel itself refuses a child quota above its parent's
    // (`tg_cfs_schedulable_down`), so a wrong order would fail here with EINVAL.
    s.actuator.resize(&request(&uid, small), Instant::now()).unwrap();
    assert_eq!(kernel_values(&s.pod), small_rows);
    // A non-page-aligned memory limit reads back rounded down; verification accepts that.
    let odd = [resources(250, 500, 64 * MIB + 1234), small[1], small[2]];
    s.actuator.resize(&request(&uid, odd), Instant::now()).unwrap();
    assert_eq!(
        read_file(&mem_dir(&s.pod, Some("app")).join("memory.limit_in_bytes")),
        (64 * MIB).to_string()
    );
    s.pod.remove().unwrap();
    assert!(!cpu_dir(&s.pod, None).exists());
    drop(s.scratch);
}

#[test]
fn kernel_enforces_the_order_the_plan_follows() {
    if !privileged("kernel_enforces_the_order_the_plan_follows") {
        return;
    }
    let s = setup([resources(100, 100, 16 * MIB); 3]);
    // Raising a container's quota above its Pod's without raising the Pod first: EINVAL.
    let quota = cpu_dir(&s.pod, Some("app")).join("cpu.cfs_quota_us");
    let err = std::fs::write(&quota, "500000").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
}

fn nr_throttled(dir: &Path) -> u64 {
    read_file(&dir.join("cpu.stat"))
        .lines()
        .find_map(|l| l.strip_prefix("nr_throttled ").and_then(|v| v.parse().ok()))
        .unwrap()
}

fn throttles_during(dir: &Path, window: Duration) -> u64 {
    let before = nr_throttled(dir);
    std::thread::sleep(window);
    nr_throttled(dir) - before
}

#[test]
fn busy_loop_throttling_follows_the_quota() {
    if !privileged("busy_loop_throttling_follows_the_quota") {
        return;
    }
    let tight = [
        resources(100, 100, 64 * MIB),
        resources(100, 100, 32 * MIB),
        resources(100, 100, 32 * MIB),
    ];
    let mut s = setup(tight);
    let uid = s.pod.uid().to_owned();
    let busy = Proc::sh("while :; do :; done");
    s.pod.add_process("app", busy.pid()).unwrap();
    let app = cpu_dir(&s.pod, Some("app"));
    let window = Duration::from_millis(800);

    // 10 ms per 100 ms period: a busy loop is throttled in (nearly) every period.
    std::thread::sleep(Duration::from_millis(200));
    let tight_throttles = throttles_during(&app, window);
    assert!(
        tight_throttles >= 4,
        "expected throttling at 100m, saw {tight_throttles} in {window:?}"
    );

    // 1.5 CPU for a single thread: never throttled.
    let received = Instant::now();
    let mut report = s
        .actuator
        .resize(
            &request(&uid, [resources(1000, 1500, 64 * MIB), tight[1], tight[2]]),
            received,
        )
        .unwrap();
    let effective = s
        .actuator
        .wait_effective(&mut report, received, Duration::from_secs(2))
        .unwrap();
    let effective = effective.expect("a busy Pod starts a new CFS period within 2 s");
    assert!(effective >= Duration::from_nanos(report.latency.verified_ns));
    eprintln!("latency: {:?}, effective after {effective:?}", report.latency);
    std::thread::sleep(Duration::from_millis(200));
    let loose_throttles = throttles_during(&app, window);
    assert!(
        loose_throttles <= 1,
        "expected no throttling at 1500m, saw {loose_throttles} in {window:?}"
    );

    // And back down: throttled again.
    s.actuator.resize(&request(&uid, tight), Instant::now()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let again = throttles_during(&app, window);
    assert!(again >= 4, "expected throttling after shrinking, saw {again}");
}

fn wait_for_usage(dir: &Path, bytes: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let usage: u64 = read_file(&dir.join("memory.usage_in_bytes")).parse().unwrap();
        if usage >= bytes || Instant::now() > deadline {
            return usage;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn memory_shrink_below_usage_is_refused_and_nothing_changes() {
    if !privileged("memory_shrink_below_usage_is_refused_and_nothing_changes") {
        return;
    }
    let start = [
        resources(500, 1000, 256 * MIB),
        resources(100, 200, 64 * MIB),
        resources(100, 200, 64 * MIB),
    ];
    let mut s = setup(start);
    let uid = s.pod.uid().to_owned();
    // The shell joins the cgroup before stress-ng starts, so its memory is charged there.
    let hog = Proc::sh("sleep 0.3; exec stress-ng --vm 1 --vm-bytes 96M --vm-keep --timeout 120 --quiet");
    s.pod.add_process("app", hog.pid()).unwrap();
    let usage = wait_for_usage(&mem_dir(&s.pod, Some("app")), 80 * MIB);
    assert!(usage >= 80 * MIB, "stress-ng did not allocate: usage {usage}");

    let before = kernel_values(&s.pod);
    // CPU grows, app's memory shrinks below its usage: the whole resize is refused.
    let shrink = [
        resources(1000, 2000, 32 * MIB),
        resources(200, 400, 64 * MIB),
        resources(200, 400, 64 * MIB),
    ];
    let err = s
        .actuator
        .resize(&request(&uid, shrink), Instant::now())
        .unwrap_err();
    assert!(
        matches!(err, ActuateError::MemoryBelowUsage { limit, .. } if limit == 32 * MIB),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("app/memory.limit_in_bytes") && msg.contains("nothing was written"),
        "{msg}"
    );
    assert_eq!(kernel_values(&s.pod), before, "every value must be unchanged");
    assert!(
        hog.0.id() > 0 && Path::new(&format!("/proc/{}", hog.pid())).exists(),
        "nothing was OOM-killed"
    );

    // Above usage it goes through.
    let ok = [resources(1000, 2000, 200 * MIB), shrink[1], shrink[2]];
    s.actuator.resize(&request(&uid, ok), Instant::now()).unwrap();
    assert_eq!(
        read_file(&mem_dir(&s.pod, Some("app")).join("memory.limit_in_bytes")),
        (200 * MIB).to_string()
    );
}

#[test]
fn remove_reports_busy_while_tasks_remain() {
    if !privileged("remove_reports_busy_while_tasks_remain") {
        return;
    }
    let s = setup([resources(100, 100, 16 * MIB); 3]);
    let sleeper = Proc::sh("sleep 60");
    s.pod.add_process("logger", sleeper.pid()).unwrap();
    assert_eq!(s.pod.pids().unwrap(), vec![sleeper.pid()]);
    let err = s.pod.remove().unwrap_err();
    assert!(err.to_string().contains("still has processes"), "{err}");
    drop(sleeper);
    s.pod.remove().unwrap();
    assert!(!mem_dir(&s.pod, None).exists());
}

// === Crash test ===
//
// The parent re-executes this test binary, running only `crash_child` with the environment
// below; the child resizes with a hook that pauses forever after `CRASH_AFTER` writes, and the
// parent SIGKILLs it there. A fresh actuator then recovers from the intent record.

const ENV_ROOTS: &str = "HEADROOM_TEST_CRASH_ROOTS";
const ENV_INTENTS: &str = "HEADROOM_TEST_CRASH_INTENTS";
const ENV_MARKER: &str = "HEADROOM_TEST_CRASH_MARKER";
const CRASH_AFTER: usize = 5;
const CRASH_UID: &str = "3f2b6c1d-0000-4000-8000-00000000test";

fn crash_small() -> [KubeResources; 3] {
    [
        resources(250, 500, 64 * MIB),
        resources(100, 200, 32 * MIB),
        resources(100, 100, 16 * MIB),
    ]
}

fn crash_big() -> [KubeResources; 3] {
    [
        resources(1000, 2000, 256 * MIB),
        resources(500, 1000, 128 * MIB),
        resources(200, 400, 64 * MIB),
    ]
}

/// Not a test on its own: does nothing unless the parent below set the environment.
#[test]
fn crash_child() {
    let (Ok(roots), Ok(intents), Ok(marker)) = (
        std::env::var(ENV_ROOTS),
        std::env::var(ENV_INTENTS),
        std::env::var(ENV_MARKER),
    ) else {
        return;
    };
    let roots = serde_json::from_str(&roots).unwrap();
    let mut a = Actuator::new(ActuatorConfig::new(roots, intents.into())).unwrap();
    a.set_after_write_hook(Some(Box::new(move |n| {
        if n == CRASH_AFTER {
            std::fs::write(&marker, n.to_string()).unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    })));
    let _ = a.resize(&request(CRASH_UID, crash_big()), Instant::now());
    panic!("the parent should have killed us after {CRASH_AFTER} writes");
}

#[test]
fn crash_between_writes_then_recover() {
    if !privileged("crash_between_writes_then_recover") {
        return;
    }
    let s = setup(crash_small());
    // The child's actuator is the only one on these roots and records (the lock refuses two).
    drop(s.actuator);
    let small_state = kernel_values(&s.pod);
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("paused");
    let intents = s._intents.path().to_path_buf();
    let roots = serde_json::to_string(s.scratch.roots()).unwrap();
    // SIGKILL between write 5 and write 6.
    common::sigkill_when_paused(
        "crash_child",
        &[
            (ENV_ROOTS, std::ffi::OsStr::new(&roots)),
            (ENV_INTENTS, intents.as_os_str()),
            (ENV_MARKER, marker.as_os_str()),
        ],
        &marker,
    );

    let torn = kernel_values(&s.pod);
    assert_ne!(torn, small_state, "some writes happened");
    // Write 5 of the grow plan is the Pod's cpu.shares: the containers' CPU is still small.
    assert_eq!(torn[1].1, small_state[1].1, "app's quota not yet written");

    let mut a = Actuator::new(ActuatorConfig::new(s.scratch.roots().clone(), intents)).unwrap();
    let done = a.recover().unwrap();
    assert_eq!(
        done,
        vec![Recovery::Completed {
            pod_uid: CRASH_UID.into(),
            writes: 12
        }]
    );
    assert_eq!(
        kernel_values(&s.pod),
        vec![
            row(1740, 340_000, 448 * MIB),
            row(1024, 200_000, 256 * MIB),
            row(512, 100_000, 128 * MIB),
            row(204, 40_000, 64 * MIB),
        ]
    );
    assert!(a.recover().unwrap().is_empty());
}
