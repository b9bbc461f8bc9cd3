//! The seed's tutorial on a real node: kube-apiserver, kube-scheduler and
//! kube-controller-manager v1.37.2 with a real kubelet v1.37.2 and containerd v2 on this host
//! (`headroom_testkit::Node`), Pods from images built here and pulled through the node's
//! registry mirror. The kubelet marks the resize Deferred and actuates it through the container
//! runtime: nobody plays the node's part. Once with upstream's preemption (the gate on, no
//! shim), once with headroom-shim (the gate off).
//!
//! The host has 2 CPUs, so the seed's quantities are scaled by a quarter
//! (`headroom_testkit::tutorial`): the same shape, a resize that does not fit until the
//! low-priority Pod is gone.
#![allow(clippy::unwrap_used)]

use headroom_testkit::{
    ControlPlane, ControlPlaneOptions, Node, NodeOptions, SchedulerGate,
    gate::{not_root, privileged},
    node::NODE_NAME,
    tutorial::{self, Outcome, reporter},
};

mod real_cluster;

fn start_cluster(gate: bool) -> (ControlPlane, Node) {
    let plane = ControlPlane::start(ControlPlaneOptions {
        scheduler: Some(if gate {
            SchedulerGate::On
        } else {
            SchedulerGate::Off
        }),
        node_controllers: true,
        ..ControlPlaneOptions::default()
    })
    .unwrap_or_else(|e| panic!("the real control plane must start: {e}"));
    let node = Node::start(
        &plane,
        NodeOptions {
            resize_preemption_gate: gate,
            ..NodeOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("the real node must start: {e}"));
    (plane, node)
}

fn the_seed_tutorial(plane: &ControlPlane, node: &Node, extra_log: &dyn Fn() -> String) -> Outcome {
    let outcome = tutorial::run(plane, node, &real_cluster::workspace(), &mut |command, output| {
        println!("$ {command}\n{output}");
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", extra_log()));
    assert!(
        outcome
            .high_priority_reasons
            .iter()
            .any(|r| r == "ResizeDeferred"),
        "the kubelet deferred the resize first: {:?}",
        outcome.high_priority_reasons
    );
    outcome
}

#[test]
fn upstream_scheduler_preempts_for_a_deferred_resize_and_the_real_kubelet_actuates_it() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = start_cluster(true);
    let outcome = the_seed_tutorial(&plane, &node, &|| plane.log_tail("kube-scheduler", 30));
    assert_eq!(
        reporter(&outcome.preempted),
        "default-scheduler",
        "upstream's scheduler preempted: {:#}",
        outcome.preempted
    );
}

#[test]
fn headroom_shim_preempts_for_a_deferred_resize_and_the_real_kubelet_actuates_it() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = start_cluster(false);
    let kubeconfig = headroom_testkit::beside::apply_rbac(&plane, &real_cluster::workspace()).unwrap();
    let (_daemon, socket, daemon_log) =
        real_cluster::start_headroomd(&plane, &kubeconfig, NODE_NAME, &["--probes", "off"]);
    let shim = real_cluster::Shim::start_with_ledger(
        &plane,
        &kubeconfig,
        NODE_NAME,
        &[
            "--ledger",
            "headroomd",
            "--headroomd-socket",
            socket.to_str().unwrap(),
            "--preemption",
            "eviction",
        ],
    );
    let logs = || {
        format!(
            "headroom-shim:\n{}\nheadroomd:\n{}",
            shim.log(),
            std::fs::read_to_string(&daemon_log).unwrap_or_default()
        )
    };
    let outcome = the_seed_tutorial(&plane, &node, &logs);
    assert_eq!(
        reporter(&outcome.preempted),
        "headroom.io/headroom-shim",
        "headroom-shim preempted: {:#}\n{}",
        outcome.preempted,
        logs()
    );
}

/// headroomd and the shim beside the node, as the DaemonSet's ServiceAccount; kept running while
/// the returned processes live.
fn start_headroom(plane: &ControlPlane) -> (headroom_testkit::LoggedChild, real_cluster::Shim) {
    let kubeconfig = headroom_testkit::beside::apply_rbac(plane, &real_cluster::workspace()).unwrap();
    let (daemon, socket, _log) =
        real_cluster::start_headroomd(plane, &kubeconfig, NODE_NAME, &["--probes", "off"]);
    let shim = real_cluster::Shim::start_with_ledger(
        plane,
        &kubeconfig,
        NODE_NAME,
        &[
            "--ledger",
            "headroomd",
            "--headroomd-socket",
            socket.to_str().unwrap(),
            "--preemption",
            "eviction",
        ],
    );
    (daemon, shim)
}

/// Polls `probe` (bounded), failing with the kubelet's log and the shim's.
fn wait_until<T>(
    node: &Node,
    shim: &real_cluster::Shim,
    what: &str,
    timeout: std::time::Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}\nkubelet:\n{}\nheadroom-shim:\n{}",
            node.log_tail("kubelet", 30),
            shim.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn patch_the_resize(plane: &ControlPlane) {
    plane
        .kubectl_ok(&[
            "patch",
            "pod",
            "high-priority-pod",
            "--subresource",
            "resize",
            "--patch",
            tutorial::RESIZE_PATCH,
        ])
        .unwrap();
}

/// Whether the resizer is whole at 1500m: allocated, reported by the runtime, and in its cgroup.
fn resized_whole(plane: &ControlPlane) -> Option<serde_json::Value> {
    let pod = plane.get_json("pod", "default", "high-priority-pod")?;
    let status = &pod["status"]["containerStatuses"][0];
    (status["allocatedResources"]["cpu"] == "1500m"
        && status["resources"]["limits"]["cpu"] == "1500m"
        && tutorial::cpu_quota_us(&pod) == Some(tutorial::RESIZED_QUOTA_US))
    .then_some(pod)
}

/// The kubelet crashes (SIGKILL) just after the resize is asked for, mid-preemption, and
/// starts again on its state: the resize completes whole (allocated, reported and in the
/// cgroup), and the victim is evicted once.
#[test]
fn the_kubelet_crashing_mid_resize_leaves_it_completed_whole_and_the_victim_evicted_once() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, mut node) = start_cluster(false);
    let (_daemon, shim) = start_headroom(&plane);
    let demo = std::fs::read_to_string(real_cluster::workspace().join(tutorial::DEMO_FILE)).unwrap();
    plane.kubectl_stdin(&["apply", "-f", "-"], &demo).unwrap();
    for name in ["low-priority-pod", "high-priority-pod"] {
        wait_until(&node, &shim, name, std::time::Duration::from_secs(90), || {
            tutorial::running(&plane, name).then_some(())
        });
    }
    patch_the_resize(&plane);
    node.restart_kubelet(true, std::time::Duration::from_secs(1))
        .unwrap_or_else(|e| panic!("the kubelet must come back: {e}"));
    let pod = wait_until(
        &node,
        &shim,
        "the resize completed whole after the kubelet's restart",
        std::time::Duration::from_secs(120),
        || resized_whole(&plane),
    );
    assert!(
        pod["status"]["conditions"]
            .as_array()
            .is_none_or(|c| !c.iter().any(|c| c["type"] == "PodResizePending")),
        "no resize left pending: {pod:#}"
    );
    let preempted = plane
        .events_of("default", "low-priority-pod")
        .iter()
        .filter(|e| e["reason"] == "Preempted")
        .count();
    assert_eq!(preempted, 1, "the victim was evicted once:\n{}", shim.log());
}

