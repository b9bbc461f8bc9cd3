//! The gRPC API over a Unix socket in a temp dir: every RPC, bad input, access control.
#![allow(clippy::unwrap_used)]

mod api_common;

use std::{
    os::unix::fs::{FileTypeExt as _, PermissionsExt as _},
    time::{Duration, Instant},
};

use api_common::{TestDaemon, cpu_files, start};
use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use headroomd::server::AccessPolicy;
use tonic::{Code, transport::Channel};

async fn client(d: &TestDaemon) -> HeadroomClient<Channel> {
    headroom_client::headroom_client(&d.socket).await.unwrap()
}

fn reserve(id: &str, pod: &str, cpu_millis: i64) -> pb::ReserveRequest {
    pb::ReserveRequest {
        reservation_id: id.into(),
        pod: pod.into(),
        amount: Some(pb::ResourceAmount {
            cpu_millis: Some(cpu_millis),
            ..Default::default()
        }),
        ttl_seconds: 30,
        releasing_pod_uids: Vec::new(),
    }
}

#[tokio::test]
async fn get_headroom_and_socket_mode() {
    let d = start(AccessPolicy::default()).await;
    let meta = std::fs::metadata(&d.socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "socket must be 0600 by default"
    );
    let mut c = client(&d).await;
    let s = c
        .get_headroom(pb::GetHeadroomRequest { include_pods: true })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.node_name, "test-node");
    let cpu = s.node.unwrap().cpu_millis.unwrap();
    assert_eq!(
        (cpu.allocatable, cpu.allocated, cpu.reserved, cpu.headroom),
        (8000, 1000, 0, 7000)
    );
    assert_eq!(s.pods.len(), 1);
    assert_eq!(s.pods[0].pod.as_ref().unwrap().uid, "uid-1");
    let s = c
        .get_headroom(pb::GetHeadroomRequest { include_pods: false })
        .await
        .unwrap()
        .into_inner();
    assert!(s.pods.is_empty());
}

#[tokio::test]
async fn second_daemon_on_same_socket_is_refused() {
    let d = start(AccessPolicy::default()).await;
    let cfg = headroomd::server::ServerConfig {
        socket_path: d.socket.clone(),
        ..Default::default()
    };
    let r = headroomd::server::serve_uds(
        &cfg,
        d.reader.clone(),
        d.pipeline().ledger(),
        std::sync::Arc::new(headroomd::server::UnavailableActuator),
    )
    .await;
    assert!(
        matches!(r, Err(headroomd::server::ServerError::InUse(_))),
        "{:?}",
        r.err()
    );
}

