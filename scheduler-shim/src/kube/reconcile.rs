//! One reconcile cycle over the reflector stores: follow earlier preemptions to completion, then
//! decide every Deferred resize on the node (kubelet retry order) and preempt where the core says so.
//!
//! With headroomd (the default), live headroom takes part as in the standalone backend: the room
//! headroomd's ledger promises to Pods the decision does not count is used room
//! ([`unaccounted_reservations`]); each preemption reserves its extra room in headroomd's ledger,
//! which refuses what its live headroom cannot hold; and nobody is evicted unless headroomd's
//! newest snapshot is within `max_headroom_age` (refreshed with `GetHeadroom` when it is not),
//! checked before the decision and again just before the first eviction. A higher-priority resize
//! that arrives between the decision and the first eviction gets the room back first: the
//! reservation is released and the cycle re-planned, as the standalone shim does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_node_model::{ResizeState, parse_cpu_millis, parse_memory_bytes, resize_state};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use super::board::{Board, Stage};
use super::effects::{self, EventSpec, VictimOutcome, actions, reasons};
use super::headroomd::{LiveHeadroom, NotFresh, unaccounted_reservations};
use super::reservations::{ReservationError, Reserve};
use super::{
    KubeConfig, KubeError, Metrics, NodeLedger, OPT_OUT_LABEL, OPT_OUT_VALUE, PreemptionMode, Reservations,
    Stores,
};
use crate::cluster_file::ClusterFile;
use crate::decide::{Decision, Outcome};
use crate::preempt::{self, Listing, Marked, Pending, Reservation, Resize};

/// A resize for which victims were removed, until the kubelet has actuated it.
#[derive(Clone, Debug)]
struct InFlight {
    namespace: String,
    name: String,
    reservation: String,
    victims: usize,
    decided_at: Instant,
}

/// After a cycle that could not evict because headroom was not fresh, the next one comes at most
/// this much later (a resync otherwise).
pub const RETRY_BLOCKED: Duration = Duration::from_secs(1);

/// A resize whose preemption failed is tried again after this, doubling per failure of the same
/// attempt up to [`FAILED_BACKOFF_MAX`]: kube-scheduler's Pod backoff (`podInitialBackoffSeconds`
/// 1, `podMaxBackoffSeconds` 10). Without it a failure that changes a Pod (a mark taken back)
/// would wake the next cycle at once, and the same refusal would come back in a loop.
pub const FAILED_BACKOFF: Duration = Duration::from_secs(1);
pub const FAILED_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// One resize attempt in backoff after a failed preemption.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    generation: i64,
    failures: u32,
    until: Instant,
}

/// What one cycle did (for logs and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CycleReport {
    /// `namespace/name` of each resizing Pod decided, with the outcome.
    pub decisions: Vec<(String, Outcome)>,
    /// `namespace/name` of each victim removed.
    pub preempted: Vec<String>,
    /// `namespace/name` of each resizing Pod that would have preempted (dry run).
    pub would_preempt: Vec<String>,
    /// Preempted-for resizes the kubelet actuated, with the end-to-end latency.
    pub completed: Vec<(String, Duration)>,
    pub timed_out: Vec<String>,
    pub abandoned: Vec<String>,
    /// Resizing Pods not preempted for because headroomd's headroom was not fresh, with why.
    pub blocked: Vec<(String, String)>,
    /// Resizing Pods whose preemption was given up before any eviction (room released) because a
    /// higher-priority resize arrived.
    pub replanned: Vec<String>,
}

