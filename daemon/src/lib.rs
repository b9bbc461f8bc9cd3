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

/// The commit this binary was built from (`git rev-parse --short=12 HEAD` at build time).
pub const GIT_COMMIT: &str = env!("HEADROOM_GIT_COMMIT");
/// What `--version` prints after the name: the crate version and the commit.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HEADROOM_GIT_COMMIT"),
    ")"
);

pub use headroom_client::logging::LogFormat;

/// Logs to stderr with `RUST_LOG`-style filtering (default `info`) in `format`, colours only on a
/// terminal ([`headroom_client::logging`]); also forwards the `log` records aya and aya-log emit.
pub fn init_tracing(format: LogFormat) {
    headroom_client::logging::init(format, "info");
}
