//! Resizes as the API server's `/resize` subresource takes them and as the kubelet admits and
//! actuates them (`handlePodResourcesResize`, pkg/kubelet/allocation): the conditions
//! `PodResizePending` (`Deferred`/`Infeasible`) and `PodResizeInProgress`, the `Resize*` events with
//! the kubelet's `Pod resize <what>: {json}` messages, and `allocatedResources`.

use std::time::Instant;

use headroom_actuator::KubeResources;
use headroom_node_model::pod::{
    CONDITION_RESIZE_IN_PROGRESS, CONDITION_RESIZE_PENDING, REASON_DEFERRED, REASON_ERROR, REASON_INFEASIBLE,
};
use headroom_node_model::{parse_cpu_millis, parse_memory_bytes, pod_requests};
use k8s_openapi::api::core::v1::{Pod, PodCondition, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use super::events::reasons::{self, KUBELET, NORMAL, WARNING};
use super::runtime::pod_resources;
use super::store::Store;
use super::{NodeConfig, StandaloneError};
use crate::decide::{deferred_message, infeasible_message};

/// What the kubelet's admission made of a pending resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Nothing to do: spec and allocation agree.
    NoResize,
    /// Allocated; to be written to the cgroups.
    Fits(ActuationPlan),
    Deferred {
        message: String,
    },
    Infeasible {
        message: String,
    },
}

/// The cgroup values to write for an allocated resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActuationPlan {
    pub key: String,
    pub uid: String,
    pub containers: Vec<(String, KubeResources)>,
    pub reservation: Option<String>,
}

/// The JSON the kubelet puts after `Pod resize <what>: ` (empty parts omitted).
#[derive(Serialize)]
struct ResizeMessage<'a> {
    containers: Vec<ContainerResources<'a>>,
    generation: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct ContainerResources<'a> {
    name: &'a str,
    resources: &'a ResourceRequirements,
}

fn resize_message(pod: &Pod, prefix: &str, error: Option<&str>) -> String {
    let empty = ResourceRequirements::default();
    let containers = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| ContainerResources {
            name: &c.name,
            resources: c.resources.as_ref().unwrap_or(&empty),
        })
        .collect();
    let json = serde_json::to_string(&ResizeMessage {
        containers,
        generation: pod.metadata.generation.unwrap_or(1),
        error,
    })
    .unwrap_or_default();
    format!("Pod resize {prefix}: {json}")
}

fn set_condition(pod: &mut Pod, type_: &str, reason: Option<&str>, message: Option<String>) -> bool {
    let generation = pod.metadata.generation;
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let changed = c.reason.as_deref() != reason || c.message != message;
        c.reason = reason.map(str::to_string);
        c.message = message;
        c.observed_generation = generation;
        if changed {
            c.last_transition_time = Some(Time(jiff::Timestamp::now()));
        }
        return changed;
    }
    conditions.push(PodCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.map(str::to_string),
        message,
        observed_generation: generation,
        last_transition_time: Some(Time(jiff::Timestamp::now())),
        ..PodCondition::default()
    });
    true
}

fn clear_condition(pod: &mut Pod, type_: &str) {
    if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions.retain(|c| c.type_ != type_);
    }
}

