//! The node daemon assembled, in one place: probes → collector → pipeline → gRPC server (+ health,
//! reflection; Unix socket, and TCP with mutual TLS when `[server.tcp]` is set) → `/metrics`.
//!
//! [`Daemon::start`] takes its parts as [`Components`]: the [`PodResolver`] (cgroup → Pod), the
//! [`PodSource`] (Pods counted against the node) and the [`ResizeActuator`]; [`start`] assembles
//! the real ones (probes, collector, cgroupfs resolver, cgroup actuator). `headroomd serve`
//! ([`crate::serve`], the command line) and the standalone shim both start it through [`start`].
use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use headroom_actuator::{Actuator, ActuatorConfig, KubeResources, Roots};
use headroom_common::CgroupKey;
use tracing::{info, warn};

use crate::{
    actuation::CgroupActuator,
    cgroups::{CgroupHost, CgroupIndex, CgroupfsResolver},
    collector::{Collector, CollectorConfig, ProbeReport, ProbeReportCell},
    config::Config,
    metrics::{self, Metrics},
    observe::ensure_tracefs,
    pipeline::{
        self, CgroupOwner, InMemoryPodSource, PipelineHandle, PodEntry, PodResolver, PodSource,
        SnapshotReader,
    },
    probes::{ProbeOptions, Probes},
    readiness::{self, ReadinessInputs},
    server::{self, ResizeActuator, ServerHandle, UnavailableActuator},
};

/// How often readiness and liveness are re-evaluated.
const READINESS_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

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

/// Whether this daemon writes cgroups (`ApplyResize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Actuation {
    /// Apply resizes: takes the intent directory and the Pod cgroup roots for itself (their
    /// flocks), so one node's actuator is the only writer.
    #[default]
    On,
    /// Observe only: `ApplyResize` answers `UNIMPLEMENTED`, and neither the intent directory nor
    /// the roots are locked, so an observer can run beside the node's actuating daemon.
    Off,
}

/// How to start the node daemon.
#[derive(Clone)]
pub struct NodeOptions {
    /// Server, pipeline and metrics configuration.
    pub config: Config,
    /// Probes policy.
    pub probes: ProbeMode,
    /// Cgroups the probes' per-cgroup maps hold (`None`: sized from the cgroups present).
    pub max_cgroups: Option<u32>,
    /// Where cgroups are mounted (normally `/sys/fs/cgroup`).
    pub cgroup_mount: PathBuf,
    /// Kernel BTF for the probes' struct offsets (normally `/sys/kernel/btf/vmlinux`).
    pub btf_path: PathBuf,
    /// Pod cgroup roots the actuator may write (default: headroom's standalone roots).
    pub roots: Option<Roots>,
    /// Where intent records live (tmpfs in production: `/run/headroom/intents`).
    pub intent_dir: PathBuf,
    /// Whether `ApplyResize` writes cgroups.
    pub actuation: Actuation,
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
            max_cgroups: None,
            cgroup_mount: PathBuf::from(headroom_cgroupfs::setup::DEFAULT_MOUNT),
            btf_path: ProbeOptions::default().btf_path,
            roots: None,
            intent_dir: PathBuf::from("/run/headroom/intents"),
            actuation: Actuation::default(),
            collector: CollectorConfig::default(),
            pod_source: Arc::new(InMemoryPodSource::default()),
        }
    }
}

/// A running node daemon.
pub struct Node {
    /// Pipeline, server and metrics.
    pub daemon: Daemon,
    /// The actuator behind `ApplyResize` (the standalone store primes it); `None` with
    /// [`Actuation::Off`].
    pub actuator: Option<Arc<CgroupActuator>>,
    /// The Pods counted against the node.
    pub pod_source: Arc<InMemoryPodSource>,
    /// Why the probes are not loaded, if they are not.
    pub probes_missing: Option<String>,
    collector: Collector,
}

impl Node {
    /// The in-process door for a process that embeds this daemon.
    pub fn embedded(&self) -> Embedded {
        Embedded {
            pod_source: self.pod_source.clone(),
            actuator: self.actuator.clone(),
        }
    }

    /// Stops the collector, then the server and the pipeline.
    pub async fn shutdown(self) -> Result<()> {
        drop(self.collector);
        self.daemon.shutdown().await
    }
}

/// The one in-process door into a daemon that runs inside another process (the standalone shim,
/// which plays the API server and the kubelet): which Pods count against the node, and the
/// container resources each Pod was created with (where `ApplyResize` starts from). Everything
/// else (headroom, reservations, resizes) goes over gRPC, as for any client.
#[derive(Clone)]
pub struct Embedded {
    pod_source: Arc<InMemoryPodSource>,
    actuator: Option<Arc<CgroupActuator>>,
}

