//! The planner through the decision core: shrink before evict on the seed's node and around it.
#![allow(clippy::unwrap_used)]

use headroom_node_model::{QosClass, Resources};

use super::*;
use crate::decide::{Decision, NodeInput, NodeState, Outcome, PodInput, ResizeRequest, decide, decide_all};

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn pod(name: &str, priority: i32, cpu: i64, mem: i64) -> PodInput {
    PodInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        priority,
        requests: Resources::new(cpu, mem),
        qos: Some(QosClass::Guaranteed),
        ..Default::default()
    }
}

/// Offers floors and has fresh, quiet live figures.
fn offering(mut p: PodInput, cpu_floor: Option<i64>, mem_floor: Option<i64>) -> PodInput {
    p.give_way = GiveWay::Offered(Offer {
        cpu_floor_millis: cpu_floor,
        memory_floor_bytes: mem_floor,
    });
    p.live = LiveFigures {
        cpu_usage_millis: Some(100),
        cpu_throttled_permille: Some(0),
        memory_working_set_bytes: Some(50 * MI),
    };
    p
}

fn node(cpu: i64, mem: i64, pods: Vec<PodInput>) -> NodeState {
    NodeState {
        node: NodeInput {
            name: "node-a".into(),
            allocatable: Resources::new(cpu, mem),
            ..Default::default()
        },
        pods,
        ..Default::default()
    }
}

fn resize(state: &mut NodeState, name: &str, cpu: i64, mem: i64) -> ResizeRequest {
    let pod = state.pods.iter_mut().find(|p| p.name == name).unwrap();
    let admitted = pod.requests;
    pod.requests = admitted.max(Resources::new(cpu, mem));
    ResizeRequest {
        namespace: "default".into(),
        name: name.into(),
        requested: pod.requests,
        admitted,
        ..Default::default()
    }
}

/// The seed's standalone node: 8 CPU, low-priority-pod 3 CPU, high-priority-pod 4 CPU → 6.
fn seed(low: PodInput) -> (NodeState, ResizeRequest) {
    let mut s = node(8000, 16 * GI, vec![low, pod("high", 1_000_000, 4000, GI)]);
    let r = resize(&mut s, "high", 6000, GI);
    (s, r)
}

fn shrunk(d: &Decision) -> Vec<(&str, Resources)> {
    d.shrinks.iter().map(|s| (s.name.as_str(), s.to)).collect()
}

#[test]
fn the_seeds_low_priority_pod_gives_way_to_its_floor_and_nobody_is_evicted() {
    let (s, r) = seed(offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None));
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Shrink);
    assert!(d.victims.is_empty());
    assert_eq!(shrunk(&d), [("low", Resources::new(1000, 500 * MI))]);
    assert_eq!(d.freed(), Resources::new(2000, 0));
    assert!(
        d.give_way[0].reason.starts_with("gives way in place"),
        "{:?}",
        d.give_way
    );
}

#[test]
fn without_the_annotation_or_with_shrinking_off_the_pod_is_evicted() {
    let (s, r) = seed(pod("low", 1000, 3000, 500 * MI));
    let d = decide(&s, &r).unwrap();
    assert_eq!(
        (d.outcome, d.shrinks.len(), d.victims.len()),
        (Outcome::Preempt, 0, 1)
    );
    assert!(d.give_way.is_empty());

    let (mut s, r) = seed(offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None));
    s.give_way = Policy::OFF;
    let d = decide(&s, &r).unwrap();
    assert_eq!((d.outcome, d.shrinks.len()), (Outcome::Preempt, 0));
    assert!(
        d.give_way[0].reason.contains("shrinking is off on this node"),
        "{:?}",
        d.give_way
    );

    let (mut s, r) = seed(offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None));
    s.pods[0].give_way = GiveWay::NamespaceOff;
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Preempt);
}

#[test]
fn a_floor_too_high_a_busy_cpu_or_stale_figures_mean_eviction() {
    // Floor 2.5 CPU frees 500m, the resize needs 1 CPU.
    let (s, r) = seed(offering(pod("low", 1000, 3000, 500 * MI), Some(2500), None));
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Preempt);

    let mut throttled = offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None);
    throttled.live.cpu_throttled_permille = Some(250);
    let (s, r) = seed(throttled);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    assert!(
        d.give_way[0].reason.contains("throttled in 25.0% of periods"),
        "{:?}",
        d.give_way
    );

    // Using 2.5 CPU: with the 25 % margin it keeps 3125m, more than it has.
    let mut busy = offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None);
    busy.live.cpu_usage_millis = Some(2500);
    let (s, r) = seed(busy);
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Preempt);

    let mut stale = offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None);
    stale.live = LiveFigures::default();
    let (s, r) = seed(stale);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    assert!(d.give_way[0].reason.contains("no fresh"), "{:?}", d.give_way);
}

