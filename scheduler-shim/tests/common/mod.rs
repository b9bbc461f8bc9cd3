//! The standalone node the privileged tests start in-process: real cgroups under a root of its
//! own, so tests never share Pods, records or locks.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_actuator::layout::DEFAULT_MOUNT;
use headroom_node_model::Resources;
use headroom_shim::standalone::run::RunConfig;
use headroomd::node::ProbeMode;

/// A throwaway node: `<mount>/…/<prefix>-<pid>-<n>`, headroomd's socket in `dir`, 8 CPU and
/// 16 GiB, no grace period, no probes (no test here decides on probe figures; loading them
/// only costs time). Returns the config to adjust and the root's name.
pub fn scratch_node(prefix: &str, dir: &Path) -> (RunConfig, String) {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let root = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let setup = headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).unwrap();
    let config = RunConfig {
        node_name: "test-node".into(),
        allocatable: Resources::new(8_000, 16 << 30),
        roots: Roots::standalone(Path::new(DEFAULT_MOUNT), setup, &root),
        grace_period_override: Some(Duration::ZERO),
        headroomd_socket: dir.join("headroomd.sock"),
        shim_socket: None,
        reservation_ttl: Duration::from_secs(30),
        probes: ProbeMode::Off,
        give_way: Default::default(),
    };
    (config, root)
}
