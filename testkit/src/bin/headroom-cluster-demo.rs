//! `cargo xtask demo --cluster`: the seed's tutorial as kubectl commands against a real cluster
//! on this machine (kube-apiserver, kube-scheduler, kube-controller-manager, the kubelet
//! v1.37.2 and containerd v2), run twice: once with upstream kube-scheduler preempting
//! (`InPlacePodVerticalScalingSchedulerPreemption` on, no headroom-shim), once with headroomd and
//! headroom-shim (the gate off). Each command is shown with its real output.
//!
//!     headroom-cluster-demo --headroomd target/release/headroomd --shim target/release/headroom-shim
use std::{path::PathBuf, process::ExitCode};

use headroom_testkit::{
    beside,
    node::{NODE_NAME, start_cluster},
    tutorial::{self, reporter},
};

struct Args {
    headroomd: PathBuf,
    shim: PathBuf,
    workspace: PathBuf,
    runs: Vec<Preemptor>,
}

/// Who preempts in a run.
#[derive(Clone, Copy, PartialEq)]
enum Preemptor {
    Upstream,
    Headroom,
}

fn parse() -> Result<Args, String> {
    let mut headroomd = None;
    let mut shim = None;
    let mut workspace = std::env::current_dir().map_err(|e| e.to_string())?;
    let mut runs = vec![Preemptor::Upstream, Preemptor::Headroom];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--headroomd" => headroomd = Some(PathBuf::from(value()?)),
            "--shim" => shim = Some(PathBuf::from(value()?)),
            "--workspace" => workspace = PathBuf::from(value()?),
            "--only" => {
                runs = match value()?.as_str() {
                    "upstream" => vec![Preemptor::Upstream],
                    "headroom" => vec![Preemptor::Headroom],
                    other => return Err(format!("--only upstream|headroom, not {other}")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        headroomd: headroomd.ok_or("--headroomd PATH is needed")?,
        shim: shim.ok_or("--shim PATH is needed")?,
        workspace,
        runs,
    })
}

fn run(args: &Args, preemptor: Preemptor) -> Result<(), String> {
    let upstream = preemptor == Preemptor::Upstream;
    println!(
        "\n=== {} ===",
        if upstream {
            "upstream kube-scheduler preempts (InPlacePodVerticalScalingSchedulerPreemption on; no headroom-shim)"
        } else {
            "headroom-shim preempts (InPlacePodVerticalScalingSchedulerPreemption off; headroomd and headroom-shim beside the kubelet)"
        }
    );
    println!(
        "This machine has 2 CPUs: the seed's 8-CPU quantities are scaled by a quarter \
         (low-priority-pod 750m, high-priority-pod 1 → 1500m; {}).",
        tutorial::DEMO_FILE
    );
    let (plane, node) = start_cluster(upstream).map_err(|e| e.to_string())?;
    // Kept until the run ends: dropping it stops headroomd and the shim.
    let _headroom = if upstream {
        None
    } else {
        let kubeconfig = beside::apply_rbac(&plane, &args.workspace)?;
        Some(beside::start_headroom(
            &plane,
            &args.headroomd,
            &args.shim,
            &kubeconfig,
            NODE_NAME,
            beside::Preemption::Delete,
        )?)
    };
    let outcome = tutorial::run(&plane, &node, &args.workspace, &mut |command, output| {
        println!("\n$ {command}\n{}", output.trim_end());
    })
    .map_err(|e| e.to_string())?;
    println!(
        "\n→ preempted by {}; from the resize patch to 1500m in the container's cgroup: {:.2} s",
        reporter(&outcome.preempted),
        outcome.patch_to_actuated.as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("headroom-cluster-demo: {e}");
            return ExitCode::from(2);
        }
    };
    for preemptor in args.runs.clone() {
        if let Err(e) = run(&args, preemptor) {
            eprintln!("headroom-cluster-demo: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
