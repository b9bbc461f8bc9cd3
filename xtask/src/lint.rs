//! Lints of the two workspaces outside the main one: `ebpf/` (built only for
//! `bpfel-unknown-none`) and `fuzz/` (built by cargo-fuzz). `cargo fmt --all` and
//! `cargo clippy --workspace` at the root see neither, so each is checked in its own directory.
use std::{path::Path, process::Command};

use anyhow::Result;

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
