//! Cluster mode's Node and Pod source (`headroomd serve --pods-from kube`): the node's
//! allocatable from its Node object and the Pods bound to it, both from the API server, fed into
//! the pipeline's [`InMemoryPodSource`] (so the cgroup resolver knows the same Pods).
//!
//! Two parts:
//! - plain functions from API objects to the model ([`node_allocatable`], [`pod_entry`],
//!   [`pod_entries`]): `status.allocatable` through the node model's quantity parsing, Pod
//!   requests through [`headroom_node_model::pod_requests`] (the scheduler's count, a resizing Pod
//!   at `max(desired, allocated, actual)`), terminal Pods (`Succeeded`/`Failed`) left out as the
//!   scheduler leaves them out;
//! - [`spawn`], the only effectful part: two kube-rs watchers (the Node by
//!   `metadata.name=NAME`, Pods by `spec.nodeName=NAME`), retried with kube's default exponential
//!   backoff. It takes any [`kube::Client`], so tests hand it one over a mock service.
//!
//! Until both watches have listed, and from a watch error until the next event, the source is
//! down: the node figures are served with `stale = true` (after the pipeline's `stale_after`).
//! Before the Node is first read the allocatable is zero, so nothing can be reserved on a guess.
//! Nothing from the API server panics: an unreadable allocatable keeps the last good one, a Pod
//! whose requests cannot be counted is counted as filling the node (never under-counted), and
//! both are logged.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use futures::StreamExt as _;
use headroom_node_model::{
    ModelError, QuantityError, Resources, parse_cpu_millis, parse_memory_bytes, pod_requests,
    pod_requests_admitted,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    runtime::{WatchStreamExt as _, reflector, watcher},
};
use tokio::task::JoinSet;
use tracing::Instrument as _;

use crate::pipeline::{InMemoryPodSource, PodEntry, PodSource as _, snapshot::PodRef};

/// Every `(API group, resource, verb)` the source calls: list and watch on nodes (this node, by
/// `metadata.name`) and pods (this node's, by `spec.nodeName`). headroomd's ClusterRole grants
/// exactly these (checked against deploy/ by `scheduler-shim/tests/deploy_rbac.rs`).
pub const API_GRANTS: &[(&str, &str, &str)] = &[
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
];

/// Where headroomd's Pods and allocatable come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PodsFrom {
    /// The configured allocatable and no Pod source of its own (standalone, tests).
    #[default]
    Static,
    /// The API server: this node's Node object and the Pods bound to it.
    Kube,
}

/// Why an API object could not be mapped, or the source not started.
#[derive(Debug, thiserror::Error)]
pub enum KubeSourceError {
    /// The Node reports no allocatable for a resource.
    #[error("node {node}: status.allocatable.{resource} is missing")]
    MissingAllocatable {
        /// Node name.
        node: String,
        /// `cpu` or `memory`.
        resource: &'static str,
    },
    /// The Node's allocatable is not a quantity headroom understands.
    #[error("node {node}: status.allocatable.{resource} {value:?}: {source}")]
    BadAllocatable {
        /// Node name.
        node: String,
        /// `cpu` or `memory`.
        resource: &'static str,
        /// The quantity as served.
        value: String,
        /// Why it was refused.
        source: QuantityError,
    },
    /// A Pod's requests cannot be counted.
    #[error("pod {pod}: {source}")]
    Requests {
        /// `namespace/name`.
        pod: String,
        /// Why.
        source: ModelError,
    },
    /// `--pods-from kube` without a node name.
    #[error("--pods-from kube needs the node's name: give --kube-node or set NODE_NAME")]
    NoNodeName,
    /// The Kubernetes client could not be built (no in-cluster config or kubeconfig).
    #[error("kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// The node's allocatable CPU (millicores) and memory (bytes) from `status.allocatable`.
pub fn node_allocatable(node: &Node) -> Result<Resources, KubeSourceError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let get = |resource: &'static str| {
        allocatable
            .and_then(|a| a.get(resource))
            .map(|q| q.0.clone())
            .ok_or_else(|| KubeSourceError::MissingAllocatable {
                node: name.clone(),
                resource,
            })
    };
    let bad = |resource: &'static str, value: &str| {
        let node = name.clone();
        let value = value.to_string();
        move |source| KubeSourceError::BadAllocatable {
            node,
            resource,
            value,
            source,
        }
    };
    let cpu = get("cpu")?;
    let memory = get("memory")?;
    let cpu_millis = parse_cpu_millis(&cpu).map_err(bad("cpu", &cpu))?;
    let memory_bytes = parse_memory_bytes(&memory).map_err(bad("memory", &memory))?;
    Ok(Resources::new(cpu_millis, memory_bytes))
}

