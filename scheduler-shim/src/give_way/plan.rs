//! The planner: among lower-priority Pods that offered, the shrinks (and, only where they cannot
//! free enough, the evictions) that make room for a resize. Pure.
//!
//! Plans are ranked by evictions, then PDB violations, then Pods touched (shrunk or evicted), then
//! the amount taken (each resource as a share of allocatable). Eviction-only (upstream's own
//! victim selection) is always one of the plans ranked, so a plan is never worse than it in
//! evictions.

use std::cmp::Ordering;

use headroom_node_model::Resources;

use super::{GiveWay, LiveFigures, Note, Policy, Shrink};
use crate::decide::select::{Reprieve, SelectedVictims, Split, reprieve};
use crate::decide::{DecideError, NodeState, PodInput};

/// Exhaustive search up to this many shrinkable Pods (2^12 subsets); greedy beyond.
const EXHAUSTIVE_UP_TO: usize = 12;
const MI: i64 = 1 << 20;

/// The Pod-level requests `pod` can shrink to for a node short of `need` (only resources with a
/// positive need change), or why it cannot give anything.
pub fn shrink_target(pod: &PodInput, need: Resources, policy: &Policy) -> Result<Resources, String> {
    if !policy.enabled {
        return Err("shrinking is off on this node".into());
    }
    let offer = match &pod.give_way {
        GiveWay::Offered(offer) => offer,
        GiveWay::NotOffered => return Err("it did not offer to give way".into()),
        GiveWay::Invalid(why) => return Err(why.clone()),
        GiveWay::NamespaceOff => return Err("shrinking is off for its namespace".into()),
    };
    let live = &pod.live;
    let mut to = pod.requests;
    let mut why = Vec::new();
    if need.cpu_millis > 0 {
        match (
            offer.cpu_floor_millis,
            live.cpu_throttled_permille,
            live.cpu_usage_millis,
        ) {
            (None, ..) => why.push("cpu is not offered".to_string()),
            (Some(_), None, _) | (Some(_), _, None) => {
                why.push("cpu: no fresh usage and throttling figures".to_string())
            }
            (Some(_), Some(t), _) if t > policy.max_throttled_permille => why.push(format!(
                "cpu: throttled in {} of periods, above the {} allowed",
                permille(t),
                permille(policy.max_throttled_permille)
            )),
            (Some(floor), Some(_), Some(usage)) => {
                let target = floor.max(cpu_safe_min(usage, policy));
                if target < to.cpu_millis {
                    to.cpu_millis = target;
                } else {
                    why.push(format!(
                        "cpu: its floor {}m and live usage {usage}m (+{}%) leave nothing below its {}m",
                        floor, policy.cpu_usage_margin_percent, to.cpu_millis
                    ));
                }
            }
        }
    }
    if need.memory_bytes > 0 {
        match (offer.memory_floor_bytes, live.memory_working_set_bytes) {
            (None, _) => why.push("memory is not offered".to_string()),
            (Some(_), None) => why.push("memory: no fresh working-set figure".to_string()),
            (Some(floor), Some(working_set)) => {
                let margin = memory_margin(working_set, policy);
                let target = floor.max(memory_safe_min(working_set, policy));
                if target < to.memory_bytes {
                    to.memory_bytes = target;
                } else {
                    why.push(format!(
                        "memory: its floor {} and live working set {} (+margin {}) leave nothing below its {}",
                        mib(floor),
                        mib(working_set),
                        mib(margin),
                        mib(to.memory_bytes)
                    ));
                }
            }
        }
    }
    if to == pod.requests {
        Err(why.join("; "))
    } else {
        Ok(to)
    }
}

/// The least CPU a Pod using `usage` millicores keeps: usage plus the policy's margin.
fn cpu_safe_min(usage: i64, policy: &Policy) -> i64 {
    usage.saturating_add(ceil_percent(usage, policy.cpu_usage_margin_percent))
}

fn memory_margin(working_set: i64, policy: &Policy) -> i64 {
    ceil_percent(working_set, policy.memory_margin_percent).max(policy.memory_margin_min_bytes)
}

/// The least memory a Pod with `working_set` keeps: working set plus margin, in whole MiB.
fn memory_safe_min(working_set: i64, policy: &Policy) -> i64 {
    round_up(working_set.saturating_add(memory_margin(working_set, policy)), MI)
}