pub struct Backend {
    client: Client,
    config: KubeConfig,
    stores: Stores,
    reservations: Arc<dyn Reservations>,
    /// headroomd's live headroom; `None` only with the in-process ledger.
    live: Option<Arc<LiveHeadroom>>,
    metrics: Arc<Metrics>,
    /// By resizing Pod UID.
    in_flight: BTreeMap<String, InFlight>,
    /// `(uid, generation, reason)` already announced (dry run, failure, blocked): one Event of
    /// each reason per resize attempt.
    announced: BTreeSet<(String, i64, &'static str)>,
    /// The last cycle was blocked on stale headroom: the next one comes within [`RETRY_BLOCKED`].
    retry_soon: bool,
    /// By resizing Pod UID: attempts whose preemption failed, not served again before `until`.
    backoff: BTreeMap<String, Backoff>,
    /// `(uid, why)` of malformed give-way annotations already reported.
    invalid_give_way: BTreeSet<(String, String)>,
    /// Pods shrunk in place, watched for pressure for a while after.
    aftercare: Vec<crate::give_way::aftercare::Watched>,
    /// The latest decision of each resize, for `/status` and `/explain`.
    board: Arc<Board>,
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        namespace(pod),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

impl Backend {
    pub fn new(
        client: Client,
        config: KubeConfig,
        stores: Stores,
        ledger: NodeLedger,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (config_node, config_dry_run) = (config.node_name.clone(), config.dry_run);
        let live_for_board = ledger.live.clone();
        Backend {
            client,
            config,
            stores,
            reservations: ledger.reservations,
            live: ledger.live,
            metrics,
            in_flight: BTreeMap::new(),
            announced: BTreeSet::new(),
            retry_soon: false,
            backoff: BTreeMap::new(),
            invalid_give_way: BTreeSet::new(),
            aftercare: Vec::new(),
            board: Arc::new(Board::new(&config_node, config_dry_run, live_for_board)),
        }
    }

    /// Keeps decisions on `board` (shared with the HTTP server) instead of a board of its own.
    pub fn with_board(mut self, board: Arc<Board>) -> Self {
        self.board = board;
        self
    }

    /// The decisions this backend has made.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// Waits for the first list of every watch, then reconciles on every change and every `resync`
    /// until `shutdown` resolves.
    pub async fn run_until(
        &mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), KubeError> {
        let mut shutdown = std::pin::pin!(shutdown);
        tokio::select! {
            ready = self.stores.wait_until_ready() => ready?,
            () = &mut shutdown => return Ok(()),
        }
        self.metrics.set_ready(true);
        tracing::info!(
            node = %self.config.node_name,
            dry_run = self.config.dry_run,
            reservations = self.reservations.kind(),
            freshness_gate = self.live.is_some(),
            max_headroom_age_ms = self.config.max_headroom_age.as_millis() as u64,
            "watches synced; reconciling"
        );
        loop {
            match self.reconcile().await {
                Ok(_) => self.metrics.reconciled(true),
                Err(error) => {
                    self.metrics.reconciled(false);
                    tracing::warn!(%error, "reconcile failed; retrying on the next change or resync");
                }
            }
            let mut wait = if std::mem::take(&mut self.retry_soon) {
                self.config.resync.min(RETRY_BLOCKED)
            } else {
                self.config.resync
            };
            // Wake when the first backoff ends, even if nothing changes meanwhile.
            let now = Instant::now();
            if let Some(until) = self.backoff.values().map(|b| b.until).filter(|u| *u > now).min() {
                wait = wait.min(until - now);
            }
            tokio::select! {
                () = self.stores.changed.notified() => {}
                () = tokio::time::sleep(wait) => {}
                () = &mut shutdown => return Ok(()),
            }
        }
    }

    /// Releases every reservation held (graceful shutdown).
    pub async fn shutdown(&mut self) {
        self.metrics.set_ready(false);
        for (_, flight) in std::mem::take(&mut self.in_flight) {
            self.reservations.release(&flight.reservation).await;
        }
        self.metrics.set_in_flight(0);
        tracing::info!("shut down; reservations released");
    }

    /// One cycle: [`preempt::cycle`] over this node's Pods in the reflector stores.
    #[tracing::instrument(name = "reconcile", skip(self), fields(node = %self.config.node_name))]
    pub async fn reconcile(&mut self) -> Result<CycleReport, KubeError> {
        let mut report = CycleReport::default();
        preempt::cycle(&mut KubeCycle {
            backend: self,
            report: &mut report,
            gate: Ok(()),
        })
        .await?;
        self.metrics.set_in_flight(self.in_flight.len());
        Ok(report)
    }

    /// Names of the namespaces whose label `label` is `value`.
    fn namespaces_labelled(&self, label: &str, value: &str) -> BTreeSet<String> {
        self.stores
            .namespaces
            .state()
            .iter()
            .filter(|ns| {
                ns.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(label))
                    .is_some_and(|v| v == value)
            })
            .filter_map(|ns| ns.metadata.name.clone())
            .collect()
    }

    /// Namespaces labelled out of resize preemption.
    fn opted_out(&self) -> BTreeSet<String> {
        self.namespaces_labelled(OPT_OUT_LABEL, OPT_OUT_VALUE)
    }

    /// Namespaces labelled `headroom.io/give-way=off`: their Pods are never shrunk.
    fn give_way_off_namespaces(&self) -> BTreeSet<String> {
        self.namespaces_labelled(crate::give_way::annotation::ANNOTATION, "off")
    }

    /// Pods that gave way and came under pressure since: a Warning `GiveWayPressure` Event each
    /// (at most once per shrink), from headroomd's newest fresh figures.
    async fn watch_shrunk_pods(&mut self) {
        if self.aftercare.is_empty() {
            return;
        }
        let Some(latest) = self.live.as_ref().and_then(|l| l.latest()) else {
            return;
        };
        let max_age = self.config.max_headroom_age;
        let live = |uid: &str| {
            Some(crate::give_way::live_of(
                &latest.snapshot,
                uid,
                std::time::SystemTime::now(),
                max_age,
            ))
        };
        let reports = crate::give_way::aftercare::check(&mut self.aftercare, live, Instant::now());
        for (w, why) in reports {
            tracing::warn!(pod = %w.key(), %why, "a Pod that gave way is under pressure");
            self.metrics.give_way_pressure();
            self.event(
                effects::pod_reference(&w.namespace, &w.name, &w.uid),
                None,
                "Warning",
                reasons::GIVE_WAY_PRESSURE,
                actions::RESIZING,
                why,
            )
            .await;
        }
    }

    /// One Warning Event per Pod and malformed `headroom.io/give-way` value, naming it.
    async fn report_invalid_give_way(&mut self, pods: &[crate::decide::PodInput]) {
        for pod in pods {
            let crate::give_way::GiveWay::Invalid(why) = &pod.give_way else {
                continue;
            };
            if !self.invalid_give_way.insert((pod.uid.clone(), why.clone())) {
                continue;
            }
            tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), %why, "give-way annotation refused");
            self.metrics.invalid_give_way();
            self.event(
                effects::pod_reference(&pod.namespace, &pod.name, &pod.uid),
                None,
                "Warning",
                reasons::INVALID_GIVE_WAY,
                actions::RESIZING,
                format!("{why}; this Pod is never shrunk in place until it is fixed"),
            )
            .await;
        }
    }

    /// The Deferred resizes this shim serves: not terminating, not opted out, not in flight, not
    /// in backoff after a failure of the same attempt.
    fn servable<'a>(&self, pods: &'a [Arc<Pod>], opted_out: &BTreeSet<String>) -> Vec<&'a Arc<Pod>> {
        let now = Instant::now();
        pods.iter()
            .filter(|p| resize_state(p).is_deferred())
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| !opted_out.contains(namespace(p)) && !self.in_flight.contains_key(uid(p)))
            .filter(|p| {
                self.backoff.get(uid(p)).is_none_or(|b| {
                    b.until <= now || b.generation != crate::preempt::generation(p.metadata.generation)
                })
            })
            .collect()
    }

    /// A failed attempt waits before it is served again, longer after each failure.
    fn back_off(&mut self, uid: &str, generation: i64) {
        let failures = match self.backoff.get(uid) {
            Some(b) if b.generation == generation => b.failures.saturating_add(1),
            _ => 1,
        };
        let wait = FAILED_BACKOFF
            .saturating_mul(1 << (failures - 1).min(4))
            .min(FAILED_BACKOFF_MAX);
        self.backoff.insert(
            uid.to_string(),
            Backoff {
                generation,
                failures,
                until: Instant::now() + wait,
            },
        );
    }

    /// Not preempting because headroomd's live headroom is not fresh: logged, counted, and one
    /// Warning Event per resize attempt on the resizing Pod.
    async fn blocked(
        &mut self,
        resizer: k8s_openapi::api::core::v1::ObjectReference,
        generation: i64,
        why: &NotFresh,
        report: &mut CycleReport,
    ) {
        let pod_key = reference_key(&resizer);
        tracing::warn!(pod = %pod_key, reason = why.label(), %why, "not preempting: headroomd's live headroom is not fresh; nobody evicted");
        self.metrics.preemption_blocked(why.label());
        self.board
            .staged(&pod_key, Stage::Blocked { why: why.to_string() });
        report.blocked.push((pod_key, why.to_string()));
        self.retry_soon = true;
        let uid = resizer.uid.clone().unwrap_or_default();
        if self
            .announced
            .insert((uid, generation, reasons::RESIZE_PREEMPTION_BLOCKED))
        {
            let note = format!(
                "Not preempting on node {}: {why}. Nobody was evicted; retrying once headroomd's headroom is fresh.",
                self.config.node_name
            );
            self.event(
                resizer,
                None,
                "Warning",
                reasons::RESIZE_PREEMPTION_BLOCKED,
                actions::PREEMPTING,
                note,
            )
            .await;
        }
    }

    async fn failed(
        &mut self,
        resizer: k8s_openapi::api::core::v1::ObjectReference,
        generation: i64,
        note: String,
    ) {
        self.metrics.preemption_failed();
        let pod_key = reference_key(&resizer);
        self.board.staged(&pod_key, Stage::Failed { why: note.clone() });
        let uid = resizer.uid.clone().unwrap_or_default();
        self.back_off(&uid, generation);
        if self
            .announced
            .insert((uid, generation, reasons::RESIZE_PREEMPTION_FAILED))
        {
            self.event(
                resizer,
                None,
                "Warning",
                reasons::RESIZE_PREEMPTION_FAILED,
                actions::PREEMPTING,
                note,
            )
            .await;
        }
    }

    /// Follows preempted-for resizes: completed, timed out or abandoned.
    async fn follow(&mut self, pods: &[Arc<Pod>], report: &mut CycleReport) {
        let now = Instant::now();
        let uids: Vec<String> = self.in_flight.keys().cloned().collect();
        for pod_uid in uids {
            let Some(flight) = self.in_flight.get(&pod_uid).cloned() else {
                continue;
            };
            let pod_key = format!("{}/{}", flight.namespace, flight.name);
            let reference = effects::pod_reference(&flight.namespace, &flight.name, &pod_uid);
            let elapsed = now.saturating_duration_since(flight.decided_at);
            match pods.iter().find(|p| uid(p) == pod_uid) {
                None => {
                    tracing::info!(pod = %pod_key, "resizing pod went away; reservation released");
                    self.metrics.abandoned();
                    self.board.staged(&pod_key, Stage::Abandoned);
                    report.abandoned.push(pod_key);
                }
                Some(pod) if resize_completed(pod) => {
                    tracing::info!(pod = %pod_key, latency_ms = elapsed.as_millis() as u64, "resize actuated");
                    self.metrics.completed(elapsed);
                    let after_ms = elapsed.as_millis().try_into().unwrap_or(u64::MAX);
                    self.board.staged(&pod_key, Stage::Actuated { after_ms });
                    report.completed.push((pod_key, elapsed));
                    let note = format!(
                        "Resize actuated {:.3}s after preempting {} pod(s): PodResizeInProgress gone, allocatedResources updated",
                        elapsed.as_secs_f64(),
                        flight.victims
                    );
                    self.event(
                        reference,
                        None,
                        "Normal",
                        reasons::RESIZE_PREEMPTION_COMPLETED,
                        actions::RESIZING,
                        note,
                    )
                    .await;
                }
                Some(_) if elapsed >= self.config.resize_timeout => {
                    tracing::warn!(pod = %pod_key, "resize not actuated in time; reservation released");
                    self.metrics.timed_out();
                    self.board.staged(&pod_key, Stage::TimedOut);
                    report.timed_out.push(pod_key);
                    let note = format!(
                        "Resize not actuated {}s after preemption; reservation released",
                        elapsed.as_secs()
                    );
                    self.event(
                        reference,
                        None,
                        "Warning",
                        reasons::RESIZE_PREEMPTION_TIMED_OUT,
                        actions::RESIZING,
                        note,
                    )
                    .await;
                }
                Some(_) => continue,
            }
            self.in_flight.remove(&pod_uid);
            self.reservations.release(&flight.reservation).await;
        }
        self.metrics.set_in_flight(self.in_flight.len());
    }

    /// Takes back the `DisruptionTarget` marks of `decision`'s victims named (by uid) in
    /// `marked`; one that cannot be taken back is left to the disruption controller (it clears a
    /// stale mark after two minutes), with a WARN.
    async fn unmark(&self, decision: &Decision, marked: &BTreeSet<String>) {
        let victims = decision.victims.iter().filter(|v| marked.contains(&v.uid));
        let unmarks = victims.map(|victim| async move {
            let key = format!("{}/{}", victim.namespace, victim.name);
            match effects::unmark_victim(&self.client, victim).await {
                Ok(()) => tracing::info!(victim = %key, "not preempted after all; DisruptionTarget cleared"),
                Err(error) => tracing::warn!(victim = %key, %error, "DisruptionTarget left for the disruption controller to clear"),
            }
        });
        futures::future::join_all(unmarks).await;
    }

    async fn event(
        &self,
        regarding: k8s_openapi::api::core::v1::ObjectReference,
        related: Option<k8s_openapi::api::core::v1::ObjectReference>,
        type_: &'static str,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) {
        let spec = EventSpec {
            regarding,
            related,
            type_,
            reason,
            action,
            note,
        };
        effects::post_event(&self.client, &self.config, spec).await;
    }
}