/// Whether the Pod has finished for good (`Succeeded` or `Failed`): the scheduler no longer
/// counts it against the node.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The Pod as the node counts it (`None` for a terminal Pod), or why its requests cannot be
/// counted.
pub fn pod_entry(pod: &Pod) -> Result<Option<PodEntry>, KubeSourceError> {
    if is_terminal(pod) {
        return Ok(None);
    }
    let pod_ref = pod_ref(pod);
    let requests = pod_requests(pod).map_err(|source| KubeSourceError::Requests {
        pod: format!("{}/{}", pod_ref.namespace, pod_ref.name),
        source,
    })?;
    let admitted = pod_requests_admitted(pod).map_err(|source| KubeSourceError::Requests {
        pod: format!("{}/{}", pod_ref.namespace, pod_ref.name),
        source,
    })?;
    Ok(Some(PodEntry {
        pod: pod_ref,
        requests,
        pending_resize: requests.saturating_sub(admitted),
    }))
}

/// The Pods that count against the node, in uid order (whatever order the store holds them in,
/// the same Pods make the same set). A Pod whose requests cannot be counted (quantities the API
/// server should never have stored) is logged and counted as filling the node: headroom must not
/// be over-stated on input it cannot read.
pub fn pod_entries<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<PodEntry> {
    let mut entries: Vec<PodEntry> = pods
        .into_iter()
        .filter_map(|pod| match pod_entry(pod) {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(%error, "counting the Pod as filling the node");
                Some(PodEntry {
                    pod: pod_ref(pod),
                    requests: Resources::new(i64::MAX, i64::MAX),
                    pending_resize: Resources::ZERO,
                })
            }
        })
        .collect();
    entries.sort_by(|a, b| a.pod.uid.cmp(&b.pod.uid));
    entries
}

/// The node name for `--pods-from kube`: the flag, else `NODE_NAME` (the downward API).
pub fn resolve_node_name(flag: Option<&str>, env: Option<String>) -> Result<String, KubeSourceError> {
    flag.map(str::to_string)
        .or(env)
        .filter(|n| !n.is_empty())
        .ok_or(KubeSourceError::NoNodeName)
}

/// The running watches. Dropping it stops them.
pub struct KubeSource {
    tasks: JoinSet<()>,
}

impl KubeSource {
    /// Stops both watches.
    pub async fn shutdown(mut self) {
        self.tasks.shutdown().await;
    }
}

/// Which watches are up; the sink is live when both are.
#[derive(Default)]
struct Liveness {
    node: AtomicBool,
    pods: AtomicBool,
}

impl Liveness {
    fn set(&self, which: &AtomicBool, up: bool, sink: &InMemoryPodSource) {
        which.store(up, Ordering::Release);
        sink.set_live(self.node.load(Ordering::Acquire) && self.pods.load(Ordering::Acquire));
    }
}

/// Told the Pods counted on the node after every change, so per-Pod state kept elsewhere (the
/// actuator's open cgroup files and intent records) goes with the Pods that left: a Pod deleted
/// while the watch was down is seen only as missing from the next list, never as a Delete.
pub type OnPods = Arc<dyn Fn(&[PodEntry]) + Send + Sync>;

/// Starts watching `node_name`'s Node and Pods into `sink` (inside a Tokio runtime). The sink's
/// allocatable is zero and its figures stale until the watches have listed.
pub fn spawn(
    client: kube::Client,
    node_name: &str,
    sink: Arc<InMemoryPodSource>,
    on_pods: Option<OnPods>,
) -> KubeSource {
    prime(&sink);
    let live = Arc::new(Liveness::default());
    let mut tasks = JoinSet::new();
    tasks.spawn(
        watch_node(client.clone(), node_name.to_string(), sink.clone(), live.clone())
            .instrument(tracing::info_span!("kube_watch", resource = "nodes", node = %node_name)),
    );
    tasks.spawn(
        watch_pods(client, node_name.to_string(), sink, live, on_pods)
            .instrument(tracing::info_span!("kube_watch", resource = "pods", node = %node_name)),
    );
    KubeSource { tasks }
}

