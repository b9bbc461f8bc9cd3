//! `headroomd serve`, the command line: flags and file into a [`Config`], then the node daemon
//! that [`crate::node`] assembles, until SIGINT or SIGTERM.

use std::{path::PathBuf, sync::Arc};

use anyhow::Context as _;
use headroom_node_model::{parse_cpu_millis, parse_memory_bytes};

use crate::{
    collector::KernelEvents,
    config::{self, Config, ConfigError, ConfigIssue},
    kube_source::{self, KubeSourceError, PodsFrom},
    node::{self, Actuation, NodeOptions, ProbeMode, preflight},
    pipeline::reservations_file::RESERVATIONS_FILE,
};

/// Flags of `headroomd serve`. Flags override the file.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Unix socket path (default /run/headroom/headroomd.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Node name served in snapshots.
    #[arg(long)]
    pub node_name: Option<String>,
    /// Node allocatable CPU, a Kubernetes quantity ("8", "7500m").
    #[arg(long, value_name = "QUANTITY")]
    pub allocatable_cpu: Option<String>,
    /// Node allocatable memory, a Kubernetes quantity ("32Gi").
    #[arg(long, value_name = "QUANTITY")]
    pub allocatable_memory: Option<String>,
    /// Open connections at most on each listener, the Unix socket and TCP (default 256); one over
    /// it is closed at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// `/metrics` listen address ("" disables it).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Check the configuration, print it and exit.
    #[arg(long)]
    pub check_config: bool,
    /// Whether the eBPF probes must load.
    #[arg(long, value_enum, default_value_t = ProbeMode::IfAvailable)]
    pub probes: ProbeMode,
    /// Kernel BTF to read the probes' struct offsets from. A program needing a field this
    /// BTF lacks is refused (named in the log and `headroom_probe_programs_attached`); the
    /// others load.
    #[arg(long, value_name = "FILE", default_value = "/sys/kernel/btf/vmlinux")]
    pub btf: PathBuf,
    /// Cgroups the probes' per-cgroup maps hold (default: those present at start plus a
    /// quarter). Their per-CPU values make this the probes' kernel memory: about 620 bytes per
    /// cgroup and CPU. A full map is counted (`headroom_probe_map_full_total`) and WARNed.
    #[arg(long, value_name = "N")]
    pub max_cgroups: Option<u32>,
    /// How kernel events (throttle episodes, reclaim stalls, OOM kills, cgroups created and
    /// removed) reach WatchHeadroom: `push` forwards each as the ring buffer wakes the collector
    /// (milliseconds); `poll` takes them at the collector's 100 ms cycle (the earlier behaviour,
    /// kept as the benchmark's peer).
    #[arg(long, value_enum, default_value_t = KernelEvents::Push)]
    pub kernel_events: KernelEvents,
    /// `on`: ApplyResize writes the Pods' cgroups (one actuating daemon per node: it locks the
    /// intent directory and the cgroup roots). `off`: observe only, beside another daemon.
    #[arg(long, value_enum, default_value_t = Actuation::On)]
    pub actuation: Actuation,
    /// Directory of the actuator's intent records (crash recovery).
    #[arg(long, value_name = "DIR", default_value = "/run/headroom/intents")]
    pub intent_dir: PathBuf,
    /// Where the node's allocatable and Pods come from: `static` (the configured allocatable, no
    /// Pods counted) or `kube` (this node's Node object and the Pods bound to it, watched on the
    /// API server with the in-cluster service account; `--allocatable-*` are then ignored).
    #[arg(long, value_enum, default_value_t = PodsFrom::Static)]
    pub pods_from: PodsFrom,
    /// With `--pods-from kube`: the Node to watch (default: the NODE_NAME environment variable,
    /// set from `spec.nodeName` by the downward API). Also the node name served, unless
    /// `--node-name` is given.
    #[arg(long, value_name = "NAME")]
    pub kube_node: Option<String>,
}

/// The Node `--pods-from kube` watches (flag, else `NODE_NAME`); `None` with `--pods-from static`.
pub fn kube_node(args: &ServeArgs) -> Result<Option<String>, KubeSourceError> {
    match args.pods_from {
        PodsFrom::Static => Ok(None),
        PodsFrom::Kube => {
            kube_source::resolve_node_name(args.kube_node.as_deref(), std::env::var("NODE_NAME").ok())
                .map(Some)
        }
    }
}

