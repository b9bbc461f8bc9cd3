//! Shell completions (clap_complete) and man pages (clap_mangen) for the three binaries, from
//! their clap command lines: `completion bash|zsh|fish` (kubectl's verb) prints a completion
//! script; the hidden `man DIR` writes the roff pages (the binary's and one per subcommand, as
//! the SUBCOMMANDS section names them) that `cargo xtask man` collects into target/man/.

use std::io::Write;

/// The shells `completion` writes a script for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `completion SHELL`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell: bash, zsh or fish (e.g. `source <(headroomctl completion bash)`).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script of `cmd` for `shell`.
pub fn completion(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    match shell {
        Shell::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, out),
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, out),
        Shell::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, out),
    }
}

/// Writes the man page (roff, section 1) of `cmd`: its options and every subcommand.
pub fn man(cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(cmd).render(out)
}

/// `completion SHELL` of a binary's command line, on stdout.
pub fn print_completion(cmd: clap::Command, args: CompletionArgs) {
    completion(cmd, args.shell, &mut std::io::stdout().lock());
}

/// `man DIR`.
#[derive(Clone, Debug, clap::Args)]
pub struct ManArgs {
    /// Where to write NAME.1 and NAME-SUBCOMMAND.1.
    pub dir: std::path::PathBuf,
}

/// Writes `NAME.1` and a `NAME-SUB.1` for every visible subcommand (recursively) into `dir`;
/// returns the files written.
pub fn write_man_pages(
    mut cmd: clap::Command,
    dir: &std::path::Path,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // Propagate global arguments and the version into the subcommands first.
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, cmd.get_name().to_string(), dir, &mut written)?;
    Ok(written)
}

fn write_pages(
    cmd: &clap::Command,
    name: String,
    dir: &std::path::Path,
    written: &mut Vec<std::path::PathBuf>,
) -> std::io::Result<()> {
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    man(cmd.clone().name(name.clone()), &mut page)?;
    std::fs::write(&path, page)?;
    written.push(path);
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        clap::Command::new("demo")
            .subcommand(clap::Command::new("alpha").about("the first"))
            .subcommand(clap::Command::new("beta").about("the second"))
    }

    #[test]
    fn completions_and_man_page_name_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            completion(cmd(), shell, &mut out);
            let text = String::from_utf8(out).unwrap_or_default();
            assert!(
                text.contains("alpha") && text.contains("beta"),
                "{shell:?}: {text}"
            );
        }
        let mut out = Vec::new();
        man(cmd(), &mut out).expect("render");
        let text = String::from_utf8(out).unwrap_or_default();
        assert!(text.contains(".TH demo 1"), "{text}");
        assert!(text.contains("alpha") && text.contains("the second"), "{text}");
    }
}
