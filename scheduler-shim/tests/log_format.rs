//! The shim's logging as the DaemonSet runs it: `RUST_LOG` (what the manifests set) is honoured,
//! `--log-format json` writes one JSON object per line, and no ANSI colour reaches a pipe.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

const SHIM: &str = env!("CARGO_BIN_EXE_headroom-shim");

/// Runs `headroom-shim kube` against an API server that is not there (nothing listens on port 1)
/// until its INFO line about serving /metrics arrives, then stops it; returns stderr's lines.
fn run_until_serving(format: &str, env: &[(&str, &str)]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let mut child = Command::new(SHIM)
        .args([
            "--log-format",
            format,
            "kube",
            "--node-name",
            "n1",
            "--ledger",
            "local",
        ])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .env_remove("HEADROOM_LOG")
        .envs(env.iter().copied())
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        let done = line.contains("serving /metrics");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn rust_log_json_and_no_colours_on_a_pipe() {
    let lines = run_until_serving("json", &[("RUST_LOG", "info")]);
    let serving = lines
        .iter()
        .find(|l| l.contains("serving /metrics"))
        .unwrap_or_else(|| panic!("RUST_LOG=info must show the INFO line; stderr: {lines:#?}"));
    let v: serde_json::Value = serde_json::from_str(serving).unwrap_or_else(|e| panic!("{e}: {serving}"));
    assert_eq!(v["level"], "INFO", "{v}");
    assert!(v["timestamp"].is_string(), "{v}");
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "ANSI escape on a pipe: {line:?}");
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}

#[test]
fn text_format_without_colours_and_headroom_log_still_honoured() {
    let lines = run_until_serving("text", &[("HEADROOM_LOG", "info")]);
    let serving = lines
        .iter()
        .find(|l| l.contains("serving /metrics"))
        .unwrap_or_else(|| panic!("HEADROOM_LOG=info must still work; stderr: {lines:#?}"));
    assert!(serving.contains(" INFO "), "{serving}");
    assert!(lines.iter().all(|l| !l.contains('\u{1b}')), "{lines:#?}");
    // And the default (no variable) stays quiet at INFO.
    let quiet = run_until_serving("text", &[]);
    assert!(
        quiet.iter().all(|l| !l.contains("serving /metrics")),
        "{quiet:#?}"
    );
}