/// One reconcile cycle as [`preempt::Backend`]: the reflector stores, headroomd's ledger and
/// live headroom, the Eviction API, Events and metrics.
struct KubeCycle<'a> {
    backend: &'a mut Backend,
    report: &'a mut CycleReport,
    /// Whether headroomd's live headroom was fresh when the cycle listed the node.
    gate: Result<(), NotFresh>,
}

impl KubeCycle<'_> {
    fn resizer(resize: &Resize) -> k8s_openapi::api::core::v1::ObjectReference {
        let (namespace, name) = resize.key.split_once('/').unwrap_or(("default", &resize.key));
        effects::pod_reference(namespace, name, &resize.uid)
    }
}

impl preempt::Backend for KubeCycle<'_> {
    type Error = KubeError;
    type Followed = ();

    /// Follows earlier preemptions first, then lists the node's servable Deferred resizes;
    /// Pods that must never be preempted (opted-out namespaces, terminating) count as highest
    /// priority, and headroomd's reservations for Pods off the node count as used.
    async fn list(&mut self) -> Result<Option<Listing>, KubeError> {
        let b = &mut *self.backend;
        b.watch_shrunk_pods().await;
        let node_name = b.config.node_name.clone();
        let Some(node) = b
            .stores
            .nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(node_name.as_str()))
        else {
            tracing::debug!("node not seen yet");
            return Ok(None);
        };
        let pods = b.stores.pods.state();
        b.backoff
            .retain(|backed_off, _| pods.iter().any(|p| uid(p) == backed_off.as_str()));
        b.follow(&pods, self.report).await;

        let opted_out = b.opted_out();
        let deferred: Vec<&Arc<Pod>> = b.servable(&pods, &opted_out);
        if deferred.is_empty() {
            return Ok(None);
        }
        let mut give_way = b.config.give_way.clone();
        give_way.off_namespaces.extend(b.give_way_off_namespaces());
        let cluster = ClusterFile {
            nodes: vec![(*node).clone()],
            priority_classes: b
                .stores
                .priority_classes
                .state()
                .iter()
                .map(|c| (**c).clone())
                .collect(),
            pods: pods
                .iter()
                .map(|p| (**p).clone())
                .chain(nominated_pods(&b.stores.nominated.state(), &pods, &node_name))
                .collect(),
            pdbs: b.stores.pdbs.state().iter().map(|p| (**p).clone()).collect(),
            give_way,
        };
        let resizes = deferred.iter().map(|p| {
            (
                namespace(p).to_string(),
                p.metadata.name.clone().unwrap_or_default(),
                uid(p).to_string(),
                p.metadata.generation,
            )
        });
        let Some(mut listing) = preempt::listing(&cluster, resizes) else {
            return Ok(None);
        };
        let state = &mut listing.state;
        // Pods the shim must never preempt: opted-out namespaces. They still count against the
        // node; as "highest priority" they are never lower than a resizer. (Terminating Pods stay
        // as they are: the decision takes lower-priority ones as victims that cost nothing.)
        for input in &mut state.pods {
            if opted_out.contains(&input.namespace) {
                input.priority = i32::MAX;
                input.terminating = false;
            }
        }
        // Live headroom: fresh (refreshed if need be) before the decision rests on it.
        if let Some(live) = &b.live {
            let fresh = live.fresh(b.config.max_headroom_age).await;
            // A stale snapshot's reservations still beat none for the decision; it evicts nobody.
            let latest = fresh.as_ref().ok().cloned().or_else(|| live.latest());
            if let Some(latest) = latest {
                state.reserved = unaccounted_reservations(&latest.snapshot, &state.pods);
                // Only fresh figures: a Pod without them is never shrunk.
                crate::give_way::fill_live(
                    &latest.snapshot,
                    &mut state.pods,
                    std::time::SystemTime::now(),
                    b.config.max_headroom_age,
                );
                tracing::debug!(
                    version = latest.snapshot.version,
                    reserved = %state.reserved,
                    "live headroom: reservations not counted in any Pod"
                );
            }
            self.gate = fresh.map(|_| ());
        }
        b.report_invalid_give_way(&state.pods).await;
        Ok(Some(listing))
    }

    fn decided(&mut self, resize: &Resize, decision: &Decision, _at: Instant) {
        let outcome = decision.outcome;
        self.backend.metrics.decision(outcome.as_str());
        self.report.decisions.push((resize.key.clone(), outcome));
        self.backend.board.decided(
            &resize.key,
            &resize.uid,
            resize.generation,
            decision,
            std::time::SystemTime::now(),
        );
        tracing::info!(pod = %resize.key, outcome = outcome.as_str(), message = %decision.message, victims = decision.victims.len(), "decided");
    }

    /// A dry run announces what it would do, once per resize attempt; stale headroom blocks.
    async fn may_preempt(&mut self, resize: &Resize, decision: &Decision) -> Result<(), String> {
        let b = &mut *self.backend;
        if b.config.dry_run {
            if b.announced.insert((
                resize.uid.clone(),
                resize.generation,
                reasons::WOULD_PREEMPT_FOR_RESIZE,
            )) {
                let n = decision.victims.len();
                let victim_list = victim_list(decision);
                tracing::info!(pod = %resize.key, victims = %victim_list, "dry run: would preempt");
                b.metrics.would_preempt(n as u64);
                self.report.would_preempt.push(resize.key.clone());
                b.board.staged(&resize.key, Stage::WouldPreempt);
                let note = format!(
                    "Dry run: would preempt {n} pod(s) on node {}: {victim_list}. {}",
                    b.config.node_name, decision.message
                );
                b.event(
                    Self::resizer(resize),
                    None,
                    "Normal",
                    reasons::WOULD_PREEMPT_FOR_RESIZE,
                    actions::PREEMPTING,
                    note,
                )
                .await;
            }
            return Err("dry run".into());
        }
        if let Err(why) = &self.gate {
            let why = why.clone();
            b.blocked(Self::resizer(resize), resize.generation, &why, self.report)
                .await;
            return Err(why.to_string());
        }
        Ok(())
    }

    /// Each shrink through the Pod's `/resize` subresource, after re-checking its live figures,
    /// with a `GaveWay` Event on it; then waits until the kubelet has actuated every one (its
    /// room is free only then).
    async fn shrink(&mut self, resize: &Resize, decision: &Decision) -> Result<(), String> {
        let b = &mut *self.backend;
        let resizer = Self::resizer(resize);
        let policy = b.config.give_way.policy;
        for shrink in &decision.shrinks {
            let key = shrink.key();
            let live_now = match &b.live {
                Some(live) => match live.fresh(b.config.max_headroom_age).await {
                    Ok(latest) => crate::give_way::live_of(
                        &latest.snapshot,
                        &shrink.uid,
                        std::time::SystemTime::now(),
                        b.config.max_headroom_age,
                    ),
                    Err(why) => {
                        b.blocked(resizer, resize.generation, &why, self.report).await;
                        return Err(why.to_string());
                    }
                },
                None => Default::default(),
            };
            if let Err(why) = crate::give_way::plan::still_safe(shrink, &live_now, &policy) {
                let why = format!("{key} not shrunk: {why}");
                b.failed(resizer, resize.generation, why.clone()).await;
                return Err(why);
            }
            let pods = b.stores.pods.state();
            let Some(pod) = pods.iter().find(|p| uid(p) == shrink.uid) else {
                return Err(format!("{key} is gone"));
            };
            let patch = crate::give_way::patch::container_shrinks(pod, shrink.from, shrink.to)
                .map_err(|why| format!("{key} not shrunk: {why}"))?;
            let body = crate::give_way::patch::resize_patch(&patch);
            if let Err(error) = effects::resize_pod(&b.client, &shrink.namespace, &shrink.name, body).await {
                let why = format!("could not shrink {key}: {error}");
                tracing::warn!(pod = %resize.key, shrunk = %key, %error, "shrink refused");
                b.failed(resizer, resize.generation, why.clone()).await;
                return Err(why);
            }
            b.metrics.gave_way();
            tracing::info!(pod = %key, from = %shrink.from, to = %shrink.to, for_pod = %resize.key, "gave way in place");
            let note =
                crate::give_way::gave_way_message(shrink, &resize.key, &resize.uid, &b.config.node_name);
            b.event(
                effects::pod_reference(&shrink.namespace, &shrink.name, &shrink.uid),
                Some(resizer.clone()),
                "Normal",
                reasons::GAVE_WAY,
                actions::RESIZING,
                note,
            )
            .await;
        }
        let deadline = Instant::now() + b.config.resize_timeout;
        loop {
            let pods = b.stores.pods.state();
            let pending: Vec<String> = decision
                .shrinks
                .iter()
                .filter(|s| {
                    pods.iter()
                        .find(|p| uid(p) == s.uid)
                        .is_some_and(|p| !shrink_actuated(p, s.to))
                })
                .map(|s| s.key())
                .collect();
            if pending.is_empty() {
                for s in &decision.shrinks {
                    b.aftercare.push(crate::give_way::aftercare::Watched {
                        namespace: s.namespace.clone(),
                        name: s.name.clone(),
                        uid: s.uid.clone(),
                        from: s.from,
                        to: s.to,
                        for_pod: resize.key.clone(),
                        since: Instant::now(),
                    });
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                let why = format!(
                    "the kubelet did not actuate the shrink of {} in time",
                    pending.join(", ")
                );
                b.failed(resizer, resize.generation, why.clone()).await;
                return Err(why);
            }
            let changed = b.stores.changed.clone();
            let _ = tokio::time::timeout(Duration::from_millis(200), changed.notified()).await;
        }
    }

    async fn reserve(&mut self, resize: &Resize, reservation: &Reservation) -> Result<(), String> {
        let b = &mut *self.backend;
        let reserve = Reserve {
            id: reservation.id.clone(),
            pod: reservation.pod.clone(),
            pod_uid: reservation.pod_uid.clone(),
            amount: reservation.amount,
            available: reservation.available,
            ttl: b.config.resize_timeout,
            releasing_pod_uids: reservation.releasing_pod_uids.clone(),
        };
        let mut result = b.reservations.reserve(reserve.clone()).await;
        // headroomd counts the node from its own watch of the API server, a moment behind the
        // shim's (a shrink the kubelet just actuated): when the shim's count has the room, ask
        // again on each newer snapshot, for as long as a snapshot may be old.
        // (`live` is there only with headroomd's ledger.)
        let own_count_fits = reserve.available.cpu_millis >= reserve.amount.cpu_millis
            && reserve.available.memory_bytes >= reserve.amount.memory_bytes;
        if let (Err(ReservationError::Refused(why)), Some(live), true) = (&result, &b.live, own_count_fits) {
            tracing::info!(pod = %resize.key, %why, "headroomd does not count the room yet; asking again on its next snapshot");
            let until = tokio::time::Instant::now() + b.config.max_headroom_age;
            let mut seen = live.latest().map_or(0, |l| l.snapshot.version);
            while matches!(result, Err(ReservationError::Refused(_))) {
                let Some(version) = live.newer_than(seen, until).await else {
                    break;
                };
                seen = version;
                result = b.reservations.reserve(reserve.clone()).await;
            }
        }
        if let Err(error) = result {
            tracing::warn!(pod = %resize.key, %error, "no reservation; not preempting");
            b.failed(
                Self::resizer(resize),
                resize.generation,
                format!("could not reserve room: {error}"),
            )
            .await;
            return Err(error.to_string());
        }
        Ok(())
    }

    async fn release(&mut self, reservation: &Reservation) {
        self.backend.reservations.release(&reservation.id).await;
    }

    fn pending(&self) -> Vec<Pending> {
        let b = &*self.backend;
        let pods = b.stores.pods.state();
        let opted_out = b.opted_out();
        b.servable(&pods, &opted_out)
            .into_iter()
            .map(|p| Pending {
                identity: uid(p).to_string(),
                key: key(p),
                priority: priority(p),
            })
            .collect()
    }

    fn replanned(&mut self, resize: &Resize, first: &str) {
        tracing::info!(pod = %resize.key, preempted_by = %first, "re-planning: a higher-priority resize arrived; nobody evicted");
        self.backend.metrics.replanned();
        self.report.replanned.push(resize.key.clone());
        self.backend.board.staged(
            &resize.key,
            Stage::Replanned {
                by: first.to_string(),
            },
        );
        self.backend.stores.changed.notify_one();
    }

    /// With `--preemption=delete`, every victim not terminating already gets upstream's
    /// `DisruptionTarget` (all at once, as the scheduler's executor does them in parallel).
    fn mark_victims(&self, decision: &Decision) -> impl Future<Output = Marked> + Send + 'static {
        let b = &*self.backend;
        let victims: Vec<crate::decide::Victim> = match b.config.preemption {
            PreemptionMode::Delete => decision
                .victims
                .iter()
                .filter(|v| !v.terminating)
                .cloned()
                .collect(),
            PreemptionMode::Eviction => Vec::new(),
        };
        let (client, scheduler_name) = (b.client.clone(), b.config.scheduler_name.clone());
        async move {
            let marks = victims
                .iter()
                .map(|victim| effects::mark_victim(&client, &scheduler_name, victim));
            let mut marked = Marked::default();
            for (victim, mark) in victims.iter().zip(futures::future::join_all(marks).await) {
                match mark {
                    Ok(true) => {
                        marked.marked.insert(victim.uid.clone());
                    }
                    Ok(false) => {
                        marked.gone.insert(victim.uid.clone());
                    }
                    Err(error) => {
                        marked.failed.get_or_insert_with(|| {
                            format!("could not preempt {}/{}: {error}", victim.namespace, victim.name)
                        });
                    }
                }
            }
            marked
        }
    }

    async fn unmark_victims(&mut self, decision: &Decision, marked: &Marked) {
        self.backend.unmark(decision, &marked.marked).await;
    }

    /// Checks the live headroom once more (earlier preemptions of this cycle may have taken a
    /// while: never evict on stale data), then removes every victim (a delete, or the Eviction
    /// API).
    async fn evict(
        &mut self,
        resize: &Resize,
        decision: &Decision,
        _reservation: &Reservation,
        mut marked: Marked,
    ) -> Result<(), String> {
        let b = &mut *self.backend;
        let resizer = Self::resizer(resize);
        if let Some(why) = marked.failed.take() {
            tracing::warn!(pod = %resize.key, error = %why, "preemption failed");
            b.unmark(decision, &marked.marked).await;
            b.failed(resizer, resize.generation, why.clone()).await;
            return Err(why);
        }
        if let Some(live) = &b.live
            && let Err(why) = live.fresh(b.config.max_headroom_age).await
        {
            b.unmark(decision, &marked.marked).await;
            b.blocked(resizer, resize.generation, &why, self.report).await;
            return Err(why.to_string());
        }
        let node = b.config.node_name.clone();
        // Marked and not removed yet: what a failure takes back.
        let mut staying = std::mem::take(&mut marked.marked);
        let mut removing = Vec::new();
        for victim in &decision.victims {
            let victim_key = format!("{}/{}", victim.namespace, victim.name);
            if victim.terminating {
                // Already on its way out (an earlier preemption, or anyone's delete): as
                // upstream's executor, no second API call and no second Preempted Event.
                tracing::info!(victim = %victim_key, "victim already terminating; not evicted again");
            } else if marked.gone.contains(&victim.uid) {
                tracing::info!(victim = %victim_key, "victim already gone");
            } else {
                removing.push((victim, victim_key));
            }
        }
        // All at once, as kube-scheduler's executor removes its victims in parallel: with several
        // victims the last delete does not wait for the others' round trips. One that fails does
        // not stop the others (upstream's do not stop either once sent).
        let outcomes = futures::future::join_all(
            removing
                .iter()
                .map(|(victim, _)| effects::remove_victim(&b.client, &b.config, victim)),
        )
        .await;
        let mut removed = Vec::new();
        let mut failure = None;
        for ((victim, victim_key), outcome) in removing.into_iter().zip(outcomes) {
            if outcome.is_ok() {
                staying.remove(&victim.uid);
            }
            match outcome {
                Ok(VictimOutcome::Removed) => {
                    self.report.preempted.push(victim_key);
                    removed.push(victim);
                }
                Ok(VictimOutcome::AlreadyGone) => tracing::info!(victim = %victim_key, "victim already gone"),
                Err(error) => {
                    tracing::warn!(pod = %resize.key, victim = %victim_key, %error, "preemption failed");
                    failure.get_or_insert_with(|| format!("could not preempt {victim_key}: {error}"));
                }
            }
        }
        // The removed are on their way whatever happened to the others: each gets its Event.
        let preempted = removed.iter().map(|victim| {
            let regarding = effects::pod_reference(&victim.namespace, &victim.name, &victim.uid);
            let note = effects::preempted_note(&resize.uid, &node);
            b.event(
                regarding,
                Some(resizer.clone()),
                "Normal",
                reasons::PREEMPTED,
                actions::PREEMPTING,
                note,
            )
        });
        futures::future::join_all(preempted).await;
        // Counted whether or not another victim was refused: they are preempted all the same.
        b.metrics
            .preempted(b.config.preemption.as_str(), removed.len() as u64);
        if let Some(why) = failure {
            // Those not removed keep running: their marks are taken back.
            b.unmark(decision, &staying).await;
            b.failed(resizer, resize.generation, why.clone()).await;
            return Err(why);
        }
        let n = decision.victims.len();
        b.board.staged(&resize.key, Stage::Preempted);
        let note = format!(
            "Preempted {n} pod(s) on node {node} for this resize: {}",
            victim_list(decision)
        );
        b.event(
            resizer,
            None,
            "Normal",
            reasons::PREEMPTING_FOR_RESIZE,
            actions::PREEMPTING,
            note,
        )
        .await;
        Ok(())
    }

    /// In flight: later cycles follow it (`Backend::follow`) until the kubelet actuates it.
    async fn follow(&mut self, resize: &Resize, reservation: Reservation) {
        let (namespace, name) = resize.key.split_once('/').unwrap_or(("default", &resize.key));
        let flight = InFlight {
            namespace: namespace.to_string(),
            name: name.to_string(),
            reservation: reservation.id,
            victims: reservation.victims.len(),
            decided_at: Instant::now(),
        };
        self.backend.in_flight.insert(resize.uid.clone(), flight);
    }
}

