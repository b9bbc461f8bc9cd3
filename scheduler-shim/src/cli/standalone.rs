//! `headroom-shim standalone` and `headroom-shim demo`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use headroom_actuator::Roots;
use headroom_actuator::layout::{DEFAULT_MOUNT, STANDALONE_DIR};
use headroom_node_model::{Resources, parse_cpu_millis, parse_memory_bytes};
use headroom_shim::standalone::demo;
use headroom_shim::standalone::run::{RunConfig, hostname, is_root, start};
use headroomd::node::ProbeMode;

/// Flags shared by `standalone` and `demo`.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The node's allocatable CPU (a Kubernetes quantity).
    #[arg(long, default_value = "8")]
    node_cpu: String,
    /// The node's allocatable memory (a Kubernetes quantity).
    #[arg(long, default_value = "16Gi")]
    node_memory: String,
    /// The Node's name (default: this machine's host name).
    #[arg(long)]
    node_name: Option<String>,
    /// Overrides every Pod's terminationGracePeriodSeconds (0 for tests and benchmarks).
    #[arg(long, value_name = "SECONDS")]
    grace_period: Option<u64>,
    /// Name of the Pod cgroup root below each controller root (/sys/fs/cgroup/cpu/NAME/pod<uid>/...).
    #[arg(long, default_value = STANDALONE_DIR)]
    cgroup_root: String,
    /// headroomd's socket (headroomd runs in this process).
    #[arg(long, value_name = "PATH")]
    headroomd_socket: Option<PathBuf>,
    /// How long room stays reserved for a preempting resize.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    reservation_ttl: u64,
    /// Whether headroomd loads its eBPF probes.
    #[arg(long, value_enum, default_value_t = ProbeMode::IfAvailable)]
    probes: ProbeMode,
    #[command(flatten)]
    give_way: headroom_shim::give_way::GiveWayArgs,
}

impl NodeArgs {
    fn run_config(
        &self,
        default_headroomd: PathBuf,
        shim_socket: Option<PathBuf>,
    ) -> anyhow::Result<RunConfig> {
        if !is_root() {
            eprintln!(
                "headroom-shim needs root: it creates cgroups under {DEFAULT_MOUNT} and moves processes into them (run it with sudo)."
            );
            std::process::exit(2);
        }
        let cpu =
            parse_cpu_millis(&self.node_cpu).with_context(|| format!("--node-cpu {:?}", self.node_cpu))?;
        let memory = parse_memory_bytes(&self.node_memory)
            .with_context(|| format!("--node-memory {:?}", self.node_memory))?;
        if self.cgroup_root.is_empty() || self.cgroup_root.contains('/') || self.cgroup_root.starts_with('.')
        {
            bail!(
                "--cgroup-root {:?}: one path component expected",
                self.cgroup_root
            );
        }
        let setup = headroom_actuator::detect_setup(std::path::Path::new(DEFAULT_MOUNT))
            .context("detecting the cgroup setup")?;
        Ok(RunConfig {
            node_name: self.node_name.clone().unwrap_or_else(hostname),
            allocatable: Resources::new(cpu, memory),
            roots: Roots::standalone(std::path::Path::new(DEFAULT_MOUNT), setup, &self.cgroup_root),
            grace_period_override: self.grace_period.map(Duration::from_secs),
            headroomd_socket: self.headroomd_socket.clone().unwrap_or(default_headroomd),
            shim_socket,
            reservation_ttl: Duration::from_secs(self.reservation_ttl.max(1)),
            probes: self.probes,
            give_way: self.give_way.settings(),
        })
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the Tokio runtime")
}

/// `headroom-shim standalone --manifest FILE`: runs until SIGINT/SIGTERM, then cleans up.
pub fn standalone(manifest: Option<PathBuf>, socket: PathBuf, node: &NodeArgs) -> anyhow::Result<()> {
    let cfg = node.run_config(
        PathBuf::from("/run/headroom/headroomd.sock"),
        Some(socket.clone()),
    )?;
    let text = match &manifest {
        Some(path) => {
            Some(std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    runtime()?.block_on(async {
        let mut running = start(cfg).await?;
        if let Some(text) = text {
            match running.node.apply_manifest(&text) {
                Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
                Err(e) => {
                    running.stop().await?;
                    bail!("applying the manifest: {e}");
                }
            }
        }
        println!("standalone node ready; control API on {}", socket.display());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let outcome = tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(anyhow::Error::from),
            _ = term.recv() => Ok(()),
            r = running.wait() => r.map_err(anyhow::Error::from).and_then(|()| bail!("headroomd stopped")),
        };
        running.stop().await?;
        outcome
    })
}

/// `headroom-shim demo`: the seed's tutorial on this machine.
pub fn demo(socket: Option<PathBuf>, node: &NodeArgs) -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/run/headroom/demo-{}", std::process::id()));
    let cfg = node.run_config(dir.join("headroomd.sock"), socket)?;
    let result = runtime()?.block_on(async {
        let mut out = std::io::stdout();
        let demo = demo::run(cfg, &mut out);
        tokio::pin!(demo);
        tokio::select! {
            r = &mut demo => r.map(|_| ()).map_err(anyhow::Error::from),
            r = tokio::signal::ctrl_c() => {
                r?;
                // Dropping the demo drops the running node, which kills and removes everything.
                bail!("interrupted; everything the demo created was removed")
            }
        }
    });
    let _ = std::fs::remove_dir(&dir);
    result
}
