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
pub mod kubectl;
pub mod metrics;
pub mod node;
pub mod observe;
pub mod pipeline;
pub mod probes;
pub mod serve;
pub mod server;

/// `error` and its sources, joined by ": " (what tonic, aya and kube errors need to say why).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Logs to stderr with `RUST_LOG`-style filtering (default `info`); also forwards the `log`
/// records aya and aya-log emit.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
