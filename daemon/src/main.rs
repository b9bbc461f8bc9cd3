//! `headroomd`: the node daemon. Subcommands live in the library; this file only dispatches.
use anyhow::Result;
use clap::{CommandFactory as _, Parser, Subcommand};
use headroom_client::cli_docs;

#[derive(Parser)]
#[command(
    name = "headroomd",
    version = headroomd::VERSION,
    about = "headroom's node daemon: probes, live node headroom, gRPC"
)]
struct Cli {
    /// Log line format on stderr: `text` or `json` (one object per line).
    #[arg(long, global = true, default_value_t = headroomd::LogFormat::Text, value_name = "text|json")]
    log_format: headroomd::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load the probes, watch every cgroup for a while, then print what each one went through.
    Observe(headroomd::observe::ObserveArgs),
    /// Serve live node headroom over gRPC (Unix socket; TCP with mutual TLS when configured),
    /// with health, reflection and /metrics.
    Serve(headroomd::serve::ServeArgs),
    /// Print a shell completion script (bash, zsh, fish).
    Completion(cli_docs::CompletionArgs),
    /// Write the man pages (roff) into DIR; `cargo xtask man` puts them in target/man/.
    #[command(hide = true)]
    Man(cli_docs::ManArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Completion(args) => {
            cli_docs::print_completion(Cli::command(), args);
            return Ok(());
        }
        Command::Man(args) => return Ok(cli_docs::write_man_pages(Cli::command(), &args.dir).map(drop)?),
        _ => {}
    }
    headroomd::init_tracing(cli.log_format);
    match cli.command {
        Command::Observe(args) => headroomd::observe::run(&args),
        Command::Serve(args) => headroomd::serve::run(&args),
        Command::Completion(_) | Command::Man(_) => Ok(()), // printed above
    }
}