/// The configuration: file (if any), then flags; every problem reported at once.
pub fn resolve_config(args: &ServeArgs) -> Result<Config, ConfigError> {
    // A bad file does not hide bad flags: both are checked and reported together.
    let (mut c, mut issues, mut source_name) = match args.config.as_deref().map(config::load) {
        None => (Config::default(), Vec::new(), "command line".to_string()),
        Some(Ok(c)) => (c, Vec::new(), "command line".to_string()),
        Some(Err(e)) => (Config::default(), e.issues, e.source_name),
    };
    let file_issues = issues.len();
    let mut issue = |flag: &str, message: String| {
        issues.push(ConfigIssue {
            path: flag.into(),
            message,
        })
    };
    if let Some(s) = &args.socket {
        c.server.socket_path = s.clone();
    }
    match (&args.node_name, kube_node(args)) {
        (Some(n), Ok(_)) => c.pipeline.node_name = n.clone(),
        (None, Ok(Some(n))) => c.pipeline.node_name = n,
        (None, Ok(None)) => {}
        (_, Err(e)) => issue("--kube-node", e.to_string()),
    }
    if let Some(q) = &args.allocatable_cpu {
        match parse_cpu_millis(q) {
            Ok(m) => c.pipeline.allocatable.cpu_millis = m,
            Err(e) => issue("--allocatable-cpu", e.to_string()),
        }
    }
    if let Some(q) = &args.allocatable_memory {
        match parse_memory_bytes(q) {
            Ok(b) => c.pipeline.allocatable.memory_bytes = b,
            Err(e) => issue("--allocatable-memory", e.to_string()),
        }
    }
    if let Some(n) = args.max_connections {
        c.server.connections.max_connections = n as usize;
    }
    if let Some(a) = &args.metrics_listen {
        if a.is_empty() {
            c.metrics_listen = None;
        } else {
            match a.parse() {
                Ok(addr) => c.metrics_listen = Some(addr),
                Err(e) => issue("--metrics-listen", format!("{a:?}: {e}")),
            }
        }
    }
    if issues.is_empty() {
        Ok(c)
    } else {
        if file_issues > 0 && issues.len() > file_issues {
            source_name.push_str(" and the command line");
        }
        Err(ConfigError { source_name, issues })
    }
}

/// `headroomd serve`: probes, collector, resolver and actuator ([`crate::node`]).
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = resolve_config(args).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Before the intent directory, the actuator's cgroup roots or the socket are touched.
    preflight(&config)?;
    if args.check_config {
        println!("{config:#?}");
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("headroomd")
        .build()
        .context("start the Tokio runtime")?;
    let kube_node = kube_node(args)?;
    if kube_node.is_some() && (args.allocatable_cpu.is_some() || args.allocatable_memory.is_some()) {
        tracing::warn!(
            "--pods-from kube: the allocatable comes from the Node object; --allocatable-* are ignored"
        );
    }
    runtime.block_on(async {
        // The client first: without credentials nothing else is started.
        let kube_client = match &kube_node {
            None => None,
            Some(_) => Some(kube_client().await.context("--pods-from kube")?),
        };
        let mut options = NodeOptions::new(config);
        if args.actuation == Actuation::On {
            // Beside the intent records, under the same flock: one writer per node.
            options.config.pipeline.reservations_file = Some(args.intent_dir.join(RESERVATIONS_FILE));
        }
        options.probes = args.probes;
        options.max_cgroups = args.max_cgroups;
        options.btf_path = args.btf.clone();
        options.collector.kernel_events = args.kernel_events;
        options.intent_dir = args.intent_dir.clone();
        options.actuation = args.actuation;
        if kube_client.is_some() {
            kube_source::prime(&options.pod_source);
        }
        let mut node = node::start(options).await?;
        let kube_source = match (kube_client, &kube_node) {
            (Some(client), Some(name)) => {
                tracing::info!(node = %name, "watching this node's Node and Pods on the API server");
                // Pods that leave the node take their open cgroup files and intent records along.
                let on_pods = node.actuator.clone().map(|actuator| -> kube_source::OnPods {
                    Arc::new(move |pods| {
                        let present: std::collections::HashSet<&str> =
                            pods.iter().map(|p| p.pod.uid.as_str()).collect();
                        actuator.retain(|uid| present.contains(uid));
                    })
                });
                Some(kube_source::spawn(client, name, node.pod_source.clone(), on_pods))
            }
            _ => None,
        };
        tracing::info!(
            socket = %node.daemon.server.path().display(),
            tcp = ?node.daemon.server.tcp_addr(),
            "headroomd serving"
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => { r?; tracing::info!("SIGINT: shutting down"); }
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            r = node.daemon.server.wait() => { r?; anyhow::bail!("gRPC server stopped unexpectedly"); }
        }
        if let Some(source) = kube_source {
            source.shutdown().await;
        }
        node.shutdown().await
    })
}

/// kube's default client (in-cluster or kubeconfig), naming itself `headroomd` to the API server
/// ([`headroom_client::kube_user_agent`]).
async fn kube_client() -> Result<kube::Client, KubeSourceError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| KubeSourceError::from(kube::Error::InferConfig(e)))?;
    config.headers.push(headroom_client::kube_user_agent("headroomd"));
    kube::Client::try_from(config).map_err(KubeSourceError::from)
}
