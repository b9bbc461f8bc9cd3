//! The shim loop: every Deferred resize goes through the decision core; on `preempt` the extra
//! room is reserved in headroomd's ledger, the victims are evicted as the scheduler evicts them
//! (`DisruptionTarget`, `Preempted`, the kubelet's `Killing`, SIGTERM, SIGKILL after the grace
//! period, cgroups removed), and the kubelet's retry on `pods_removed` admits and actuates the
//! resize. Each step's latency is recorded.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_node_model::pod::CONDITION_RESIZE_PENDING;
use headroom_node_model::{ResizeState, Resources, resize_state};
use headroom_proto::v1 as pb;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::Instrument as _;

use super::events::reasons::{KILLING, KUBELET, NORMAL, PREEMPTED, SCHEDULER};
use super::latency::{Step, StepLatencies};
use super::node::StandaloneNode;
use super::resize::{self, Admission};
use super::runtime::PodRuntime;
use super::store::Store;
use super::{DEFAULT_GRACE_PERIOD, StandaloneError};
use crate::cluster_file::{ResizeSpec, node_state_for};
use crate::decide::{Decision, Outcome, decide};

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
    loop {
        tokio::select! {
            () = node.wake.notified() => {}
            () = tokio::time::sleep(RETRY_PERIOD) => {}
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

/// The Deferred resizes, most important first (the kubelet's retry order, by priority then
/// longest pending).
fn deferred(node: &StandaloneNode) -> Vec<String> {
    deferred_in(&node.store())
}

fn deferred_in(store: &Store) -> Vec<String> {
    let mut pods: Vec<(i32, Option<Instant>, String)> = store
        .pods
        .iter()
        .filter(|(_, p)| p.runtime.is_some() && !p.terminating && resize_state(&p.pod).is_deferred())
        .map(|(k, p)| {
            let priority = p.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
            (priority, p.resize_requested_at, k.clone())
        })
        .collect();
    pods.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    pods.into_iter().map(|(_, _, k)| k).collect()
}

/// The most important Deferred resize that arrived after this cycle began (is not in `cycle`)
/// and outranks `key` by priority. Resizes of this cycle are excluded: those ranked before `key`
/// were decided already (one that stays Deferred must not stall every lower one forever), those
/// after it rank lower.
fn more_important_pending(node: &StandaloneNode, key: &str, cycle: &HashSet<String>) -> Option<String> {
    let store = node.store();
    let priority = |k: &str| {
        store
            .pods
            .get(k)
            .and_then(|p| p.pod.spec.as_ref())
            .and_then(|s| s.priority)
            .unwrap_or(0)
    };
    let mine = priority(key);
    deferred_in(&store)
        .into_iter()
        .find(|k| !cycle.contains(k) && priority(k) > mine)
}

/// One pass over every Deferred resize.
pub async fn run_cycle(node: &StandaloneNode) -> Result<Vec<Served>, StandaloneError> {
    let mut served = Vec::new();
    let keys = deferred(node);
    let cycle: HashSet<String> = keys.iter().cloned().collect();
    for key in keys {
        let span = tracing::info_span!("shim_cycle", pod = %key);
        served.push(serve_one(node, &key, &cycle).instrument(span).await?);
    }
    Ok(served)
}

async fn serve_one(
    node: &StandaloneNode,
    key: &str,
    cycle: &HashSet<String>,
) -> Result<Served, StandaloneError> {
    let detected = Instant::now();
    let mut latencies = StepLatencies {
        pod: key.to_string(),
        ..StepLatencies::default()
    };
    // 1. Decide on the store as it is now.
    let (decision, request, uid, generation, requested_at) = {
        let store = node.store();
        let stored = store
            .pods
            .get(key)
            .ok_or_else(|| StandaloneError::NotFound(format!("pods {key:?} not found")))?;
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        let spec = ResizeSpec {
            namespace: namespace.into(),
            name: name.into(),
            ..ResizeSpec::default()
        };
        let (state, request) = node_state_for(&store.cluster(&node.config), &spec)?;
        let decision = decide(&state, &request)?;
        let uid = stored.pod.metadata.uid.clone().unwrap_or_default();
        (
            decision,
            request,
            uid,
            stored.pod.metadata.generation.unwrap_or(1),
            stored.resize_requested_at,
        )
    };
    latencies.set(
        Step::DeferredDetected,
        detected - requested_at.unwrap_or(detected),
    );
    latencies.set(Step::Decision, detected.elapsed());
    let outcome = |latencies, error| Served {
        pod: key.to_string(),
        decision: decision.clone(),
        latencies,
        error,
    };
    if decision.outcome != Outcome::Preempt {
        tracing::info!(outcome = decision.outcome.as_str(), message = %decision.message, "not preempting");
        return Ok(outcome(None, None));
    }

    // 2. Reserve the extra room. The victims stop counting in headroomd from here on: their room
    //    is the reservation's.
    let reserve_started = Instant::now();
    let victim_keys: Vec<String> = decision
        .victims
        .iter()
        .map(|v| format!("{}/{}", v.namespace, v.name))
        .collect();
    set_terminating(node, &victim_keys, true);
    // headroomd ids allow [A-Za-z0-9._:-].
    let reservation = format!("{uid}:{generation}");
    let extra = request
        .requested
        .saturating_sub(request.admitted)
        .max(Resources::ZERO);
    // Already out of headroomd's Pod source (terminating); named anyway, as the Kubernetes
    // backend names them, so the reservation says what it is waiting for.
    let victim_uids: Vec<String> = decision
        .victims
        .iter()
        .filter(|v| !v.uid.is_empty())
        .map(|v| v.uid.clone())
        .collect();
    if let Err(e) = reserve(node, &reservation, &uid, extra, victim_uids).await {
        set_terminating(node, &victim_keys, false);
        tracing::warn!(error = %e, "no reservation; nobody evicted");
        return Ok(outcome(None, Some(e.to_string())));
    }
    latencies.set(Step::Reservation, reserve_started.elapsed());

    // A higher-priority resize that arrived on this node while this one was being decided
    // goes first (as in the scheduler): give the room back and re-plan before anyone is evicted.
    if let Some(first) = more_important_pending(node, key, cycle) {
        release(node, &reservation).await;
        set_terminating(node, &victim_keys, false);
        tracing::info!(preempted_by = %first, "re-planning: a higher-priority resize arrived");
        node.wake.notify_one();
        return Ok(outcome(
            None,
            Some(format!(
                "re-planned: {first} has a higher-priority resize pending"
            )),
        ));
    }

    // 3. Evict.
    let evict_started = Instant::now();
    let victims = start_eviction(node, key, &uid, &victim_keys, &reservation);
    let grace = |rt: &(String, PodRuntime, Duration)| rt.2;
    let results = futures::future::join_all(victims.into_iter().map(|v| {
        let g = grace(&v);
        v.1.terminate(g)
    }))
    .await;
    for r in results {
        if let Err(e) = r {
            tracing::warn!(error = %e, "victim cleanup incomplete");
        }
    }
    remove_victims(node, &victim_keys);
    latencies.set(Step::VictimsTerminated, evict_started.elapsed());

    // 4. The kubelet retries the pending resize once Pods were removed.
    let admission = {
        let mut store = node.store();
        resize::admit(&mut store, key, &node.config)?
    };
    let error = match admission {
        Admission::Fits(plan) => match node.actuate(plan).await {
            Ok(t) => {
                latencies.set(Step::Actuation, t.actuation);
                latencies.set(Step::CgroupWrites, t.cgroup_writes);
                latencies.set(Step::Verified, t.verified);
                latencies.total_ns = Some(super::latency::nanos(requested_at.unwrap_or(detected).elapsed()));
                None
            }
            Err(e) => Some(e),
        },
        other => {
            release(node, &reservation).await;
            Some(format!(
                "after preemption the kubelet still did not admit the resize: {other:?}"
            ))
        }
    };
    node.record_latency(latencies.clone());
    Ok(outcome(Some(latencies), error))
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

async fn reserve(
    node: &StandaloneNode,
    id: &str,
    uid: &str,
    amount: Resources,
    releasing_pod_uids: Vec<String>,
) -> Result<(), StandaloneError> {
    let mut client = node.headroomd().await?;
    let ttl = u32::try_from(node.config.reservation_ttl.as_secs())
        .unwrap_or(u32::MAX)
        .max(1);
    client
        .reserve(pb::ReserveRequest {
            reservation_id: id.to_string(),
            pod: uid.to_string(),
            amount: Some(pb::ResourceAmount {
                cpu_millis: Some(amount.cpu_millis),
                memory_bytes: Some(amount.memory_bytes),
                ..pb::ResourceAmount::default()
            }),
            ttl_seconds: ttl,
            releasing_pod_uids,
        })
        .await
        .map_err(|s| StandaloneError::Headroomd(format!("Reserve: {}", s.message())))?;
    Ok(())
}

async fn release(node: &StandaloneNode, id: &str) {
    if let Ok(mut client) = node.headroomd().await {
        let _ = client
            .release(pb::ReleaseRequest {
                reservation_id: id.to_string(),
            })
            .await;
    }
}

/// The scheduler's part (`DisruptionTarget`, `Preempted`) and the kubelet's (`Killing` per
/// container); hands back each victim's runtime and grace period to stop it with.
fn start_eviction(
    node: &StandaloneNode,
    preemptor_key: &str,
    preemptor_uid: &str,
    victims: &[String],
    reservation: &str,
) -> Vec<(String, PodRuntime, Duration)> {
    let mut store = node.store();
    if let Some(p) = store.pods.get_mut(preemptor_key) {
        p.reservation = Some(reservation.to_string());
    }
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
