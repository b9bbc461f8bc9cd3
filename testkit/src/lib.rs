//! What headroom's tests share: a real Kubernetes control plane on 127.0.0.1
//! ([`control_plane`]), built from upstream's Go modules by `cargo xtask build-k8s`, and
//! loading a cluster file (the shape `kubectl get -o yaml` prints) into it ([`cluster`]), and
//! the programs a test starts beside it ([`process`]).
//!
//! A test that needs the control plane fails when it is not built: nothing here skips.
pub mod cluster;
pub mod control_plane;
mod pki;
pub mod process;

pub use cluster::{LoadError, load_cluster_file};
pub use control_plane::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, KUBERNETES_VERSION, SchedulerGate,
};
pub use process::LoggedChild;
