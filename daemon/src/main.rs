//! `headroomd`: the node daemon. Subcommands live in the library; this file only dispatches.
use anyhow::Result;
use clap::{Parser, Subcommand};

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
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    headroomd::init_tracing(cli.log_format);
    match cli.command {
        Command::Observe(args) => headroomd::observe::run(&args),
        Command::Serve(args) => headroomd::serve::run(&args),
    }
}
