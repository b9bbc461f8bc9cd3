//! The demo's output checked: `headroom-shim demo` (the seed's tutorial on real cgroups and
//! processes) run as a binary with a grace period of 0 and its own cgroup root, then its events,
//! their order, types and messages, the allocated cpu, the cgroup files and the cleanup asserted.
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// Creates cgroups under /sys/fs/cgroup: root only.
fn privileged(test: &str) -> bool {
    headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root())
}

/// The rows of the events table that follows `heading`: (type, reason, object, message).
fn events_after(out: &str, heading: &str) -> Vec<(String, String, String, String)> {
    let start = out
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{out}"));
    let mut lines = out[start..].lines().skip(1);
    let header = lines.next().expect("table header");
    assert!(header.starts_with("LAST SEEN"), "{header}");
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split_whitespace();
            let _last_seen = cols.next();
            let (t, r, o) = (cols.next().unwrap(), cols.next().unwrap(), cols.next().unwrap());
            let message = l.split_once(o).unwrap().1.trim().to_string();
            (t.to_string(), r.to_string(), o.to_string(), message)
        })
        .collect()
}

fn value_after<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
        .trim()
}

#[test]
fn demo_reproduces_the_tutorial_and_leaves_nothing_behind() {
    if !privileged("demo") {
        return;
    }
    let root = format!("headroom-test-demo-{}", std::process::id());
    let output = Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
        .args([
            "demo",
            "--grace-period",
            "0",
            "--cgroup-root",
            &root,
            "--node-name",
            "test-node",
        ])
        .output()
        .expect("run headroom-shim demo");
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "demo failed\nstdout:\n{out}\nstderr:\n{err}"
    );

    // The resizer's uid, from its cgroup path.
    let (limit_path, limit) = value_after(&out, "resizer cpu limit: ")
        .split_once(" = ")
        .unwrap();
    let resizer_uid = limit_path
        .split('/')
        .find_map(|c| c.strip_prefix("pod"))
        .expect("pod<uid> in the path");

    // (1) the victim: Preempted by the resizer, then Killing, both Normal.
    let low = events_after(
        &out,
        "(1) $ kubectl get events --field-selector involvedObject.name=low-priority-pod",
    );
    let expected_low = [
        (
            "Normal",
            "Preempted",
            format!("Preempted by pod {resizer_uid} on node test-node"),
        ),
        ("Normal", "Killing", "Stopping container worker".to_string()),
    ];
    assert_eq!(low.len(), expected_low.len(), "{low:?}");
    for (got, (t, r, m)) in low.iter().zip(&expected_low) {
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str(), &got.3),
            (*t, *r, "pod/low-priority-pod", m)
        );
    }

    // (2) the resizer: ResizeDeferred (Warning, the kubelet's message), ResizeStarted, ResizeCompleted.
    let high = events_after(
        &out,
        "(2) $ kubectl get events --field-selector involvedObject.name=high-priority-pod",
    );
    let spec = r#"{"containers":[{"name":"app","resources":{"limits":{"cpu":"6","memory":"1Gi"},"requests":{"cpu":"6","memory":"1Gi"}}}],"generation":2"#;
    let expected_high = [
        (
            "Warning",
            "ResizeDeferred",
            format!(
                "Pod resize OutOfcpu: {spec},\"error\":\"Node didn't have enough resource: cpu, requested: 6000, used: 3000, capacity: 8000\"}}"
            ),
        ),
        ("Normal", "ResizeStarted", format!("Pod resize started: {spec}}}")),
        (
            "Normal",
            "ResizeCompleted",
            format!("Pod resize completed: {spec}}}"),
        ),
    ];
    assert_eq!(high.len(), expected_high.len(), "{high:?}");
    for (got, (t, r, m)) in high.iter().zip(&expected_high) {
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str(), &got.3),
            (*t, *r, "pod/high-priority-pod", m)
        );
    }

    // (3) allocated cpu, and the cgroup file the actuator wrote (v1: 6 CPU at a 100 ms period).
    let start = out.find("(3) $ kubectl get pod high-priority-pod").unwrap();
    assert_eq!(out[start..].lines().nth(1), Some("6"), "{out}");
    assert!(
        limit_path.starts_with(&format!("/sys/fs/cgroup/cpu/{root}/pod")),
        "{limit_path}"
    );
    if limit_path.ends_with("cpu.cfs_quota_us") {
        assert_eq!(limit, "600000");
    } else {
        assert_eq!(limit, "600000 100000");
    }

    // The victim's processes were gone and its cgroups removed before the demo's cleanup.
    let victim_pids = value_after(&out, "victim pids: ");
    assert!(victim_pids.ends_with("(still alive: 0)"), "{victim_pids}");
    let victim_cgroups: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("victim cgroup: "))
        .collect();
    assert!(!victim_cgroups.is_empty());
    for line in &victim_cgroups {
        assert!(line.ends_with(" removed"), "{line}");
    }

    // (4) every step measured.
    for step in [
        "deferred_detected",
        "decision",
        "reservation",
        "victims_terminated",
        "actuation",
        "verified",
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(step))
            .expect(step);
        assert!(line.trim_end().ends_with(" ms"), "{line}");
    }

    // Nothing left behind: no process of either Pod, no cgroup under the test's root.
    let pids = value_after(&out, "victim pids: ")
        .split(" (")
        .next()
        .unwrap()
        .to_string()
        + " "
        + value_after(&out, "resizer pids: ").split(" (").next().unwrap();
    for pid in pids.split_whitespace() {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} is still alive"
        );
    }
    for controller in ["cpu", "memory"] {
        let dir = format!("/sys/fs/cgroup/{controller}/{root}");
        assert!(!Path::new(&dir).exists(), "{dir} was left behind");
    }
}
