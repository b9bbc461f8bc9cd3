//! Property tests of the decision core (issue 5 must-show).
#![allow(clippy::unwrap_used)]

use headroom_node_model::Resources;
use headroom_shim::decide::{
    NodeInput, NodeState, Outcome, PdbInput, PodInput, ResizeRequest, decide, decide_all,
};
use proptest::prelude::*;

const MI: i64 = 1 << 20;

#[derive(Debug, Clone)]
struct Scenario {
    state: NodeState,
    resize: ResizeRequest,
}

fn arb_pod(pdb_count: usize) -> impl Strategy<Value = PodInput> {
    (
        0i32..6,
        0i64..4000,
        0i64..4096,
        prop::option::of(0i64..1000),
        prop::collection::vec(0..pdb_count.max(1), 0..2),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            move |(priority, cpu, mem, start, pdbs, nominated, terminating)| PodInput {
                namespace: "default".into(),
                priority,
                start_time: start.map(|s| jiff::Timestamp::from_second(1_700_000_000 + s).unwrap()),
                requests: Resources::new(cpu, mem * MI),
                pdbs: if pdb_count == 0 { vec![] } else { pdbs },
                nominated,
                terminating,
                ..Default::default()
            },
        )
}

/// PDBs either allow nothing (`protective`) or plenty, so "would violate" does not depend on order.
fn arb_scenario() -> impl Strategy<Value = Scenario> {
    (0usize..3, prop::collection::vec(any::<bool>(), 3))
        .prop_flat_map(|(pdb_count, protective)| {
            (
                Just(pdb_count),
                Just(protective),
                prop::collection::vec(arb_pod(pdb_count), 1..25),
                1000i64..20_000,
                1024i64..32_768,
                0i64..8000,
                0i64..4096,
                0i64..2000,
            )
        })
        .prop_map(
            |(pdb_count, protective, mut pods, cpu, mem, extra_cpu, extra_mem, reserved)| {
                for (i, pod) in pods.iter_mut().enumerate() {
                    pod.name = format!("pod-{i}");
                    pod.uid = format!("uid-{i}");
                }
                let pdbs = (0..pdb_count)
                    .map(|i| PdbInput {
                        namespace: "default".into(),
                        name: format!("pdb-{i}"),
                        disruptions_allowed: if protective[i] { 0 } else { 1000 },
                    })
                    .collect();
                // The resizing Pod is on the node, and not terminating (no resize is served then).
                pods[0].nominated = false;
                pods[0].terminating = false;
                let admitted = pods[0].requests;
                let requested = admitted
                    .checked_add(Resources::new(extra_cpu, extra_mem * MI))
                    .unwrap();
                pods[0].requests = requested;
                let state = NodeState {
                    node: NodeInput {
                        name: "n".into(),
                        allocatable: Resources::new(cpu, mem * MI),
                        ..Default::default()
                    },
                    pods,
                    pdbs,
                    reserved: Resources::new(reserved, 0),
                    give_way: Default::default(),
                };
                let resize = ResizeRequest {
                    namespace: "default".into(),
                    name: "pod-0".into(),
                    requested,
                    admitted,
                    ..Default::default()
                };
                Scenario { state, resize }
            },
        )
}

fn sum<'a>(pods: impl Iterator<Item = &'a PodInput>) -> Resources {
    pods.fold(Resources::ZERO, |s, p| s.checked_add(p.requests).unwrap())
}

