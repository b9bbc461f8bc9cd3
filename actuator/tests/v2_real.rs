//! The actuator on a real, pure cgroup v2 hierarchy: the kernel's own `cpu.max`, `cpu.weight`
//! and `memory.max` files, with real processes charged to them.
//!
//! This host is cgroup v1 hybrid, so these run in the qemu guest of `cargo xtask vm-test`
//! (Debian's 6.1 kernel, pure v2), which sets `HEADROOM_REQUIRE_CGROUP_V2=1`: there a skip
//! is a failure. Elsewhere they report SKIPPED with the reason.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{MOUNT, Proc, read_file};
use headroom_actuator::{
    ActuateError, Actuator, ActuatorConfig, CgroupSetup, ConversionConfig, PodCgroups, Recovery,
    ResizeRequest, Roots, WeightFormula, detect_setup,
};

const UID: &str = "7c1e0b2a-0000-4000-8000-0000v2real00";
const CONTAINERS: [&str; 3] = ["app", "sidecar", "logger"];
const MIB: u64 = 1 << 20;

/// Whether this machine has a pure cgroup v2 hierarchy with the cpu and memory controllers
/// available to children of the root.
fn pure_v2(test: &str) -> bool {
    let reason = headroom_testkit::gate::not_root().or_else(|| match detect_setup(Path::new(MOUNT)) {
        Ok(CgroupSetup::Unified) => {
            let enabled =
                std::fs::read_to_string(Path::new(MOUNT).join("cgroup.subtree_control")).unwrap_or_default();
            let words: Vec<&str> = enabled.split_whitespace().collect();
            (!words.contains(&"cpu") || !words.contains(&"memory"))
                .then(|| format!("{MOUNT}/cgroup.subtree_control lacks cpu or memory: {enabled:?}"))
        }
        Ok(other) => Some(format!(
            "{other:?} cgroups, not pure v2 (these run in `cargo xtask vm-test`'s guest)"
        )),
        Err(e) => Some(format!("no cgroup mount: {e}")),
    });
    headroom_testkit::gate::pure_cgroup_v2(test, reason)
}

