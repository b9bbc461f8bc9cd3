//! SIGKILL of headroomd and of headroom-shim at random moments, across a hundred Deferred resizes
//! with preemption on the real node (kubelet v1.37.2, containerd: `headroom_testkit::Node`).
//! Each resize is the tutorial's shape at a quarter (victim 750m, resizer 1 → 1500m on 2 CPUs);
//! once the patch returns, headroomd, the shim or both are SIGKILLed after a random delay within
//! the window in which the shim decides, reserves and evicts (0–300 ms), and started again at
//! once, as the kubelet restarts a DaemonSet's container. Every resize must then end whole: the
//! kubelet's `allocatedResources` and the container's cgroup both at the new size; the victim
//! evicted by exactly one Eviction API call (kube-apiserver's audit log) and nobody else; no
//! Pod left after each repetition; and once the last one is done, no reservation left in
//! headroomd's ledger beyond the shim's resize timeout (its TTL).
//!
//! `HEADROOM_KILL_RESIZES` sets the number of resizes (default 100); the random delays come from
//! `HEADROOM_KILL_SEED` (default: the clock), printed so a failing run can be repeated.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use headroom_testkit::{
    ControlPlane, LoggedChild, Node, beside,
    gate::{not_root, privileged},
    node::{NODE_NAME, start_cluster},
    repetitions::Repetitions,
};
use serde_json::Value;

mod real_cluster;

const NAMESPACE: &str = "kills";
/// The shim's `--resize-timeout-seconds`: also the TTL of every reservation it makes.
const RESIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// What is killed in one repetition.
#[derive(Clone, Copy, Debug)]
enum Victim {
    Headroomd,
    Shim,
    Both,
}

/// headroomd and the shim as the DaemonSet pairs them, each restartable on its own.
struct Agent<'a> {
    plane: &'a ControlPlane,
    kubeconfig: PathBuf,
    socket: PathBuf,
    headroomd: Option<LoggedChild>,
    shim: Option<LoggedChild>,
}

