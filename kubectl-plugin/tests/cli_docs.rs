//! `kubectl-headroom completion bash|zsh|fish` and its man pages name every subcommand.

#[test]
fn completions_and_man_pages_name_every_subcommand() {
    headroom_testkit::cli_docs::check(env!("CARGO_BIN_EXE_kubectl-headroom"), "kubectl-headroom");
}

#[test]
fn version_names_the_commit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-headroom"))
        .arg("--version")
        .output()
        .expect("kubectl-headroom runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("kubectl-headroom {}", headroom_client::VERSION)
    );
}
