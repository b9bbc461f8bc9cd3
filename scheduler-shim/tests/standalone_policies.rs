//! The standalone backend's shim loop on real cgroups and processes, where preemption must not
//! happen: a resize that evicting every lower-priority Pod would still not fit stays Deferred with
//! nobody evicted, and a resizing Pod with `preemptionPolicy: Never` preempts nobody.
//!
//! Privileged (creates cgroups): skipped without root unless `HEADROOM_REQUIRE_PRIVILEGED=1`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use headroom_actuator::Roots;
use headroom_actuator::layout::DEFAULT_MOUNT;
use headroom_node_model::Resources;
use headroom_shim::decide::Outcome;
use headroom_shim::standalone::run::{RunConfig, Running, start};
use headroom_shim::standalone::shim::{pending_condition, run_cycle};
use headroomd::node::ProbeMode;

fn privileged(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("HEADROOM_REQUIRE_PRIVILEGED").as_deref() != Ok("1"),
        "{test}: needs root (creates cgroups) and HEADROOM_REQUIRE_PRIVILEGED=1 is set"
    );
    println!("SKIPPED (needs root: creates cgroups under /sys/fs/cgroup)");
    false
}

struct Node {
    running: Running,
    root: String,
    _dir: tempfile::TempDir,
}

async fn node(manifest: &str) -> Node {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let root = format!(
        "headroom-test-policy-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = tempfile::tempdir().unwrap();
    let setup = headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).unwrap();
    let running = start(RunConfig {
        node_name: "test-node".into(),
        allocatable: Resources::new(8_000, 16 << 30),
        roots: Roots::standalone(Path::new(DEFAULT_MOUNT), setup, &root),
        grace_period_override: Some(Duration::ZERO),
        headroomd_socket: dir.path().join("headroomd.sock"),
        shim_socket: None,
        reservation_ttl: Duration::from_secs(30),
        // The probes play no part in these decisions; loading them only costs time.
        probes: ProbeMode::Off,
    })
    .await
    .unwrap();
    running.node.apply_manifest(manifest).unwrap();
    Node {
        running,
        root,
        _dir: dir,
    }
}

impl Node {
    fn pids(&self, key: &str) -> Vec<u32> {
        let store = self.running.node.store();
        store.pods[key].runtime.as_ref().expect("running").pids()
    }

    async fn stop(self) {
        self.running.stop().await.unwrap();
        for controller in ["cpu", "memory"] {
            let dir = format!("/sys/fs/cgroup/{controller}/{}", self.root);
            assert!(!Path::new(&dir).exists(), "{dir} was left behind");
        }
    }
}

const CLASSES: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1000
"#;

fn pod(name: &str, class: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  priorityClassName: {class}\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {{cpu: \"{cpu}\", memory: 100Mi}}\n      limits: {{cpu: \"{cpu}\", memory: 100Mi}}\n"
    )
}

async fn assert_nobody_evicted(n: Node, resizer: &str, want: Outcome) {
    let node = &n.running.node;
    let low_pids = n.pids("default/low");
    let result = node.resize(resizer, None, Some("6"), None).await.unwrap();
    assert_eq!(result.status, "Deferred", "{result:?}");
    let served = run_cycle(node).await.unwrap();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(served[0].decision.outcome, want, "{:?}", served[0].decision);
    assert!(served[0].decision.victims.is_empty());

    // Still Deferred; the victim candidate untouched: running, its processes alive, no events.
    let (reason, message) = pending_condition(node, &format!("default/{resizer}")).expect("PodResizePending");
    assert_eq!(reason, "Deferred");
    assert!(
        message.starts_with("Node didn't have enough resource: cpu, requested: 6000"),
        "{message}"
    );
    assert_eq!(n.pids("default/low"), low_pids);
    for pid in &low_pids {
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "victim process {pid} is gone"
        );
    }
    assert!(node.store().events.list(Some("low")).is_empty());
    assert!(node.latencies().is_empty());
    n.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_that_cannot_fit_even_after_evicting_every_lower_priority_pod_stays_deferred() {
    if !privileged("cannot fit") {
        return;
    }
    // 8 CPU: resizer 2 -> 6, an equal-priority peer 3, low 1: 10 > 8. Evicting low still leaves
    // 6 + 3 = 9 > 8, and the peer is not of lower priority: nobody may be evicted.
    let manifest = format!(
        "{CLASSES}{}{}{}",
        pod("resizer", "high", "2"),
        pod("peer", "high", "3"),
        pod("low", "low", "1")
    );
    let n = node(&manifest).await;
    assert_nobody_evicted(n, "resizer", Outcome::Deferred).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_policy_never_preempts_nobody() {
    if !privileged("never") {
        return;
    }
    // The seed's scenario, but the resizer's class says preemptionPolicy: Never.
    let manifest = format!(
        "{CLASSES}{}{}",
        pod("resizer", "high-never", "4"),
        pod("low", "low", "3")
    );
    let n = node(&manifest).await;
    assert_nobody_evicted(n, "resizer", Outcome::NotEligible).await;
}
