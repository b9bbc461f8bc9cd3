//! The DaemonSet's liveness and readiness probe: `headroomctl health` against headroomd's server
//! (assembled in-process by `headroomd::node::start`, as `headroomd serve --probes off` does).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use headroomd::config::Config;
use headroomd::node::{NodeOptions, ProbeMode};

const HEADROOMCTL: &str = env!("CARGO_BIN_EXE_headroomctl");

async fn health(socket: &Path) -> Output {
    let socket: PathBuf = socket.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Command::new(HEADROOMCTL)
            .arg("--socket")
            .arg(&socket)
            .arg("health")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headroomctl_health_probe_follows_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("headroomd.sock");
    assert!(
        !health(&socket).await.status.success(),
        "no daemon: the probe fails"
    );

    let mut config = Config::default();
    config.server.socket_path = socket.clone();
    config.metrics_listen = None;
    let mut options = NodeOptions::new(config);
    options.probes = ProbeMode::Off;
    options.intent_dir = tmp.path().join("intents");
    let node = headroomd::node::start(options).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = health(&socket).await;
    while !last.status.success() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = health(&socket).await;
    }
    node.shutdown().await.unwrap();
    assert!(
        last.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&last.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&last.stdout).trim(), "SERVING");
}

async fn health_of(socket: &Path, service: &str) -> String {
    let (socket, service) = (socket.to_path_buf(), service.to_string());
    tokio::task::spawn_blocking(move || {
        let out = Command::new(HEADROOMCTL)
            .arg("--socket")
            .arg(&socket)
            .args(["health", "--service", &service])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
    .await
    .unwrap()
}

async fn wait_for(socket: &Path, service: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = health_of(socket, service).await;
        if got == want || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Readiness follows the Pod source: NOT_SERVING until it has listed, SERVING once it has,
/// NOT_SERVING again when its watch fails; liveness ("liveness") stays SERVING throughout, so a
/// watch outage makes the Pod unready but never gets it restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_pod_source_and_liveness_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("headroomd.sock");
    let mut config = Config::default();
    config.server.socket_path = socket.clone();
    config.metrics_listen = None;
    let mut options = NodeOptions::new(config);
    options.probes = ProbeMode::Off;
    options.intent_dir = tmp.path().join("intents");
    // As `headroomd serve --pods-from kube` does before its watches have listed.
    headroomd::kube_source::prime(&options.pod_source);
    let pods = options.pod_source.clone();
    let node = headroomd::node::start(options).await.unwrap();

    let before_list = health_of(&socket, "").await;
    let api_before_list = health_of(&socket, "headroom.v1.Headroom").await;
    let live_before_list = wait_for(&socket, "liveness", "SERVING").await;
    // Still not ready a while later: nothing has listed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = health_of(&socket, "").await;
    pods.set_live(true);
    let listed = wait_for(&socket, "", "SERVING").await;
    pods.set_live(false);
    let failed = wait_for(&socket, "", "NOT_SERVING").await;
    let live_while_failed = health_of(&socket, "liveness").await;
    node.shutdown().await.unwrap();

    assert_eq!(before_list, "NOT_SERVING");
    assert_eq!(api_before_list, "NOT_SERVING");
    assert_eq!(still, "NOT_SERVING");
    assert_eq!(live_before_list, "SERVING");
    assert_eq!(listed, "SERVING");
    assert_eq!(failed, "NOT_SERVING");
    assert_eq!(live_while_failed, "SERVING");
}
