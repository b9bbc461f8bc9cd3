//! `headroom.v1.Standalone`: the control API `headroomctl resize | events | get pods | explain`
//! talks to, on the shim's own Unix socket (mode 0600: only root may resize Pods).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use headroom_node_model::{ResizeState, resize_state};
use headroom_node_model::{format_cpu_millis, format_memory_bytes, parse_cpu_millis, parse_memory_bytes};
use headroom_proto::v1::standalone_server::{Standalone, StandaloneServer};
use headroom_proto::v1::{self as pb};
use k8s_openapi::api::core::v1::Pod;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use super::node::StandaloneNode;
use super::store::pod_key;
use super::{StandaloneError, explain};

pub struct StandaloneApi {
    node: Arc<StandaloneNode>,
}

fn status(e: StandaloneError) -> Status {
    match e {
        StandaloneError::NotFound(m) => Status::not_found(m),
        StandaloneError::Headroomd(m) => Status::unavailable(m),
        other => Status::invalid_argument(other.to_string()),
    }
}

fn timestamp(t: jiff::Timestamp) -> headroom_proto::Timestamp {
    headroom_proto::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}

fn non_empty(s: &str) -> Option<&str> {
    Some(s).filter(|s| !s.is_empty())
}

/// Sum of one resource over the containers, from `get` (spec requests or allocatedResources).
fn sum(pod: &Pod, resource: &str, allocated: bool) -> String {
    let parse = if resource == "cpu" {
        parse_cpu_millis
    } else {
        parse_memory_bytes
    };
    let mut total = 0i64;
    let spec = pod.spec.iter().flat_map(|s| s.containers.iter());
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    let values: Vec<String> = if allocated {
        statuses
            .filter_map(|c| c.allocated_resources.as_ref()?.get(resource).map(|q| q.0.clone()))
            .collect()
    } else {
        spec.filter_map(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get(resource)
                .map(|q| q.0.clone())
        })
        .collect()
    };
    for v in &values {
        total = total.saturating_add(parse(v).unwrap_or(0));
    }
    match (values.as_slice(), resource) {
        ([], _) => String::new(),
        ([one], _) => one.clone(),
        (_, "cpu") => format_cpu_millis(total),
        _ => format_memory_bytes(total),
    }
}

fn view(pod: &Pod, pids: Vec<u32>) -> pb::StandalonePod {
    let resize = match resize_state(pod) {
        ResizeState::None => "",
        ResizeState::Deferred { .. } => "Deferred",
        ResizeState::Infeasible { .. } => "Infeasible",
        ResizeState::InProgress => "InProgress",
        ResizeState::Error { .. } => "Error",
        ResizeState::PendingOther { .. } => "Pending",
    };
    pb::StandalonePod {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        cpu_request: sum(pod, "cpu", false),
        allocated_cpu: sum(pod, "cpu", true),
        memory_request: sum(pod, "memory", false),
        allocated_memory: sum(pod, "memory", true),
        phase: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        resize: resize.into(),
        start_time: pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| timestamp(t.0)),
        pids,
    }
}

#[tonic::async_trait]
impl Standalone for StandaloneApi {
    async fn apply_manifest(
        &self,
        request: Request<pb::ApplyManifestRequest>,
    ) -> Result<Response<pb::ApplyManifestResponse>, Status> {
        let span = tracing::info_span!("ApplyManifest");
        // Parsing and process spawns block: on a blocking thread, so that the async workers
        // (headroomd's health among their tasks) keep answering.
        let node = self.node.clone();
        let yaml = request.into_inner().yaml;
        let results = tokio::task::spawn_blocking(move || span.in_scope(|| node.apply_manifest(&yaml)))
            .await
            .map_err(|e| Status::internal(format!("apply the manifest: {e}")))?
            .map_err(status)?;
        Ok(Response::new(pb::ApplyManifestResponse { results }))
    }

    async fn resize(
        &self,
        request: Request<pb::ResizePodRequest>,
    ) -> Result<Response<pb::ResizePodResponse>, Status> {
        let r = request.into_inner();
        let span = tracing::info_span!("Resize", pod = %r.pod);
        async {
            if r.cpu.is_empty() && r.memory.is_empty() {
                return Err(Status::invalid_argument("give a new cpu and/or memory"));
            }
            let result = self
                .node
                .resize(
                    &r.pod,
                    non_empty(&r.container),
                    non_empty(&r.cpu),
                    non_empty(&r.memory),
                )
                .await
                .map_err(status)?;
            Ok(Response::new(pb::ResizePodResponse {
                status: result.status.into(),
                message: result.message,
                generation: result.generation,
            }))
        }
        .instrument(span)
        .await
    }

    async fn get_pods(
        &self,
        _request: Request<pb::GetPodsRequest>,
    ) -> Result<Response<pb::GetPodsResponse>, Status> {
        let _e = tracing::info_span!("GetPods").entered();
        let store = self.node.store();
        let pods = store
            .pods
            .values()
            .map(|p| view(&p.pod, p.runtime.as_ref().map(|r| r.pids()).unwrap_or_default()))
            .collect();
        Ok(Response::new(pb::GetPodsResponse { pods }))
    }

    async fn list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Result<Response<pb::ListEventsResponse>, Status> {
        let name = request.get_ref().involved_object_name.clone();
        let _e = tracing::info_span!("ListEvents", name = %name).entered();
        let events = self.node.store().events.list(non_empty(&name));
        let events = events
            .iter()
            .map(|e| pb::PodEvent {
                r#type: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                object: format!("pod/{}", e.involved_object.name.as_deref().unwrap_or_default()),
                message: e.message.clone().unwrap_or_default(),
                first_timestamp: e.first_timestamp.as_ref().map(|t| timestamp(t.0)),
                last_timestamp: e.last_timestamp.as_ref().map(|t| timestamp(t.0)),
                count: e.count.unwrap_or(1),
                source: e
                    .source
                    .as_ref()
                    .and_then(|s| s.component.clone())
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Response::new(pb::ListEventsResponse {
            events,
            now: Some(timestamp(jiff::Timestamp::now())),
        }))
    }

    async fn explain(
        &self,
        request: Request<pb::ExplainRequest>,
    ) -> Result<Response<pb::ExplainResponse>, Status> {
        let key = pod_key(&request.get_ref().pod);
        let _e = tracing::info_span!("Explain", pod = %key).entered();
        let (outcome, text) = explain::explain_pod(&self.node, &key).map_err(status)?;
        Ok(Response::new(pb::ExplainResponse { outcome, text }))
    }
}

/// Binds `path` with mode 0600 (bound under a temporary name, chmod'ed, then renamed into place,
/// so it is never reachable with a wider mode). A stale socket is replaced; a live one refused.
fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use (is another headroom-shim running?)", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

/// A running control API.
pub struct ApiHandle {
    pub path: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl ApiHandle {
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut self.task).await;
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves the control API on `path`.
pub fn serve(path: &Path, node: Arc<StandaloneNode>) -> std::io::Result<ApiHandle> {
    let listener = bind(path)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let router = tonic::transport::Server::builder()
        .add_service(StandaloneServer::new(StandaloneApi { node }).max_decoding_message_size(4 << 20));
    let task = tokio::spawn(
        router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
            let _ = rx.await;
        }),
    );
    tracing::info!(socket = %path.display(), "standalone control API serving");
    Ok(ApiHandle {
        path: path.to_path_buf(),
        shutdown: Some(tx),
        task,
    })
}
