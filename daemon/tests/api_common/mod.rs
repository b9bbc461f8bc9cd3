//! An in-process headroomd (pipeline + gRPC on a temp Unix socket) for the API tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Instant;

use headroom_common::CgroupKey;
use headroom_node_model::Resources;
use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd};
use headroomd::{
    pipeline::{CgroupFiles, CgroupOwner, CpuStat, MemoryStat, PipelineInput, PodEntry, PodRef},
    server::{AccessPolicy, TcpConfig},
};

/// headroomd in this process (the test kit's harness).
pub type TestDaemon = InProcessHeadroomd;

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
    InProcessHeadroomd::start(HeadroomdSetup {
        node_name: "test-node".into(),
        allocatable: Resources::new(8000, 16 << 30),
        access,
        tcp,
        cgroups: vec![
            (
                key(10),
                CgroupOwner::Pod {
                    pod: pod_ref(1),
                    container: None,
                },
            ),
            (
                key(11),
                CgroupOwner::Pod {
                    pod: pod_ref(1),
                    container: Some("app".into()),
                },
            ),
        ],
        pods: vec![PodEntry {
            pod: pod_ref(1),
            requests: Resources::new(1000, 1 << 30),
            pending_resize: Resources::ZERO,
        }],
        socket: "run/headroomd.sock".into(),
        dir: Some(dir),
        ..HeadroomdSetup::default()
    })
    .await
}
