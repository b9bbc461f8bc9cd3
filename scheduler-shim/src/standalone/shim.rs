//! The shim loop: every Deferred resize goes through the preemption protocol ([`preempt`]); on
//! `preempt` the extra room is reserved in headroomd's ledger, the victims are evicted as the
//! scheduler evicts them (`DisruptionTarget`, `Preempted`, the kubelet's `Killing`, SIGTERM,
//! SIGKILL after the grace period, cgroups removed), and the kubelet's retry on `pods_removed`
//! admits and actuates the resize. Each step's latency is recorded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use headroom_node_model::pod::CONDITION_RESIZE_PENDING;
use headroom_node_model::{ResizeState, resize_state};
use headroom_proto::v1 as pb;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::events::reasons::{KILLING, KUBELET, NORMAL, PREEMPTED, SCHEDULER};
use super::latency::{Step, StepLatencies};
use super::node::StandaloneNode;
use super::resize::{self, Admission};
use super::runtime::PodRuntime;
use super::store::Store;
use super::{DEFAULT_GRACE_PERIOD, StandaloneError};
use crate::decide::{Decision, Outcome};
use crate::give_way::{self, GiveWay};
use crate::preempt::{self, Listing, Pending, Reservation, Resize, Step as Progress};
use headroom_node_model::Resources;

/// Deferred resizes are retried at least this often (the kubelet's periodic retry is 30 s at
/// first; the shim is woken at once on every change anyway).
pub const RETRY_PERIOD: Duration = Duration::from_secs(5);

/// What one cycle did for one Deferred resize.
#[derive(Debug, Clone)]
pub struct Served {
    pub pod: String,
    pub decision: Decision,
    /// Set when victims were evicted and the resize went on to completion (or failed).
    pub latencies: Option<StepLatencies>,
    pub error: Option<String>,
}

/// Runs cycles until `shutdown` fires: on every wake-up and every [`RETRY_PERIOD`].
pub async fn run_loop(node: Arc<StandaloneNode>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut aftercare = tokio::time::interval(AFTERCARE_PERIOD);
    aftercare.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = node.wake.notified() => {}
            () = tokio::time::sleep(RETRY_PERIOD) => {}
            _ = aftercare.tick() => {
                watch_shrunk_pods(&node).await;
                continue;
            }
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if let Err(e) = run_cycle(&node).await {
            tracing::warn!(error = %e, "shim cycle failed");
        }
    }
}

/// The Deferred resizes this shim serves: Pods running, not being evicted, resize Deferred.
fn deferred_in(store: &Store) -> impl Iterator<Item = (&String, &super::store::StoredPod)> {
    store
        .pods
        .iter()
        .filter(|(_, p)| p.runtime.is_some() && !p.terminating && resize_state(&p.pod).is_deferred())
}

/// One pass over every Deferred resize: [`preempt::cycle`] on the standalone node.
pub async fn run_cycle(node: &StandaloneNode) -> Result<Vec<Served>, StandaloneError> {
    let mut cycle = StandaloneCycle {
        node,
        started: Instant::now(),
        requested_at: HashMap::new(),
        latencies: HashMap::new(),
    };
    let served = preempt::cycle(&mut cycle).await?;
    for s in &served {
        if matches!(s.step, Progress::NotPreempting) && s.decision.outcome == Outcome::Fits {
            retry_pending_resize(node, &s.resize.key).await;
        }
    }
    Ok(served
        .into_iter()
        .map(|s| {
            let (latencies, error) = match s.step {
                Progress::NotPreempting => {
                    tracing::info!(pod = %s.resize.key, outcome = s.decision.outcome.as_str(), message = %s.decision.message, "not preempting");
                    (None, None)
                }
                Progress::Held(why)
                | Progress::NotShrunk(why)
                | Progress::NotReserved(why)
                | Progress::NotEvicted(why) => (None, Some(why)),
                Progress::Replanned { by } => (
                    None,
                    Some(format!("re-planned: {by} has a higher-priority resize pending")),
                ),
                Progress::Evicted((latencies, error)) => (Some(latencies), error),
            };
            Served {
                pod: s.resize.key,
                decision: s.decision,
                latencies,
                error,
            }
        })
        .collect())
}

