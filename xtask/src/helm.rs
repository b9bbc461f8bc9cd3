//! Helm, built from its Go module (`k8s/helm/`) into `target/helm/<version>/helm`, once per
//! version and per `go.sum`, for the chart tests (`helm lint`, `helm template`).
//!
//! A module of its own: Helm pins its own `k8s.io/*` versions, which must not move the control
//! plane's v0.37.2 replaces in `k8s/go.mod`.
use std::{
    collections::hash_map::DefaultHasher,
    fs,
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::progress;

/// The Helm release built (also pinned in `k8s/helm/go.mod`).
pub(crate) const HELM_VERSION: &str = "v3.22.0";

const PACKAGE: &str = "helm.sh/helm/v3/cmd/helm";

/// The `helm` binary of this version, built if missing or built from another `go.mod`/`go.sum`.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    let module = root.join("k8s/helm");
    let out = root.join("target/helm").join(HELM_VERSION);
    fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let binary = out.join("helm");
    let stamp_file = out.join(".helm.stamp");
    let stamp = stamp(&module)?;
    if binary.exists() && fs::read_to_string(&stamp_file).ok().as_deref() == Some(&stamp) {
        progress(&format!("helm: {HELM_VERSION} already built"));
        return Ok(binary);
    }
    progress(&format!(
        "helm: building {HELM_VERSION} from {PACKAGE} (a cold build takes minutes)"
    ));
    let started = Instant::now();
    let ldflags = format!(
        "-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION} \
         -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    );
    let output = Command::new("go")
        .current_dir(&module)
        .args(["build", "-trimpath", "-ldflags", &ldflags, "-o"])
        .arg(&binary)
        .arg(PACKAGE)
        .env("CGO_ENABLED", "0")
        .output()
        .with_context(|| format!("start `go build {PACKAGE}` (is Go 1.26 on PATH?)"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        bail!(
            "go build of helm ({PACKAGE}) failed:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    fs::write(&stamp_file, &stamp)?;
    progress(&format!(
        "helm: built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(binary)
}

fn stamp(module: &Path) -> Result<String> {
    let mut hasher = DefaultHasher::new();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        fs::read(&path)
            .with_context(|| format!("read {}", path.display()))?
            .hash(&mut hasher);
    }
    Ok(format!("{HELM_VERSION} {:016x}\n", hasher.finish()))
}
