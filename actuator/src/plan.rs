//! Pure planning: current values + desired values → the ordered list of writes.
//!
//! The kubelet's rules (`doPodResizeAction`, `resizeContainers`; see
//! `shared/notes/kubernetes-semantics.md` §2.2), per resource, memory first then CPU:
//! 1. a growing Pod cgroup is raised before its containers, a shrinking one lowered after them;
//! 2. containers shrink before any container grows (room is freed before it is taken);
//! 3. "at upsizing, limits should expand prior to requests; at downsizing, requests should shrink
//!    prior to limits".
//!
//! On v1 the kernel enforces rule 1 for CFS quotas (a child's quota may not exceed its parent's:
//! `tg_cfs_schedulable_down`), so a wrong order fails with EINVAL there.
//!
//! Every memory-limit decrease also yields a [`MemoryCheck`]: the kubelet refuses a limit below
//! current usage instead of letting v2 OOM-kill or v1 fail with EBUSY.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::values::{CgroupValues, Knob, MemoryMax, PodValues, Resource, Setting};

/// Which cgroup of the Pod a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Target {
    Pod,
    /// Index into [`PodValues::containers`].
    Container(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedWrite {
    pub target: Target,
    /// What the kernel reports now (restored on rollback).
    pub previous: Setting,
    pub next: Setting,
}

/// Before any write: refuse if `target`'s memory usage exceeds `limit_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCheck {
    pub target: Target,
    pub limit_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub writes: Vec<PlannedWrite>,
    pub memory_checks: Vec<MemoryCheck>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("current values list {current} containers but desired values list {desired}")]
    ContainerCount { current: usize, desired: usize },
    #[error("container {index} is `{current}` in current values but `{desired}` in desired values")]
    ContainerName {
        index: usize,
        current: String,
        desired: String,
    },
    #[error("no current value of {knob:?} for {target:?}")]
    MissingCurrent { target: Target, knob: Knob },
    #[error("{target:?}: cannot change {previous} into {next} (different knob or unit)")]
    Incompatible {
        target: Target,
        previous: Setting,
        next: Setting,
    },
}

struct Change {
    write: PlannedWrite,
    direction: Ordering,
}

fn change(
    target: Target,
    knob: Knob,
    cur: &CgroupValues,
    want: &CgroupValues,
) -> Result<Option<Change>, PlanError> {
    let Some(next) = want.get(knob) else {
        return Ok(None);
    };
    let previous = cur.get(knob).ok_or(PlanError::MissingCurrent { target, knob })?;
    let direction = previous.direction_to(&next).ok_or(PlanError::Incompatible {
        target,
        previous,
        next,
    })?;
    Ok((direction != Ordering::Equal).then_some(Change {
        write: PlannedWrite {
            target,
            previous,
            next,
        },
        direction,
    }))
}

const fn limit_knob(resource: Resource) -> Knob {
    match resource {
        Resource::Cpu => Knob::CpuMax,
        Resource::Memory => Knob::MemoryMax,
    }
}

/// Knobs of `resource` in "shrink" order (requests before limits); grow order is the reverse.
fn shrink_order(resource: Resource) -> &'static [Knob] {
    match resource {
        // Memory requests are not written to cgroups (no MemoryQoS here).
        Resource::Memory => &[Knob::MemoryMax],
        Resource::Cpu => &[Knob::CpuRequest, Knob::CpuMax],
    }
}