fn protected(state: &NodeState, pod: &PodInput) -> bool {
    pod.pdbs.iter().any(|&i| state.pdbs[i].disruptions_allowed <= 0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decisions_keep_kubernetes_rules(s in arb_scenario()) {
        let Scenario { state, resize } = s;
        let d = decide(&state, &resize).unwrap();
        let me = &state.pods[0];
        // The model: what takes room against this resize. A Pod nominated to the node counts as
        // placed only when its priority is at least the resizer's (RunFilterPluginsWithNominatedPods).
        let others = || state.pods.iter().skip(1).filter(|p| !p.nominated || p.priority >= me.priority);
        let allocatable = state.node.allocatable;

        // Never a victim of equal or higher priority, never a nominated Pod; victims only when
        // preempting.
        prop_assert!(d.victims.iter().all(|v| v.priority < me.priority));
        prop_assert!(d.victims.iter().all(|v| state.pods.iter().any(|p| p.name == v.name && !p.nominated)));
        prop_assert_eq!(d.outcome == Outcome::Preempt, !d.victims.is_empty());

        // Never evicts when evicting every lower-priority Pod cannot make room.
        let staying = sum(others().filter(|p| p.priority >= me.priority));
        let best_case = staying.checked_add(resize.requested).unwrap().checked_add(state.reserved).unwrap();
        if !best_case.fits_within(&allocatable) {
            prop_assert!(d.victims.is_empty());
        }

        if d.outcome == Outcome::Preempt {
            let is_victim = |p: &PodInput| d.victims.iter().any(|v| v.name == p.name);
            let kept = sum(others().filter(|p| !is_victim(p)));
            let after = kept.checked_add(resize.requested).unwrap().checked_add(state.reserved).unwrap();
            // The eviction makes room...
            prop_assert!(after.fits_within(&allocatable));
            // ...takes every terminating lower-priority Pod, which leaves anyway (no API call)...
            for p in others().filter(|p| p.terminating && p.priority < me.priority) {
                prop_assert!(d.victims.iter().any(|v| v.name == p.name && v.terminating), "{} is leaving but not taken", p.name);
            }
            // ...and is minimal in the reprieve sense: giving back any single running victim
            // breaks the fit.
            for v in d.victims.iter().filter(|v| !v.terminating) {
                prop_assert!(!after.checked_add(v.requests).unwrap().fits_within(&allocatable), "{} needlessly evicted", v.name);
            }
            // PDBs respected whenever a choice allows: if keeping every protected lower-priority Pod
            // still leaves room, none of them is evicted.
            let protected_lower = sum(others().filter(|p| p.priority < me.priority && protected(&state, p)));
            if best_case.checked_add(protected_lower).unwrap().fits_within(&allocatable) {
                prop_assert_eq!(d.pdb_violations, 0);
                prop_assert!(d.victims.iter().all(|v| !v.violates_pdb));
            }
        }

        // Fits and Preempt are mutually consistent: a resize that fits as is evicts nobody.
        let now = sum(others()).checked_add(resize.requested).unwrap().checked_add(state.reserved).unwrap();
        if now.fits_within(&allocatable) && resize.requested.fits_within(&allocatable) {
            prop_assert_eq!(d.outcome, Outcome::Fits);
        }
    }

    /// Several resizes in one cycle: everything granted (Fits / Preempt) fits together with every
    /// Pod that stays, so no two resizes were given the same freed room.
    #[test]
    fn concurrent_resizes_never_share_room(
        s in arb_scenario(),
        extra in prop::collection::vec((0i64..4000, 0i64..2048), 1..4),
    ) {
        let Scenario { mut state, resize } = s;
        // Every Pod here is bound and running: nominated Pods do not all count against every
        // resize, so they have no place in "everything that stays fits together".
        for pod in &mut state.pods {
            pod.nominated = false;
            pod.terminating = false;
        }
        let mut resizes = vec![resize];
        for (k, (cpu, mem)) in extra.into_iter().enumerate() {
            let Some(pod) = state.pods.get_mut(k + 1) else { break };
            let admitted = pod.requests;
            let requested = admitted.checked_add(Resources::new(cpu, mem * MI)).unwrap();
            pod.requests = requested;
            resizes.push(ResizeRequest { namespace: "default".into(), name: pod.name.clone(), requested, admitted, ..Default::default() });
        }
        // Start from a node that holds what it has admitted (otherwise nothing can be promised).
        let admitted_total = state.pods.iter().map(|p| {
            resizes.iter().find(|r| r.name == p.name).map_or(p.requests, |r| r.admitted)
        }).fold(state.reserved, |s, r| s.checked_add(r).unwrap());
        state.node.allocatable = state.node.allocatable.max(admitted_total);

        let served = decide_all(&state, &resizes).unwrap();
        let victims: Vec<&str> = served.iter().flat_map(|s| s.decision.victims.iter().map(|v| v.name.as_str())).collect();
        let mut unique = victims.clone();
        unique.sort_unstable();
        unique.dedup();
        prop_assert_eq!(unique.len(), victims.len(), "a Pod was evicted twice");

        let mut total = state.reserved;
        for pod in &state.pods {
            if victims.contains(&pod.name.as_str()) { continue; }
            let count = match resizes.iter().position(|r| r.name == pod.name) {
                Some(i) => {
                    let granted = served.iter().any(|s| s.resize == i
                        && matches!(s.decision.outcome, Outcome::Fits | Outcome::Preempt));
                    if granted { resizes[i].requested } else { resizes[i].admitted }
                }
                None => pod.requests,
            };
            total = total.checked_add(count).unwrap();
        }
        prop_assert!(total.fits_within(&state.node.allocatable), "granted {total} > {}", state.node.allocatable);
    }
}
