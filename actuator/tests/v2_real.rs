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
    ActuateError, Actuator, ActuatorConfig, CgroupSetup, ConversionConfig, PodCgroups, ResizeRequest, Roots,
    WeightFormula, detect_setup,
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
    actuator: Actuator,
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

fn scratch(name: &str) -> Scratch {
    let root = Path::new(MOUNT).join(format!("headroom-v2-test-{}-{name}", std::process::id()));
    let roots = Roots::V2 { dir: root.clone() };
    let pod = PodCgroups::create(&roots, UID, &CONTAINERS, None).unwrap();
    let intents = tempfile::tempdir().unwrap();
    let mut config = ActuatorConfig::new(roots, intents.path().to_path_buf());
    // runc's quadratic weight for containers, as in `v2_tree.rs`.
    config.conversion = ConversionConfig {
        container_weight: WeightFormula::Quadratic,
        ..ConversionConfig::default()
    };
    Scratch {
        pod,
        root,
        actuator: Actuator::new(config).unwrap(),
        _intents: intents,
    }
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
        .actuator
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
    s.actuator
        .resize(&request(250, 500, 64 * MIB), Instant::now())
        .unwrap();
    assert_eq!(value(&s, "cpu.max"), "150000 100000");
    assert_eq!(value(&s, "memory.max"), (192 * MIB).to_string());
    assert_eq!(value(&s, "app/cpu.max"), "50000 100000");
    // A non-page-aligned limit reads back rounded down to a page; verification accepts that.
    s.actuator
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
    s.actuator
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
        .actuator
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
