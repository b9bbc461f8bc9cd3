//! The Kubernetes backend (kube-rs, k8s-openapi `v1_37`): one shim per node.
//!
//! - [`watch`]: Pods of this node (field selector `spec.nodeName`), the Node, Namespaces,
//!   PriorityClasses and PodDisruptionBudgets, each a `kube::runtime::watcher` with backoff into a
//!   reflector store; any change wakes the reconciler.
//! - [`reconcile`]: one cycle: Deferred resizes → [`crate::decide::decide_all`] → preemption, and
//!   following earlier preemptions until the kubelet has actuated the resize.
//! - [`effects`]: what the scheduler does to a victim (a `DisruptionTarget` status patch, then a
//!   graceful delete with a UID precondition; or the Eviction API) and the Events it posts
//!   (`events.k8s.io/v1`, as kube-scheduler's event broadcaster does).
//! - [`reservations`] and [`headroomd`]: the room promised to a resize, in headroomd's ledger (the
//!   default) or, only when told to run without headroomd, in this process; and headroomd's live
//!   headroom (`WatchHeadroom`), which feeds the decision and must be fresh before anyone is
//!   evicted.
//! - [`rbac`]: the one table of every API call; RBAC manifests are tested against it.
//! - [`metrics`] and [`http`]: `/metrics`, `/healthz`, `/readyz` for the DaemonSet's probes.
//! - [`board`]: the latest decision of each resize and the live headroom, as `/status` and
//!   `/explain` for `kubectl headroom`.
//!
//! Opt-outs: a namespace labelled `headroom.io/preemption=disabled` has no resize served and no Pod
//! preempted; a node whose `spec.podPreemptionPolicy.disableResizePreemption` is non-empty gets no
//! resize preemption (read live from the Node watch, decided by the core).

pub mod board;
pub mod client;
pub mod effects;
pub mod headroomd;
pub mod http;
pub mod metrics;
pub mod rbac;
pub mod reconcile;
pub mod reservations;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::cluster_file::ClusterFileError;
use crate::decide::DecideError;

pub use board::Board;
pub use headroomd::{Headroomd, HeadroomdLedger, LiveHeadroom, NotFresh};
pub use metrics::Metrics;
pub use reconcile::{Backend, CycleReport};
pub use reservations::{LocalLedger, ReservationError, Reservations};
pub use watch::Stores;

/// The namespace label that opts a namespace out of resize preemption.
pub const OPT_OUT_LABEL: &str = "headroom.io/preemption";
/// Its value that opts out.
pub const OPT_OUT_VALUE: &str = "disabled";

/// How victims are removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PreemptionMode {
    /// As kube-scheduler: `DisruptionTarget=True` (`PreemptionByScheduler`), then a graceful
    /// delete with a UID precondition. PDBs are respected where a choice allows, not enforced.
    #[default]
    Delete,
    /// The Eviction API (`pods/eviction`): the API server refuses evictions that would violate a
    /// PodDisruptionBudget (HTTP 429), and the resize then stays Deferred.
    Eviction,
}

impl PreemptionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptionMode::Delete => "delete",
            PreemptionMode::Eviction => "eviction",
        }
    }
}

/// Everything the backend is told.
#[derive(Clone, Debug)]
pub struct KubeConfig {
    /// This node (the downward API's `spec.nodeName`).
    pub node_name: String,
    pub preemption: PreemptionMode,
    /// Only log and post Events for what would be preempted; evict nobody.
    pub dry_run: bool,
    /// Named in the `DisruptionTarget` message as the scheduler names itself.
    pub scheduler_name: String,
    /// `reportingController` of posted Events.
    pub reporting_controller: String,
    /// `reportingInstance` of posted Events.
    pub reporting_instance: String,
    /// A full reconcile at least this often, even without watch events.
    pub resync: Duration,
    /// How long a preempted-for resize may take before its reservation is released.
    pub resize_timeout: Duration,
    /// The oldest headroomd snapshot evictions may rest on; an older one is refreshed with
    /// `GetHeadroom` first, and if that is still older (or headroomd is unreachable) nobody is
    /// evicted.
    pub max_headroom_age: Duration,
    /// Shrink-before-evict switches.
    pub give_way: crate::give_way::GiveWaySettings,
}

