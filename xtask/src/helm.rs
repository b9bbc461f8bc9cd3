//! Helm, built from its Go module (`k8s/helm/`) into `target/helm/<version>/helm`, once per
//! version and per `go.sum`, for the chart tests (`helm lint`, `helm template`).
//!
//! A module of its own: Helm pins its own `k8s.io/*` versions, which must not move the control
//! plane's v0.37.2 replaces in `k8s/go.mod`.
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::k8s::{GoBuild, go_build};

/// The Helm release built (also pinned in `k8s/helm/go.mod`).
pub(crate) const HELM_VERSION: &str = "v3.22.0";

/// The `helm` binary of this version, built if missing or built from another `go.mod`/`go.sum`.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    let out = root.join("target/helm").join(HELM_VERSION);
    go_build(&GoBuild {
        label: "helm",
        module: root.join("k8s/helm"),
        version: HELM_VERSION,
        out: out.clone(),
        ldflags: format!(
            "-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION} \
             -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
        ),
        programs: &[("helm", "helm.sh/helm/v3/cmd/helm")],
        cgo: &[],
    })?;
    Ok(out.join("helm"))
}
