//! cgroup v2 file formats, write order, rollback and recovery on temporary directory trees
//! (no root needed: this host has no v2 controllers, so the kernel side is tested on v1).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use headroom_actuator::apply::RecoveryPolicy;
use headroom_actuator::convert;
use headroom_actuator::intent::{IntentRecord, UNREADABLE_SUFFIX};
use headroom_actuator::{
    ActuateError, Actuator, ActuatorConfig, ConversionConfig, Recovery, ResizeRequest, Roots, WeightFormula,
};

const UID: &str = "0f3c2a1e-7d4b-4c1a-9e2f-5a6b7c8d9e0f";
const CONTAINERS: [&str; 3] = ["app", "sidecar", "logger"];
const MIB: u64 = 1 << 20;

fn fake_cgroup(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, content) in [
        ("cgroup.subtree_control", ""),
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

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    intents: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("headroom");
    fake_cgroup(&root.join(format!("pod{UID}")));
    for c in CONTAINERS {
        fake_cgroup(&root.join(format!("pod{UID}")).join(c));
    }
    let intents = tmp.path().join("intents");
    Tree {
        _tmp: tmp,
        root,
        intents,
    }
}

fn actuator(t: &Tree, recovery: RecoveryPolicy) -> Actuator {
    let mut cfg = ActuatorConfig::new(Roots::V2 { dir: t.root.clone() }, t.intents.clone());
    cfg.conversion = ConversionConfig {
        container_weight: WeightFormula::Quadratic,
        ..ConversionConfig::default()
    };
    cfg.recovery = recovery;
    Actuator::new(cfg).unwrap()
}

fn request(cpu_milli: u64, limit_milli: u64, mem: u64) -> ResizeRequest {
    common::uniform_request(UID, &CONTAINERS, cpu_milli, limit_milli, mem)
}

/// Every value file of the tree, by path relative to the root.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Ok(s) = std::fs::read_to_string(&p) {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), s);
            }
        }
    }
    out
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(format!("pod{UID}")).join(rel)).unwrap()
}

#[test]
fn v2_formats_follow_kubernetes_conversions() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    let report = a.resize(&request(1000, 1500, 256 * MIB), Instant::now()).unwrap();
    // 12 values, minus the containers' weights: 1024 shares → 100 is already the v2 default.
    assert_eq!(report.writes, 9);
    // Pod: linear weight of 3072 shares, summed quota and memory.
    assert_eq!(read(&t.root, "cpu.weight"), "118");
    assert_eq!(read(&t.root, "cpu.max"), "450000 100000");
    assert_eq!(read(&t.root, "memory.max"), (768 * MIB).to_string());
    // Containers: runc's quadratic weight of 1024 shares.
    for c in CONTAINERS {
        assert_eq!(read(&t.root, &format!("{c}/cpu.weight")), "100");
        assert_eq!(read(&t.root, &format!("{c}/cpu.max")), "150000 100000");
        assert_eq!(read(&t.root, &format!("{c}/memory.max")), (256 * MIB).to_string());
    }
    // Idempotent: nothing to write the second time.
    assert_eq!(
        a.resize(&request(1000, 1500, 256 * MIB), Instant::now())
            .unwrap()
            .writes,
        0
    );
    // Removing the limits writes the `max` sentinels.
    let mut unlimited = request(1000, 0, 0);
    for (_, r) in &mut unlimited.containers {
        r.cpu_limit_milli = None;
        r.memory_limit_bytes = None;
    }
    a.resize(&unlimited, Instant::now()).unwrap();
    assert_eq!(read(&t.root, "cpu.max"), "max 100000");
    assert_eq!(read(&t.root, "app/memory.max"), "max");
}

/// Records which file changed at each write.
fn order_of_writes(a: &mut Actuator, root: &Path) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let last = Mutex::new(snapshot(root));
    let root = root.to_path_buf();
    let out = seen.clone();
    a.set_after_write_hook(Some(Box::new(move |_| {
        let now = snapshot(&root);
        let mut last = last.lock().unwrap();
        let changed: Vec<String> = now
            .iter()
            .filter(|(k, v)| last.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(changed.len(), 1, "one file per write: {changed:?}");
        out.lock().unwrap().push(
            changed[0]
                .split_once('/')
                .map_or(String::new(), |(_, f)| f.to_owned()),
        );
        *last = now;
    })));
    seen
}

