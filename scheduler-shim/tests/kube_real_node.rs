//! The seed's tutorial on a real node: kube-apiserver, kube-scheduler and
//! kube-controller-manager v1.37.2 with a real kubelet v1.37.2 and containerd v2 on this host
//! (`headroom_testkit::Node`), Pods from images built here and pulled through the node's
//! registry mirror. The kubelet marks the resize Deferred and actuates it through the container
//! runtime: nobody plays the node's part. Once with upstream's preemption (the gate on, no
//! shim), once with headroom-shim (the gate off), and with headroom-shim under faults of the
//! node's own programs.
//!
//! The host has 2 CPUs, so the seed's quantities are scaled by a quarter
//! (`headroom_testkit::tutorial`): the same shape, a resize that does not fit until the
//! low-priority Pod is gone.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use headroom_testkit::{
    ControlPlane, Node,
    beside::Headroom,
    gate::{not_root, privileged},
    node::start_cluster,
    tutorial::{self, Outcome, reporter},
};

mod real_cluster;

fn cluster(resize_preemption: bool) -> (ControlPlane, Node) {
    start_cluster(resize_preemption).unwrap_or_else(|e| panic!("the real cluster must start: {e}"))
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
    let (plane, node) = cluster(true);
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
    let (plane, node) = cluster(false);
    let headroom = real_cluster::start_headroom(&plane);
    let logs = || {
        format!(
            "headroom-shim:\n{}\nheadroomd:\n{}",
            headroom.shim.log(),
            headroom.daemon.process.log()
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

/// Polls `probe` (bounded), failing with the kubelet's log and the shim's.
fn wait_until<T>(
    node: &Node,
    headroom: &Headroom,
    what: &str,
    timeout: Duration,
    probe: impl FnMut() -> Option<T>,
) -> T {
    real_cluster::wait_for(what, timeout, probe, || {
        format!(
            "kubelet:\n{}\nheadroom-shim:\n{}",
            node.log_tail("kubelet", 30),
            headroom.shim.log()
        )
    })
}

fn patch_the_resize(plane: &ControlPlane) {
    plane.kubectl_ok(&tutorial::RESIZE_ARGS).unwrap();
}

/// `manifest` applied, and both of the tutorial's Pods running.
fn apply_and_wait(plane: &ControlPlane, node: &Node, headroom: &Headroom, manifest: &str) {
    plane.kubectl_stdin(&["apply", "-f", "-"], manifest).unwrap();
    for name in ["low-priority-pod", "high-priority-pod"] {
        wait_until(node, headroom, name, Duration::from_secs(90), || {
            plane.pod_running("default", name).then_some(())
        });
    }
}

fn demo() -> String {
    std::fs::read_to_string(real_cluster::workspace().join(tutorial::DEMO_FILE)).unwrap()
}

/// The tutorial's resize asked for, and `fault` done once the kubelet has deferred it and
/// before it is actuated (the test fails if the kubelet got there first: then nothing was
/// tested).
fn resize_with_a_fault_mid_preemption(
    plane: &ControlPlane,
    node: &mut Node,
    headroom: &Headroom,
    fault: impl FnOnce(&mut Node),
) {
    patch_the_resize(plane);
    wait_until(
        node,
        headroom,
        "the resize Deferred",
        Duration::from_secs(30),
        || {
            plane
                .get_json("pod", "default", "high-priority-pod")
                .filter(|pod| {
                    pod["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "PodResizePending" && c["reason"] == "Deferred")
                    })
                })
        },
    );
    fault(node);
    let pod = plane.get_json("pod", "default", "high-priority-pod").unwrap();
    assert_eq!(
        tutorial::cpu_quota_us(&pod),
        Some(100_000),
        "the fault came after the actuation: nothing was tested"
    );
}

fn preempted_events(plane: &ControlPlane) -> usize {
    plane
        .events_of("default", "low-priority-pod")
        .iter()
        .filter(|e| e["reason"] == "Preempted")
        .count()
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

/// The kubelet crashes (SIGKILL) once it has deferred the resize, mid-preemption, and starts
/// again on its state 1 s later: the resize completes whole (allocated, reported and in the
/// cgroup), and the victim is evicted once.
#[test]
fn the_kubelet_crashing_mid_resize_leaves_it_completed_whole_and_the_victim_evicted_once() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, mut node) = cluster(false);
    let headroom = real_cluster::start_headroom(&plane);
    apply_and_wait(&plane, &node, &headroom, &demo());
    resize_with_a_fault_mid_preemption(&plane, &mut node, &headroom, |node| {
        node.stop_kubelet(true);
    });
    std::thread::sleep(Duration::from_secs(1));
    node.start_kubelet()
        .unwrap_or_else(|e| panic!("the kubelet must come back: {e}"));
    let pod = wait_until(
        &node,
        &headroom,
        "the resize completed whole after the kubelet's restart",
        Duration::from_secs(120),
        || resized_whole(&plane),
    );
    assert!(
        pod["status"]["conditions"]
            .as_array()
            .is_none_or(|c| !c.iter().any(|c| c["type"] == "PodResizePending")),
        "no resize left pending: {pod:#}"
    );
    assert_eq!(
        preempted_events(&plane),
        1,
        "the victim was evicted once:\n{}",
        headroom.shim.log()
    );
}

/// A victim that ignores SIGTERM: the kubelet honours its grace period (3 s) before SIGKILL,
/// then the resize completes. Prints when the resize was actuated relative to the victim's end.
#[test]
fn a_victim_that_ignores_sigterm_gets_its_grace_period_then_the_resize_completes() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = cluster(false);
    let headroom = real_cluster::start_headroom(&plane);
    let demo = demo();
    // The same victim, but its process ignores SIGTERM and it asks for 3 s of grace.
    let stubborn = demo.replace(
        "  priorityClassName: low-priority\n  containers:\n  - name: worker\n    image: nginx\n",
        "  priorityClassName: low-priority\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: worker\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"trap '' TERM; while :; do sleep 1; done\"]\n",
    );
    assert_ne!(stubborn, demo, "the demo's victim was found");
    apply_and_wait(&plane, &node, &headroom, &stubborn);
    let patched = Instant::now();
    patch_the_resize(&plane);
    wait_until(
        &node,
        &headroom,
        "the victim's eviction",
        Duration::from_secs(60),
        || {
            plane
                .get_json("pod", "default", "low-priority-pod")
                .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        },
    );
    let evicted = patched.elapsed();
    let mut actuated = None;
    let mut note_actuation = || {
        if actuated.is_none() && resized_whole(&plane).is_some() {
            actuated = Some(patched.elapsed());
        }
        actuated
    };
    wait_until(
        &node,
        &headroom,
        "the victim gone",
        Duration::from_secs(60),
        || {
            note_actuation();
            plane
                .get_json("pod", "default", "low-priority-pod")
                .is_none()
                .then_some(())
        },
    );
    let gone = patched.elapsed();
    let grace = gone.saturating_sub(evicted);
    assert!(
        grace >= Duration::from_millis(2_500),
        "the kubelet killed the victim after {grace:?}, before its 3 s grace period"
    );
    let actuated = wait_until(
        &node,
        &headroom,
        "the resize completed",
        Duration::from_secs(60),
        &mut note_actuation,
    );
    println!(
        "victim evicted at {evicted:?}, gone at {gone:?} (grace honoured: {grace:?}); resize actuated \
         at {actuated:?}"
    );
}