/// `kubectl patch pod POD --subresource resize`: one container's requests (and limits, where it
/// has them) set to `cpu` / `memory`. Returns the new generation.
pub fn patch(
    store: &mut Store,
    key: &str,
    container: Option<&str>,
    cpu: Option<&str>,
    memory: Option<&str>,
) -> Result<i64, StandaloneError> {
    let stored = store
        .pods
        .get_mut(key)
        .ok_or_else(|| StandaloneError::NotFound(format!("pods {key:?} not found")))?;
    if stored.runtime.is_none() {
        return Err(StandaloneError::Invalid(format!("pod {key} is not running")));
    }
    let invalid = |m: String| StandaloneError::Invalid(format!("pod {key}: {m}"));
    for (resource, value, parse) in [
        ("cpu", cpu, parse_cpu_millis as fn(&str) -> _),
        ("memory", memory, parse_memory_bytes),
    ] {
        if let Some(v) = value {
            match parse(v) {
                Ok(n) if n > 0 => {}
                Ok(_) => return Err(invalid(format!("{resource} {v:?} must be positive"))),
                Err(e) => return Err(invalid(format!("{resource} {v:?}: {e}"))),
            }
        }
    }
    let spec = stored
        .pod
        .spec
        .as_mut()
        .ok_or_else(|| invalid("no spec".into()))?;
    let target = match (container, spec.containers.len()) {
        (Some(name), _) => spec
            .containers
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| invalid(format!("no container {name:?}")))?,
        (None, 1) => &mut spec.containers[0],
        (None, n) => return Err(invalid(format!("{n} containers: say which one"))),
    };
    let resources = target.resources.get_or_insert_with(Default::default);
    for (resource, value) in [("cpu", cpu), ("memory", memory)] {
        let Some(value) = value else { continue };
        resources
            .requests
            .get_or_insert_with(Default::default)
            .insert(resource.into(), Quantity(value.into()));
        // A Guaranteed Pod must stay Guaranteed (QoS never changes on resize): move the limit too.
        if let Some(limit) = resources.limits.as_mut().and_then(|l| l.get_mut(resource)) {
            *limit = Quantity(value.into());
        }
    }
    let generation = stored.pod.metadata.generation.unwrap_or(1) + 1;
    stored.pod.metadata.generation = Some(generation);
    stored.resize_requested_at = Some(Instant::now());
    Ok(generation)
}

pub(crate) fn allocated_equals_spec(pod: &Pod) -> bool {
    let spec = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    spec.iter().all(|c| {
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        statuses
            .iter()
            .find(|s| s.name == c.name)
            .is_some_and(|s| s.allocated_resources.as_ref() == requests)
    })
}

/// The kubelet's admission of a pending resize against the node's allocatable.
pub fn admit(store: &mut Store, key: &str, node: &NodeConfig) -> Result<Admission, StandaloneError> {
    let used = store.admitted_total(Some(key))?;
    let stored = store
        .pods
        .get_mut(key)
        .ok_or_else(|| StandaloneError::NotFound(format!("pods {key:?} not found")))?;
    if stored.runtime.is_none() || allocated_equals_spec(&stored.pod) {
        return Ok(Admission::NoResize);
    }
    let pod = &mut stored.pod;
    let mut desired = pod.clone();
    clear_condition(&mut desired, CONDITION_RESIZE_PENDING);
    let requested = pod_requests(&desired)?;
    let capacity = node.allocatable;
    let verdict = if let Some(message) = infeasible_message(requested, capacity) {
        Some((
            REASON_INFEASIBLE,
            reasons::RESIZE_INFEASIBLE,
            REASON_INFEASIBLE.to_string(),
            message,
        ))
    } else {
        used.saturating_add(requested)
            .insufficient(&capacity)
            .first()
            .map(|r| {
                (
                    REASON_DEFERRED,
                    reasons::RESIZE_DEFERRED,
                    format!("OutOf{r}"),
                    deferred_message(*r, requested, used, capacity),
                )
            })
    };
    if let Some((reason, event, prefix, message)) = verdict {
        // As SetPodResizePendingCondition: an event only when the condition changed.
        if set_condition(pod, CONDITION_RESIZE_PENDING, Some(reason), Some(message.clone())) {
            let text = resize_message(pod, &prefix, Some(&message));
            store.events.record(pod, WARNING, event, text, KUBELET);
        }
        return Ok(if reason == REASON_DEFERRED {
            Admission::Deferred { message }
        } else {
            Admission::Infeasible { message }
        });
    }
    // Allocate: allocatedResources = the new requests; InProgress until the cgroups agree.
    clear_condition(pod, CONDITION_RESIZE_PENDING);
    set_condition(pod, CONDITION_RESIZE_IN_PROGRESS, None, None);
    let spec_requests: Vec<(String, Option<_>)> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            (
                c.name.clone(),
                c.resources.as_ref().and_then(|r| r.requests.clone()),
            )
        })
        .collect();
    for status in pod
        .status
        .iter_mut()
        .flat_map(|s| s.container_statuses.iter_mut().flatten())
    {
        if let Some((_, requests)) = spec_requests.iter().find(|(n, _)| *n == status.name) {
            status.allocated_resources = requests.clone();
        }
    }
    let text = resize_message(pod, "started", None);
    store
        .events
        .record(pod, NORMAL, reasons::RESIZE_STARTED, text, KUBELET);
    Ok(Admission::Fits(ActuationPlan {
        key: key.to_string(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        containers: pod_resources(pod)?,
        reservation: stored.reservation.take(),
    }))
}