#[test]
fn v2_order_grow_pod_first_shrink_pod_last() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    a.resize(&request(250, 500, 64 * MIB), Instant::now()).unwrap();

    let seen = order_of_writes(&mut a, &t.root);
    a.resize(&request(1000, 2000, 256 * MIB), Instant::now()).unwrap();
    let grow = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(
        grow,
        [
            "memory.max",
            "app/memory.max",
            "sidecar/memory.max",
            "logger/memory.max",
            "cpu.max",
            "cpu.weight",
            "app/cpu.max",
            "app/cpu.weight",
            "sidecar/cpu.max",
            "sidecar/cpu.weight",
            "logger/cpu.max",
            "logger/cpu.weight",
        ]
    );

    a.resize(&request(250, 500, 64 * MIB), Instant::now()).unwrap();
    let shrink = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(
        shrink,
        [
            "app/memory.max",
            "sidecar/memory.max",
            "logger/memory.max",
            "memory.max",
            "app/cpu.weight",
            "app/cpu.max",
            "sidecar/cpu.weight",
            "sidecar/cpu.max",
            "logger/cpu.weight",
            "logger/cpu.max",
            "cpu.weight",
            "cpu.max",
        ]
    );
}

#[test]
fn v2_write_failing_halfway_is_rolled_back() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    let req = request(1000, 2000, 256 * MIB);
    // The actuator plans from the values it read last (read handles stay open, write handles
    // open on first write): read everything now, then turn `sidecar/cpu.max` into a directory,
    // so that only the write hits it. Writing a directory fails even as root (EISDIR).
    let like = convert::pod_values(&req.containers, None, a.version(), &a.config().conversion);
    a.read(UID, &like).unwrap();
    let before = snapshot(&t.root);
    let victim = t.root.join(format!("pod{UID}/sidecar/cpu.max"));
    std::fs::remove_file(&victim).unwrap();
    std::fs::create_dir(&victim).unwrap();

    let err = a.resize(&req, Instant::now()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, ActuateError::RolledBack { restored: 6, .. }),
        "{err:?}"
    );
    assert!(
        msg.contains("sidecar/cpu.max") && msg.contains("Is a directory"),
        "{msg}"
    );
    let after = snapshot(&t.root);
    assert_eq!(before.len(), after.len() + 1, "only the replaced file is missing");
    assert!(
        before
            .iter()
            .all(|(k, v)| k.ends_with("sidecar/cpu.max") || after.get(k) == Some(v)),
        "every value must be as it was"
    );
    // The intent record is cleared after a successful rollback.
    assert!(a.intent_log_mut().pending().unwrap().is_empty());
}

#[test]
fn v2_memory_shrink_below_usage_is_refused_untouched() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    a.resize(&request(1000, 2000, 256 * MIB), Instant::now()).unwrap();
    std::fs::write(
        t.root.join(format!("pod{UID}/logger/memory.current")),
        (100 * MIB).to_string(),
    )
    .unwrap();
    let before = snapshot(&t.root);
    let err = a
        .resize(&request(250, 500, 64 * MIB), Instant::now())
        .unwrap_err();
    assert!(
        matches!(err, ActuateError::MemoryBelowUsage { usage, limit, .. } if usage == 100 * MIB && limit == 64 * MIB),
        "{err:?}"
    );
    assert!(err.to_string().contains("logger/memory.max"), "{err}");
    assert_eq!(before, snapshot(&t.root));
    // Above usage is fine.
    a.resize(&request(250, 500, 128 * MIB), Instant::now()).unwrap();
}

