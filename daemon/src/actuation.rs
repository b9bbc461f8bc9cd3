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

use headroom_actuator::{ActuateError, Actuator, KubeResources, Phase};

use crate::server::actuator::{
    ActuatorError, BoxFuture, ContainerResize, ResizeActuator, ResizeOutcome, ResizeRequest,
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
}

fn to_u64(field: &str, value: i64) -> Result<u64, ActuatorError> {
    u64::try_from(value)
        .map_err(|_| ActuatorError::Invalid(format!("{field} must not be negative, got {value}")))
}

/// Merges one container's partial resize over what it had.
fn merge(change: &ContainerResize, base: Option<&KubeResources>) -> Result<KubeResources, ActuatorError> {
    let cpu_request_milli = match (change.cpu_request_millis, base) {
        (Some(v), _) => to_u64("cpu_request_millis", v)?,
        (None, Some(b)) => b.cpu_request_milli,
        (None, None) => {
            return Err(ActuatorError::Invalid(format!(
                "container {}: cpu_request_millis is required for a container headroom has not resized before",
                change.name
            )));
        }
    };
    let cpu_limit_milli = match change.cpu_limit_millis {
        Some(v) => Some(to_u64("cpu_limit_millis", v)?),
        None => base.and_then(|b| b.cpu_limit_milli),
    };
    let memory_limit_bytes = match change.memory_limit_bytes {
        Some(v) => Some(to_u64("memory_limit_bytes", v)?),
        None => base.and_then(|b| b.memory_limit_bytes),
    };
    Ok(KubeResources {
        cpu_request_milli,
        cpu_limit_milli,
        memory_limit_bytes,
    })
}

fn map_error(error: ActuateError) -> ActuatorError {
    let text = error.to_string();
    match error {
        ActuateError::Path(_) => ActuatorError::Invalid(text),
        ActuateError::MemoryBelowUsage { .. } => ActuatorError::Precondition(text),
        ActuateError::Cgroup { ref source, .. } if source.to_string().contains("No such file") => {
            ActuatorError::NotFound(text)
        }
        _ => ActuatorError::Failed(text),
    }
}

impl ResizeActuator for CgroupActuator {
    fn apply(&self, request: ResizeRequest) -> BoxFuture<'_, Result<ResizeOutcome, ActuatorError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let received = Instant::now();
            // Cgroup writes are a dozen syscalls of about a microsecond each: done right here,
            // they cost less than handing them to a blocking thread (a futex wake and a context
            // switch, 20–50 µs on a loaded node), which was most of the actuation time.
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
                let pod = match &request.pod {
                    None => None,
                    Some(p) => Some(KubeResources {
                        cpu_request_milli: to_u64(
                            "pod.cpu_request_millis",
                            p.cpu_request_millis.unwrap_or(0),
                        )?,
                        cpu_limit_milli: p
                            .cpu_limit_millis
                            .map(|v| to_u64("pod.cpu_limit_millis", v))
                            .transpose()?,
                        memory_limit_bytes: p
                            .memory_limit_bytes
                            .map(|v| to_u64("pod.memory_limit_bytes", v))
                            .transpose()?,
                    }),
                };
                let actuator_request = headroom_actuator::ResizeRequest {
                    pod_uid: request.pod_uid.clone(),
                    containers: containers.iter().map(|(n, r)| (n.clone(), *r)).collect(),
                    pod,
                };
                let report = inner
                    .actuator
                    .resize(&actuator_request, received)
                    .map_err(map_error)?;
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
            apply()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            matches!(merge(&change, None), Err(ActuatorError::Invalid(m)) if m.contains("cpu_request_millis is required"))
        );
        let negative = ContainerResize {
            name: "app".into(),
            cpu_request_millis: Some(-1),
            ..ContainerResize::default()
        };
        assert!(
            matches!(merge(&negative, None), Err(ActuatorError::Invalid(m)) if m.contains("must not be negative"))
        );
    }
}