/// A victim that ignores SIGTERM: the kubelet honours its grace period (3 s) before SIGKILL,
/// then the resize completes. Prints when the resize was actuated relative to the victim's end.
#[test]
fn a_victim_that_ignores_sigterm_gets_its_grace_period_then_the_resize_completes() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = start_cluster(false);
    let (_daemon, shim) = start_headroom(&plane);
    let demo = std::fs::read_to_string(real_cluster::workspace().join(tutorial::DEMO_FILE)).unwrap();
    // The same victim, but its process ignores SIGTERM and it asks for 3 s of grace.
    let stubborn = demo.replace(
        "  priorityClassName: low-priority\n  containers:\n  - name: worker\n    image: nginx\n",
        "  priorityClassName: low-priority\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: worker\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"trap '' TERM; while :; do sleep 1; done\"]\n",
    );
    assert_ne!(stubborn, demo, "the demo's victim was found");
    plane.kubectl_stdin(&["apply", "-f", "-"], &stubborn).unwrap();
    for name in ["low-priority-pod", "high-priority-pod"] {
        wait_until(&node, &shim, name, std::time::Duration::from_secs(90), || {
            tutorial::running(&plane, name).then_some(())
        });
    }
    let patched = std::time::Instant::now();
    patch_the_resize(&plane);
    wait_until(
        &node,
        &shim,
        "the victim's eviction",
        std::time::Duration::from_secs(60),
        || {
            plane
                .get_json("pod", "default", "low-priority-pod")
                .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        },
    );
    let evicted = patched.elapsed();
    let mut actuated = None;
    wait_until(
        &node,
        &shim,
        "the victim gone",
        std::time::Duration::from_secs(60),
        || {
            if actuated.is_none() && resized_whole(&plane).is_some() {
                actuated = Some(patched.elapsed());
            }
            plane
                .get_json("pod", "default", "low-priority-pod")
                .is_none()
                .then_some(())
        },
    );
    let gone = patched.elapsed();
    let grace = gone.saturating_sub(evicted);
    assert!(
        grace >= std::time::Duration::from_millis(2_500),
        "the kubelet killed the victim after {grace:?}, before its 3 s grace period"
    );
    wait_until(
        &node,
        &shim,
        "the resize completed",
        std::time::Duration::from_secs(60),
        || {
            if actuated.is_none() && resized_whole(&plane).is_some() {
                actuated = Some(patched.elapsed());
            }
            actuated
        },
    );
    println!(
        "victim evicted at {evicted:?}, gone at {gone:?} (grace honoured: {grace:?}); resize actuated \
         at {actuated:?}"
    );
}

