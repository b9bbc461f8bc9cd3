//! The protocol against a fake backend that records every call.
#![allow(clippy::unwrap_used)]

use headroom_node_model::{QosClass, Resources};

use super::*;
use crate::decide::{NodeInput, Outcome, PodInput};

const GI: i64 = 1 << 30;

fn pod(name: &str, priority: i32, cpu: i64) -> PodInput {
    PodInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        priority,
        requests: Resources::new(cpu, GI),
        qos: Some(QosClass::Guaranteed),
        ..PodInput::default()
    }
}

/// An 8-CPU node with the seed's Pods: low (priority 1000, 3 CPU) and high (priority 10000,
/// 4 CPU), plus `extra`.
fn state(extra: Vec<PodInput>) -> NodeState {
    let mut pods = vec![pod("low", 1000, 3000), pod("high", 10000, 4000)];
    pods.extend(extra);
    NodeState {
        node: NodeInput {
            name: "node-a".into(),
            allocatable: Resources::new(8000, 16 * GI),
            ..NodeInput::default()
        },
        pods,
        ..NodeState::default()
    }
}

fn resize(name: &str, priority: i32, from: i64, to: i64, generation: Option<i64>) -> Resize {
    Resize {
        key: format!("default/{name}"),
        uid: format!("uid-{name}"),
        generation: super::generation(generation),
        priority,
        request: ResizeRequest {
            namespace: "default".into(),
            name: name.into(),
            requested: Resources::new(to, GI),
            admitted: Resources::new(from, GI),
            ..ResizeRequest::default()
        },
    }
}

#[derive(Default)]
struct Fake {
    listing: Option<Listing>,
    calls: Vec<String>,
    hold: Option<String>,
    refuse_reserve: Option<String>,
    fail_evict: Option<String>,
    fail_mark: Option<String>,
    fail_shrink: Option<String>,
    /// Resizes pending at the time of the arrival check (beyond those listed).
    arrived: Vec<Pending>,
    reservations: Vec<Reservation>,
}

impl Backend for Fake {
    type Error = DecideError;
    type Followed = String;

    async fn list(&mut self) -> Result<Option<Listing>, DecideError> {
        self.calls.push("list".into());
        Ok(self.listing.clone())
    }

    fn decided(&mut self, resize: &Resize, decision: &Decision, _at: Instant) {
        self.calls
            .push(format!("decided {} {}", resize.key, decision.outcome.as_str()));
    }

    async fn may_preempt(&mut self, _resize: &Resize, _decision: &Decision) -> Result<(), String> {
        match &self.hold {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    async fn shrink(&mut self, _resize: &Resize, decision: &Decision) -> Result<(), String> {
        let shrunk: Vec<String> = decision
            .shrinks
            .iter()
            .map(|s| format!("{}:{}", s.name, s.to.cpu_millis))
            .collect();
        self.calls.push(format!("shrink {}", shrunk.join(",")));
        match &self.fail_shrink {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    async fn reserve(&mut self, _resize: &Resize, reservation: &Reservation) -> Result<(), String> {
        self.calls.push(format!("reserve {}", reservation.id));
        self.reservations.push(reservation.clone());
        match &self.refuse_reserve {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    async fn release(&mut self, reservation: &Reservation) {
        self.calls.push(format!("release {}", reservation.id));
    }

    fn pending(&self) -> Vec<Pending> {
        let listed = self.listing.iter().flat_map(|l| &l.resizes).map(|r| Pending {
            identity: r.identity().to_string(),
            key: r.key.clone(),
            priority: r.priority,
        });
        listed.chain(self.arrived.iter().cloned()).collect()
    }

    fn replanned(&mut self, resize: &Resize, first: &str) {
        self.calls.push(format!("replanned {} for {first}", resize.key));
    }

    /// Every victim marked, unless `fail_mark` says why not.
    fn mark_victims(&self, decision: &Decision) -> impl Future<Output = Marked> + Send + 'static {
        let marked = Marked {
            marked: decision.victims.iter().map(|v| v.uid.clone()).collect(),
            failed: self.fail_mark.clone(),
            ..Marked::default()
        };
        async move { marked }
    }

    async fn unmark_victims(&mut self, _decision: &Decision, marked: &Marked) {
        let uids: Vec<&str> = marked.marked.iter().map(String::as_str).collect();
        self.calls.push(format!("unmark {}", uids.join(",")));
    }

    async fn evict(
        &mut self,
        _resize: &Resize,
        decision: &Decision,
        _r: &Reservation,
        marked: Marked,
    ) -> Result<(), String> {
        let victims: Vec<&str> = decision.victims.iter().map(|v| v.name.as_str()).collect();
        self.calls.push(format!("evict {}", victims.join(",")));
        if let Some(why) = marked.failed {
            return Err(why);
        }
        match &self.fail_evict {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    async fn follow(&mut self, resize: &Resize, reservation: Reservation) -> String {
        self.calls
            .push(format!("follow {} {}", resize.key, reservation.id));
        format!("followed {}", resize.key)
    }
}

fn fake(state: NodeState, resizes: Vec<Resize>) -> Fake {
    Fake {
        listing: Some(Listing { state, resizes }),
        ..Fake::default()
    }
}

async fn run(backend: &mut Fake) -> Vec<Served<String>> {
    cycle(backend).await.unwrap()
}

#[tokio::test]
async fn the_seeds_resize_reserves_evicts_then_follows() {
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, Some(3))]);
    let served = run(&mut backend).await;
    assert_eq!(
        backend.calls,
        [
            "list",
            "decided default/high preempt",
            "reserve uid-high:3",
            "evict low",
            "follow default/high uid-high:3",
        ]
    );
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].step, Step::Evicted("followed default/high".into()));
    let r = &backend.reservations[0];
    assert_eq!(r.amount, Resources::new(2000, 0));
    // allocatable − (used by the others − freed) − admitted: 8 − (3 − 3) − 4 CPU, 16 − (1 − 1) − 1 GiB.
    assert_eq!(r.available, Resources::new(4000, 15 * GI));
    assert_eq!(r.victims, ["default/low"]);
    assert_eq!(r.releasing_pod_uids, ["uid-low"]);
}

#[tokio::test]
async fn a_missing_generation_is_the_api_servers_default_of_one() {
    assert_eq!(generation(None), 1);
    assert_eq!(generation(Some(7)), 7);
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, None)]);
    run(&mut backend).await;
    assert_eq!(backend.reservations[0].id, "uid-high:1");
}