/// One cycle of the standalone node as [`preempt::Backend`]: the store, headroomd in-process,
/// the Pods' processes and cgroups, and the kubelet's retry; each step's latency is recorded.
struct StandaloneCycle<'a> {
    node: &'a StandaloneNode,
    started: Instant,
    /// When each listed resize was requested (`/resize`).
    requested_at: HashMap<String, Option<Instant>>,
    latencies: HashMap<String, StepLatencies>,
}

impl StandaloneCycle<'_> {
    fn latencies(&mut self, key: &str) -> &mut StepLatencies {
        self.latencies
            .entry(key.to_string())
            .or_insert_with(|| StepLatencies {
                pod: key.to_string(),
                ..StepLatencies::default()
            })
    }
}

impl preempt::Backend for StandaloneCycle<'_> {
    type Error = StandaloneError;
    /// The step latencies, and why the resize failed after its victims were gone.
    type Followed = (StepLatencies, Option<String>);

    async fn list(&mut self) -> Result<Option<Listing>, StandaloneError> {
        let listing = {
            let store = self.node.store();
            let mut resizes = Vec::new();
            for (key, p) in deferred_in(&store) {
                let meta = &p.pod.metadata;
                let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
                self.requested_at.insert(key.clone(), p.resize_requested_at);
                resizes.push((
                    namespace.to_string(),
                    name.to_string(),
                    meta.uid.clone().unwrap_or_default(),
                    meta.generation,
                ));
            }
            if resizes.is_empty() {
                return Ok(None);
            }
            preempt::listing(&store.cluster(&self.node.config), resizes)
        };
        let Some(mut listing) = listing else {
            return Ok(None);
        };
        let offered = listing
            .state
            .pods
            .iter()
            .any(|p| matches!(p.give_way, GiveWay::Offered(_)));
        if offered {
            // Without fresh figures nobody is shrunk (the planner refuses), never a stale guess.
            match live_snapshot(self.node).await {
                Ok(snapshot) => give_way::fill_live(
                    &snapshot,
                    &mut listing.state.pods,
                    SystemTime::now(),
                    LIVE_MAX_AGE,
                ),
                Err(e) => tracing::warn!(error = %e, "no live figures from headroomd: nobody is shrunk"),
            }
        }
        Ok(Some(listing))
    }

    fn decided(&mut self, resize: &Resize, decision: &Decision, at: Instant) {
        tracing::debug!(pod = %resize.key, outcome = decision.outcome.as_str(), give_way = ?decision.give_way, "decided");
        let started = self.started;
        let requested_at = self.requested_at.get(&resize.key).copied().flatten();
        let latencies = self.latencies(&resize.key);
        latencies.set(
            Step::DeferredDetected,
            started.saturating_duration_since(requested_at.unwrap_or(started)),
        );
        latencies.set(Step::Decision, at.saturating_duration_since(started));
    }

    /// Each shrink as the API server and the kubelet take a resize (spec, generation, admission,
    /// actuation through headroomd, `ResizeStarted`/`ResizeCompleted`), after re-reading the
    /// Pod's live figures; a `GaveWay` Event names the Pod it made room for. Returns once
    /// headroomd counts the freed room.
    async fn shrink(&mut self, resize: &Resize, decision: &Decision) -> Result<(), String> {
        let started = Instant::now();
        let node = self.node;
        let policy = node.config.give_way.policy;
        for shrink in &decision.shrinks {
            let key = shrink.key();
            let snapshot = live_snapshot(node).await.map_err(|e| format!("{key}: {e}"))?;
            let live = give_way::live_of(&snapshot, &shrink.uid, SystemTime::now(), LIVE_MAX_AGE);
            give_way::plan::still_safe(shrink, &live, &policy)
                .map_err(|why| format!("{key} not shrunk: {why}"))?;
            let admission = {
                let mut store = node.store();
                let stored = store
                    .pods
                    .get_mut(&key)
                    .filter(|p| p.runtime.is_some() && !p.terminating)
                    .ok_or_else(|| format!("{key} is gone"))?;
                let patch = give_way::patch::container_shrinks(&stored.pod, shrink.from, shrink.to)
                    .map_err(|why| format!("{key} not shrunk: {why}"))?;
                give_way::patch::apply_to(&mut stored.pod, &patch);
                let generation = stored.pod.metadata.generation.unwrap_or(1) + 1;
                stored.pod.metadata.generation = Some(generation);
                let pod = stored.pod.clone();
                let message = give_way::gave_way_message(shrink, &resize.key, &resize.uid, &node.config.name);
                store
                    .events
                    .record(&pod, NORMAL, give_way::REASON_GAVE_WAY, message, SHIM);
                resize::admit(&mut store, &key, &node.config).map_err(|e| format!("{key}: {e}"))?
            };
            match admission {
                Admission::Fits(plan) => {
                    node.actuate(plan)
                        .await
                        .map_err(|e| format!("{key} not shrunk: {e}"))?;
                }
                Admission::NoResize => {}
                other => return Err(format!("{key}: the kubelet did not admit its shrink: {other:?}")),
            }
            tracing::info!(pod = %key, from = %shrink.from, to = %shrink.to, for_pod = %resize.key, "gave way in place");
            node.aftercare
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(give_way::aftercare::Watched {
                    namespace: shrink.namespace.clone(),
                    name: shrink.name.clone(),
                    uid: shrink.uid.clone(),
                    from: shrink.from,
                    to: shrink.to,
                    for_pod: resize.key.clone(),
                    since: Instant::now(),
                });
        }
        if !decision.shrinks.is_empty() {
            // From the store, not from a snapshot taken before the shrinks: headroomd's Pod
            // source may still lag a resize made just before this one (say, a victim grown back).
            let expected = StandaloneNode::pod_source_total(&node.store());
            wait_until_counted(node, expected).await?;
        }
        tracing::debug!(pod = %resize.key, elapsed_us = started.elapsed().as_micros() as u64, "shrinks actuated");
        self.latencies(&resize.key).set(Step::GaveWay, started.elapsed());
        Ok(())
    }

    /// The victims stop counting in headroomd from here on: their room is the reservation's.
    async fn reserve(&mut self, resize: &Resize, reservation: &Reservation) -> Result<(), String> {
        let reserve_started = Instant::now();
        set_terminating(self.node, &reservation.victims, true);
        let ttl = u32::try_from(self.node.config.reservation_ttl.as_secs())
            .unwrap_or(u32::MAX)
            .max(1);
        let reserved = self
            .node
            .headroomd()
            .reserve(pb::ReserveRequest {
                reservation_id: reservation.id.clone(),
                pod: reservation.pod_uid.clone(),
                amount: Some(pb::ResourceAmount {
                    cpu_millis: Some(reservation.amount.cpu_millis),
                    memory_bytes: Some(reservation.amount.memory_bytes),
                    ..pb::ResourceAmount::default()
                }),
                ttl_seconds: ttl,
                // Already out of headroomd's Pod source (terminating); named anyway, as the
                // Kubernetes backend names them, so the reservation says what it waits for.
                releasing_pod_uids: reservation.releasing_pod_uids.clone(),
            })
            .await;
        if let Err(e) = reserved {
            set_terminating(self.node, &reservation.victims, false);
            let e = StandaloneError::Headroomd(super::node::rpc_error("Reserve", e));
            tracing::warn!(pod = %resize.key, error = %e, "no reservation; nobody evicted");
            return Err(e.to_string());
        }
        // The kubelet's actuation of the resize consumes it (also when nobody is evicted).
        if let Some(p) = self.node.store().pods.get_mut(&resize.key) {
            p.reservation = Some(reservation.id.clone());
        }
        self.latencies(&resize.key)
            .set(Step::Reservation, reserve_started.elapsed());
        Ok(())
    }

    async fn release(&mut self, reservation: &Reservation) {
        release(self.node, &reservation.id).await;
        set_terminating(self.node, &reservation.victims, false);
    }

    fn pending(&self) -> Vec<Pending> {
        let store = self.node.store();
        deferred_in(&store)
            .map(|(key, p)| Pending {
                identity: p.pod.metadata.uid.clone().unwrap_or_else(|| key.clone()),
                key: key.clone(),
                priority: p.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
            })
            .collect()
    }

    fn replanned(&mut self, resize: &Resize, first: &str) {
        tracing::info!(pod = %resize.key, preempted_by = %first, "re-planning: a higher-priority resize arrived");
        self.node.wake.notify_one();
    }

    /// As the scheduler and the kubelet evict: `DisruptionTarget`, `Preempted`, `Killing`,
    /// SIGTERM, SIGKILL after the grace period, cgroups removed.
    async fn evict(
        &mut self,
        resize: &Resize,
        _decision: &Decision,
        reservation: &Reservation,
        // Nothing is marked on the standalone node (no API server reads the condition).
        _marked: crate::preempt::Marked,
    ) -> Result<(), String> {
        let evict_started = Instant::now();
        let victims = start_eviction(self.node, &resize.uid, &reservation.victims);
        let results = futures::future::join_all(
            victims
                .into_iter()
                .map(|(_, runtime, grace)| runtime.terminate(grace)),
        )
        .await;
        for r in results {
            if let Err(e) = r {
                tracing::warn!(error = %e, "victim cleanup incomplete");
            }
        }
        remove_victims(self.node, &reservation.victims);
        self.latencies(&resize.key)
            .set(Step::VictimsTerminated, evict_started.elapsed());
        Ok(())
    }

    /// The kubelet retries the pending resize once Pods were removed, and actuates it.
    async fn follow(&mut self, resize: &Resize, reservation: Reservation) -> Self::Followed {
        let node = self.node;
        let admission = {
            let mut store = node.store();
            resize::admit(&mut store, &resize.key, &node.config)
        };
        let mut latencies = self.latencies(&resize.key).clone();
        let error = match admission {
            Ok(Admission::Fits(plan)) => match node.actuate(plan).await {
                Ok(t) => {
                    latencies.set(Step::Actuation, t.actuation);
                    latencies.set(Step::CgroupWrites, t.cgroup_writes);
                    latencies.set(Step::Verified, t.verified);
                    let since = self
                        .requested_at
                        .get(&resize.key)
                        .copied()
                        .flatten()
                        .unwrap_or(self.started);
                    latencies.total_ns = Some(super::latency::nanos(since.elapsed()));
                    None
                }
                Err(e) => Some(e),
            },
            other => {
                release(node, &reservation.id).await;
                Some(match other {
                    Ok(other) => {
                        format!("after preemption the kubelet still did not admit the resize: {other:?}")
                    }
                    Err(e) => e.to_string(),
                })
            }
        };
        node.record_latency(latencies.clone());
        (latencies, error)
    }
}

