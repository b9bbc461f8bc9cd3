//! Watches into reflector stores. Each watcher lists, then watches from the list's
//! `resourceVersion`; a dropped watch is resumed from the last seen version, a `410 Gone` re-lists,
//! and errors are retried with kube's default exponential backoff. Every change wakes the
//! reconciler through one `Notify`.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::Instrument as _;

use super::rbac::{self, ApiCall, verb};
use super::{KubeError, Metrics};

/// The reflector stores the reconciler reads, and the signal that any of them changed.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    /// Pods the scheduler nominated to this node and has not bound yet (field selector
    /// `status.nominatedNodeName`): they count against resizes of lower or equal priority.
    pub nominated: Store<Pod>,
    pub nodes: Store<Node>,
    pub namespaces: Store<Namespace>,
    pub priority_classes: Store<PriorityClass>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub changed: Arc<Notify>,
}

impl Stores {
    /// Waits until every watch has completed its first list.
    pub async fn wait_until_ready(&self) -> Result<(), KubeError> {
        let not_ready = |what| move |_| KubeError::StoreNotReady(what);
        self.pods.wait_until_ready().await.map_err(not_ready("pods"))?;
        self.nominated
            .wait_until_ready()
            .await
            .map_err(not_ready("nominated pods"))?;
        self.nodes.wait_until_ready().await.map_err(not_ready("nodes"))?;
        self.namespaces
            .wait_until_ready()
            .await
            .map_err(not_ready("namespaces"))?;
        self.priority_classes
            .wait_until_ready()
            .await
            .map_err(not_ready("priorityclasses"))?;
        self.pdbs
            .wait_until_ready()
            .await
            .map_err(not_ready("poddisruptionbudgets"))?;
        Ok(())
    }
}

/// Starts the six watches; the tasks live in the returned `JoinSet`.
pub fn start(
    client: &kube::Client,
    node_name: &str,
    metrics: Arc<Metrics>,
) -> Result<(Stores, JoinSet<()>), KubeError> {
    let changed = Arc::new(Notify::new());
    let mut tasks = JoinSet::new();
    let on_node = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let nominated_here = watcher::Config::default().fields(&format!("status.nominatedNodeName={node_name}"));
    let this_node = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    let everything = watcher::Config::default();
    let stores = Stores {
        pods: reflect(
            Api::all(client.clone()),
            &rbac::PODS_WATCH,
            None,
            on_node,
            &changed,
            &metrics,
            &mut tasks,
        )?,
        nominated: reflect(
            Api::all(client.clone()),
            &rbac::PODS_WATCH,
            Some("pods_nominated"),
            nominated_here,
            &changed,
            &metrics,
            &mut tasks,
        )?,
        nodes: reflect(
            Api::all(client.clone()),
            &rbac::NODES_WATCH,
            None,
            this_node,
            &changed,
            &metrics,
            &mut tasks,
        )?,
        namespaces: reflect(
            Api::all(client.clone()),
            &rbac::NAMESPACES_WATCH,
            None,
            everything.clone(),
            &changed,
            &metrics,
            &mut tasks,
        )?,
        priority_classes: reflect(
            Api::all(client.clone()),
            &rbac::PRIORITY_CLASSES_WATCH,
            None,
            everything.clone(),
            &changed,
            &metrics,
            &mut tasks,
        )?,
        pdbs: reflect(
            Api::all(client.clone()),
            &rbac::PDBS_WATCH,
            None,
            everything,
            &changed,
            &metrics,
            &mut tasks,
        )?,
        changed,
    };
    Ok((stores, tasks))
}

/// `name` labels the watch in metrics and logs: the RBAC call's resource, unless one resource
/// has two watches (the node's Pods and those nominated to it).
fn reflect<K>(
    api: Api<K>,
    call: &'static ApiCall,
    name: Option<&'static str>,
    config: watcher::Config,
    changed: &Arc<Notify>,
    metrics: &Arc<Metrics>,
    tasks: &mut JoinSet<()>,
) -> Result<Store<K>, KubeError>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    // The watcher lists, then watches: both verbs must be in the table.
    call.check(verb::LIST)?;
    call.check(verb::WATCH)?;
    let (store, writer) = reflector::store();
    let stream = watcher(api, config).default_backoff().reflect(writer);
    let changed = changed.clone();
    let metrics = metrics.clone();
    let resource = name.unwrap_or(call.resource);
    let span = tracing::info_span!("watch", resource);
    tasks.spawn(
        async move {
            let mut stream = std::pin::pin!(stream);
            let mut listed = false;
            while let Some(event) = stream.next().await {
                if event.is_ok() {
                    metrics.watch_ok(resource);
                }
                match event {
                    Ok(watcher::Event::Init) => {
                        metrics.watch_listed(resource);
                        if listed {
                            // Only after a 410 Gone or a list that failed part-way.
                            tracing::info!("re-listing: the watch could not resume where it was");
                        }
                    }
                    Ok(watcher::Event::InitApply(_)) => {}
                    Ok(watcher::Event::InitDone) => {
                        if listed {
                            tracing::info!("re-listed: in step again");
                        } else {
                            tracing::debug!("listed");
                        }
                        listed = true;
                        changed.notify_one();
                    }
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => changed.notify_one(),
                    Err(error) => {
                        // Retried with backoff by the watcher itself; a 410 re-lists.
                        metrics.watch_error(resource);
                        tracing::warn!(%error, "watch failed; retrying with backoff");
                    }
                }
            }
        }
        .instrument(span),
    );
    Ok(store)
}
