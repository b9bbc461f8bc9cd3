//! The narrow seam between the gRPC `ApplyResize` RPC and whoever writes cgroups.
//!
//! The server validates the request (identifiers, quantities, the caller's uid) and then hands a
//! [`ResizeRequest`] to a [`ResizeActuator`]. Until the actuator is wired in, the daemon uses
//! [`UnavailableActuator`], which answers `UNIMPLEMENTED` with a message that says so.

use std::{future::Future, pin::Pin, time::Duration};

/// New resources of one container. `None` leaves a value as it is.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ContainerResize {
    /// Container name (a validated DNS-1123 label).
    pub name: String,
    /// CPU request, millicores.
    pub cpu_request_millis: Option<i64>,
    /// CPU limit, millicores.
    pub cpu_limit_millis: Option<i64>,
    /// Memory request, bytes.
    pub memory_request_bytes: Option<i64>,
    /// Memory limit, bytes.
    pub memory_limit_bytes: Option<i64>,
}

/// New Pod-level resources (`spec.resources`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodLevelResize {
    /// CPU request, millicores.
    pub cpu_request_millis: Option<i64>,
    /// CPU limit, millicores.
    pub cpu_limit_millis: Option<i64>,
    /// Memory request, bytes.
    pub memory_request_bytes: Option<i64>,
    /// Memory limit, bytes.
    pub memory_limit_bytes: Option<i64>,
}

/// A validated resize.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ResizeRequest {
    /// Pod uid (validated: cannot name a path outside the cgroup roots).
    pub pod_uid: String,
    /// Containers to resize.
    pub containers: Vec<ContainerResize>,
    /// Pod-level resources, if any.
    pub pod: Option<PodLevelResize>,
    /// Reservation consumed by this resize (released by the server once the resize is applied).
    pub reservation_id: Option<String>,
}

/// How long each phase took.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ResizeOutcome {
    /// `(phase, duration)` in the order they ran.
    pub phases: Vec<(String, Duration)>,
    /// Whole resize.
    pub total: Duration,
}

/// Why a resize was not applied. Mapped to gRPC codes by the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActuatorError {
    /// No actuator in this daemon (`UNIMPLEMENTED`).
    #[error("{0}")]
    Unavailable(String),
    /// The Pod or container has no cgroup on this node (`NOT_FOUND`).
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be applied as given (`INVALID_ARGUMENT`).
    #[error("{0}")]
    Invalid(String),
    /// The node cannot take it now (`FAILED_PRECONDITION`).
    #[error("{0}")]
    Precondition(String),
    /// A write failed (`INTERNAL`); the message says which and what state was left.
    #[error("{0}")]
    Failed(String),
}

/// A boxed, sendable future (keeps the trait object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Applies resizes to cgroups.
pub trait ResizeActuator: Send + Sync + 'static {
    /// Applies `request`; reports per-phase latencies.
    fn apply(&self, request: ResizeRequest) -> BoxFuture<'_, Result<ResizeOutcome, ActuatorError>>;
}

/// The actuator of a daemon built without one: every resize is `UNIMPLEMENTED`.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnavailableActuator;

impl ResizeActuator for UnavailableActuator {
    fn apply(&self, request: ResizeRequest) -> BoxFuture<'_, Result<ResizeOutcome, ActuatorError>> {
        Box::pin(async move {
            Err(ActuatorError::Unavailable(format!(
                "ApplyResize is not available in this headroomd: no resize actuator is configured \
                 (pod {} was not changed)",
                request.pod_uid
            )))
        })
    }
}
