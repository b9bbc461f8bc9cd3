//! Runs the real `headroom-shim` binary on the seed's cluster file.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn plan(args: &[&str]) -> (bool, serde_json::Value, String) {
    let cluster = format!("{}/examples/seed-cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
        .args(["plan", "--cluster", &cluster])
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (output.status.success(), json, stderr)
}

#[test]
fn seed_resize_to_six_cpus_preempts_low_priority_pod() {
    let (ok, json, stderr) = plan(&["--resize", "default/high-priority-pod", "--cpu", "6", "--json"]);
    assert!(ok, "{stderr}");
    assert_eq!(
        json,
        serde_json::json!({
            "outcome": "preempt",
            "victims": [{"namespace": "default", "name": "low-priority-pod",
                         "uid": "4b8e2c1a-7d3f-4e6a-9b0c-1d2e3f4a5b6c", "priority": 1000}],
            "message": "Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000"
        })
    );
}

#[test]
fn seed_outcomes_by_size() {
    for (cpu, outcome) in [
        ("4050m", "fits"),
        ("8", "deferred"),
        ("9", "infeasible"),
        ("7", "preempt"),
    ] {
        let (ok, json, stderr) = plan(&["--resize", "default/high-priority-pod", "--cpu", cpu, "--json"]);
        assert!(ok, "{stderr}");
        assert_eq!(json["outcome"], outcome, "cpu {cpu}: {json}");
    }
    // The low-priority pod cannot preempt anyone: system pods outrank it.
    let (_, json, _) = plan(&["--resize", "default/low-priority-pod", "--cpu", "5", "--json"]);
    assert_eq!(json["outcome"], "deferred", "{json}");
    assert_eq!(
        json["message"],
        "Node didn't have enough resource: cpu, requested: 5000, used: 4950, capacity: 8000"
    );
}

#[test]
fn bad_input_fails_with_a_message_and_no_output() {
    let (ok, json, stderr) = plan(&["--resize", "default/nope", "--cpu", "6", "--json"]);
    assert!(!ok);
    assert_eq!(json, serde_json::Value::Null);
    assert!(
        stderr.contains("pod default/nope is not in the cluster file"),
        "{stderr}"
    );
    let (ok, _, stderr) = plan(&["--resize", "default/high-priority-pod", "--cpu=-6", "--json"]);
    assert!(!ok);
    assert!(stderr.contains("negative"), "{stderr}");
}
