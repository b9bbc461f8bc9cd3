//! Table tests: the seed's tutorial and cases modelled on the scheduler's own
//! `default_preemption_test.go` (`TestSelectVictimsOnNode`-style), applied to one node.
#![allow(clippy::unwrap_used)]

use headroom_node_model::{QosClass, Resources};

use super::*;

const GI: i64 = 1 << 30;

fn ts(seconds: i64) -> Option<jiff::Timestamp> {
    Some(jiff::Timestamp::from_second(1_700_000_000 + seconds).unwrap())
}

fn pod(name: &str, priority: i32, cpu: i64, mem: i64) -> PodInput {
    PodInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        priority,
        requests: Resources::new(cpu, mem),
        start_time: ts(0),
        qos: Some(QosClass::Guaranteed),
        ..Default::default()
    }
}

fn state(cpu: i64, mem: i64, pods: Vec<PodInput>) -> NodeState {
    NodeState {
        node: NodeInput {
            name: "kind-control-plane".into(),
            allocatable: Resources::new(cpu, mem),
            ..Default::default()
        },
        pods,
        ..Default::default()
    }
}

/// Resize `name` in `state` to `cpu`/`mem`, updating its scheduler count like the loader does.
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

fn names(decision: &Decision) -> Vec<&str> {
    decision.victims.iter().map(|v| v.name.as_str()).collect()
}

/// The seed: 8-CPU kind node; kube-system static pods and kindnet/coredns use 950m at
/// system-node-critical priority; low-priority-pod 3 CPU (1000); high-priority-pod 4 CPU (1000000).
fn seed() -> NodeState {
    state(
        8000,
        16 * GI,
        vec![
            pod("system-overhead", 2_000_001_000, 950, GI),
            pod("low-priority-pod", 1000, 3000, 500 << 20),
            pod("high-priority-pod", 1_000_000, 4000, GI),
        ],
    )
}

