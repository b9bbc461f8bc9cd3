//! What the scheduler does to a victim, and the Events it posts.
//!
//! kube-scheduler (`pkg/scheduler/framework/preemption`): a status patch adding
//! `DisruptionTarget=True`, reason `PreemptionByScheduler`, message
//! `"<schedulerName>: preempting to accommodate a higher priority pod"` ([`mark_victim`]); then a
//! plain graceful delete (the Pod's own `terminationGracePeriodSeconds`) — here with a UID
//! precondition so that a Pod recreated under the same name is never hit ([`remove_victim`]);
//! then the Event `Normal Preempted` `"Preempted by pod <uid> on node <node>"` on the victim,
//! related to the preemptor.
//!
//! Events go to `events.k8s.io/v1`, as kube-scheduler's event broadcaster posts them (it falls back
//! to core v1 Events only on API servers without `events.k8s.io/v1`, which 1.37 always has).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;

use super::rbac::{self, verb};
use super::{KubeConfig, KubeError, PreemptionMode};
use crate::decide::Victim;

pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// Event reasons: the scheduler's and the shim's own.
pub mod reasons {
    /// On the victim, as the scheduler posts it.
    pub const PREEMPTED: &str = "Preempted";
    /// On the resizing Pod: victims were preempted for its resize.
    pub const PREEMPTING_FOR_RESIZE: &str = "PreemptingForResize";
    /// On the resizing Pod, in dry-run mode: what would have been preempted.
    pub const WOULD_PREEMPT_FOR_RESIZE: &str = "WouldPreemptForResize";
    /// On the resizing Pod: a victim could not be removed; nothing more is done this attempt.
    pub const RESIZE_PREEMPTION_FAILED: &str = "ResizePreemptionFailed";
    /// On the resizing Pod: nobody was preempted because headroomd's live headroom was stale or
    /// headroomd unreachable; retried once it is fresh.
    pub const RESIZE_PREEMPTION_BLOCKED: &str = "ResizePreemptionBlocked";
    /// On the resizing Pod: the kubelet actuated the resize; the note gives the end-to-end latency.
    pub const RESIZE_PREEMPTION_COMPLETED: &str = "ResizePreemptionCompleted";
    /// On the resizing Pod: the kubelet did not actuate the resize within the timeout.
    pub const RESIZE_PREEMPTION_TIMED_OUT: &str = "ResizePreemptionTimedOut";
    /// On a Pod shrunk in place for another Pod's resize.
    pub const GAVE_WAY: &str = crate::give_way::REASON_GAVE_WAY;
    /// On a Pod that gave way and came under pressure right after.
    pub const GIVE_WAY_PRESSURE: &str = crate::give_way::REASON_PRESSURE;
    /// On a Pod whose `headroom.io/give-way` annotation cannot be read.
    pub const INVALID_GIVE_WAY: &str = crate::give_way::REASON_INVALID;
}

/// Event `action`s (what the reporting controller did).
pub mod actions {
    pub const PREEMPTING: &str = "Preempting";
    pub const RESIZING: &str = "Resizing";
}

/// The strategic-merge status patch the scheduler sends (conditions merge by `type`).
pub fn disruption_target_patch(scheduler_name: &str, now: jiff::Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": CONDITION_DISRUPTION_TARGET,
                "status": "True",
                "reason": REASON_PREEMPTION_BY_SCHEDULER,
                "message": format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
                "lastTransitionTime": now.to_string(),
            }]
        }
    })
}

/// What the disruption controller writes over a stale mark: `DisruptionTarget=False`, with no
/// reason or message (`UpdatePodCondition` replaces the whole condition).
pub fn disruption_target_cleared_patch(now: jiff::Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": CONDITION_DISRUPTION_TARGET,
                "status": "False",
                "reason": null,
                "message": null,
                "lastTransitionTime": now.to_string(),
            }]
        }
    })
}

/// The scheduler's note on a victim.
pub fn preempted_note(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

/// How removing one victim went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimOutcome {
    /// Deleted (or evicted) now.
    Removed,
    /// Already gone, or replaced by another Pod of the same name (UID precondition failed).
    AlreadyGone,
}

