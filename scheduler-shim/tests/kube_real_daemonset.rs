//! headroom as it runs in production, on the real node (`headroom_testkit::Node`): the image
//! built here (`headroom_testkit::images::HEADROOM`, Containerfile's contents without a
//! container engine) pulled by containerd from the node's registry, the DaemonSet of
//! `deploy/kubernetes/` applied with kubectl (and the Helm chart installed with helm), with
//! exactly the manifest's capabilities and seccomp profile, as its own ServiceAccount. Then the
//! seed's tutorial, preempted by that Pod's shim.
//!
//! The node has no kube-proxy, so the `kubernetes` Service's ClusterIP leads nowhere; both
//! containers are given the API server's address (the Pod bridge's gateway) in
//! KUBERNETES_SERVICE_HOST/PORT, as a kube-proxy-less cluster does (`kubectl set env`, or the
//! chart's `kubernetesServiceHost`/`kubernetesServicePort`). Nothing else in the manifest changes.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use headroom_testkit::{
    ControlPlane, Node,
    gate::{not_root, privileged},
    images,
    node::{NODE_NAME, POD_GATEWAY, start_cluster},
    tutorial::{self, reporter},
};
use serde_json::Value;

mod real_cluster;

const NAMESPACE: &str = "headroom-system";
const SELECTOR: &str = "app.kubernetes.io/name=headroom";

/// The folder of this build's three binaries (the debug ones `cargo test --workspace` builds).
fn binaries() -> PathBuf {
    let headroomd = real_cluster::headroomd_binary();
    let dir = headroomd.parent().unwrap().to_path_buf();
    for program in images::HEADROOM_PROGRAMS {
        assert!(
            dir.join(program).is_file(),
            "{program} is not built in {} (cargo test --workspace builds it)",
            dir.display()
        );
    }
    dir
}

/// A one-node cluster (the gate off: headroom preempts) with headroom's image in its registry.
fn cluster_with_the_image() -> (ControlPlane, Node) {
    let binaries = binaries();
    let (plane, node) = start_cluster(false).unwrap_or_else(|e| panic!("the real cluster must start: {e}"));
    let layer = images::headroom_layer(&binaries, &real_cluster::workspace(), node.dir()).unwrap();
    node.push_image(&layer, &images::HEADROOM).unwrap();
    (plane, node)
}

/// `KUBERNETES_SERVICE_HOST=… KUBERNETES_SERVICE_PORT=…`: the API server as the Pods reach it.
fn api_server_env(plane: &ControlPlane) -> [String; 2] {
    let port = plane.server().rsplit(':').next().unwrap().to_string();
    [
        format!("KUBERNETES_SERVICE_HOST={POD_GATEWAY}"),
        format!("KUBERNETES_SERVICE_PORT={port}"),
    ]
}

