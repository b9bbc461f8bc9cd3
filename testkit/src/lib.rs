//! What headroom's tests share: a real Kubernetes control plane on 127.0.0.1
//! ([`control_plane`]), built from upstream's Go modules by `cargo xtask build-k8s`, and
//! loading a cluster file (the shape `kubectl get -o yaml` prints) into it ([`cluster`]), and
//! the programs a test starts beside it ([`process`]); the one gate of the privileged tests
//! ([`gate`]) and the cgroups they create, removed on drop ([`scratch`]); with the feature
//! `headroomd`, headroomd in the test's process (`headroomd`); the binaries' completions and
//! man pages checked alike ([`cli_docs`]); the tutorial's resize repeated on the real node
//! ([`repetitions`]); headroom's two-platform image written as an OCI layout ([`release_image`]).
//!
//! A test that needs the control plane fails when it is not built: nothing here skips.
pub mod beside;
pub mod cli_docs;
pub mod cluster;
pub mod control_plane;
pub mod gate;
#[cfg(feature = "headroomd")]
pub mod headroomd;
pub mod helm;
pub mod images;
pub mod node;
mod pki;
pub mod process;
pub mod release_image;
pub mod repetitions;
pub mod scratch;
mod supervisor;
pub mod tutorial;

pub use cluster::{LoadError, load_cluster_file};
pub use control_plane::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, EvictionCall, KUBERNETES_VERSION, PodCall,
    SchedulerGate, audit_span,
};
pub use node::{Node, NodeError, NodeOptions};
pub use process::LoggedChild;
pub use scratch::TestCgroup;
