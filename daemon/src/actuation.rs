//! `ApplyResize` on real cgroups: the server's [`ResizeActuator`] seam implemented with
//! `headroom_actuator::Actuator`.
//!
//! The gRPC request may leave fields out ("unchanged"); the actuator needs every container's
//! full resources, because the Pod cgroup is derived from all of them. The adapter therefore
//! remembers what it last applied per Pod and fills the gaps from there.
use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use headroom_actuator::{Actuator, KubeResources, Phase};

use crate::server::actuator::{
    ActuatorError, BoxFuture, ContainerResize, PodLevelResize, ResizeActuator, ResizeOutcome, ResizeRequest,
};

/// The real actuator behind the gRPC server.
pub struct CgroupActuator {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    actuator: Actuator,
    /// Last applied resources: pod uid → container → resources.
    applied: HashMap<String, BTreeMap<String, KubeResources>>,
}

impl CgroupActuator {
    /// Wraps `actuator`.
    pub fn new(actuator: Actuator) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                actuator,
                applied: HashMap::new(),
            })),
        }
    }

    /// Tells the adapter what a Pod's containers run with now (the standalone store does this
    /// when it creates a Pod), so a later partial resize has a base.
    pub fn remember(&self, pod_uid: &str, containers: impl IntoIterator<Item = (String, KubeResources)>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .applied
            .insert(pod_uid.to_string(), containers.into_iter().collect());
    }

    /// Forgets a Pod that is gone.
    pub fn forget(&self, pod_uid: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.applied.remove(pod_uid);
        inner.actuator.forget(pod_uid);
    }

    /// Forgets every Pod for which `present` is false; returns how many. O(Pods known here),
    /// which are only the Pods resized since they started.
    pub fn retain(&self, present: impl Fn(&str) -> bool) -> usize {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut gone: Vec<String> = inner
            .applied
            .keys()
            .filter(|uid| !present(uid))
            .cloned()
            .collect();
        gone.extend(
            inner
                .actuator
                .pod_uids()
                .filter(|uid| !present(uid))
                .map(str::to_string),
        );
        gone.sort_unstable();
        gone.dedup();
        for uid in &gone {
            inner.applied.remove(uid);
            inner.actuator.forget(uid);
            tracing::debug!(pod_uid = %uid, "pod left the node: its cgroup files and intent record are let go");
        }
        gone.len()
    }
}

/// Merges one container's partial resize over what it had.
fn merge(change: &ContainerResize, base: Option<&KubeResources>) -> Result<KubeResources, ActuatorError> {
    let cpu_request_milli = match (change.cpu_request_millis, base) {
        (Some(v), _) => v,
        (None, Some(b)) => b.cpu_request_milli,
        (None, None) => {
            return Err(ActuatorError::NoBaseCpuRequest {
                container: change.name.clone(),
            });
        }
    };
    Ok(KubeResources {
        cpu_request_milli,
        cpu_limit_milli: change.cpu_limit_millis.or(base.and_then(|b| b.cpu_limit_milli)),
        memory_limit_bytes: change
            .memory_limit_bytes
            .or(base.and_then(|b| b.memory_limit_bytes)),
    })
}

/// Pod-level resources as the actuator takes them (an absent CPU request is none).
fn pod_level(p: &PodLevelResize) -> KubeResources {
    KubeResources {
        cpu_request_milli: p.cpu_request_millis.unwrap_or(0),
        cpu_limit_milli: p.cpu_limit_millis,
        memory_limit_bytes: p.memory_limit_bytes,
    }
}

