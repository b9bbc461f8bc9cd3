//! headroomd: loads headroom's eBPF probes, maps what they see to Pods, keeps the live node
//! headroom and serves it.
//!
//! Where to start: [`probes`] (kernel side), [`cgroups`] (which cgroup is which Pod),
//! [`observe`] (the `headroomd observe` report).
pub mod actuation;
pub mod cgroups;
pub mod collector;
pub mod config;
pub mod kube_source;
pub mod metrics;
pub mod node;
pub mod observe;
pub mod pipeline;
pub mod probes;
pub mod readiness;
pub mod serve;
pub mod server;

pub use headroom_client::error_chain;

pub use headroom_client::{GIT_COMMIT, VERSION};

pub use headroom_client::logging::LogFormat;

/// Logs to stderr with `RUST_LOG`-style filtering (default `info`) in `format`, colours only on a
/// terminal ([`headroom_client::logging`]); also forwards the `log` records aya and aya-log emit.
pub fn init_tracing(format: LogFormat) {
    headroom_client::logging::init(format, "info");
}