/// The nominated store's Pods still waiting for this node: not bound yet (a Pod being bound may
/// still carry its nomination, and the node's store has it, or soon will) and not already in
/// the node's store.
fn nominated_pods(nominated: &[Arc<Pod>], on_node: &[Arc<Pod>], node_name: &str) -> Vec<Pod> {
    nominated
        .iter()
        .filter(|p| p.spec.as_ref().is_none_or(|s| s.node_name.is_none()))
        .filter(|p| crate::cluster_file::nominated_to(p) == Some(node_name))
        .filter(|p| !on_node.iter().any(|q| uid(q) == uid(p)))
        .map(|p| (**p).clone())
        .collect()
}

/// The kubelet has actuated a shrink to `to`: nothing pending and the Pod's allocated requests
/// are at most `to`.
fn shrink_actuated(pod: &Pod, to: headroom_node_model::Resources) -> bool {
    resize_completed(pod)
        && headroom_node_model::pod_requests_admitted(pod).is_ok_and(|admitted| admitted.fits_within(&to))
}

/// `namespace/name` of a Pod reference, as the board and the report key resizes.
fn reference_key(reference: &k8s_openapi::api::core::v1::ObjectReference) -> String {
    format!(
        "{}/{}",
        reference.namespace.as_deref().unwrap_or_default(),
        reference.name.as_deref().unwrap_or_default()
    )
}

fn victim_list(decision: &Decision) -> String {
    decision
        .victims
        .iter()
        .map(|v| format!("{}/{} (priority {})", v.namespace, v.name, v.priority))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kubelet has actuated the resize: no `PodResizePending` / `PodResizeInProgress` left, and
/// every container's `allocatedResources` equals its desired requests (cpu and memory).
pub fn resize_completed(pod: &Pod) -> bool {
    if resize_state(pod) != ResizeState::None {
        return false;
    }
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    spec.containers.iter().all(|container| {
        let desired = container.resources.as_ref().and_then(|r| r.requests.as_ref());
        let allocated = statuses
            .iter()
            .find(|s| s.name == container.name)
            .and_then(|s| s.allocated_resources.as_ref());
        [
            ("cpu", parse_cpu_millis as fn(&str) -> _),
            ("memory", parse_memory_bytes),
        ]
        .iter()
        .all(|(name, parse)| match desired.and_then(|d| d.get(*name)) {
            None => true,
            Some(want) => {
                let have = allocated
                    .and_then(|a| a.get(*name))
                    .and_then(|q| parse(&q.0).ok());
                parse(&want.0).ok().is_some_and(|want| have == Some(want))
            }
        })
    })
}
