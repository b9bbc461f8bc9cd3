//! The seed's tutorial as the commands an operator types, against a real cluster (a
//! [`ControlPlane`] and its [`Node`]), each shown with its real output: apply the demo, list
//! the Pods, resize high-priority-pod through `/resize`, read both Pods' Events and the
//! allocated resources. Whoever preempts (upstream's kube-scheduler or headroom-shim) and the
//! kubelet that defers and actuates are the real programs; this module only types and waits.
use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;
use thiserror::Error;

use crate::{ControlPlane, Node};

/// The seed's preemption-demo.yaml at a quarter of its CPU (this machine has 2).
pub const DEMO_FILE: &str = "scheduler-shim/examples/preemption-demo-2cpu.yaml";

/// The seed's resize at a quarter: 4 → 6 CPUs becomes 1 → 1500m.
pub const RESIZE_PATCH: &str = r#"{"spec":{"containers":[{"name":"app", "resources":{"requests":{"cpu":"1500m"}, "limits":{"cpu":"1500m"}}}]}}"#;

/// `kubectl ARGS` that asks for the resize.
pub const RESIZE_ARGS: [&str; 7] = [
    "patch",
    "pod",
    "high-priority-pod",
    "--subresource",
    "resize",
    "--patch",
    RESIZE_PATCH,
];

/// The CFS quota the resize ends at (1500m at the default 100 ms period).
pub const RESIZED_QUOTA_US: i64 = 150_000;

#[derive(Debug, Error)]
pub enum TutorialError {
    #[error("`{command}` failed:\n{stderr}")]
    Command { command: String, stderr: String },
    #[error("timed out after {waited:?} waiting for {what}\nkubelet:\n{kubelet}\nkubectl get pods:\n{pods}")]
    Timeout {
        what: String,
        waited: Duration,
        kubelet: String,
        pods: String,
    },
}

/// What the run showed.
#[derive(Debug)]
pub struct Outcome {
    /// The Preempted Event of low-priority-pod (who reported it says who preempted).
    pub preempted: Value,
    /// Reasons of each Pod's Events, oldest first.
    pub low_priority_reasons: Vec<String>,
    pub high_priority_reasons: Vec<String>,
    /// From the resize patch to the new quota in the container's cgroup.
    pub patch_to_actuated: Duration,
}

/// Who recorded an Event: the reporting controller (events.k8s.io) or the source component.
pub fn reporter(event: &Value) -> &str {
    event["reportingComponent"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| event["source"]["component"].as_str())
        .unwrap_or("")
}