/// Orders the writes that turn `current` into `desired`. Knobs `desired` leaves `None` are not
/// touched; values already equal are skipped.
pub fn plan(current: &PodValues, desired: &PodValues) -> Result<Plan, PlanError> {
    if current.containers.len() != desired.containers.len() {
        return Err(PlanError::ContainerCount {
            current: current.containers.len(),
            desired: desired.containers.len(),
        });
    }
    for (index, ((cn, _), (dn, _))) in current.containers.iter().zip(&desired.containers).enumerate() {
        if cn != dn {
            return Err(PlanError::ContainerName {
                index,
                current: cn.clone(),
                desired: dn.clone(),
            });
        }
    }
    let mut out = Plan::default();
    for resource in [Resource::Memory, Resource::Cpu] {
        let knobs = shrink_order(resource);
        let mut pod_before = Vec::new();
        let mut pod_after = Vec::new();
        // Pod: limit up, then request up (before containers); request down, then limit down (after).
        for &knob in knobs.iter().rev() {
            if let Some(c) = change(Target::Pod, knob, &current.pod, &desired.pod)?
                && c.direction == Ordering::Greater
            {
                pod_before.push(c.write);
            }
        }
        for &knob in knobs {
            if let Some(c) = change(Target::Pod, knob, &current.pod, &desired.pod)?
                && c.direction == Ordering::Less
            {
                pod_after.push(c.write);
            }
        }
        let mut shrinking = Vec::new();
        let mut growing = Vec::new();
        for (i, ((_, cur), (_, want))) in current.containers.iter().zip(&desired.containers).enumerate() {
            for &knob in knobs {
                if let Some(c) = change(Target::Container(i), knob, cur, want)?
                    && c.direction == Ordering::Less
                {
                    shrinking.push(c.write);
                }
            }
            for &knob in knobs.iter().rev() {
                if let Some(c) = change(Target::Container(i), knob, cur, want)?
                    && c.direction == Ordering::Greater
                {
                    growing.push(c.write);
                }
            }
        }
        debug_assert!(knobs.contains(&limit_knob(resource)));
        out.writes.extend(
            pod_before
                .into_iter()
                .chain(shrinking)
                .chain(growing)
                .chain(pod_after),
        );
    }
    for w in &out.writes {
        if let (Setting::MemoryMax(prev), Setting::MemoryMax(MemoryMax::Bytes(limit))) = (w.previous, w.next)
            && MemoryMax::Bytes(limit) < prev
        {
            out.memory_checks.push(MemoryCheck {
                target: w.target,
                limit_bytes: limit,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{CpuMax, CpuRequest};

    fn vals(shares: u64, quota: Option<u64>, mem: Option<u64>) -> CgroupValues {
        CgroupValues {
            cpu_request: Some(CpuRequest::Shares(shares)),
            cpu_max: Some(quota.map_or(CpuMax::unlimited(), |q| CpuMax::micros(q, 100_000))),
            memory_max: Some(mem.map_or(MemoryMax::Max, MemoryMax::Bytes)),
        }
    }

    fn pod(p: CgroupValues, cs: &[CgroupValues]) -> PodValues {
        PodValues {
            pod: p,
            containers: cs
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("c{i}"), *v))
                .collect(),
        }
    }

    fn order(p: &Plan) -> Vec<(Target, Knob)> {
        p.writes.iter().map(|w| (w.target, w.next.knob())).collect()
    }

    /// A 2-container Pod at a quarter of its size, and at full size.
    fn small_and_big() -> (PodValues, PodValues) {
        let small = pod(
            vals(512, Some(50_000), Some(100 << 20)),
            &[vals(256, Some(25_000), Some(50 << 20)); 2],
        );
        let big = pod(
            vals(2048, Some(200_000), Some(400 << 20)),
            &[vals(1024, Some(100_000), Some(200 << 20)); 2],
        );
        (small, big)
    }

    use Knob::{CpuMax as Max, CpuRequest as Req, MemoryMax as Mem};
    use Target::{Container as C, Pod};

    #[test]
    fn growing_pod_raises_pod_first_limits_before_requests() {
        let (small, big) = small_and_big();
        let p = plan(&small, &big).expect("plan");
        assert_eq!(
            order(&p),
            vec![
                (Pod, Mem),
                (C(0), Mem),
                (C(1), Mem),
                (Pod, Max),
                (Pod, Req),
                (C(0), Max),
                (C(0), Req),
                (C(1), Max),
                (C(1), Req)
            ]
        );
        assert!(p.memory_checks.is_empty());
    }

    #[test]
    fn shrinking_pod_lowers_containers_first_requests_before_limits() {
        let (small, big) = small_and_big();
        let p = plan(&big, &small).expect("plan");
        assert_eq!(
            order(&p),
            vec![
                (C(0), Mem),
                (C(1), Mem),
                (Pod, Mem),
                (C(0), Req),
                (C(0), Max),
                (C(1), Req),
                (C(1), Max),
                (Pod, Req),
                (Pod, Max)
            ]
        );
        assert_eq!(p.memory_checks.len(), 3);
        assert_eq!(
            p.memory_checks[2],
            MemoryCheck {
                target: Pod,
                limit_bytes: 100 << 20
            }
        );
        // Rollback (reverse order) of a shrink is itself a valid grow order: pod limit first.
        assert_eq!(
            p.writes.last().map(|w| (w.target, w.next.knob())),
            Some((Pod, Max))
        );
    }

    #[test]
    fn mixed_changes_free_room_before_taking_it() {
        // c0 shrinks, c1 grows, pod unchanged; c0's limit up but its request down.
        let cur = pod(
            vals(1024, None, None),
            &[vals(512, Some(50_000), None), vals(512, Some(50_000), None)],
        );
        let want = pod(
            vals(1024, None, None),
            &[vals(256, Some(80_000), None), vals(768, Some(20_000), None)],
        );
        let p = plan(&cur, &want).expect("plan");
        assert_eq!(
            order(&p),
            vec![(C(0), Req), (C(1), Max), (C(0), Max), (C(1), Req)]
        );
    }

    #[test]
    fn unchanged_and_unmanaged_values_are_skipped() {
        let cur = pod(
            vals(1024, None, Some(1 << 30)),
            &[vals(1024, None, Some(1 << 30))],
        );
        assert!(plan(&cur, &cur).expect("plan").is_empty());
        let mut want = PodValues {
            pod: CgroupValues::default(),
            containers: vec![("c0".into(), CgroupValues::default())],
        };
        want.containers[0].1.memory_max = Some(MemoryMax::Bytes(1 << 29));
        let p = plan(&cur, &want).expect("plan");
        assert_eq!(order(&p), vec![(C(0), Mem)]);
    }

    #[test]
    fn mismatches_are_errors() {
        let cur = pod(vals(2, None, None), &[vals(2, None, None)]);
        let two = pod(vals(2, None, None), &[vals(2, None, None); 2]);
        assert!(matches!(plan(&cur, &two), Err(PlanError::ContainerCount { .. })));
        let mut weight = cur.clone();
        weight.pod.cpu_request = Some(CpuRequest::Weight(100));
        assert!(matches!(plan(&cur, &weight), Err(PlanError::Incompatible { .. })));
        let mut renamed = cur.clone();
        renamed.containers[0].0 = "other".into();
        assert!(matches!(
            plan(&cur, &renamed),
            Err(PlanError::ContainerName { .. })
        ));
    }
}
