//! `headroom-shim` command line.

#[cfg(feature = "standalone")]
mod standalone;
// Without the backend the subcommands stay (the same command line), and say how to get it.
#[cfg(not(feature = "standalone"))]
#[path = "cli/no_standalone.rs"]
mod standalone;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{CommandFactory as _, Parser, Subcommand};
use headroom_client::cli_docs;
use headroom_shim::cluster_file::{ResizeSpec, node_state_for, parse_cluster};
use headroom_shim::decide::{Decision, decide};
use headroom_shim::explain::explain;
use serde::Serialize;

#[derive(Debug, Parser)]
#[command(
    name = "headroom-shim",
    version = headroom_client::VERSION,
    about = "Preemption for Deferred in-place Pod resizes on one node"
)]
pub struct Cli {
    /// Log line format on stderr: `text` or `json` (one object per line).
    #[arg(long, global = true, default_value_t = headroom_client::logging::LogFormat::Text, value_name = "text|json")]
    pub log_format: headroom_client::logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dry run: what would preemption do for this resize? No side effects.
    Plan {
        /// Multi-document YAML of Node, PriorityClass, Pod (with status) and PodDisruptionBudget objects.
        #[arg(long, value_name = "FILE.yaml")]
        cluster: PathBuf,
        /// The resizing Pod, NAMESPACE/NAME (NAME alone means namespace "default").
        #[arg(long, value_name = "NS/POD")]
        resize: String,
        /// New CPU request (and limit, where one is set), e.g. 6 or 2500m.
        #[arg(long, value_name = "Q")]
        cpu: Option<String>,
        /// New memory request (and limit, where one is set), e.g. 2Gi.
        #[arg(long, value_name = "Q")]
        memory: Option<String>,
        /// The container to resize; needed when the Pod has more than one.
        #[arg(long)]
        container: Option<String>,
        /// Print one JSON object: {outcome, victims, message, shrinks, giveWay}.
        #[arg(long)]
        json: bool,
        /// Live figures of Pods, as headroomd would give them (YAML: NS/POD: {cpuUsage: 100m,
        /// cpuThrottledPercent: 2, workingSet: 120Mi}); without it nobody is shrunk (no fresh data).
        #[arg(long, value_name = "FILE.yaml")]
        live: Option<PathBuf>,
        #[command(flatten)]
        give_way: headroom_shim::give_way::GiveWayArgs,
    },
    /// Run the standalone node: headroomd in-process, Pods as real cgroups and processes, the shim
    /// loop and the control API that `headroomctl resize|events|get pods|explain` talks to.
    Standalone {
        /// Kubernetes YAML to apply at start (PriorityClass, Pod).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// The control API's Unix socket.
        #[arg(long, default_value = "/run/headroom/shim.sock")]
        socket: PathBuf,
        #[command(flatten)]
        node: standalone::NodeArgs,
    },
    /// Run against Kubernetes on this node (as the DaemonSet does): watch Deferred resizes,
    /// preempt on this node only, follow each resize to completion.
    Kube(headroom_shim::kube::KubeArgs),
    /// The seed's tutorial end to end on this machine (needs root): an 8-CPU node,
    /// low-priority-pod (3 CPU) and high-priority-pod (4 CPU), resize to 6 CPU, preemption.
    Demo {
        /// Also serve the control API here while the demo runs.
        #[arg(long)]
        socket: Option<PathBuf>,
        #[command(flatten)]
        node: standalone::NodeArgs,
    },
    /// Print a shell completion script (bash, zsh, fish).
    Completion(cli_docs::CompletionArgs),
    /// Write the man pages (roff) into DIR; `cargo xtask man` puts them in target/man/.
    #[command(hide = true)]
    Man(cli_docs::ManArgs),
}

