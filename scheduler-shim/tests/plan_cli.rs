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

/// `plan` on the seed's cluster with low-priority-pod offering to give way down to 1 CPU.
fn plan_give_way(live: Option<&str>, extra: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read_to_string(format!(
        "{}/examples/seed-cluster.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let annotated = seed.replacen(
        "  name: low-priority-pod\n",
        "  name: low-priority-pod\n  annotations: {headroom.io/give-way: \"cpu=1\"}\n",
        1,
    );
    assert_ne!(annotated, seed, "the seed's cluster file changed shape");
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, annotated).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_headroom-shim"));
    command
        .args([
            "plan",
            "--cluster",
            cluster.to_str().unwrap(),
            "--resize",
            "default/high-priority-pod",
            "--cpu",
            "6",
        ])
        .args(extra);
    if let Some(live) = live {
        let path = dir.path().join("live.yaml");
        std::fs::write(&path, live).unwrap();
        command.args(["--live", path.to_str().unwrap()]);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `plan_give_way` with `--json`, its output parsed.
fn plan_give_way_json(live: Option<&str>, extra: &[&str]) -> serde_json::Value {
    let args: Vec<&str> = std::iter::once("--json").chain(extra.iter().copied()).collect();
    let (ok, out, err) = plan_give_way(live, &args);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn plan_shows_the_shrink_and_the_live_figures_it_rests_on() {
    let quiet = "default/low-priority-pod: {cpuUsage: 200m, cpuThrottledPercent: 0, workingSet: 120Mi}\n";
    let json = plan_give_way_json(Some(quiet), &[]);
    assert_eq!(json["outcome"], "shrink", "{json}");
    assert_eq!(json["victims"], serde_json::json!([]));
    assert_eq!(json["shrinks"][0]["name"], "low-priority-pod");
    assert_eq!(json["shrinks"][0]["to"]["cpu_millis"], 1000);
    assert_eq!(json["giveWay"][0]["live"]["cpu_usage_millis"], 200);

    let (ok, text, _) = plan_give_way(Some(quiet), &[]);
    assert!(ok);
    assert!(text.contains("Shrinking 1 lower-priority Pod in place"), "{text}");
    assert!(
        text.contains("default/low-priority-pod: gives way in place"),
        "{text}"
    );
    assert!(text.contains("cpu usage 200m"), "{text}");

    // Throttled: no CPU shrink, the Pod is evicted and the reason names the figure.
    let busy = "default/low-priority-pod: {cpuUsage: 200m, cpuThrottledPercent: 40, workingSet: 120Mi}\n";
    let json = plan_give_way_json(Some(busy), &[]);
    assert_eq!(json["outcome"], "preempt", "{json}");
    assert!(
        json["giveWay"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("throttled in 40.0% of periods"),
        "{json}"
    );

    // Without live figures, or with shrinking off, nobody is shrunk.
    let json = plan_give_way_json(None, &[]);
    assert_eq!(json["outcome"], "preempt", "{json}");
    assert!(
        json["giveWay"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("no fresh"),
        "{json}"
    );
    let json = plan_give_way_json(Some(quiet), &["--give-way", "off"]);
    assert_eq!(json["outcome"], "preempt", "{json}");

    // A malformed live file is refused with where it is wrong.
    let (ok, _, err) = plan_give_way(
        Some("default/low-priority-pod: {cpuThrottledPercent: 400}\n"),
        &[],
    );
    assert!(!ok);
    assert!(err.contains("cpuThrottledPercent"), "{err}");
}