/// containerd stops just after the resize is asked for and starts again on its state 2 s later
/// (its shims, and so the containers, keep running): the resize completes whole and the victim
/// is evicted once.
#[test]
fn containerd_restarting_mid_resize_leaves_it_completed_whole() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, mut node) = start_cluster(false);
    let (_daemon, shim) = start_headroom(&plane);
    let demo = std::fs::read_to_string(real_cluster::workspace().join(tutorial::DEMO_FILE)).unwrap();
    plane.kubectl_stdin(&["apply", "-f", "-"], &demo).unwrap();
    for name in ["low-priority-pod", "high-priority-pod"] {
        wait_until(&node, &shim, name, std::time::Duration::from_secs(90), || {
            tutorial::running(&plane, name).then_some(())
        });
    }
    let before = plane.get_json("pod", "default", "high-priority-pod").unwrap();
    patch_the_resize(&plane);
    node.restart_containerd(std::time::Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("containerd must come back: {e}"));
    let pod = wait_until(
        &node,
        &shim,
        "the resize completed whole after containerd's restart",
        std::time::Duration::from_secs(120),
        || resized_whole(&plane),
    );
    assert_eq!(
        pod["status"]["containerStatuses"][0]["containerID"],
        before["status"]["containerStatuses"][0]["containerID"],
        "resized in place: the same container, not a restart"
    );
    let preempted = plane
        .events_of("default", "low-priority-pod")
        .iter()
        .filter(|e| e["reason"] == "Preempted")
        .count();
    assert_eq!(preempted, 1, "the victim was evicted once:\n{}", shim.log());
}
