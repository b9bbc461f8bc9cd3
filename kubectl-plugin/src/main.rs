//! `kubectl-headroom`: kubectl runs it as `kubectl headroom …` when it is on PATH.
//!
//! - `explain [-n NS] POD`: the Pod's resize as the kubelet reports it, the decision the shim of
//!   its node made (outcome, victims, what became of it) and that node's live headroom.
//! - `status [NODE]`: one node's headroom, reservations and recent decisions; without NODE, one
//!   line per headroom agent.

use std::time::SystemTime;

use anyhow::{Context as _, bail};
use clap::{CommandFactory as _, Parser, Subcommand};
use headroom_client::cli_docs;
use headroom_client::output::Output;
use headroom_shim::kube::board::{NodeView, ResizeView};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubectl_headroom::{Explained, SHIM_CONTAINER, SHIM_PORT_NAME, explain_text, nodes_text, status_text};

#[derive(Parser)]
#[command(
    name = "kubectl-headroom",
    bin_name = "kubectl-headroom",
    version = headroom_client::VERSION,
    about = "kubectl headroom: resize preemption decisions and live node headroom, from each node's headroom agent"
)]
struct Cli {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// Where the headroom agent's Pods run.
    #[arg(
        long,
        global = true,
        default_value = "headroom-system",
        value_name = "NAMESPACE"
    )]
    agent_namespace: String,
    /// Label selector of the headroom agent's Pods (the DaemonSet's and the chart's).
    #[arg(long, global = true, default_value = "app.kubernetes.io/name=headroom")]
    agent_selector: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Why a Pod's resize waits, what its node's shim decided (victims included) and the live headroom.
    Explain {
        /// The Pod's name.
        pod: String,
        /// The Pod's namespace (default: the context's, then "default").
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// A node's live headroom, reservations and recent decisions; without NODE, one line per agent.
    Status {
        node: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Print a shell completion script (bash, zsh or fish).
    Completion(cli_docs::CompletionArgs),
    /// Write man pages into DIR.
    #[command(hide = true)]
    Man(cli_docs::ManArgs),
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

async fn client(cli: &Cli) -> anyhow::Result<(kube::Client, String)> {
    let options = kube::config::KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None if cli.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration found")?,
    };
    let namespace = config.default_namespace.clone();
    Ok((kube::Client::try_from(config)?, namespace))
}

/// One headroom agent Pod and the port its shim serves the board on.
struct Agent {
    namespace: String,
    name: String,
    node: String,
    port: i32,
}

impl Agent {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn of(pod: &Pod) -> anyhow::Result<Agent> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.as_ref().context("agent Pod without a spec")?;
        let port = spec
            .containers
            .iter()
            .filter(|c| c.name == SHIM_CONTAINER)
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(SHIM_PORT_NAME))
            .map(|p| p.container_port)
            .with_context(|| {
                format!(
                    "agent Pod {name} has no container {SHIM_CONTAINER} with a port named {SHIM_PORT_NAME}"
                )
            })?;
        Ok(Agent {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name,
            node: spec.node_name.clone().unwrap_or_default(),
            port,
        })
    }

    /// `GET path` on the shim, through the API server's `pods/proxy`.
    async fn get(&self, client: &kube::Client, path_and_query: &str) -> Result<String, kube::Error> {
        let uri = format!(
            "/api/v1/namespaces/{}/pods/{}:{}/proxy{path_and_query}",
            self.namespace, self.name, self.port
        );
        let request = http::Request::get(uri)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        client.request_text(request).await
    }

    async fn status(&self, client: &kube::Client) -> anyhow::Result<NodeView> {
        let text = self
            .get(client, "/status")
            .await
            .map_err(|e| refused(self, "/status", e))?;
        serde_json::from_str(&text).with_context(|| format!("{}'s /status is not a node view", self.key()))
    }

    /// `None` when the shim has no decision for the Pod.
    async fn explain(&self, client: &kube::Client, pod: &str) -> anyhow::Result<Option<ResizeView>> {
        // The shim decodes the query with form_urlencoded; the same crate encodes it here.
        let query: String = form_urlencoded::byte_serialize(pod.as_bytes()).collect();
        match self.get(client, &format!("/explain?pod={query}")).await {
            Ok(text) => {
                Ok(Some(serde_json::from_str(&text).with_context(|| {
                    format!("{}'s /explain is not a decision", self.key())
                })?))
            }
            Err(kube::Error::Api(status)) if status.code == 404 && status.message.contains("no decision") => {
                Ok(None)
            }
            Err(e) => Err(refused(self, "/explain", e)),
        }
    }
}