#[tokio::test]
async fn a_resize_that_fits_or_cannot_fit_reserves_and_evicts_nothing() {
    for (to, want) in [(5000, Outcome::Fits), (9000, Outcome::Infeasible)] {
        let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, to, None)]);
        let served = run(&mut backend).await;
        assert_eq!(served[0].decision.outcome, want, "to {to}");
        assert_eq!(served[0].step, Step::NotPreempting);
        assert_eq!(backend.calls.len(), 2, "{:?}", backend.calls);
    }
}

#[tokio::test]
async fn held_back_preemption_reserves_nothing() {
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, None)]);
    backend.hold = Some("dry run".into());
    let served = run(&mut backend).await;
    assert_eq!(served[0].step, Step::Held("dry run".into()));
    assert!(backend.reservations.is_empty());
}

#[tokio::test]
async fn a_refused_reservation_evicts_nobody() {
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, None)]);
    backend.refuse_reserve = Some("RESOURCE_EXHAUSTED".into());
    let served = run(&mut backend).await;
    assert_eq!(served[0].step, Step::NotReserved("RESOURCE_EXHAUSTED".into()));
    assert!(
        !backend.calls.iter().any(|c| c.starts_with("evict")),
        "{:?}",
        backend.calls
    );
    // The victim marked while the room was being reserved carries no mark afterwards.
    assert_eq!(backend.calls.last().unwrap(), "unmark uid-low");
}

#[tokio::test]
async fn a_failed_eviction_gives_the_room_back() {
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, None)]);
    backend.fail_evict = Some("PDB".into());
    let served = run(&mut backend).await;
    assert_eq!(served[0].step, Step::NotEvicted("PDB".into()));
    assert_eq!(backend.calls.last().unwrap(), "release uid-high:1");
    assert!(!backend.calls.iter().any(|c| c.starts_with("follow")));
}

#[tokio::test]
async fn a_victim_that_could_not_be_marked_is_not_evicted_and_the_room_goes_back() {
    let mut backend = fake(state(vec![]), vec![resize("high", 10000, 4000, 6000, None)]);
    backend.fail_mark = Some("could not preempt default/low: 403".into());
    let served = run(&mut backend).await;
    assert_eq!(
        served[0].step,
        Step::NotEvicted("could not preempt default/low: 403".into())
    );
    assert_eq!(backend.calls.last().unwrap(), "release uid-high:1");
    assert!(!backend.calls.iter().any(|c| c.starts_with("follow")));
}

