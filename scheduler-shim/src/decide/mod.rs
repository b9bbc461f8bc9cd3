//! The pure decision core: node, Pods, PDBs and one resize in; outcome, victims and message out.
//!
//! Semantics (Kubernetes v1.37, KEP-5836 "scheduler preemption for in-place Pod resize"):
//! - a resize whose requests exceed the node's allocatable is Infeasible and never preempts;
//! - a resize that already fits needs nobody evicted (the kubelet will actuate it);
//! - a resizing Pod with `preemptionPolicy: Never` preempts nobody, and a node whose
//!   `spec.podPreemptionPolicy.disableResizePreemption` is non-empty gets no resize preemption;
//!   both are reported in upstream's order (Never first) even when the resize fits, except that a
//!   fitting resize on a node that allows preemption is simply `fits`;
//! - victims are chosen exactly as the scheduler's `SelectVictimsOnNode` chooses them, on this node
//!   only (see [`select`]).
//!
//! Usage is counted as the scheduler counts it: every Pod at `max(desired, allocated, actual)`, so a
//! pending resize's room is already "used" in every other decision; `NodeState::reserved` adds room
//! promised through the reservation ledger that is not visible in any Pod's spec yet.

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod order;
pub(crate) mod select;

use headroom_node_model::{QosClass, ResourceName, Resources};

use crate::give_way::{self, GiveWay, LiveFigures, Note, Policy, Shrink};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use order::{ServedResize, decide_all, kubelet_retry_order};
pub use select::{SelectedVictims, more_important_first, select_victims_on_node};

/// `preemptionPolicy` of a Pod (from its spec or its PriorityClass).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptionPolicy {
    #[default]
    PreemptLowerPriority,
    Never,
}

/// The node the resize is on; the preemption boundary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInput {
    pub name: String,
    /// `status.allocatable` (cpu, memory).
    pub allocatable: Resources,
    /// `spec.podPreemptionPolicy.disableResizePreemption`: the owners that switched resize
    /// preemption off; non-empty means off.
    pub disable_resize_preemption: Vec<String>,
}

/// A Pod on the node, reduced to what the decision needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInput {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Resolved priority (`spec.priority`, else its PriorityClass's value, else 0).
    pub priority: i32,
    pub preemption_policy: PreemptionPolicy,
    /// `status.startTime`; `None` sorts as "now", i.e. after every started Pod, as the scheduler's
    /// `GetPodStartTime` does.
    pub start_time: Option<jiff::Timestamp>,
    /// Requests as the scheduler counts them (a resizing Pod at max(desired, allocated, actual)).
    pub requests: Resources,
    pub qos: Option<QosClass>,
    /// Indexes into `NodeState::pdbs` of the PodDisruptionBudgets whose selector matches this Pod.
    pub pdbs: Vec<usize>,
    /// Whether it offered to give way in place (shrink) for a more important Pod's resize.
    pub give_way: GiveWay,
    /// headroomd's fresh figures for it (all `None` where there are none).
    pub live: LiveFigures,
    /// Not on the node but nominated to it (`status.nominatedNodeName`, no `spec.nodeName`). As
    /// upstream's `RunFilterPluginsWithNominatedPods`, it counts as placed against a resize of
    /// priority at most its own, and not at all against a more important one; never a victim.
    pub nominated: bool,
    /// `metadata.deletionTimestamp` is set: it still holds its room until it is gone, and as a
    /// lower-priority Pod it is a victim that costs nothing (never evicted again).
    pub terminating: bool,
}

impl PodInput {
    pub fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }

    /// Whether it takes room on the node in a decision for a resizing Pod of `priority`.
    pub fn counts_against(&self, priority: i32) -> bool {
        !self.nominated || self.priority >= priority
    }
}

/// A PodDisruptionBudget: only its `status.disruptionsAllowed` matters to victim selection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PdbInput {
    pub namespace: String,
    pub name: String,
    pub disruptions_allowed: i32,
}

/// Everything the decision looks at on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeState {
    pub node: NodeInput,
    pub pods: Vec<PodInput>,
    pub pdbs: Vec<PdbInput>,
    /// Room promised by the reservation ledger and not yet visible in any Pod's count.
    pub reserved: Resources,
    /// The node's rules for shrinking Pods that offered.
    pub give_way: Policy,
}

