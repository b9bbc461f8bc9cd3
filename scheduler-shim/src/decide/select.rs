//! `SelectVictimsOnNode` (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go),
//! restricted to the resizing Pod's own node:
//! 1. remove every Pod of strictly lower priority; if the resize still does not fit, nobody is
//!    evicted;
//! 2. sort the candidates by `MoreImportantPod` (higher priority, then earlier start);
//! 3. split them into PDB-violating and non-violating (`filterVictimsWithPDBViolation`, counting
//!    each matching PDB's `disruptionsAllowed` down in that order, up to the first that goes below
//!    zero; a Pod already in a PDB's `status.disruptedPods` does not match it, see
//!    `cluster_file::pod_input`);
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
/// Terminating Pods are not candidates here: [`super::decide`] takes them as free victims first.
pub fn select_victims_on_node(
    state: &NodeState,
    resizing: usize,
    requested: Resources,
    excluded: &[bool],
    pdb_allowed: &mut [i32],
) -> Result<Option<SelectedVictims>, DecideError> {
    let Some(split) = split_candidates(state, resizing, requested, excluded, pdb_allowed)? else {
        return Ok(None);
    };
    let reprieved = reprieve(state, &split, &|_| None, Reprieve::FullFirst)?;
    count_down_pdbs(state, &reprieved.selected, pdb_allowed);
    Ok(Some(reprieved.selected))
}

/// Steps 1-3: the room taken whatever happens, and the candidates split by PDB violation, each
/// list most important first.
#[derive(Clone, Debug)]
pub(crate) struct Split {
    /// Everything that stays (the resize at `requested`, Pods not of lower priority, reservations).
    pub base: Resources,
    pub violating: Vec<usize>,
    pub non_violating: Vec<usize>,
}

impl Split {
    /// Every candidate, in reprieve order.
    pub fn candidates(&self) -> impl Iterator<Item = usize> + '_ {
        self.violating.iter().chain(&self.non_violating).copied()
    }
}

/// Steps 1-3; `None` when removing every lower-priority Pod would still not make room.
pub(crate) fn split_candidates(
    state: &NodeState,
    resizing: usize,
    requested: Resources,
    excluded: &[bool],
    pdb_allowed: &[i32],
) -> Result<Option<Split>, DecideError> {
    let overflow = || DecideError::Overflow {
        node: state.node.name.clone(),
    };
    let preemptor_priority = state.pods[resizing].priority;

    // Step 1: everything that stays whatever happens, plus the resize itself.
    let mut base = state.reserved.checked_add(requested).ok_or_else(overflow)?;
    let mut candidates: Vec<usize> = Vec::new();
    for (i, pod) in state.pods.iter().enumerate() {
        // A Pod nominated here with lower priority is not on the node: neither room nor victim.
        if i == resizing || excluded[i] || !pod.counts_against(preemptor_priority) {
            continue;
        }
        // Nominated Pods of higher or equal priority land in `base`: every reprieve counts them.
        // So do terminating Pods the caller did not take as gone (a node that evicts nobody):
        // they hold their room until they leave and are never shrunk.
        if pod.priority < preemptor_priority && !pod.terminating {
            candidates.push(i);
        } else {
            base = base.checked_add(pod.requests).ok_or_else(overflow)?;
        }
    }
    if candidates.is_empty() || !base.fits_within(&state.node.allocatable) {
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
            // As upstream's podIsViolating: violating at the first PDB that goes below zero, and
            // the PDBs after it are not counted down for this Pod.
            if *slot < 0 {
                violates = true;
                break;
            }
        }
        if violates {
            violating.push(i)
        } else {
            non_violating.push(i)
        }
    }
    Ok(Some(Split {
        base,
        violating,
        non_violating,
    }))
}

/// How step 4 uses a candidate that offered to give way in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reprieve {
    /// As the scheduler: reprieved at full size when that fits, else shrunk when that fits.
    FullFirst,
    /// Reprieved shrunk when that fits (more Pods stay), then grown back to full size, most
    /// important first, wherever the room allows (fewer Pods touched).
    ShrunkFirst,
}

/// Step 4's outcome: the victims, and the candidates kept only by shrinking them (index, to).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reprieved {
    pub selected: SelectedVictims,
    pub shrunk: Vec<(usize, Resources)>,
}

/// Step 4: a candidate is added back when the resize still fits with it (at full size, or at
/// `shrunk_to` where it offered), otherwise it becomes a victim.
pub(crate) fn reprieve(
    state: &NodeState,
    split: &Split,
    shrunk_to: &dyn Fn(usize) -> Option<Resources>,
    mode: Reprieve,
) -> Result<Reprieved, DecideError> {
    let overflow = || DecideError::Overflow {
        node: state.node.name.clone(),
    };
    let allocatable = state.node.allocatable;
    let mut remaining = split.base;
    let mut out = Reprieved::default();
    for (list, violates_pdb) in [(&split.violating, true), (&split.non_violating, false)] {
        for &i in list {
            let full = state.pods[i].requests;
            let shrunk = shrunk_to(i);
            let mut sizes: Vec<(Resources, bool)> = vec![(full, false)];
            if let Some(to) = shrunk {
                match mode {
                    Reprieve::FullFirst => sizes.push((to, true)),
                    Reprieve::ShrunkFirst => sizes.insert(0, (to, true)),
                }
            }
            let mut kept = false;
            for (size, is_shrunk) in sizes {
                let with_pod = remaining.checked_add(size).ok_or_else(overflow)?;
                if with_pod.fits_within(&allocatable) {
                    remaining = with_pod; // reprieved
                    if is_shrunk {
                        out.shrunk.push((i, size));
                    }
                    kept = true;
                    break;
                }
            }
            if !kept {
                out.selected.victims.push(ChosenVictim {
                    index: i,
                    violates_pdb,
                });
                out.selected.pdb_violations += usize::from(violates_pdb);
            }
        }
    }
    if mode == Reprieve::ShrunkFirst {
        // `shrunk` is in reprieve order (most important first within each list).
        out.shrunk.retain(|&(i, to)| {
            let grown = remaining
                .saturating_sub(to)
                .saturating_add(state.pods[i].requests);
            let fits = grown.fits_within(&allocatable);
            if fits {
                remaining = grown;
            }
            !fits
        });
    }
    if !split.violating.is_empty() && !split.non_violating.is_empty() {
        // Keep the victims in priority order from high to low, as the scheduler does.
        out.selected
            .victims
            .sort_by(|a, b| more_important_first(&state.pods[a.index], &state.pods[b.index]));
    }
    Ok(out)
}

/// The chosen victims spend their PDBs' budgets.
pub(crate) fn count_down_pdbs(state: &NodeState, selected: &SelectedVictims, pdb_allowed: &mut [i32]) {
    for victim in &selected.victims {
        for &pdb in &state.pods[victim.index].pdbs {
            if let Some(slot) = pdb_allowed.get_mut(pdb) {
                *slot = slot.saturating_sub(1);
            }
        }
    }
}
