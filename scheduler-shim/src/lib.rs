//! headroom-shim: preemption for Deferred in-place resizes on one node (Kubernetes v1.37,
//! KEP-5836 semantics).
//!
//! - [`decide`]: the pure decision core (data in, decision out).
//! - [`cluster_file`]: ordinary Kubernetes objects from a multi-document YAML file into the core's
//!   input (used by `headroom-shim plan`).
//! - `cli` (in the binary): the command line; `main.rs` only calls it.
//! - [`explain`]: a decision in sentences.
//! - [`preempt`]: the preemption protocol both backends run (decide → reserve → re-plan → evict →
//!   follow).
//!
//! Backends: `standalone` (this machine is the node; headroomd in-process, behind the feature
//! `standalone`) and [`kube`].

pub mod cluster_file;
pub mod decide;
pub mod explain;
pub mod give_way;
pub mod kube;
pub mod preempt;
#[cfg(feature = "standalone")]
pub mod standalone;

pub use decide::{
    Decision, NodeInput, NodeState, Outcome, PdbInput, PodInput, PreemptionPolicy, ResizeRequest, Victim,
    decide, decide_all,
};
