//! The harness itself: the real programs start, answer as v1.37.2, honour RBAC for a
//! ServiceAccount's token, and are gone (processes and data) once the control plane is dropped.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use headroom_testkit::{ControlPlane, ControlPlaneOptions, KUBERNETES_VERSION};

fn pids_of(dir: &std::path::Path) -> Vec<String> {
    // Every component's command line names the control plane's directory.
    let out = std::process::Command::new("pgrep")
        .args(["-f", dir.to_str().unwrap()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn starts_serves_v1_37_2_applies_rbac_and_cleans_up() {
    let plane = ControlPlane::start(ControlPlaneOptions::default())
        .unwrap_or_else(|e| panic!("the control plane must start: {e}"));
    let dir = plane.dir().to_path_buf();
    let version = plane.kubectl_ok(&["version", "-o", "json"]).unwrap();
    let version: serde_json::Value = serde_json::from_str(&version).unwrap();
    assert_eq!(version["serverVersion"]["gitVersion"], KUBERNETES_VERSION);
    assert_eq!(version["clientVersion"]["gitVersion"], KUBERNETES_VERSION);

    // A ServiceAccount without any binding may do nothing: RBAC is really on.
    plane.kubectl_ok(&["create", "serviceaccount", "nobody"]).unwrap();
    let nobody = plane.service_account_kubeconfig("default", "nobody").unwrap();
    let denied = plane
        .kubectl_as(&nobody)
        .args(["get", "pods", "-A"])
        .output()
        .unwrap();
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("Forbidden"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );

    assert!(
        pids_of(&dir).len() >= 3,
        "etcd, kube-apiserver, kube-controller-manager run"
    );
    drop(plane);
    std::thread::sleep(Duration::from_millis(200));
    assert!(pids_of(&dir).is_empty(), "every component is stopped");
    assert!(!dir.exists(), "the data directory is removed");
}

#[test]
fn a_missing_program_is_one_clear_error() {
    let missing = tempfile::tempdir().unwrap();
    let err = headroom_testkit::control_plane::start_with_bin(missing.path(), ControlPlaneOptions::default())
        .err()
        .expect("no programs, no control plane");
    let text = err.to_string();
    assert!(
        text.contains("etcd") && text.contains("cargo xtask build-k8s"),
        "{text}"
    );
}