#[test]
fn path_escapes_are_refused() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    for uid in ["..", "../../etc", "a/b", "x\0y", ""] {
        let mut r = request(100, 200, 64 * MIB);
        r.pod_uid = uid.into();
        assert!(
            matches!(a.resize(&r, Instant::now()), Err(ActuateError::Path(_))),
            "uid {uid:?} accepted"
        );
    }
    for name in ["..", "../pod", "/etc", "a\0"] {
        let mut r = request(100, 200, 64 * MIB);
        r.containers[1].0 = name.into();
        assert!(
            matches!(a.resize(&r, Instant::now()), Err(ActuateError::Path(_))),
            "container {name:?} accepted"
        );
    }
    // A container cgroup replaced by a symlink to somewhere else is refused too.
    let outside = t.root.parent().unwrap().join("outside");
    fake_cgroup(&outside);
    let link = t.root.join(format!("pod{UID}/evil"));
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let mut r = request(100, 200, 64 * MIB);
    r.containers[0].0 = "evil".into();
    let err = a.resize(&r, Instant::now()).unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_eq!(
        std::fs::read_to_string(outside.join("cpu.max")).unwrap(),
        "max 100000"
    );
}

fn crash_after(t: &Tree, writes: usize) {
    let mut a = actuator(t, RecoveryPolicy::Complete);
    a.resize(&request(250, 500, 64 * MIB), Instant::now()).unwrap();
    a.set_after_write_hook(Some(Box::new(move |n| {
        if n == writes {
            panic!("simulated crash after {n} writes");
        }
    })));
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = a.resize(&request(1000, 2000, 256 * MIB), Instant::now());
    }));
    assert!(crashed.is_err());
}

#[test]
fn recovery_completes_a_half_done_resize() {
    let t = tree();
    crash_after(&t, 5);
    assert_eq!(
        read(&t.root, "app/cpu.max"),
        "50000 100000",
        "crash happened before the CPU writes"
    );
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    let done = a.recover().unwrap();
    assert_eq!(
        done,
        vec![Recovery::Completed {
            pod_uid: UID.into(),
            writes: 12
        }]
    );
    assert_eq!(read(&t.root, "cpu.max"), "600000 100000");
    assert_eq!(read(&t.root, "app/cpu.max"), "200000 100000");
    assert_eq!(read(&t.root, "logger/memory.max"), (256 * MIB).to_string());
    assert!(a.recover().unwrap().is_empty(), "record removed");
}

#[test]
fn recovery_can_restore_instead() {
    let t = tree();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    a.resize(&request(250, 500, 64 * MIB), Instant::now()).unwrap();
    let before = snapshot(&t.root);
    drop(a);
    crash_after(&t, 7);
    assert_ne!(before, snapshot(&t.root));
    let mut a = actuator(&t, RecoveryPolicy::Restore);
    let done = a.recover().unwrap();
    assert!(
        matches!(&done[..], [Recovery::Restored { writes: 12, .. }]),
        "{done:?}"
    );
    let after: BTreeMap<_, _> = snapshot(&t.root)
        .into_iter()
        .filter(|(k, _)| !k.starts_with(".."))
        .collect();
    assert_eq!(before, after);
}

#[test]
fn intent_record_pointing_outside_the_roots_is_refused() {
    let t = tree();
    std::fs::create_dir_all(&t.intents).unwrap();
    let record = format!(
        r#"{{"format":1,"pod_uid":"{UID}","cgroups":[{{"V2":{{"dir":"/etc"}}}}],"writes":[{{"cgroup":0,"previous":{{"MemoryMax":"Max"}},"next":{{"MemoryMax":{{"Bytes":4096}}}}}}]}}"#
    );
    let record: IntentRecord = serde_json::from_str(&record).unwrap();
    std::fs::write(
        t.intents.join(format!("{UID}.intent")),
        record.file_bytes().unwrap(),
    )
    .unwrap();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    let err = a.recover().unwrap_err();
    assert!(
        err.to_string()
            .contains("outside the configured pod cgroup roots"),
        "{err}"
    );
}