/// Whether a planned shrink is still safe on the Pod's figures `now` (re-read at actuation): the
/// same rules as the plan, with no fresh figure meaning no.
pub fn still_safe(shrink: &Shrink, now: &LiveFigures, policy: &Policy) -> Result<(), String> {
    if shrink.to.cpu_millis < shrink.from.cpu_millis {
        match (now.cpu_throttled_permille, now.cpu_usage_millis) {
            (Some(t), _) if t > policy.max_throttled_permille => {
                return Err(format!(
                    "cpu: now throttled in {} of periods, above the {} allowed",
                    permille(t),
                    permille(policy.max_throttled_permille)
                ));
            }
            (Some(_), Some(usage)) if cpu_safe_min(usage, policy) > shrink.to.cpu_millis => {
                return Err(format!(
                    "cpu: live usage is now {usage}m, too much for {}m",
                    shrink.to.cpu_millis
                ));
            }
            (Some(_), Some(_)) => {}
            _ => return Err("cpu: no fresh usage and throttling figures at actuation".into()),
        }
    }
    if shrink.to.memory_bytes < shrink.from.memory_bytes {
        match now.memory_working_set_bytes {
            Some(ws) if memory_safe_min(ws, policy) > shrink.to.memory_bytes => {
                return Err(format!(
                    "memory: live working set is now {}, too much for {}",
                    mib(ws),
                    mib(shrink.to.memory_bytes)
                ));
            }
            Some(_) => {}
            None => return Err("memory: no fresh working-set figure at actuation".into()),
        }
    }
    Ok(())
}

fn ceil_percent(value: i64, percent: u32) -> i64 {
    value.saturating_mul(i64::from(percent)).saturating_add(99) / 100
}

fn round_up(value: i64, unit: i64) -> i64 {
    value.saturating_add(unit - 1) / unit * unit
}

fn permille(p: u32) -> String {
    format!("{}.{}%", p / 10, p % 10)
}

fn mib(bytes: i64) -> String {
    headroom_node_model::format_memory_bytes(round_up(bytes, MI))
}

/// A plan: the victims (as upstream would list them) and the Pods shrunk (index, to).
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub selected: SelectedVictims,
    pub shrunk: Vec<(usize, Resources)>,
}

impl Plan {
    fn rank(&self, state: &NodeState) -> (usize, usize, usize, Taken) {
        let taken = self
            .selected
            .victims
            .iter()
            .map(|v| state.pods[v.index].requests)
            .chain(
                self.shrunk
                    .iter()
                    .map(|&(i, to)| state.pods[i].requests.saturating_sub(to)),
            )
            .fold(Resources::ZERO, Resources::saturating_add);
        (
            self.selected.victims.len(),
            self.selected.pdb_violations,
            self.selected.victims.len() + self.shrunk.len(),
            Taken::new(taken, state.node.allocatable),
        )
    }
}

/// An amount as the sum of its resources' shares of allocatable, compared exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Taken {
    amount: Resources,
    allocatable: Resources,
}

impl Taken {
    fn new(amount: Resources, allocatable: Resources) -> Self {
        Taken {
            amount,
            allocatable: allocatable.max(Resources::new(1, 1)),
        }
    }

    /// cpu/A_cpu + mem/A_mem, scaled by A_cpu·A_mem (the same for both sides).
    fn scaled(&self) -> i128 {
        i128::from(self.amount.cpu_millis) * i128::from(self.allocatable.memory_bytes)
            + i128::from(self.amount.memory_bytes) * i128::from(self.allocatable.cpu_millis)
    }
}

impl PartialOrd for Taken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Taken {
    fn cmp(&self, other: &Self) -> Ordering {
        self.scaled().cmp(&other.scaled())
    }
}

/// The best plan for a resize short of `need` on a node where `split` are the candidates.
/// `allow_evictions` is false where the node switched resize preemption off: then only a plan
/// that shrinks and evicts nobody qualifies (`None` when there is none).
pub(crate) fn choose(
    state: &NodeState,
    split: &Split,
    need: Resources,
    allow_evictions: bool,
) -> Result<Option<Plan>, DecideError> {
    let targets: Vec<(usize, Resources)> = split
        .candidates()
        .filter_map(|i| {
            shrink_target(&state.pods[i], need, &state.give_way)
                .ok()
                .map(|to| (i, to))
        })
        .collect();
    let shrunk_to = |i: usize| targets.iter().find(|(j, _)| *j == i).map(|(_, to)| *to);

    let mut plans = Vec::new();
    if let Some(shrunk) = shrink_only(state, &targets, need) {
        plans.push(Plan {
            selected: SelectedVictims::default(),
            shrunk,
        });
    }
    if allow_evictions {
        let variants: &[(bool, Reprieve)] = if targets.is_empty() {
            &[(false, Reprieve::FullFirst)]
        } else {
            &[
                (false, Reprieve::FullFirst),
                (true, Reprieve::FullFirst),
                (true, Reprieve::ShrunkFirst),
            ]
        };
        for &(with_shrinks, mode) in variants {
            let none = |_| None;
            let sizes: &dyn Fn(usize) -> Option<Resources> = if with_shrinks { &shrunk_to } else { &none };
            let reprieved = reprieve(state, split, sizes, mode)?;
            plans.push(Plan {
                selected: reprieved.selected,
                shrunk: reprieved.shrunk,
            });
        }
    }
    // The first of equals wins: shrink-only, then upstream's own choice.
    Ok(plans
        .into_iter()
        .enumerate()
        .min_by(|(a_at, a), (b_at, b)| a.rank(state).cmp(&b.rank(state)).then(a_at.cmp(b_at)))
        .map(|(_, plan)| plan))
}