#[derive(Serialize)]
struct PlanVictim<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    priority: i32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlanOutput<'a> {
    outcome: &'static str,
    victims: Vec<PlanVictim<'a>>,
    message: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    shrinks: &'a [headroom_shim::give_way::Shrink],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    give_way: &'a [headroom_shim::give_way::Note],
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Completion(args) => {
            cli_docs::print_completion(Cli::command(), args);
            Ok(())
        }
        Command::Man(args) => Ok(cli_docs::write_man_pages(Cli::command(), &args.dir).map(drop)?),
        Command::Standalone {
            manifest,
            socket,
            node,
        } => standalone::standalone(manifest, socket, &node),
        Command::Demo { socket, node } => standalone::demo(socket, &node),
        Command::Kube(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .thread_name("headroom-shim")
                .build()
                .context("start the Tokio runtime")?;
            runtime
                .block_on(headroom_shim::kube::main(args))
                .map_err(anyhow::Error::from)
        }
        Command::Plan {
            cluster,
            resize,
            cpu,
            memory,
            container,
            json,
            live,
            give_way,
        } => {
            let (namespace, name) = match resize.split_once('/') {
                Some((ns, name)) => (ns.to_string(), name.to_string()),
                None => ("default".to_string(), resize.clone()),
            };
            if namespace.is_empty() || name.is_empty() || name.contains('/') {
                bail!("--resize {resize:?}: expected NAMESPACE/NAME");
            }
            let text = std::fs::read_to_string(&cluster)
                .with_context(|| format!("reading {}", cluster.display()))?;
            let mut objects = parse_cluster(&text).with_context(|| format!("{}", cluster.display()))?;
            objects.give_way = give_way.settings();
            let spec = ResizeSpec {
                namespace,
                name,
                container,
                cpu,
                memory,
            };
            let (mut state, request) = node_state_for(&objects, &spec)?;
            if let Some(live) = live {
                let text =
                    std::fs::read_to_string(&live).with_context(|| format!("reading {}", live.display()))?;
                let figures = headroom_shim::give_way::parse_live_file(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", live.display()))?;
                for pod in &mut state.pods {
                    if let Some(f) = figures.get(&format!("{}/{}", pod.namespace, pod.name)) {
                        pod.live = *f;
                    }
                }
            }
            let decision = decide(&state, &request)?;
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer(&mut out, &plan_output(&decision))?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "{}",
                    explain(&format!("{}/{}", spec.namespace, spec.name), &decision)
                )?;
            }
            Ok(())
        }
    }
}

fn plan_output(decision: &Decision) -> PlanOutput<'_> {
    PlanOutput {
        outcome: decision.outcome.as_str(),
        victims: decision
            .victims
            .iter()
            .map(|v| PlanVictim {
                namespace: &v.namespace,
                name: &v.name,
                uid: &v.uid,
                priority: v.priority,
            })
            .collect(),
        message: &decision.message,
        shrinks: &decision.shrinks,
        give_way: &decision.give_way,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    /// The DaemonSet starts `headroom-shim` with flags written in YAML: a renamed flag would
    /// otherwise only show as a crash loop on every node.
    #[test]
    fn daemonset_flags_parse() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kubernetes/daemonset.yaml");
        let text = std::fs::read_to_string(path).expect("read the DaemonSet");
        let daemonset: serde_yaml::Value = serde_yaml::from_str(&text).expect("parse the DaemonSet");
        let containers = daemonset["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .expect("containers");
        let shim = containers
            .iter()
            .find(|c| c["name"].as_str() == Some("headroom-shim"))
            .expect("a headroom-shim container");
        let args: Vec<String> = shim["args"]
            .as_sequence()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg").replace("$(NODE_NAME)", "node-a"))
            .collect();
        let cli = Cli::try_parse_from(std::iter::once("headroom-shim".to_string()).chain(args.clone()))
            .unwrap_or_else(|e| panic!("headroom-shim {args:?}: {e}"));
        match cli.command {
            Command::Kube(kube) => assert_eq!(kube.node_name, "node-a"),
            other => panic!("expected the kube subcommand, got {other:?}"),
        }
    }
}