impl ResizeActuator for CgroupActuator {
    fn apply(&self, request: ResizeRequest) -> BoxFuture<'_, Result<ResizeOutcome, ActuatorError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let received = Instant::now();
            // Cgroup writes are a dozen syscalls of about a microsecond each: done right here,
            // they cost less than handing them to a blocking thread (a futex wake and a context
            // switch, 20–50 µs on a loaded node), which was most of the actuation time. But a
            // write can block for good (a frozen intent filesystem, a wedged cgroupfs), and then
            // so would the mutex for every later resize: `block_in_place` lets the runtime move
            // its other tasks (health among them) to another thread while this one waits.
            let apply = move || {
                let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
                tracing::debug!(
                    waited_ns = received.elapsed().as_nanos() as u64,
                    "actuator acquired"
                );
                let mut containers = inner.applied.get(&request.pod_uid).cloned().unwrap_or_default();
                for change in &request.containers {
                    let merged = merge(change, containers.get(&change.name))?;
                    containers.insert(change.name.clone(), merged);
                }
                let pod = request.pod.as_ref().map(pod_level);
                let actuator_request = headroom_actuator::ResizeRequest {
                    pod_uid: request.pod_uid.clone(),
                    containers: containers.iter().map(|(n, r)| (n.clone(), *r)).collect(),
                    pod,
                };
                let report = inner.actuator.resize(&actuator_request, received)?;
                inner.applied.insert(request.pod_uid.clone(), containers);
                let phases = Phase::ALL
                    .iter()
                    .filter_map(|&phase| {
                        report
                            .latency
                            .get(phase)
                            .map(|ns| (phase.name().to_string(), Duration::from_nanos(ns)))
                    })
                    .collect::<Vec<_>>();
                let total = phases.iter().map(|(_, d)| *d).max().unwrap_or_default();
                Ok(ResizeOutcome { phases, total })
            };
            match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
                Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(apply),
                // A current-thread runtime (tests, tools) has no other worker to hand over to.
                _ => apply(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ActuatorErrorKind;

    #[test]
    fn partial_changes_merge_over_the_last_applied_values() {
        let base = KubeResources {
            cpu_request_milli: 4000,
            cpu_limit_milli: Some(4000),
            memory_limit_bytes: Some(1 << 30),
        };
        let change = ContainerResize {
            name: "app".into(),
            cpu_request_millis: Some(6000),
            cpu_limit_millis: Some(6000),
            ..ContainerResize::default()
        };
        let merged = merge(&change, Some(&base)).expect("merge");
        assert_eq!(
            merged,
            KubeResources {
                cpu_request_milli: 6000,
                cpu_limit_milli: Some(6000),
                memory_limit_bytes: Some(1 << 30)
            }
        );
    }

    #[test]
    fn first_resize_needs_a_cpu_request_and_negative_values_are_refused() {
        let change = ContainerResize {
            name: "app".into(),
            ..ContainerResize::default()
        };
        assert!(
            matches!(merge(&change, None), Err(e) if e.kind() == ActuatorErrorKind::Invalid
                && e.to_string().contains("cpu_request_millis is required"))
        );
        // Negative amounts never reach the merge: validation refuses them once, before.
        let negative = headroom_proto::v1::ApplyResizeRequest {
            pod_uid: "pod-1".into(),
            containers: vec![headroom_proto::v1::ContainerResources {
                name: "app".into(),
                cpu_request_millis: Some(-1),
                ..Default::default()
            }],
            ..Default::default()
        };
        let refused =
            crate::server::validate::resize(&negative, headroom_node_model::Resources::new(8000, 16 << 30))
                .expect_err("negative cpu request");
        assert!(refused.message().contains("negative"), "{}", refused.message());
    }

    #[test]
    fn pods_that_left_the_node_are_let_go_and_the_others_kept() {
        let tmp = tempfile::tempdir().expect("tmp");
        let roots = headroom_actuator::Roots::V2 {
            dir: tmp.path().join("roots"),
        };
        let actuator = Actuator::new(headroom_actuator::ActuatorConfig::new(
            roots,
            tmp.path().join("intents"),
        ))
        .expect("actuator");
        let actuator = CgroupActuator::new(actuator);
        let resources = KubeResources {
            cpu_request_milli: 100,
            cpu_limit_milli: None,
            memory_limit_bytes: None,
        };
        for uid in ["stays", "left-1", "left-2"] {
            actuator.remember(uid, [("app".to_string(), resources)]);
        }
        // A Pod record for a Pod that left: retain must take it away too.
        std::fs::write(tmp.path().join("intents/left-1.intent"), b"").expect("record");
        assert_eq!(actuator.retain(|uid| uid == "stays"), 2);
        let inner = actuator.inner.lock().expect("lock");
        let kept: Vec<&String> = inner.applied.keys().collect();
        assert_eq!(kept, ["stays"]);
        assert!(
            !tmp.path().join("intents/left-1.intent").exists(),
            "the record stayed"
        );
        drop(inner);
        assert_eq!(
            actuator.retain(|uid| uid == "stays"),
            0,
            "a second pass finds nothing"
        );
    }

    #[test]
    fn a_stuck_actuation_does_not_stop_the_runtime() {
        let tmp = tempfile::tempdir().expect("tmp");
        let roots = headroom_actuator::Roots::V2 {
            dir: tmp.path().join("roots"),
        };
        let actuator = Actuator::new(headroom_actuator::ActuatorConfig::new(
            roots,
            tmp.path().join("intents"),
        ))
        .expect("actuator");
        let actuator = Arc::new(CgroupActuator::new(actuator));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        // A write that never returns (a frozen filesystem) holds the actuator's lock.
        let held = actuator.inner.lock().expect("lock");
        for uid in ["pod-a", "pod-b"] {
            let actuator = actuator.clone();
            runtime.spawn(async move {
                let request = ResizeRequest {
                    pod_uid: uid.into(),
                    containers: Vec::new(),
                    pod: None,
                    reservation_id: None,
                };
                let _ = actuator.apply(request).await;
            });
        }
        // Both workers' resizes now wait on the lock; everything else must still run.
        std::thread::sleep(Duration::from_millis(200));
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            tokio::task::yield_now().await;
            let _ = tx.send(());
        });
        let answered = rx.recv_timeout(Duration::from_secs(5));
        drop(held);
        runtime.shutdown_timeout(Duration::from_secs(5));
        assert!(
            answered.is_ok(),
            "a task was starved by two resizes stuck on the actuator"
        );
    }
}
