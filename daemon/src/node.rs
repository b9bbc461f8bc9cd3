//! The whole node daemon assembled: probes → collector → pipeline → gRPC, with the cgroupfs
//! resolver and the real cgroup actuator. `headroomd serve` and the standalone shim both start
//! it through [`start`].
use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use headroom_actuator::{Actuator, ActuatorConfig, Roots};
use tracing::{info, warn};

use crate::{
    actuation::CgroupActuator,
    cgroups::{CgroupHost, CgroupIndex, CgroupfsResolver},
    collector::{Collector, CollectorConfig},
    config::Config,
    observe::ensure_tracefs,
    pipeline::pods::InMemoryPodSource,
    probes::{ProbeOptions, Probes},
    serve::{Components, Daemon},
};

/// Whether the probes must load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProbeMode {
    /// Load them; without them (not root, no BTF) serve cgroup-file figures and say why.
    #[default]
    IfAvailable,
    /// Refuse to start without them.
    Required,
    /// Do not load them.
    Off,
}

/// How to start the node daemon.
#[derive(Clone)]
pub struct NodeOptions {
    /// Server, pipeline and metrics configuration.
    pub config: Config,
    /// Probes policy.
    pub probes: ProbeMode,
    /// Pod cgroup roots the actuator may write (default: headroom's standalone roots).
    pub roots: Option<Roots>,
    /// Where intent records live (tmpfs in production: `/run/headroom/intents`).
    pub intent_dir: PathBuf,
    /// Collector tuning.
    pub collector: CollectorConfig,
    /// Pods counted against the node.
    pub pod_source: Arc<InMemoryPodSource>,
}

impl NodeOptions {
    /// Defaults around `config`.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            probes: ProbeMode::default(),
            roots: None,
            intent_dir: PathBuf::from("/run/headroom/intents"),
            collector: CollectorConfig::default(),
            pod_source: Arc::new(InMemoryPodSource::default()),
        }
    }
}

/// A running node daemon.
pub struct Node {
    /// Pipeline, server and metrics.
    pub daemon: Daemon,
    /// The actuator behind `ApplyResize` (the standalone store primes it).
    pub actuator: Arc<CgroupActuator>,
    /// The Pods counted against the node.
    pub pod_source: Arc<InMemoryPodSource>,
    /// Why the probes are not loaded, if they are not.
    pub probes_missing: Option<String>,
    collector: Collector,
}

impl Node {
    /// Stops the collector, then the server and the pipeline.
    pub async fn shutdown(self) -> Result<()> {
        drop(self.collector);
        self.daemon.shutdown().await
    }
}

/// Starts everything. Must run inside a multi-threaded Tokio runtime.
pub async fn start(options: NodeOptions) -> Result<Node> {
    let host = CgroupHost::detect().context("read the host's cgroup layout")?;
    let (probes, probes_missing) = match options.probes {
        ProbeMode::Off => (None, Some("probes disabled by configuration".to_string())),
        mode => {
            // Loading runs the verifier (~0.2 s): off the async workers.
            let loaded = tokio::task::spawn_blocking(|| {
                ensure_tracefs();
                Probes::load(&ProbeOptions::default())
            })
            .await?;
            match loaded {
                Ok(probes) => (Some(probes), None),
                Err(e) if mode == ProbeMode::IfAvailable => {
                    warn!("serving without eBPF probes: {e}");
                    (None, Some(e.to_string()))
                }
                Err(e) => return Err(e).context("the probes are required (--probes required)"),
            }
        }
    };
    let roots = match options.roots {
        Some(roots) => roots,
        None => Roots::detect_standalone().context("find the Pod cgroup roots")?,
    };
    std::fs::create_dir_all(&options.intent_dir)
        .with_context(|| format!("create the intent directory {}", options.intent_dir.display()))?;
    let mut actuator = Actuator::new(ActuatorConfig::new(roots, options.intent_dir.clone()))
        .context("start the actuator")?;
    // A resize interrupted by a crash is finished (or undone) before anything new is applied.
    let recovered = actuator.recover().context("recover interrupted resizes")?;
    if !recovered.is_empty() {
        info!(?recovered, "recovered interrupted resizes");
    }
    let actuator = Arc::new(CgroupActuator::new(actuator));
    let index = Arc::new(ArcSwap::from_pointee(CgroupIndex::build(&host.hierarchies())));
    let components = Components {
        resolver: Arc::new(CgroupfsResolver::new(index.clone(), options.pod_source.clone())),
        pod_source: options.pod_source.clone(),
        actuator: actuator.clone(),
    };
    let daemon = Daemon::start(&options.config, components).await?;
    let collector = Collector::spawn(
        probes,
        host,
        index,
        daemon.pipeline.sender(),
        options.collector.clone(),
    )
    .context("start the collector")?;
    Ok(Node {
        daemon,
        actuator,
        pod_source: options.pod_source,
        probes_missing,
        collector,
    })
}