/// Runs the tutorial; `show` gets each command as typed and its output.
pub fn run(
    plane: &ControlPlane,
    node: &Node,
    workspace: &Path,
    show: &mut dyn FnMut(&str, &str),
) -> Result<Outcome, TutorialError> {
    // Run from the workspace, so the demo file is named as an operator would type it.
    let kubectl = |args: &[&str], show: &mut dyn FnMut(&str, &str)| -> Result<String, TutorialError> {
        let typed = format!("kubectl {}", shell_words(args));
        let failed = |stderr: String| TutorialError::Command {
            command: typed.clone(),
            stderr,
        };
        let out = plane
            .kubectl()
            .current_dir(workspace)
            .args(args)
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            return Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        let output = String::from_utf8_lossy(&out.stdout).into_owned();
        show(&typed, &output);
        Ok(output)
    };
    kubectl(
        &[
            "get",
            "nodes",
            "-o",
            "custom-columns=NAME:.metadata.name,ALLOCATABLE_CPU:.status.allocatable.cpu",
        ],
        show,
    )?;
    kubectl(&["apply", "-f", DEMO_FILE], show)?;
    for name in ["low-priority-pod", "high-priority-pod"] {
        wait(
            plane,
            node,
            &format!("{name} to run"),
            Duration::from_secs(120),
            || plane.pod_running("default", name).then_some(()),
        )?;
    }
    kubectl(&["get", "pods"], show)?;

    let patched = Instant::now();
    kubectl(&RESIZE_ARGS, show)?;
    // The kubelet defers (250m are left, less what headroom's DaemonSet requests), the victim
    // goes, the kubelet actuates.
    wait(
        plane,
        node,
        "high-priority-pod's 1500m in its container's cgroup",
        Duration::from_secs(180),
        || {
            plane
                .get_json("pod", "default", "high-priority-pod")
                .and_then(|pod| cpu_quota_us(&pod))
                .filter(|quota| *quota == RESIZED_QUOTA_US)
        },
    )?;
    let patch_to_actuated = patched.elapsed();
    let low_priority_reasons = wait(
        plane,
        node,
        "low-priority-pod's Preempted and Killing Events",
        Duration::from_secs(30),
        || {
            let reasons = reasons(plane, "low-priority-pod");
            (reasons.iter().any(|r| r == "Preempted") && reasons.iter().any(|r| r == "Killing"))
                .then_some(reasons)
        },
    )?;
    let high_priority_reasons = wait(
        plane,
        node,
        "high-priority-pod's ResizeCompleted Event",
        Duration::from_secs(30),
        || {
            let reasons = reasons(plane, "high-priority-pod");
            reasons.iter().any(|r| r == "ResizeCompleted").then_some(reasons)
        },
    )?;
    for name in ["low-priority-pod", "high-priority-pod"] {
        kubectl(
            &[
                "get",
                "events",
                "--field-selector",
                &format!("involvedObject.name={name}"),
                "--sort-by=.metadata.creationTimestamp",
            ],
            show,
        )?;
    }
    kubectl(
        &[
            "get",
            "pod",
            "high-priority-pod",
            "-o",
            "jsonpath={.status.containerStatuses[0].allocatedResources}",
        ],
        show,
    )?;
    let preempted = plane
        .events_of("default", "low-priority-pod")
        .into_iter()
        .find(|e| e["reason"] == "Preempted")
        .unwrap_or(Value::Null);
    Ok(Outcome {
        preempted,
        low_priority_reasons,
        high_priority_reasons,
        patch_to_actuated,
    })
}

fn reasons(plane: &ControlPlane, name: &str) -> Vec<String> {
    plane
        .events_of("default", name)
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

/// The CFS quota of the Pod's first container, read from its cgroup on this host with the
/// kubelet's cgroupfs driver (`kubepods[/<qos>]/pod<uid>/<container id>`): `cpu.cfs_quota_us` on
/// cgroup v1 (the cpu controller mounted alone or with cpuacct), `cpu.max` on v2. `None` while
/// there is no limit or no such cgroup.
pub fn cpu_quota_us(pod: &Value) -> Option<i64> {
    let uid = pod["metadata"]["uid"].as_str()?;
    let id = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()?
        .trim_start_matches("containerd://");
    let mount = Path::new("/sys/fs/cgroup");
    let hierarchies = [
        (mount.join("cpu"), "cpu.cfs_quota_us"),
        (mount.join("cpu,cpuacct"), "cpu.cfs_quota_us"),
        (mount.to_path_buf(), "cpu.max"),
    ];
    hierarchies.iter().find_map(|(hierarchy, file)| {
        let kubepods = hierarchy.join("kubepods");
        // Guaranteed Pods sit directly under kubepods; the others under their QoS class.
        let text = ["", "burstable", "besteffort"].iter().find_map(|qos| {
            let dir = kubepods.join(qos).join(format!("pod{uid}")).join(id);
            std::fs::read_to_string(dir.join(file)).ok()
        })?;
        // v1: `150000`; v2: `150000 100000` (or `max 100000`).
        text.split_whitespace().next()?.parse().ok()
    })
}

fn wait<T>(
    plane: &ControlPlane,
    node: &Node,
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T, TutorialError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return Ok(found);
        }
        if Instant::now() > deadline {
            return Err(TutorialError::Timeout {
                what: what.to_string(),
                waited: timeout,
                kubelet: node.log_tail("kubelet", 40),
                pods: plane
                    .kubectl_ok(&["get", "pods", "-A", "-o", "wide"])
                    .unwrap_or_default(),
            });
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// `args` as a shell would need them typed (single quotes where needed).
fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|arg| {
            if arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,".contains(c))
            {
                (*arg).to_string()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
