//! `cargo xtask fuzz`: builds the `fuzz/` targets with cargo-fuzz and runs each for a bounded time.
//!
//! cargo-fuzz passes `-Z` flags to rustc; on the stable toolchain this project pins, they are
//! enabled with `RUSTC_BOOTSTRAP=1` (as `build-ebpf` does for `-Z build-std`). The address
//! sanitizer runtime is not part of a stable toolchain's sysroot, so the targets are built with
//! `--sanitizer none`: libFuzzer's coverage guidance, panics and Rust's own checks (debug
//! assertions, overflow checks, bounds checks) still apply, and the crates fuzzed are safe Rust.
use std::{path::Path, process::Command};

use anyhow::{Context as _, Result, bail};

use crate::{progress, run, setup};

/// The targets in `fuzz/fuzz_targets/`, in the order they run.
pub(crate) const TARGETS: &[&str] = &[
    "quantity",
    "cgroup_files",
    "manifest",
    "grpc_requests",
    "kube_objects",
    "state_files",
];

/// cargo-fuzz version known to work with this toolchain.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Installs cargo-fuzz unless a working one is on `$CARGO_HOME/bin`.
pub(crate) fn install_cargo_fuzz() -> Result<()> {
    let fuzz = setup::cargo_home().join("bin/cargo-fuzz");
    if fuzz.exists()
        && Command::new(&fuzz)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        progress("setup: cargo-fuzz present");
        return Ok(());
    }
    progress(&format!(
        "setup: cargo install cargo-fuzz {CARGO_FUZZ_VERSION} (about a minute)"
    ));
    run(Command::new("cargo").args([
        "install",
        "--locked",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
    ]))
}

fn cargo_fuzz(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("PATH", setup::path_with_cargo_bin())
        // The host workspace's flags must not mix with cargo-fuzz's instrumentation flags.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    cmd
}

/// Builds every target, then runs each (or those named) for `seconds`.
pub(crate) fn fuzz(root: &Path, names: &[String], seconds: u64) -> Result<()> {
    for name in names {
        if !TARGETS.contains(&name.as_str()) {
            bail!("unknown fuzz target `{name}`; known: {}", TARGETS.join(", "));
        }
    }
    let selected: Vec<&str> = if names.is_empty() {
        TARGETS.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    install_cargo_fuzz()?;
    progress("fuzz: cargo fuzz build --sanitizer none (stable rustc, RUSTC_BOOTSTRAP=1)");
    run(cargo_fuzz(root).args(["fuzz", "build", "--sanitizer", "none"]))?;
    // The built binaries are run directly: `cargo fuzz run` would rebuild first, and the work
    // tree may have changed since the build (other crates being edited).
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output()?.stdout)?
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV did not report the host triple")?;
    let bin_dir = root.join("fuzz/target").join(host).join("release");
    for target in selected {
        let corpus = root.join("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        let artifacts = root.join("fuzz/artifacts").join(target);
        std::fs::create_dir_all(&artifacts)?;
        progress(&format!("fuzz: {target} for {seconds} s"));
        let mut cmd = Command::new(bin_dir.join(target));
        cmd.current_dir(root)
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg(format!("-max_total_time={seconds}"))
            .args([
                "-max_len=8192",
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ])
            .arg(&corpus);
        let seeds = root.join("fuzz/seeds").join(target);
        if seeds.is_dir() {
            cmd.arg(&seeds);
        }
        run(&mut cmd)?;
    }
    progress("fuzz: no target found a crash");
    Ok(())
}