#[tokio::test]
async fn watch_sees_throttling_rise_and_coalesces() {
    let d = start(AccessPolicy::default()).await;
    let mut c = client(&d).await;
    let mut stream = c
        .watch_headroom(pb::WatchHeadroomRequest {
            include_pods: true,
            min_interval_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let tx = d.pipeline().sender();
    let t0 = Instant::now();
    tx.send(cpu_files(11, t0, 100, 0)).unwrap();
    tx.send(cpu_files(11, t0 + Duration::from_millis(100), 110, 8))
        .unwrap();
    let sent = Instant::now();
    let ratio = loop {
        let s = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(s.version > first.version);
        let ratio = s.pods.iter().flat_map(|p| &p.containers).find_map(|c| {
            c.pressure
                .as_ref()
                .and_then(|p| p.cpu_throttled_ratio.as_ref())
                .map(|f| f.value)
        });
        if let Some(r) = ratio {
            break r;
        }
    };
    assert!((ratio - 0.8).abs() < 1e-9, "{ratio}");
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "watcher must see the rise within 1 s"
    );
}

/// A client with 64 KiB HTTP/2 windows (tonic's default is megabytes): what one stalled
/// subscriber can have in flight is bounded by the transport's flow-control window, and past that
/// the server holds nothing but "the newest version", however many snapshots are published.
#[tokio::test]
async fn slow_subscriber_gets_newest_not_backlog() {
    let d = start(AccessPolicy::default()).await;
    // Make each message about 2 KB.
    for n in 2..40 {
        d.pods.upsert(headroomd::pipeline::PodEntry {
            pod: api_common::pod_ref(n),
            requests: headroom_node_model::Resources::new(1, 1),
            pending_resize: headroom_node_model::Resources::ZERO,
        });
    }
    while d.reader.load().pods.len() < 39 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let path = d.socket.clone();
    let channel = tonic::transport::Endpoint::from_static("http://headroomd.local")
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
        .unwrap();
    let mut c = HeadroomClient::new(channel);
    let mut stream = c
        .watch_headroom(pb::WatchHeadroomRequest {
            include_pods: true,
            min_interval_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let size = prost::Message::encoded_len(&first);
    let tx = d.pipeline().sender();
    let t0 = Instant::now();
    // Publish ~400 versions while not reading.
    for i in 0..400u64 {
        tx.send(cpu_files(11, t0 + Duration::from_millis(i), i, 0))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (newest, published) = loop {
        let v = d.reader.load();
        if v.stats.processed_total >= 400 {
            break (v.version, v.version - first.version);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let mut received = 0u64;
    let mut size = size;
    loop {
        let s = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        received += 1;
        size = size.min(prost::Message::encoded_len(&s));
        if s.version >= newest {
            break;
        }
    }
    eprintln!(
        "{size}-byte messages: published {published} versions while not reading; {received} received to reach the newest"
    );
    assert!(
        published >= 200,
        "test setup: only {published} versions published"
    );
    // In flight: at most a 64 KiB window of messages, plus one held by the server.
    let window_msgs = 65_535 / size as u64 + 2;
    assert!(
        received <= window_msgs + 1,
        "received {received}; window holds {window_msgs}: a backlog was kept"
    );
}

#[tokio::test]
async fn list_pods_filters_and_unknown_pods() {
    let d = start(AccessPolicy::default()).await;
    let mut c = client(&d).await;
    let r = c
        .list_pods(pb::ListPodsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.pods.len(), 1);
    let r = c
        .list_pods(pb::ListPodsRequest {
            namespace: "kube-system".into(),
            pod_uid: String::new(),
        })
        .await;
    assert!(r.unwrap().into_inner().pods.is_empty());
    let e = c
        .list_pods(pb::ListPodsRequest {
            pod_uid: "nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().contains("unknown pod"), "{}", e.message());
    let e = c
        .list_pods(pb::ListPodsRequest {
            pod_uid: "../../etc".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
}

#[tokio::test]
async fn reserve_release_and_bad_quantities() {
    let d = start(AccessPolicy::default()).await;
    let mut c = client(&d).await;
    let r = c
        .reserve(reserve("r1", "default/web-1", 5000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.node.unwrap().cpu_millis.unwrap().headroom, 2000);
    let s = c
        .get_headroom(pb::GetHeadroomRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.reservations.len(), 1);
    assert_eq!(s.node.unwrap().cpu_millis.unwrap().reserved, 5000);

    let cases: Vec<(pb::ReserveRequest, Code, &str)> = vec![
        (
            reserve("r1", "default/web-1", 1),
            Code::AlreadyExists,
            "already exists",
        ),
        (
            reserve("r2", "default/web-1", 2001),
            Code::ResourceExhausted,
            "does not fit",
        ),
        (
            reserve("r3", "default/web-1", -5),
            Code::InvalidArgument,
            "negative",
        ),
        (
            reserve("r4", "default/web-1", i64::MAX),
            Code::InvalidArgument,
            "allocatable",
        ),
        (reserve("r5", "default/nobody", 1), Code::NotFound, "unknown pod"),
        (
            reserve("", "default/web-1", 1),
            Code::InvalidArgument,
            "reservation_id is empty",
        ),
        (reserve("r6", "../../x", 1), Code::InvalidArgument, "pod"),
        (
            pb::ReserveRequest {
                amount: Some(pb::ResourceAmount {
                    cpu: "1.5Zi".into(),
                    ..Default::default()
                }),
                ..reserve("r7", "default/web-1", 0)
            },
            Code::InvalidArgument,
            "amount.cpu",
        ),
        (
            pb::ReserveRequest {
                amount: Some(pb::ResourceAmount {
                    memory: "-1Gi".into(),
                    ..Default::default()
                }),
                ..reserve("r8", "default/web-1", 0)
            },
            Code::InvalidArgument,
            "negative",
        ),
        (
            pb::ReserveRequest {
                ttl_seconds: 100_000,
                ..reserve("r9", "default/web-1", 1)
            },
            Code::InvalidArgument,
            "ttl",
        ),
        (
            pb::ReserveRequest {
                amount: None,
                ..reserve("r10", "default/web-1", 1)
            },
            Code::InvalidArgument,
            "missing",
        ),
    ];
    for (req, code, needle) in cases {
        let e = c.reserve(req.clone()).await.unwrap_err();
        assert_eq!(e.code(), code, "{req:?}: {e:?}");
        assert!(
            e.message().contains(needle),
            "{req:?}: message {:?} lacks {needle:?}",
            e.message()
        );
    }
    // Quantity strings are parsed with Kubernetes' rules.
    let q = pb::ReserveRequest {
        amount: Some(pb::ResourceAmount {
            cpu: "500m".into(),
            memory: "1Gi".into(),
            ..Default::default()
        }),
        ..reserve("rq", "uid-1", 0)
    };
    let r = c.reserve(q).await.unwrap().into_inner().reservation.unwrap();
    assert_eq!((r.cpu_millis, r.memory_bytes), (500, 1 << 30));

    let r = c
        .release(pb::ReleaseRequest {
            reservation_id: "r1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.node.unwrap().cpu_millis.unwrap().headroom, 6500);
    let e = c
        .release(pb::ReleaseRequest {
            reservation_id: "r1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Still serving after all that.
    c.get_headroom(pb::GetHeadroomRequest::default()).await.unwrap();
}

#[tokio::test]
async fn state_changing_calls_need_an_allowed_uid() {
    // Nobody is allowed to write: this test runs as some uid that is not 4242.
    let d = start(AccessPolicy {
        writer_uids: vec![4242],
        reader_uids: None,
        ..AccessPolicy::default()
    })
    .await;
    let mut c = client(&d).await;
    let e = c.reserve(reserve("r1", "default/web-1", 1)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("uid="),
        "refusal names the peer: {}",
        e.message()
    );
    let e = c
        .release(pb::ReleaseRequest {
            reservation_id: "r1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .apply_resize(pb::ApplyResizeRequest {
            pod_uid: "uid-1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // Reads stay open.
    c.get_headroom(pb::GetHeadroomRequest::default()).await.unwrap();
}

#[tokio::test]
async fn apply_resize_validates_then_reports_unimplemented() {
    let d = start(AccessPolicy {
        writer_uids: vec![nix_uid()],
        reader_uids: None,
        ..AccessPolicy::default()
    })
    .await;
    let mut c = client(&d).await;
    let good = pb::ApplyResizeRequest {
        pod_uid: "uid-1".into(),
        containers: vec![pb::ContainerResources {
            name: "app".into(),
            cpu_request_millis: Some(2000),
            cpu_limit_millis: Some(2000),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = c.apply_resize(good.clone()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
    assert!(e.message().contains("no resize actuator"), "{}", e.message());
    let mut bad = good.clone();
    bad.containers[0].memory_limit_bytes = Some(-1);
    let e = c.apply_resize(bad).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("containers[0].memory_limit_bytes"),
        "{}",
        e.message()
    );
    let mut bad = good.clone();
    bad.containers[0].name = "../../../sys".into();
    assert_eq!(
        c.apply_resize(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let bad = pb::ApplyResizeRequest {
        pod_uid: "unknown-uid".into(),
        ..good
    };
    assert_eq!(c.apply_resize(bad).await.unwrap_err().code(), Code::NotFound);
}

fn nix_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[tokio::test]
async fn oversized_and_malformed_requests_are_refused_and_serving_goes_on() {
    let d = start(AccessPolicy::default()).await;
    let mut c = client(&d).await;
    let huge = reserve(&"x".repeat(1 << 20), "default/web-1", 1);
    let e = c.reserve(huge).await.unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");

    // Bytes that are not a ReserveRequest: field 1 (a string) carries invalid UTF-8.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Evil {
        #[prost(bytes = "vec", tag = "1")]
        id: Vec<u8>,
    }
    let channel = headroom_client::connect_uds(&d.socket).await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/headroom.v1.Headroom/Reserve");
    let codec = tonic_prost::ProstCodec::<Evil, pb::ReserveResponse>::default();
    let e = grpc
        .unary(
            tonic::Request::new(Evil {
                id: vec![0xff, 0xfe, 0x00],
            }),
            path,
            codec,
        )
        .await
        .unwrap_err();
    assert_ne!(e.code(), Code::Ok);
    assert!(e.message().to_lowercase().contains("decode"), "{e:?}");

    c.get_headroom(pb::GetHeadroomRequest::default()).await.unwrap();
}

#[tokio::test]
async fn health_and_reflection() {
    let d = start(AccessPolicy::default()).await;
    let channel = headroom_client::connect_uds(&d.socket).await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let r = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "headroom.v1.Headroom".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let mut reflection = ServerReflectionClient::new(channel);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = reflection
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("{resp:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"headroom.v1.Headroom"), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
}
