//! A Pod's cgroups disappearing in the middle of a resize (the Pod was deleted while headroom
//! resized it): the resize fails with an error that names the file, it is not retried, the
//! intent record left behind is discarded by the next `recover` ("the pod's cgroups are gone"),
//! and a later resize of the same Pod fails at once instead of writing somewhere else.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{MOUNT, privileged};
use headroom_actuator::{
    ActuateError, Actuator, ActuatorConfig, CgroupVersion, ConversionConfig, PodCgroups, Recovery,
    ResizeRequest, Roots, ScratchRoots, convert,
};

const UID: &str = "7a1b2c3d-0000-4000-8000-0000000vanish";
const CONTAINERS: [&str; 2] = ["app", "sidecar"];
const MIB: u64 = 1 << 20;

fn request(cpu: u64, limit: u64, mem: u64) -> ResizeRequest {
    common::uniform_request(UID, &CONTAINERS, cpu, limit, mem)
}

/// What the caller of a resize that hit a vanished cgroup must see, and what must follow.
fn assert_reported_not_retried(a: &mut Actuator, err: &ActuateError, took: Duration) {
    let text = err.to_string();
    assert!(
        matches!(
            err,
            ActuateError::RolledBack { .. }
                | ActuateError::RollbackFailed { .. }
                | ActuateError::Cgroup { .. }
        ),
        "{err:?}"
    );
    assert!(text.contains(UID), "the error names the Pod: {text}");
    assert!(
        text.contains(&format!("pod{UID}/")),
        "the error names the file in the Pod's cgroup: {text}"
    );
    assert!(
        took < Duration::from_secs(5),
        "failed after {took:?}: was it retried?"
    );
    if let ActuateError::RollbackFailed { .. } = err {
        assert!(
            !text.contains("rolled back;") && text.matches(UID).count() <= 3,
            "a failed rollback is not reported as rolled back, nor the Pod named twice: {text}"
        );
        assert!(
            text.starts_with(&format!("pod {UID}: open ")) || text.starts_with(&format!("pod {UID}: write ")),
            "{text}"
        );
    }
    // The next start discards whatever record was left: the cgroups are gone.
    let recovered = a.recover().unwrap();
    assert!(
        recovered
            .iter()
            .all(|r| matches!(r, Recovery::Discarded { reason, .. } if reason.contains("gone"))),
        "{recovered:?}"
    );
    assert!(
        a.recover().unwrap().is_empty(),
        "the record is removed, not retried"
    );
    // A new resize of the deleted Pod fails at once.
    let t = Instant::now();
    let again = a
        .resize(&request(300, 600, 96 * MIB), Instant::now())
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(again.to_string().contains(UID), "{again}");
}

fn fake_cgroup(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, content) in [
        ("cgroup.procs", ""),
        ("cpu.weight", "100"),
        ("cpu.max", "max 100000"),
        ("memory.max", "max"),
        ("memory.current", "0"),
        (
            "cpu.stat",
            "usage_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        ),
    ] {
        std::fs::write(dir.join(name), content).unwrap();
    }
}

/// On a temporary v2 tree (no root needed): the Pod's directory is removed after the first write;
/// the next file cannot be opened and the first write is rolled back.
#[test]
fn v2_tree_pod_removed_after_first_write() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("headroom");
    let pod_dir = root.join(format!("pod{UID}"));
    fake_cgroup(&pod_dir);
    for c in CONTAINERS {
        fake_cgroup(&pod_dir.join(c));
    }
    let mut a = Actuator::new(ActuatorConfig::new(
        Roots::V2 { dir: root.clone() },
        tmp.path().join("intents"),
    ))
    .unwrap();
    // No earlier resize: the actuator keeps the files it wrote open, and on tmpfs a write to an
    // open, unlinked file succeeds (on cgroupfs it fails with ENODEV, see the v1 test), so the
    // tree is removed before the files after the first are opened.
    let doomed = pod_dir.clone();
    a.set_after_write_hook(Some(Box::new(move |n| {
        if n == 1 {
            std::fs::remove_dir_all(&doomed).unwrap();
        }
    })));
    let t = Instant::now();
    let err = a
        .resize(&request(500, 1000, 128 * MIB), Instant::now())
        .unwrap_err();
    let took = t.elapsed();
    a.set_after_write_hook(None);
    eprintln!("v2 tree: {err}");
    assert_reported_not_retried(&mut a, &err, took);
}

/// On this host's real v1 hierarchies: every cgroup of the Pod is `rmdir`ed (as the kubelet does
/// when it deletes a Pod) after the first write. Writes to a removed cgroup fail with ENODEV, so
/// the rollback fails too and the intent record stays, until `recover` discards it.
#[test]
fn v1_pod_cgroups_removed_after_first_write() {
    if !privileged("v1_pod_cgroups_removed_after_first_write") {
        return;
    }
    let scratch = ScratchRoots::create_v1(Path::new(MOUNT), "headroom-test-vanish").unwrap();
    let initial = request(100, 200, 64 * MIB);
    let values = convert::pod_values(
        &initial.containers,
        None,
        CgroupVersion::V1,
        &ConversionConfig::default(),
    );
    let pod = PodCgroups::create(scratch.roots(), UID, &CONTAINERS, Some(&values)).unwrap();
    let intents = tempfile::tempdir().unwrap();
    let mut a = Actuator::new(ActuatorConfig::new(
        scratch.roots().clone(),
        intents.path().to_path_buf(),
    ))
    .unwrap();
    a.resize(&initial, Instant::now()).unwrap();
    // Children before the Pod, in both hierarchies.
    let mut doomed: Vec<PathBuf> = Vec::new();
    for c in CONTAINERS {
        doomed.extend(
            pod.container_dirs(c)
                .unwrap()
                .paths()
                .into_iter()
                .map(Path::to_path_buf),
        );
    }
    doomed.extend(pod.pod_dirs().unwrap().paths().into_iter().map(Path::to_path_buf));
    a.set_after_write_hook(Some(Box::new(move |n| {
        if n == 1 {
            for d in &doomed {
                std::fs::remove_dir(d).unwrap_or_else(|e| panic!("rmdir {}: {e}", d.display()));
            }
        }
    })));
    let t = Instant::now();
    let err = a
        .resize(&request(500, 1000, 128 * MIB), Instant::now())
        .unwrap_err();
    let took = t.elapsed();
    a.set_after_write_hook(None);
    eprintln!("v1: {err}");
    assert_reported_not_retried(&mut a, &err, took);
}