/// A resize of a Pod in `NodeState::pods`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResizeRequest {
    pub namespace: String,
    pub name: String,
    /// The resizing Pod counted with its desired resources: `max(desired, allocated, actual)`.
    pub requested: Resources,
    /// The resizing Pod counted without the desired resources: `max(allocated, actual)`.
    pub admitted: Resources,
    /// Set when the kubelet reported the resize Infeasible (it knows things this model does not,
    /// such as a static CPU manager) or will (a static Pod); carries its message.
    pub reported_infeasible: Option<String>,
    /// `lastTransitionTime` of the `PodResizePending` condition; `None` = just now.
    pub pending_since: Option<jiff::Timestamp>,
}

impl ResizeRequest {
    /// Kubelet's "non-increasing" resize: no resource grows beyond what is admitted.
    pub fn is_non_increasing(&self) -> bool {
        self.requested.fits_within(&self.admitted)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The resize fits without evicting anyone; the kubelet actuates it.
    Fits,
    /// Evicting `victims` (and shrinking `shrinks`) makes the resize fit.
    Preempt,
    /// Shrinking `shrinks` in place makes the resize fit; nobody is evicted.
    Shrink,
    /// Not even evicting every lower-priority Pod makes room: nobody is evicted, it stays Deferred.
    Deferred,
    /// Beyond what the node can ever give: never preempts.
    Infeasible,
    /// The resizing Pod has `preemptionPolicy: Never`.
    NotEligible,
    /// The node switched resize preemption off.
    Disabled,
}

impl Outcome {
    /// Every outcome, in the order the metrics list them.
    pub const ALL: [Outcome; 7] = [
        Outcome::Fits,
        Outcome::Preempt,
        Outcome::Shrink,
        Outcome::Deferred,
        Outcome::Infeasible,
        Outcome::NotEligible,
        Outcome::Disabled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Fits => "fits",
            Outcome::Preempt => "preempt",
            Outcome::Shrink => "shrink",
            Outcome::Deferred => "deferred",
            Outcome::Infeasible => "infeasible",
            Outcome::NotEligible => "not-eligible",
            Outcome::Disabled => "disabled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Victim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
    /// Evicting it takes a PodDisruptionBudget below zero disruptions allowed.
    pub violates_pdb: bool,
    pub requests: Resources,
    /// Already terminating: it leaves without another API call (none is made for it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub outcome: Outcome,
    /// Most important first (the scheduler's order), empty unless `outcome` is `Preempt`.
    pub victims: Vec<Victim>,
    /// In the kubelet's or scheduler's own words.
    pub message: String,
    /// The resizing Pod's requests with the resize applied.
    pub requested: Resources,
    /// Everything else on the node (other Pods + reservations) before any eviction.
    pub used: Resources,
    pub allocatable: Resources,
    /// How many victims violate a PDB (the scheduler minimises this).
    pub pdb_violations: usize,
    /// Pods shrunk in place, most important first; empty unless `outcome` is `Shrink` or `Preempt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shrinks: Vec<Shrink>,
    /// Why each Pod that offered to give way was or was not shrunk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub give_way: Vec<Note>,
}

impl Decision {
    /// Whether it makes room (by evicting, shrinking or both).
    pub fn makes_room(&self) -> bool {
        matches!(self.outcome, Outcome::Preempt | Outcome::Shrink)
    }

    /// What the victims and the shrinks give back.
    pub fn freed(&self) -> Resources {
        self.victims
            .iter()
            .map(|v| v.requests)
            .chain(self.shrinks.iter().map(Shrink::freed))
            .fold(Resources::ZERO, Resources::saturating_add)
    }

