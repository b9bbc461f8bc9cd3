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
