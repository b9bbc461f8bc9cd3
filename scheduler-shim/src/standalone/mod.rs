//! The standalone backend (the embedded default): this machine is the node. Pods come from
//! ordinary Kubernetes YAML and each becomes a real cgroup with a real process per container;
//! this process plays the API server (the Pod store, `/resize`, events), the kubelet (admission,
//! `PodResizePending`, actuation through headroomd's `ApplyResize`) and the scheduler's resize
//! preemption (the shim loop around [`crate::decide`]).
//!
//! - [`store`]: Pods, PriorityClasses; [`runtime`]: cgroups and processes; [`events`].
//! - [`resize`]: `/resize` and the kubelet's admission; [`shim`]: the preemption loop.
//! - [`node`]: all of it together behind one handle; [`api`]: the `headroom.v1.Standalone` gRPC
//!   control API; [`run`]: headroomd in-process plus the above; [`demo`]: the seed's tutorial.

pub mod api;
pub mod demo;
pub mod events;
pub mod explain;
pub mod latency;
pub mod node;
pub mod resize;
pub mod run;
pub mod runtime;
pub mod shim;
pub mod store;
pub mod verify;

use std::path::PathBuf;
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_node_model::{ModelError, Resources};
use thiserror::Error;

pub use latency::{Step, StepHistograms, StepLatencies};
pub use node::StandaloneNode;

/// The seed's `preemption-demo.yaml`, unchanged.
pub const DEMO_MANIFEST: &str = include_str!("../../examples/preemption-demo.yaml");

/// The node this machine plays.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `metadata.name` of the Node (used in "Preempted by pod <uid> on node <node>").
    pub name: String,
    /// `status.allocatable` (cpu, memory).
    pub allocatable: Resources,
    /// Where Pod cgroups are created (`<controller root>/<name>/pod<uid>/<container>`).
    pub roots: Roots,
    /// Overrides every Pod's `terminationGracePeriodSeconds` (0 for tests and benchmarks).
    pub grace_period_override: Option<Duration>,
    /// headroomd's socket (in-process daemon).
    pub headroomd_socket: PathBuf,
    /// How long a reservation may live before the resize is given up on.
    pub reservation_ttl: Duration,
    /// Shrink-before-evict switches.
    pub give_way: crate::give_way::GiveWaySettings,
}

/// The default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum StandaloneError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Manifest(#[from] crate::cluster_file::ClusterFileError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    #[error(transparent)]
    Decide(#[from] crate::decide::DecideError),
    #[error("headroomd: {0}")]
    Headroomd(String),
}
