//! The gRPC server: `headroom.v1.Headroom`, gRPC health and reflection, on a Unix socket
//! (mode 0600 by default) with request size limits and a uid allow-list for state-changing RPCs,
//! and, only when configured, the same services on TCP with mutual TLS ([`tls`]; who may write
//! there: [`access`]).

pub mod access;
pub mod actuator;
pub mod connections;
pub mod convert;
pub mod service;
pub mod tls;
pub mod validate;

use std::{
    io,
    net::SocketAddr,
    os::unix::fs::{FileTypeExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

pub use access::{AccessLayer, AccessPolicy, Peer};
pub use connections::{ConnectionLimits, ConnectionStats};
use headroom_proto::v1::headroom_server::HeadroomServer;
use tokio::{
    net::{TcpListener, UnixListener},
    sync::oneshot,
    task::JoinHandle,
};

/// The server stack: [`AccessLayer`] in front of every route.
type WithAccess = tower_layer::Stack<
    AccessLayer,
    tower_layer::Stack<
        tower_http::set_header::SetResponseHeaderLayer<tonic::codegen::http::HeaderValue>,
        tower_layer::Identity,
    >,
>;

/// `headroom-version: VERSION` on every response (`headroomctl version` reads it), refusals
/// included.
fn version_header() -> tower_http::set_header::SetResponseHeaderLayer<tonic::codegen::http::HeaderValue> {
    let value = tonic::codegen::http::HeaderValue::from_str(crate::VERSION)
        .unwrap_or_else(|_| tonic::codegen::http::HeaderValue::from_static("unknown"));
    tower_http::set_header::SetResponseHeaderLayer::overriding(
        tonic::codegen::http::HeaderName::from_static(headroom_client::VERSION_HEADER),
        value,
    )
}
pub use actuator::{
    ActuatorError, ActuatorErrorKind, ResizeActuator, ResizeOutcome, ResizeRequest, UnavailableActuator,
};
pub use service::{HeadroomService, ServiceLimits};
pub use tls::{TcpConfig, TlsError};

use crate::pipeline::{LedgerHandle, SnapshotReader};

/// Where and how to listen.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Unix socket path.
    pub socket_path: PathBuf,
    /// Mode of the socket file (default 0600: root only).
    pub socket_mode: u32,
    /// Largest request message accepted, bytes.
    pub max_request_bytes: usize,
    /// Concurrent requests per connection.
    pub concurrency_per_connection: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Who may call what.
    pub access: AccessPolicy,
    /// Limits and defaults of the service.
    pub limits: ServiceLimits,
    /// How many connections the Unix socket holds, and how long one may stay silent.
    pub connections: ConnectionLimits,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            socket_path: PathBuf::from("/run/headroom/headroomd.sock"),
            socket_mode: 0o600,
            max_request_bytes: 64 * 1024,
            concurrency_per_connection: 64,
            max_concurrent_streams: 256,
            access: AccessPolicy::default(),
            limits: ServiceLimits::default(),
            connections: ConnectionLimits::default(),
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket could not be prepared.
    #[error("socket {path}: {what}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// Another process serves on the socket.
    #[error("socket {0} is in use by another process (is another headroomd running?)")]
    InUse(PathBuf),
    /// The reflection service could not be built.
    #[error("reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// A TLS file of `[server.tcp]` cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The TCP address could not be bound.
    #[error("server.tcp.listen {addr}: cannot bind: {source}")]
    TcpBind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
}

/// One listener's serving task.
struct Listener {
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Listener {
    fn spawn<F>(serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> Listener
    where
        F: Future<Output = Result<(), tonic::transport::Error>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        Listener {
            shutdown: Some(tx),
            task: tokio::spawn(serve(rx)),
        }
    }
}

/// A running server: the Unix socket, and the TCP listener when configured.
pub struct ServerHandle {
    uds: Listener,
    tcp: Option<(SocketAddr, Listener)>,
    path: PathBuf,
    health: tonic_health::server::HealthReporter,
    connections: Arc<ConnectionStats>,
    tcp_connections: Arc<ConnectionStats>,
    service: HeadroomService,
}

impl ServerHandle {
    /// Open `WatchHeadroom` streams.
    pub fn watchers(&self) -> usize {
        self.service.watchers()
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bound TCP address (mutual TLS), when `[server.tcp]` is configured.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().map(|(addr, _)| *addr)
    }

    /// The health reporter (to mark the service not serving, e.g. when probes fail).
    pub fn health(&self) -> &tonic_health::server::HealthReporter {
        &self.health
    }

    /// The Unix socket's connection counters.
    pub fn connections(&self) -> &Arc<ConnectionStats> {
        &self.connections
    }

    /// The TCP listener's connection counters (all zero without `[server.tcp]`).
    pub fn tcp_connections(&self) -> &Arc<ConnectionStats> {
        &self.tcp_connections
    }

    /// Stops accepting, lets in-flight requests finish (bounded), removes the socket.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let mut listeners = vec![&mut self.uds];
        if let Some((_, tcp)) = self.tcp.as_mut() {
            listeners.push(tcp);
        }
        for l in listeners.iter_mut() {
            if let Some(tx) = l.shutdown.take() {
                let _ = tx.send(());
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let mut result = Ok(());
        let mut cut = false;
        for l in listeners {
            match tokio::time::timeout_at(deadline, &mut l.task).await {
                Ok(joined) => {
                    let joined = joined.map_err(anyhow::Error::from).and_then(|r| Ok(r?));
                    if result.is_ok() {
                        result = joined;
                    }
                }
                Err(_) => {
                    // A client that holds a connection open and never reads cannot keep the
                    // daemon alive: its connection is cut. Nothing is lost (every RPC is all or
                    // nothing).
                    l.task.abort();
                    cut = true;
                }
            }
        }
        let _ = std::fs::remove_file(&self.path);
        if cut {
            tracing::warn!("gRPC connections still open after 5 s; closed them");
        }
        result
    }

    /// Waits until the server stops on its own (an error), on either listener.
    pub async fn wait(&mut self) -> anyhow::Result<()> {
        match self.tcp.as_mut() {
            None => Ok((&mut self.uds.task).await??),
            Some((_, tcp)) => tokio::select! {
                r = &mut self.uds.task => Ok(r??),
                r = &mut tcp.task => Ok(r??),
            },
        }
    }
}

/// Binds `path` with `mode` atomically: binds a temporary name in the same directory, sets the
/// mode, then renames it into place, so the socket is never reachable with a wider mode.
fn bind_socket(path: &Path, mode: u32) -> Result<UnixListener, ServerError> {
    let err = |what: &'static str| {
        let path = path.to_path_buf();
        move |source| ServerError::Socket { path, what, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err("create parent directory"))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ServerError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(err("remove stale socket"))?;
        }
        Ok(_) => {
            return Err(ServerError::Socket {
                path: path.to_path_buf(),
                what: "refusing to replace",
                source: io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a socket"),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err("stat")(e)),
    }
    let mut tmp_name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(err("bind"))?;
    let prepared = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(err("set mode"))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(err("rename into place")));
    if let Err(e) = prepared {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

/// Starts the server on the Unix socket of `config`. Must be called inside a Tokio runtime.
pub async fn serve_uds(
    config: &ServerConfig,
    reader: SnapshotReader,
    ledger: LedgerHandle,
    actuator: Arc<dyn ResizeActuator>,
) -> Result<ServerHandle, ServerError> {
    serve(config, None, reader, ledger, actuator).await
}

/// Starts the server on the Unix socket of `config` and, when `tcp` is given, the same services
/// (one service instance: same ledger, same watcher limit) on TCP with mutual TLS. The TLS files
/// are checked and the TCP address bound before the socket is, so a bad `[server.tcp]` leaves
/// nothing behind. Must be called inside a Tokio runtime.
pub async fn serve(
    config: &ServerConfig,
    tcp: Option<&TcpConfig>,
    reader: SnapshotReader,
    ledger: LedgerHandle,
    actuator: Arc<dyn ResizeActuator>,
) -> Result<ServerHandle, ServerError> {
    let tcp = match tcp {
        None => None,
        Some(tcp) => {
            let tls = tls::ReloadingTls::load(tcp)?;
            let listener = TcpListener::bind(tcp.listen)
                .await
                .map_err(|source| ServerError::TcpBind {
                    addr: tcp.listen,
                    source,
                })?;
            let addr = listener.local_addr().map_err(|source| ServerError::TcpBind {
                addr: tcp.listen,
                source,
            })?;
            Some((tls, listener, addr))
        }
    };
    let service = HeadroomService::new(reader, ledger, actuator, config.limits.clone());
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<HeadroomServer<HeadroomService>>().await;
    let builder = || {
        tonic::transport::Server::builder()
            .concurrency_limit_per_connection(config.concurrency_per_connection)
            .max_concurrent_streams(config.max_concurrent_streams)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            .layer(version_header())
            .layer(AccessLayer::new(config.access.clone()))
    };
    let routes =
        |mut builder: tonic::transport::Server<WithAccess>| -> Result<tonic::transport::server::Router<WithAccess>, ServerError> {
            let reflection_v1 = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(headroom_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .build_v1()?;
            let reflection_v1alpha = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(headroom_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .build_v1alpha()?;
            let headroom = HeadroomServer::new(service.clone())
                .max_decoding_message_size(config.max_request_bytes)
                .max_encoding_message_size(64 << 20);
            Ok(builder
                .add_service(health_service.clone())
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
                .add_service(headroom))
        };
    let tcp = match tcp {
        None => None,
        Some((tls, listener, addr)) => Some((routes(builder())?, tls, listener, addr)),
    };
    let router = routes(builder())?;
    // Last: everything that can fail has, so a refused start leaves no socket file.
    let listener = bind_socket(&config.socket_path, config.socket_mode)?;
    let tcp_connections = Arc::new(ConnectionStats::default());
    let tcp = tcp.map(|(router, tls, listener, addr)| {
        let accepted = connections::accept(listener, config.connections.clone(), tcp_connections.clone());
        let reload = tls.watch(tls::RELOAD_CHECK_EVERY);
        let incoming = tls::handshakes(accepted, tls);
        tracing::info!(%addr, reload_check_secs = tls::RELOAD_CHECK_EVERY.as_secs(), "gRPC serving on TCP (mutual TLS)");
        let serving = Listener::spawn(|rx| async move {
            let served = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                })
                .await;
            reload.abort();
            served
        });
        (addr, serving)
    });
    let connections = Arc::new(ConnectionStats::default());
    let incoming = connections::accept(listener, config.connections.clone(), connections.clone());
    let path = config.socket_path.clone();
    tracing::info!(socket = %path.display(), mode = format!("{:o}", config.socket_mode), "gRPC serving");
    let uds = Listener::spawn(|rx| {
        router.serve_with_incoming_shutdown(incoming, async {
            let _ = rx.await;
        })
    });
    Ok(ServerHandle {
        uds,
        tcp,
        path,
        health,
        connections,
        tcp_connections,
        service,
    })
}
