//! A Pod's requests counted the way the scheduler counts them
//! (`k8s.io/component-helpers/resource.PodRequests` with `UseStatusResources`), and its resize state
//! read from the `PodResizePending` / `PodResizeInProgress` conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

use crate::quantity::{QuantityError, parse_cpu_millis, parse_memory_bytes};
use crate::{ResourceName, Resources};

pub const CONDITION_RESIZE_PENDING: &str = "PodResizePending";
pub const CONDITION_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
pub const REASON_DEFERRED: &str = "Deferred";
pub const REASON_INFEASIBLE: &str = "Infeasible";
pub const REASON_ERROR: &str = "Error";
/// `restartPolicy: Always` on an init container makes it a sidecar (restartable init container).
pub const CONTAINER_RESTART_POLICY_ALWAYS: &str = "Always";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelError {
    #[error("{location}: {resource} quantity {value:?}: {source}")]
    InvalidQuantity {
        location: String,
        resource: ResourceName,
        value: String,
        source: QuantityError,
    },
    #[error("{location}: resource sum overflows")]
    Overflow { location: String },
}

/// Where a Pod's in-place resize stands, from its conditions (first matching condition decides, as
/// `IsPodResizeDeferred` / `IsPodResizeInfeasible` do). `PodResizePending` wins over
/// `PodResizeInProgress` when both are present: the newer request is the one still waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResizeState {
    /// No resize condition.
    None,
    /// `PodResizePending` with reason `Deferred`: valid, waiting for node room. Preemption candidate.
    Deferred { message: String },
    /// `PodResizePending` with reason `Infeasible`: can never fit this node. Never preempts.
    Infeasible { message: String },
    /// `PodResizeInProgress` without a reason: allocated, being actuated.
    InProgress,
    /// `PodResizeInProgress` with reason `Error`: actuation failed, the kubelet retries.
    Error { message: String },
    /// `PodResizePending` with a reason this model does not know; carried, not guessed at.
    PendingOther { reason: String, message: String },
}

impl ResizeState {
    pub fn is_deferred(&self) -> bool {
        matches!(self, ResizeState::Deferred { .. })
    }
    pub fn is_infeasible(&self) -> bool {
        matches!(self, ResizeState::Infeasible { .. })
    }
}

pub fn resize_state(pod: &Pod) -> ResizeState {
    let status = pod.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let is_true = |status: &str| status == "True";
    if let Some(pending) = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_RESIZE_PENDING && is_true(&c.status))
    {
        let message = pending.message.clone().unwrap_or_default();
        return match pending.reason.as_deref().unwrap_or_default() {
            REASON_DEFERRED => ResizeState::Deferred { message },
            REASON_INFEASIBLE => ResizeState::Infeasible { message },
            other => ResizeState::PendingOther {
                reason: other.to_string(),
                message,
            },
        };
    }
    if let Some(in_progress) = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_RESIZE_IN_PROGRESS && is_true(&c.status))
    {
        return match in_progress.reason.as_deref() {
            Some(REASON_ERROR) => ResizeState::Error {
                message: in_progress.message.clone().unwrap_or_default(),
            },
            _ => ResizeState::InProgress,
        };
    }
    // Before 1.33 the kubelet reported the (now deprecated) `status.resize` field instead.
    match status.and_then(|s| s.resize.as_deref()) {
        Some(REASON_DEFERRED) => ResizeState::Deferred {
            message: String::new(),
        },
        Some(REASON_INFEASIBLE) => ResizeState::Infeasible {
            message: String::new(),
        },
        Some("InProgress") => ResizeState::InProgress,
        _ => ResizeState::None,
    }
}

/// Requests as the scheduler charges them to the node:
/// - each app container at `max(spec requests, status allocatedResources, status resources.requests)`,
///   the spec (desired) ignored while the resize is Infeasible; status only when the container
///   reports `resources` (as `determineContainerReqs`);
/// - init containers: restartable sidecars (`restartPolicy: Always`) add to the sum and to every
///   later init container's peak; the pod needs `max(sum, peak of init containers)`;
/// - pod-level `spec.resources.requests`, where set, replaces the container aggregate for that
///   resource (with the same max over pod-level allocated/actual);
/// - plus `spec.overhead` (RuntimeClass).
///
/// A request left out but with a limit counts as the limit, as the API server's defaulting stores it.
pub fn pod_requests(pod: &Pod) -> Result<Resources, ModelError> {
    requests_counted(pod, resize_state(pod).is_infeasible())
}

