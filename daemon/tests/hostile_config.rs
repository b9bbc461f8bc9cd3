//! `headroomd serve` given a hostile configuration: every problem is reported at once, the exit
//! status is non-zero, and nothing is applied (no socket, no intent directory, no cgroup root).
#![allow(clippy::unwrap_used)]

mod tls_support;

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

/// `[server.tcp]` whose TLS files cannot be used: `headroomd serve` (and `--check-config`) stops
/// with one error naming the setting and the file, exits non-zero without a panic, and has
/// created nothing.
#[test]
fn tcp_with_unusable_tls_files_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("tls");
    std::fs::create_dir(&files).unwrap();
    let ca = tls_support::Ca::new("headroom test CA");
    let good = tls_support::server_files(&files, &ca);
    let garbage = files.join("garbage.pem");
    std::fs::write(&garbage, b"not PEM\n\x00\xff").unwrap();
    let other_key = files.join("other.key");
    std::fs::write(&other_key, ca.server().key).unwrap();
    let missing = files.join("missing.crt");
    let dir_as_key = files.clone();
    let cases = [
        (
            "missing certificate",
            (&missing, &good.tls_key, &good.client_ca),
            "server.tcp.tls_cert",
            &missing,
            "cannot read",
        ),
        (
            "key is a directory",
            (&good.tls_cert, &dir_as_key, &good.client_ca),
            "server.tcp.tls_key",
            &dir_as_key,
            "cannot read",
        ),
        (
            "garbage certificate",
            (&garbage, &good.tls_key, &good.client_ca),
            "server.tcp.tls_cert",
            &garbage,
            "no certificate found",
        ),
        (
            "garbage key",
            (&good.tls_cert, &garbage, &good.client_ca),
            "server.tcp.tls_key",
            &garbage,
            "no private key found",
        ),
        (
            "garbage client CA",
            (&good.tls_cert, &good.tls_key, &garbage),
            "server.tcp.client_ca",
            &garbage,
            "no certificate found",
        ),
        (
            "key of another certificate",
            (&good.tls_cert, &other_key, &good.client_ca),
            "server.tcp.tls_key",
            &other_key,
            "does not belong",
        ),
    ];
    for (label, (cert, key, ca), setting, path, needle) in cases {
        let config = format!(
            r#"
[node]
allocatable_cpu = "4"
allocatable_memory = "8Gi"
[server.tcp]
listen = "127.0.0.1:0"
tls_cert = "{}"
tls_key = "{}"
client_ca = "{}"
[metrics]
listen = ""
"#,
            cert.display(),
            key.display(),
            ca.display()
        );
        for extra in [&[][..], &["--check-config"][..]] {
            let run = serve(tmp.path(), &config, extra);
            assert!(
                !run.status.success(),
                "{label} {extra:?}: TCP was served:\n{}",
                run.stderr
            );
            assert!(
                !run.stderr.contains("panicked"),
                "{label} {extra:?}: {}",
                run.stderr
            );
            let named = format!("{setting} {}", path.display());
            assert!(
                run.stderr.contains(&named),
                "{label} {extra:?}: {named} not in:\n{}",
                run.stderr
            );
            assert!(
                run.stderr.contains(needle),
                "{label} {extra:?}: {needle} not in:\n{}",
                run.stderr
            );
            nothing_applied(tmp.path());
        }
    }
}