#[test]
fn memory_is_never_shrunk_below_the_working_set_plus_margin() {
    // 2 GiB node; low holds 1 GiB, offers down to 256Mi, but its working set is 1000Mi.
    let mut low = offering(pod("low", 1, 100, GI), None, Some(256 * MI));
    low.live.memory_working_set_bytes = Some(1000 * MI);
    let mut s = node(8000, 2 * GI, vec![low, pod("high", 10, 100, 512 * MI)]);
    let r = resize(&mut s, "high", 100, GI + 512 * MI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt, "{:?}", d.give_way);
    assert!(
        d.give_way[0].reason.contains("working set 1000Mi"),
        "{:?}",
        d.give_way
    );

    // With a small working set it gives way, to working set + 32Mi margin (floor 256Mi is lower).
    s.pods[0].live.memory_working_set_bytes = Some(100 * MI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Shrink);
    assert_eq!(shrunk(&d), [("low", Resources::new(100, 256 * MI))]);
    s.pods[0].give_way = GiveWay::Offered(Offer {
        cpu_floor_millis: None,
        memory_floor_bytes: Some(100 * MI),
    });
    let d = decide(&s, &r).unwrap();
    assert_eq!(shrunk(&d), [("low", Resources::new(100, 132 * MI))]);
}

#[test]
fn fewest_pods_touched_then_least_taken() {
    // Needs 1 CPU (a 3 + b 1 + c 1 + high 3 = 8 ... plus 1). a can give 2 CPU, b and c 600m
    // each: shrinking a alone touches one Pod.
    let pods = vec![
        offering(pod("a", 1, 3000, GI), Some(1000), None),
        offering(pod("b", 1, 1000, GI), Some(400), None),
        offering(pod("c", 1, 1000, GI), Some(400), None),
        pod("high", 10, 2000, GI),
    ];
    let mut s = node(8000, 16 * GI, pods.clone());
    let r = resize(&mut s, "high", 4000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Shrink);
    assert_eq!(shrunk(&d), [("a", Resources::new(1000, GI))]);

    // Two Pods that each could do it: the one giving less wins (b gives 1375m, a 2000m).
    let mut pods = pods;
    pods[1] = offering(pod("b", 1, 1500, GI), Some(1), None);
    let mut s = node(8000, 16 * GI, pods);
    let r = resize(&mut s, "high", 3500, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Shrink);
    assert_eq!(shrunk(&d), [("b", Resources::new(125, GI))], "{d:?}");
}

#[test]
fn shrinks_and_evictions_together_when_shrinking_alone_is_not_enough() {
    // Needs 3 CPU: a gives 2 CPU in place; evicting b (1 CPU) covers the rest. Eviction-only
    // evicts a (3 CPU), one eviction as well — and both are one eviction, so the mixed plan must
    // not be chosen over it unless it touches no more Pods. Here eviction-only touches 1 Pod.
    let pods = vec![
        offering(pod("a", 1, 3000, GI), Some(1000), None),
        pod("b", 1, 1000, GI),
        pod("high", 10, 4000, GI),
    ];
    let mut s = node(8000, 16 * GI, pods);
    let r = resize(&mut s, "high", 7000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    assert_eq!(d.victims.len(), 1);

    // Now b offers too (to 500m): a's and b's shrinks free 2.5 CPU, not 3: one eviction stays
    // the least, and a mixed plan may not evict more than eviction-only does.
    s.pods[1] = offering(pod("b", 1, 1000, GI), Some(500), None);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.victims.len(), 1, "{d:?}");
    let eviction_only = {
        let mut off = s.clone();
        off.give_way = Policy::OFF;
        decide(&off, &r).unwrap()
    };
    assert!(d.victims.len() <= eviction_only.victims.len());
}

#[test]
fn a_node_with_resize_preemption_off_still_lets_pods_give_way() {
    let (mut s, r) = seed(offering(pod("low", 1000, 3000, 500 * MI), Some(1000), None));
    s.node.disable_resize_preemption = vec!["headroom".into()];
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Shrink);
    s.pods[0].give_way = GiveWay::NotOffered;
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Disabled);
}

#[test]
fn a_pod_shrunk_for_one_resize_is_counted_shrunk_by_the_next() {
    // Two Deferred resizes in one cycle; low gives way to the first, the second finds that room
    // taken and low already at its floor.
    let pods = vec![
        offering(pod("low", 1, 3000, GI), Some(1000), None),
        pod("x", 10, 2000, GI),
        pod("y", 5, 2000, GI),
    ];
    let mut s = node(7000, 16 * GI, pods);
    let rx = resize(&mut s, "x", 3000, GI);
    let ry = resize(&mut s, "y", 4000, GI);
    let served = decide_all(&s, &[rx, ry]).unwrap();
    assert_eq!(served[0].decision.outcome, Outcome::Shrink);
    assert_eq!(served[0].decision.shrinks[0].to.cpu_millis, 1000);
    // y needs 1 more CPU than is left: low (now 1 CPU) cannot give more, so it is evicted.
    assert_eq!(served[1].decision.outcome, Outcome::Preempt);
    assert_eq!(served[1].decision.victims[0].name, "low");
    assert_eq!(served[1].decision.victims[0].requests.cpu_millis, 1000);
}