/// What a failure needs: the Pods as `kubectl describe` shows them, both containers' logs
/// (the previous run's too) and the kubelet's log tail.
fn diagnostics(plane: &ControlPlane, node: &Node) -> String {
    let run = |args: &[&str]| {
        let out = plane.kubectl().args(args).output().unwrap();
        format!(
            "$ kubectl {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let mut text = run(&["describe", "pods", "-n", NAMESPACE, "-l", SELECTOR]);
    for container in ["headroomd", "headroom-shim"] {
        for previous in ["--previous=false", "--previous=true"] {
            text.push_str(&run(&[
                "logs",
                "-n",
                NAMESPACE,
                "-l",
                SELECTOR,
                "-c",
                container,
                previous,
                "--tail=40",
            ]));
        }
    }
    format!("{text}\nkubelet:\n{}", node.log_tail("kubelet", 30))
}

/// The DaemonSet's one Pod once both its containers are ready, and no sooner.
fn wait_for_the_agent(plane: &ControlPlane, node: &Node, timeout: Duration) -> Value {
    real_cluster::wait_for(
        "the headroom DaemonSet's Pod Ready (headroomd's probes attached, the shim's watches synced)",
        timeout,
        || {
            let out = plane
                .kubectl()
                .args(["get", "pods", "-n", NAMESPACE, "-l", SELECTOR, "-o", "json"])
                .output()
                .ok()?;
            let list: Value = serde_json::from_slice(&out.stdout).ok()?;
            let pod = list["items"].as_array()?.first()?.clone();
            let ready = pod["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(pod)
        },
        || diagnostics(plane, node),
    )
}

/// headroomd's `/metrics` in the Pod, scraped on the Pod's address as Prometheus would.
fn agent_metrics(pod: &Value) -> String {
    let ip = pod["status"]["podIP"]
        .as_str()
        .expect("the agent's Pod has an address");
    real_cluster::http_get(&format!("{ip}:9464"), "/metrics")
}

/// The probes loaded inside the container (all or nothing: without CAP_BPF, CAP_PERFMON or
/// seccomp's leave none would load), with every program that attached counted.
fn assert_probes_attached(pod: &Value, plane: &ControlPlane, node: &Node) {
    let metrics = agent_metrics(pod);
    let loaded = real_cluster::sample(&metrics, "headroom_probes_loaded");
    let attached = real_cluster::sample(&metrics, "headroom_probe_programs_attached");
    let programs = real_cluster::sample(&metrics, "headroom_probe_programs");
    println!(
        "headroomd in the DaemonSet's container: probes loaded {loaded:?}, {attached:?} of {programs:?} programs attached"
    );
    assert!(
        loaded == Some(1.0) && attached.is_some_and(|a| a > 0.0),
        "headroomd in the DaemonSet's container: probes loaded {loaded:?}, {attached:?} of {programs:?} programs attached\n{}",
        diagnostics(plane, node)
    );
}

/// The seed's tutorial with the DaemonSet's shim doing the preemption.
fn the_tutorial_is_preempted_by_the_agent(plane: &ControlPlane, node: &Node) {
    let outcome = tutorial::run(plane, node, &real_cluster::workspace(), &mut |command, output| {
        println!("$ {command}\n{output}");
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", diagnostics(plane, node)));
    assert!(
        outcome
            .high_priority_reasons
            .iter()
            .any(|r| r == "ResizeDeferred"),
        "the kubelet deferred the resize first: {:?}",
        outcome.high_priority_reasons
    );
    assert_eq!(
        reporter(&outcome.preempted),
        "headroom.io/headroom-shim",
        "the DaemonSet's shim preempted: {:#}\n{}",
        outcome.preempted,
        diagnostics(plane, node)
    );
}

fn deploy() -> PathBuf {
    real_cluster::workspace().join("deploy/kubernetes")
}

/// `deploy/kubernetes/*.yaml` applied as an operator does, the DaemonSet given the API server's
/// address first (`kubectl set env --local`, the manifest otherwise untouched).
fn apply_the_manifests(plane: &ControlPlane) {
    let file = |name: &str| deploy().join(name).display().to_string();
    for manifest in [
        "namespace.yaml",
        "rbac.yaml",
        "flowschema.yaml",
        "service.yaml",
        "viewer-rbac.yaml",
    ] {
        plane.kubectl_ok(&["apply", "-f", &file(manifest)]).unwrap();
    }
    let env = api_server_env(plane);
    let daemonset = file("daemonset.yaml");
    let mut args = vec!["set", "env", "--local", "-f", &daemonset, "--containers=*"];
    args.extend(env.iter().map(String::as_str));
    args.extend(["-o", "yaml"]);
    let with_env = plane.kubectl_ok(&args).unwrap();
    plane.kubectl_stdin(&["apply", "-f", "-"], &with_env).unwrap();
}

/// `kubectl headroom …` as an operator runs it: the real kubectl finds `kubectl-headroom` on PATH;
/// the plugin authenticates as a ServiceAccount bound to exactly `viewer-rbac.yaml`'s roles (so a
/// missing permission fails here) and reaches the agent's shim through `pods/proxy`.
fn kubectl_headroom(plane: &ControlPlane, node: &Node, args: &[&str]) -> String {
    let built = binaries().join("kubectl-headroom");
    assert!(
        built.is_file(),
        "{} is not built (cargo test --workspace builds it)",
        built.display()
    );
    // Installed alone in a folder on PATH, as an operator installs it (target/debug also holds
    // cargo's kubectl-headroom.d, which `kubectl plugin list` rightly flags).
    let plugins = node.dir().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let installed = plugins.join("kubectl-headroom");
    if !installed.exists() {
        std::os::unix::fs::symlink(&built, &installed).unwrap();
    }
    let operator = plane.service_account_kubeconfig("default", "operator").unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(plane.bin().join("kubectl"))
        .env("KUBECONFIG", &operator)
        .env("PATH", path)
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "kubectl {}: {stdout}{stderr}\n{}",
        args.join(" "),
        diagnostics(plane, node)
    );
    println!("$ kubectl {}\n{stdout}", args.join(" "));
    stdout
}

/// What the plugin shows after the tutorial: the decision with its victim, that the kubelet
/// actuated it, and the node's live headroom; status lists it; a Pod never decided says so.
fn the_plugin_explains_the_preemption(plane: &ControlPlane, node: &Node, agent: &str) {
    plane
        .kubectl_ok(&["create", "serviceaccount", "operator", "-n", "default"])
        .unwrap();
    for binding in [
        vec![
            "create",
            "clusterrolebinding",
            "operator-viewer",
            "--clusterrole=headroom-viewer",
        ],
        vec![
            "create",
            "rolebinding",
            "operator-viewer",
            "-n",
            NAMESPACE,
            "--role=headroom-viewer",
        ],
    ] {
        let mut args = binding;
        args.push("--serviceaccount=default:operator");
        plane.kubectl_ok(&args).unwrap();
    }
    let listed = kubectl_headroom(plane, node, &["plugin", "list"]);
    assert!(listed.contains("kubectl-headroom"), "{listed}");
    // The shim marks the resize actuated at its next cycle after the kubelet's status update.
    let explained = real_cluster::wait_for(
        "kubectl headroom explain to show the resize actuated",
        Duration::from_secs(60),
        || {
            let json: Value = serde_json::from_str(&kubectl_headroom(
                plane,
                node,
                &["headroom", "explain", "high-priority-pod", "-o", "json"],
            ))
            .ok()?;
            (json["decision"]["stage"]["phase"] == "actuated").then_some(json)
        },
        || diagnostics(plane, node),
    );
    assert_eq!(explained["node"], NODE_NAME);
    assert_eq!(explained["agent"], format!("{NAMESPACE}/{agent}"));
    assert_eq!(explained["resize"]["state"], "None", "{explained:#}");
    assert_eq!(explained["decision"]["decision"]["outcome"], "preempt");
    assert_eq!(
        explained["decision"]["decision"]["victims"][0]["name"], "low-priority-pod",
        "{explained:#}"
    );
    assert!(
        explained["headroom"]["cpuMillis"]["allocatable"]
            .as_i64()
            .is_some_and(|a| a > 0),
        "the node's live headroom from headroomd: {explained:#}"
    );
    let text = kubectl_headroom(plane, node, &["headroom", "explain", "high-priority-pod"]);
    for want in [
        "Decision:  preempt",
        "actuated",
        "default/low-priority-pod (priority 1000)",
        "RESOURCE",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    let status = kubectl_headroom(plane, node, &["headroom", "status", NODE_NAME]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("default/high-priority-pod") && l.contains("preempt")),
        "{status}"
    );
    let all = kubectl_headroom(plane, node, &["headroom", "status"]);
    assert!(all.lines().any(|l| l.starts_with(NODE_NAME)), "{all}");
    let never = kubectl_headroom(plane, node, &["headroom", "explain", "-n", NAMESPACE, agent]);
    assert!(never.contains("has decided nothing for this Pod"), "{never}");
}

#[test]
fn the_daemonset_from_deploy_attaches_its_probes_in_its_container_and_preempts_for_the_tutorial() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = cluster_with_the_image();
    apply_the_manifests(&plane);
    let started = Instant::now();
    let pod = wait_for_the_agent(&plane, &node, Duration::from_secs(120));
    println!("the DaemonSet's Pod Ready {:.1?} after apply", started.elapsed());
    // Exactly the manifest's security context reached the container.
    let deployed = &pod["spec"]["containers"][0]["securityContext"];
    let manifest: Value =
        serde_yaml::from_str::<Value>(&std::fs::read_to_string(deploy().join("daemonset.yaml")).unwrap())
            .unwrap();
    assert_eq!(
        deployed, &manifest["spec"]["template"]["spec"]["containers"][0]["securityContext"],
        "headroomd runs with the manifest's own security context"
    );
    assert_probes_attached(&pod, &plane, &node);
    the_tutorial_is_preempted_by_the_agent(&plane, &node);
    let agent = pod["metadata"]["name"].as_str().unwrap().to_string();
    the_plugin_explains_the_preemption(&plane, &node, &agent);
}

#[test]
fn the_helm_chart_installs_the_same_agent_and_it_preempts_for_the_tutorial() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, node) = cluster_with_the_image();
    let [host, port] = api_server_env(&plane);
    let chart = real_cluster::workspace().join("deploy/helm/headroom");
    let out = headroom_testkit::helm::command()
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .args(["install", "headroom"])
        .arg(&chart)
        .args([
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--wait",
            "--timeout=180s",
        ])
        .arg(format!("--set=kubernetesServiceHost={}", value_of(&host)))
        .arg(format!("--set-string=kubernetesServicePort={}", value_of(&port)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm install failed:\n{}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        diagnostics(&plane, &node)
    );
    println!(
        "$ helm install headroom …\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let pod = wait_for_the_agent(&plane, &node, Duration::from_secs(30));
    assert_probes_attached(&pod, &plane, &node);
    the_tutorial_is_preempted_by_the_agent(&plane, &node);
}

fn value_of(assignment: &str) -> &str {
    assignment.split_once('=').map_or(assignment, |(_, value)| value)
}

/// The pids of `program` running in a Pod's cgroup (`kubepods`) on this host.
fn pids_in_pods(program: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let read =
                |file: &str| std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join(file));
            read("comm").is_ok_and(|comm| comm.trim() == program)
                && read("cgroup").is_ok_and(|cgroup| cgroup.contains("kubepods"))
        })
        .collect()
}

