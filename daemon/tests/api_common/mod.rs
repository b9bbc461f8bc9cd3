//! An in-process headroomd (pipeline + gRPC on a temp Unix socket) for the API tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::{path::PathBuf, sync::Arc, time::Instant};

use headroom_common::CgroupKey;
use headroom_node_model::Resources;
use headroomd::{
    pipeline::{
        self, CgroupFiles, CgroupOwner, CpuStat, InMemoryPodSource, MemoryStat, PipelineConfig,
        PipelineHandle, PipelineInput, PodEntry, PodRef, SnapshotReader, StaticPodResolver,
    },
    server::{self, AccessPolicy, ServerConfig, ServerHandle, TcpConfig, UnavailableActuator},
};

pub struct TestDaemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub pipeline: PipelineHandle,
    pub reader: SnapshotReader,
    pub server: ServerHandle,
    pub pods: Arc<InMemoryPodSource>,
    pub resolver: Arc<StaticPodResolver>,
}

pub fn pod_ref(n: u32) -> PodRef {
    PodRef::new("default", format!("web-{n}"), format!("uid-{n}"))
}

pub fn key(id: u64) -> CgroupKey {
    CgroupKey::new(0, id)
}

/// cpu.stat + memory reading of cgroup `id`.
pub fn cpu_files(id: u64, at: Instant, periods: u64, throttled: u64) -> PipelineInput {
    let mut f = CgroupFiles::new(key(id), at);
    f.cpu = Some(CpuStat {
        usage_ns: periods * 1_000_000,
        nr_periods: periods,
        nr_throttled: throttled,
        throttled_ns: throttled * 1_000_000,
    });
    f.memory = Some(MemoryStat {
        usage_bytes: 64 << 20,
        working_set_bytes: 48 << 20,
    });
    f.into()
}

/// A daemon with an 8-CPU / 16 GiB node, Pod web-1 (1 CPU, 1 GiB requested) whose container
/// `app` is cgroup 11, and the given access policy.
pub async fn start(access: AccessPolicy) -> TestDaemon {
    start_with(tempfile::tempdir().unwrap(), access, None).await
}

/// The same daemon in `dir`, also on TCP with mutual TLS when `tcp` is given.
pub async fn start_with(dir: tempfile::TempDir, access: AccessPolicy, tcp: Option<TcpConfig>) -> TestDaemon {
    let socket = dir.path().join("run/headroomd.sock");
    let resolver = Arc::new(StaticPodResolver::new());
    resolver.insert(
        key(10),
        CgroupOwner::Pod {
            pod: pod_ref(1),
            container: None,
        },
    );
    resolver.insert(
        key(11),
        CgroupOwner::Pod {
            pod: pod_ref(1),
            container: Some("app".into()),
        },
    );
    let pods = Arc::new(InMemoryPodSource::new(vec![PodEntry {
        pod: pod_ref(1),
        requests: Resources::new(1000, 1 << 30),
        pending_resize: Resources::ZERO,
    }]));
    let config = PipelineConfig {
        node_name: "test-node".into(),
        allocatable: Resources::new(8000, 16 << 30),
        ..PipelineConfig::default()
    };
    let (pipeline, reader) = pipeline::spawn(config, resolver.clone(), pods.clone()).unwrap();
    let server_config = ServerConfig {
        socket_path: socket.clone(),
        access,
        ..ServerConfig::default()
    };
    let server = server::serve(
        &server_config,
        tcp.as_ref(),
        reader.clone(),
        pipeline.ledger(),
        Arc::new(UnavailableActuator),
    )
    .await
    .unwrap();
    TestDaemon {
        dir,
        socket,
        pipeline,
        reader,
        server,
        pods,
        resolver,
    }
}
