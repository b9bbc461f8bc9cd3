//! headroom's two programs beside a real cluster, each as the DaemonSet runs it and with its log
//! in the cluster's folder: `headroomd serve --pods-from kube` and `headroom-shim kube`, as the
//! DaemonSet's ServiceAccount (so RBAC applies to them).
use std::{
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use crate::{ControlPlane, LoggedChild};

/// A running headroomd: its process, socket and log.
pub struct Headroomd {
    pub process: LoggedChild,
    pub socket: PathBuf,
    pub log: PathBuf,
}

/// Starts `binary serve` for `node` with the Node and its Pods from the API server (as
/// `kubeconfig`), plus `extra` (`--probes off` where the kernel is not the point). Returns once
/// it serves, or the error with its log.
pub fn start_headroomd(
    plane: &ControlPlane,
    binary: &Path,
    kubeconfig: &Path,
    node: &str,
    extra: &[&str],
) -> Result<Headroomd, String> {
    let socket = plane.dir().join("headroomd.sock");
    let log = plane.dir().join("headroomd.log");
    let mut process = LoggedChild::spawn(
        Command::new(binary)
            .args(["serve", "--pods-from", "kube", "--kube-node", node])
            .args(extra)
            .arg("--socket")
            .arg(&socket)
            .arg("--intent-dir")
            .arg(plane.dir().join("intents"))
            .args(["--metrics-listen", ""])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info"),
        &log,
    )
    .map_err(|e| format!("start {}: {e}", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        let exited = process.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            return Err(format!(
                "headroomd did not start serving ({}); its log:\n{}",
                exited.map_or_else(|| "30 s".to_string(), |s| s.to_string()),
                process.log()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(Headroomd { process, socket, log })
}

/// Starts `binary kube` for `node` as `kubeconfig`; `extra` names the ledger and the
/// preemption mode.
pub fn start_shim(
    plane: &ControlPlane,
    binary: &Path,
    kubeconfig: &Path,
    node: &str,
    extra: &[&str],
) -> Result<LoggedChild, String> {
    LoggedChild::spawn(
        Command::new(binary)
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
    .map_err(|e| format!("start {}: {e}", binary.display()))
}

/// How the shim removes its victims (`--preemption`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// As the DaemonSet and kube-scheduler: `DisruptionTarget`, then a delete.
    Delete,
    /// Through the Eviction API, which enforces PodDisruptionBudgets (and which kube-apiserver's
    /// audit log here records, for tests that count evictions).
    Eviction,
}

impl Preemption {
    pub fn flag(self) -> &'static str {
        match self {
            Preemption::Delete => "delete",
            Preemption::Eviction => "eviction",
        }
    }
}

/// headroomd and headroom-shim on one node, as the DaemonSet pairs them (the shim reserving in
/// headroomd's ledger); both stop when this is dropped.
pub struct Headroom {
    pub daemon: Headroomd,
    pub shim: LoggedChild,
}

/// Starts `headroomd` (without its probes: these runs are about the cluster) and then `shim`
/// beside it for `node`, both as `kubeconfig`, the shim removing victims by `preemption`.
pub fn start_headroom(
    plane: &ControlPlane,
    headroomd: &Path,
    shim: &Path,
    kubeconfig: &Path,
    node: &str,
    preemption: Preemption,
) -> Result<Headroom, String> {
    let daemon = start_headroomd(plane, headroomd, kubeconfig, node, &["--probes", "off"])?;
    let shim = start_paired_shim(plane, shim, kubeconfig, node, &daemon.socket, preemption, None)?;
    Ok(Headroom { daemon, shim })
}

/// Starts `binary kube` for `node` as the DaemonSet pairs it with headroomd: reserving in the
/// ledger of the headroomd at `socket`, removing victims by `preemption`; `resize_timeout`
/// (also every reservation's TTL) when not the shim's default.
pub fn start_paired_shim(
    plane: &ControlPlane,
    binary: &Path,
    kubeconfig: &Path,
    node: &str,
    socket: &Path,
    preemption: Preemption,
    resize_timeout: Option<Duration>,
) -> Result<LoggedChild, String> {
    let socket = socket.display().to_string();
    let timeout = resize_timeout.map(|t| t.as_secs().to_string());
    let mut args = vec![
        "--ledger",
        "headroomd",
        "--headroomd-socket",
        &socket,
        "--preemption",
        preemption.flag(),
    ];
    if let Some(timeout) = &timeout {
        args.extend(["--resize-timeout-seconds", timeout]);
    }
    start_shim(plane, binary, kubeconfig, node, &args)
}

/// The reservations in the ledger of the headroomd at `socket`, as `headroomctl headroom -o
/// json` prints them (`headroomctl`: that binary).
pub fn reservations(headroomctl: &Path, socket: &Path) -> Result<Vec<serde_json::Value>, String> {
    let out = Command::new(headroomctl)
        .arg("--socket")
        .arg(socket)
        .args(["headroom", "-o", "json"])
        .output()
        .map_err(|e| format!("run {}: {e}", headroomctl.display()))?;
    if !out.status.success() {
        return Err(format!(
            "headroomctl headroom: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let snapshot: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("headroomctl's JSON: {e}"))?;
    // proto3's JSON mapping leaves an empty list out.
    Ok(snapshot["reservations"].as_array().cloned().unwrap_or_default())
}

/// The namespace, ServiceAccount, RBAC and FlowSchema from `deploy/kubernetes/`, applied with kubectl, and
/// a kubeconfig of that ServiceAccount.
pub fn apply_rbac(plane: &ControlPlane, workspace: &Path) -> Result<PathBuf, String> {
    let deploy = workspace.join("deploy/kubernetes");
    for manifest in ["namespace.yaml", "rbac.yaml", "flowschema.yaml"] {
        let path = deploy.join(manifest);
        plane
            .kubectl_ok(&["apply", "-f", &path.display().to_string()])
            .map_err(|e| e.to_string())?;
    }
    plane
        .service_account_kubeconfig("headroom-system", "headroom")
        .map_err(|e| e.to_string())
}