/// Pods shrunk: (index into the node's Pods, Pod-level requests after).
type Shrunk = Vec<(usize, Resources)>;

/// The fewest shrinks (then the least taken) that free `need` with nobody evicted.
fn shrink_only(state: &NodeState, targets: &[(usize, Resources)], need: Resources) -> Option<Shrunk> {
    let freed = |&(i, to): &(usize, Resources)| state.pods[i].requests.saturating_sub(to);
    let covers = |chosen: &mut dyn Iterator<Item = &(usize, Resources)>| {
        let sum = chosen.map(freed).fold(Resources::ZERO, Resources::saturating_add);
        need.fits_within(&sum)
    };
    if !covers(&mut targets.iter()) {
        return None;
    }
    let allocatable = state.node.allocatable;
    let taken = |chosen: &[(usize, Resources)]| {
        Taken::new(
            chosen
                .iter()
                .map(freed)
                .fold(Resources::ZERO, Resources::saturating_add),
            allocatable,
        )
    };
    if targets.len() <= EXHAUSTIVE_UP_TO {
        let mut best: Option<(u32, Taken, Shrunk)> = None;
        for mask in 1u32..(1 << targets.len()) {
            let chosen: Vec<(usize, Resources)> = targets
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, t)| *t)
                .collect();
            if !covers(&mut chosen.iter()) {
                continue;
            }
            let key = (mask.count_ones(), taken(&chosen));
            if best.as_ref().is_none_or(|(n, t, _)| key < (*n, *t)) {
                best = Some((key.0, key.1, chosen));
            }
        }
        return best.map(|(_, _, chosen)| chosen);
    }
    // Greedy: the biggest givers first, then drop whoever is not needed (smallest first).
    let mut by_size: Vec<(usize, Resources)> = targets.to_vec();
    by_size.sort_by_key(|t| std::cmp::Reverse(Taken::new(freed(t), allocatable)));
    let mut chosen = Vec::new();
    for t in by_size {
        if covers(&mut chosen.iter()) {
            break;
        }
        chosen.push(t);
    }
    let mut at = chosen.len();
    while at > 0 {
        at -= 1;
        let without: Vec<_> = chosen
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != at)
            .map(|(_, t)| *t)
            .collect();
        if covers(&mut without.iter()) {
            chosen = without;
        }
    }
    Some(chosen)
}

/// Why each Pod other than the resizing one that offered (or tried to) was or was not shrunk.
pub(crate) fn notes(
    state: &NodeState,
    resizing: usize,
    need: Resources,
    plan: Option<&Plan>,
    excluded: &[bool],
) -> Vec<Note> {
    let resizer_priority = state.pods[resizing].priority;
    state
        .pods
        .iter()
        .enumerate()
        .filter(|(i, p)| *i != resizing && !excluded[*i] && !p.nominated && p.give_way != GiveWay::NotOffered)
        .map(|(i, pod)| {
            let shrunk_to = plan.and_then(|p| p.shrunk.iter().find(|(j, _)| *j == i).map(|(_, to)| *to));
            let evicted = plan.is_some_and(|p| p.selected.victims.iter().any(|v| v.index == i));
            let reason = if let Some(to) = shrunk_to {
                format!("gives way in place: {} → {}", pod.requests, to)
            } else if pod.priority >= resizer_priority {
                format!(
                    "its priority {} is not below the resizing Pod's {resizer_priority}",
                    pod.priority
                )
            } else {
                match shrink_target(pod, need, &state.give_way) {
                    Err(why) if evicted => format!("evicted: it cannot give way ({why})"),
                    Err(why) => format!("not shrunk: {why}"),
                    Ok(_) if evicted => "evicted: giving way would not free enough".to_string(),
                    Ok(_) => "not needed: the room is made without it".to_string(),
                }
            };
            Note {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                live: pod.live,
                shrunk_to,
                reason,
            }
        })
        .collect()
}
