//! Lints beyond the root workspace's `cargo fmt` and `cargo clippy --workspace`: the two
//! workspaces outside it, `ebpf/` (built only for `bpfel-unknown-none`) and `fuzz/` (built by
//! cargo-fuzz), each checked in its own directory; and the Kubernetes shim on its own, which a
//! workspace build never compiles (the benchmarks turn on its `standalone` feature).
use std::{path::Path, process::Command};

use anyhow::{Context as _, Result, bail};

/// Crates the Kubernetes shim must not link: the probes' loader, BTF, the terminal UI and the
/// actuator belong to headroomd, headroomctl and the standalone backend.
const NOT_IN_THE_KUBERNETES_SHIM: &[&str] = &[
    "aya",
    "aya-log",
    "btf-rs",
    "ratatui",
    "headroom-actuator",
    "headroom-daemon",
];

use crate::{progress, run, setup};

/// `cargo fmt --check` and `cargo clippy -- -D warnings` in `ebpf/` and `fuzz/`.
pub(crate) fn other_workspaces(root: &Path) -> Result<()> {
    for dir in ["ebpf", "fuzz"] {
        progress(&format!("lint: cargo fmt --check in {dir}/"));
        run(cargo(root, dir).args(["fmt", "--all", "--", "--check"]))?;
    }
    progress("lint: cargo clippy -- -D warnings in ebpf/ (bpfel-unknown-none, RUSTC_BOOTSTRAP=1)");
    // Same target, profile and target directory as `build-ebpf`: clippy reuses its dependencies.
    run(cargo(root, "ebpf")
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", root.join("target/ebpf"))
        .args(["clippy", "--release", "--locked", "--", "-D", "warnings"]))?;
    progress("lint: cargo clippy --all-targets -- -D warnings in fuzz/");
    // Its own target directory: cargo-fuzz's builds (fuzz/target) use other rustc flags.
    run(cargo(root, "fuzz")
        .env("CARGO_TARGET_DIR", root.join("target/fuzz-lint"))
        .args(["clippy", "--locked", "--all-targets", "--", "-D", "warnings"]))
}

/// `cargo` in `root/dir`, without the host workspace's rustc flags (coverage, sanitizers).
fn cargo(root: &Path, dir: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root.join(dir))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("PATH", setup::path_with_cargo_bin());
    cmd
}

/// `headroom-shim` without its `standalone` feature: clippy clean, and none of
/// [`NOT_IN_THE_KUBERNETES_SHIM`] among its normal dependencies.
pub(crate) fn kubernetes_shim(root: &Path) -> Result<()> {
    progress("lint: cargo clippy -p headroom-shim -p headroom-client --no-default-features -- -D warnings");
    run(Command::new("cargo").current_dir(root).args([
        "clippy",
        "-p",
        "headroom-shim",
        "-p",
        "headroom-client",
        "--no-default-features",
        "--",
        "-D",
        "warnings",
    ]))?;
    progress("lint: cargo tree -p headroom-shim --edges normal");
    let out = Command::new("cargo")
        .current_dir(root)
        .args([
            "tree",
            "-p",
            "headroom-shim",
            "--edges",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .context("start cargo tree")?;
    if !out.status.success() {
        bail!("cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let found = not_allowed(&String::from_utf8_lossy(&out.stdout));
    if !found.is_empty() {
        bail!(
            "headroom-shim's normal dependencies include {found:?} (see `cargo tree -p headroom-shim -i CRATE`)"
        );
    }
    Ok(())
}

/// Which of [`NOT_IN_THE_KUBERNETES_SHIM`] a `cargo tree --prefix none --format {p}` output names.
fn not_allowed(tree: &str) -> Vec<&'static str> {
    NOT_IN_THE_KUBERNETES_SHIM
        .iter()
        .copied()
        .filter(|name| tree.lines().any(|l| l.split_whitespace().next() == Some(*name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::not_allowed;

    #[test]
    fn only_whole_crate_names_count() {
        let tree = "headroom-shim v0.1.0 (/w/scheduler-shim)\naya-obj v0.2.1\nratatui v0.29.0\nkube v5.0.0\n";
        assert_eq!(not_allowed(tree), ["ratatui"]);
        assert!(not_allowed("headroom-client v0.1.0 (/w/client)\n").is_empty());
    }
}
