//! The Kubernetes backend end to end against kube's mock service: a `tower_test::mock::pair`
//! behind `kube::Client::new(service, "default")`, answering with JSON exactly as the API server
//! returns it (lists with `metadata.resourceVersion` and kind-less items, watch events
//! `{"type":"ADDED","object":{...}}`, `BOOKMARK`, and a `410 Expired` `ERROR` event).
//!
//! No API server can run on these machines (and unit tests must not contact a cluster): this mock is
//! the whole "cluster". It routes by method and path, keeps watch streams open until the test
//! pushes events or drops them, and records every request so that the test can check the order of
//! the effects and that each request is an entry of `rbac::API_CALLS`.
//!
//! headroomd, on the other hand, is real in the `mock_apiserver_real_headroomd_*` tests: its
//! pipeline and gRPC server run in-process on a temporary Unix socket (`headroomd::node::Daemon`),
//! set up as `headroomd serve` is on a cluster node (Pods known from their cgroups, none counted
//! from a Pod source), with a stand-in for its collector feeding cgroup readings every 50 ms.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use headroom_common::CgroupKey;
use headroom_node_model::{Resources, resize_state};
use headroom_proto::v1 as pb;
use headroom_shim::kube::board::Stage;
use headroom_shim::kube::rbac::API_CALLS;
use headroom_shim::kube::reservations::{BoxFuture, Reserve};
use headroom_shim::kube::{
    Backend, KubeConfig, LocalLedger, Metrics, NodeLedger, PreemptionMode, ReservationError, Reservations,
};
use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd};
use headroomd::pipeline::{CgroupFiles, CgroupOwner, CpuStat, PipelineInput, PodRef};
use headroomd::server::AccessPolicy;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, StreamBody};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::sync::mpsc;

type MockBody = UnsyncBoxBody<Bytes, Infallible>;
type Handle = tower_test::mock::Handle<Request<kube::client::Body>, Response<MockBody>>;

const NODE: &str = "node-a";
const HIGH_UID: &str = "7d3e5c1a-2b4f-4e8a-9c6d-1f0e2a3b4c5d";
const LOW_UID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const CRITICAL_UID: &str = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b";

// === Real API JSON ===

#[allow(clippy::too_many_arguments)] // a fixture: each argument is one field of the real JSON
fn pod(
    name: &str,
    uid: &str,
    rv: &str,
    class: &str,
    priority: i32,
    cpu_spec: &str,
    cpu_alloc: &str,
    conditions: Value,
) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": "default", "uid": uid, "resourceVersion": rv, "generation": 2,
            "creationTimestamp": "2026-07-01T10:00:00Z", "labels": {"app": name}
        },
        "spec": {
            "containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu_spec, "memory": "1Gi"}, "limits": {"cpu": cpu_spec, "memory": "1Gi"}},
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": NODE, "schedulerName": "default-scheduler",
            "priorityClassName": class, "priority": priority, "preemptionPolicy": "PreemptLowerPriority",
            "enableServiceLinks": true,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.11", "podIP": "10.244.1.7", "qosClass": "Guaranteed",
            "startTime": "2026-07-01T10:00:01Z", "observedGeneration": 2,
            "conditions": conditions,
            "containerStatuses": [{
                "name": "app", "ready": true, "restartCount": 0, "started": true,
                "image": "registry.k8s.io/pause:3.10", "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
                "containerID": format!("containerd://{}", uid.replace('-', "")),
                "state": {"running": {"startedAt": "2026-07-01T10:00:02Z"}},
                "allocatedResources": {"cpu": cpu_alloc, "memory": "1Gi"},
                "resources": {"requests": {"cpu": cpu_alloc, "memory": "1Gi"}, "limits": {"cpu": cpu_alloc, "memory": "1Gi"}}
            }]
        }
    })
}

fn ready_conditions() -> Value {
    json!([
        {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:00:03Z"},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:00:00Z"}
    ])
}

