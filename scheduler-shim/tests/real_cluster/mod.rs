//! What the tests against a real cluster (`kube_real_apiserver.rs`, `kube_real_node.rs`) start
//! beside it: `headroom-shim kube` and `headroomd serve --pods-from kube`, each as the DaemonSet
//! runs it, with its log in the cluster's folder.
#![allow(dead_code)] // each test binary uses a part of it
use std::{
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use headroom_testkit::{ControlPlane, LoggedChild};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub struct Shim {
    pub process: LoggedChild,
    /// Other logs a failure should show (headroomd's).
    pub beside: Vec<PathBuf>,
}

impl Shim {
    /// `headroom-shim kube` for `node` with its own (local) ledger and `extra` arguments.
    pub fn start(plane: &ControlPlane, kubeconfig: &Path, node: &str, extra: &[&str]) -> Shim {
        let mut args = vec!["--ledger", "local"];
        args.extend_from_slice(extra);
        Shim::start_with_ledger(plane, kubeconfig, node, &args)
    }

    /// `headroom-shim kube` for `node`; `extra` names the ledger.
    pub fn start_with_ledger(plane: &ControlPlane, kubeconfig: &Path, node: &str, extra: &[&str]) -> Shim {
        let process = LoggedChild::spawn(
            Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
                .args([
                    "kube",
                    "--node-name",
                    node,
                    "--metrics-addr",
                    "127.0.0.1:0",
                    "--resync-seconds",
                    "1",
                ])
                .args(extra)
                .env("KUBECONFIG", kubeconfig)
                .env("RUST_LOG", "info")
                // The shim reads its own variable (it ignores RUST_LOG today).
                .env("HEADROOM_LOG", "info"),
            plane.dir().join("headroom-shim.log"),
        )
        .unwrap();
        Shim {
            process,
            beside: Vec::new(),
        }
    }

    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// The debug build of `headroomd`, which `cargo test --workspace` builds for the daemon's own
/// tests (a test of this crate cannot name another package's binary), or `HEADROOMD_BIN`.
pub fn headroomd_binary() -> PathBuf {
    if let Some(binary) = std::env::var_os("HEADROOMD_BIN") {
        return PathBuf::from(binary);
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from);
    let binary = target.join("debug/headroomd");
    assert!(
        binary.is_file(),
        "{} is not built: run `cargo build -p headroom-daemon` (cargo test --workspace builds it)",
        binary.display()
    );
    binary
}

/// `headroomd serve` as the DaemonSet runs it: the Node and its Pods from the API server, as
/// the ServiceAccount with the headroom-daemon ClusterRole, plus `extra` (`--probes off` where
/// the kernel is not the point). Returns once it serves, with its socket and log.
pub fn start_headroomd(
    plane: &ControlPlane,
    kubeconfig: &Path,
    node: &str,
    extra: &[&str],
) -> (LoggedChild, PathBuf, PathBuf) {
    let socket = plane.dir().join("headroomd.sock");
    let daemon_log = plane.dir().join("headroomd.log");
    let daemon = LoggedChild::spawn(
        Command::new(headroomd_binary())
            .args(["serve", "--pods-from", "kube", "--kube-node", node])
            .args(extra)
            .arg("--socket")
            .arg(&socket)
            .arg("--intent-dir")
            .arg(plane.dir().join("intents"))
            .args(["--metrics-listen", ""])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info"),
        &daemon_log,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "headroomd did not start serving; its log:\n{}",
            std::fs::read_to_string(&daemon_log).unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(100));
    }
    (daemon, socket, daemon_log)
}