/// Puts `sink` in the state before anything is listed: no Pods, allocatable zero, down (stale).
/// Call it before the pipeline reads the sink, so the configured allocatable is never served.
pub fn prime(sink: &InMemoryPodSource) {
    sink.set_live(false);
    sink.set_allocatable(Some(Resources::ZERO));
    sink.set(Vec::new());
}

/// Applies the Node (or its absence) to the sink.
fn apply_node(node_name: &str, node: Option<&Node>, sink: &InMemoryPodSource) {
    match node.map(node_allocatable) {
        Some(Ok(allocatable)) => {
            tracing::debug!(%allocatable, "node allocatable");
            sink.set_allocatable(Some(allocatable));
        }
        Some(Err(error)) => tracing::warn!(%error, "keeping the last allocatable read"),
        None => {
            tracing::warn!(node = %node_name, "node not found: allocatable is zero until it is");
            sink.set_allocatable(Some(Resources::ZERO));
        }
    }
}

async fn watch_node(
    client: kube::Client,
    node_name: String,
    sink: Arc<InMemoryPodSource>,
    live: Arc<Liveness>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    let stream = watcher(Api::<Node>::all(client), config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    // The Node seen in the current (re)list, applied once the list is complete.
    let mut listed: Option<Node> = None;
    let mut cycle = 0u64;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => {
                cycle += 1;
                listed = None;
            }
            Ok(watcher::Event::InitApply(node)) => listed = Some(node),
            Ok(watcher::Event::InitDone) => {
                let _cycle = tracing::info_span!("list", cycle).entered();
                apply_node(&node_name, listed.as_ref(), &sink);
                tracing::info!(found = listed.is_some(), "node listed");
                live.set(&live.node, true, &sink);
            }
            Ok(watcher::Event::Apply(node)) => {
                apply_node(&node_name, Some(&node), &sink);
                live.set(&live.node, true, &sink);
            }
            Ok(watcher::Event::Delete(_)) => {
                apply_node(&node_name, None, &sink);
                live.set(&live.node, true, &sink);
            }
            Err(error) => {
                // Retried by the watcher with backoff; a 410 re-lists.
                tracing::warn!(%error, "node watch failed; retrying with backoff (figures go stale)");
                live.set(&live.node, false, &sink);
            }
        }
    }
}

/// Hands `entries` to `sink` when they count differently from the set it holds, and only then
/// tells `on_pods`; whether they did. Most Pod events change nothing the node counts (a status
/// condition, an IP, a container started): a new set for those would make the aggregator publish
/// a snapshot to every `WatchHeadroom` subscriber, the shim among them, just as the shim decides
/// on the same event.
fn hand_on(sink: &InMemoryPodSource, entries: Vec<PodEntry>, on_pods: Option<&OnPods>) -> bool {
    if !sink.set_if_changed(entries) {
        return false;
    }
    if let Some(on_pods) = on_pods {
        on_pods(&sink.pods().pods);
    }
    true
}

async fn watch_pods(
    client: kube::Client,
    node_name: String,
    sink: Arc<InMemoryPodSource>,
    live: Arc<Liveness>,
    on_pods: Option<OnPods>,
) {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let (store, writer) = reflector::store::<Pod>();
    let stream = watcher(Api::<Pod>::all(client), config)
        .default_backoff()
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let publish = |sink: &InMemoryPodSource| {
        let pods = store.state();
        let entries = pod_entries(pods.iter().map(|p| &**p));
        tracing::debug!(pods = pods.len(), counted = entries.len(), "pods");
        hand_on(sink, entries, on_pods.as_ref());
    };
    let mut cycle = 0u64;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => cycle += 1,
            Ok(watcher::Event::InitApply(_)) => {}
            Ok(watcher::Event::InitDone) => {
                let _cycle = tracing::info_span!("list", cycle).entered();
                publish(&sink);
                tracing::info!(pods = store.len(), "pods listed");
                live.set(&live.pods, true, &sink);
            }
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                publish(&sink);
                live.set(&live.pods, true, &sink);
            }
            Err(error) => {
                tracing::warn!(%error, "pod watch failed; retrying with backoff (figures go stale)");
                live.set(&live.pods, false, &sink);
            }
        }
    }
}

#[cfg(test)]
mod tests;