/// What the node has admitted for the Pod so far: `max(allocated, actual)` per container (and at pod
/// level), the desired spec ignored — the count before a pending resize is granted. A container
/// that reports no status resources yet counts at its spec.
pub fn pod_requests_admitted(pod: &Pod) -> Result<Resources, ModelError> {
    requests_counted(pod, true)
}

fn requests_counted(pod: &Pod, ignore_desired: bool) -> Result<Resources, ModelError> {
    let name = pod.metadata.name.as_deref().unwrap_or("<unnamed>");
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Resources::ZERO);
    };
    let status = pod.status.as_ref();
    let infeasible = ignore_desired;
    let overflow = |what: &str| ModelError::Overflow {
        location: format!("pod {name} {what}"),
    };

    let statuses: BTreeMap<&str, &ContainerStatus> = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|cs| (cs.name.as_str(), cs))
        .collect();
    let init_statuses: BTreeMap<&str, &ContainerStatus> = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|cs| (cs.name.as_str(), cs))
        .collect();

    let mut sum = Resources::ZERO;
    for container in &spec.containers {
        let location = format!("pod {name} container {}", container.name);
        let reqs = container_requests(
            container,
            statuses.get(container.name.as_str()).copied(),
            infeasible,
            &location,
        )?;
        sum = sum.checked_add(reqs).ok_or_else(|| overflow("containers"))?;
    }

    let mut restartable_sum = Resources::ZERO;
    let mut init_peak = Resources::ZERO;
    for container in spec.init_containers.as_deref().unwrap_or_default() {
        let location = format!("pod {name} init container {}", container.name);
        let is_sidecar = container.restart_policy.as_deref() == Some(CONTAINER_RESTART_POLICY_ALWAYS);
        // Only sidecars can be resized, so only their status resources matter.
        let status = if is_sidecar {
            init_statuses.get(container.name.as_str()).copied()
        } else {
            None
        };
        let reqs = container_requests(container, status, infeasible, &location)?;
        let while_running = if is_sidecar {
            sum = sum.checked_add(reqs).ok_or_else(|| overflow("sidecars"))?;
            restartable_sum = restartable_sum
                .checked_add(reqs)
                .ok_or_else(|| overflow("sidecars"))?;
            restartable_sum
        } else {
            reqs.checked_add(restartable_sum)
                .ok_or_else(|| overflow("init containers"))?
        };
        init_peak = init_peak.max(while_running);
    }
    let mut total = sum.max(init_peak);

    if let Some(pod_level) = spec.resources.as_ref() {
        let location = format!("pod {name} spec.resources");
        let desired = requests_of(Some(pod_level), &location)?;
        let allocated = parse_list(status.and_then(|s| s.allocated_resources.as_ref()), &location)?;
        let actual = requests_of(status.and_then(|s| s.resources.as_ref()), &location)?;
        for resource in ResourceName::ALL {
            // Only resources set at pod level override the container aggregate.
            let Some(desired_value) = desired.get(resource) else {
                continue;
            };
            let desired_value = if infeasible { None } else { Some(desired_value) };
            let value = [desired_value, allocated.get(resource), actual.get(resource)]
                .into_iter()
                .flatten()
                .max();
            // Infeasible with no pod-level status yet: nothing admitted at pod level, keep the aggregate.
            if let Some(value) = value {
                set(&mut total, resource, value);
            }
        }
    }

    if let Some(overhead) = spec.overhead.as_ref() {
        let overhead = parse_list(Some(overhead), &format!("pod {name} spec.overhead"))?;
        total = total
            .checked_add(overhead.or_zero())
            .ok_or_else(|| overflow("overhead"))?;
    }
    Ok(total)
}

/// Requests of one container: desired (spec), allocated and actual, combined as the scheduler does.
fn container_requests(
    container: &Container,
    status: Option<&ContainerStatus>,
    infeasible: bool,
    location: &str,
) -> Result<Resources, ModelError> {
    let desired = requests_of(container.resources.as_ref(), location)?.or_zero();
    let Some(status) = status.filter(|s| s.resources.is_some()) else {
        return Ok(desired);
    };
    let actual = requests_of(status.resources.as_ref(), location)?.or_zero();
    let allocated = parse_list(status.allocated_resources.as_ref(), location)?.or_zero();
    let observed = actual.max(allocated);
    Ok(if infeasible {
        observed
    } else {
        observed.max(desired)
    })
}

/// Partially-set resource list: `None` for a resource that is not listed.
#[derive(Clone, Copy, Debug, Default)]
struct ResourceSet {
    cpu_millis: Option<i64>,
    memory_bytes: Option<i64>,
}