/// A status patch of one victim; `Ok(None)` when it is gone (404, or 409 for another Pod under
/// its name).
async fn patch_victim_status(
    client: &Client,
    victim: &Victim,
    patch: serde_json::Value,
) -> Result<Option<Pod>, KubeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace);
    match rbac::PODS_STATUS_PATCH
        .run(
            verb::PATCH,
            api.patch_status(&victim.name, &PatchParams::default(), &Patch::Strategic(patch)),
        )
        .await
    {
        Ok(pod) => Ok(Some(pod)),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The API server's answer for a Pod that is not there (404), or not the one meant (409: a UID
/// precondition failed).
fn gone(e: &KubeError) -> bool {
    matches!(e.http_status(), Some(404 | 409))
}

/// Marks one victim `DisruptionTarget=True` as the scheduler does before its delete; `Ok(false)`
/// when it is gone already (or replaced under its name). Only for `--preemption=delete`: the
/// Eviction API writes its own condition. Not called in dry-run mode.
#[tracing::instrument(skip_all, fields(victim = %format!("{}/{}", victim.namespace, victim.name), uid = %victim.uid))]
pub async fn mark_victim(client: &Client, scheduler_name: &str, victim: &Victim) -> Result<bool, KubeError> {
    let patch = disruption_target_patch(scheduler_name, jiff::Timestamp::now());
    // Another Pod under the victim's name is not the one decided on (and now marked, as
    // upstream's patch would have; the disruption controller clears a stale mark).
    Ok(patch_victim_status(client, victim, patch)
        .await?
        .is_some_and(|pod| pod.metadata.uid.as_deref() == Some(victim.uid.as_str())))
}

/// Takes back [`mark_victim`]'s mark of a victim that is not going to be removed after all;
/// one that is gone needs nothing.
#[tracing::instrument(skip_all, fields(victim = %format!("{}/{}", victim.namespace, victim.name), uid = %victim.uid))]
pub async fn unmark_victim(client: &Client, victim: &Victim) -> Result<(), KubeError> {
    patch_victim_status(
        client,
        victim,
        disruption_target_cleared_patch(jiff::Timestamp::now()),
    )
    .await
    .map(|_| ())
}

/// Removes one victim as configured (with `--preemption=delete`, once [`mark_victim`] marked
/// it). Not called in dry-run mode.
#[tracing::instrument(skip_all, fields(victim = %format!("{}/{}", victim.namespace, victim.name), uid = %victim.uid, mode = config.preemption.as_str()))]
pub async fn remove_victim(
    client: &Client,
    config: &KubeConfig,
    victim: &Victim,
) -> Result<VictimOutcome, KubeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace);
    let preconditions = Some(Preconditions {
        uid: Some(victim.uid.clone()),
        resource_version: None,
    });
    let removed = match config.preemption {
        PreemptionMode::Delete => {
            let params = DeleteParams {
                preconditions,
                ..DeleteParams::default()
            };
            rbac::PODS_DELETE
                .run(verb::DELETE, api.delete(&victim.name, &params))
                .await
                .map(|_| ())
        }
        PreemptionMode::Eviction => {
            let params = EvictParams {
                delete_options: Some(DeleteParams {
                    preconditions,
                    ..DeleteParams::default()
                }),
                post_options: PostParams::default(),
            };
            rbac::PODS_EVICTION_CREATE
                .run(verb::CREATE, api.evict(&victim.name, &params))
                .await
                .map(|_| ())
        }
    };
    match removed {
        Ok(()) => Ok(VictimOutcome::Removed),
        Err(e) if gone(&e) => Ok(VictimOutcome::AlreadyGone),
        Err(e) => Err(e),
    }
}

/// `kubectl patch pod … --subresource resize` with `patch` (a strategic merge patch of
/// `spec.containers[].resources`, merged by container name).
pub async fn resize_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: serde_json::Value,
) -> Result<Pod, KubeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    rbac::PODS_RESIZE_PATCH
        .run(
            verb::PATCH,
            api.patch_subresource("resize", name, &PatchParams::default(), &Patch::Strategic(patch)),
        )
        .await
}

/// A reference to a Pod, as Events carry it.
pub fn pod_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..ObjectReference::default()
    }
}

/// One Event to post.
#[derive(Clone, Debug)]
pub struct EventSpec {
    pub regarding: ObjectReference,
    pub related: Option<ObjectReference>,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// The `events.k8s.io/v1` Event, named `<regarding name>.<hex nanoseconds>` as client-go names it.
pub fn event_object(config: &KubeConfig, spec: EventSpec, now: jiff::Timestamp) -> Event {
    let regarding_name = spec.regarding.name.clone().unwrap_or_default();
    let namespace = spec.regarding.namespace.clone();
    let nanos = u128::try_from(now.as_nanosecond()).unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{regarding_name}.{nanos:x}")),
            namespace,
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(spec.action.into()),
        reason: Some(spec.reason.into()),
        // The API server rejects notes longer than 1 kB.
        note: Some(spec.note.chars().take(1024).collect()),
        type_: Some(spec.type_.into()),
        regarding: Some(spec.regarding),
        related: spec.related,
        reporting_controller: Some(config.reporting_controller.clone()),
        reporting_instance: Some(config.reporting_instance.clone()),
        ..Event::default()
    }
}

/// Posts an Event; failures are logged, never fatal (as client-go's recorder drops them).
pub async fn post_event(client: &Client, config: &KubeConfig, spec: EventSpec) {
    let event = event_object(config, spec, jiff::Timestamp::now());
    let namespace = event
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let reason = event.reason.clone().unwrap_or_default();
    if let Err(error) = rbac::EVENTS_CREATE
        .run(verb::CREATE, api.create(&PostParams::default(), &event))
        .await
    {
        tracing::warn!(%error, %reason, "event not posted");
    }
}
