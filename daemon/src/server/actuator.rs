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
    pub cpu_request_millis: Option<u64>,
    /// CPU limit, millicores.
    pub cpu_limit_millis: Option<u64>,
    /// Memory request, bytes.
    pub memory_request_bytes: Option<u64>,
    /// Memory limit, bytes.
    pub memory_limit_bytes: Option<u64>,
}

/// New Pod-level resources (`spec.resources`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodLevelResize {
    /// CPU request, millicores.
    pub cpu_request_millis: Option<u64>,
    /// CPU limit, millicores.
    pub cpu_limit_millis: Option<u64>,
    /// Memory request, bytes.
    pub memory_request_bytes: Option<u64>,
    /// Memory limit, bytes.
    pub memory_limit_bytes: Option<u64>,
}

/// A validated resize: identifiers checked, amounts non-negative and within the node's
/// allocatable, requests not above limits. Nothing downstream checks them again.
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

/// Why a resize was not applied; [`ActuatorError::kind`] picks the gRPC code.
#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    /// No actuator in this daemon.
    #[error(
        "ApplyResize is not available in this headroomd: no resize actuator is configured \
         (pod {pod_uid} was not changed)"
    )]
    Unavailable { pod_uid: String },
    /// A container's first resize through headroom leaves its CPU request out: there is no
    /// earlier value to keep.
    #[error(
        "container {container}: cpu_request_millis is required for a container headroom has not resized before"
    )]
    NoBaseCpuRequest { container: String },
    /// The actuator refused or failed; the message says which file and what state was left.
    #[error(transparent)]
    Actuate(#[from] headroom_actuator::ActuateError),
}

/// The kinds of [`ActuatorError`], one per gRPC code the server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActuatorErrorKind {
    /// `UNIMPLEMENTED`.
    Unavailable,
    /// The Pod or container has no cgroup on this node (`NOT_FOUND`).
    NotFound,
    /// The request cannot be applied as given (`INVALID_ARGUMENT`).
    Invalid,
    /// The node cannot take it now (`FAILED_PRECONDITION`).
    Precondition,
    /// A write failed (`INTERNAL`).
    Failed,
}

impl ActuatorError {
    /// Classifies by variant and by the kernel's error kind, never by message text.
    pub fn kind(&self) -> ActuatorErrorKind {
        use headroom_actuator::ActuateError;
        match self {
            Self::Unavailable { .. } => ActuatorErrorKind::Unavailable,
            Self::NoBaseCpuRequest { .. } => ActuatorErrorKind::Invalid,
            Self::Actuate(ActuateError::Path(_)) => ActuatorErrorKind::Invalid,
            Self::Actuate(ActuateError::MemoryBelowUsage { .. }) => ActuatorErrorKind::Precondition,
            Self::Actuate(ActuateError::Cgroup { source, .. }) if source.is_not_found() => {
                ActuatorErrorKind::NotFound
            }
            Self::Actuate(_) => ActuatorErrorKind::Failed,
        }
    }
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
            Err(ActuatorError::Unavailable {
                pod_uid: request.pod_uid,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::{io, path::PathBuf};

    use headroom_actuator::ActuateError;
    use headroom_cgroupfs::CgroupError;

    use super::*;

    fn cgroup_error(kind: io::ErrorKind) -> ActuatorError {
        ActuatorError::Actuate(ActuateError::Cgroup {
            pod_uid: "p".into(),
            source: CgroupError::Open {
                path: PathBuf::from("/sys/fs/cgroup/cpu/headroom/podp/cpu.shares"),
                source: io::Error::from(kind),
            },
        })
    }

    #[test]
    fn errors_are_classified_by_kind_not_by_message() {
        assert_eq!(
            cgroup_error(io::ErrorKind::NotFound).kind(),
            ActuatorErrorKind::NotFound
        );
        assert_eq!(
            cgroup_error(io::ErrorKind::PermissionDenied).kind(),
            ActuatorErrorKind::Failed
        );
        assert_eq!(
            ActuatorError::NoBaseCpuRequest {
                container: "app".into()
            }
            .kind(),
            ActuatorErrorKind::Invalid
        );
    }
}
