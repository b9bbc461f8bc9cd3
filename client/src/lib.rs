//! Clients of headroomd's gRPC API (`headroom.v1`), apart from the daemon so that a client (the
//! scheduler shim, headroomctl, benchmarks) links neither the probes nor the actuator.
//!
//! - [`connect`]: a channel over headroomd's Unix socket, or to its TCP listener (mutual TLS).
//! - [`Headroomd`]: a typed client (`GetHeadroom`, `WatchHeadroom`, `Reserve`, `Release`,
//!   `ApplyResize`) that bounds every call and reconnects after a failure.
//! - [`kubectl`]: output that reads like `kubectl`'s.
//! - [`error_chain`]: an error and its sources in one line.
//! - `cli_docs` (feature `cli-docs`): shell completions and man pages of the binaries.
//! - `output` (feature `output`): `-o json|yaml|wide` of every listing.
//!
//! The `headroomctl` binary lives here too, behind the default feature `headroomctl`.

#[cfg(feature = "cli-docs")]
pub mod cli_docs;
pub mod connect;
pub mod headroomd;
pub mod kubectl;
#[cfg(feature = "logging")]
pub mod logging;
#[cfg(feature = "output")]
pub mod output;

pub use connect::{connect_tcp, connect_uds, headroom_client};

/// The commit the binaries were built from (`git rev-parse --short=12 HEAD` at build time).
pub const GIT_COMMIT: &str = env!("HEADROOM_GIT_COMMIT");
/// What every binary's `--version` prints after its name, and what headroomd sends in
/// [`VERSION_HEADER`]: the crate version and the commit.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HEADROOM_GIT_COMMIT"),
    ")"
);
/// The `User-Agent` header a headroom program sends the API server (push it onto
/// `kube::Config::headers`), shaped as client-go's (`kube-scheduler/v1.37.2 (linux/amd64)
/// kubernetes/<commit>`): the API server names the field manager of a write after the part before
/// the first `/` (so `kubectl get --show-managed-fields` shows `headroom-shim` beside
/// `kube-scheduler` and `kubelet`), and audit logs and its request metrics show the whole. Without
/// one, kube-rs sends none.
pub fn kube_user_agent(program: &'static str) -> (http::HeaderName, http::HeaderValue) {
    let agent = format!(
        "{program}/{} ({}/{}) headroom/{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        go_arch(std::env::consts::ARCH),
        env!("HEADROOM_GIT_COMMIT")
    );
    // Built from a program name, a version, an OS and a commit: always a valid header value.
    let value = http::HeaderValue::from_str(&agent).unwrap_or(http::HeaderValue::from_static("headroom"));
    (http::header::USER_AGENT, value)
}

/// Go's name of an architecture (what client-go's `User-Agent` carries), for the two this
/// project builds.
fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The response header (gRPC initial metadata) in which headroomd names its [`VERSION`].
pub const VERSION_HEADER: &str = "headroom-version";
pub use headroomd::{Headroomd, HeadroomdError, RPC_TIMEOUT};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_source() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
    }
}