impl ResourceSet {
    fn get(&self, name: ResourceName) -> Option<i64> {
        match name {
            ResourceName::Cpu => self.cpu_millis,
            ResourceName::Memory => self.memory_bytes,
        }
    }
    fn or_zero(self) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.unwrap_or(0),
            memory_bytes: self.memory_bytes.unwrap_or(0),
        }
    }
}

fn set(total: &mut Resources, name: ResourceName, value: i64) {
    match name {
        ResourceName::Cpu => total.cpu_millis = value,
        ResourceName::Memory => total.memory_bytes = value,
    }
}

/// Requests with the API server's defaulting: a resource with a limit but no request requests the limit.
fn requests_of(resources: Option<&ResourceRequirements>, location: &str) -> Result<ResourceSet, ModelError> {
    let Some(resources) = resources else {
        return Ok(ResourceSet::default());
    };
    let requests = parse_list(resources.requests.as_ref(), location)?;
    let limits = parse_list(resources.limits.as_ref(), location)?;
    Ok(ResourceSet {
        cpu_millis: requests.cpu_millis.or(limits.cpu_millis),
        memory_bytes: requests.memory_bytes.or(limits.memory_bytes),
    })
}

/// Parses `cpu` and `memory` from a `ResourceList`; other resources (hugepages, ephemeral storage,
/// extended resources) are not part of this model.
fn parse_list(list: Option<&BTreeMap<String, Quantity>>, location: &str) -> Result<ResourceSet, ModelError> {
    let Some(list) = list else {
        return Ok(ResourceSet::default());
    };
    let invalid = |resource: ResourceName, value: &str, source: QuantityError| ModelError::InvalidQuantity {
        location: location.to_string(),
        resource,
        value: value.to_string(),
        source,
    };
    let cpu_millis = match list.get("cpu") {
        Some(q) => Some(parse_cpu_millis(&q.0).map_err(|e| invalid(ResourceName::Cpu, &q.0, e))?),
        None => None,
    };
    let memory_bytes = match list.get("memory") {
        Some(q) => Some(parse_memory_bytes(&q.0).map_err(|e| invalid(ResourceName::Memory, &q.0, e))?),
        None => None,
    };
    Ok(ResourceSet {
        cpu_millis,
        memory_bytes,
    })
}

/// Pod QoS class (`Guaranteed`, `Burstable`, `BestEffort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// The QoS class the API server recorded in `status.qosClass`; computed from the spec like
/// `GetPodQOS` (cpu and memory only) when the status does not say. QoS never changes on resize.
pub fn qos_class(pod: &Pod) -> QosClass {
    match pod.status.as_ref().and_then(|s| s.qos_class.as_deref()) {
        Some("Guaranteed") => return QosClass::Guaranteed,
        Some("Burstable") => return QosClass::Burstable,
        Some("BestEffort") => return QosClass::BestEffort,
        _ => {}
    }
    let Some(spec) = pod.spec.as_ref() else {
        return QosClass::BestEffort;
    };
    let all: Vec<&Container> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    let mut any_set = false;
    let mut guaranteed = true;
    for container in &all {
        let resources = container.resources.as_ref();
        for resource in ["cpu", "memory"] {
            let request = resources
                .and_then(|r| r.requests.as_ref())
                .and_then(|l| l.get(resource));
            let limit = resources
                .and_then(|r| r.limits.as_ref())
                .and_then(|l| l.get(resource));
            any_set |= request.is_some() || limit.is_some();
            // Guaranteed needs a limit on every resource, with the request (if any) equal to it.
            let equal = match (request, limit) {
                (Some(r), Some(l)) => quantities_equal(resource, &r.0, &l.0),
                (None, Some(_)) => true,
                _ => false,
            };
            guaranteed &= equal;
        }
    }
    if let Some(pod_level) = spec.resources.as_ref() {
        any_set |= pod_level.requests.as_ref().is_some_and(|l| !l.is_empty())
            || pod_level.limits.as_ref().is_some_and(|l| !l.is_empty());
    }
    if !any_set {
        QosClass::BestEffort
    } else if guaranteed && !all.is_empty() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

fn quantities_equal(resource: &str, a: &str, b: &str) -> bool {
    let parse = if resource == "cpu" {
        parse_cpu_millis
    } else {
        parse_memory_bytes
    };
    matches!((parse(a), parse(b)), (Ok(x), Ok(y)) if x == y)
}