fn restart_count(pod: &Value, container: &str) -> i64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|statuses| statuses.iter().find(|s| s["name"] == container))
        .and_then(|status| status["restartCount"].as_i64())
        .unwrap_or(0)
}

#[test]
fn the_agent_comes_back_after_containerd_restarts_and_headroomd_is_killed_meanwhile() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let (plane, mut node) = cluster_with_the_image();
    apply_the_manifests(&plane);
    let before = wait_for_the_agent(&plane, &node, Duration::from_secs(120));
    let uid = before["metadata"]["uid"].clone();
    let headroomd = pids_in_pods("headroomd");
    assert_eq!(headroomd.len(), 1, "one headroomd runs in the agent's container");
    // The runtime goes away under the running agent, and headroomd crashes while it is away.
    node.stop_containerd();
    // SAFETY: kill(2) of a pid just read from /proc; at worst it already exited.
    assert_eq!(unsafe { libc::kill(headroomd[0], libc::SIGKILL) }, 0);
    node.start_containerd().unwrap();
    let after = real_cluster::wait_for(
        "the agent's Pod Ready again with headroomd restarted in it",
        Duration::from_secs(120),
        || {
            let pod = plane.get_json("pod", NAMESPACE, before["metadata"]["name"].as_str()?)?;
            let ready = pod["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (ready && restart_count(&pod, "headroomd") >= 1).then_some(pod)
        },
        || diagnostics(&plane, &node),
    );
    assert_eq!(
        after["metadata"]["uid"], uid,
        "the same Pod came back (its emptyDir and intent directory with it)"
    );
    assert_eq!(
        restart_count(&after, "headroom-shim"),
        0,
        "the shim kept running through it"
    );
    assert_probes_attached(&after, &plane, &node);
    the_tutorial_is_preempted_by_the_agent(&plane, &node);
}
