//! Several pending resizes on one node: served in the kubelet's retry order
//! (`sortPendingResizes`, pkg/kubelet/allocation/allocation_manager.go) so that the shim makes room
//! for the resize the kubelet will admit first, and so that no two resizes are given the same room.

use std::cmp::Ordering;

use headroom_node_model::QosClass;

use super::{DecideError, Decision, NodeState, Outcome, ResizeRequest, decide_with};

/// Indexes of `resizes` in the kubelet's retry order: non-increasing resizes first, then higher
/// priority, then Guaranteed before Burstable, then the longest pending. Stable for full ties.
pub fn kubelet_retry_order(state: &NodeState, resizes: &[ResizeRequest]) -> Vec<usize> {
    let pod_of = |r: &ResizeRequest| state.pods.iter().find(|p| p.is(&r.namespace, &r.name));
    let mut order: Vec<usize> = (0..resizes.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (&resizes[a], &resizes[b]);
        let (pa, pb) = (pod_of(ra), pod_of(rb));
        let priority = |p: Option<&super::PodInput>| p.map_or(0, |p| p.priority);
        let guaranteed = |p: Option<&super::PodInput>| p.and_then(|p| p.qos) == Some(QosClass::Guaranteed);
        rb.is_non_increasing()
            .cmp(&ra.is_non_increasing())
            .then_with(|| priority(pb).cmp(&priority(pa)))
            .then_with(|| guaranteed(pb).cmp(&guaranteed(pa)))
            .then_with(|| match (ra.pending_since, rb.pending_since) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            })
    });
    order
}

/// One resize's decision within a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedResize {
    /// Index into the `resizes` given to [`decide_all`].
    pub resize: usize,
    pub decision: Decision,
}

/// Decides every pending resize on the node in one cycle, in kubelet retry order.
///
/// Resizes not yet served count at what the node admitted (`ResizeRequest::admitted`), as the
/// kubelet counts them; once a resize is served (`fits`, `preempt`, `shrink`, or any resize that
/// fits as it is) its Pod counts at the requested size — the room is reserved — so no later
/// resize can be given the same room. Earlier victims are gone (their PDB budgets spent). A
/// resizing Pod that an earlier, more important resize evicts gets no decision. Calling it again after a new (e.g. higher-priority) resize arrives
/// re-plans the whole cycle.
pub fn decide_all(state: &NodeState, resizes: &[ResizeRequest]) -> Result<Vec<ServedResize>, DecideError> {
    let mut effective = state.clone();
    let position =
        |pods: &[super::PodInput], r: &ResizeRequest| pods.iter().position(|p| p.is(&r.namespace, &r.name));
    for resize in resizes {
        if let Some(i) = position(&effective.pods, resize) {
            effective.pods[i].requests = resize.admitted;
        }
    }
    let mut excluded = vec![false; effective.pods.len()];
    let mut pdb_allowed: Vec<i32> = effective.pdbs.iter().map(|p| p.disruptions_allowed).collect();
    let mut served = Vec::with_capacity(resizes.len());
    for index in kubelet_retry_order(&effective, resizes) {
        let resize = &resizes[index];
        let Some(resizing) = position(&effective.pods, resize) else {
            return Err(DecideError::UnknownPod {
                namespace: resize.namespace.clone(),
                name: resize.name.clone(),
                node: effective.node.name.clone(),
            });
        };
        if excluded[resizing] {
            continue; // evicted for a more important resize in this cycle
        }
        let decision = decide_with(&effective, resize, &excluded, &mut pdb_allowed)?;
        for victim in &decision.victims {
            let victim_index = effective
                .pods
                .iter()
                .enumerate()
                .position(|(i, p)| !excluded[i] && p.is(&victim.namespace, &victim.name));
            if let Some(i) = victim_index {
                excluded[i] = true;
            }
        }
        for shrink in &decision.shrinks {
            // Shrunk Pods count at their new size from here on (and are not shrunk twice).
            if let Some(pod) = effective
                .pods
                .iter_mut()
                .enumerate()
                .find(|(i, p)| !excluded[*i] && p.is(&shrink.namespace, &shrink.name))
                .map(|(_, p)| p)
            {
                pod.requests = shrink.to;
            }
        }
        // A resize that fits as it is (reported `disabled` or `not-eligible` where the node or
        // the Pod rules preemption out) is actuated by the kubelet all the same: its room is taken.
        let fits_as_is = resize.is_non_increasing()
            || decision
                .used
                .checked_add(decision.requested)
                .is_some_and(|total| total.fits_within(&decision.allocatable));
        if fits_as_is
            || matches!(
                decision.outcome,
                Outcome::Fits | Outcome::Preempt | Outcome::Shrink
            )
        {
            effective.pods[resizing].requests = resize.requested;
        }
        served.push(ServedResize {
            resize: index,
            decision,
        });
    }
    Ok(served)
}
