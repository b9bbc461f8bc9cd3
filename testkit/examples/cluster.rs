//! A cluster to try things against by hand: the control plane (with kube-scheduler, its resize
//! preemption gate `on` or `off` from the first argument) and, with `node` as the second, a real
//! kubelet and containerd beside it. Prints the admin kubeconfig and runs until stdin closes.
//!
//!     sudo cargo run -p headroom-testkit --example cluster -- on node
use std::io::Read as _;

use headroom_testkit::{ControlPlane, ControlPlaneOptions, SchedulerGate, node::start_cluster};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gate = args.first().map(String::as_str) == Some("on");
    let (plane, node) = if args.get(1).map(String::as_str) == Some("node") {
        let (plane, node) = start_cluster(gate)?;
        (plane, Some(node))
    } else {
        let plane = ControlPlane::start(ControlPlaneOptions {
            scheduler: Some(if gate {
                SchedulerGate::On
            } else {
                SchedulerGate::Off
            }),
            ..ControlPlaneOptions::default()
        })?;
        (plane, None)
    };
    println!("export KUBECONFIG={}", plane.admin_kubeconfig().display());
    println!("control plane: {}", plane.dir().display());
    if let Some(node) = &node {
        println!("node: {} (registry {})", node.dir().display(), node.registry());
    }
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    Ok(())
}
