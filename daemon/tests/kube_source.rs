//! `--pods-from kube` end to end against a MOCK API server: no API server runs on these machines
//! (and tests must not contact a cluster), so kube's mock service (`tower_test::mock::pair` behind
//! `kube::Client::new`) plays it, answering with JSON as the API server serves it (lists with
//! `metadata.resourceVersion` and kind-less items, then open watch streams of
//! `{"type": ..., "object": ...}` lines). headroomd's pipeline and gRPC server are real, on a
//! temporary Unix socket; its Node/Pod source is the one `headroomd serve --pods-from kube` starts.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use headroom_node_model::Resources;
use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use headroomd::kube_source::{self, API_GRANTS};
use headroomd::pipeline::{self, InMemoryPodSource, PipelineConfig, StaticPodResolver};
use headroomd::server::{self, AccessPolicy, ServerConfig, UnavailableActuator};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, StreamBody};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tonic::Code;

type MockBody = UnsyncBoxBody<Bytes, Infallible>;
type Handle = tower_test::mock::Handle<Request<kube::client::Body>, Response<MockBody>>;

const NODE: &str = "node-a";
const WEB_UID: &str = "11111111-1111-4111-8111-111111111111";
const RESIZER_UID: &str = "33333333-3333-4333-8333-333333333333";
const JOB_UID: &str = "44444444-4444-4444-8444-444444444444";

// === Real API JSON ===

fn node(allocatable_cpu: &str) -> Value {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {
            "name": NODE, "uid": "b1f0c2d3-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "resourceVersion": "901",
            "creationTimestamp": "2026-06-30T08:00:00Z", "labels": {"kubernetes.io/hostname": NODE}
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "4", "ephemeral-storage": "101430960Ki", "hugepages-2Mi": "0", "memory": "16283636Ki", "pods": "110"},
            "allocatable": {"cpu": allocatable_cpu, "ephemeral-storage": "93478772582", "hugepages-2Mi": "0", "memory": "13134516Ki", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-07-01T10:00:00Z", "lastTransitionTime": "2026-06-30T08:00:10Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "nodeInfo": {
                "machineID": "5c2a", "systemUUID": "5c2a", "bootID": "0d6e", "kernelVersion": "6.8.0-45-generic",
                "osImage": "Ubuntu 24.04.1 LTS", "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": "v1.34.0", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
            }
        }
    })
}

fn pod(name: &str, uid: &str, rv: &str, phase: &str, cpu: &str, status_cpu: Option<&str>) -> Value {
    let mut p = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": "default", "uid": uid, "resourceVersion": rv,
            "creationTimestamp": "2026-07-01T10:00:00Z", "labels": {"app": name}
        },
        "spec": {
            "containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": NODE, "schedulerName": "default-scheduler",
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {"phase": phase, "hostIP": "10.0.0.11", "podIP": "10.244.1.7", "qosClass": "Burstable", "startTime": "2026-07-01T10:00:01Z"}
    });
    if let Some(admitted) = status_cpu {
        // A Deferred in-place resize: desired `cpu` in the spec, `admitted` in the status.
        p["status"]["conditions"] = json!([
            {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:00:03Z"},
            {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "Node didn't have enough resource: cpu",
             "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:05:00Z", "observedGeneration": 2}
        ]);
        p["status"]["containerStatuses"] = json!([{
            "name": "app", "ready": true, "restartCount": 0, "started": true,
            "image": "registry.k8s.io/pause:3.10", "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
            "containerID": "containerd://3333", "state": {"running": {"startedAt": "2026-07-01T10:00:02Z"}},
            "allocatedResources": {"cpu": admitted, "memory": "1Gi"},
            "resources": {"requests": {"cpu": admitted, "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
        }]);
    }
    p
}

fn web() -> Value {
    pod("web", WEB_UID, "1001", "Running", "750m", None)
}

fn list(kind: &str, rv: &str, items: Vec<Value>) -> Value {
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut i| {
            let o = i.as_object_mut().unwrap();
            o.remove("kind");
            o.remove("apiVersion");
            i
        })
        .collect();
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items})
}

// === The mock API server ===

#[derive(Clone, Debug)]
struct Recorded {
    path: String,
    query: String,
}

impl Recorded {
    fn resource(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }

    fn verb(&self) -> &'static str {
        if self.query.contains("watch=true") {
            "watch"
        } else {
            "list"
        }
    }
}

#[derive(Default)]
struct ApiState {
    requests: Vec<Recorded>,
    lists: BTreeMap<String, Value>,
    watches: BTreeMap<String, Vec<mpsc::UnboundedSender<Bytes>>>,
}