fn refused(agent: &Agent, path: &str, error: kube::Error) -> anyhow::Error {
    let why = match &error {
        kube::Error::Api(status) => format!("{} {}: {}", status.code, status.reason, status.message.trim()),
        other => other.to_string(),
    };
    anyhow::anyhow!(
        "asking the headroom agent {} on node {} for {path} (pods/proxy to port {}): {why}",
        agent.key(),
        agent.node,
        agent.port
    )
}

async fn agents(client: &kube::Client, cli: &Cli, node: Option<&str>) -> anyhow::Result<Vec<Agent>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &cli.agent_namespace);
    let mut params = ListParams::default().labels(&cli.agent_selector);
    if let Some(node) = node {
        params = params.fields(&format!("spec.nodeName={node}"));
    }
    let list = api.list(&params).await.with_context(|| {
        format!(
            "listing the headroom agent's Pods ({} in namespace {})",
            cli.agent_selector, cli.agent_namespace
        )
    })?;
    let running: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    running.into_iter().map(Agent::of).collect()
}

async fn agent_on(client: &kube::Client, cli: &Cli, node: &str) -> anyhow::Result<Agent> {
    let mut found = agents(client, cli, Some(node)).await?;
    match found.len() {
        0 => bail!(
            "no running headroom agent on node {node} (Pods {} in namespace {}); is the DaemonSet scheduled there?",
            cli.agent_selector,
            cli.agent_namespace
        ),
        _ => Ok(found.remove(0)),
    }
}

async fn explain(cli: &Cli, pod: &str, namespace: Option<&str>, output: Output) -> anyhow::Result<()> {
    let (client, default_namespace) = client(cli).await?;
    let namespace = namespace.unwrap_or(&default_namespace).to_string();
    let key = format!("{namespace}/{pod}");
    let object = Api::<Pod>::namespaced(client.clone(), &namespace)
        .get(pod)
        .await
        .with_context(|| format!("getting Pod {key}"))?;
    let Some(node) = object.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        bail!("Pod {key} is not on a node yet: resize preemption only concerns running Pods");
    };
    let agent = agent_on(&client, cli, &node).await?;
    let decision = agent.explain(&client, &key).await?;
    let status = agent.status(&client).await?;
    let explained = Explained {
        pod: key,
        node,
        agent: agent.key(),
        resize: (&headroom_node_model::resize_state(&object)).into(),
        decision,
        headroom: status.headroom,
        headroom_missing: status.headroom_missing,
    };
    output.print(&explained, |_| {
        explain_text(&explained, now_unix()).trim_end().to_string()
    })
}

async fn status(cli: &Cli, node: Option<&str>, output: Output) -> anyhow::Result<()> {
    let (client, _) = client(cli).await?;
    if let Some(node) = node {
        let agent = agent_on(&client, cli, node).await?;
        let view = agent.status(&client).await?;
        return output.print(&view, |wide| {
            status_text(&agent.key(), &view, now_unix(), wide)
                .trim_end()
                .to_string()
        });
    }
    let mut rows = Vec::new();
    for agent in agents(&client, cli, None).await? {
        let view = agent.status(&client).await.map_err(|e| format!("{e:#}"));
        rows.push((agent.key(), view));
    }
    if rows.is_empty() {
        bail!(
            "no running headroom agent (Pods {} in namespace {})",
            cli.agent_selector,
            cli.agent_namespace
        );
    }
    let views: Vec<&NodeView> = rows.iter().filter_map(|(_, v)| v.as_ref().ok()).collect();
    output.print(&views, |_| nodes_text(&rows).trim_end().to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Explain {
            pod,
            namespace,
            output,
        } => explain(&cli, pod, namespace.as_deref(), *output).await,
        Command::Status { node, output } => status(&cli, node.as_deref(), *output).await,
        Command::Completion(args) => {
            cli_docs::print_completion(Cli::command(), *args);
            Ok(())
        }
        Command::Man(args) => Ok(cli_docs::write_man_pages(Cli::command(), &args.dir).map(drop)?),
    }
}
