//! `kubectl-headroom completion bash|zsh|fish` and its man pages name every subcommand.

#[test]
fn completions_and_man_pages_name_every_subcommand() {
    headroom_testkit::cli_docs::check(env!("CARGO_BIN_EXE_kubectl-headroom"), "kubectl-headroom");
}
