//! `headroomd serve` given a hostile configuration: every problem is reported at once, the exit
//! status is non-zero, and nothing is applied (no socket, no intent directory, no cgroup root).
#![allow(clippy::unwrap_used)]

use std::{path::Path, process::Command};

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

struct Run {
    status: std::process::ExitStatus,
    stderr: String,
}

fn serve(dir: &Path, config: &str, extra: &[&str]) -> Run {
    let file = dir.join("headroomd.toml");
    std::fs::write(&file, config).unwrap();
    let out = Command::new(HEADROOMD)
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .arg("--socket")
        .arg(dir.join("run/headroomd.sock"))
        .arg("--intent-dir")
        .arg(dir.join("intents"))
        .args(["--probes", "off"])
        .args(extra)
        .output()
        .unwrap();
    Run {
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn nothing_applied(dir: &Path) {
    assert!(!dir.join("run").exists(), "the socket directory was created");
    assert!(!dir.join("intents").exists(), "the intent directory was created");
}

const HOSTILE: &str = r#"
node_name = 42
nodename = "typo"
[node]
allocatable_cpu = "-8"
allocatable_memory = "1e400"
gpus = 8
[server]
socket = "relative/path.sock"
socket_mode = "0777"
max_request_bytes = 1073741824
writer_uids = [0, -1, "root", 4294967296]
reader_uids = "everyone"
max_watchers = 0
default_reservation_ttl_seconds = 7200
max_reservation_ttl_seconds = 60
require_known_pod = "no"
listen_tcp = "0.0.0.0:1"
[server.tcp]
listen = "0.0.0.0:7443"
[pipeline]
queue_capacity = 1e9
stale_after_ms = -5
tick_interval_ms = 0
turbo = true
[metrics]
listen = "everywhere"
[extra]
x = 1
"#;

#[test]
fn every_problem_is_reported_and_nothing_is_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let run = serve(
        tmp.path(),
        HOSTILE,
        &["--allocatable-memory", "lots", "--metrics-listen", "nowhere"],
    );
    assert!(
        !run.status.success(),
        "a hostile config was accepted:\n{}",
        run.stderr
    );
    for path in [
        "node_name:",
        "nodename:",
        "extra:",
        "node.allocatable_cpu:",
        "node.allocatable_memory:",
        "node.gpus:",
        "server.socket:",
        "server.socket_mode:",
        "server.max_request_bytes:",
        "server.writer_uids[1]:",
        "server.writer_uids[2]:",
        "server.writer_uids[3]:",
        "server.reader_uids:",
        "server.max_watchers:",
        "server.default_reservation_ttl_seconds:",
        "server.require_known_pod:",
        "server.listen_tcp:",
        "server.tcp.tls_cert:",
        "server.tcp.tls_key:",
        "server.tcp.client_ca:",
        "pipeline.queue_capacity:",
        "pipeline.stale_after_ms:",
        "pipeline.tick_interval_ms:",
        "pipeline.turbo:",
        "metrics.listen:",
        // Flags are checked too, and reported with the file's problems.
        "--allocatable-memory:",
        "--metrics-listen:",
    ] {
        assert!(
            run.stderr.contains(path),
            "{path} not reported; stderr:\n{}",
            run.stderr
        );
    }
    assert!(run.stderr.contains("negative"), "{}", run.stderr);
    assert!(
        run.stderr.contains("lets every local user connect"),
        "{}",
        run.stderr
    );
    nothing_applied(tmp.path());
}

#[test]
fn check_config_refuses_the_same_file() {
    let tmp = tempfile::tempdir().unwrap();
    let run = serve(tmp.path(), HOSTILE, &["--check-config"]);
    assert!(!run.status.success());
    assert!(
        run.stderr.contains("problem(s) in the configuration"),
        "{}",
        run.stderr
    );
    nothing_applied(tmp.path());
}

#[test]
fn syntax_error_and_wrong_table_types_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let run = serve(tmp.path(), "[server\nsocket = 1\n", &[]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("<file>:"), "{}", run.stderr);
    nothing_applied(tmp.path());
    let run = serve(tmp.path(), "server = 5\npipeline = [1]\nmetrics = \"x\"\n", &[]);
    assert!(!run.status.success());
    for path in [
        "server: expected a table",
        "pipeline: expected a table",
        "metrics: expected a table",
    ] {
        assert!(run.stderr.contains(path), "{path}:\n{}", run.stderr);
    }
    nothing_applied(tmp.path());
}

/// TCP is only ever served with mutual TLS, which this build does not have: a complete
/// `[server.tcp]` section is refused at start, before anything is created.
#[test]
fn tcp_without_built_in_tls_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let config = r#"
[node]
allocatable_cpu = "4"
allocatable_memory = "8Gi"
[server.tcp]
listen = "127.0.0.1:0"
tls_cert = "/c"
tls_key = "/k"
client_ca = "/ca"
[metrics]
listen = ""
"#;
    let run = serve(tmp.path(), config, &[]);
    assert!(!run.status.success(), "TCP was served:\n{}", run.stderr);
    assert!(run.stderr.contains("no TLS support built in"), "{}", run.stderr);
    nothing_applied(tmp.path());
}