type Shared = Arc<Mutex<ApiState>>;

fn respond(status: StatusCode, body: &Value) -> Response<MockBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(
            http_body_util::Full::new(Bytes::from(serde_json::to_vec(body).unwrap()))
                .map_err(|e| match e {})
                .boxed_unsync(),
        )
        .unwrap()
}

async fn serve(mut handle: Handle, state: Shared) {
    while let Some((request, send)) = handle.next_request().await {
        let recorded = Recorded {
            path: request.uri().path().to_string(),
            query: request.uri().query().unwrap_or_default().to_string(),
        };
        let mut st = state.lock().unwrap();
        st.requests.push(recorded.clone());
        let resource = recorded.resource().to_string();
        let response = match (request.method().as_str(), recorded.verb()) {
            ("GET", "watch") => {
                let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
                st.watches.entry(resource).or_default().push(tx);
                let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
                    .map(|b| Ok::<_, Infallible>(http_body::Frame::data(b)));
                Response::builder()
                    .status(200)
                    .body(StreamBody::new(stream).boxed_unsync())
                    .unwrap()
            }
            ("GET", _) if st.lists.contains_key(&resource) => respond(StatusCode::OK, &st.lists[&resource]),
            _ => respond(
                StatusCode::NOT_FOUND,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}),
            ),
        };
        drop(st);
        send.send_response(response);
    }
}

fn push(state: &Shared, resource: &str, event: Value) {
    let st = state.lock().unwrap();
    let mut line = serde_json::to_vec(&event).unwrap();
    line.push(b'\n');
    st.watches[resource]
        .last()
        .unwrap()
        .send(Bytes::from(line))
        .unwrap();
}

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn reserve(id: &str, cpu_millis: i64, releasing: &[&str]) -> pb::ReserveRequest {
    pb::ReserveRequest {
        reservation_id: id.into(),
        pod: RESIZER_UID.into(),
        amount: Some(pb::ResourceAmount {
            cpu_millis: Some(cpu_millis),
            ..Default::default()
        }),
        ttl_seconds: 30,
        releasing_pod_uids: releasing.iter().map(|s| s.to_string()).collect(),
    }
}

fn cpu(s: &pb::HeadroomSnapshot) -> (i64, i64, i64, i64) {
    let c = s.node.as_ref().unwrap().cpu_millis.as_ref().unwrap();
    (c.allocatable, c.allocated, c.reserved, c.headroom)
}