/// The test's root (`/sys/fs/cgroup/headroom-v2-test-<pid>-<name>`) and the Pod below it;
/// removed on drop, processes inside killed first.
struct Scratch {
    pod: PodCgroups,
    root: PathBuf,
    /// `None` once a test hands the root to another process (the root lock admits one).
    actuator: Option<Actuator>,
    _intents: tempfile::TempDir,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let pod = self.root.join(format!("pod{UID}"));
        let mut dirs: Vec<PathBuf> = CONTAINERS.iter().map(|c| pod.join(c)).collect();
        dirs.insert(0, pod);
        for dir in &dirs {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
        let _ = self.pod.remove();
        let deadline = Instant::now() + Duration::from_secs(5);
        for dir in dirs.iter().rev().chain(std::iter::once(&self.root)) {
            while dir.exists() && std::fs::remove_dir(dir).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Scratch {
    fn actuator(&mut self) -> &mut Actuator {
        self.actuator.as_mut().expect("this test's actuator")
    }
}

fn scratch(name: &str) -> Scratch {
    let root = Path::new(MOUNT).join(format!("headroom-v2-test-{}-{name}", std::process::id()));
    let roots = Roots::V2 { dir: root.clone() };
    let pod = PodCgroups::create(&roots, UID, &CONTAINERS, None).unwrap();
    let intents = tempfile::tempdir().unwrap();
    Scratch {
        pod,
        actuator: Some(actuator_on(&root, intents.path())),
        root,
        _intents: intents,
    }
}

/// An actuator on the v2 root `root` with its intent records in `intents`.
fn actuator_on(root: &Path, intents: &Path) -> Actuator {
    let mut config = ActuatorConfig::new(
        Roots::V2 {
            dir: root.to_path_buf(),
        },
        intents.to_path_buf(),
    );
    // runc's quadratic weight for containers, as in `v2_tree.rs`.
    config.conversion = ConversionConfig {
        container_weight: WeightFormula::Quadratic,
        ..ConversionConfig::default()
    };
    Actuator::new(config).unwrap()
}

fn request(cpu_milli: u64, limit_milli: u64, mem: u64) -> ResizeRequest {
    common::uniform_request(UID, &CONTAINERS, cpu_milli, limit_milli, mem)
}

fn value(s: &Scratch, rel: &str) -> String {
    read_file(&s.root.join(format!("pod{UID}")).join(rel))
}

#[test]
fn v2_real_files_take_the_kubernetes_values_grow_and_shrink() {
    if !pure_v2("v2_real_files_take_the_kubernetes_values_grow_and_shrink") {
        return;
    }
    let mut s = scratch("grow");
    let report = s
        .actuator()
        .resize(&request(1000, 1500, 256 * MIB), Instant::now())
        .unwrap();
    assert!(report.writes > 0);
    // The kernel's own files: the Pod's linear weight of 3072 shares, summed quota and memory;
    // the containers' quadratic weight of 1024 shares.
    assert_eq!(value(&s, "cpu.weight"), "118");
    assert_eq!(value(&s, "cpu.max"), "450000 100000");
    assert_eq!(value(&s, "memory.max"), (768 * MIB).to_string());
    for c in CONTAINERS {
        assert_eq!(value(&s, &format!("{c}/cpu.weight")), "100");
        assert_eq!(value(&s, &format!("{c}/cpu.max")), "150000 100000");
        assert_eq!(value(&s, &format!("{c}/memory.max")), (256 * MIB).to_string());
    }
    // Shrink: the Pod last, the kernel accepts every step.
    s.actuator()
        .resize(&request(250, 500, 64 * MIB), Instant::now())
        .unwrap();
    assert_eq!(value(&s, "cpu.max"), "150000 100000");
    assert_eq!(value(&s, "memory.max"), (192 * MIB).to_string());
    assert_eq!(value(&s, "app/cpu.max"), "50000 100000");
    // A non-page-aligned limit reads back rounded down to a page; verification accepts that.
    s.actuator()
        .resize(&request(250, 500, 64 * MIB + 1234), Instant::now())
        .unwrap();
    assert_eq!(value(&s, "app/memory.max"), (64 * MIB).to_string());
}

#[test]
fn v2_real_memory_shrink_below_usage_is_refused_untouched() {
    if !pure_v2("v2_real_memory_shrink_below_usage_is_refused_untouched") {
        return;
    }
    let mut s = scratch("usage");
    s.actuator()
        .resize(&request(1000, 2000, 256 * MIB), Instant::now())
        .unwrap();
    // 40 MiB of shmem charged to `logger`, held after the writer exits.
    let logger = s.root.join(format!("pod{UID}/logger"));
    let file = format!("/dev/shm/headroom-v2-test-{}", std::process::id());
    let _ = std::fs::create_dir_all("/dev/shm");
    let mut writer = Proc::sh(&format!(
        "echo $$ > {}/cgroup.procs && dd if=/dev/zero of={file} bs=1M count=40 2>/dev/null",
        logger.display()
    ));
    assert!(writer.0.wait().unwrap().success(), "the writer ran in logger");
    let usage: u64 = read_file(&logger.join("memory.current")).parse().unwrap();
    assert!(
        usage >= 40 * MIB,
        "logger is charged with the file ({usage} bytes)"
    );
    let before: Vec<String> = ["cpu.max", "memory.max", "logger/memory.max", "app/cpu.max"]
        .iter()
        .map(|f| value(&s, f))
        .collect();
    let err = s
        .actuator()
        .resize(&request(250, 500, 16 * MIB), Instant::now())
        .unwrap_err();
    let _ = std::fs::remove_file(&file);
    assert!(
        matches!(err, ActuateError::MemoryBelowUsage { limit, .. } if limit == 16 * MIB),
        "{err:?}"
    );
    let after: Vec<String> = ["cpu.max", "memory.max", "logger/memory.max", "app/cpu.max"]
        .iter()
        .map(|f| value(&s, f))
        .collect();
    assert_eq!(before, after, "nothing was written");
}

/// Every knob of the Pod and its containers, as the kernel reads them back now.
fn knobs(s: &Scratch) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in std::iter::once("").chain(CONTAINERS) {
        for file in ["cpu.weight", "cpu.max", "memory.max"] {
            let rel = if dir.is_empty() {
                file.to_owned()
            } else {
                format!("{dir}/{file}")
            };
            let path = s.root.join(format!("pod{UID}")).join(&rel);
            if path.exists() {
                out.push((rel, read_file(&path)));
            }
        }
    }
    out
}

/// The kernel's own refusal half-way through a grow: `logger`'s cgroup is removed (as the
/// kubelet removes a deleted container's) after the Pod's second write, so a later write fails
/// on the real cgroupfs, and every value written before it is put back.
#[test]
fn v2_real_write_failing_halfway_is_rolled_back() {
    if !pure_v2("v2_real_write_failing_halfway_is_rolled_back") {
        return;
    }
    let mut s = scratch("rollback");
    s.actuator()
        .resize(&request(250, 500, 64 * MIB), Instant::now())
        .unwrap();
    let logger = s.root.join(format!("pod{UID}/logger"));
    let before = knobs(&s);
    let doomed = logger.clone();
    s.actuator().set_after_write_hook(Some(Box::new(move |n| {
        if n == 2 {
            std::fs::remove_dir(&doomed).unwrap();
        }
    })));
    let err = s
        .actuator()
        .resize(&request(1000, 1500, 256 * MIB), Instant::now())
        .unwrap_err();
    s.actuator().set_after_write_hook(None);
    eprintln!("v2 real rollback: {err}");
    assert!(
        matches!(err, ActuateError::RolledBack { restored, .. } if restored >= 2),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("logger"),
        "the error names the file: {err}"
    );
    assert!(!logger.exists());
    let after = knobs(&s);
    let expected: Vec<_> = before
        .into_iter()
        .filter(|(rel, _)| !rel.starts_with("logger/"))
        .collect();
    assert_eq!(after, expected, "every value the kernel still has is as it was");
    assert!(
        s.actuator().intent_log_mut().pending().unwrap().is_empty(),
        "the intent record is cleared after a rollback"
    );
}

/// Paths outside the Pod's cgroup are refused on the real hierarchy too, a symlinked
/// container included, and nothing outside is written.
#[test]
fn v2_real_path_escapes_are_refused() {
    if !pure_v2("v2_real_path_escapes_are_refused") {
        return;
    }
    let mut s = scratch("confined");
    for uid in ["..", "../../etc", "a/b", "x\0y", ""] {
        let mut r = request(100, 200, 64 * MIB);
        r.pod_uid = uid.into();
        assert!(
            matches!(
                s.actuator().resize(&r, Instant::now()),
                Err(ActuateError::Path(_))
            ),
            "uid {uid:?} accepted"
        );
    }
    for name in ["..", "../pod", "/etc", "a\0"] {
        let mut r = request(100, 200, 64 * MIB);
        r.containers[1].0 = name.into();
        assert!(
            matches!(
                s.actuator().resize(&r, Instant::now()),
                Err(ActuateError::Path(_))
            ),
            "container {name:?} accepted"
        );
    }
    // A sibling cgroup outside the Pod, reached through a symlink in the Pod's directory.
    let outside = s.root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let before = read_file(&outside.join("cpu.max"));
    std::os::unix::fs::symlink(&outside, s.root.join(format!("pod{UID}/evil"))).unwrap_or_else(|e| {
        // cgroupfs refuses symlinks; then the escape cannot even be set up, which is the point.
        eprintln!("cgroupfs refused the symlink: {e}");
    });
    let mut r = request(100, 200, 64 * MIB);
    r.containers[0].0 = "evil".into();
    assert!(
        s.actuator().resize(&r, Instant::now()).is_err(),
        "a container that is not there"
    );
    assert_eq!(
        read_file(&outside.join("cpu.max")),
        before,
        "nothing outside was written"
    );
    std::fs::remove_dir(&outside).unwrap();
}

const ENV_ROOT: &str = "HEADROOM_TEST_V2_CRASH_ROOT";
const ENV_INTENTS: &str = "HEADROOM_TEST_V2_CRASH_INTENTS";
const ENV_MARKER: &str = "HEADROOM_TEST_V2_CRASH_MARKER";
const CRASH_AFTER: usize = 5;

/// Not a test on its own: does nothing unless `v2_real_sigkill_between_writes_then_recover`
/// started it with the environment set. Grows the Pod and stops after write 5 until killed.
#[test]
fn v2_crash_child() {
    let (Ok(root), Ok(intents), Ok(marker)) = (
        std::env::var(ENV_ROOT),
        std::env::var(ENV_INTENTS),
        std::env::var(ENV_MARKER),
    ) else {
        return;
    };
    let mut a = actuator_on(Path::new(&root), Path::new(&intents));
    a.set_after_write_hook(Some(Box::new(move |n| {
        if n == CRASH_AFTER {
            std::fs::write(&marker, n.to_string()).unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    })));
    let _ = a.resize(&request(1000, 1500, 256 * MIB), Instant::now());
    panic!("the parent should have killed us after {CRASH_AFTER} writes");
}

/// SIGKILL between two writes of a grow, on the real v2 files: the next start completes the
/// resize from the intent record, to exactly what an uninterrupted grow writes.
#[test]
fn v2_real_sigkill_between_writes_then_recover() {
    if !pure_v2("v2_real_sigkill_between_writes_then_recover") {
        return;
    }
    let mut s = scratch("crash");
    s.actuator()
        .resize(&request(250, 500, 64 * MIB), Instant::now())
        .unwrap();
    let small = knobs(&s);
    // The child's actuator must be the only one on this root (the lock refuses two).
    drop(s.actuator.take());
    let intents = s._intents.path().to_path_buf();
    let marker = intents.join("paused");
    // SIGKILL between write 5 and write 6.
    common::sigkill_when_paused(
        "v2_crash_child",
        &[
            (ENV_ROOT, s.root.as_os_str()),
            (ENV_INTENTS, intents.as_os_str()),
            (ENV_MARKER, marker.as_os_str()),
        ],
        &marker,
    );
    let torn = knobs(&s);
    assert_ne!(torn, small, "some writes happened");
    assert_eq!(
        value(&s, "logger/cpu.max"),
        "50000 100000",
        "the last container is not written yet"
    );

    let mut a = actuator_on(&s.root, &intents);
    let done = a.recover().unwrap();
    assert_eq!(
        done,
        vec![Recovery::Completed {
            pod_uid: UID.into(),
            writes: 12
        }]
    );
    // What an uninterrupted grow to the same size writes (see the first test).
    assert_eq!(value(&s, "cpu.weight"), "118");
    assert_eq!(value(&s, "cpu.max"), "450000 100000");
    assert_eq!(value(&s, "memory.max"), (768 * MIB).to_string());
    for c in CONTAINERS {
        assert_eq!(value(&s, &format!("{c}/cpu.weight")), "100");
        assert_eq!(value(&s, &format!("{c}/cpu.max")), "150000 100000");
        assert_eq!(value(&s, &format!("{c}/memory.max")), (256 * MIB).to_string());
    }
    assert!(a.recover().unwrap().is_empty(), "the record is removed");
}
