//! An in-process headroomd for tests: its pipeline and gRPC server started as `headroomd serve`
//! starts them ([`headroomd::node::Daemon`], without `/metrics`), on a Unix socket in a
//! temporary directory. The test says which cgroups belong to which Pods and feeds readings
//! through [`InProcessHeadroomd::pipeline`].
#![allow(clippy::expect_used)]

use std::{path::PathBuf, sync::Arc, time::Instant};

use headroom_common::CgroupKey;
use headroom_node_model::Resources;
use headroomd::{
    config::Config,
    node::{Components, Daemon},
    pipeline::{
        CgroupFiles, CgroupOwner, CpuStat, InMemoryPodSource, MemoryStat, PipelineConfig, PipelineHandle,
        PipelineInput, PodEntry, SnapshotReader, StaticPodResolver,
    },
    server::{AccessPolicy, ConnectionLimits, ServerHandle, TcpConfig, UnavailableActuator},
};

/// What the test's headroomd knows and who may call it.
pub struct HeadroomdSetup {
    /// `PipelineConfig::node_name`.
    pub node_name: String,
    /// The node's allocatable.
    pub allocatable: Resources,
    /// Who may call what.
    pub access: AccessPolicy,
    /// Also listen on TCP with mutual TLS.
    pub tcp: Option<TcpConfig>,
    /// The Unix socket's connection cap and handshake deadline.
    pub connections: ConnectionLimits,
    /// cgroup → owner, as headroomd's cgroupfs resolver would map them.
    pub cgroups: Vec<(CgroupKey, CgroupOwner)>,
    /// Pods counted against the node (headroomd's Pod source).
    pub pods: Vec<PodEntry>,
    /// The socket, relative to the directory.
    pub socket: PathBuf,
    /// The directory (a fresh temporary one when `None`).
    pub dir: Option<tempfile::TempDir>,
}

impl Default for HeadroomdSetup {
    fn default() -> Self {
        Self {
            node_name: "test-node".into(),
            allocatable: Resources::new(8000, 16 << 30),
            access: AccessPolicy::default(),
            tcp: None,
            connections: ConnectionLimits::default(),
            cgroups: Vec::new(),
            pods: Vec::new(),
            socket: PathBuf::from("headroomd.sock"),
            dir: None,
        }
    }
}

/// A running in-process headroomd; its pipeline and server stop on [`Self::shutdown`] or drop.
pub struct InProcessHeadroomd {
    /// The temporary directory holding the socket.
    pub dir: tempfile::TempDir,
    /// The Unix socket.
    pub socket: PathBuf,
    /// Snapshots as the server serves them.
    pub reader: SnapshotReader,
    /// The Pod source (change the Pods the node counts).
    pub pods: Arc<InMemoryPodSource>,
    /// The resolver (own more cgroups).
    pub resolver: Arc<StaticPodResolver>,
    pipeline: Option<PipelineHandle>,
    server: Option<ServerHandle>,
}

impl InProcessHeadroomd {
    /// Starts it; panics (the test fails) when it cannot.
    pub async fn start(setup: HeadroomdSetup) -> Self {
        let dir = match setup.dir {
            Some(dir) => dir,
            None => tempfile::tempdir().expect("temporary directory"),
        };
        let socket = dir.path().join(&setup.socket);
        let resolver = Arc::new(StaticPodResolver::new());
        for (key, owner) in setup.cgroups {
            resolver.insert(key, owner);
        }
        let pods = Arc::new(InMemoryPodSource::new(setup.pods));
        let mut config = Config {
            pipeline: PipelineConfig {
                node_name: setup.node_name,
                allocatable: setup.allocatable,
                ..PipelineConfig::default()
            },
            tcp: setup.tcp,
            metrics_listen: None,
            ..Config::default()
        };
        config.server.socket_path = socket.clone();
        config.server.access = setup.access;
        config.server.connections = setup.connections;
        let components = Components {
            resolver: resolver.clone(),
            pod_source: pods.clone(),
            actuator: Arc::new(UnavailableActuator),
        };
        let Daemon {
            pipeline,
            reader,
            server,
            ..
        } = Daemon::start(&config, components)
            .await
            .expect("start headroomd in this process");
        Self {
            dir,
            socket,
            reader,
            pods,
            resolver,
            pipeline: Some(pipeline),
            server: Some(server),
        }
    }

    /// The pipeline (send readings through `pipeline().sender()`).
    pub fn pipeline(&self) -> &PipelineHandle {
        self.pipeline.as_ref().expect("the pipeline was stopped")
    }

    /// The gRPC server.
    pub fn server(&self) -> &ServerHandle {
        self.server.as_ref().expect("the server was stopped")
    }

    /// A stalled headroomd: the pipeline stops, the gRPC server still answers (with the last
    /// snapshot it built).
    pub async fn stop_pipeline(&mut self) {
        if let Some(pipeline) = self.pipeline.take() {
            tokio::task::spawn_blocking(move || pipeline.shutdown())
                .await
                .expect("pipeline shutdown");
        }
    }

    /// Stops the pipeline, then the server.
    pub async fn shutdown(mut self) {
        self.stop_pipeline().await;
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("server shutdown");
        }
    }
}

/// One reading of cgroup `(0, id)`'s files, as the collector sends it: `periods` CFS periods of
/// 1 ms usage each, `throttled` of them throttled for 1 ms, 64 MiB used and 48 MiB working set.
pub fn cpu_files(id: u64, at: Instant, periods: u64, throttled: u64) -> PipelineInput {
    let mut f = CgroupFiles::new(CgroupKey::new(0, id), at);
    f.readings.cpu = Some(CpuStat {
        usage_ns: periods * 1_000_000,
        nr_periods: periods,
        nr_throttled: throttled,
        throttled_ns: throttled * 1_000_000,
    });
    f.readings.memory = Some(MemoryStat {
        usage_bytes: 64 << 20,
        working_set_bytes: 48 << 20,
    });
    f.into()
}
