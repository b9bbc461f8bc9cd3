//! Hostile callers of the gRPC API, short enough for `cargo test`: identifiers that try to leave
//! the cgroup roots, absurd quantities, malformed protobuf and garbage bytes on the socket,
//! requests just over the size limit, and a non-root peer calling the state-changing RPCs. After
//! each, the daemon must still answer a plain `GetHeadroom` and hold no reservation it did not
//! grant. (The basic cases — one oversized Reserve, one invalid-UTF-8 string, unknown Pods,
//! negative amounts, a uid missing from the allow-list — are in `api_uds.rs`.)
#![allow(clippy::unwrap_used)]

mod api_common;

use std::{
    io::{Read as _, Write as _},
    os::unix::{fs::PermissionsExt as _, net::UnixStream},
    path::Path,
    process::Command,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use api_common::{TestDaemon, start};
use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use headroomd::server::AccessPolicy;
use prost::bytes::{Buf as _, BufMut as _};
use tonic::{
    Code, Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
};

fn my_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

async fn writer_daemon() -> TestDaemon {
    start(AccessPolicy {
        writer_uids: vec![my_uid()],
        reader_uids: None,
        ..AccessPolicy::default()
    })
    .await
}

async fn client(d: &TestDaemon) -> HeadroomClient<Channel> {
    headroom_client::headroom_client(&d.socket).await.unwrap()
}

/// Still serving, and no reservation was left behind by refused requests.
async fn still_serving_and_clean(d: &TestDaemon) {
    let mut c = client(d).await;
    let s = tokio::time::timeout(
        Duration::from_secs(5),
        c.get_headroom(pb::GetHeadroomRequest { include_pods: true }),
    )
    .await
    .expect("GetHeadroom answered within 5 s")
    .expect("GetHeadroom succeeds after the hostile input")
    .into_inner();
    assert_eq!(s.pods.len(), 1, "the Pod set is unchanged");
    assert!(
        s.reservations.is_empty(),
        "refused requests left reservations: {:?}",
        s.reservations
    );
    let cpu = s.node.unwrap().cpu_millis.unwrap();
    assert_eq!((cpu.reserved, cpu.headroom), (0, 7000));
}

fn escaping_ids() -> Vec<String> {
    vec![
        "..".into(),
        ".".into(),
        "../..".into(),
        "../../../../sys/fs/cgroup".into(),
        "/etc".into(),
        "uid-1/..".into(),
        "uid-1/../../x".into(),
        "a/b".into(),
        "uid\0-1".into(),
        "\0".into(),
        "uid-1\n".into(),
        "uid 1".into(),
        "%2e%2e".into(),
        "ｕｉｄ".into(),
        "uid-1\u{202e}".into(),
        "a".repeat(65),
        "a".repeat(60_000),
    ]
}

#[tokio::test]
async fn identifiers_that_could_leave_the_cgroup_roots_are_refused() {
    let d = writer_daemon().await;
    let mut c = client(&d).await;
    let container = |name: &str| pb::ContainerResources {
        name: name.into(),
        cpu_request_millis: Some(100),
        ..Default::default()
    };
    for bad in escaping_ids() {
        let shown: String = bad.chars().take(40).collect();
        let e = c
            .apply_resize(pb::ApplyResizeRequest {
                pod_uid: bad.clone(),
                containers: vec![container("app")],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "pod_uid {shown:?}: {e:?}");
        assert!(e.message().contains("pod_uid"), "{}", e.message());
        assert!(
            e.message().len() < 400,
            "the refusal does not echo the whole input: {} bytes",
            e.message().len()
        );
        let e = c
            .apply_resize(pb::ApplyResizeRequest {
                pod_uid: "uid-1".into(),
                containers: vec![container(&bad)],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "container {shown:?}: {e:?}");
        assert!(e.message().contains("containers[0].name"), "{}", e.message());
        for pod in [bad.clone(), format!("default/{bad}"), format!("{bad}/web-1")] {
            let e = c
                .reserve(pb::ReserveRequest {
                    reservation_id: "r".into(),
                    pod: pod.clone(),
                    amount: Some(pb::ResourceAmount {
                        cpu_millis: Some(1),
                        ..Default::default()
                    }),
                    ttl_seconds: 10,
                    releasing_pod_uids: Vec::new(),
                })
                .await
                .unwrap_err();
            // `a/b` is namespace `a`, Pod `b`; a 65-character Pod *name* is a valid DNS
            // subdomain (Kubernetes checks only the total length): both are refused as unknown.
            let valid_but_unknown = pod == "a/b" || pod == format!("default/{}", "a".repeat(65));
            assert!(
                e.code() == Code::InvalidArgument || (valid_but_unknown && e.code() == Code::NotFound),
                "pod {shown:?}: {e:?}"
            );
        }
        let e = c
            .list_pods(pb::ListPodsRequest {
                pod_uid: bad.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "list pod_uid {shown:?}: {e:?}");
        // Reservation ids never become paths: `..` is a valid (unknown) id there.
        let valid_id = bad.len() <= 128
            && bad
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-'));
        let e = c
            .release(pb::ReleaseRequest { reservation_id: bad })
            .await
            .unwrap_err();
        let expected = if valid_id {
            Code::NotFound
        } else {
            Code::InvalidArgument
        };
        assert_eq!(e.code(), expected, "release {shown:?}: {e:?}");
    }
    still_serving_and_clean(&d).await;
}

#[tokio::test]
async fn negative_overflowing_and_absurd_quantities_are_refused() {
    let d = writer_daemon().await;
    let mut c = client(&d).await;
    let amount = |cpu: &str, memory: &str| pb::ReserveRequest {
        reservation_id: "q".into(),
        pod: "default/web-1".into(),
        amount: Some(pb::ResourceAmount {
            cpu: cpu.into(),
            memory: memory.into(),
            ..Default::default()
        }),
        ttl_seconds: 10,
        releasing_pod_uids: Vec::new(),
    };
    let cases: &[(&str, &str, &str)] = &[
        ("-1", "", "negative"),
        ("-0.001", "", "negative"),
        ("", "-1Ki", "negative"),
        ("1e400", "", "too large"),
        ("1e99999", "", "not a Kubernetes quantity"),
        ("1e18", "", "too large"),
        ("", "8Ei", "too large"),
        ("", "99999999999999999999999999999999999999999999", "too large"),
        ("9223372036854775807", "", "too large"),
        ("9", "", "allocatable"),
        ("", "17Gi", "allocatable"),
        ("NaN", "", "not a Kubernetes quantity"),
        ("Inf", "", "not a Kubernetes quantity"),
        ("0x10", "", "suffix"),
        ("1,5", "", "suffix"),
        ("1 Gi", "", "suffix"),
        ("1.2.3", "", "not a Kubernetes quantity"),
        ("", "1Zi", "suffix"),
        ("0", "0", "zero"),
    ];
    for (cpu, memory, needle) in cases {
        let e = c.reserve(amount(cpu, memory)).await.unwrap_err();
        assert_eq!(
            e.code(),
            Code::InvalidArgument,
            "cpu {cpu:?} memory {memory:?}: {e:?}"
        );
        assert!(
            e.message().contains(needle),
            "cpu {cpu:?} memory {memory:?}: {:?} lacks {needle:?}",
            e.message()
        );
    }
    // Numbers as integers: beyond the node, negative, and both forms at once.
    for (cpu, memory) in [
        (Some(i64::MIN), None),
        (Some(i64::MAX), None),
        (Some(8001), None),
        (None, Some(i64::MIN)),
        (None, Some(i64::MAX)),
        (None, Some((16 << 30) + 1)),
    ] {
        let req = pb::ReserveRequest {
            amount: Some(pb::ResourceAmount {
                cpu_millis: cpu,
                memory_bytes: memory,
                ..Default::default()
            }),
            ..amount("", "")
        };
        let e = c.reserve(req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{cpu:?} {memory:?}: {e:?}");
    }
    // The same limits hold for every field of a resize.
    for v in [i64::MIN, -1, 8001, i64::MAX] {
        for field in 0..2 {
            let mut container = pb::ContainerResources {
                name: "app".into(),
                ..Default::default()
            };
            if field == 0 {
                container.cpu_request_millis = Some(v);
            } else {
                container.cpu_limit_millis = Some(v);
            }
            let e = c
                .apply_resize(pb::ApplyResizeRequest {
                    pod_uid: "uid-1".into(),
                    containers: vec![container],
                    ..Default::default()
                })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{v} in field {field}: {e:?}");
        }
        let e = c
            .apply_resize(pb::ApplyResizeRequest {
                pod_uid: "uid-1".into(),
                pod: Some(pb::PodLevelResources {
                    memory_limit_bytes: Some(v.saturating_mul(1 << 22)),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "pod memory {v}: {e:?}");
    }
    // Too many containers, and a TTL past the limit.
    let many = (0..65)
        .map(|i| pb::ContainerResources {
            name: format!("c{i}"),
            cpu_request_millis: Some(1),
            ..Default::default()
        })
        .collect();
    let e = c
        .apply_resize(pb::ApplyResizeRequest {
            pod_uid: "uid-1".into(),
            containers: many,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("at most 64"), "{e:?}");
    let e = c
        .reserve(pb::ReserveRequest {
            ttl_seconds: u32::MAX,
            ..amount("1", "")
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("ttl"), "{e:?}");
    still_serving_and_clean(&d).await;
}

/// Sends whatever bytes it is given as the gRPC message body (tonic adds the 5-byte frame).
#[derive(Clone, Copy, Default)]
struct RawCodec;
struct RawEncoder;
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

const METHODS: &[&str] = &[
    "/headroom.v1.Headroom/Reserve",
    "/headroom.v1.Headroom/Release",
    "/headroom.v1.Headroom/ApplyResize",
    "/headroom.v1.Headroom/ListPods",
    "/headroom.v1.Headroom/GetHeadroom",
];

async fn raw_unary(
    grpc: &mut tonic::client::Grpc<Channel>,
    method: &'static str,
    body: Vec<u8>,
) -> Result<Vec<u8>, Status> {
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(method);
    tokio::time::timeout(
        Duration::from_secs(5),
        grpc.unary(tonic::Request::new(body), path, RawCodec),
    )
    .await
    .unwrap_or_else(|_| panic!("{method}: no answer within 5 s"))
    .map(tonic::Response::into_inner)
}

/// A small deterministic generator (no extra dependency, reproducible failures).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[tokio::test]
async fn malformed_protobuf_is_refused_by_every_method() {
    let d = writer_daemon().await;
    let channel = headroom_client::connect_uds(&d.socket).await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let malformed: Vec<Vec<u8>> = vec![
        vec![0x0a, 0xff],                         // length varint cut short
        vec![0x0a, 0x7f, b'a'],                   // length past the end
        vec![0x0f],                               // wire type 7 does not exist
        vec![0x00, 0x01],                         // field number 0
        vec![0xff; 11],                           // varint longer than 10 bytes
        vec![0x0a, 0x03, 0xff, 0xfe, 0x00],       // field 1 (a string) not UTF-8
        vec![0x1a, 0x05, 0x08, 0xff, 0xff, 0xff], // nested message cut short
    ];
    for method in METHODS {
        for body in &malformed {
            let e = raw_unary(&mut grpc, method, body.clone()).await.unwrap_err();
            assert!(
                matches!(e.code(), Code::Internal | Code::InvalidArgument),
                "{method} {body:x?}: {e:?}"
            );
        }
    }
    // Random bodies: any answer is fine except a success of a state-changing call, a hang or a
    // dropped connection.
    let mut rng = Lcg(0x5eed);
    let mut decoded_but_refused = 0;
    for i in 0..300 {
        let method = METHODS[i % METHODS.len()];
        let len = (rng.next() % 200) as usize;
        let body = rng.bytes(len);
        match raw_unary(&mut grpc, method, body.clone()).await {
            Ok(_) => assert!(
                method.ends_with("GetHeadroom") || method.ends_with("ListPods"),
                "{method} accepted random bytes {body:x?}"
            ),
            Err(e) => {
                assert_ne!(e.code(), Code::Unavailable, "{method}: connection lost: {e:?}");
                if e.code() != Code::Internal {
                    decoded_but_refused += 1;
                }
            }
        }
    }
    eprintln!("300 random bodies: {decoded_but_refused} decoded and were refused by validation");
    still_serving_and_clean(&d).await;
}

#[tokio::test]
async fn requests_just_over_the_size_limit_are_refused_before_decoding() {
    let d = writer_daemon().await;
    let channel = headroom_client::connect_uds(&d.socket).await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    // A ReserveRequest whose id is a 64 KiB string: over the limit by the field's header.
    let at_limit = {
        let mut body = vec![0x0a];
        let n = 64 * 1024 - 4;
        body.extend_from_slice(&[
            (n as u8 & 0x7f) | 0x80,
            ((n >> 7) as u8 & 0x7f) | 0x80,
            (n >> 14) as u8,
        ]);
        body.extend(std::iter::repeat_n(b'a', n));
        body
    };
    assert_eq!(at_limit.len(), 64 * 1024);
    let e = raw_unary(&mut grpc, METHODS[0], at_limit.clone())
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::InvalidArgument,
        "at the limit it is decoded, then refused: {e:?}"
    );
    assert!(e.message().contains("reservation_id"), "{e:?}");
    for method in METHODS {
        for extra in [1usize, 4096, 4 << 20] {
            let mut body = at_limit.clone();
            body.extend(std::iter::repeat_n(0u8, extra));
            let e = raw_unary(&mut grpc, method, body).await.unwrap_err();
            assert_eq!(e.code(), Code::OutOfRange, "{method} +{extra} bytes: {e:?}");
        }
    }
    still_serving_and_clean(&d).await;
}

#[tokio::test]
async fn garbage_on_the_socket_costs_one_connection() {
    let d = writer_daemon().await;
    let socket = d.socket.clone();
    let mut rng = Lcg(42);
    let mut payloads: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), // the preface, then nothing sensible
        [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".as_slice(), &[0xff; 64]].concat(),
        // A SETTINGS frame claiming a 16 MiB payload.
        [
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".as_slice(),
            &[0xff, 0xff, 0xff, 0x04, 0, 0, 0, 0, 0],
        ]
        .concat(),
        vec![0; 1 << 16],
    ];
    payloads.extend((0..20).map(|_| {
        let n = (rng.next() % 4096) as usize;
        rng.bytes(n)
    }));
    let garbage = tokio::task::spawn_blocking(move || {
        for p in payloads {
            let mut s = UnixStream::connect(&socket).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.write_all(&p);
            let _ = s.shutdown(std::net::Shutdown::Write);
            // The server answers (a GOAWAY or an HTTP/1 error) and closes, or just closes.
            let mut sink = Vec::new();
            let r = s.read_to_end(&mut sink);
            assert!(
                !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
                "the server kept a garbage connection open for 5 s"
            );
        }
        // Connections that say nothing and are dropped.
        for _ in 0..50 {
            drop(UnixStream::connect(&socket).unwrap());
        }
    });
    garbage.await.unwrap();
    still_serving_and_clean(&d).await;
}

// === A non-root peer ===

/// Tracing output of this test binary, for "every refusal is logged with the peer".
fn captured_log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || SharedWriter(sink.clone()))
            .with_env_filter("headroomd=info")
            .try_init();
        buf
    })
    .clone()
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for SharedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const CHILD_SOCKET: &str = "HEADROOM_HOSTILE_CHILD_SOCKET";

/// Runs only as the child of `non_root_peer_is_refused_and_logged` (as uid 65534).
#[tokio::test]
async fn child_as_nobody() {
    let Some(socket) = std::env::var_os(CHILD_SOCKET) else {
        return;
    };
    assert_eq!(my_uid(), 65534, "the child runs as nobody");
    let mut c = headroom_client::headroom_client(Path::new(&socket))
        .await
        .unwrap();
    let e = c
        .reserve(pb::ReserveRequest {
            reservation_id: "from-nobody".into(),
            pod: "default/web-1".into(),
            amount: Some(pb::ResourceAmount {
                cpu_millis: Some(1000),
                ..Default::default()
            }),
            ttl_seconds: 60,
            releasing_pod_uids: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("uid=65534"), "{}", e.message());
    let e = c
        .release(pb::ReleaseRequest {
            reservation_id: "held-by-root".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = c
        .apply_resize(pb::ApplyResizeRequest {
            pod_uid: "uid-1".into(),
            containers: vec![pb::ContainerResources {
                name: "app".into(),
                cpu_limit_millis: Some(100),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // Reads are open to whoever the socket's mode lets in.
    c.get_headroom(pb::GetHeadroomRequest::default()).await.unwrap();
    println!("CHILD-REFUSED-3");
}

#[tokio::test]
async fn non_root_peer_is_refused_and_logged() {
    // Root runs a client as nobody (setpriv).
    if !headroom_testkit::gate::privileged(
        "non_root_peer_is_refused_and_logged",
        headroom_testkit::gate::not_root(),
    ) {
        return;
    }
    let log = captured_log();
    // Root is the only writer (the default policy); the socket is opened to everyone for this
    // test only, so that the kernel lets nobody connect and the allow-list is what refuses it.
    let d = start(AccessPolicy::default()).await;
    for dir in [d.dir.path(), d.socket.parent().unwrap()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut c = client(&d).await;
    c.reserve(pb::ReserveRequest {
        reservation_id: "held-by-root".into(),
        pod: "default/web-1".into(),
        amount: Some(pb::ResourceAmount {
            cpu_millis: Some(500),
            ..Default::default()
        }),
        ttl_seconds: 60,
        releasing_pod_uids: Vec::new(),
    })
    .await
    .unwrap();

    let me = std::env::current_exe().unwrap();
    let socket = d.socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(me)
            .args(["--exact", "child_as_nobody", "--nocapture", "--test-threads=1"])
            .env(CHILD_SOCKET, socket)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD-REFUSED-3"),
        "the client running as nobody failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing changed: root's reservation is still there, nobody's never appeared.
    let s = c
        .get_headroom(pb::GetHeadroomRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = s.reservations.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["held-by-root"]);
    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    for rpc in ["Reserve", "Release", "ApplyResize"] {
        assert!(
            text.lines().any(|l| l.contains("refused")
                && l.contains("uid=65534")
                && l.contains(&format!("rpc=\"{rpc}\""))),
            "no log line for the refused {rpc} naming the peer:\n{text}"
        );
    }
}
