//! `headroom-shim`: thin entry point; the work is in the library and `cli`.

mod cli;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEADROOM_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .init();
    cli::run(cli::Cli::parse())
}