/// Recovery with a hostile entry `make_bad` puts into the intent directory beside a half-done
/// resize. The entry's name sorts before the good record, so the good record is only recovered if
/// recovery goes past the bad entry. Recovery runs on its own thread, so a hang fails the test
/// instead of stopping it. `moved` checks the entry where it was moved, with the reason given.
fn recover_past(make_bad: impl FnOnce(&Path) -> PathBuf, moved: impl FnOnce(&Path, &str)) {
    let t = tree();
    crash_after(&t, 5);
    let bad = make_bad(&t.intents);
    assert!(bad.file_name().unwrap().to_str().unwrap() < UID, "sorts first");
    let kind = bad.symlink_metadata().unwrap().file_type();
    let mut a = actuator(&t, RecoveryPolicy::Complete);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let done = a.recover();
        let again = a.recover();
        let _ = tx.send((done, again));
    });
    let (done, again) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("recovery did not finish within 10 s");
    let done = done.expect("recovery completes");
    assert!(
        done.contains(&Recovery::Completed {
            pod_uid: UID.into(),
            writes: 12
        }),
        "the good record is recovered: {done:?}"
    );
    assert_eq!(read(&t.root, "cpu.max"), "600000 100000");
    assert_eq!(read(&t.root, "logger/memory.max"), (256 * MIB).to_string());
    let set_aside: Vec<_> = done
        .iter()
        .filter(|r| matches!(r, Recovery::SetAside { .. }))
        .collect();
    let [
        Recovery::SetAside {
            path,
            moved_to: Some(moved_to),
            reason,
        },
    ] = &set_aside[..]
    else {
        panic!("the bad entry is reported as moved aside: {done:?}");
    };
    assert_eq!(path, &bad);
    let name = bad.file_name().unwrap().to_str().unwrap();
    assert_eq!(moved_to, &t.intents.join(format!("{name}{UNREADABLE_SUFFIX}")));
    assert!(
        bad.symlink_metadata().is_err(),
        "{} is still there",
        bad.display()
    );
    // The entry itself was moved (not followed, opened or copied).
    assert_eq!(moved_to.symlink_metadata().unwrap().file_type(), kind);
    moved(moved_to, reason);
    assert!(again.expect("second recovery").is_empty(), "nothing left to do");
}

#[test]
fn a_fifo_in_the_intent_directory_neither_hangs_nor_stops_recovery() {
    recover_past(
        |dir| {
            let p = dir.join("0a-fifo.intent");
            nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            p
        },
        |_, reason| assert!(reason.contains("FIFO, not a regular file"), "{reason}"),
    );
}

#[test]
fn a_symlink_to_dev_zero_is_not_followed() {
    recover_past(
        |dir| {
            let p = dir.join("0a-link.intent");
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
            p
        },
        |moved, reason| {
            assert!(reason.contains("symbolic link"), "{reason}");
            assert_eq!(std::fs::read_link(moved).unwrap(), Path::new("/dev/zero"));
        },
    );
}

#[test]
fn a_directory_in_the_intent_directory_does_not_stop_recovery() {
    recover_past(
        |dir| {
            let p = dir.join("0a-dir.intent");
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("inside"), "kept").unwrap();
            p
        },
        |moved, reason| {
            assert!(reason.contains("directory, not a regular file"), "{reason}");
            assert_eq!(std::fs::read_to_string(moved.join("inside")).unwrap(), "kept");
        },
    );
}

#[test]
fn an_oversized_record_file_is_not_read() {
    recover_past(
        |dir| {
            let p = dir.join("0a-big.intent");
            // Sparse: 64 MiB that cost no disk.
            std::fs::File::create(&p).unwrap().set_len(64 * MIB).unwrap();
            p
        },
        |moved, reason| {
            assert!(reason.contains("over the 1048576-byte bound"), "{reason}");
            assert_eq!(std::fs::metadata(moved).unwrap().len(), 64 * MIB);
        },
    );
}

#[test]
fn a_garbage_record_file_is_kept_for_the_operator() {
    let garbage = b"not a record\n\x00\xff{\"format\":1}".repeat(10);
    recover_past(
        |dir| {
            let p = dir.join("0a-garbage.intent");
            std::fs::write(&p, &garbage).unwrap();
            p
        },
        |moved, reason| {
            assert!(reason.contains("not an intent record headroom wrote"), "{reason}");
            assert_eq!(std::fs::read(moved).unwrap(), garbage);
        },
    );
}