#[tokio::test]
async fn a_higher_priority_arrival_replans_before_any_eviction_and_ends_the_cycle() {
    let mut backend = fake(
        state(vec![pod("mid", 5000, 500)]),
        vec![
            resize("high", 10000, 4000, 6000, None),
            resize("mid", 5000, 500, 600, None),
        ],
    );
    backend.arrived = vec![
        Pending {
            identity: "uid-lower".into(),
            key: "default/lower".into(),
            priority: 9000,
        },
        Pending {
            identity: "uid-top".into(),
            key: "default/top".into(),
            priority: 20000,
        },
    ];
    let served = run(&mut backend).await;
    assert_eq!(served.len(), 1, "the cycle ends at the re-plan: {served:?}");
    assert_eq!(
        served[0].step,
        Step::Replanned {
            by: "default/top".into()
        }
    );
    assert!(
        !backend.calls.iter().any(|c| c.starts_with("evict")),
        "{:?}",
        backend.calls
    );
    assert!(backend.calls.contains(&"release uid-high:1".to_string()));
    assert!(
        backend.calls.iter().any(|c| c.starts_with("unmark uid-")),
        "{:?}",
        backend.calls
    );
    // An arrival of lower priority than the resizer, or one this cycle decided, re-plans nothing.
    backend.arrived.retain(|p| p.priority < 10000);
    backend.calls.clear();
    let served = run(&mut backend).await;
    assert!(matches!(served[0].step, Step::Evicted(_)), "{served:?}");
}

#[tokio::test]
async fn competing_resizes_are_served_in_the_kubelets_order_without_sharing_room() {
    // Two Deferred resizes: the listing order is the reverse of the kubelet's (priority first).
    let mut backend = fake(
        state(vec![pod("mid", 5000, 1000)]),
        vec![
            resize("mid", 5000, 1000, 3000, None),
            resize("high", 10000, 4000, 6000, None),
        ],
    );
    let served = run(&mut backend).await;
    let order: Vec<&str> = served.iter().map(|s| s.resize.key.as_str()).collect();
    assert_eq!(order, ["default/high", "default/mid"]);
    // high (4 → 6 CPU on a full 8-CPU node) evicts low only; mid (1 → 3 CPU) then finds the room
    // high holds taken (6 + 3 > 8), and the only Pod below it is gone already.
    assert_eq!(served[0].decision.outcome, Outcome::Preempt);
    assert_eq!(served[0].decision.victims[0].name, "low");
    assert_eq!(
        served[1].decision.outcome,
        Outcome::Deferred,
        "{:?}",
        served[1].decision
    );
    assert_eq!(
        backend.calls.iter().filter(|c| c.starts_with("reserve")).count(),
        1,
        "{:?}",
        backend.calls
    );
}

#[tokio::test]
async fn nothing_listed_is_an_empty_cycle() {
    let mut backend = Fake::default();
    assert!(run(&mut backend).await.is_empty());
    assert_eq!(backend.calls, ["list"]);
}

/// The seed's node with `low` offering to give way down to 1 CPU, using 200m and not throttled.
fn state_with_low_giving_way() -> NodeState {
    let mut s = state(vec![]);
    s.pods[0].give_way = crate::give_way::GiveWay::Offered(crate::give_way::Offer {
        cpu_floor_millis: Some(1000),
        memory_floor_bytes: None,
    });
    s.pods[0].live = crate::give_way::LiveFigures {
        cpu_usage_millis: Some(200),
        cpu_throttled_permille: Some(0),
        memory_working_set_bytes: Some(100 << 20),
    };
    s
}

#[tokio::test]
async fn a_shrink_is_actuated_before_the_room_is_reserved_and_nobody_is_evicted() {
    let mut backend = fake(
        state_with_low_giving_way(),
        vec![resize("high", 10000, 4000, 6000, Some(2))],
    );
    let served = run(&mut backend).await;
    assert_eq!(
        backend.calls,
        [
            "list",
            "decided default/high shrink",
            "shrink low:1000",
            "reserve uid-high:2",
            "follow default/high uid-high:2",
        ]
    );
    assert_eq!(served[0].step, Step::Evicted("followed default/high".into()));
    let r = &backend.reservations[0];
    // 8 − (3 − 2 freed) − 4 CPU admitted; 16 − 1 − 1 GiB.
    assert_eq!(r.available, Resources::new(3000, 14 * GI));
    assert!(r.victims.is_empty() && r.releasing_pod_uids.is_empty());
}

#[tokio::test]
async fn a_failed_shrink_reserves_and_evicts_nothing() {
    let mut backend = fake(
        state_with_low_giving_way(),
        vec![resize("high", 10000, 4000, 6000, Some(2))],
    );
    backend.fail_shrink = Some("working set grew".into());
    let served = run(&mut backend).await;
    assert_eq!(served[0].step, Step::NotShrunk("working set grew".into()));
    assert!(
        !backend
            .calls
            .iter()
            .any(|c| c.starts_with("reserve") || c.starts_with("evict")),
        "{:?}",
        backend.calls
    );
}