    /// The victims as `namespace/name`, in the decision's order.
    pub fn victim_keys(&self) -> Vec<String> {
        self.victims
            .iter()
            .map(|v| format!("{}/{}", v.namespace, v.name))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecideError {
    #[error("pod {namespace}/{name} is not on node {node}")]
    UnknownPod {
        namespace: String,
        name: String,
        node: String,
    },
    #[error("resource sum overflows on node {node}")]
    Overflow { node: String },
    #[error("pod {pod} refers to PodDisruptionBudget #{index}, which is not in the node state")]
    UnknownPdb { pod: String, index: usize },
}

/// Messages, word for word from the components that emit them.
pub mod messages {
    pub const FITS: &str = "pod resize fits, waiting for Kubelet actuation";
    pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
    pub const NODE_DISABLED: &str = "node had resize preemption disabled";
    /// The kubelet's Infeasible verdict on any resize of a static Pod.
    pub const STATIC_POD: &str = "In-place resize of static-pods is not supported";
}

/// Decides one resize on one node. Pure; `O(n log n)` in the number of Pods.
pub fn decide(state: &NodeState, resize: &ResizeRequest) -> Result<Decision, DecideError> {
    let mut pdb_allowed: Vec<i32> = state.pdbs.iter().map(|p| p.disruptions_allowed).collect();
    let excluded = vec![false; state.pods.len()];
    decide_with(state, resize, &excluded, &mut pdb_allowed)
}

/// `decide` over the Pods not `excluded` (already chosen as victims by an earlier resize in the same
/// cycle), with PDB budgets `pdb_allowed` that earlier victims already counted down.
pub(crate) fn decide_with(
    state: &NodeState,
    resize: &ResizeRequest,
    excluded: &[bool],
    pdb_allowed: &mut [i32],
) -> Result<Decision, DecideError> {
    let node = &state.node;
    let overflow = || DecideError::Overflow {
        node: node.name.clone(),
    };
    let resizing = state
        .pods
        .iter()
        .enumerate()
        .find(|(i, p)| !excluded[*i] && p.is(&resize.namespace, &resize.name))
        .map(|(i, _)| i)
        .ok_or_else(|| DecideError::UnknownPod {
            namespace: resize.namespace.clone(),
            name: resize.name.clone(),
            node: node.name.clone(),
        })?;
    let resizing_pod = &state.pods[resizing];

    let mut used = state.reserved;
    for (i, pod) in state.pods.iter().enumerate() {
        if i != resizing && !excluded[i] && pod.counts_against(resizing_pod.priority) {
            used = used.checked_add(pod.requests).ok_or_else(overflow)?;
        }
    }
    let allocatable = node.allocatable;
    let requested = resize.requested;
    let decision = |outcome: Outcome, message: String| Decision {
        outcome,
        victims: Vec::new(),
        message,
        requested,
        used,
        allocatable,
        pdb_violations: 0,
        shrinks: Vec::new(),
        give_way: Vec::new(),
    };

    // Infeasible: the kubelet's check against allocatable, before anything else.
    if let Some(message) = &resize.reported_infeasible {
        return Ok(decision(Outcome::Infeasible, message.clone()));
    }
    if let Some(message) = infeasible_message(requested, allocatable) {
        return Ok(decision(Outcome::Infeasible, message));
    }

    // The kubelet admits non-increasing resizes without a fit check.
    let total = used.checked_add(requested).ok_or_else(overflow)?;
    let fits = resize.is_non_increasing() || total.fits_within(&allocatable);
    let allow_evictions = node.disable_resize_preemption.is_empty();
    // Upstream's order: DeferredPodScheduling.Filter fails a disabled node whether or not the
    // resize fits, so a fitting resize is parked ("fits") only on a node that allows preemption.
    if fits && allow_evictions {
        return Ok(decision(Outcome::Fits, messages::FITS.to_string()));
    }
    // PostFilter then asks PodEligibleToPreemptOthers before it looks at the node: `Never` is the
    // answer even on a disabled node.
    if resizing_pod.preemption_policy == PreemptionPolicy::Never {
        return Ok(decision(
            Outcome::NotEligible,
            messages::NOT_ELIGIBLE_NEVER.to_string(),
        ));
    }
    // Switching resize preemption off on a node is what leaves room for shrinking there instead
    // (the v1.37 design's own reason for the switch): shrinks only, nobody evicted. A resize that
    // fits there needs no shrink; the kubelet actuates it (`decide_all` counts its room).
    if !allow_evictions && (fits || !state.give_way.enabled) {
        return Ok(decision(Outcome::Disabled, messages::NODE_DISABLED.to_string()));
    }
    let deferred_message = total
        .insufficient(&allocatable)
        .first()
        .map(|r| deferred_message(*r, requested, used, allocatable))
        .unwrap_or_default();
    // Lower-priority Pods already terminating (an earlier preemption's victims, or anyone's
    // delete) leave whatever is decided: they are victims that cost nothing, never reprieved, so
    // no running Pod is evicted for room that is already on its way (upstream keeps them as
    // candidates and its executor skips their API call). Only where evictions are allowed.
    let mut gone = excluded.to_vec();
    let mut leaving = Vec::new();
    let mut leaving_room = Resources::ZERO;
    if allow_evictions {
        for (i, pod) in state.pods.iter().enumerate() {
            if i != resizing
                && !excluded[i]
                && pod.terminating
                && pod.priority < resizing_pod.priority
                && pod.counts_against(resizing_pod.priority)
            {
                gone[i] = true;
                leaving.push(i);
                leaving_room = leaving_room.saturating_add(pod.requests);
            }
        }
    }
    let need = total
        .saturating_sub(leaving_room)
        .saturating_sub(allocatable)
        .max(Resources::ZERO);
    let plan = if !leaving.is_empty() && need.is_zero() {
        // The room is already on its way: nobody else goes, nobody is shrunk.
        Some(give_way::plan::Plan::default())
    } else {
        let Some(split) = select::split_candidates(state, resizing, requested, &gone, pdb_allowed)? else {
            let outcome = if allow_evictions {
                Outcome::Deferred
            } else {
                Outcome::Disabled
            };
            let message = if allow_evictions {
                deferred_message
            } else {
                messages::NODE_DISABLED.to_string()
            };
            return Ok(Decision {
                give_way: give_way::plan::notes(state, resizing, need, None, &gone),
                ..decision(outcome, message)
            });
        };
        give_way::plan::choose(state, &split, need, allow_evictions)?
    };
    let notes = give_way::plan::notes(state, resizing, need, plan.as_ref(), &gone);
    let Some(plan) = plan else {
        return Ok(Decision {
            give_way: notes,
            ..decision(Outcome::Disabled, messages::NODE_DISABLED.to_string())
        });
    };
    select::count_down_pdbs(state, &plan.selected, pdb_allowed);
    let mut chosen = plan.selected.victims.clone();
    chosen.extend(leaving.iter().map(|&index| select::ChosenVictim {
        index,
        violates_pdb: false,
    }));
    if !leaving.is_empty() {
        chosen.sort_by(|a, b| select::more_important_first(&state.pods[a.index], &state.pods[b.index]));
    }
    let victims = chosen
        .iter()
        .map(|v| {
            let pod = &state.pods[v.index];
            Victim {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                priority: pod.priority,
                violates_pdb: v.violates_pdb,
                requests: pod.requests,
                terminating: pod.terminating,
            }
        })
        .collect::<Vec<_>>();
    let mut shrunk = plan.shrunk;
    shrunk.sort_by(|a, b| select::more_important_first(&state.pods[a.0], &state.pods[b.0]));
    let shrinks = shrunk
        .into_iter()
        .map(|(i, to)| {
            let pod = &state.pods[i];
            Shrink {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                priority: pod.priority,
                from: pod.requests,
                to,
                live: pod.live,
            }
        })
        .collect();
    Ok(Decision {
        outcome: if victims.is_empty() {
            Outcome::Shrink
        } else {
            Outcome::Preempt
        },
        victims,
        // The resize is Deferred until the room is made; say why, as the kubelet says it.
        message: deferred_message,
        requested,
        used,
        allocatable,
        pdb_violations: plan.selected.pdb_violations,
        shrinks,
        give_way: notes,
    })
}

/// The kubelet's Deferred wording (`InsufficientResourceError`): "used" is everything else on the
/// node, "requested" the resizing Pod's new request, in millicores or bytes.
pub fn deferred_message(
    resource: ResourceName,
    requested: Resources,
    used: Resources,
    capacity: Resources,
) -> String {
    format!(
        "Node didn't have enough resource: {resource}, requested: {}, used: {}, capacity: {}",
        requested.get(resource),
        used.get(resource),
        capacity.get(resource)
    )
}

/// The kubelet's Infeasible verdict and wording, `None` when `requested` is within `capacity`.
/// Like the kubelet's allocation manager it names memory whenever memory is short, else cpu
/// (so a resize short of both names memory, unlike the Deferred wording, which names cpu).
pub fn infeasible_message(requested: Resources, capacity: Resources) -> Option<String> {
    let short = requested.insufficient(&capacity);
    let resource = if short.contains(&ResourceName::Memory) {
        ResourceName::Memory
    } else {
        *short.first()?
    };
    Some(format!(
        "Node didn't have enough capacity: {resource}, requested: {}, capacity: {}",
        requested.get(resource),
        capacity.get(resource)
    ))
}

#[cfg(test)]
mod tests;
