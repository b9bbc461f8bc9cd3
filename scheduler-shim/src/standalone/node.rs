//! [`StandaloneNode`]: the store, the kubelet's resize handling and the link to headroomd behind
//! one handle, shared by the shim loop, the control API and the demo.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use headroom_client::{Headroomd, HeadroomdError};
use headroom_node_model::{Resources, pod_requests_admitted};
use headroom_proto::v1 as pb;
use headroomd::node::Embedded;
use headroomd::pipeline::{PodEntry, snapshot::PodRef};
use tokio::sync::Notify;
use tracing::Instrument as _;

use super::latency::{StepHistograms, StepLatencies};
use super::resize::{self, ActuationPlan, Admission};
use super::runtime::{self, pod_resources};
use super::store::{Store, pod_key};
use super::{NodeConfig, StandaloneError, verify};
use crate::cluster_file::parse_cluster;

/// What a resize request came to (the `Resize` RPC's answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeResult {
    /// `Completed`, `Deferred`, `Infeasible` or `Error`.
    pub status: &'static str,
    pub message: String,
    pub generation: i64,
}

/// Durations of the kubelet's part of a resize.
/// Step-latency records a node keeps (the histograms cover every resize).
pub const KEPT_LATENCIES: usize = 4_096;

/// How long `ApplyResize` waits for headroomd's snapshot to list a Pod the store just admitted
/// (the snapshot lags by about 100 ms).
const SNAPSHOT_CATCH_UP: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, Default)]
pub struct ActuationTimes {
    pub actuation: Duration,
    /// The actuator's own time, from the `ApplyResize` reply.
    pub cgroup_writes: Duration,
    pub verified: Duration,
}

/// `RPC: message` for a refusal, the whole error otherwise (headroomd unreachable).
pub(crate) fn rpc_error(rpc: &str, error: HeadroomdError) -> String {
    match error {
        HeadroomdError::Status { message, .. } => format!("{rpc}: {message}"),
        other => other.to_string(),
    }
}

pub struct StandaloneNode {
    pub config: NodeConfig,
    store: Mutex<Store>,
    /// headroomd in this process: the Pods it counts and their containers' resources.
    embedded: Embedded,
    headroomd: Headroomd,
    /// Wakes the shim loop (a resize went Deferred, a Pod went away).
    pub(crate) wake: Notify,
    /// The most recent resizes' step latencies (at most [`KEPT_LATENCIES`]), every resize's
    /// histograms, and how many were recorded in all.
    latencies: Mutex<(VecDeque<StepLatencies>, StepHistograms, u64)>,
    /// Pods shrunk in place, watched for pressure for a while after.
    pub(crate) aftercare: Mutex<Vec<crate::give_way::aftercare::Watched>>,
}

impl StandaloneNode {
    pub fn new(config: NodeConfig, embedded: Embedded) -> Result<Self, StandaloneError> {
        let histograms = StepHistograms::new().map_err(|e| StandaloneError::Invalid(e.to_string()))?;
        Ok(Self {
            store: Mutex::new(Store::default()),
            embedded,
            // In-process: a call takes as long as its work, and the daemon ends with this node.
            headroomd: Headroomd::new(config.headroomd_socket.clone()).with_timeout(None),
            wake: Notify::new(),
            latencies: Mutex::new((VecDeque::new(), histograms, 0)),
            aftercare: Mutex::new(Vec::new()),
            config,
        })
    }

    /// The store. Never held across an `.await`.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// headroomd (in this process), over its socket.
    pub fn headroomd(&self) -> &Headroomd {
        &self.headroomd
    }

    /// headroomd counts what the kubelet admitted for every Pod that is neither rejected nor being
    /// evicted (a victim's room belongs to the preemptor's reservation from the decision on).
    pub(crate) fn sync_pod_source(&self, store: &Store) {
        let entries = pod_source(store)
            .filter_map(|p| {
                let requests = pod_requests_admitted(&p.pod).ok()?;
                Some(PodEntry {
                    pod: PodRef {
                        namespace: p.pod.metadata.namespace.clone().unwrap_or_default(),
                        name: p.pod.metadata.name.clone().unwrap_or_default(),
                        uid: p.pod.metadata.uid.clone().unwrap_or_default(),
                    },
                    requests,
                    // Counted at the admitted size: no pending resize is in the count.
                    pending_resize: Resources::ZERO,
                })
            })
            .collect();
        self.embedded.set_pods(entries);
    }