/// containerd stops once the kubelet has deferred the resize and starts again on its state 2 s
/// later (its shims, and so the containers, keep running): the resize completes whole, in the
/// same container, and the victim is evicted once.
#[test]
fn containerd_restarting_mid_resize_leaves_it_completed_whole() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, mut node) = cluster(false);
    let headroom = real_cluster::start_headroom(&plane);
    apply_and_wait(&plane, &node, &headroom, &demo());
    let before = plane.get_json("pod", "default", "high-priority-pod").unwrap();
    resize_with_a_fault_mid_preemption(&plane, &mut node, &headroom, Node::stop_containerd);
    std::thread::sleep(Duration::from_secs(2));
    node.start_containerd()
        .unwrap_or_else(|e| panic!("containerd must come back: {e}"));
    let pod = wait_until(
        &node,
        &headroom,
        "the resize completed whole after containerd's restart",
        Duration::from_secs(120),
        || resized_whole(&plane),
    );
    assert_eq!(
        pod["status"]["containerStatuses"][0]["containerID"],
        before["status"]["containerStatuses"][0]["containerID"],
        "resized in place: the same container, not a restart"
    );
    assert_eq!(
        preempted_events(&plane),
        1,
        "the victim was evicted once:\n{}",
        headroom.shim.log()
    );
}
