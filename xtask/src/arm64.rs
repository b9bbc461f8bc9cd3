//! `cargo xtask build-arm64`: headroomd, headroom-shim, headroomctl and kubectl-headroom for
//! `aarch64-unknown-linux-gnu`, cross-built here (rustup's target, Debian's cross gcc as the
//! linker and for ring's C), with the same probe object (`bpfel` bytecode, arch-neutral, CO-RE).
//!
//! Then it checks what it built: every binary is an AArch64 ELF, and under qemu-user each one
//! runs (`--version` names this commit) and headroomd serves gRPC on a Unix socket that the
//! arm64 headroomctl reads (`health`, `version`, `headroom`). qemu-user does not implement
//! `bpf(2)` (ENOSYS), so the probes are loaded only by an arm64 kernel, which this job does not
//! boot: headroomd runs with `--probes if-available` and must say so.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{build_ebpf, progress, run, setup};

pub(crate) const TARGET: &str = "aarch64-unknown-linux-gnu";
const PROGRAMS: &[(&str, &str)] = &[
    ("headroom-daemon", "headroomd"),
    ("headroom-shim", "headroom-shim"),
    ("headroom-client", "headroomctl"),
    ("kubectl-headroom", "kubectl-headroom"),
];
/// What the cross build and its check need: (command, Debian package).
const PACKAGES: &[(&str, &str)] = &[
    ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
    ("/usr/aarch64-linux-gnu/lib/libc.so.6", "libc6-dev-arm64-cross"),
    ("qemu-aarch64-static", "qemu-user-static"),
];
/// Where the cross libc lives (qemu-user's `-L`).
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
/// ELF `e_machine` of AArch64.
const EM_AARCH64: u16 = 183;

fn rust_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("rustup target list")?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        progress(&format!("arm64: rust target {TARGET} present"));
        return Ok(());
    }
    progress(&format!("arm64: rustup target add {TARGET}"));
    run(Command::new("rustup").args(["target", "add", TARGET]))
}

pub(crate) fn setup() -> Result<()> {
    setup::install_missing()?;
    rust_target()?;
    setup::debian(PACKAGES, "arm64")
}

/// Cross-builds the four programs in release; their folder.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    setup()?;
    build_ebpf(root)?;
    progress(&format!("arm64: cargo build --release --target {TARGET}"));
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(root)
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
            "aarch64-linux-gnu-gcc",
        )
        .env("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc")
        .env("AR_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-ar")
        .args(["build", "--release", "--target", TARGET]);
    for (package, bin) in PROGRAMS {
        cargo.args(["-p", package, "--bin", bin]);
    }
    run(&mut cargo)?;
    let dir = root.join("target").join(TARGET).join("release");
    check(&dir)?;
    Ok(dir)
}

fn machine(binary: &Path) -> Result<u16> {
    let bytes = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.len() < 20 {
        bail!("{} is not an ELF file", binary.display());
    }
    Ok(u16::from_le_bytes([bytes[18], bytes[19]]))
}

fn qemu(binary: &Path) -> Command {
    let mut cmd = Command::new("qemu-aarch64-static");
    cmd.arg("-L").arg(SYSROOT).arg(binary);
    cmd
}

fn stdout_of(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every binary is AArch64 and runs under qemu-user; headroomd serves what headroomctl reads.
fn check(dir: &Path) -> Result<()> {
    let commit = stdout_of(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]))?;
    let commit = commit.trim();
    for (_, bin) in PROGRAMS {
        let path = dir.join(bin);
        let em = machine(&path)?;
        if em != EM_AARCH64 {
            bail!(
                "{} is ELF machine {em}, not AArch64 ({EM_AARCH64})",
                path.display()
            );
        }
        let version = stdout_of(qemu(&path).arg("--version"))?;
        if !version.contains(&format!("(commit {commit})")) {
            bail!("{bin} --version under qemu-aarch64 says {version:?}, not commit {commit}");
        }
        progress(&format!(
            "arm64: {bin}: AArch64 ELF, runs under qemu-user: {}",
            version.trim()
        ));
    }
    serve_and_read(dir)
}

/// headroomd (arm64, no probes: qemu-user has no bpf(2)) serving; the arm64 headroomctl reads it.
fn serve_and_read(dir: &Path) -> Result<()> {
    let scratch = dir.join("arm64-check");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let socket = scratch.join("headroomd.sock");
    let log = scratch.join("headroomd.log");
    let mut daemon = qemu(&dir.join("headroomd"))
        .args(["serve", "--probes", "if-available", "--node-name", "arm64-node"])
        .args([
            "--allocatable-cpu",
            "4",
            "--allocatable-memory",
            "8Gi",
            "--metrics-listen",
            "",
        ])
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("start headroomd under qemu-aarch64")?;
    let result = (|| {
        let ctl = |args: &[&str]| {
            stdout_of(
                qemu(&dir.join("headroomctl"))
                    .arg("--socket")
                    .arg(&socket)
                    .args(args),
            )
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match ctl(&["health"]) {
                Ok(text) if text.trim() == "SERVING" => break,
                other if Instant::now() > deadline => {
                    bail!("headroomd (arm64) never served within 60 s: {other:?}")
                }
                _ => std::thread::sleep(Duration::from_millis(250)),
            }
        }
        let version = ctl(&["version"])?;
        if version.lines().filter(|l| l.contains("(commit ")).count() != 2 {
            bail!("headroomctl version (arm64) did not name both versions: {version}");
        }
        let snapshot = ctl(&["headroom", "-o", "json"])?;
        for want in [r#""nodeName": "arm64-node""#, r#""allocatable": "4000""#] {
            if !snapshot.contains(want) {
                bail!("the arm64 headroomd's snapshot lacks {want}: {snapshot}");
            }
        }
        Ok(())
    })();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    result.with_context(|| format!("headroomd's log:\n{log}"))?;
    if !log.contains("serving without eBPF probes") {
        bail!("headroomd (arm64, qemu-user) did not say it serves without probes:\n{log}");
    }
    progress(
        "arm64: headroomd served gRPC under qemu-user and the arm64 headroomctl read it (health, version, headroom); probes need an arm64 kernel",
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_of_this_binary_is_read() {
        let me = std::env::current_exe().unwrap();
        // x86_64 = 62; this test runs on the build host.
        assert_eq!(machine(&me).unwrap(), 62);
        let dir = tempfile::tempdir().unwrap();
        let not_elf = dir.path().join("x");
        std::fs::write(&not_elf, "#!/bin/sh\n").unwrap();
        assert!(machine(&not_elf).is_err());
    }
}