/// The kubelet's retry of a pending resize that fits now (upstream retries on `pod_resized`,
/// `pods_removed`, ... and every 3 minutes): here, on the shim's next cycle, so that a resize whose
/// room was freed by a step that then failed (say, a shrink headroomd counted late) does not wait.
async fn retry_pending_resize(node: &StandaloneNode, key: &str) {
    let admission = {
        let mut store = node.store();
        resize::admit(&mut store, key, &node.config)
    };
    match admission {
        Ok(Admission::Fits(plan)) => match node.actuate(plan).await {
            Ok(_) => tracing::info!(pod = %key, "pending resize retried and actuated"),
            Err(e) => tracing::warn!(pod = %key, error = %e, "pending resize retried, actuation failed"),
        },
        Ok(other) => tracing::debug!(pod = %key, admission = ?other, "pending resize retried, still pending"),
        Err(e) => tracing::warn!(pod = %key, error = %e, "pending resize retry failed"),
    }
}

/// How often Pods that gave way are checked for pressure.
const AFTERCARE_PERIOD: Duration = Duration::from_secs(1);

/// Pods that gave way and came under pressure since: a Warning `GiveWayPressure` Event each.
async fn watch_shrunk_pods(node: &StandaloneNode) {
    let empty = node
        .aftercare
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_empty();
    if empty {
        return;
    }
    let snapshot = match live_snapshot(node).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(error = %e, "no live figures to watch shrunk Pods with");
            return;
        }
    };
    let live = |uid: &str| Some(give_way::live_of(&snapshot, uid, SystemTime::now(), LIVE_MAX_AGE));
    let reports = {
        let mut watched = node
            .aftercare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        give_way::aftercare::check(&mut watched, live, Instant::now())
    };
    let mut store = node.store();
    for (w, why) in reports {
        tracing::warn!(pod = %w.key(), %why, "a Pod that gave way is under pressure");
        if let Some(p) = store.pods.get(&w.key()) {
            let pod = p.pod.clone();
            store.events.record(
                &pod,
                super::events::reasons::WARNING,
                give_way::REASON_PRESSURE,
                why,
                SHIM,
            );
        }
    }
}