#[test]
fn seed_resize_to_six_preempts_the_low_priority_pod() {
    let mut s = seed();
    let r = resize(&mut s, "high-priority-pod", 6000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    assert_eq!(names(&d), ["low-priority-pod"]);
    assert_eq!(d.victims[0].priority, 1000);
    assert_eq!(
        d.message,
        "Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000"
    );
}

#[test]
fn seed_variants() {
    // (new cpu, outcome, message or "")
    let cases = [
        (4050, Outcome::Fits, messages::FITS.to_string()),
        (
            5000,
            Outcome::Preempt,
            "Node didn't have enough resource: cpu, requested: 5000, used: 3950, capacity: 8000".into(),
        ),
        (
            8000,
            Outcome::Deferred,
            "Node didn't have enough resource: cpu, requested: 8000, used: 3950, capacity: 8000".into(),
        ),
        (
            9000,
            Outcome::Infeasible,
            "Node didn't have enough capacity: cpu, requested: 9000, capacity: 8000".into(),
        ),
        (2000, Outcome::Fits, messages::FITS.to_string()),
    ];
    for (cpu, outcome, message) in cases {
        let mut s = seed();
        let r = resize(&mut s, "high-priority-pod", cpu, GI);
        let d = decide(&s, &r).unwrap();
        assert_eq!((d.outcome, &d.message), (outcome, &message), "cpu {cpu}");
        assert_eq!(d.victims.is_empty(), outcome != Outcome::Preempt, "cpu {cpu}");
    }
}

#[test]
fn memory_is_checked_after_cpu() {
    let mut s = seed();
    let r = resize(&mut s, "high-priority-pod", 4000, 15 * GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    assert_eq!(
        d.message,
        format!(
            "Node didn't have enough resource: memory, requested: {}, used: {}, capacity: {}",
            15 * GI,
            GI + (500 << 20),
            16 * GI
        )
    );
}

/// The kubelet's allocation manager names memory whenever memory exceeds allocatable, cpu only
/// otherwise; cpu in millicores, memory in bytes.
#[test]
fn infeasible_names_memory_when_memory_is_short() {
    let cases = [
        (9000, GI, "cpu, requested: 9000, capacity: 8000".to_string()),
        (
            4000,
            17 * GI,
            format!("memory, requested: {}, capacity: {}", 17 * GI, 16 * GI),
        ),
        (
            9000,
            17 * GI,
            format!("memory, requested: {}, capacity: {}", 17 * GI, 16 * GI),
        ),
    ];
    for (cpu, mem, tail) in cases {
        let mut s = seed();
        let r = resize(&mut s, "high-priority-pod", cpu, mem);
        let d = decide(&s, &r).unwrap();
        assert_eq!(
            (d.outcome, d.message),
            (
                Outcome::Infeasible,
                format!("Node didn't have enough capacity: {tail}")
            ),
            "cpu {cpu}, memory {mem}"
        );
    }
}

#[test]
fn node_policy_and_preemption_policy_never() {
    let mut s = seed();
    let r = resize(&mut s, "high-priority-pod", 6000, GI);
    let mut disabled = s.clone();
    disabled.node.disable_resize_preemption =
        vec!["cluster-autoscaler.kubernetes.io/disable-preemption".into()];
    let d = decide(&disabled, &r).unwrap();
    assert_eq!(
        (d.outcome, d.message.as_str()),
        (Outcome::Disabled, "node had resize preemption disabled")
    );

    let mut never = s.clone();
    never.pods[2].preemption_policy = PreemptionPolicy::Never;
    let d = decide(&never, &r).unwrap();
    assert_eq!(
        (d.outcome, d.message.as_str()),
        (
            Outcome::NotEligible,
            "not eligible due to preemptionPolicy=Never."
        )
    );
}

/// Upstream's order: PostFilter's `PodEligibleToPreemptOthers` answers before the node is looked
/// at, and DeferredPodScheduling.Filter fails a disabled node whether or not the resize fits.
#[test]
fn never_is_reported_before_a_disabled_node_and_a_disabled_node_even_when_the_resize_fits() {
    let disable = vec!["example.com/batch".to_string()];
    let outcome = |never: bool, disabled: bool, cpu: i64| {
        let mut s = seed();
        if never {
            s.pods[2].preemption_policy = PreemptionPolicy::Never;
        }
        if disabled {
            s.node.disable_resize_preemption = disable.clone();
        }
        let r = resize(&mut s, "high-priority-pod", cpu, GI);
        let d = decide(&s, &r).unwrap();
        assert!(d.victims.is_empty() || d.outcome == Outcome::Preempt);
        (d.outcome, d.message)
    };
    let never = (
        Outcome::NotEligible,
        "not eligible due to preemptionPolicy=Never.".to_string(),
    );
    let disabled = (
        Outcome::Disabled,
        "node had resize preemption disabled".to_string(),
    );
    // (Never, disabled node, new cpu) → what is reported. 6000 needs an eviction, 4050 fits.
    assert_eq!(outcome(true, true, 6000), never);
    assert_eq!(outcome(true, true, 4050), never);
    assert_eq!(outcome(false, true, 6000), disabled);
    assert_eq!(outcome(false, true, 4050), disabled);
    assert_eq!(outcome(true, false, 6000), never);
    assert_eq!(outcome(true, false, 4050).0, Outcome::Fits);
    assert_eq!(outcome(false, false, 4050).0, Outcome::Fits);
    // Infeasible still comes first: the kubelet never defers it, so the scheduler never sees it.
    assert_eq!(outcome(true, true, 9000).0, Outcome::Infeasible);
}

#[test]
fn a_resize_that_fits_on_a_disabled_node_still_holds_its_room_in_the_cycle() {
    // a (900) 2→3 fits as it is; b (500) 2→3 would then not fit. On a disabled node both are
    // reported `disabled`, but a's room is taken all the same (the kubelet actuates a), so b's
    // decision counts a at 3 CPU.
    let mut s = state(
        6000,
        16 * GI,
        vec![
            pod("a", 900, 2000, GI),
            pod("b", 500, 2000, GI),
            pod("z", 2000, 1000, GI),
        ],
    );
    s.node.disable_resize_preemption = vec!["example.com/batch".into()];
    let resizes = vec![resize(&mut s, "b", 3000, GI), resize(&mut s, "a", 3000, GI)];
    let served = decide_all(&s, &resizes).unwrap();
    let used: Vec<(&str, Outcome, i64)> = served
        .iter()
        .map(|r| {
            let d = &r.decision;
            (resizes[r.resize].name.as_str(), d.outcome, d.used.cpu_millis)
        })
        .collect();
    assert_eq!(
        used,
        [("a", Outcome::Disabled, 3000), ("b", Outcome::Disabled, 4000)]
    );
}

#[test]
fn reservations_count_as_used() {
    let mut s = seed();
    s.reserved = Resources::new(2000, 0);
    let r = resize(&mut s, "high-priority-pod", 5000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(
        d.message,
        "Node didn't have enough resource: cpu, requested: 5000, used: 5950, capacity: 8000"
    );
    assert_eq!(d.outcome, Outcome::Preempt);
    // 950 + 2000 reserved + 6000 > 8000 even with the low-priority pod gone.
    let r = resize(&mut s, "high-priority-pod", 6000, GI);
    assert_eq!(decide(&s, &r).unwrap().outcome, Outcome::Deferred);
}

#[test]
fn unknown_pod_is_an_error() {
    let s = seed();
    let r = ResizeRequest {
        namespace: "default".into(),
        name: "nope".into(),
        ..Default::default()
    };
    assert!(matches!(decide(&s, &r), Err(DecideError::UnknownPod { .. })));
}

// ---- cases after the scheduler's default_preemption_test.go ----

#[test]
fn pods_of_equal_or_higher_priority_are_never_preempted() {
    // "a pod that would fit on the node, but other pods running are higher priority" → no preemption.
    let mut s = state(
        4000,
        8 * GI,
        vec![
            pod("p", 100, 1000, GI),
            pod("same", 100, 2000, GI),
            pod("higher", 200, 1000, GI),
        ],
    );
    let r = resize(&mut s, "p", 2000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Deferred);
    assert!(d.victims.is_empty());
}

#[test]
fn medium_priority_pod_is_preempted_but_small_lower_priority_one_stays() {
    // Reprieve goes from the most important down: mid (big) cannot be kept, low (small) can.
    let mut s = state(
        6000,
        8 * GI,
        vec![
            pod("p", 1000, 1000, GI),
            pod("mid", 500, 3000, GI),
            pod("low", 100, 1000, GI),
        ],
    );
    let r = resize(&mut s, "p", 4000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(names(&d), ["mid"]);
}

#[test]
fn all_lower_priority_pods_go_when_needed() {
    let mut s = state(
        4000,
        8 * GI,
        vec![
            pod("p", 1000, 1000, GI),
            pod("a", 10, 1000, GI),
            pod("b", 20, 1000, GI),
            pod("c", 30, 1000, GI),
        ],
    );
    let r = resize(&mut s, "p", 4000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(names(&d), ["c", "b", "a"]);
}

#[test]
fn among_equal_priority_the_earlier_started_is_reprieved() {
    let mut late = pod("late", 100, 1500, GI);
    late.start_time = ts(600);
    let mut unstarted = pod("unstarted", 100, 1500, GI);
    unstarted.start_time = None;
    let mut s = state(
        6000,
        8 * GI,
        vec![
            pod("p", 1000, 1000, GI),
            late,
            pod("early", 100, 1500, GI),
            unstarted,
        ],
    );
    let r = resize(&mut s, "p", 3500, GI);
    let d = decide(&s, &r).unwrap();
    // Room to keep one of the three: the earliest stays; the later and the not-started go.
    assert_eq!(names(&d), ["late", "unstarted"]);
}

fn with_pdb(mut s: NodeState, allowed: i32, members: &[&str]) -> NodeState {
    let index = s.pdbs.len();
    s.pdbs.push(PdbInput {
        namespace: "default".into(),
        name: format!("pdb-{index}"),
        disruptions_allowed: allowed,
    });
    for pod in &mut s.pods {
        if members.contains(&pod.name.as_str()) {
            pod.pdbs.push(index);
        }
    }
    s
}

#[test]
fn pdb_violating_pods_are_reprieved_first() {
    // Two equal candidates, room to keep one: the protected one stays although it is less important.
    let mut older = pod("older", 100, 2000, GI);
    older.start_time = ts(-60);
    let s = state(
        5000,
        8 * GI,
        vec![pod("p", 1000, 1000, GI), older, pod("protected", 100, 2000, GI)],
    );
    let mut s = with_pdb(s, 0, &["protected"]);
    let r = resize(&mut s, "p", 3000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(names(&d), ["older"]);
    assert_eq!(d.pdb_violations, 0);

    // Without the PDB the less important (later) one would go.
    let mut s = state(
        5000,
        8 * GI,
        vec![
            pod("p", 1000, 1000, GI),
            pod("older", 100, 2000, GI),
            pod("protected", 100, 2000, GI),
        ],
    );
    s.pods[1].start_time = ts(-60);
    let r = resize(&mut s, "p", 3000, GI);
    assert_eq!(names(&decide(&s, &r).unwrap()), ["protected"]);
}

#[test]
fn pdb_is_violated_only_when_no_choice_allows_otherwise() {
    let s = state(
        3000,
        8 * GI,
        vec![pod("p", 1000, 1000, GI), pod("protected", 100, 2000, GI)],
    );
    let mut s = with_pdb(s, 0, &["protected"]);
    let r = resize(&mut s, "p", 3000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(names(&d), ["protected"]);
    assert!(d.victims[0].violates_pdb);
    assert_eq!(d.pdb_violations, 1);
}

#[test]
fn pdb_budget_counts_down_across_candidates() {
    // disruptionsAllowed 1 shared by a and b: the first in importance order uses it up.
    let mut a = pod("a", 200, 1000, GI);
    a.start_time = ts(-10);
    let s = state(
        3000,
        8 * GI,
        vec![pod("p", 1000, 1000, GI), a, pod("b", 100, 1000, GI)],
    );
    let mut s = with_pdb(s, 1, &["a", "b"]);
    let r = resize(&mut s, "p", 3000, GI);
    let d = decide(&s, &r).unwrap();
    let flags: Vec<(&str, bool)> = d
        .victims
        .iter()
        .map(|v| (v.name.as_str(), v.violates_pdb))
        .collect();
    // Victims in priority order high→low after mixing violating and non-violating.
    assert_eq!(flags, [("a", false), ("b", true)]);
    assert_eq!(d.pdb_violations, 1);
}

#[test]
fn eviction_that_cannot_make_room_evicts_nobody() {
    let mut s = state(
        4000,
        8 * GI,
        vec![
            pod("p", 1000, 1000, GI),
            pod("big-high", 2000, 2500, GI),
            pod("low", 1, 500, GI),
        ],
    );
    let r = resize(&mut s, "p", 2000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Deferred);
    assert!(d.victims.is_empty());
}

// ---- several resizes on one node ----

#[test]
fn kubelet_retry_order_table() {
    let mut burstable = pod("burstable", 500, 1000, GI);
    burstable.qos = Some(QosClass::Burstable);
    let mut s = state(
        100_000,
        64 * GI,
        vec![
            pod("shrink", 1, 2000, GI),
            pod("high", 900, 1000, GI),
            burstable,
            pod("guaranteed", 500, 1000, GI),
            pod("old", 500, 1000, GI),
        ],
    );
    let mut resizes = vec![
        resize(&mut s, "burstable", 2000, GI),
        resize(&mut s, "guaranteed", 2000, GI),
        resize(&mut s, "high", 2000, GI),
        resize(&mut s, "old", 2000, GI),
    ];
    // A decrease: admitted 2000, requested 1000.
    resizes.push(ResizeRequest {
        namespace: "default".into(),
        name: "shrink".into(),
        requested: Resources::new(2000, GI),
        admitted: Resources::new(2000, GI),
        ..Default::default()
    });
    resizes[1].pending_since = ts(100);
    resizes[3].pending_since = ts(50);
    let order: Vec<&str> = kubelet_retry_order(&s, &resizes)
        .iter()
        .map(|&i| resizes[i].name.as_str())
        .collect();
    assert_eq!(order, ["shrink", "high", "old", "guaranteed", "burstable"]);
}

#[test]
fn two_resizes_do_not_share_freed_room() {
    // 8 CPU, full: a (900) 2→4, b (500) 2→4, victim v (10) 3, z (2000) 1. Evicting v frees 3 CPU:
    // enough for one of the two increases (2 each), not both.
    let mut s = state(
        8000,
        16 * GI,
        vec![
            pod("a", 900, 2000, GI),
            pod("b", 500, 2000, GI),
            pod("v", 10, 3000, GI),
            pod("z", 2000, 1000, GI),
        ],
    );
    let resizes = vec![resize(&mut s, "b", 4000, GI), resize(&mut s, "a", 4000, GI)];
    let served = decide_all(&s, &resizes).unwrap();
    let outcomes: Vec<(&str, Outcome)> = served
        .iter()
        .map(|r| (resizes[r.resize].name.as_str(), r.decision.outcome))
        .collect();
    // a is served first (higher priority) and takes v's room; b then sees a's 4 CPU as used
    // (and v gone): 4000 (a) + 1000 (z).
    assert_eq!(outcomes, [("a", Outcome::Preempt), ("b", Outcome::Deferred)]);
    assert_eq!(names(&served[0].decision), ["v"]);
    assert_eq!(
        served[1].decision.message,
        "Node didn't have enough resource: cpu, requested: 4000, used: 5000, capacity: 8000"
    );
}

#[test]
fn higher_priority_resize_can_evict_a_lower_priority_resizing_pod() {
    let mut s = state(
        8000,
        16 * GI,
        vec![
            pod("a", 900, 4000, GI),
            pod("b", 500, 2000, GI),
            pod("x", 950, 2000, GI),
        ],
    );
    let resizes = vec![resize(&mut s, "b", 3000, GI), resize(&mut s, "a", 6000, GI)];
    let served = decide_all(&s, &resizes).unwrap();
    assert_eq!(
        served.len(),
        1,
        "b was evicted by a and gets no decision: {served:?}"
    );
    assert_eq!(names(&served[0].decision), ["b"]);
}

// ---- Pods nominated to the node (upstream's RunFilterPluginsWithNominatedPods) ----

#[test]
fn nominated_pods_of_equal_or_higher_priority_count_as_placed_and_lower_ones_not_at_all() {
    let nominated = |name: &str, priority: i32, cpu: i64| PodInput {
        nominated: true,
        ..pod(name, priority, cpu, GI)
    };
    let mut s = state(
        8000,
        64 * GI,
        vec![
            pod("p", 100, 2000, GI),
            pod("low", 10, 2000, GI),
            pod("lower", 5, 1000, GI),
            // Equal priority: counts, in the fit check and in every reprieve.
            nominated("waiting", 100, 2000),
            // Lower priority: not on the node, so neither room nor a victim.
            nominated("later", 1, 3000),
        ],
    );
    let r = resize(&mut s, "p", 4000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    // 4000 + waiting 2000 + low 2000 fill the node: lower must go, low is reprieved.
    assert_eq!(names(&d), ["lower"]);
    assert_eq!(
        d.message,
        "Node didn't have enough resource: cpu, requested: 4000, used: 5000, capacity: 8000"
    );

    // Without the nominated Pod waiting, the resize fits as it is.
    let mut without = s.clone();
    without.pods.retain(|p| p.name != "waiting");
    assert_eq!(decide(&without, &r).unwrap().outcome, Outcome::Fits);

    // A nominated Pod of higher priority that leaves no room even with every victim gone: nobody.
    let mut blocked = s.clone();
    blocked.pods[3] = nominated("waiting", 1000, 4001);
    let d = decide(&blocked, &r).unwrap();
    assert_eq!((d.outcome, d.victims.len()), (Outcome::Deferred, 0));
}

#[test]
fn overlapping_pdbs_stop_at_the_first_one_violated() {
    // a is in pdb-0 (nothing allowed) and pdb-1 (one allowed); b in pdb-1 only; n in none.
    // Upstream: a violates at pdb-0 and does not count pdb-1 down, so b still fits pdb-1's
    // budget: violating [a], non-violating [n, b]. Reprieved in that order with room for two.
    let mut a = pod("a", 30, 1000, GI);
    a.start_time = ts(-30);
    let mut n = pod("n", 25, 1000, GI);
    n.start_time = ts(-20);
    let s = state(
        4000,
        64 * GI,
        vec![pod("p", 100, 1000, GI), a, n, pod("b", 20, 1000, GI)],
    );
    let s = with_pdb(s, 0, &["a"]);
    let mut s = with_pdb(s, 1, &["a", "b"]);
    let r = resize(&mut s, "p", 2000, GI);
    let d = decide(&s, &r).unwrap();
    let flags: Vec<(&str, bool)> = d
        .victims
        .iter()
        .map(|v| (v.name.as_str(), v.violates_pdb))
        .collect();
    // Counting pdb-1 down for a too would make b violating and reprieve it before n: n would go.
    assert_eq!(flags, [("b", false)]);
    assert_eq!(d.pdb_violations, 0);
}

// ---- terminating Pods ----

#[test]
fn a_terminating_lower_priority_pod_is_a_free_victim_and_no_running_pod_goes_for_its_room() {
    let terminating = |name: &str, priority: i32, cpu: i64| PodInput {
        terminating: true,
        ..pod(name, priority, cpu, GI)
    };
    // t (an earlier victim, still in its grace period) and r both 3 CPU; p 2 → 5 on 8.
    // Upstream's reprieve would keep t (more important) and evict r: a second eviction while t
    // is leaving anyway. headroom takes t, which costs no API call, and keeps r.
    let node = || {
        state(
            8000,
            64 * GI,
            vec![
                pod("p", 100, 2000, GI),
                terminating("t", 50, 3000),
                pod("r", 10, 3000, GI),
            ],
        )
    };
    let mut s = node();
    let r = resize(&mut s, "p", 5000, GI);
    let d = decide(&s, &r).unwrap();
    assert_eq!(d.outcome, Outcome::Preempt);
    let victims: Vec<(&str, bool)> = d
        .victims
        .iter()
        .map(|v| (v.name.as_str(), v.terminating))
        .collect();
    assert_eq!(victims, [("t", true)]);
    // It still holds its room until it is gone: the message counts it.
    assert_eq!(d.used.cpu_millis, 6000);

    // Not enough on its own: the running Pods needed on top go too, most important first.
    let mut s = node();
    let r = resize(&mut s, "p", 6000, GI);
    let d = decide(&s, &r).unwrap();
    let victims: Vec<(&str, bool)> = d
        .victims
        .iter()
        .map(|v| (v.name.as_str(), v.terminating))
        .collect();
    assert_eq!(victims, [("t", true), ("r", false)]);

    // A terminating Pod of equal or higher priority is no victim; it just holds its room.
    let mut high = node();
    high.pods[1].priority = 100;
    let r = resize(&mut high, "p", 6000, GI);
    let d = decide(&high, &r).unwrap();
    assert_eq!((d.outcome, d.victims.len()), (Outcome::Deferred, 0));

    // On a node with resize preemption off nobody is a victim, terminating or not.
    let mut off = node();
    off.node.disable_resize_preemption = vec!["example.com/batch".into()];
    let r = resize(&mut off, "p", 5000, GI);
    let d = decide(&off, &r).unwrap();
    assert_eq!((d.outcome, d.victims.len()), (Outcome::Disabled, 0));
}
