//! `headroom-shim standalone` and `headroom-shim demo` in a build without the feature
//! `standalone` (the Kubernetes shim alone): they refuse to run and say why.

use std::path::PathBuf;

use anyhow::bail;

/// The standalone flags, taken as they come: nothing here reads them.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

const MISSING: &str = "this headroom-shim was built without the standalone backend \
    (headroomd in-process); build it with `cargo build -p headroom-shim --features standalone`";

pub fn standalone(_manifest: Option<PathBuf>, _socket: PathBuf, _node: &NodeArgs) -> anyhow::Result<()> {
    bail!(MISSING)
}

pub fn demo(_socket: Option<PathBuf>, _node: &NodeArgs) -> anyhow::Result<()> {
    bail!(MISSING)
}
