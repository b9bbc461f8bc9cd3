//! What the tests against a real cluster (`kube_real_apiserver.rs`, `kube_real_node.rs`) start
//! beside it (`headroom_testkit::beside`), with this build's binaries.
#![allow(dead_code)] // each test binary uses a part of it
use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use headroom_testkit::{ControlPlane, LoggedChild, beside};

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
        let binary = Path::new(env!("CARGO_BIN_EXE_headroom-shim"));
        let process = beside::start_shim(plane, binary, kubeconfig, node, extra).unwrap();
        Shim {
            process,
            beside: Vec::new(),
        }
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Its `/metrics`, from the address it logged (`--metrics-addr 127.0.0.1:0`); `None` while
    /// it has not logged that address yet (it binds after reading its kubeconfig). The newest
    /// address: the log is appended across restarts.
    pub fn try_metrics(&self) -> Option<String> {
        let log = headroom_testkit::process::strip_ansi(&self.log());
        let addr = log
            .lines()
            .rfind(|line| line.contains("serving /metrics"))
            .and_then(|line| line.split("addr=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())?
            .to_string();
        Some(http_get(&addr, "/metrics"))
    }

    /// Its `/metrics`, once it serves them: a test reads them after the shim has acted.
    pub fn metrics(&self) -> String {
        self.try_metrics()
            .unwrap_or_else(|| panic!("the shim logged no metrics address:\n{}", self.log()))
    }
}

/// `GET path` on `addr` over plain HTTP/1.0: the reply, headers and body.
pub fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// The value of the sample `series` (name and labels, exactly as exposed) in `metrics`.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
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

/// headroomd and the shim for the real node, as the DaemonSet pairs them, with this build's
/// binaries and the DaemonSet's ServiceAccount (`deploy/kubernetes/` RBAC applied).
pub fn start_headroom(plane: &ControlPlane) -> beside::Headroom {
    let kubeconfig = beside::apply_rbac(plane, &workspace()).unwrap();
    beside::start_headroom(
        plane,
        &headroomd_binary(),
        Path::new(env!("CARGO_BIN_EXE_headroom-shim")),
        &kubeconfig,
        headroom_testkit::node::NODE_NAME,
        beside::Preemption::Delete,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// headroomd for `node` (`headroom_testkit::beside::start_headroomd`): its process, socket, log.
pub fn start_headroomd(
    plane: &ControlPlane,
    kubeconfig: &Path,
    node: &str,
    extra: &[&str],
) -> (LoggedChild, PathBuf, PathBuf) {
    let daemon = beside::start_headroomd(plane, &headroomd_binary(), kubeconfig, node, extra)
        .unwrap_or_else(|e| panic!("{e}"));
    (daemon.process, daemon.socket, daemon.log)
}

/// Polls `probe` every 50 ms until it returns `Some`; after `timeout`, fails naming `what`, with
/// `logs()` (the programs' log tails that say why).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
    logs: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The seed's step: high-priority-pod to 6 CPU, Deferred with the kubelet's message.
pub fn defer_the_seed_resize(plane: &ControlPlane) {
    resize_and_defer(
        plane,
        "high-priority-pod",
        "app",
        "6",
        "Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000",
    );
}

/// `kubectl patch pod NAME --subresource resize` to `cpu`, then the kubelet's Deferred verdict.
pub fn resize_and_defer(plane: &ControlPlane, name: &str, container: &str, cpu: &str, message: &str) {
    let resize = serde_json::json!({"spec": {"containers": [{"name": container, "resources": {
        "requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
    .to_string();
    plane
        .kubectl_ok(&["patch", "pod", name, "--subresource=resize", "-p", &resize])
        .unwrap();
    let condition = serde_json::json!({"status": {"conditions": [{
        "type": "PodResizePending", "status": "True", "reason": "Deferred", "message": message,
        "lastTransitionTime": now_rfc3339(),
    }]}})
    .to_string();
    plane
        .kubectl_ok(&["patch", "pod", name, "--subresource=status", "-p", &condition])
        .unwrap();
}

/// Now, RFC 3339 (the API server runs on this machine's clock).
pub fn now_rfc3339() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
