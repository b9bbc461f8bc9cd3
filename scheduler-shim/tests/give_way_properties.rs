//! Property tests of shrink before evict: every plan frees what it claims, shrinks nobody below
//! its floor or its live needs, touches only Pods that offered, and never evicts more than
//! eviction-only (upstream's own choice) would.
#![allow(clippy::unwrap_used)]

use headroom_node_model::Resources;
use headroom_shim::decide::{NodeInput, NodeState, Outcome, PdbInput, PodInput, ResizeRequest, decide};
use headroom_shim::give_way::{GiveWay, LiveFigures, Offer, Policy};
use proptest::prelude::*;

const MI: i64 = 1 << 20;

fn arb_give_way() -> impl Strategy<Value = (GiveWay, LiveFigures)> {
    let offer = (prop::option::of(1i64..4000), prop::option::of(1i64..4096)).prop_map(|(cpu, mem)| Offer {
        cpu_floor_millis: cpu,
        memory_floor_bytes: mem.map(|m| m * MI),
    });
    let live = (
        prop::option::of(0i64..4000),
        prop::option::of(0u32..400),
        prop::option::of(0i64..4096),
    )
        .prop_map(|(usage, throttled, ws)| LiveFigures {
            cpu_usage_millis: usage,
            cpu_throttled_permille: throttled,
            memory_working_set_bytes: ws.map(|w| w * MI),
        });
    (
        prop_oneof![
            2 => Just(GiveWay::NotOffered),
            5 => offer.prop_map(GiveWay::Offered),
            1 => Just(GiveWay::NamespaceOff),
            1 => Just(GiveWay::Invalid("bad".into())),
        ],
        live,
    )
}

fn arb_pod() -> impl Strategy<Value = PodInput> {
    (
        0i32..6,
        0i64..4000,
        0i64..4096,
        prop::collection::vec(0usize..2, 0..2),
        arb_give_way(),
    )
        .prop_map(|(priority, cpu, mem, pdbs, (give_way, live))| PodInput {
            namespace: "default".into(),
            priority,
            requests: Resources::new(cpu, mem * MI),
            pdbs,
            give_way,
            live,
            ..Default::default()
        })
}

#[derive(Debug, Clone)]
struct Scenario {
    state: NodeState,
    resize: ResizeRequest,
}

fn arb_scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(arb_pod(), 1..14),
        1000i64..16_000,
        1024i64..24_576,
        0i64..6000,
        0i64..4096,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(mut pods, cpu, mem, extra_cpu, extra_mem, protective, disabled)| {
                for (i, pod) in pods.iter_mut().enumerate() {
                    pod.name = format!("pod-{i}");
                    pod.uid = format!("uid-{i}");
                }
                pods[0].give_way = GiveWay::NotOffered;
                let admitted = pods[0].requests;
                let requested = admitted
                    .checked_add(Resources::new(extra_cpu, extra_mem * MI))
                    .unwrap();
                pods[0].requests = requested;
                let pdbs = (0..2)
                    .map(|i| PdbInput {
                        namespace: "default".into(),
                        name: format!("pdb-{i}"),
                        disruptions_allowed: if protective && i == 0 { 0 } else { 1000 },
                    })
                    .collect();
                let state = NodeState {
                    node: NodeInput {
                        name: "n".into(),
                        allocatable: Resources::new(cpu, mem * MI),
                        disable_resize_preemption: if disabled { vec!["ops".into()] } else { vec![] },
                    },
                    pods,
                    pdbs,
                    ..Default::default()
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

fn offer_of(pod: &PodInput) -> Option<Offer> {
    match pod.give_way {
        GiveWay::Offered(o) => Some(o),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn plans_free_what_they_claim_and_respect_every_bound(s in arb_scenario()) {
        let Scenario { state, resize } = s;
        let policy = state.give_way;
        let d = decide(&state, &resize).unwrap();
        let me = &state.pods[0];
        let allocatable = state.node.allocatable;

        prop_assert_eq!(d.outcome == Outcome::Shrink, d.victims.is_empty() && !d.shrinks.is_empty());
        if !d.makes_room() {
            prop_assert!(d.shrinks.is_empty() && d.victims.is_empty());
        }
        if !state.node.disable_resize_preemption.is_empty() {
            prop_assert!(d.victims.is_empty(), "evicted on a node with resize preemption off");
        }

        for s in &d.shrinks {
            let pod = state.pods.iter().find(|p| p.name == s.name).unwrap();
            let offer = offer_of(pod);
            prop_assert!(offer.is_some(), "{} shrunk without offering", s.name);
            let offer = offer.unwrap();
            prop_assert!(pod.priority < me.priority);
            prop_assert_eq!(s.from, pod.requests);
            prop_assert!(s.to.fits_within(&s.from) && s.to != s.from);
            prop_assert!(!d.victims.iter().any(|v| v.name == s.name), "{} both shrunk and evicted", s.name);
            if s.to.cpu_millis < s.from.cpu_millis {
                prop_assert!(s.to.cpu_millis >= offer.cpu_floor_millis.unwrap());
                let usage = pod.live.cpu_usage_millis.unwrap();
                prop_assert!(s.to.cpu_millis >= usage);
                prop_assert!(pod.live.cpu_throttled_permille.unwrap() <= policy.max_throttled_permille);
            }
            if s.to.memory_bytes < s.from.memory_bytes {
                prop_assert!(s.to.memory_bytes >= offer.memory_floor_bytes.unwrap());
                let ws = pod.live.memory_working_set_bytes.unwrap();
                prop_assert!(s.to.memory_bytes >= ws + policy.memory_margin_min_bytes);
            }
        }

        if d.makes_room() {
            // What stays (others at their new size, victims gone) plus the resize fits.
            let mut after = state.reserved.checked_add(resize.requested).unwrap();
            for pod in state.pods.iter().skip(1) {
                if d.victims.iter().any(|v| v.name == pod.name) {
                    continue;
                }
                let size = d.shrinks.iter().find(|s| s.name == pod.name).map_or(pod.requests, |s| s.to);
                after = after.checked_add(size).unwrap();
            }
            prop_assert!(after.fits_within(&allocatable), "claims room it does not make: {after} > {allocatable}");
        }

        // Never worse than eviction-only in evictions, and it makes room whenever that does.
        let mut upstream = state.clone();
        upstream.give_way = Policy::OFF;
        let e = decide(&upstream, &resize).unwrap();
        prop_assert!(d.victims.len() <= e.victims.len(), "{} victims against eviction-only's {}", d.victims.len(), e.victims.len());
        if e.makes_room() {
            prop_assert!(d.makes_room());
        }
        if !matches!(e.outcome, Outcome::Preempt | Outcome::Disabled) {
            prop_assert_eq!(d.outcome, e.outcome);
        }
    }
}