#[tokio::test]
async fn mock_apiserver_node_and_pods_become_allocatable_and_allocated() {
    let (service, handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<MockBody>>();
    let state: Shared = Arc::default();
    {
        let mut st = state.lock().unwrap();
        st.lists
            .insert("nodes".into(), list("NodeList", "900", vec![node("3920m")]));
        st.lists.insert(
            "pods".into(),
            list(
                "PodList",
                "1000",
                vec![
                    web(),
                    pod("resizer", RESIZER_UID, "1002", "Running", "2", Some("1")),
                    pod("job", JOB_UID, "1003", "Succeeded", "1", None),
                ],
            ),
        );
    }
    let api = tokio::spawn(serve(handle, state.clone()));
    let client = kube::Client::new(service, "default");

    // headroomd as `serve --pods-from kube` assembles it: the source primed before the pipeline
    // reads it, so the configured 8 CPUs are never served.
    let sink = Arc::new(InMemoryPodSource::default());
    kube_source::prime(&sink);
    let config = PipelineConfig {
        node_name: NODE.into(),
        allocatable: Resources::new(8000, 32 << 30),
        ..PipelineConfig::default()
    };
    let (pipeline, reader) =
        pipeline::spawn(config, Arc::new(StaticPodResolver::new()), sink.clone()).unwrap();
    let before = reader.load();
    assert_eq!(before.node.headroom.allocatable, Resources::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("headroomd.sock");
    let server_config = ServerConfig {
        socket_path: socket.clone(),
        access: AccessPolicy {
            writer_uids: vec![nix::unistd::getuid().as_raw()],
            ..AccessPolicy::default()
        },
        ..ServerConfig::default()
    };
    let server = server::serve(
        &server_config,
        None,
        reader.clone(),
        pipeline.ledger(),
        Arc::new(UnavailableActuator),
    )
    .await
    .unwrap();
    // What per-Pod state elsewhere (the actuator) is told after every change.
    let told: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let on_pods: kube_source::OnPods = {
        let told = told.clone();
        Arc::new(move |pods| {
            let mut uids: Vec<String> = pods.iter().map(|p| p.pod.uid.clone()).collect();
            uids.sort();
            told.lock().unwrap().push(uids);
        })
    };
    let source = kube_source::spawn(client, NODE, sink, Some(on_pods));
    let mut c: HeadroomClient<_> = headroom_client::headroom_client(&socket).await.unwrap();

    // Allocatable from status.allocatable; allocated = web 750m + the resizer at its desired 2
    // CPUs (a Deferred resize counts as the scheduler counts it); the Succeeded job not at all.
    let snapshot = wait_for("node figures from the API server", async || {
        let s = c
            .get_headroom(pb::GetHeadroomRequest { include_pods: true })
            .await
            .unwrap()
            .into_inner();
        (cpu(&s) == (3920, 2750, 0, 1170) && !s.node.as_ref().unwrap().stale).then_some(s)
    })
    .await;
    let mem = snapshot.node.as_ref().unwrap().memory_bytes.as_ref().unwrap();
    assert_eq!((mem.allocatable, mem.allocated), (13_134_516 * 1024, 2 << 30));
    let mut uids: Vec<String> = snapshot
        .pods
        .iter()
        .map(|p| p.pod.as_ref().unwrap().uid.clone())
        .collect();
    uids.sort();
    assert_eq!(uids, [WEB_UID, RESIZER_UID]);

    // Only list and watch, on this node's Node and this node's Pods: what API_GRANTS (and so the
    // ClusterRole) allows.
    {
        let st = state.lock().unwrap();
        for r in &st.requests {
            assert!(
                API_GRANTS.contains(&("", r.resource(), r.verb())),
                "{r:?} is not in API_GRANTS"
            );
            let selector = match r.resource() {
                "nodes" => "fieldSelector=metadata.name%3Dnode-a",
                _ => "fieldSelector=spec.nodeName%3Dnode-a",
            };
            assert!(r.query.contains(selector), "{r:?}");
        }
        assert!(st.watches.contains_key("nodes") && st.watches.contains_key("pods"));
    }

    // 2500m for the resizer, 1000m of which its own count already holds (it is counted at its
    // desired 2 CPU, admitted at 1): 1500m beyond 1170m free, refused; with web (750m) leaving
    // for it, 1920m free, granted.
    let e = c.reserve(reserve("r-without", 2500, &[])).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    let e = c
        .reserve(reserve("r-self", 2500, &[RESIZER_UID]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = c
        .reserve(reserve("r-bad", 2500, &["../../etc"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let too_many: Vec<String> = (0..257).map(|i| format!("uid-{i}")).collect();
    let mut req = reserve("r-many", 2500, &[]);
    req.releasing_pod_uids = too_many;
    let e = c.reserve(req).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let ok = c
        .reserve(reserve("r-with", 2500, &[WEB_UID, JOB_UID]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.reservation.unwrap().id, "r-with");

    // The victim leaves (a watch event): allocated follows, and the reservation holds its room
    // (1500m shown reserved: the part its Pod's count does not already hold).
    let mut gone = web();
    gone["metadata"]["resourceVersion"] = json!("1010");
    push(&state, "pods", json!({"type": "DELETED", "object": gone}));
    wait_for("the victim's room is the reservation's", async || {
        let s = c
            .get_headroom(pb::GetHeadroomRequest { include_pods: false })
            .await
            .unwrap()
            .into_inner();
        (cpu(&s) == (3920, 2000, 1500, 420)).then_some(())
    })
    .await;
    // The listed set first (the Succeeded job is not counted, so not among them), then the one
    // without the victim: the actuator lets the victim's cgroup files go.
    {
        let told = told.lock().unwrap();
        assert!(
            told.iter().any(|uids| uids == &[WEB_UID, RESIZER_UID]),
            "{told:?}"
        );
        assert_eq!(told.last().unwrap(), &[RESIZER_UID], "{told:?}");
    }

    // The Node changes live (allocatable follows), and a watch that fails turns nothing into a
    // panic: the figures keep their last good values.
    let mut bigger = node("3900m");
    bigger["metadata"]["resourceVersion"] = json!("950");
    push(&state, "nodes", json!({"type": "MODIFIED", "object": bigger}));
    wait_for("allocatable follows the Node", async || {
        (reader.load().node.headroom.allocatable.cpu_millis == 3900).then_some(())
    })
    .await;
    push(
        &state,
        "nodes",
        json!({"type": "MODIFIED", "object": {"kind": "Node", "garbage": true}}),
    );
    push(
        &state,
        "pods",
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "too old resource version: 1000 (1010)", "reason": "Expired", "code": 410}}),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(reader.load().node.headroom.allocatable.cpu_millis, 3900);

    source.shutdown().await;
    server.shutdown().await.unwrap();
    pipeline.shutdown();
    api.abort();
}
