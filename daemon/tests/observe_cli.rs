//! `headroomd observe` as an operator runs it: the binary, its JSON Lines, its refusal.
#![allow(clippy::unwrap_used)]

mod support;

use std::{process::Command, time::Duration};

use support::{KERNEL, TestCgroup, skip_reason, spawn_in, stop};

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

fn probes_built() -> bool {
    headroom_testkit::gate::privileged(
        "observe_cli",
        headroom_testkit::gate::no_probes(support::PROBE_OBJECT),
    )
}

#[test]
fn observe_json_reports_the_throttled_cgroup_with_its_path() {
    let _serial = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    if skip_reason("observe_json_reports_the_throttled_cgroup").is_some() || !probes_built() {
        return;
    }
    let cgroup = TestCgroup::create(std::path::Path::new("/sys/fs/cgroup/cpu"), "observe");
    cgroup.write("cpu.cfs_quota_us", "10000");
    let observer = Command::new(HEADROOMD)
        .args(["observe", "--duration", "2.5", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let busy = spawn_in(&[&cgroup], "sh -c 'while :; do :; done'");
    let output = observer.wait_with_output().unwrap();
    stop(busy);
    assert!(
        output.status.success(),
        "observe failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect();
    let ours = reports
        .iter()
        .find(|r| r["paths"][0].as_str() == Some(cgroup.path.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no report for {}:\n{stdout}", cgroup.path.display()));
    assert_eq!(ours["cgroup_id"].as_u64(), Some(cgroup.id()));
    assert!(ours["throttle_episodes"].as_u64().unwrap() >= 10, "{ours}");
    assert!(ours["throttled_ns"].as_u64().unwrap() > 500_000_000, "{ours}");
    for field in [
        "runq_latency_hist",
        "memcg_reclaim_episodes",
        "memcg_reclaim_stall_ns",
        "direct_reclaim_stall_ns",
        "oom_kills",
    ] {
        assert!(ours.get(field).is_some(), "field {field} present");
    }
}

#[test]
fn observe_refuses_without_privileges_in_one_sentence() {
    if skip_reason("observe_refuses_without_privileges").is_some() {
        return; // dropping privileges needs root in the first place
    }
    let output = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            HEADROOMD,
            "observe",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs root"),
        "clear refusal expected, got: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn observe_refuses_a_missing_btf_file() {
    if skip_reason("observe_refuses_a_missing_btf_file").is_some() || !probes_built() {
        return;
    }
    let output = Command::new(HEADROOMD)
        .args(["observe", "--duration", "1", "--btf", "/nonexistent/vmlinux"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read kernel BTF from /nonexistent/vmlinux"),
        "{stderr}"
    );
}
