//! Everything of `headroom-shim standalone` in one process: headroomd (`headroomd::node::start`:
//! probes, collector, cgroup→Pod resolver, pipeline, ledger, gRPC server and the real cgroup
//! actuator), the Pod store, the shim loop and the control API.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_node_model::Resources;
use headroomd::config::Config;
use headroomd::node::{NodeOptions, ProbeMode};

use super::api::{self, ApiHandle};
use super::{NodeConfig, StandaloneError, StandaloneNode, runtime, shim};

/// What to start.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub node_name: String,
    pub allocatable: Resources,
    pub roots: Roots,
    pub grace_period_override: Option<Duration>,
    /// headroomd's socket (served in-process).
    pub headroomd_socket: PathBuf,
    /// The control API's socket; `None` serves none (the demo).
    pub shim_socket: Option<PathBuf>,
    pub reservation_ttl: Duration,
    /// Whether headroomd loads its eBPF probes.
    pub probes: ProbeMode,
    /// Shrink-before-evict switches.
    pub give_way: crate::give_way::GiveWaySettings,
}

/// This machine's host name, the Node's name by default.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "standalone".into())
}

/// Whether this process may create cgroups and move processes into them.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A running standalone node.
pub struct Running {
    pub node: Arc<StandaloneNode>,
    daemon: Option<headroomd::node::Node>,
    api: Option<ApiHandle>,
    shim: tokio::task::JoinHandle<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    intent_dir: PathBuf,
}

fn daemon_error(what: &str) -> impl Fn(anyhow::Error) -> StandaloneError + '_ {
    move |e| StandaloneError::Headroomd(format!("{what}: {e:#}"))
}

/// `/dev/shm/headroom/intents/<cgroup root names>`: tmpfs on every Linux, one directory per
/// set of Pod cgroup roots so that concurrent standalone nodes (tests) never share records.
pub fn intent_dir_for(roots: &Roots) -> PathBuf {
    let dirs = roots.dirs();
    let name: String = format!("{dirs:?}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = name.trim_matches('_').chars().take(120).collect::<String>();
    PathBuf::from("/dev/shm/headroom/intents").join(name)
}

/// Starts headroomd, the node, the shim loop and (if configured) the control API.
pub async fn start(cfg: RunConfig) -> Result<Running, StandaloneError> {
    let span = tracing::info_span!("standalone_start", node = %cfg.node_name);
    let _e = span.enter();
    // Intent records are fsynced before every resize and must survive a crash of this process
    // (not a reboot: cgroups do not either), so they live on tmpfs at a path that depends only
    // on the cgroup roots: a restarted shim finds and repairs what its predecessor left.
    let intent_dir = intent_dir_for(&cfg.roots);
    std::fs::create_dir_all(&intent_dir)
        .map_err(|e| StandaloneError::Invalid(format!("intent directory {}: {e}", intent_dir.display())))?;
    let mut config = Config::default();
    config.pipeline.node_name = cfg.node_name.clone();
    config.pipeline.allocatable = cfg.allocatable;
    config.server.socket_path = cfg.headroomd_socket.clone();
    config.metrics_listen = None;
    let mut options = NodeOptions::new(config);
    options.probes = cfg.probes;
    options.roots = Some(cfg.roots.clone());
    options.intent_dir = intent_dir.clone();
    drop(_e);
    // headroomd locks the roots and the intent directory and repairs any half-applied resize
    // first; only then is what an earlier run left reaped (no live node owns it).
    let daemon = headroomd::node::start(options)
        .await
        .map_err(daemon_error("start headroomd"))?;
    if let Some(why) = &daemon.probes_missing {
        tracing::warn!(reason = %why, "headroomd runs without its eBPF probes");
    }
    let embedded = daemon.embedded();
    let roots = cfg.roots.clone();
    let reaped = tokio::task::spawn_blocking(move || runtime::reap_leftovers(&roots))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let reaped = match reaped {
        Ok(reaped) => reaped,
        Err(e) => {
            let _ = daemon.shutdown().await;
            return Err(StandaloneError::Invalid(format!(
                "pods left by an earlier run: {e}"
            )));
        }
    };
    for r in &reaped {
        embedded.pod_gone(&r.uid);
        match &r.removed {
            Ok(()) => tracing::warn!(
                pod_uid = %r.uid,
                killed = r.killed,
                "reaped a Pod an earlier run of this node left (its processes killed, its cgroups removed)"
            ),
            Err(e) => tracing::warn!(
                pod_uid = %r.uid,
                killed = r.killed,
                error = %e,
                "a Pod an earlier run of this node left could not be removed"
            ),
        }
    }

    let node = Arc::new(StandaloneNode::new(
        NodeConfig {
            name: cfg.node_name,
            allocatable: cfg.allocatable,
            roots: cfg.roots,
            grace_period_override: cfg.grace_period_override,
            headroomd_socket: cfg.headroomd_socket,
            reservation_ttl: cfg.reservation_ttl,
            give_way: cfg.give_way,
        },
        embedded,
    )?);
    let (shutdown, rx) = tokio::sync::watch::channel(false);
    let shim = tokio::spawn(shim::run_loop(node.clone(), rx));
    let api = match &cfg.shim_socket {
        Some(path) => match api::serve(path, node.clone()) {
            Ok(api) => Some(api),
            Err(e) => {
                let _ = shutdown.send(true);
                let _ = daemon.shutdown().await;
                return Err(StandaloneError::Invalid(format!(
                    "control API on {}: {e}",
                    path.display()
                )));
            }
        },
        None => None,
    };
    Ok(Running {
        node,
        daemon: Some(daemon),
        api,
        shim,
        shutdown,
        intent_dir,
    })
}

impl Running {
    /// Stops the loop and the servers, kills every Pod and removes every cgroup created.
    pub async fn stop(mut self) -> Result<(), StandaloneError> {
        let _ = self.shutdown.send(true);
        let _ = (&mut self.shim).await;
        if let Some(api) = self.api.take() {
            api.shutdown().await;
        }
        // Killing and reaping is blocking work: on a thread of its own, not tokio's blocking
        // pool, which panics when no thread can be spawned (pids.max reached by the Pods);
        // then inline, since the node is stopping anyway.
        let node = self.node.clone();
        let (done, finished) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("headroom-cleanup".into())
            .spawn(move || {
                node.cleanup();
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => {
                let _ = finished.await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "no thread for the clean-up; cleaning up on this one");
                self.node.cleanup();
            }
        }
        let stopped = match self.daemon.take() {
            Some(d) => d.shutdown().await.map_err(daemon_error("stop headroomd")),
            None => Ok(()),
        };
        // Every Pod is gone and so is each one's record: an empty directory is all that is left.
        if let Err(e) = std::fs::remove_dir(&self.intent_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::info!(dir = %self.intent_dir.display(), error = %e, "intent directory left in place");
        }
        stopped
    }

    /// Waits until the control API or headroomd stops on its own (an error).
    pub async fn wait(&mut self) -> Result<(), StandaloneError> {
        match self.daemon.as_mut() {
            Some(d) => d
                .daemon
                .server
                .wait()
                .await
                .map_err(daemon_error("headroomd stopped")),
            None => std::future::pending().await,
        }
    }
}

impl Drop for Running {
    /// Dropped without `stop` (a panic, an early return): still no processes or cgroups left.
    fn drop(&mut self) {
        self.shim.abort();
        self.node.cleanup();
    }
}
