//! The loaders of operator-written files: the shim's multi-document cluster YAML and headroomd's
//! TOML configuration. Never a panic; what loads is consistent.
#![no_main]

use headroom_shim::cluster_file::{self, ResizeSpec};
use headroomd::config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if selector % 2 == 0 {
        if let Ok(cluster) = cluster_file::parse_cluster(&text) {
            // Go on into the decision core's input for every Pod the file holds.
            for pod in cluster.pods.iter().take(8) {
                let spec = ResizeSpec {
                    namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    container: None,
                    cpu: Some("1".into()),
                    memory: Some("1Gi".into()),
                };
                let _ = cluster_file::node_state_for(&cluster, &spec);
            }
        }
    } else {
        match config::parse(&text, "fuzz.toml") {
            Ok(c) => {
                assert_eq!(c.server.socket_mode & 0o002, 0, "world-writable socket accepted");
                assert!(c.server.socket_mode <= 0o777);
                assert!(c.pipeline.allocatable.cpu_millis >= 0 && c.pipeline.allocatable.memory_bytes >= 0);
                assert!(c.server.limits.default_reservation_ttl <= c.server.limits.max_reservation_ttl);
            }
            Err(e) => assert!(!e.issues.is_empty(), "an error with no issue"),
        }
    }
});
