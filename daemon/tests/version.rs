//! `headroomd --version` names the commit the binary was built from.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_headroomd"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let head = Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 12, "git rev-parse failed");
    assert_eq!(
        text.trim(),
        format!("headroomd {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
}