    /// What headroomd counts as allocated once its Pod source has caught up with `store`.
    pub(crate) fn pod_source_total(store: &Store) -> Resources {
        pod_source(store)
            .filter_map(|p| pod_requests_admitted(&p.pod).ok())
            .fold(Resources::ZERO, Resources::saturating_add)
    }

    /// `kubectl apply -f`: PriorityClasses first, then Pods.
    pub fn apply_manifest(&self, yaml: &str) -> Result<Vec<String>, StandaloneError> {
        let objects = parse_cluster(yaml)?;
        let mut store = self.store();
        let mut results = Vec::new();
        for class in objects.priority_classes {
            let name = class.metadata.name.clone().unwrap_or_default();
            let verb = if store.priority_classes.contains_key(&name) {
                "configured"
            } else {
                "created"
            };
            store.priority_classes.insert(name.clone(), class);
            results.push(format!("priorityclass.scheduling.k8s.io/{name} {verb}"));
        }
        for node in &objects.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            results.push(format!("node/{name} ignored (this machine is the node)"));
        }
        for pdb in &objects.pdbs {
            let name = pdb.metadata.name.as_deref().unwrap_or_default();
            results.push(format!(
                "poddisruptionbudget.policy/{name} ignored (not supported standalone)"
            ));
        }
        let mut first_error = None;
        for pod in objects.pods {
            // The lock is let go between Pods: spawning a Pod's processes takes about a
            // millisecond, and 2,000 of them under one lock held every reader for seconds.
            drop(store);
            store = self.store();
            match store.create_pod(pod, &self.config) {
                Ok(line) => results.push(line),
                Err(e) => {
                    results.push(format!("error: {e}"));
                    first_error.get_or_insert(e);
                }
            }
        }
        for p in store.pods.values() {
            if let (Some(uid), Ok(containers)) = (&p.pod.metadata.uid, pod_resources(&p.pod)) {
                self.embedded.pod_created(uid, containers);
            }
        }
        self.sync_pod_source(&store);
        drop(store);
        self.wake.notify_one();
        match first_error {
            Some(e) if results.iter().all(|r| r.starts_with("error")) => Err(e),
            _ => Ok(results),
        }
    }

    /// `kubectl patch --subresource resize`, then the kubelet's admission; a resize that fits is
    /// actuated before this returns, a Deferred one is handed to the shim loop.
    pub async fn resize(
        &self,
        pod: &str,
        container: Option<&str>,
        cpu: Option<&str>,
        memory: Option<&str>,
    ) -> Result<ResizeResult, StandaloneError> {
        let key = pod_key(pod);
        let span = tracing::info_span!("resize", pod = %key, cpu, memory);
        self.resize_inner(key, container, cpu, memory)
            .instrument(span)
            .await
    }

    async fn resize_inner(
        &self,
        key: String,
        container: Option<&str>,
        cpu: Option<&str>,
        memory: Option<&str>,
    ) -> Result<ResizeResult, StandaloneError> {
        let (generation, admission) = {
            let mut store = self.store();
            let generation = resize::patch(&mut store, &key, container, cpu, memory)?;
            (generation, resize::admit(&mut store, &key, &self.config)?)
        };
        let result = |status, message| ResizeResult {
            status,
            message,
            generation,
        };
        Ok(match admission {
            Admission::NoResize => result("Completed", String::new()),
            Admission::Deferred { message } => {
                self.wake.notify_one();
                result("Deferred", message)
            }
            Admission::Infeasible { message } => result("Infeasible", message),
            Admission::Fits(plan) => match self.actuate(plan).await {
                Ok(_) => result("Completed", String::new()),
                Err(e) => result("Error", e),
            },
        })
    }

    /// Writes an allocated resize through headroomd's `ApplyResize` (which also releases the
    /// reservation it consumes), reads the cgroups back, and records the outcome on the Pod.
    pub(crate) async fn actuate(&self, plan: ActuationPlan) -> Result<ActuationTimes, String> {
        let started = Instant::now();
        let request = pb::ApplyResizeRequest {
            pod_uid: plan.uid.clone(),
            containers: plan
                .containers
                .iter()
                .map(|(name, r)| pb::ContainerResources {
                    name: name.clone(),
                    cpu_request_millis: i64::try_from(r.cpu_request_milli).ok(),
                    cpu_limit_millis: r.cpu_limit_milli.and_then(|v| i64::try_from(v).ok()),
                    memory_request_bytes: None,
                    memory_limit_bytes: r.memory_limit_bytes.and_then(|v| i64::try_from(v).ok()),
                })
                .collect(),
            pod: None,
            reservation_id: plan.reservation.clone().unwrap_or_default(),
        };
        let applied = self
            .apply_resize_known(request)
            .await
            .map(|reply| Duration::from_nanos(reply.total_ns))
            .map_err(|e| rpc_error("ApplyResize", e));
        let actuated = Instant::now();
        let cgroup_writes = applied.as_ref().map_or(Duration::ZERO, |d| *d);
        let verified =
            applied.and_then(|_| verify::cgroups_match(&self.config.roots, &plan.uid, &plan.containers));
        let done = Instant::now();
        if verified.is_err()
            && let Some(id) = &plan.reservation
        {
            // ApplyResize releases it only on success.
            let _ = self.headroomd.release(id).await;
        }
        let mut store = self.store();
        resize::finish(&mut store, &plan.key, verified.clone());
        self.sync_pod_source(&store);
        verified.map(|()| ActuationTimes {
            actuation: actuated - started,
            cgroup_writes,
            verified: done - actuated,
        })
    }

    /// `ApplyResize`, waiting (bounded) for headroomd's snapshot to catch up with the store: a
    /// Pod admitted here a moment ago is "not on this node" until the next snapshot.
    async fn apply_resize_known(
        &self,
        request: pb::ApplyResizeRequest,
    ) -> Result<pb::ApplyResizeResponse, HeadroomdError> {
        let deadline = Instant::now() + SNAPSHOT_CATCH_UP;
        loop {
            match self.headroomd.apply_resize(request.clone()).await {
                Err(HeadroomdError::Status {
                    code: tonic::Code::NotFound,
                    ..
                }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
    }

    /// headroomd forgets a Pod that is gone.
    pub(crate) fn forget(&self, uid: &str) {
        self.embedded.pod_gone(uid);
    }

    pub(crate) fn record_latency(&self, l: StepLatencies) {
        let mut guard = self
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.1.record(&l);
        guard.0.push_back(l);
        // A long-running node keeps histograms of everything but only the latest records.
        if guard.0.len() > KEPT_LATENCIES {
            guard.0.pop_front();
        }
        guard.2 += 1;
    }

    /// The latest preempting resizes' step latencies (at most [`KEPT_LATENCIES`]), oldest first.
    pub fn latencies(&self) -> Vec<StepLatencies> {
        let guard = self
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.0.iter().cloned().collect()
    }

    /// How many preempting resizes were recorded since the node started.
    pub fn latency_count(&self) -> u64 {
        self.latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .2
    }

    /// The record of the `index`-th preempting resize (from 0), if it is still kept.
    pub fn latency_at(&self, index: u64) -> Option<StepLatencies> {
        let guard = self
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = guard.2 - guard.0.len() as u64;
        let offset = usize::try_from(index.checked_sub(first)?).ok()?;
        guard.0.get(offset).cloned()
    }

    /// Histograms over all preempting resizes so far.
    pub fn histograms(&self) -> StepHistograms {
        let guard = self
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.1.clone()
    }

    /// Stops every Pod at once (SIGKILL), removes its cgroups and the roots. For shutdown, errors
    /// and Ctrl-C; blocking.
    pub fn cleanup(&self) {
        let mut store = self.store();
        for (_, mut p) in std::mem::take(&mut store.pods) {
            if let Some(mut rt) = p.runtime.take() {
                rt.kill_now();
            }
            if let Some(uid) = &p.pod.metadata.uid {
                self.embedded.pod_gone(uid);
            }
        }
        self.sync_pod_source(&store);
        runtime::remove_roots(&self.config.roots);
    }
}

/// The Pods headroomd's Pod source lists: running, not being evicted.
fn pod_source(store: &Store) -> impl Iterator<Item = &super::store::StoredPod> {
    store
        .pods
        .values()
        .filter(|p| p.runtime.is_some() && !p.terminating)
}
