//! The cluster file and the live cluster agree: `headroom-shim plan` given what
//! `kubectl get pods,nodes,pdb,priorityclasses -A -o yaml` prints from a real kube-apiserver
//! v1.37.2 decides as `headroom-shim kube` then does on that same API server.
//!
//! The cluster: the seed's node and Pods (`examples/seed-cluster.yaml`) plus a second
//! low-priority Pod of 1 CPU, so that the decision has a candidate to reprieve: the seed's
//! resize to 6 CPU needs 1950m, which only `low-priority-pod` (3 CPU) frees alone. No kubelet
//! runs: the test writes the kubelet's `Deferred` verdict itself, as upstream's integration
//! test does.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use headroom_testkit::{ControlPlane, ControlPlaneOptions, load_cluster_file};
use serde_json::Value;

mod real_cluster;
use real_cluster::{Shim, defer_the_seed_resize, workspace};

const NODE: &str = "kind-control-plane";

/// A second low-priority Pod, running beside the seed's.
const BATCH_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: batch-pod
  namespace: default
  labels: {app: batch}
spec:
  nodeName: kind-control-plane
  priorityClassName: low-priority
  terminationGracePeriodSeconds: 30
  containers:
  - name: worker
    image: busybox
    resources:
      requests: {cpu: "1", memory: 100Mi}
status:
  phase: Running
  startTime: "2026-09-10T10:00:05Z"
  conditions:
  - {type: PodScheduled, status: "True", lastTransitionTime: "2026-09-10T10:00:05Z"}
  - {type: Ready, status: "True", lastTransitionTime: "2026-09-10T10:00:07Z"}
  containerStatuses:
  - name: worker
    image: docker.io/library/busybox:latest
    imageID: ""
    ready: true
    restartCount: 0
    started: true
    state: {running: {startedAt: "2026-09-10T10:00:06Z"}}
    allocatedResources: {cpu: "1", memory: 100Mi}
    resources:
      requests: {cpu: "1", memory: 100Mi}
"#;

/// Pods that are neither gone nor terminating, as `namespace/name`.
fn running(plane: &ControlPlane) -> BTreeSet<String> {
    let out = plane.kubectl_ok(&["get", "pods", "-A", "-o", "json"]).unwrap();
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap(),
                p["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn plan_on_kubectl_get_output_decides_as_the_live_shim_does() {
    let plane = ControlPlane::start(ControlPlaneOptions::default())
        .unwrap_or_else(|e| panic!("the real control plane must start: {e}"));
    let deploy = workspace().join("deploy/kubernetes");
    for manifest in ["namespace.yaml", "rbac.yaml"] {
        plane
            .kubectl_ok(&["apply", "-f", deploy.join(manifest).to_str().unwrap()])
            .unwrap();
    }
    let seed =
        std::fs::read_to_string(workspace().join("scheduler-shim/examples/seed-cluster.yaml")).unwrap();
    load_cluster_file(&plane, &seed).unwrap();
    load_cluster_file(&plane, BATCH_POD).unwrap();

    // The seed's step: high-priority-pod to 6 CPU through the resize subresource, then the
    // kubelet's Deferred verdict.
    defer_the_seed_resize(&plane);

    // What an operator would hand to `plan`: the API server's own objects, as kubectl prints them.
    let dump = plane
        .kubectl_ok(&["get", "pods,nodes,pdb,priorityclasses", "-A", "-o", "yaml"])
        .unwrap();
    let file = plane.dir().join("kubectl-get.yaml");
    std::fs::write(&file, &dump).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom-shim"))
        .args(["plan", "--json", "--cluster"])
        .arg(&file)
        .args(["--resize", "default/high-priority-pod"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plan on kubectl's output failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
    let planned: BTreeSet<String> = decision["victims"]
        .as_array()
        .unwrap_or_else(|| panic!("no victims in {decision}"))
        .iter()
        .map(|v| {
            format!(
                "{}/{}",
                v["namespace"].as_str().unwrap_or("default"),
                v["name"].as_str().unwrap()
            )
        })
        .collect();

    // The live shim, as the DaemonSet's ServiceAccount, on the same API server.
    let before = running(&plane);
    let kubeconfig = plane
        .service_account_kubeconfig("headroom-system", "headroom")
        .unwrap();
    let shim = Shim::start(&plane, &kubeconfig, NODE, &[]);
    // Settled once nothing changed for 5 s after the first eviction (30 s at most).
    let started = Instant::now();
    let mut evicted = BTreeSet::new();
    let mut since = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let gone: BTreeSet<String> = before.difference(&running(&plane)).cloned().collect();
        if gone != evicted {
            evicted = gone;
            since = Instant::now();
        }
        if !evicted.is_empty() && since.elapsed() >= Duration::from_secs(5) {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let shim_log = shim.log();
    drop(shim);
    println!("plan on kubectl get -o yaml: {planned:?}; headroom-shim kube evicted: {evicted:?}");
    assert_eq!(
        planned,
        BTreeSet::from(["default/low-priority-pod".to_string()]),
        "plan on the real objects: the seed's victim, batch-pod reprieved ({decision})"
    );
    assert_eq!(
        evicted, planned,
        "the live shim evicted what plan decided from kubectl's output; shim log:\n{shim_log}"
    );
}
