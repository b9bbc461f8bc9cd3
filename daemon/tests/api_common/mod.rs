//! An in-process headroomd (pipeline + gRPC on a temp Unix socket) for the API tests.
#![allow(dead_code, clippy::unwrap_used)]

use headroom_common::CgroupKey;
use headroom_node_model::Resources;
#[allow(unused_imports)] // not every test feeds readings
pub use headroom_testkit::headroomd::cpu_files;
use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd};
use headroomd::{
    pipeline::{CgroupOwner, PodEntry, PodRef},
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
