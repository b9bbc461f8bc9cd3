//! The Helm that `cargo xtask test` builds from its Go module (`k8s/helm/`), for the chart tests
//! and the chart installed on the real node.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The Helm release xtask builds (`k8s/helm/go.mod`).
pub const HELM_VERSION: &str = "v3.22.0";

/// `HEADROOM_HELM`, else where `cargo xtask build-helm` puts it. Missing is a failure, never a
/// skip.
pub fn binary() -> PathBuf {
    let path = std::env::var_os("HEADROOM_HELM").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/helm")
                .join(HELM_VERSION)
                .join("helm")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "no helm at {} (run `cargo xtask build-helm`, or set HEADROOM_HELM)",
        path.display()
    );
    path
}

/// `helm` with its cache, configuration and data in the temporary folder (never the user's).
pub fn command() -> Command {
    let mut helm = Command::new(binary());
    let temp = std::env::temp_dir();
    helm.env("HELM_CACHE_HOME", temp.join("headroom-helm-cache"))
        .env("HELM_CONFIG_HOME", temp.join("headroom-helm-config"))
        .env("HELM_DATA_HOME", temp.join("headroom-helm-data"));
    helm
}
