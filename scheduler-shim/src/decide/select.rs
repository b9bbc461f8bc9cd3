//! `SelectVictimsOnNode` (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go),
//! restricted to the resizing Pod's own node:
//! 1. remove every Pod of strictly lower priority; if the resize still does not fit, nobody is
//!    evicted;
//! 2. sort the candidates by `MoreImportantPod` (higher priority, then earlier start);
//! 3. split them into PDB-violating and non-violating (`filterPodsWithPDBViolation`, counting each
//!    PDB's `disruptionsAllowed` down in that order);
//! 4. reprieve violating ones first, then the others: a Pod is added back when the resize still fits
//!    with it, otherwise it becomes a victim.

use std::cmp::Ordering;

use headroom_node_model::Resources;

use super::{DecideError, NodeState, PodInput};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChosenVictim {
    /// Index into `NodeState::pods`.
    pub index: usize,
    pub violates_pdb: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectedVictims {
    /// Most important first.
    pub victims: Vec<ChosenVictim>,
    pub pdb_violations: usize,
}

/// The scheduler's `MoreImportantPod`: higher priority first; on a tie the Pod that started
/// earlier. A Pod without a start time counts as starting now (after every started Pod).
pub fn more_important_first(a: &PodInput, b: &PodInput) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (a.start_time, b.start_time) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
}

/// Chooses the victims for the Pod at `resizing` to grow to `requested`. `None` when evicting every
/// lower-priority Pod would still not make room (then nobody is evicted). Pods marked in `excluded`
/// are already gone. On success the victims' PDB budgets are counted down in `pdb_allowed`.
pub fn select_victims_on_node(
    state: &NodeState,
    resizing: usize,
    requested: Resources,
    excluded: &[bool],
    pdb_allowed: &mut [i32],
) -> Result<Option<SelectedVictims>, DecideError> {
    let overflow = || DecideError::Overflow {
        node: state.node.name.clone(),
    };
    let preemptor_priority = state.pods[resizing].priority;

    // Step 1: everything that stays whatever happens, plus the resize itself.
    let mut remaining = state.reserved.checked_add(requested).ok_or_else(overflow)?;
    let mut candidates: Vec<usize> = Vec::new();
    for (i, pod) in state.pods.iter().enumerate() {
        if i == resizing || excluded[i] {
            continue;
        }
        if pod.priority < preemptor_priority {
            candidates.push(i);
        } else {
            remaining = remaining.checked_add(pod.requests).ok_or_else(overflow)?;
        }
    }
    let allocatable = state.node.allocatable;
    if candidates.is_empty() || !remaining.fits_within(&allocatable) {
        return Ok(None);
    }

    // Step 2.
    candidates.sort_by(|a, b| more_important_first(&state.pods[*a], &state.pods[*b]));

    // Step 3, on a scratch copy: the split counts every candidate, chosen or not.
    let mut budget = pdb_allowed.to_vec();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for &i in &candidates {
        let pod = &state.pods[i];
        let mut violates = false;
        for &pdb in &pod.pdbs {
            let slot = budget.get_mut(pdb).ok_or_else(|| DecideError::UnknownPdb {
                pod: format!("{}/{}", pod.namespace, pod.name),
                index: pdb,
            })?;
            *slot = slot.saturating_sub(1);
            violates |= *slot < 0;
        }
        if violates {
            violating.push(i)
        } else {
            non_violating.push(i)
        }
    }

    // Step 4.
    let mut selected = SelectedVictims::default();
    let both_kinds = !violating.is_empty() && !non_violating.is_empty();
    for (list, violates_pdb) in [(&violating, true), (&non_violating, false)] {
        for &i in list {
            let with_pod = remaining
                .checked_add(state.pods[i].requests)
                .ok_or_else(overflow)?;
            if with_pod.fits_within(&allocatable) {
                remaining = with_pod; // reprieved
            } else {
                selected.victims.push(ChosenVictim {
                    index: i,
                    violates_pdb,
                });
                selected.pdb_violations += usize::from(violates_pdb);
            }
        }
    }
    if both_kinds {
        // Keep the victims in priority order from high to low, as the scheduler does.
        selected
            .victims
            .sort_by(|a, b| more_important_first(&state.pods[a.index], &state.pods[b.index]));
    }

    for victim in &selected.victims {
        for &pdb in &state.pods[victim.index].pdbs {
            if let Some(slot) = pdb_allowed.get_mut(pdb) {
                *slot = slot.saturating_sub(1);
            }
        }
    }
    Ok(Some(selected))
}
