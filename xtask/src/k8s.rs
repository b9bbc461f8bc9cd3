//! Upstream Kubernetes and etcd, built from their Go modules (`k8s/`) into
//! `target/k8s/<version>/`, once per version and per `go.sum`.
//!
//! `k8s/go.mod` requires `k8s.io/kubernetes` and points every staging module at its published
//! version, then lists the programs as `tool`s so `go.sum` pins everything they import.
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

/// The Kubernetes release the programs are built at (also pinned in `k8s/go.mod`).
pub(crate) const KUBERNETES_VERSION: &str = "v1.37.2";

/// Program name and the Go package that builds it.
const PROGRAMS: &[(&str, &str)] = &[
    ("etcd", "headroom.invalid/k8s/cmd/etcd"),
    ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
    (
        "kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
    ),
    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
    ("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
];

/// Where the programs of this version land.
pub(crate) fn bin_dir(root: &Path) -> PathBuf {
    root.join("target/k8s").join(KUBERNETES_VERSION)
}

/// Builds every program that is missing or was built from another `go.mod`/`go.sum`.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    let out = bin_dir(root);
    go_build(&GoBuild {
        label: "k8s",
        module: root.join("k8s"),
        version: KUBERNETES_VERSION,
        out: out.clone(),
        ldflags: version_ldflags(),
        programs: PROGRAMS,
        cgo: &[],
    })?;
    Ok(out)
}

/// Go programs of one module, built into `out` once per version and per `go.mod`/`go.sum`.
pub(crate) struct GoBuild<'a> {
    /// Prefix of the progress lines.
    pub label: &'a str,
    pub module: PathBuf,
    pub version: &'a str,
    pub out: PathBuf,
    pub ldflags: String,
    /// Program name and the Go package that builds it.
    pub programs: &'a [(&'a str, &'a str)],
    /// Programs built with cgo, and their build tags (runc: `seccomp`); every other program is
    /// static, without cgo.
    pub cgo: &'a [(&'a str, &'a str)],
}

/// Builds each program of `b` that is missing or stale, with one progress line per program and
/// one clear error for a missing Go toolchain or an unserved module.
pub(crate) fn go_build(b: &GoBuild<'_>) -> Result<()> {
    let go = go_toolchain(b.version)?;
    fs::create_dir_all(&b.out).with_context(|| format!("create {}", b.out.display()))?;
    let stamp = module_stamp(&b.module, b.version)?;
    for (name, package) in b.programs {
        let binary = b.out.join(name);
        let stamp_file = b.out.join(format!(".{name}.stamp"));
        if binary.exists() && fs::read_to_string(&stamp_file).ok().as_deref() == Some(&stamp) {
            progress(&format!("{}: {name} {} already built", b.label, b.version));
            continue;
        }
        progress(&format!(
            "{}: building {name} {} from {package} ({go})",
            b.label, b.version
        ));
        let started = Instant::now();
        let cgo_tags = b
            .cgo
            .iter()
            .find(|(program, _)| program == name)
            .map(|(_, tags)| *tags);
        let output = Command::new("go")
            .current_dir(&b.module)
            .args(["build", "-trimpath", "-ldflags", &b.ldflags])
            .args(cgo_tags.map(|tags| format!("-tags={tags}")))
            .arg("-o")
            .arg(&binary)
            .arg(package)
            // Without cgo: static programs that run in a VM guest and a container as they are.
            .env("CGO_ENABLED", if cgo_tags.is_some() { "1" } else { "0" })
            .output()
            .with_context(|| format!("start `go build {package}`"))?;
        if !output.status.success() {
            bail!("{}", build_failure(name, package, &output.stderr));
        }
        fs::write(&stamp_file, &stamp)?;
        progress(&format!(
            "{}: built {name} in {:.0} s",
            b.label,
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}

/// The version the programs report, as the upstream release build stamps it.
fn version_ldflags() -> String {
    let minor = KUBERNETES_VERSION
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("0");
    [
        "-s -w".to_string(),
        format!("-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}"),
        "-X k8s.io/component-base/version.gitMajor=1".to_string(),
        format!("-X k8s.io/component-base/version.gitMinor={minor}"),
        "-X k8s.io/component-base/version.gitTreeState=clean".to_string(),
        format!("-X k8s.io/client-go/pkg/version.gitVersion={KUBERNETES_VERSION}"),
    ]
    .join(" ")
}

fn go_toolchain(version: &str) -> Result<String> {
    let output = Command::new("go").arg("version").output();
    match output {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Ok(out) => bail!(
            "the Go toolchain is broken: `go version` said {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => bail!(
            "no Go toolchain: `go` is not on PATH ({e}); Go 1.26 or newer is needed to build \
             {version}"
        ),
    }
}

/// What the programs were built from: any change to `go.mod`/`go.sum` rebuilds them.
fn module_stamp(module: &Path, version: &str) -> Result<String> {
    let mut hasher = DefaultHasher::new();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        fs::read(&path)
            .with_context(|| format!("read {}", path.display()))?
            .hash(&mut hasher);
    }
    Ok(format!("{version} {:016x}\n", hasher.finish()))
}

/// One clear error: the module the proxy did not serve, or the compiler's own lines.
fn build_failure(name: &str, package: &str, stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let unserved: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            line.contains("reading https://")
                || line.contains("not found")
                || line.contains("410 Gone")
                || line.contains("missing go.sum entry")
        })
        .collect();
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    if unserved.is_empty() {
        format!(
            "go build of {name} ({package}) failed:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    } else {
        format!(
            "go build of {name} ({package}) failed: a module could not be had from the Go \
             module proxy:\n{}",
            unserved.join("\n")
        )
    }
}

/// `gofmt` and `go vet` on the project's own Go code.
pub(crate) fn lint(root: &Path) -> Result<()> {
    let module = root.join("k8s");
    let unformatted = Command::new("gofmt")
        .current_dir(&module)
        .args(["-l", "."])
        .output()
        .context("start gofmt")?;
    let listed = String::from_utf8_lossy(&unformatted.stdout);
    if !unformatted.status.success() || !listed.trim().is_empty() {
        bail!(
            "gofmt: not formatted (run `gofmt -w k8s`): {}{}",
            listed.trim(),
            String::from_utf8_lossy(&unformatted.stderr)
        );
    }
    crate::run(Command::new("go").current_dir(&module).args(["vet", "./..."]))
}
