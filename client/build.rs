//! The commit the binaries are built from (`HEADROOM_GIT_COMMIT`: the environment's, for builds
//! without `.git`, else `git`'s), for every binary's `--version` and headroomd's build info.
use std::{env, path::PathBuf, process::Command};

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
    .map(|path| manifest.join(path))
    // A path that does not exist (no packed-refs in a fresh clone; a branch only packed) would
    // make cargo rerun this script, and rebuild every crate above it, on every build.
    .filter(|path| path.exists())
    {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    git(manifest, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rustc-env=HEADROOM_GIT_COMMIT={}", commit(&manifest));
}