impl KubeConfig {
    pub fn new(node_name: impl Into<String>) -> Self {
        let node_name = node_name.into();
        KubeConfig {
            reporting_instance: format!("headroom-shim-{node_name}"),
            node_name,
            preemption: PreemptionMode::Delete,
            dry_run: false,
            scheduler_name: "headroom-shim".to_string(),
            reporting_controller: "headroom.io/headroom-shim".to_string(),
            resync: Duration::from_secs(30),
            resize_timeout: Duration::from_secs(120),
            max_headroom_age: DEFAULT_MAX_HEADROOM_AGE,
            give_way: Default::default(),
        }
    }
}

/// Default of [`KubeConfig::max_headroom_age`].
pub const DEFAULT_MAX_HEADROOM_AGE: Duration = Duration::from_secs(2);

/// Where reservations are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LedgerKind {
    /// headroomd's ledger over `--headroomd-socket`, with its live headroom as the freshness gate.
    #[default]
    Headroomd,
    /// In this process only, without headroomd: headroomd's headroom does not see the
    /// reservations, and nothing checks that headroom is live before evicting.
    Local,
}

/// The reservations the backend makes and the live headroom it decides and evicts on.
#[derive(Clone)]
pub struct NodeLedger {
    pub reservations: Arc<dyn Reservations>,
    /// `None` only with the in-process ledger: no live headroom, no freshness gate.
    pub live: Option<Arc<LiveHeadroom>>,
}

impl NodeLedger {
    /// headroomd's ledger and its `WatchHeadroom` subscription (inside a Tokio runtime).
    pub fn headroomd(socket: impl Into<PathBuf>, metrics: Arc<Metrics>) -> Self {
        let headroomd = Headroomd::new(socket);
        tracing::info!(socket = %headroomd.socket().display(), "reservations in headroomd's ledger; live headroom from WatchHeadroom");
        NodeLedger {
            reservations: Arc::new(HeadroomdLedger::new(headroomd.clone())),
            live: Some(LiveHeadroom::start(headroomd, metrics)),
        }
    }

    /// The in-process ledger (explicitly without headroomd).
    pub fn local() -> Self {
        tracing::warn!(
            "--ledger=local: reservations are kept in this process only (headroomd's ledger and headroom do not see them) and no live headroom is checked before evicting"
        );
        NodeLedger {
            reservations: Arc::new(LocalLedger::default()),
            live: None,
        }
    }
}

/// `headroom-shim kube …`: the command line of the Kubernetes backend.
#[derive(Clone, Debug, clap::Args)]
pub struct KubeArgs {
    /// This node's name (from the downward API: `spec.nodeName`).
    #[arg(long)]
    pub node_name: String,
    /// headroomd's Unix socket (live headroom and the reservation ledger).
    #[arg(long, default_value = "/run/headroom/headroomd.sock")]
    pub headroomd_socket: PathBuf,
    /// Where reservations are kept: headroomd's ledger, or (without headroomd) this process.
    #[arg(long, value_enum, default_value_t = LedgerKind::Headroomd)]
    pub ledger: LedgerKind,
    /// Oldest headroomd snapshot evictions may rest on (milliseconds); older ones are refreshed
    /// with GetHeadroom, and if still older nobody is evicted.
    #[arg(long, default_value_t = DEFAULT_MAX_HEADROOM_AGE.as_millis() as u64, value_name = "MS")]
    pub max_headroom_age_ms: u64,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "0.0.0.0:9465")]
    pub metrics_addr: std::net::SocketAddr,
    /// How victims are removed.
    #[arg(long, value_enum, default_value_t = PreemptionMode::Delete)]
    pub preemption: PreemptionMode,
    /// Only log and post Events for what would be preempted.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds between full reconciles without watch events.
    #[arg(long, default_value_t = 30)]
    pub resync_seconds: u64,
    /// Seconds a preempted-for resize may take before its reservation is released.
    #[arg(long, default_value_t = 120)]
    pub resize_timeout_seconds: u64,
    #[command(flatten)]
    pub give_way: crate::give_way::GiveWayArgs,
}

impl KubeArgs {
    pub fn config(&self) -> KubeConfig {
        KubeConfig {
            preemption: self.preemption,
            dry_run: self.dry_run,
            resync: Duration::from_secs(self.resync_seconds.max(1)),
            resize_timeout: Duration::from_secs(self.resize_timeout_seconds.max(1)),
            max_headroom_age: Duration::from_millis(self.max_headroom_age_ms),
            give_way: self.give_way.settings(),
            ..KubeConfig::new(self.node_name.clone())
        }
    }
}