/// Live figures older than this are not used to shrink anyone.
pub const LIVE_MAX_AGE: Duration = Duration::from_secs(2);
/// `source.component` of the Events the shim itself posts.
const SHIM: &str = "headroom-shim";

async fn live_snapshot(node: &StandaloneNode) -> Result<pb::HeadroomSnapshot, String> {
    node.headroomd()
        .get_headroom(true)
        .await
        .map_err(|e| super::node::rpc_error("GetHeadroom", e))
}

/// What headroomd counts as allocated on the node.
fn allocated(snapshot: &pb::HeadroomSnapshot) -> Option<Resources> {
    let node = snapshot.node.as_ref()?;
    let (cpu, memory) = node.cpu_millis.as_ref().zip(node.memory_bytes.as_ref())?;
    Some(Resources::new(cpu.allocated, memory.allocated))
}

/// Waits (bounded) until headroomd's snapshot counts at most `expected` allocated: its Pod
/// source follows the store a cycle later, and a reservation made before that would be refused.
async fn wait_until_counted(node: &StandaloneNode, expected: Resources) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let allocated = allocated(&live_snapshot(node).await?);
        if allocated.is_some_and(|a| a.fits_within(&expected)) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "headroomd still counts {} allocated after the shrinks, expected at most {expected}",
                allocated.map_or("nothing".to_string(), |a| a.to_string())
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn set_terminating(node: &StandaloneNode, keys: &[String], on: bool) {
    let mut store = node.store();
    for k in keys {
        if let Some(p) = store.pods.get_mut(k) {
            p.terminating = on;
        }
    }
    node.sync_pod_source(&store);
}

