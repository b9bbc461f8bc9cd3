//! The DaemonSet runs `headroomd` with flags written in YAML; this checks the binary accepts
//! exactly those flags (a renamed flag would otherwise surface only as a crash loop on nodes).
#![allow(clippy::unwrap_used)]

use std::process::Command;

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

fn container_args(manifest: &str, container: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{}/../{manifest}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let daemonset: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let containers = daemonset["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap();
    let found = containers
        .iter()
        .find(|c| c["name"].as_str() == Some(container))
        .unwrap();
    found["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace("$(NODE_NAME)", "node-a"))
        .collect()
}

#[test]
fn daemonset_flags_are_accepted_by_headroomd() {
    let args = container_args("deploy/kubernetes/daemonset.yaml", "headroomd");
    assert_eq!(args.first().map(String::as_str), Some("serve"));
    assert!(
        args.iter().any(|a| a == "--pods-from=kube"),
        "cluster mode counts the node's Pods from the API server: {args:?}"
    );
    let output = Command::new(HEADROOMD)
        .args(&args)
        .arg("--check-config")
        // The downward API's NODE_NAME (spec.nodeName), as the manifest sets it.
        .env("NODE_NAME", "node-a")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "headroomd {args:?} --check-config failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains("node-a"),
        "the node name from the downward API is used:\n{printed}"
    );
}

#[test]
fn a_misspelt_flag_is_refused() {
    let output = Command::new(HEADROOMD)
        .args(["serve", "--metrics-adress=0.0.0.0:1", "--check-config"])
        .output()
        .unwrap();
    assert!(!output.status.success());
}

/// `--pods-from kube` needs the Node's name: `--kube-node`, else `NODE_NAME`; without either,
/// the configuration is refused before anything starts.
#[test]
fn pods_from_kube_needs_a_node_name() {
    let check = |extra: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(HEADROOMD);
        cmd.args(["serve", "--pods-from", "kube", "--check-config"])
            .args(extra);
        cmd.env_remove("NODE_NAME");
        if let Some(n) = env {
            cmd.env("NODE_NAME", n);
        }
        cmd.output().unwrap()
    };
    let out = check(&[], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--kube-node") && stderr.contains("NODE_NAME"),
        "{stderr}"
    );
    let out = check(&[], Some("node-b"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("node-b"));
    let out = check(&["--kube-node", "node-c"], Some("node-b"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("node-c"));
}
