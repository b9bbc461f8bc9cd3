//! `headroom-shim`: thin entry point; the work is in the library and `cli`.

mod cli;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    // RUST_LOG (what the manifests set), then HEADROOM_LOG, then warn.
    headroom_client::logging::init(cli.log_format, "warn");
    cli::run(cli)
}
