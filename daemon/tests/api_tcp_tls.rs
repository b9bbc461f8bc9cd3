//! The gRPC API on TCP with mutual TLS, next to the Unix socket: certificates made at test time
//! (rcgen), the server on 127.0.0.1:0. Who gets in, who may write, and what a bad TLS file says.
#![allow(clippy::unwrap_used)]

mod api_common;
mod tls_support;

use headroom_client::error_chain;
use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use api_common::{TestDaemon, start_with};
use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use headroomd::server::{self, AccessPolicy, ServerError, TcpConfig, TlsError};
use tls_support::{Ca, Pem, server_files};
use tonic::{
    Code,
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
};

const SHIM_ID: &str = "spiffe://cluster.local/ns/headroom-system/sa/headroom";

/// A daemon whose TCP listener trusts `ca` for clients; `SHIM_ID` may write over TCP.
async fn start_tls(ca: &Ca) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let tcp = server_files(dir.path(), ca);
    let access = AccessPolicy {
        tls_writer_names: vec![SHIM_ID.into()],
        ..AccessPolicy::default()
    };
    start_with(dir, access, Some(tcp)).await
}

fn addr(d: &TestDaemon) -> SocketAddr {
    d.server().tcp_addr().expect("TCP listener configured")
}

/// Client TLS settings: trusts `server_ca` for the server, presents `identity` if any.
fn client_tls(server_ca: &Ca, identity: Option<&Pem>) -> ClientTlsConfig {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(server_ca.pem()))
        .domain_name("localhost");
    match identity {
        Some(p) => tls.identity(Identity::from_pem(&p.cert, &p.key)),
        None => tls,
    }
}

/// A channel to `addr`: TLS when `tls` is given, plaintext HTTP/2 otherwise.
async fn channel(addr: SocketAddr, tls: Option<ClientTlsConfig>) -> Result<Channel, String> {
    let connect = headroom_client::connect_tcp(addr, tls, Duration::from_secs(5));
    tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {}", error_chain(&e)))
}

/// `GetHeadroom` over TCP: the snapshot, or why not.
async fn get_headroom(
    addr: SocketAddr,
    tls: Option<ClientTlsConfig>,
) -> Result<pb::HeadroomSnapshot, String> {
    let mut client = HeadroomClient::new(channel(addr, tls).await?);
    tokio::time::timeout(
        Duration::from_secs(10),
        client.get_headroom(pb::GetHeadroomRequest { include_pods: true }),
    )
    .await
    .map_err(|_| "GetHeadroom timed out".to_string())?
    .map(tonic::Response::into_inner)
    .map_err(|s| format!("GetHeadroom: {s:?}"))
}

fn reserve(id: &str) -> pb::ReserveRequest {
    pb::ReserveRequest {
        reservation_id: id.into(),
        pod: "default/web-1".into(),
        amount: Some(pb::ResourceAmount {
            cpu_millis: Some(500),
            ..Default::default()
        }),
        ttl_seconds: 30,
        releasing_pod_uids: Vec::new(),
    }
}

