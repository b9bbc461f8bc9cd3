//! Python `grpcio` (from PyPI) talks to an in-process headroomd over a temp Unix socket, with
//! stubs generated at test time from the `.proto` by `grpc_tools.protoc`.
//!
//! Without python3/grpcio the test prints SKIPPED and passes, unless HEADROOM_REQUIRE_PRIVILEGED=1
//! (CI), where it fails.
#![allow(clippy::unwrap_used)]

mod api_common;

use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use api_common::{cpu_files, start};
use headroomd::server::AccessPolicy;

fn skip(reason: &str) {
    headroom_testkit::gate::privileged(
        "api_python",
        Some(format!("{reason} (install with `cargo xtask setup`)")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_calls_get_and_watch() {
    let probe = Command::new("python3")
        .args(["-c", "import grpc, grpc_tools"])
        .output();
    match probe {
        Err(e) => return skip(&format!("python3 not runnable: {e}")),
        Ok(o) if !o.status.success() => {
            return skip(&format!(
                "grpcio/grpcio-tools missing: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(_) => {}
    }
    let stubs = tempfile::tempdir().unwrap();
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/proto");
    let out = Command::new("python3")
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto_root.display()))
        .arg(format!("--python_out={}", stubs.path().display()))
        .arg(format!("--grpc_python_out={}", stubs.path().display()))
        .arg("headroom/v1/headroom.proto")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "protoc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let d = start(AccessPolicy::default()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(stubs.path())
        .arg(&d.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str(&line) {
                Ok(v) => {
                    let _ = tx.send(v);
                }
                Err(_) => eprintln!("python: {line}"),
            }
        }
    });
    let next = async |rx: &mut tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>| {
        tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("python client timed out")
            .expect("python client exited early")
    };

    let get = next(&mut rx).await;
    assert_eq!(get["check"], "get", "{get}");
    assert_eq!(get["node_name"], "test-node");
    assert_eq!(get["cpu_allocatable"], 8000);
    assert_eq!(get["cpu_headroom"], 7000);
    assert_eq!(get["memory_allocatable"], 16i64 << 30);
    assert_eq!(get["pods"], serde_json::json!(["uid-1"]));

    let nf = next(&mut rx).await;
    assert_eq!(nf["code"], "NOT_FOUND", "{nf}");

    let watching = next(&mut rx).await;
    assert_eq!(watching["check"], "watching");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let tx = d.pipeline().sender();
    tx.send(cpu_files(11, t0, 1000, 0)).unwrap();
    tx.send(cpu_files(11, t0 + Duration::from_millis(100), 1010, 5))
        .unwrap();
    let watch = next(&mut rx).await;
    assert_eq!(watch["check"], "watch", "{watch}");
    assert_eq!(watch["pod"], "uid-1");
    assert_eq!(watch["container"], "app");
    assert_eq!(watch["throttled_ratio"], 0.5);
    assert_eq!(watch["stale"], false);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "python client failed: {status}");
}
