//! Installs what a fresh machine lacks. Each step checks first, so re-running is cheap.
use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{progress, run};

/// Debian packages the tests, the demo and the benchmarks use, with why: a command on PATH (or
/// an absolute path) and the package that brings it.
const DEBIAN_PACKAGES: &[(&str, &str)] = &[
    ("stress-ng", "stress-ng"),
    ("hackbench", "rt-tests"),
    ("bpftool", "bpftool"),
    ("busybox", "busybox-static"),
    // A real Prometheus scrapes a real headroomd, and promtool checks and unit-tests the alerts
    // (daemon/tests/prometheus_real.rs). Debian's package ships both.
    ("prometheus", "prometheus"),
    ("promtool", "prometheus"),
];

/// What building the real node's runc needs: it is built from its module with seccomp
/// (RuntimeDefault profiles), cgo against libseccomp, found through pkg-config.
pub(crate) const RUNC_BUILD_PACKAGES: &[(&str, &str)] = &[
    ("/usr/include/seccomp.h", "libseccomp-dev"),
    ("pkg-config", "pkg-config"),
];

/// bpf-linker version known to build against rustc 1.95's LLVM 22.
const BPF_LINKER_VERSION: &str = "0.13.0";

pub(crate) fn install_missing() -> Result<()> {
    build_tools()?;
    debian_packages()?;
    python_grpc()?;
    Ok(())
}

/// Only what building the probes and the binaries needs (no test packages): rust-src for
/// `-Z build-std=core`, bpf-linker.
pub(crate) fn build_tools() -> Result<()> {
    rust_src()?;
    bpf_linker()
}

pub(crate) fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cargo"),
        PathBuf::from,
    )
}

/// `PATH` with `$CARGO_HOME/bin` first, where `cargo install` puts bpf-linker.
pub(crate) fn path_with_cargo_bin() -> String {
    let bin = cargo_home().join("bin");
    match env::var("PATH") {
        Ok(path) => format!("{}:{path}", bin.display()),
        Err(_) => bin.display().to_string(),
    }
}

fn rust_src() -> Result<()> {
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]))?;
    let src = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library/core");
    if src.exists() {
        progress("setup: rust-src present");
        return Ok(());
    }
    progress("setup: installing the rust-src component (for -Z build-std=core)");
    run(Command::new("rustup").args(["component", "add", "rust-src"]))
}

fn bpf_linker() -> Result<()> {
    let linker = cargo_home().join("bin/bpf-linker");
    if linker.exists()
        && Command::new(&linker)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        progress("setup: bpf-linker present");
        return Ok(());
    }
    // Prebuilt bpf-linker binaries cannot be downloaded here and Debian has no LLVM matching
    // rustc's, so build it against rustc's own shared libLLVM.
    let verbose = output(Command::new("rustc").arg("-vV"))?;
    let llvm_major = verbose
        .lines()
        .find_map(|line| line.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("rustc -vV did not report an LLVM version")?
        .to_string();
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]))?;
    let lib_dir = Path::new(sysroot.trim()).join("lib");
    let libllvm = std::fs::read_dir(&lib_dir)
        .with_context(|| format!("read {}", lib_dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libLLVM.so.") && n.contains("-rust-"))
        })
        .with_context(|| format!("no libLLVM.so.*-rust-* in {}", lib_dir.display()))?;
    let prefix = cargo_home().join("bpf-llvm");
    let prefix_lib = prefix.join("lib");
    std::fs::create_dir_all(&prefix_lib)?;
    for name in ["libLLVM.so".to_string(), file_name(&libllvm)?] {
        let link = prefix_lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&libllvm, &link).with_context(|| format!("symlink {}", link.display()))?;
    }
    progress(&format!(
        "setup: building bpf-linker {BPF_LINKER_VERSION} against rustc's LLVM {llvm_major} (about a minute)"
    ));
    run(Command::new("cargo")
        .env("LLVM_PREFIX", &prefix)
        .args([
            "install",
            "--locked",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
        ])
        .args([
            "--no-default-features",
            "--features",
            &format!("llvm-{llvm_major}"),
        ]))
}

fn file_name(path: &Path) -> Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .with_context(|| format!("{} has no file name", path.display()))
}

fn debian_packages() -> Result<()> {
    // One apt-get for both lists.
    debian(&[RUNC_BUILD_PACKAGES, DEBIAN_PACKAGES].concat(), "setup")
}

/// Installs (apt-get) the packages of `wanted` whose command or file is missing; `what` prefixes
/// the progress line.
pub(crate) fn debian(wanted: &[(&str, &str)], what: &str) -> Result<()> {
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(command, _)| {
            if command.starts_with('/') {
                !Path::new(command).exists()
            } else {
                !on_path(command)
            }
        })
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        let mut names: Vec<&str> = wanted.iter().map(|(_, p)| *p).collect();
        names.dedup();
        progress(&format!("{what}: Debian packages present ({})", names.join(", ")));
        return Ok(());
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        bail!("missing packages {missing:?} and no apt-get to install them: install them by hand");
    }
    progress(&format!("{what}: apt-get install {}", missing.join(" ")));
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing))
}

/// The Python gRPC client used by the interoperability test (a client nobody here wrote).
fn python_grpc() -> Result<()> {
    if Command::new("python3")
        .args(["-c", "import grpc, grpc_tools"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        progress("setup: python grpcio present");
        return Ok(());
    }
    progress("setup: pip install grpcio grpcio-tools (interoperability test client)");
    run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "grpcio", "grpcio-tools"]))
}

fn on_path(command: &str) -> bool {
    env::var_os("PATH").is_some_and(|path| env::split_paths(&path).any(|dir| dir.join(command).exists()))
        || Path::new("/usr/sbin").join(command).exists()
        || Path::new("/sbin").join(command).exists()
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("start {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