#[tokio::test]
async fn ca_signed_client_reads_over_tcp_and_the_socket_still_serves() {
    let ca = Ca::new("headroom test CA");
    let d = start_tls(&ca).await;
    let reader = ca.client("dashboard", &["dashboard.example"]);
    let s = get_headroom(addr(&d), Some(client_tls(&ca, Some(&reader))))
        .await
        .unwrap();
    assert_eq!(s.node_name, "test-node");
    assert_eq!(s.node.unwrap().cpu_millis.unwrap().headroom, 7000);
    assert_eq!(s.pods.len(), 1);

    // Health and reflection are on TCP too.
    let ch = channel(addr(&d), Some(client_tls(&ca, Some(&reader))))
        .await
        .unwrap();
    let r = tonic_health::pb::health_client::HealthClient::new(ch.clone())
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
    let mut stream = ServerReflectionClient::new(ch.clone())
        .server_reflection_info(tokio_stream::iter(vec![ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        }]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("{resp:?}")
    };
    assert!(
        list.service.iter().any(|s| s.name == "headroom.v1.Headroom"),
        "{list:?}"
    );
    // A watch over TCP sees the first snapshot.
    let mut watch = HeadroomClient::new(ch)
        .watch_headroom(pb::WatchHeadroomRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(watch.message().await.unwrap().unwrap().node_name, "test-node");

    // The Unix socket serves as before, mode 0600.
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let mut uds = headroom_client::headroom_client(&d.socket).await.unwrap();
    uds.get_headroom(pb::GetHeadroomRequest::default()).await.unwrap();
}

#[tokio::test]
async fn client_without_certificate_is_rejected() {
    let ca = Ca::new("headroom test CA");
    let d = start_tls(&ca).await;
    let e = get_headroom(addr(&d), Some(client_tls(&ca, None)))
        .await
        .unwrap_err();
    eprintln!("no client certificate: {e}");
    assert!(
        e.contains("CertificateRequired"),
        "refused by the server for want of a certificate: {e}"
    );
    // Still serving verified clients.
    let ok = ca.client("dashboard", &["dashboard.example"]);
    get_headroom(addr(&d), Some(client_tls(&ca, Some(&ok))))
        .await
        .unwrap();
}

#[tokio::test]
async fn client_with_certificate_from_another_ca_is_rejected() {
    let ca = Ca::new("headroom test CA");
    let d = start_tls(&ca).await;
    let other = Ca::new("some other CA");
    // Same names as the allowed writer: the names mean nothing without the right CA.
    let stranger = other.client("headroom-shim", &[SHIM_ID, "dashboard.example"]);
    let e = get_headroom(addr(&d), Some(client_tls(&ca, Some(&stranger))))
        .await
        .unwrap_err();
    eprintln!("client certificate from another CA: {e}");
    assert!(
        e.contains("UnknownCA"),
        "refused by the server's client verification: {e}"
    );
    // A self-signed client certificate is no better.
    let self_signed = rcgen::generate_simple_self_signed(vec!["dashboard.example".to_string()]).unwrap();
    let pem = Pem {
        cert: self_signed.cert.pem(),
        key: self_signed.signing_key.serialize_pem(),
    };
    let e = get_headroom(addr(&d), Some(client_tls(&ca, Some(&pem))))
        .await
        .unwrap_err();
    assert!(e.contains("UnknownCA"), "self-signed client certificate: {e}");
    let ok = ca.client("dashboard", &["dashboard.example"]);
    get_headroom(addr(&d), Some(client_tls(&ca, Some(&ok))))
        .await
        .unwrap();
}

#[tokio::test]
async fn plaintext_to_the_tls_port_fails() {
    let ca = Ca::new("headroom test CA");
    let d = start_tls(&ca).await;
    let e = get_headroom(addr(&d), None).await.unwrap_err();
    eprintln!("plaintext HTTP/2: {e}");
    // Raw bytes: the server answers with a TLS alert or closes; never with HTTP.
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut raw = tokio::net::TcpStream::connect(addr(&d)).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut buf))
        .await
        .expect("the server closes a plaintext connection");
    assert!(
        !buf.starts_with(b"HTTP"),
        "plaintext got an HTTP answer: {:?}",
        String::from_utf8_lossy(&buf)
    );
    let ok = ca.client("dashboard", &["dashboard.example"]);
    get_headroom(addr(&d), Some(client_tls(&ca, Some(&ok))))
        .await
        .unwrap();
}