impl Embedded {
    /// The Pods counted against the node, replacing the previous set.
    pub fn set_pods(&self, pods: Vec<PodEntry>) {
        self.pod_source.set(pods);
    }

    /// A Pod's containers with the resources they run with now.
    pub fn pod_created(&self, pod_uid: &str, containers: impl IntoIterator<Item = (String, KubeResources)>) {
        if let Some(actuator) = &self.actuator {
            actuator.remember(pod_uid, containers);
        }
    }

    /// A Pod that is gone: nothing of it is kept.
    pub fn pod_gone(&self, pod_uid: &str) {
        if let Some(actuator) = &self.actuator {
            actuator.forget(pod_uid);
        }
    }
}

/// Starts everything. Must run inside a multi-threaded Tokio runtime.
pub async fn start(options: NodeOptions) -> Result<Node> {
    // Before any socket: the soft limit is often 1024, a few hundred connections from EMFILE.
    if let Err(e) = server::connections::raise_open_file_limit() {
        warn!("cannot raise the open-file soft limit: {e}");
    }
    let host = CgroupHost::detect(&options.cgroup_mount).context("read the host's cgroup layout")?;
    let (probes, probes_missing) = match options.probes {
        ProbeMode::Off => (None, Some("probes disabled by configuration".to_string())),
        mode => {
            // Loading runs the verifier (~0.2 s): off the async workers.
            let probe_options = ProbeOptions {
                cgroup_mount: options.cgroup_mount.clone(),
                btf_path: options.btf_path.clone(),
                max_cgroups: options.max_cgroups,
                ..ProbeOptions::default()
            };
            let loaded = tokio::task::spawn_blocking(move || {
                ensure_tracefs();
                Probes::load(&probe_options)
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
    // The Pods' cgroup root (`--cgroup-root`) must reach the index, or none of their live figures
    // are attributed.
    let pod_roots: Vec<String> = roots
        .dirs()
        .paths()
        .first()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    let actuator = match options.actuation {
        Actuation::On => Some(start_actuator(roots, &options.intent_dir)?),
        Actuation::Off => {
            info!("--actuation off: observing only; ApplyResize is refused");
            None
        }
    };
    let index = Arc::new(ArcSwap::from_pointee(CgroupIndex::build_with(
        &host.hierarchies(),
        &pod_roots,
    )));
    let components = Components {
        resolver: Arc::new(CgroupfsResolver::new(index.clone(), options.pod_source.clone())),
        pod_source: options.pod_source.clone(),
        actuator: match &actuator {
            Some(a) => a.clone(),
            None => Arc::new(UnavailableActuator),
        },
    };
    // Loaded probes are unready until the collector has read them once.
    let report: ProbeReportCell = Arc::new(ArcSwap::from_pointee(ProbeReport {
        loaded: probes.is_some(),
        ..ProbeReport::default()
    }));
    let probed = ProbeSide {
        report: report.clone(),
        skipped: probes_missing.clone(),
    };
    let daemon = Daemon::start_with(&options.config, components, Some(probed)).await?;
    let collector = Collector::spawn(
        probes,
        host,
        index,
        daemon.pipeline.sender(),
        CollectorConfig {
            pod_roots,
            ..options.collector.clone()
        },
        report,
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

/// The cgroup actuator on `roots`, with any resize a crash interrupted finished or undone first.
fn start_actuator(roots: Roots, intent_dir: &std::path::Path) -> Result<Arc<CgroupActuator>> {
    std::fs::create_dir_all(intent_dir)
        .with_context(|| format!("create the intent directory {}", intent_dir.display()))?;
    let mut actuator =
        Actuator::new(ActuatorConfig::new(roots, intent_dir.to_path_buf())).context("start the actuator")?;
    let recovered = actuator.recover().context("recover interrupted resizes")?;
    if !recovered.is_empty() {
        info!(?recovered, "recovered interrupted resizes");
    }
    Ok(Arc::new(CgroupActuator::new(actuator)))
}

/// Checks what can only be checked by reading other files, before anything is started or
/// written: the TLS files of `[server.tcp]` (each problem names the setting and the file).
pub fn preflight(config: &Config) -> Result<(), server::TlsError> {
    if let Some(tcp) = &config.tcp {
        server::tls::load(tcp)?;
    }
    Ok(())
}

/// Starts the aggregator for `config`.
pub fn spawn_pipeline(
    config: &Config,
    resolver: Arc<dyn PodResolver>,
    pod_source: Arc<dyn PodSource>,
) -> std::io::Result<(PipelineHandle, SnapshotReader)> {
    pipeline::spawn(config.pipeline.clone(), resolver, pod_source)
}

/// A resolver that knows no cgroup (harnesses that feed the pipeline cgroups nobody owns).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoResolver;

impl PodResolver for NoResolver {
    fn resolve(&self, _key: &CgroupKey) -> Option<CgroupOwner> {
        None
    }
}

/// What the daemon is made of besides the config.
pub struct Components {
    /// cgroup → Pod.
    pub resolver: Arc<dyn PodResolver>,
    /// Pods counted against the node.
    pub pod_source: Arc<dyn PodSource>,
    /// Applies resizes.
    pub actuator: Arc<dyn ResizeActuator>,
}

impl Default for Components {
    /// Standalone with nothing plugged in: no resolver, an empty in-memory Pod set, no actuator.
    fn default() -> Self {
        Self {
            resolver: Arc::new(NoResolver),
            pod_source: Arc::new(InMemoryPodSource::default()),
            actuator: Arc::new(UnavailableActuator),
        }
    }
}

/// The probes as the daemon's metrics and readiness see them.
#[derive(Clone)]
pub struct ProbeSide {
    /// The collector's newest report.
    pub report: ProbeReportCell,
    /// Why the probes are not loaded, when that was allowed (`--probes off` or `if-available`).
    pub skipped: Option<String>,
}

/// A running daemon (inside a Tokio runtime).
pub struct Daemon {
    /// The pipeline (feed it through `pipeline.sender()`).
    pub pipeline: PipelineHandle,
    /// Snapshot reader.
    pub reader: SnapshotReader,
    /// The gRPC server.
    pub server: ServerHandle,
    /// The `/metrics` task and its bound address.
    pub metrics: Option<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>,
    /// Keeps grpc health's readiness and liveness current ([`crate::readiness`]).
    pub readiness: tokio::task::JoinHandle<()>,
}

impl Daemon {
    /// Starts pipeline, gRPC server and `/metrics`, without probes.
    pub async fn start(config: &Config, components: Components) -> anyhow::Result<Daemon> {
        Self::start_with(config, components, None).await
    }

    /// [`Daemon::start`], with the probes' report for `/metrics` and readiness.
    pub async fn start_with(
        config: &Config,
        components: Components,
        probes: Option<ProbeSide>,
    ) -> anyhow::Result<Daemon> {
        preflight(config)?;
        let resolver = components.resolver.clone();
        let pod_source = components.pod_source.clone();
        let (pipeline, reader) = spawn_pipeline(config, components.resolver, components.pod_source)
            .context("start the pipeline aggregator")?;
        let server = server::serve(
            &config.server,
            config.tcp.as_ref(),
            reader.clone(),
            pipeline.ledger(),
            components.actuator,
        )
        .await
        .context("start the gRPC server")?;
        let metrics = match config.metrics_listen {
            None => None,
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("bind /metrics on {addr}"))?;
                let bound = listener.local_addr()?;
                let m = match &probes {
                    Some(p) => Metrics::with_probes(reader.clone(), resolver, p.report.clone()),
                    None => Metrics::new(reader.clone()),
                }
                .with_connections(server.connections().clone());
                let task = tokio::spawn(metrics::serve(listener, Arc::new(m)));
                Some((bound, task))
            }
        };
        let readiness = readiness::spawn(
            server.health().clone(),
            ReadinessInputs {
                reader: reader.clone(),
                pod_source,
                probes: probes.as_ref().map(|p| p.report.clone()),
                probes_skipped: probes.and_then(|p| p.skipped),
            },
            READINESS_PERIOD,
        )
        .await;
        Ok(Daemon {
            pipeline,
            reader,
            server,
            metrics,
            readiness,
        })
    }

    /// Stops everything.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.readiness.abort();
        if let Some((_, task)) = self.metrics {
            task.abort();
        }
        // The pipeline stops concurrently with the server: its end closes the snapshot
        // channel, which ends every WatchHeadroom stream, so the server's graceful shutdown
        // does not wait on subscribers that would never leave by themselves.
        let pipeline = self.pipeline;
        let stopping = tokio::task::spawn_blocking(move || pipeline.shutdown());
        let result = self.server.shutdown().await;
        stopping.await?;
        result
    }
}
