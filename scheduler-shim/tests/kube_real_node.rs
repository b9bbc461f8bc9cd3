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
