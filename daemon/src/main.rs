//! `headroomd`: the node daemon. Subcommands live in the library; this file only dispatches.
use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "headroomd",
    version,
    about = "headroom's node daemon: probes, live node headroom, gRPC"
)]
struct Cli {
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
    headroomd::init_tracing();
    match Cli::parse().command {
        Command::Observe(args) => headroomd::observe::run(&args),
        Command::Serve(args) => headroomd::serve::run(&args),
    }
}
