//! The node's own programs, built from their Go modules (`k8s/node/`) into
//! `target/node/<containerd version>/`, once per version and per `go.sum`: containerd v2 with its
//! runc shim and `ctr`, crictl, the CNI plugins the node's network uses, and crane (the local
//! registry and the image pusher), and runc v1.5, with cgo against libseccomp so that
//! `RuntimeDefault` seccomp profiles apply (Debian's 1.1.5 failed here with nothing but `can't get
//! final child's PID from pipe`; 1.5 names the cause).
//! The kubelet comes with the control plane (`k8s/`).
//!
//! A module of its own: containerd pins its own `k8s.io/*` (cri-api) versions, which must not move
//! the control plane's v0.37.2 replaces in `k8s/go.mod`.
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::k8s::{GoBuild, go_build};

/// The containerd release the node runs (also pinned in `k8s/node/go.mod`).
pub(crate) const CONTAINERD_VERSION: &str = "v2.4.2";

const PROGRAMS: &[(&str, &str)] = &[
    ("containerd", "github.com/containerd/containerd/v2/cmd/containerd"),
    (
        "containerd-shim-runc-v2",
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
    ),
    ("runc", "github.com/opencontainers/runc"),
    ("ctr", "github.com/containerd/containerd/v2/cmd/ctr"),
    ("crictl", "sigs.k8s.io/cri-tools/cmd/crictl"),
    ("crane", "github.com/google/go-containerregistry/cmd/crane"),
    (
        "bridge",
        "github.com/containernetworking/plugins/plugins/main/bridge",
    ),
    (
        "host-local",
        "github.com/containernetworking/plugins/plugins/ipam/host-local",
    ),
    (
        "loopback",
        "github.com/containernetworking/plugins/plugins/main/loopback",
    ),
];

/// Where the programs of this version land.
pub(crate) fn bin_dir(root: &Path) -> PathBuf {
    root.join("target/node").join(CONTAINERD_VERSION)
}

/// Builds every program that is missing or was built from another `go.mod`/`go.sum`.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    // `build-node` alone on a fresh machine must not depend on `setup` having run first.
    crate::setup::debian(crate::setup::RUNC_BUILD_PACKAGES, "node")?;
    let out = bin_dir(root);
    go_build(&GoBuild {
        label: "node",
        module: root.join("k8s/node"),
        version: CONTAINERD_VERSION,
        out: out.clone(),
        ldflags: format!("-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"),
        programs: PROGRAMS,
        cgo: &[("runc", "seccomp urfave_cli_no_docs")],
    })?;
    Ok(out)
}
