//! Embeds the probe object built by `cargo xtask build-ebpf`, and the commit the binary is built
//! from (`HEADROOM_GIT_COMMIT`: the environment's, for builds without `.git`, else `git`'s).
//!
//! A plain `cargo build` must work without the BPF toolchain, so a missing object is not an
//! error here: an empty one is embedded and the loader refuses it at run time with a message
//! that says how to build the probes.
use std::{env, fs, path::PathBuf, process::Command};

fn git(manifest: &PathBuf, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(manifest)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The commit, and a rebuild whenever HEAD moves (a commit, a checkout).
fn commit(manifest: &PathBuf) -> String {
    println!("cargo:rerun-if-env-changed=HEADROOM_GIT_COMMIT");
    if let Ok(c) = env::var("HEADROOM_GIT_COMMIT") {
        return c;
    }
    for path in [
        git(manifest, &["rev-parse", "--git-path", "HEAD"]),
        git(manifest, &["symbolic-ref", "-q", "HEAD"])
            .and_then(|r| git(manifest, &["rev-parse", "--git-path", &r])),
        git(manifest, &["rev-parse", "--git-path", "packed-refs"]),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={}", manifest.join(path).display());
    }
    git(manifest, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let object = env::var_os("HEADROOM_PROBES_OBJECT")
        .map_or_else(|| manifest.join("../target/bpf/headroom-probes.o"), PathBuf::from);
    println!("cargo:rustc-env=HEADROOM_GIT_COMMIT={}", commit(&manifest));
    println!("cargo:rerun-if-env-changed=HEADROOM_PROBES_OBJECT");
    println!("cargo:rerun-if-changed={}", object.display());
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("headroom-probes.o");
    let bytes = fs::read(&object).unwrap_or_default();
    fs::write(&out, bytes).expect("write probe object into OUT_DIR");
}