#[derive(Debug, Error)]
pub enum KubeError {
    /// A call that `rbac::API_CALLS` does not list (a bug: the table and the code disagree).
    #[error("{verb} {resource} (group {group:?}) is not in the RBAC table rbac::API_CALLS")]
    NotInRbacTable {
        group: &'static str,
        resource: String,
        verb: &'static str,
    },
    #[error("{verb} {resource}: {}", api_error_text(source))]
    Api {
        verb: &'static str,
        resource: String,
        source: Box<kube::Error>,
    },
    #[error("the {0} watch ended before its store was ready")]
    StoreNotReady(&'static str),
    #[error("cluster state: {0}")]
    ClusterState(#[from] ClusterFileError),
    #[error("decision: {0}")]
    Decide(#[from] DecideError),
    #[error("could not infer a Kubernetes client configuration: {0}")]
    Client(Box<kube::Error>),
    #[error("serving {addr}: {source}")]
    Serve {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

/// The API server's refusal as `kubectl` words it (code, reason, message, causes), not the
/// client's debug dump of its `Status`.
fn api_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = format!("{} {}: {}", status.code, status.reason, status.message);
            let causes: Vec<&str> = status
                .details
                .iter()
                .flat_map(|d| d.causes.iter())
                .map(|c| c.message.as_str())
                .filter(|m| !m.is_empty())
                .collect();
            if !causes.is_empty() {
                text.push_str(&format!(" ({})", causes.join("; ")));
            }
            text
        }
        other => other.to_string(),
    }
}

impl KubeError {
    /// The API server's HTTP status, when that is what failed.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            KubeError::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Runs the backend until `shutdown` resolves: watches, reconciles on every change and every
/// `resync`, then releases every reservation it holds.
pub async fn run(
    clients: impl Into<client::ApiClients>,
    config: KubeConfig,
    ledger: NodeLedger,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), KubeError> {
    let board = Arc::new(Board::new(&config.node_name, config.dry_run, ledger.live.clone()));
    run_with_board(clients, config, ledger, metrics, board, shutdown).await
}

/// [`run`], with the decisions kept on `board` (which the HTTP server shows).
pub async fn run_with_board(
    clients: impl Into<client::ApiClients>,
    config: KubeConfig,
    ledger: NodeLedger,
    metrics: Arc<Metrics>,
    board: Arc<Board>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), KubeError> {
    let client::ApiClients { calls, watches } = clients.into();
    let (stores, mut watchers) = watch::start(&watches, &config.node_name, metrics.clone())?;
    let mut backend = Backend::new(calls, config, stores, ledger, metrics.clone()).with_board(board);
    let result = backend.run_until(shutdown).await;
    backend.shutdown().await;
    watchers.abort_all();
    result
}

/// `headroom-shim kube`: the in-cluster client, the metrics/health server and [`run`] until
/// SIGTERM or Ctrl-C.
pub async fn main(args: KubeArgs) -> Result<(), KubeError> {
    let mut kubeconfig = kube::Config::infer()
        .await
        .map_err(|e| KubeError::Client(Box::new(kube::Error::InferConfig(e))))?;
    // kube's default retry layer retries 429 for minutes: an Eviction refused by a
    // PodDisruptionBudget (429) must reach the reconciler at once, which reports it and retries
    // on its own cycle. (The HTTP/2 client has no retry layer; this keeps the proxy fallback so.)
    kubeconfig.default_retry = false;
    let clients = client::ApiClients::new(kubeconfig).map_err(|e| KubeError::Client(Box::new(e)))?;
    let metrics = Arc::new(Metrics::default());
    let ledger = match args.ledger {
        LedgerKind::Headroomd => NodeLedger::headroomd(&args.headroomd_socket, metrics.clone()),
        LedgerKind::Local => NodeLedger::local(),
    };
    let config = args.config();
    let board = Arc::new(Board::new(&config.node_name, config.dry_run, ledger.live.clone()));
    let server = http::serve(args.metrics_addr, metrics.clone(), board.clone()).await?;
    let result = run_with_board(clients, config, ledger, metrics, board, shutdown_signal()).await;
    server.abort();
    result
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = ctrl_c => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "no SIGTERM handler; stopping on Ctrl-C only");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