impl Agent<'_> {
    fn start_headroomd(&mut self) {
        let daemon = beside::start_headroomd(
            self.plane,
            &real_cluster::headroomd_binary(),
            &self.kubeconfig,
            NODE_NAME,
            &["--probes", "off"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.socket = daemon.socket;
        self.headroomd = Some(daemon.process);
    }

    fn start_shim(&mut self) {
        let shim = beside::start_paired_shim(
            self.plane,
            Path::new(env!("CARGO_BIN_EXE_headroom-shim")),
            &self.kubeconfig,
            NODE_NAME,
            &self.socket,
            beside::Preemption::Eviction,
            Some(RESIZE_TIMEOUT),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.shim = Some(shim);
    }

    /// SIGKILLs (dropping a `LoggedChild` kills and reaps it) and starts again.
    fn kill_and_restart(&mut self, which: Victim) {
        if matches!(which, Victim::Headroomd | Victim::Both) {
            drop(self.headroomd.take());
        }
        if matches!(which, Victim::Shim | Victim::Both) {
            drop(self.shim.take());
        }
        if self.headroomd.is_none() {
            self.start_headroomd();
        }
        if self.shim.is_none() {
            self.start_shim();
        }
    }

    /// Both logs' tails (the logs are appended across restarts).
    fn logs(&self) -> String {
        let tail = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            headroom_testkit::process::last_lines(&headroom_testkit::process::strip_ansi(&text), 40)
        };
        format!(
            "headroom-shim:\n{}\nheadroomd:\n{}",
            tail(&self.plane.dir().join("headroom-shim.log")),
            tail(&self.plane.dir().join("headroomd.log"))
        )
    }

    /// The reservations in headroomd's ledger now; `None` while it does not answer.
    fn reservations(&self) -> Option<Vec<Value>> {
        let headroomctl = real_cluster::headroomd_binary().with_file_name("headroomctl");
        beside::reservations(&headroomctl, &self.socket).ok()
    }
}

/// A small xorshift: the delays only need to be spread and repeatable from the printed seed.
struct Delays(u64);

impl Delays {
    fn next_millis(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// `name`'s `Preempted` Events.
fn preempted_events(plane: &ControlPlane, name: &str) -> Vec<Value> {
    plane
        .events_of(NAMESPACE, name)
        .into_iter()
        .filter(|e| e["reason"] == "Preempted")
        .collect()
}

/// How many times `name` was preempted: each Event counted as often as it was recorded (a
/// repeated Event is one object with a higher `count`).
fn preemptions(events: &[Value]) -> u64 {
    events
        .iter()
        .map(|e| e["count"].as_u64().unwrap_or(1).max(1))
        .sum()
}

/// Whether the kill came before the shim's eviction (its decision window) or after it (the
/// shim holding the reservation while the kubelet actuates).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum KilledWhen {
    BeforeTheEviction,
    AfterTheEviction,
}

/// One resize with one kill; when the kill landed, from the Preempted Event's `eventTime`
/// (microseconds, events.k8s.io) against the kill's wall-clock time.
fn one_resize(
    plane: &ControlPlane,
    node: &Node,
    repetitions: &Repetitions,
    agent: &mut Agent<'_>,
    rep: usize,
    which: Victim,
    delay: Duration,
) -> KilledWhen {
    let (victim, resizer) = (Repetitions::victim(rep), Repetitions::resizer(rep));
    let resizer_pod = repetitions
        .start(plane, rep)
        .unwrap_or_else(|e| panic!("{e}\nkubelet:\n{}", node.log_tail("kubelet", 20)));
    repetitions.patch(plane, rep).unwrap();
    thread::sleep(delay);
    let killed_at = jiff::Timestamp::now();
    agent.kill_and_restart(which);
    real_cluster::wait_for(
        &format!("rep {rep} ({which:?} killed {delay:?} after the patch): the resize actuated whole"),
        Duration::from_secs(90),
        || repetitions.resized(plane, rep, &resizer_pod).then_some(()),
        || {
            format!(
                "{}\n{:#?}\nkubelet:\n{}",
                agent.logs(),
                plane
                    .get_json("pod", NAMESPACE, &resizer)
                    .map(|p| p["status"].clone()),
                node.log_tail("kubelet", 20)
            )
        },
    );
    // The victim gone: any second eviction would have been made while it terminated.
    real_cluster::wait_for(
        &format!("rep {rep}: the victim gone"),
        Duration::from_secs(60),
        || plane.get_json("pod", NAMESPACE, &victim).is_none().then_some(()),
        || agent.logs(),
    );
    // Evictions as the API server answered them (its audit log): an Event can be lost with the
    // shim that was about to write it, an eviction cannot. A shim killed while its eviction was
    // in flight leaves a call the API server may have carried out and answered as failed (the
    // client gone: 5xx): such a call counts as possibly made.
    let all_evictions: Vec<_> = plane
        .eviction_calls()
        .into_iter()
        .filter(|call| call.namespace == NAMESPACE)
        .collect();
    let evictions: Vec<_> = all_evictions
        .iter()
        .filter(|call| call.code < 300)
        .cloned()
        .collect();
    let of = |name: &str| evictions.iter().filter(|call| call.name == name).count();
    let unanswered = all_evictions
        .iter()
        .filter(|call| call.name == victim && (call.code == 0 || call.code >= 500))
        .count();
    let victims_calls = || {
        plane
            .pod_calls()
            .into_iter()
            .filter(|call| call.namespace == NAMESPACE && call.name == victim)
            .collect::<Vec<_>>()
    };
    assert!(
        of(&victim) <= 1 && of(&victim) + unanswered >= 1,
        "rep {rep} ({which:?} killed after {delay:?}): the victim was evicted once: {} answered, {unanswered} possibly made; its calls: {:#?}\n{}",
        of(&victim),
        victims_calls(),
        agent.logs()
    );
    // Once an eviction of the victim went through, no further eviction call on it at all:
    // whatever its answer, a later one is a second eviction (a 5xx one may have been carried out
    // as well). Calls received before the successful one are earlier attempts that failed.
    let victim_evictions: Vec<_> = victims_calls()
        .into_iter()
        .filter(|call| call.subresource == "eviction")
        .collect();
    if let Some(went_through) = victim_evictions
        .iter()
        .filter(|call| (200..300).contains(&call.code))
        .map(|call| call.received)
        .min()
    {
        let later: Vec<_> = victim_evictions
            .iter()
            .filter(|call| call.received > went_through)
            .collect();
        assert!(
            later.is_empty(),
            "rep {rep} ({which:?} killed after {delay:?}): eviction calls on the victim after the one that went through: {later:#?}\n{}",
            agent.logs()
        );
    }
    assert_eq!(
        evictions
            .iter()
            .filter(|call| call.name.starts_with("resizer-"))
            .count(),
        0,
        "rep {rep}: a resizing Pod was evicted: {evictions:#?}\n{}",
        agent.logs()
    );
    let events = preempted_events(plane, &victim);
    assert!(
        preemptions(&events) <= 1,
        "rep {rep}: the victim's Preempted Event was recorded more than once: {events:#?}"
    );
    repetitions.remove(plane, rep).unwrap();
    // The Event's microsecond eventTime says when the eviction was made; without an Event (the
    // kill took the shim before it wrote one) the eviction came before the kill.
    let Some(event) = events.first() else {
        return KilledWhen::AfterTheEviction;
    };
    let evicted_at: jiff::Timestamp = event["eventTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the Preempted Event has an eventTime: {event:#}"));
    if evicted_at < killed_at {
        KilledWhen::AfterTheEviction
    } else {
        KilledWhen::BeforeTheEviction
    }
}

#[test]
fn sigkilled_headroomd_and_shim_at_random_moments_leave_every_resize_whole_and_every_victim_evicted_once() {
    if !privileged("a real kubelet and containerd on this host", not_root()) {
        return;
    }
    let resizes: usize = std::env::var("HEADROOM_KILL_RESIZES")
        .ok()
        .map_or(100, |n| n.parse().expect("HEADROOM_KILL_RESIZES is a number"));
    let seed: u64 = std::env::var("HEADROOM_KILL_SEED").ok().map_or_else(
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        },
        |s| s.parse().expect("HEADROOM_KILL_SEED is a number"),
    );
    println!("HEADROOM_KILL_SEED={seed} HEADROOM_KILL_RESIZES={resizes}");
    let (plane, node) = start_cluster(false).unwrap_or_else(|e| panic!("the real cluster must start: {e}"));
    let kubeconfig = beside::apply_rbac(&plane, &real_cluster::workspace()).unwrap();
    let repetitions = Repetitions::create(&plane, NAMESPACE).unwrap();
    let mut agent = Agent {
        plane: &plane,
        kubeconfig,
        socket: PathBuf::new(),
        headroomd: None,
        shim: None,
    };
    agent.start_headroomd();
    agent.start_shim();
    let mut delays = Delays(seed);
    let started = Instant::now();
    let mut when = std::collections::BTreeMap::<KilledWhen, usize>::new();
    for rep in 0..resizes {
        let which = [Victim::Headroomd, Victim::Shim, Victim::Both][rep % 3];
        // Half in the decision window (the shim evicts some 20 ms after the patch), half while
        // it holds the reservation for the kubelet (actuated at some 200 ms).
        let delay = Duration::from_millis(if rep % 2 == 0 {
            delays.next_millis(50)
        } else {
            50 + delays.next_millis(350)
        });
        *when
            .entry(one_resize(
                &plane,
                &node,
                &repetitions,
                &mut agent,
                rep,
                which,
                delay,
            ))
            .or_default() += 1;
    }
    println!(
        "{resizes} resizes with a SIGKILL each, all whole, in {:.0?}; kills by when they landed: {when:?}",
        started.elapsed()
    );
    if resizes >= 10 {
        assert!(
            when.len() == 2,
            "the kills landed on both sides of the eviction: {when:?}"
        );
    }
    // Reservations of a killed shim may stay until their TTL, not beyond.
    real_cluster::wait_for(
        "headroomd's ledger empty",
        RESIZE_TIMEOUT + Duration::from_secs(10),
        || agent.reservations().filter(Vec::is_empty).map(|_| ()),
        || format!("reservations: {:#?}\n{}", agent.reservations(), agent.logs()),
    );
}