fn with_condition(type_: &str, reason: &str, message: &str) -> Value {
    let mut c = ready_conditions();
    let mut cond = json!({"type": type_, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:05:00Z", "observedGeneration": 2});
    if !reason.is_empty() {
        cond["reason"] = json!(reason);
        cond["message"] = json!(message);
    }
    c.as_array_mut().unwrap().push(cond);
    c
}

fn low() -> Value {
    pod(
        "low-priority-pod",
        LOW_UID,
        "1000",
        "low-priority",
        1000,
        "3",
        "3",
        ready_conditions(),
    )
}

fn high_running() -> Value {
    pod(
        "high-priority-pod",
        HIGH_UID,
        "1000",
        "high-priority",
        10000,
        "4",
        "4",
        ready_conditions(),
    )
}

fn high_deferred() -> Value {
    let deferred = with_condition(
        "PodResizePending",
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 6000, used: 3000, capacity: 8000",
    );
    pod(
        "high-priority-pod",
        HIGH_UID,
        "1002",
        "high-priority",
        10000,
        "6",
        "4",
        deferred,
    )
}

fn high_in_progress() -> Value {
    pod(
        "high-priority-pod",
        HIGH_UID,
        "1010",
        "high-priority",
        10000,
        "6",
        "6",
        with_condition("PodResizeInProgress", "", ""),
    )
}

fn high_done() -> Value {
    pod(
        "high-priority-pod",
        HIGH_UID,
        "1011",
        "high-priority",
        10000,
        "6",
        "6",
        ready_conditions(),
    )
}

/// A third Pod, of higher priority than both: 1 CPU running, or resized to 2 and Deferred.
fn critical(deferred: bool) -> Value {
    let (rv, cpu_spec, conditions) = if deferred {
        (
            "1005",
            "2",
            with_condition(
                "PodResizePending",
                "Deferred",
                "Node didn't have enough resource: cpu, requested: 2000, used: 7000, capacity: 8000",
            ),
        )
    } else {
        ("1000", "1", ready_conditions())
    };
    pod(
        "critical-pod",
        CRITICAL_UID,
        rv,
        "critical-priority",
        50000,
        cpu_spec,
        "1",
        conditions,
    )
}

fn node() -> Value {
    json!({
        "metadata": {"name": NODE, "uid": "5f4e3d2c-1b0a-4f9e-8d7c-6b5a4f3e2d1c", "resourceVersion": "900",
                     "creationTimestamp": "2026-06-30T08:00:00Z",
                     "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "8", "memory": "32865360Ki", "pods": "110", "ephemeral-storage": "102626232Ki"},
            "allocatable": {"cpu": "8", "memory": "32762960Ki", "pods": "110", "ephemeral-storage": "94580335255"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-07-01T10:04:00Z",
                            "lastTransitionTime": "2026-06-30T08:01:00Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": NODE}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "4c4c4544004b3510804cb7c04f4d3332", "systemUUID": "4c4c4544-004b-3510-804c-b7c04f4d3332",
                         "bootID": "b2e1f0d4-9c8b-4a7e-8f6d-5c4b3a2f1e0d", "kernelVersion": "6.12.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://2.1.0", "kubeletVersion": "v1.37.0", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"}
        }
    })
}

fn list(kind: &str, api_version: &str, rv: &str, items: Vec<Value>) -> Value {
    // The API server leaves kind and apiVersion off list items.
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut i| {
            if let Some(o) = i.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            i
        })
        .collect();
    json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": rv}, "items": items})
}

fn priority_classes() -> Value {
    let pc = |name: &str, value: i64, rv: &str| {
        json!({"metadata": {"name": name, "uid": format!("pc-{name}"), "resourceVersion": rv, "generation": 1,
                            "creationTimestamp": "2026-06-30T08:00:00Z"},
               "value": value, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"})
    };
    list(
        "PriorityClassList",
        "scheduling.k8s.io/v1",
        "950",
        vec![
            pc("critical-priority", 50000, "939"),
            pc("high-priority", 10000, "940"),
            pc("low-priority", 1000, "941"),
            pc("system-cluster-critical", 2000000000, "60"),
            pc("system-node-critical", 2000001000, "61"),
        ],
    )
}

fn pdbs() -> Value {
    list(
        "PodDisruptionBudgetList",
        "policy/v1",
        "960",
        vec![json!({
            "metadata": {"name": "web-pdb", "namespace": "web", "uid": "pdb-1", "resourceVersion": "955", "generation": 1,
                         "creationTimestamp": "2026-06-30T09:00:00Z"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
                       "conditions": [{"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                                       "observedGeneration": 1, "lastTransitionTime": "2026-06-30T09:00:05Z"}]}
        })],
    )
}

fn namespaces() -> Value {
    let ns = |name: &str, labels: Value| {
        json!({"metadata": {"name": name, "uid": format!("ns-{name}"), "resourceVersion": "20", "creationTimestamp": "2026-06-30T08:00:00Z",
                            "labels": labels},
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    };
    list(
        "NamespaceList",
        "v1",
        "970",
        vec![
            ns("default", json!({"kubernetes.io/metadata.name": "default"})),
            ns(
                "headroom-system",
                json!({"kubernetes.io/metadata.name": "headroom-system", "headroom.io/preemption": "disabled"}),
            ),
            ns("web", json!({"kubernetes.io/metadata.name": "web"})),
        ],
    )
}

fn gone() -> Value {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "too old resource version: 1002 (1009)", "reason": "Expired", "code": 410}})
}

// === The mock API server ===

#[derive(Clone, Debug)]
struct Recorded {
    method: String,
    path: String,
    query: String,
    body: Value,
    /// For a request that changes something, with a real headroomd: the reservation ids in its
    /// ledger (`GetHeadroom`) at the moment the request reached this API server.
    reservations: Option<Vec<String>>,
}

impl Recorded {
    /// (group, resource[/subresource], verb), as RBAC sees this request.
    /// A list or watch of the Pods nominated to a node (field selector `status.nominatedNodeName`).
    fn nominated_pods(&self) -> bool {
        self.path == "/api/v1/pods" && self.query.contains("status.nominatedNodeName")
    }

    fn rbac(&self) -> (String, String, String) {
        let segs: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match segs.as_slice() {
            ["api", _v, rest @ ..] => (String::new(), rest.to_vec()),
            ["apis", g, _v, rest @ ..] => (g.to_string(), rest.to_vec()),
            _ => panic!("unexpected path {}", self.path),
        };
        let rest: Vec<&str> = if rest.len() >= 3 && rest[0] == "namespaces" {
            rest[2..].to_vec()
        } else {
            rest
        };
        let resource = match rest.as_slice() {
            [r, _name, sub] => format!("{r}/{sub}"),
            [r, ..] => r.to_string(),
            [] => panic!("no resource in {}", self.path),
        };
        let verb = match (self.method.as_str(), rest.len()) {
            ("GET", _) if self.query.contains("watch=true") => "watch",
            ("GET", 1) => "list",
            ("GET", _) => "get",
            ("POST", _) => "create",
            ("PATCH", _) => "patch",
            ("PUT", _) => "update",
            ("DELETE", _) => "delete",
            (m, _) => panic!("unexpected method {m}"),
        };
        (group, resource, verb.to_string())
    }
}

#[derive(Default)]
struct ApiState {
    requests: Vec<Recorded>,
    /// Current answer to a list of each resource.
    lists: BTreeMap<String, Value>,
    /// Open watch streams, by resource, newest last.
    watches: BTreeMap<String, Vec<mpsc::UnboundedSender<Bytes>>>,
}

type Shared = Arc<Mutex<ApiState>>;

fn respond(status: StatusCode, body: Value) -> Response<MockBody> {
    let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(
            http_body_util::Full::new(bytes)
                .map_err(|e| match e {})
                .boxed_unsync(),
        )
        .unwrap()
}

async fn serve(mut handle: Handle, state: Shared, headroomd: Option<PathBuf>) {
    while let Some((request, send)) = handle.next_request().await {
        let (parts, body) = request.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let reservations = match &headroomd {
            Some(socket) if parts.method != http::Method::GET => Some(ledger_ids(socket).await),
            _ => None,
        };
        let recorded = Recorded {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            reservations,
        };
        let (_, mut resource, verb) = recorded.rbac();
        if recorded.nominated_pods() {
            // The shim's second Pod watch (Pods nominated to the node): its own list and watches.
            resource = NOMINATED.into();
        }
        let mut st = state.lock().unwrap();
        st.requests.push(recorded.clone());
        let response = match verb.as_str() {
            "list" => respond(StatusCode::OK, st.lists[&resource].clone()),
            "watch" => {
                let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
                st.watches.entry(resource).or_default().push(tx);
                let stream = tokio_stream_from(rx).map(|b| Ok::<_, Infallible>(http_body::Frame::data(b)));
                Response::builder()
                    .status(200)
                    .body(StreamBody::new(stream).boxed_unsync())
                    .unwrap()
            }
            "patch" => {
                let mut victim = low();
                victim["status"]["conditions"]
                    .as_array_mut()
                    .unwrap()
                    .push(recorded.body["status"]["conditions"][0].clone());
                respond(StatusCode::OK, victim)
            }
            "delete" => {
                let mut victim = low();
                victim["metadata"]["deletionTimestamp"] = json!("2026-07-01T10:05:31Z");
                victim["metadata"]["deletionGracePeriodSeconds"] = json!(30);
                respond(StatusCode::OK, victim)
            }
            "create" if resource == "events" => {
                let mut event = recorded.body.clone();
                event["metadata"]["uid"] = json!("ev-uid");
                event["metadata"]["resourceVersion"] = json!("2000");
                respond(StatusCode::CREATED, event)
            }
            _ => respond(
                StatusCode::NOT_FOUND,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}),
            ),
        };
        drop(st);
        send.send_response(response);
    }
}

fn tokio_stream_from(mut rx: mpsc::UnboundedReceiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Pushes one watch event on the newest open watch of `resource`.
fn push(state: &Shared, resource: &str, event: Value) {
    let st = state.lock().unwrap();
    let tx = st.watches[resource].last().unwrap();
    let mut line = serde_json::to_vec(&event).unwrap();
    line.push(b'\n');
    tx.send(Bytes::from(line)).unwrap();
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests matching `f`, leaving out the nominated-Pods watch's (which the steps below do not
/// follow; `every_request_is_in_the_rbac_table`-style checks read `requests` whole).
fn count(state: &Shared, f: impl Fn(&Recorded) -> bool) -> usize {
    state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| !r.nominated_pods() && f(r))
        .count()
}

/// The mock's key for the Pods nominated to the node (list and watches).
const NOMINATED: &str = "nominated-pods";

fn setup() -> (kube::Client, Shared, tokio::task::JoinHandle<()>) {
    setup_with(None)
}

/// The mock API server; with `headroomd`, each request that changes something first reads that
/// headroomd's ledger.
fn setup_with(headroomd: Option<PathBuf>) -> (kube::Client, Shared, tokio::task::JoinHandle<()>) {
    let (service, handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<MockBody>>();
    let state: Shared = Arc::default();
    {
        let mut st = state.lock().unwrap();
        st.lists.insert(
            "pods".into(),
            list("PodList", "v1", "1000", vec![low(), high_running()]),
        );
        st.lists
            .insert("nodes".into(), list("NodeList", "v1", "900", vec![node()]));
        st.lists
            .insert(NOMINATED.into(), list("PodList", "v1", "1", vec![]));
        st.lists.insert("namespaces".into(), namespaces());
        st.lists.insert("priorityclasses".into(), priority_classes());
        st.lists.insert("poddisruptionbudgets".into(), pdbs());
    }
    let server = tokio::spawn(serve(handle, state.clone(), headroomd));
    (kube::Client::new(service, "default"), state, server)
}

/// Sets the Pods the API server lists.
/// The node's Pods; those without `spec.nodeName` are listed only to the nominated-Pods watch,
/// as the API server's field selectors would split them.
fn set_pods(state: &Shared, pods: Vec<Value>) {
    let (bound, unbound): (Vec<Value>, Vec<Value>) =
        pods.into_iter().partition(|p| p["spec"]["nodeName"].is_string());
    let mut st = state.lock().unwrap();
    st.lists
        .insert("pods".into(), list("PodList", "v1", "1000", bound));
    st.lists
        .insert(NOMINATED.into(), list("PodList", "v1", "1000", unbound));
}

/// low-priority-pod deleted already (its grace period running).
fn low_terminating() -> Value {
    let mut pod = low();
    pod["metadata"]["deletionTimestamp"] = json!("2026-07-01T10:05:31Z");
    pod["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    pod
}

/// The Pods the mock lists on the node.
fn pods_of(state: &Shared) -> Vec<Value> {
    state.lock().unwrap().lists["pods"]["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// `namespace/name` of those with a deletionTimestamp.
fn pods_terminating(pods: &[Value]) -> Vec<String> {
    pods.iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        .map(|p| format!("default/{}", p["metadata"]["name"].as_str().unwrap()))
        .collect()
}

/// critical-pod (priority 50000, 1 CPU) not bound yet: the scheduler nominated it to the node.
fn critical_nominated() -> Value {
    let mut pod = critical(false);
    pod["spec"].as_object_mut().unwrap().remove("nodeName");
    pod["status"] = json!({"phase": "Pending", "nominatedNodeName": NODE});
    pod
}

/// Non-GET requests so far.
fn mutations(state: &Shared) -> Vec<Recorded> {
    state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method != "GET")
        .cloned()
        .collect()
}

// === A real headroomd ===

/// headroomd's pipeline and gRPC server in this process (the test kit's harness), with a
/// stand-in for its collector.
struct TestHeadroomd {
    headroomd: InProcessHeadroomd,
    socket: PathBuf,
    collector: tokio::task::JoinHandle<()>,
}

/// The Pods' cgroups, as headroomd's cgroupfs resolver maps kubepods cgroups to Pods.
fn pod_cgroups() -> Vec<(CgroupKey, PodRef)> {
    [
        (10, "low-priority-pod", LOW_UID),
        (20, "high-priority-pod", HIGH_UID),
        (30, "critical-pod", CRITICAL_UID),
    ]
    .into_iter()
    .map(|(id, name, uid)| (CgroupKey::new(0, id), PodRef::new("default", name, uid)))
    .collect()
}

impl TestHeadroomd {
    /// As `headroomd serve` on a node: 8 CPU allocatable (the Node's), the Pods known from their
    /// cgroups and none counted from a Pod source; this test's uid may reserve. A stand-in for the
    /// collector reads every Pod cgroup each 50 ms, so that snapshots stay fresh.
    async fn start() -> TestHeadroomd {
        let headroomd = InProcessHeadroomd::start(HeadroomdSetup {
            node_name: NODE.into(),
            allocatable: Resources::new(8000, 32762960 * 1024),
            access: AccessPolicy {
                writer_uids: vec![nix::unistd::geteuid().as_raw()],
                ..AccessPolicy::default()
            },
            cgroups: pod_cgroups()
                .into_iter()
                .map(|(key, pod)| (key, CgroupOwner::Pod { pod, container: None }))
                .collect(),
            ..HeadroomdSetup::default()
        })
        .await;
        let sender = headroomd.pipeline().sender();
        let collector = tokio::spawn(async move {
            let mut reading: u64 = 0;
            loop {
                reading += 1;
                for (key, _) in pod_cgroups() {
                    let mut files = CgroupFiles::new(key, Instant::now());
                    files.readings.cpu = Some(CpuStat {
                        usage_ns: reading * 5_000_000,
                        nr_periods: reading,
                        ..CpuStat::default()
                    });
                    let _ = sender.send(PipelineInput::CgroupFiles(Box::new(files)));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let d = TestHeadroomd {
            socket: headroomd.socket.clone(),
            headroomd,
            collector,
        };
        // Every Pod known (resolved from a reading) before the shim asks for anything.
        wait_for("headroomd knows the Pods' cgroups", || {
            d.headroomd.reader.load().version >= 1
        })
        .await;
        d
    }

    /// A stalled headroomd: its collector and pipeline stop, its gRPC server still answers (with
    /// the last snapshot it built).
    async fn stop_pipeline(&mut self) {
        self.collector.abort();
        self.headroomd.stop_pipeline().await;
    }

    async fn shutdown(mut self) {
        self.stop_pipeline().await;
        self.headroomd.shutdown().await;
    }
}

async fn get_headroom(socket: &std::path::Path) -> pb::HeadroomSnapshot {
    let mut client = headroom_client::headroom_client(socket).await.unwrap();
    client
        .get_headroom(pb::GetHeadroomRequest { include_pods: false })
        .await
        .unwrap()
        .into_inner()
}

/// The reservation ids in headroomd's ledger, through `GetHeadroom`.
async fn ledger_ids(socket: &std::path::Path) -> Vec<String> {
    get_headroom(socket)
        .await
        .reservations
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// Every request is an entry of the RBAC table.
fn assert_all_in_rbac_table(state: &Shared) {
    for request in state.lock().unwrap().requests.iter() {
        let (group, resource, verb) = request.rbac();
        assert!(
            API_CALLS.iter().any(|c| c.group == group
                && c.rbac_resource() == resource
                && c.verbs.contains(&verb.as_str())),
            "{verb} {group}/{resource} is not in rbac::API_CALLS"
        );
    }
}

#[tokio::test]
async fn mock_apiserver_preempts_for_a_deferred_resize_and_follows_it_through_a_dropped_watch() {
    let (client, state, server) = setup();
    let metrics = Arc::new(Metrics::default());
    // The in-process ledger (`--ledger=local`): this test is about the API server's side.
    let ledger = Arc::new(LocalLedger::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = KubeConfig::new(NODE);
    config.preemption = PreemptionMode::Delete;
    config.resync = Duration::from_secs(3600); // only watch events drive this test
    let backend = tokio::spawn(headroom_shim::kube::run(
        client,
        config,
        NodeLedger {
            reservations: ledger.clone(),
            live: None,
        },
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));

    // 1. Lists, then watches from each list's resourceVersion.
    wait_for("ready", || metrics.is_ready()).await;
    wait_for("pods watch", || {
        state.lock().unwrap().watches.contains_key("pods")
    })
    .await;
    let first_watch = state
        .lock()
        .unwrap()
        .requests
        .iter()
        .find(|r| r.path == "/api/v1/pods" && r.query.contains("watch=true") && !r.nominated_pods())
        .cloned()
        .unwrap();
    assert!(
        first_watch.query.contains("fieldSelector=spec.nodeName%3Dnode-a"),
        "{}",
        first_watch.query
    );
    assert!(
        first_watch.query.contains("resourceVersion=1000"),
        "{}",
        first_watch.query
    );
    let node_list = state
        .lock()
        .unwrap()
        .requests
        .iter()
        .find(|r| r.path == "/api/v1/nodes")
        .cloned()
        .unwrap();
    assert!(
        node_list.query.contains("fieldSelector=metadata.name%3Dnode-a"),
        "{}",
        node_list.query
    );

    // 2. A bookmark, then the kubelet marks the resize Deferred.
    push(
        &state,
        "pods",
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "1001"}}}),
    );
    push(
        &state,
        "pods",
        json!({"type": "MODIFIED", "object": high_deferred()}),
    );

    // 3. DisruptionTarget patch, delete with UID precondition, Preempted event, in that order.
    wait_for("events", || count(&state, |r| r.path.ends_with("/events")) >= 2).await;
    let effects: Vec<Recorded> = state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method != "GET")
        .cloned()
        .collect();
    let patch = &effects[0];
    assert_eq!(
        (patch.method.as_str(), patch.path.as_str()),
        ("PATCH", "/api/v1/namespaces/default/pods/low-priority-pod/status")
    );
    let condition = &patch.body["status"]["conditions"][0];
    assert_eq!(condition["type"], "DisruptionTarget");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "PreemptionByScheduler");
    assert_eq!(
        condition["message"],
        "headroom-shim: preempting to accommodate a higher priority pod"
    );
    let delete = &effects[1];
    assert_eq!(
        (delete.method.as_str(), delete.path.as_str()),
        ("DELETE", "/api/v1/namespaces/default/pods/low-priority-pod")
    );
    assert_eq!(delete.body["preconditions"]["uid"], LOW_UID);
    assert!(
        delete.body.get("gracePeriodSeconds").is_none(),
        "graceful: the Pod's own grace period"
    );
    let preempted = &effects[2];
    assert_eq!(preempted.path, "/apis/events.k8s.io/v1/namespaces/default/events");
    assert_eq!(preempted.body["reason"], "Preempted");
    assert_eq!(preempted.body["type"], "Normal");
    assert_eq!(
        preempted.body["note"],
        format!("Preempted by pod {HIGH_UID} on node {NODE}")
    );
    assert_eq!(preempted.body["regarding"]["name"], "low-priority-pod");
    assert_eq!(preempted.body["related"]["uid"], HIGH_UID);
    assert_eq!(effects[3].body["reason"], "PreemptingForResize");
    assert_eq!(effects[3].body["regarding"]["uid"], HIGH_UID);
    assert_eq!(
        ledger.held(),
        [format!("{HIGH_UID}:2")],
        "the room is reserved until the resize is actuated"
    );

    // 4. The watch drops (stream closed): resumed from the last resourceVersion, no re-list.
    state.lock().unwrap().watches.get_mut("pods").unwrap().clear();
    wait_for("re-watch", || {
        count(&state, |r| {
            r.query.contains("watch=true") && r.query.contains("resourceVersion=1002")
        }) == 1
    })
    .await;
    assert_eq!(
        count(&state, |r| r.path == "/api/v1/pods"
            && !r.query.contains("watch=true")),
        1
    );

    // 5. 410 Gone on the resumed watch: a re-list (with backoff), which shows the resize in progress
    //    and the victim gone.
    state.lock().unwrap().lists.insert(
        "pods".into(),
        list("PodList", "v1", "1010", vec![high_in_progress()]),
    );
    push(&state, "pods", gone());
    wait_for("re-list", || {
        count(&state, |r| {
            r.path == "/api/v1/pods" && !r.query.contains("watch=true")
        }) == 2
    })
    .await;
    wait_for("watch after re-list", || {
        count(&state, |r| {
            r.query.contains("watch=true") && r.query.contains("resourceVersion=1010")
        }) == 1
    })
    .await;
    assert!(metrics.watch_error_count() >= 1);
    assert_eq!(metrics.completed_count(), 0, "PodResizeInProgress: not done yet");

    // 6. The kubelet finishes: conditions gone, allocatedResources = 6 CPU.
    push(&state, "pods", json!({"type": "MODIFIED", "object": high_done()}));
    wait_for("completed", || metrics.completed_count() == 1).await;
    assert!(ledger.held().is_empty(), "reservation released on completion");
    wait_for("completion event", || {
        count(&state, |r| r.body["reason"] == "ResizePreemptionCompleted") == 1
    })
    .await;
    let latency = metrics.latencies()[0];
    assert!(
        latency > Duration::ZERO && latency < Duration::from_secs(15),
        "{latency:?}"
    );
    assert!(
        metrics
            .render()
            .contains("headroom_shim_resize_end_to_end_seconds_count 1")
    );

    // Exactly one preemption, and every request is in the RBAC table.
    assert_eq!(count(&state, |r| r.method == "DELETE"), 1);
    for request in state.lock().unwrap().requests.iter() {
        let (group, resource, verb) = request.rbac();
        assert!(
            API_CALLS.iter().any(|c| c.group == group
                && c.rbac_resource() == resource
                && c.verbs.contains(&verb.as_str())),
            "{verb} {group}/{resource} is not in rbac::API_CALLS"
        );
    }

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    server.abort();
}

#[tokio::test]
async fn mock_apiserver_dry_run_only_posts_an_event_and_opted_out_namespaces_are_left_alone() {
    let (client, state, server) = setup();
    {
        // A second Deferred resize, in the opted-out namespace.
        let mut opted = high_deferred();
        opted["metadata"]["namespace"] = json!("headroom-system");
        opted["metadata"]["name"] = json!("opted-out");
        opted["metadata"]["uid"] = json!("11111111-2222-4333-8444-555555555555");
        // Small enough that evicting low-priority-pod still makes room for high-priority-pod.
        opted["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        opted["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] = json!("500m");
        opted["status"]["containerStatuses"][0]["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}});
        let mut st = state.lock().unwrap();
        st.lists.insert(
            "pods".into(),
            list("PodList", "v1", "1000", vec![low(), high_deferred(), opted]),
        );
    }
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = KubeConfig::new(NODE);
    config.dry_run = true;
    let backend = tokio::spawn(headroom_shim::kube::run(
        client,
        config,
        NodeLedger::local(),
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    wait_for("dry-run event", || {
        count(&state, |r| r.body["reason"] == "WouldPreemptForResize") == 1
    })
    .await;
    // Give the backend more cycles (watch events) to do anything else it would wrongly do.
    wait_for("pods watch", || {
        state.lock().unwrap().watches.contains_key("pods")
    })
    .await;
    push(
        &state,
        "pods",
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "1003"}}}),
    );
    push(&state, "pods", json!({"type": "MODIFIED", "object": low()}));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mutations: Vec<Recorded> = state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method != "GET")
        .cloned()
        .collect();
    assert_eq!(
        mutations.len(),
        1,
        "dry run: one event, no patch, no delete: {mutations:?}"
    );
    let note = mutations[0].body["note"].as_str().unwrap();
    assert!(
        note.starts_with("Dry run: would preempt 1 pod(s) on node node-a: default/low-priority-pod"),
        "{note}"
    );
    assert_eq!(mutations[0].body["regarding"]["name"], "high-priority-pod");
    let text = metrics.render();
    assert!(
        text.contains("headroom_shim_dry_run_would_preempt_total 1"),
        "{text}"
    );
    // The opted-out namespace's resize was never decided: only high-priority-pod's was (every
    // outcome is exported, at 0 until it happens).
    let decided: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("headroom_shim_decisions_total{") && !l.ends_with(" 0"))
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert!(
        decided
            .iter()
            .all(|l| l.starts_with("headroom_shim_decisions_total{outcome=\"preempt\"}")),
        "{decided:?}"
    );

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    server.abort();
}

#[tokio::test]
async fn mock_apiserver_node_opt_out_is_honoured_live() {
    let (client, state, server) = setup();
    let mut opted_out_node = node();
    opted_out_node["spec"]["podPreemptionPolicy"] =
        json!({"disableResizePreemption": ["example.com/batch-owner"]});
    {
        let mut st = state.lock().unwrap();
        st.lists.insert(
            "pods".into(),
            list("PodList", "v1", "1000", vec![low(), high_deferred()]),
        );
        st.lists.insert(
            "nodes".into(),
            list("NodeList", "v1", "900", vec![opted_out_node]),
        );
    }
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let backend = tokio::spawn(headroom_shim::kube::run(
        client,
        KubeConfig::new(NODE),
        NodeLedger::local(),
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    wait_for("disabled decision", || {
        metrics
            .render()
            .contains("headroom_shim_decisions_total{outcome=\"disabled\"}")
    })
    .await;
    assert_eq!(
        count(&state, |r| r.method != "GET"),
        0,
        "node opted out: nobody preempted"
    );

    // The node's owner clears the list: the next cycle preempts.
    wait_for("nodes watch", || {
        state.lock().unwrap().watches.contains_key("nodes")
    })
    .await;
    let mut cleared = node();
    cleared["kind"] = json!("Node");
    cleared["apiVersion"] = json!("v1");
    cleared["metadata"]["resourceVersion"] = json!("905");
    push(&state, "nodes", json!({"type": "MODIFIED", "object": cleared}));
    wait_for("preemption", || count(&state, |r| r.method == "DELETE") == 1).await;

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    server.abort();
}

// === With a real headroomd ===

/// Starts `kube::run` in the background; `stop` ends it.
fn start_backend(
    client: kube::Client,
    config: KubeConfig,
    ledger: NodeLedger,
    metrics: Arc<Metrics>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), headroom_shim::kube::KubeError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let backend = tokio::spawn(headroom_shim::kube::run(client, config, ledger, metrics, async {
        let _ = stopped.await;
    }));
    (stop, backend)
}

async fn stop_backend(
    stop: tokio::sync::oneshot::Sender<()>,
    backend: tokio::task::JoinHandle<Result<(), headroom_shim::kube::KubeError>>,
) {
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn mock_apiserver_real_headroomd_holds_the_reservation_from_before_the_first_eviction_until_completion()
{
    let headroomd = TestHeadroomd::start().await;
    let (client, state, server) = setup_with(Some(headroomd.socket.clone()));
    set_pods(&state, vec![low(), high_deferred()]);
    let metrics = Arc::new(Metrics::default());
    let mut config = KubeConfig::new(NODE);
    config.resync = Duration::from_secs(3600); // only watch events drive this test
    let headroomd_ledger = NodeLedger::headroomd(&headroomd.socket, metrics.clone());
    let reservations = headroomd_ledger.reservations.clone();
    let recorded = Arc::new(Recording {
        inner: headroomd_ledger.reservations.clone(),
        seen: Mutex::default(),
    });
    let ledger = NodeLedger {
        reservations: recorded.clone(),
        live: headroomd_ledger.live.clone(),
    };
    let (stop, backend) = start_backend(client, config, ledger, metrics.clone());

    // The victim's status patch and delete, then the Events.
    wait_for("PreemptingForResize", || {
        count(&state, |r| r.body["reason"] == "PreemptingForResize") == 1
    })
    .await;
    let effects = mutations(&state);
    let reservation = format!("{HIGH_UID}:2");
    assert_eq!(
        (effects[0].method.as_str(), effects[0].path.as_str()),
        ("PATCH", "/api/v1/namespaces/default/pods/low-priority-pod/status")
    );
    // The mark goes out while the room is being reserved; the delete only once it is held.
    assert_eq!(
        (effects[1].method.as_str(), effects[1].path.as_str()),
        ("DELETE", "/api/v1/namespaces/default/pods/low-priority-pod")
    );
    assert_eq!(
        effects[1].reservations.as_deref(),
        Some(std::slice::from_ref(&reservation)),
        "the room is in headroomd's ledger before the victim's delete reaches the API server"
    );
    assert_eq!(effects[1].body["preconditions"]["uid"], LOW_UID);
    assert_eq!(effects[2].body["reason"], "Preempted");
    assert_eq!(effects[3].body["reason"], "PreemptingForResize");

    // headroomd counts it: 2 CPU (6 requested − 4 admitted) reserved for the resizing Pod's uid.
    let snapshot = get_headroom(&headroomd.socket).await;
    assert_eq!(snapshot.reservations.len(), 1, "{snapshot:?}");
    let held = &snapshot.reservations[0];
    assert_eq!(
        (
            held.id.as_str(),
            held.pod.as_str(),
            held.cpu_millis,
            held.memory_bytes
        ),
        (reservation.as_str(), HIGH_UID, 2000, 0)
    );
    let cpu = snapshot.node.unwrap().cpu_millis.unwrap();
    assert_eq!(cpu.reserved, 2000);
    assert_eq!(reservations.held(), std::slice::from_ref(&reservation));
    // headroomd is told which Pods are leaving for this room (it counts the node without them).
    let seen = recorded.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].releasing_pod_uids, [LOW_UID]);

    // The kubelet actuates the resize: the reservation goes from headroomd's ledger.
    wait_for("pods watch", || {
        state.lock().unwrap().watches.contains_key("pods")
    })
    .await;
    push(&state, "pods", json!({"type": "MODIFIED", "object": high_done()}));
    wait_for("completed", || metrics.completed_count() == 1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !ledger_ids(&headroomd.socket).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "reservation still in headroomd's ledger after completion"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        get_headroom(&headroomd.socket)
            .await
            .node
            .unwrap()
            .cpu_millis
            .unwrap()
            .reserved,
        0
    );
    assert!(reservations.held().is_empty());
    assert_eq!(count(&state, |r| r.method == "DELETE"), 1);
    assert_eq!(metrics.blocked_count(), 0);
    assert_all_in_rbac_table(&state);

    stop_backend(stop, backend).await;
    server.abort();
    headroomd.shutdown().await;
}

#[tokio::test]
async fn mock_apiserver_real_headroomd_with_a_stalled_pipeline_evicts_nobody_and_says_why() {
    // headroomd answers, but its pipeline stopped: every snapshot it serves is the last one built.
    let mut headroomd = TestHeadroomd::start().await;
    headroomd.stop_pipeline().await;
    let bound = Duration::from_millis(300);
    tokio::time::sleep(bound + Duration::from_millis(100)).await;

    let (client, state, server) = setup_with(Some(headroomd.socket.clone()));
    set_pods(&state, vec![low(), high_deferred()]);
    let metrics = Arc::new(Metrics::default());
    let mut config = KubeConfig::new(NODE);
    config.max_headroom_age = bound;
    let ledger = NodeLedger::headroomd(&headroomd.socket, metrics.clone());
    let (stop, backend) = start_backend(client, config, ledger, metrics.clone());

    wait_for("ResizePreemptionBlocked", || {
        count(&state, |r| r.body["reason"] == "ResizePreemptionBlocked") == 1
    })
    .await;
    // More cycles (the retry after a blocked one comes within a second) change nothing.
    wait_for("a second blocked cycle", || metrics.blocked_count() >= 2).await;
    let effects = mutations(&state);
    assert_eq!(
        effects.len(),
        1,
        "one Warning Event, no status patch, no delete: {effects:?}"
    );
    let event = &effects[0].body;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["regarding"]["uid"], HIGH_UID);
    assert_eq!(event["action"], "Preempting");
    assert_eq!(event["reportingController"], "headroom.io/headroom-shim");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.starts_with("Not preempting on node node-a: headroomd's newest headroom snapshot"),
        "{note}"
    );
    assert!(
        note.contains("over the 0.300s bound, and GetHeadroom returned nothing newer"),
        "{note}"
    );
    assert!(ledger_ids(&headroomd.socket).await.is_empty(), "nothing reserved");
    assert!(
        metrics
            .render()
            .contains("headroom_shim_preemptions_blocked_total{reason=\"stale\"}"),
        "{}",
        metrics.render()
    );

    stop_backend(stop, backend).await;
    server.abort();
    headroomd.shutdown().await;
}

#[tokio::test]
async fn mock_apiserver_unreachable_headroomd_evicts_nobody_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("headroomd.sock"); // nothing listens here
    let (client, state, server) = setup();
    set_pods(&state, vec![low(), high_deferred()]);
    let metrics = Arc::new(Metrics::default());
    let ledger = NodeLedger::headroomd(&socket, metrics.clone());
    let (stop, backend) = start_backend(client, KubeConfig::new(NODE), ledger, metrics.clone());

    wait_for("ResizePreemptionBlocked", || {
        count(&state, |r| r.body["reason"] == "ResizePreemptionBlocked") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let effects = mutations(&state);
    assert_eq!(effects.len(), 1, "no status patch, no delete: {effects:?}");
    let note = effects[0].body["note"].as_str().unwrap();
    assert!(
        note.contains("headroomd is unreachable") && note.contains(&socket.display().to_string()),
        "{note}"
    );
    assert!(
        metrics
            .render()
            .contains("headroom_shim_preemptions_blocked_total{reason=\"unreachable\"}")
    );

    stop_backend(stop, backend).await;
    server.abort();
}

/// headroomd's ledger, recording what it was asked to reserve.
struct Recording {
    inner: Arc<dyn Reservations>,
    seen: Mutex<Vec<Reserve>>,
}

impl Reservations for Recording {
    fn reserve(&self, request: Reserve) -> BoxFuture<'_, Result<(), ReservationError>> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.reserve(request)
    }

    fn release(&self, id: &str) -> BoxFuture<'_, ()> {
        self.inner.release(id)
    }

    fn held(&self) -> Vec<String> {
        self.inner.held()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

/// The ledger, with a higher-priority resize arriving at the API server while the first
/// reservation is being made (between the decision and the first eviction).
struct ArrivesWhileReserving {
    inner: Arc<dyn Reservations>,
    state: Shared,
    pods: kube::runtime::reflector::Store<Pod>,
    fired: AtomicBool,
}

impl Reservations for ArrivesWhileReserving {
    fn reserve(&self, request: Reserve) -> BoxFuture<'_, Result<(), ReservationError>> {
        Box::pin(async move {
            if !self.fired.swap(true, Ordering::SeqCst) {
                push(
                    &self.state,
                    "pods",
                    json!({"type": "MODIFIED", "object": critical(true)}),
                );
                wait_for("the shim's store sees the new resize", || {
                    self.pods.state().iter().any(|p| {
                        p.metadata.uid.as_deref() == Some(CRITICAL_UID) && resize_state(p).is_deferred()
                    })
                })
                .await;
            }
            self.inner.reserve(request).await
        })
    }

    fn release(&self, id: &str) -> BoxFuture<'_, ()> {
        self.inner.release(id)
    }

    fn held(&self) -> Vec<String> {
        self.inner.held()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

#[tokio::test]
async fn mock_apiserver_real_headroomd_replans_when_a_higher_priority_resize_arrives_before_eviction() {
    let headroomd = TestHeadroomd::start().await;
    let (client, state, server) = setup_with(Some(headroomd.socket.clone()));
    // 3 + 4 + 1 CPU on 8: full. high-priority-pod asks for 2 more.
    set_pods(&state, vec![low(), high_deferred(), critical(false)]);
    let metrics = Arc::new(Metrics::default());
    let (stores, mut watchers) = headroom_shim::kube::watch::start(&client, NODE, metrics.clone()).unwrap();
    stores.wait_until_ready().await.unwrap();
    wait_for("pods watch", || {
        state.lock().unwrap().watches.contains_key("pods")
    })
    .await;
    let headroomd_ledger = NodeLedger::headroomd(&headroomd.socket, metrics.clone());
    let ledger = NodeLedger {
        reservations: Arc::new(ArrivesWhileReserving {
            inner: headroomd_ledger.reservations.clone(),
            state: state.clone(),
            pods: stores.pods.clone(),
            fired: AtomicBool::new(false),
        }),
        live: headroomd_ledger.live.clone(),
    };
    let mut backend = Backend::new(client, KubeConfig::new(NODE), stores, ledger, metrics.clone());

    // Cycle 1: high-priority-pod's preemption is decided and its room reserved; critical-pod's
    // resize arrives meanwhile. The room goes back and nobody is evicted.
    let first = backend.reconcile().await.unwrap();
    assert_eq!(
        first.decisions,
        [(
            "default/high-priority-pod".to_string(),
            headroom_shim::Outcome::Preempt
        )]
    );
    assert_eq!(first.replanned, ["default/high-priority-pod"]);
    assert!(first.preempted.is_empty());
    // What `kubectl headroom explain` is shown: the decision, and that the room went elsewhere.
    let shown = backend.board().explain("default/high-priority-pod").unwrap();
    assert_eq!(shown.decision.outcome, headroom_shim::Outcome::Preempt);
    assert!(
        matches!(&shown.stage, Stage::Replanned { by } if by.contains("critical-pod")),
        "{:?}",
        shown.stage
    );
    // low-priority-pod was marked while the room was being reserved, and is unmarked as the
    // disruption controller clears a stale mark (status False, no reason): nothing else changed.
    let changed = mutations(&state);
    let marks: Vec<(&str, &str, &Value)> = changed
        .iter()
        .map(|r| {
            let condition = &r.body["status"]["conditions"][0];
            (r.method.as_str(), r.path.as_str(), &condition["status"])
        })
        .collect();
    let low_status = "/api/v1/namespaces/default/pods/low-priority-pod/status";
    assert_eq!(
        marks,
        [
            ("PATCH", low_status, &json!("True")),
            ("PATCH", low_status, &json!("False"))
        ],
        "{changed:?}"
    );
    assert!(changed[1].body["status"]["conditions"][0]["reason"].is_null());
    assert!(ledger_ids(&headroomd.socket).await.is_empty(), "room given back");

    // Cycle 2 decides both in the kubelet's order: critical-pod first, which evicts
    // low-priority-pod; that room then also fits high-priority-pod's resize.
    let second = backend.reconcile().await.unwrap();
    assert_eq!(
        second.decisions,
        [
            (
                "default/critical-pod".to_string(),
                headroom_shim::Outcome::Preempt
            ),
            (
                "default/high-priority-pod".to_string(),
                headroom_shim::Outcome::Fits
            ),
        ]
    );
    assert!(second.replanned.is_empty());
    assert_eq!(second.preempted, ["default/low-priority-pod"]);
    let status = backend.board().status(std::time::SystemTime::now());
    let stages: Vec<(&str, &Stage)> = status
        .resizes
        .iter()
        .map(|r| (r.pod.as_str(), &r.stage))
        .collect();
    assert!(
        stages.contains(&("default/critical-pod", &Stage::Preempted))
            && stages.contains(&("default/high-priority-pod", &Stage::Decided)),
        "{stages:?}"
    );
    let critical = backend.board().explain("default/critical-pod").unwrap();
    assert!(
        critical
            .explanation
            .contains("default/low-priority-pod (priority"),
        "{}",
        critical.explanation
    );
    assert!(
        status.headroom.is_some(),
        "headroomd's live headroom is on the board"
    );
    // After cycle 1's mark and unmark: cycle 2's mark, the delete (with critical-pod's room
    // held), the Preempted Event.
    let effects = mutations(&state);
    assert_eq!(
        (effects[3].method.as_str(), effects[3].path.as_str()),
        ("DELETE", "/api/v1/namespaces/default/pods/low-priority-pod"),
        "{effects:?}"
    );
    assert_eq!(
        effects[3].reservations.as_deref(),
        Some([format!("{CRITICAL_UID}:2")].as_slice())
    );
    assert_eq!(
        effects[4].body["note"],
        format!("Preempted by pod {CRITICAL_UID} on node {NODE}")
    );

    backend.shutdown().await;
    assert!(
        ledger_ids(&headroomd.socket).await.is_empty(),
        "released at shutdown"
    );
    watchers.abort_all();
    server.abort();
    headroomd.shutdown().await;
}

// === The Kubernetes backend and `headroom-shim plan` agree ===

/// high-priority-pod (4 CPU admitted) with a Deferred resize to `cpu`.
fn high_deferred_to(cpu: &str) -> Value {
    let mut pod = high_deferred();
    pod["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}});
    pod
}

/// A second low-priority Pod, 1 CPU.
fn batch() -> Value {
    pod(
        "batch-pod",
        "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a",
        "1000",
        "low-priority",
        1000,
        "1",
        "1",
        ready_conditions(),
    )
}

/// What `headroom-shim plan --resize default/high-priority-pod` decides on the objects the mock
/// API server lists: (outcome, victims).
fn plan_on(pods: &[Value]) -> (headroom_shim::Outcome, Vec<String>) {
    let items = |v: Value| -> Vec<Value> { v["items"].as_array().unwrap().clone() };
    let cluster = headroom_shim::cluster_file::ClusterFile {
        nodes: vec![serde_json::from_value(node()).unwrap()],
        priority_classes: items(priority_classes())
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect(),
        pods: pods
            .iter()
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect(),
        pdbs: items(pdbs())
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect(),
        give_way: Default::default(),
    };
    let spec = headroom_shim::cluster_file::ResizeSpec {
        namespace: "default".into(),
        name: "high-priority-pod".into(),
        ..Default::default()
    };
    let (state, request) = headroom_shim::cluster_file::node_state_for(&cluster, &spec).unwrap();
    let decision = headroom_shim::decide(&state, &request).unwrap();
    (decision.outcome, decision.victim_keys())
}

#[tokio::test]
async fn mock_apiserver_backend_preempts_the_victims_plan_names() {
    // (pods, the outcome and victims both must give; the victims the backend removes are those
    // not already terminating)
    let scenarios: Vec<(Vec<Value>, headroom_shim::Outcome, Vec<&str>)> = vec![
        // The seed: 3 + 4 on 8 CPU, high-priority-pod to 6.
        (
            vec![low(), high_deferred_to("6")],
            headroom_shim::Outcome::Preempt,
            vec!["default/low-priority-pod"],
        ),
        // Two candidates: evicting low-priority-pod alone makes room for 7; batch-pod stays.
        (
            vec![low(), batch(), high_deferred_to("7")],
            headroom_shim::Outcome::Preempt,
            vec!["default/low-priority-pod"],
        ),
        // critical-pod (higher priority) holds 1 CPU: even without low-priority-pod, 8 does not
        // fit. Nobody is evicted.
        (
            vec![low(), critical(false), high_deferred_to("8")],
            headroom_shim::Outcome::Deferred,
            vec![],
        ),
        // The same with critical-pod only nominated to the node (not bound): it counts all the
        // same, as the scheduler counts nominated Pods of higher priority.
        (
            vec![low(), critical_nominated(), high_deferred_to("8")],
            headroom_shim::Outcome::Deferred,
            vec![],
        ),
        // low-priority-pod already terminating (an earlier victim in its grace period): it is
        // the victim again, and no API call is made for it (the shim used to count terminating
        // Pods as unevictable, and this resize stayed Deferred).
        (
            vec![low_terminating(), batch(), high_deferred_to("7")],
            headroom_shim::Outcome::Preempt,
            vec!["default/low-priority-pod"],
        ),
    ];
    for (pods, outcome, victims) in scenarios {
        let planned = plan_on(&pods);
        assert_eq!(
            planned,
            (outcome, victims.iter().map(|v| v.to_string()).collect())
        );

        let (client, state, server) = setup();
        set_pods(&state, pods);
        let metrics = Arc::new(Metrics::default());
        let (stores, mut watchers) =
            headroom_shim::kube::watch::start(&client, NODE, metrics.clone()).unwrap();
        stores.wait_until_ready().await.unwrap();
        let mut backend = Backend::new(
            client,
            KubeConfig::new(NODE),
            stores,
            NodeLedger::local(),
            metrics,
        );
        let report = backend.reconcile().await.unwrap();
        assert_eq!(
            report.decisions,
            [("default/high-priority-pod".to_string(), outcome)],
            "{report:?}"
        );
        let removed: Vec<&str> = victims
            .iter()
            .copied()
            .filter(|v| !pods_terminating(&pods_of(&state)).contains(&v.to_string()))
            .collect();
        assert_eq!(report.preempted, removed, "{report:?}");
        if removed.len() < victims.len() {
            assert_eq!(
                count(&state, |r| r.method != "GET" && r.path.contains("/pods/")),
                0
            );
        }
        backend.shutdown().await;
        watchers.abort_all();
        server.abort();
    }
}