/// After the cgroup writes: `status.containerStatuses[].resources` from what was written and
/// `ResizeCompleted`, or `PodResizeInProgress` reason `Error` and `ResizeError`.
pub fn finish(store: &mut Store, key: &str, result: Result<(), String>) {
    let Some(stored) = store.pods.get_mut(key) else {
        return;
    };
    let pod = &mut stored.pod;
    match result {
        Ok(()) => {
            let spec: Vec<_> = pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .map(|c| (c.name.clone(), c.resources.clone()))
                .collect();
            for status in pod
                .status
                .iter_mut()
                .flat_map(|s| s.container_statuses.iter_mut().flatten())
            {
                if let Some((_, resources)) = spec.iter().find(|(n, _)| *n == status.name) {
                    status.resources = resources.clone();
                }
            }
            clear_condition(pod, CONDITION_RESIZE_IN_PROGRESS);
            stored.resize_requested_at = None;
            let text = resize_message(pod, "completed", None);
            store
                .events
                .record(pod, NORMAL, reasons::RESIZE_COMPLETED, text, KUBELET);
        }
        Err(error) => {
            // The cgroups still hold what was last written (the actuator is all-or-nothing):
            // the allocation goes back to it, so the node counts what runs and asking again
            // actuates again instead of answering Completed for unwritten cgroups.
            for status in pod
                .status
                .iter_mut()
                .flat_map(|s| s.container_statuses.iter_mut().flatten())
            {
                status.allocated_resources = status.resources.as_ref().and_then(|r| r.requests.clone());
            }
            set_condition(
                pod,
                CONDITION_RESIZE_IN_PROGRESS,
                Some(REASON_ERROR),
                Some(error.clone()),
            );
            let text = resize_message(pod, "error", Some(&error));
            store
                .events
                .record(pod, WARNING, reasons::RESIZE_ERROR, text, KUBELET);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn message_matches_the_kubelets_wording() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "high-priority-pod", "generation": 2},
            "spec": {"containers": [{"name": "app", "resources": {
                "requests": {"cpu": "6", "memory": "1Gi"}, "limits": {"cpu": "6", "memory": "1Gi"}}}]}
        }))
        .unwrap();
        assert_eq!(
            resize_message(&pod, "started", None),
            r#"Pod resize started: {"containers":[{"name":"app","resources":{"limits":{"cpu":"6","memory":"1Gi"},"requests":{"cpu":"6","memory":"1Gi"}}}],"generation":2}"#
        );
        let m = resize_message(&pod, "OutOfcpu", Some("Node didn't have enough resource: cpu"));
        assert!(
            m.ends_with(r#""generation":2,"error":"Node didn't have enough resource: cpu"}"#),
            "{m}"
        );
        assert!(set_condition(
            &mut pod,
            CONDITION_RESIZE_PENDING,
            Some("Deferred"),
            Some("x".into())
        ));
        assert!(!set_condition(
            &mut pod,
            CONDITION_RESIZE_PENDING,
            Some("Deferred"),
            Some("x".into())
        ));
    }
}