async fn release(node: &StandaloneNode, id: &str) {
    for p in node.store().pods.values_mut() {
        if p.reservation.as_deref() == Some(id) {
            p.reservation = None;
        }
    }
    let _ = node.headroomd().release(id).await;
}

/// The scheduler's part (`DisruptionTarget`, `Preempted`) and the kubelet's (`Killing` per
/// container); hands back each victim's runtime and grace period to stop it with.
fn start_eviction(
    node: &StandaloneNode,
    preemptor_uid: &str,
    victims: &[String],
) -> Vec<(String, PodRuntime, Duration)> {
    let mut store = node.store();
    let mut out = Vec::new();
    for key in victims {
        let Some(stored) = store.pods.get_mut(key) else {
            continue;
        };
        let Some(runtime) = stored.runtime.take() else {
            continue;
        };
        let now = Time(jiff::Timestamp::now());
        let grace = node.config.grace_period_override.unwrap_or_else(|| {
            stored
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(DEFAULT_GRACE_PERIOD, Duration::from_secs)
        });
        let pod = &mut stored.pod;
        pod.metadata.deletion_timestamp = Some(now.clone());
        pod.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("PreemptionByScheduler".into()),
                message: Some(format!(
                    "{SCHEDULER}: preempting to accommodate a higher priority pod"
                )),
                last_transition_time: Some(now),
                ..PodCondition::default()
            });
        let pod = pod.clone();
        let message = format!("Preempted by pod {preemptor_uid} on node {}", node.config.name);
        store.events.record(&pod, NORMAL, PREEMPTED, message, SCHEDULER);
        for container in runtime.containers() {
            store.events.record(
                &pod,
                NORMAL,
                KILLING,
                format!("Stopping container {container}"),
                KUBELET,
            );
        }
        out.push((key.clone(), runtime, grace));
    }
    out
}

fn remove_victims(node: &StandaloneNode, victims: &[String]) {
    let mut store = node.store();
    for key in victims {
        if let Some(p) = store.pods.remove(key)
            && let Some(uid) = &p.pod.metadata.uid
        {
            node.forget(uid);
        }
    }
    node.sync_pod_source(&store);
}

/// Whether `key`'s resize is still pending (for callers that wait on the loop).
pub fn is_pending(node: &StandaloneNode, key: &str) -> bool {
    node.store().pods.get(key).is_some_and(|p| {
        matches!(
            resize_state(&p.pod),
            ResizeState::Deferred { .. } | ResizeState::InProgress
        )
    })
}

/// `PodResizePending` of a Pod, if any: (reason, message).
pub fn pending_condition(node: &StandaloneNode, key: &str) -> Option<(String, String)> {
    let store = node.store();
    let pod = &store.pods.get(key)?.pod;
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CONDITION_RESIZE_PENDING)
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}
