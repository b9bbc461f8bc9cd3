//! One check of a binary's shell completions and man pages: every subcommand its `--help`
//! lists is named by `completion bash|zsh|fish` and by its man page, and has a page of its own.
#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {bin} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{bin} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The subcommands `bin --help` lists (without `help`).
pub fn subcommands(bin: &str) -> Vec<String> {
    let help = run(bin, &["--help"]);
    let mut lines = help.lines().skip_while(|l| !l.starts_with("Commands:")).skip(1);
    let mut names = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        // "  name   About…"; a wrapped about line is indented deeper.
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.split_whitespace().next())
            && !line.starts_with("   ")
            && name != "help"
        {
            names.push(name.to_string());
        }
    }
    names
}

/// Asserts `bin`'s completions and man pages name every subcommand; `name` is the binary's name.
pub fn check(bin: &str, name: &str) {
    let subcommands = subcommands(bin);
    assert!(
        subcommands.len() >= 2,
        "{name}: subcommands not found in --help: {subcommands:?}"
    );
    assert!(
        subcommands.iter().any(|s| s == "completion"),
        "{name}: no completion subcommand"
    );
    for shell in ["bash", "zsh", "fish"] {
        let script = run(bin, &["completion", shell]);
        assert!(!script.trim().is_empty(), "{name}: empty {shell} completion");
        for sub in &subcommands {
            assert!(
                script.contains(sub.as_str()),
                "{name}: {shell} completion lacks {sub}"
            );
        }
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir_arg = dir.path().to_str().expect("UTF-8 path");
    run(bin, &["man", dir_arg]);
    let page = std::fs::read_to_string(dir.path().join(format!("{name}.1"))).expect("NAME.1 written");
    assert!(page.contains(&format!(".TH {name} 1")), "{name}.1: {page}");
    for sub in &subcommands {
        // roff escapes '-' as '\-'.
        let reference = format!("{name}-{sub}(1)").replace('-', "\\-");
        assert!(page.contains(&reference), "{name}.1 lacks {reference}:\n{page}");
        let own = std::fs::read_to_string(dir.path().join(format!("{name}-{sub}.1")))
            .unwrap_or_else(|e| panic!("{name}-{sub}.1: {e}"));
        assert!(own.contains(".TH"), "{name}-{sub}.1: {own}");
    }
}