/// Any verified client reads; only a client whose certificate names an entry of
/// `server.tcp.writer_names` may `Reserve`, `Release` or `ApplyResize`.
#[tokio::test]
async fn writes_over_tcp_need_a_named_certificate() {
    let ca = Ca::new("headroom test CA");
    let d = start_tls(&ca).await;

    let shim = ca.client("headroom-shim", &["shim.example", SHIM_ID]);
    let mut writer = HeadroomClient::new(
        channel(addr(&d), Some(client_tls(&ca, Some(&shim))))
            .await
            .unwrap(),
    );
    let r = writer.reserve(reserve("tcp-1")).await.unwrap().into_inner();
    assert_eq!(r.node.unwrap().cpu_millis.unwrap().reserved, 500);

    // The common name is not an identity: "spiffe://…" as CN, not as SAN, gets nothing.
    for (label, pem) in [
        ("reader", ca.client("dashboard", &["dashboard.example"])),
        ("CN only", ca.client(SHIM_ID, &["other.example"])),
        ("no names", ca.client("nameless", &[])),
    ] {
        let mut c = HeadroomClient::new(
            channel(addr(&d), Some(client_tls(&ca, Some(&pem))))
                .await
                .unwrap(),
        );
        let e = c.reserve(reserve("tcp-2")).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{label}: {e:?}");
        assert!(e.message().contains("tls client"), "{label}: {}", e.message());
        assert!(
            e.message().contains("server.tcp.writer_names"),
            "{label}: {}",
            e.message()
        );
        let e = c
            .release(pb::ReleaseRequest {
                reservation_id: "tcp-1".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{label}: {e:?}");
        let e = c
            .apply_resize(pb::ApplyResizeRequest {
                pod_uid: "uid-1".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{label}: {e:?}");
        // Reads are open to every verified client.
        let s = c
            .get_headroom(pb::GetHeadroomRequest::default())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            s.reservations.len(),
            1,
            "{label}: the writer's reservation is untouched"
        );
    }
    let reader = ca.client("dashboard", &["dashboard.example"]);
    let e = HeadroomClient::new(
        channel(addr(&d), Some(client_tls(&ca, Some(&reader))))
            .await
            .unwrap(),
    )
    .reserve(reserve("tcp-3"))
    .await
    .unwrap_err();
    assert!(
        e.message().contains("dashboard.example"),
        "names the caller: {}",
        e.message()
    );

    writer
        .release(pb::ReleaseRequest {
            reservation_id: "tcp-1".into(),
        })
        .await
        .unwrap();
}

/// The daemon as `headroomd serve` assembles it: `[server.tcp]` in the config starts the TLS
/// listener next to the socket.
#[tokio::test]
async fn daemon_start_serves_tcp_when_configured() {
    let ca = Ca::new("headroom test CA");
    let dir = tempfile::tempdir().unwrap();
    let mut config = headroomd::config::Config::default();
    config.pipeline.allocatable = headroom_node_model::Resources::new(4000, 8 << 30);
    config.pipeline.node_name = "daemon-node".into();
    config.server.socket_path = dir.path().join("run/headroomd.sock");
    config.metrics_listen = None;
    config.tcp = Some(server_files(dir.path(), &ca));
    let daemon = headroomd::node::Daemon::start(&config, headroomd::node::Components::default())
        .await
        .unwrap();
    let addr = daemon.server.tcp_addr().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let client = ca.client("dashboard", &["dashboard.example"]);
    let s = get_headroom(addr, Some(client_tls(&ca, Some(&client))))
        .await
        .unwrap();
    assert_eq!(s.node_name, "daemon-node");
    daemon.shutdown().await.unwrap();
    assert!(!config.server.socket_path.exists(), "socket removed on shutdown");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "TCP listener closed on shutdown"
    );
}

/// Every unusable TLS file: one error that names the setting and the file, and nothing bound.
#[tokio::test]
async fn bad_tls_files_are_one_clear_error_naming_the_file() {
    let ca = Ca::new("headroom test CA");
    let dir = tempfile::tempdir().unwrap();
    let good = server_files(dir.path(), &ca);
    let write = |name: &str, text: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let garbage = write("garbage.pem", b"this is not PEM at all\n\x00\xff\xfe");
    let bad_base64 = write(
        "bad-base64.pem",
        b"-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n-----END CERTIFICATE-----\n",
    );
    let not_x509 = write(
        "not-x509.pem",
        b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    );
    let cert_as_key = good.tls_cert.clone();
    let other_key = write("other.key", ca.server().key.as_bytes());
    let missing = dir.path().join("missing.crt");
    let a_directory = dir.path().join("a-directory");
    std::fs::create_dir(&a_directory).unwrap();

    let cases: Vec<(&str, TcpConfig, &str, &Path, &str)> = vec![
        (
            "missing certificate",
            TcpConfig {
                tls_cert: missing.clone(),
                ..good.clone()
            },
            "server.tcp.tls_cert",
            &missing,
            "cannot read",
        ),
        (
            "unreadable key (a directory)",
            TcpConfig {
                tls_key: a_directory.clone(),
                ..good.clone()
            },
            "server.tcp.tls_key",
            &a_directory,
            "cannot read",
        ),
        (
            "garbage certificate",
            TcpConfig {
                tls_cert: garbage.clone(),
                ..good.clone()
            },
            "server.tcp.tls_cert",
            &garbage,
            "no certificate found",
        ),
        (
            "garbage key",
            TcpConfig {
                tls_key: garbage.clone(),
                ..good.clone()
            },
            "server.tcp.tls_key",
            &garbage,
            "no private key found",
        ),
        (
            "certificate where the key should be",
            TcpConfig {
                tls_key: cert_as_key.clone(),
                ..good.clone()
            },
            "server.tcp.tls_key",
            &cert_as_key,
            "no private key found",
        ),
        (
            "garbage client CA",
            TcpConfig {
                client_ca: garbage.clone(),
                ..good.clone()
            },
            "server.tcp.client_ca",
            &garbage,
            "no certificate found",
        ),
        (
            "broken base64",
            TcpConfig {
                client_ca: bad_base64.clone(),
                ..good.clone()
            },
            "server.tcp.client_ca",
            &bad_base64,
            "not valid PEM",
        ),
        (
            "PEM that is not X.509",
            TcpConfig {
                tls_cert: not_x509.clone(),
                ..good.clone()
            },
            "server.tcp.tls_cert",
            &not_x509,
            "not a valid X.509 certificate",
        ),
        (
            "key of another certificate",
            TcpConfig {
                tls_key: other_key.clone(),
                ..good.clone()
            },
            "server.tcp.tls_key",
            &other_key,
            "does not belong to the certificate",
        ),
    ];
    let reader_and_ledger = {
        let (pipeline, reader) = headroomd::pipeline::spawn(
            headroomd::pipeline::PipelineConfig {
                allocatable: headroom_node_model::Resources::new(1000, 1 << 30),
                ..Default::default()
            },
            Arc::new(headroomd::node::NoResolver),
            Arc::new(headroomd::pipeline::InMemoryPodSource::default()),
        )
        .unwrap();
        (pipeline, reader)
    };
    for (label, tcp, setting, path, needle) in cases {
        let e = server::tls::load(&tcp).map(|_| ()).unwrap_err();
        let text = e.to_string();
        eprintln!("{label}: {text}");
        assert!(
            text.starts_with(setting) || text.contains(&format!("{setting} {}", path.display())),
            "{label}: {text}"
        );
        assert!(text.contains(&path.display().to_string()), "{label}: {text}");
        assert!(text.contains(needle), "{label}: {text}");
        assert!(matches!(
            e,
            TlsError::Read { .. } | TlsError::Content { .. } | TlsError::Pair { .. }
        ));
        // The server refuses to start the same way, and leaves no socket behind.
        let socket = dir
            .path()
            .join(format!("run-{}/headroomd.sock", label.replace(' ', "-")));
        let cfg = server::ServerConfig {
            socket_path: socket.clone(),
            ..Default::default()
        };
        let r = server::serve(
            &cfg,
            Some(&tcp),
            reader_and_ledger.1.clone(),
            reader_and_ledger.0.ledger(),
            Arc::new(server::UnavailableActuator),
        )
        .await;
        match r {
            Err(ServerError::Tls(e)) => assert_eq!(e.to_string(), text, "{label}"),
            Err(e) => panic!("{label}: unexpected error {e}"),
            Ok(_) => panic!("{label}: served with a bad TLS file"),
        }
        assert!(!socket.exists(), "{label}: socket created");
        // And `headroomd serve`'s check before anything starts says the same.
        let config = headroomd::config::Config {
            tcp: Some(tcp),
            ..Default::default()
        };
        assert_eq!(
            headroomd::node::preflight(&config).unwrap_err().to_string(),
            text,
            "{label}"
        );
    }
    // The good files load.
    server::tls::load(&good).unwrap();
}

/// The TCP listener has the Unix socket's cap: connections that never start a TLS handshake
/// hold at most `max_connections` descriptors, one over the cap is closed at once (not after the
/// 10 s handshake deadline), and a real client gets in as soon as a place is free.
#[tokio::test]
async fn tcp_connections_over_the_cap_are_closed_at_once() {
    use tokio::io::AsyncReadExt as _;
    let ca = Ca::new("headroom test CA");
    let dir = tempfile::tempdir().unwrap();
    let tcp = server_files(dir.path(), &ca);
    let daemon =
        headroom_testkit::headroomd::InProcessHeadroomd::start(headroom_testkit::headroomd::HeadroomdSetup {
            tcp: Some(tcp),
            connections: server::ConnectionLimits {
                max_connections: 4,
                ..server::ConnectionLimits::default()
            },
            socket: "run/headroomd.sock".into(),
            dir: Some(dir),
            ..Default::default()
        })
        .await;
    let addr = addr(&daemon);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let stats = daemon.server().tcp_connections().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while stats.open() < 4 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        stats.open(),
        4,
        "the four silent connections were not all accepted"
    );
    for i in 0..3 {
        let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "connection {} over the cap of 4 was kept ({read:?})",
            i + 1
        );
    }
    assert_eq!(stats.over_cap_total(), 3);
    assert_eq!(stats.open(), 4, "never more than the cap");
    drop(held);
    let client = ca.client("dashboard", &["dashboard.example"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let snapshot = loop {
        match get_headroom(addr, Some(client_tls(&ca, Some(&client)))).await {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("a client was refused after the silent ones left: {e}"),
        }
    };
    assert_eq!(snapshot.node_name, "test-node");
}

/// cert-manager rotates the Secret's files in place: new connections get the new certificate
/// and client CA within a reload check, and a connection made before keeps serving.
#[tokio::test]
async fn rotated_tls_files_are_served_to_new_connections() {
    let old_ca = Ca::new("headroom CA before rotation");
    let dir = tempfile::tempdir().unwrap();
    let tcp = server_files(dir.path(), &old_ca);
    let files = tcp.clone();
    let d = start_with(dir, AccessPolicy::default(), Some(tcp)).await;
    let old_client = old_ca.client("dashboard", &["dashboard.example"]);
    let before = channel(addr(&d), Some(client_tls(&old_ca, Some(&old_client))))
        .await
        .unwrap();
    HeadroomClient::new(before.clone())
        .get_headroom(pb::GetHeadroomRequest::default())
        .await
        .unwrap();

    let new_ca = Ca::new("headroom CA after rotation");
    let server = new_ca.server();
    std::fs::write(&files.tls_cert, &server.cert).unwrap();
    std::fs::write(&files.tls_key, &server.key).unwrap();
    std::fs::write(&files.client_ca, new_ca.pem()).unwrap();
    let new_client = new_ca.client("dashboard", &["dashboard.example"]);
    let deadline = std::time::Instant::now() + server::tls::RELOAD_CHECK_EVERY * 3;
    loop {
        match get_headroom(addr(&d), Some(client_tls(&new_ca, Some(&new_client)))).await {
            Ok(s) => {
                assert_eq!(s.node_name, "test-node");
                break;
            }
            Err(e) => assert!(
                std::time::Instant::now() < deadline,
                "the rotated certificate was never served: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // New connections trusting only the old CA, or presenting its client certificate, fail.
    let e = get_headroom(addr(&d), Some(client_tls(&old_ca, Some(&old_client))))
        .await
        .unwrap_err();
    assert!(!e.is_empty());
    let e = get_headroom(addr(&d), Some(client_tls(&new_ca, Some(&old_client))))
        .await
        .unwrap_err();
    assert!(!e.is_empty());
    // The connection made before the rotation is not cut.
    HeadroomClient::new(before)
        .get_headroom(pb::GetHeadroomRequest::default())
        .await
        .unwrap();
}

/// Files that change into something unusable are refused with the same clear error as at start,
/// once, and the configuration loaded before stays; fixing them is picked up.
#[test]
fn unusable_rotated_files_are_refused_and_the_old_ones_kept() {
    let ca = Ca::new("headroom CA");
    let dir = tempfile::tempdir().unwrap();
    let tcp = server_files(dir.path(), &ca);
    let tls = server::tls::ReloadingTls::load(&tcp).unwrap();
    let served = tls.current();
    assert!(tls.check().is_none(), "nothing changed");

    std::fs::write(&tcp.tls_cert, "not a certificate").unwrap();
    let refused = tls.check().expect("a change is reported").unwrap_err();
    let text = refused.to_string();
    assert!(
        text.contains("server.tcp.tls_cert") && text.contains("server.crt"),
        "{text}"
    );
    assert!(
        Arc::ptr_eq(&tls.current(), &served),
        "the old configuration is kept"
    );
    assert!(tls.check().is_none(), "the same refusal is reported once");

    // A key from another certificate: the pair is refused, nothing half-applied.
    let other = ca.server();
    std::fs::write(&tcp.tls_cert, ca.server().cert).unwrap();
    std::fs::write(&tcp.tls_key, &other.key).unwrap();
    let refused = tls.check().expect("a change is reported").unwrap_err();
    assert!(refused.to_string().contains("does not belong"), "{refused}");
    assert!(Arc::ptr_eq(&tls.current(), &served));

    // A missing file mid-rotation.
    std::fs::remove_file(&tcp.client_ca).unwrap();
    let refused = tls.check().expect("a change is reported").unwrap_err();
    assert!(refused.to_string().contains("server.tcp.client_ca"), "{refused}");
    assert!(tls.check().is_none(), "reported once");

    std::fs::write(&tcp.tls_cert, &other.cert).unwrap();
    std::fs::write(&tcp.client_ca, ca.pem()).unwrap();
    tls.check().expect("a change is reported").unwrap();
    assert!(
        !Arc::ptr_eq(&tls.current(), &served),
        "the fixed files are served"
    );
    assert!(tls.check().is_none());
}
