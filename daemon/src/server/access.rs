//! Who may call what.
//!
//! - **Unix socket:** the caller's uid, from the kernel (SO_PEERCRED), against
//!   `server.writer_uids` (state-changing RPCs) and, when set, `server.reader_uids`.
//! - **TCP (mutual TLS):** the caller is the client certificate the handshake verified against
//!   `server.tcp.client_ca`; its identity is the certificate's subject alternative names (DNS
//!   names and URIs, see [`super::tls::client_names`]). Any verified client may call the
//!   read-only RPCs. `Reserve`, `Release` and `ApplyResize` need one of those names on
//!   `server.tcp.writer_names`, which is empty by default: TCP is read-only unless writers are
//!   named.
//!
//! Why an allow-list rather than "every mTLS client may write": the client CA is usually a
//! cluster or organisation CA that also signs certificates for dashboards, exporters and other
//! readers. Trusting all of them to reserve room and rewrite cgroup limits would widen who can
//! change a node from "root on this node" (the socket's default) to "anything that CA ever
//! signed". Naming writers keeps TCP exactly as strict as the socket: the transport decides who
//! may connect and read, a list decides who may write.

use std::{
    fmt,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tonic::{Request, Status, codegen::http, metadata::MetadataMap, transport::server::UdsConnectInfo};
use tracing::Instrument as _;

/// What an RPC needs from its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// A reader ([`AccessPolicy::check_reader`]).
    Read,
    /// A writer: the RPC changes state ([`AccessPolicy::check_writer`]).
    Write,
}

/// The gRPC path prefix of `headroom.v1.Headroom`.
const SERVICE_PATH: &str = "/headroom.v1.Headroom/";

/// Which RPC of `headroom.v1.Headroom` needs what: the one place access is decided. Paths of
/// other services (health, reflection) are open to whoever may connect.
pub const RPCS: &[(&str, Needs)] = &[
    ("GetHeadroom", Needs::Read),
    ("WatchHeadroom", Needs::Read),
    ("ListPods", Needs::Read),
    ("Reserve", Needs::Write),
    ("Release", Needs::Write),
    ("ApplyResize", Needs::Write),
];

/// The RPC a request path names and what it needs; `None` outside the table.
pub fn rpc_of(path: &str) -> Option<(&'static str, Needs)> {
    let method = path.strip_prefix(SERVICE_PATH)?;
    RPCS.iter().find(|(name, _)| *name == method).copied()
}

/// A tower layer in front of every gRPC service: for each RPC of [`RPCS`] it finds the caller
/// ([`Peer`]), checks it against the policy and runs the call inside one `rpc` span.
#[derive(Clone, Debug)]
pub struct AccessLayer {
    policy: Arc<AccessPolicy>,
}

impl AccessLayer {
    /// A layer enforcing `policy`.
    pub fn new(policy: AccessPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<S> tower_layer::Layer<S> for AccessLayer {
    type Service = AccessService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AccessService {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// The service [`AccessLayer`] wraps around the routes.
#[derive(Clone, Debug)]
pub struct AccessService<S> {
    inner: S,
    policy: Arc<AccessPolicy>,
}

type ResponseFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B, R> tower_service::Service<http::Request<B>> for AccessService<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = ResponseFuture<Self::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some((rpc, needs)) = rpc_of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        // The transport's connection facts (peer credentials, verified certificates) travel in
        // the request's extensions, as they do into tonic's own `Request`.
        let peer = Peer::of(&Request::from_parts(
            MetadataMap::new(),
            request.extensions().clone(),
            (),
        ));
        let span = tracing::info_span!("rpc", rpc, peer = %peer);
        let checked = span.in_scope(|| match needs {
            Needs::Read => self.policy.check_reader(&peer, rpc),
            Needs::Write => self.policy.check_writer(&peer, rpc),
        });
        match checked {
            Ok(()) => Box::pin(self.inner.call(request).instrument(span)),
            Err(status) => Box::pin(async move { Ok(status.into_http()) }),
        }
    }
}

/// The caller, as far as the transport tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A Unix-socket caller with kernel-checked credentials.
    Unix {
        /// Effective uid.
        uid: u32,
        /// Effective gid.
        gid: u32,
        /// Process id, when the kernel gives one.
        pid: Option<i32>,
    },
    /// A TCP caller whose client certificate was verified against the client CA.
    Tls {
        /// Remote address.
        addr: Option<SocketAddr>,
        /// DNS and URI subject alternative names of its certificate.
        names: Vec<String>,
    },
    /// No credentials (a transport without SO_PEERCRED or client certificate).
    Unknown,
}

impl Peer {
    /// The caller of `request`.
    pub fn of<T>(request: &Request<T>) -> Peer {
        if let Some(cred) = request
            .extensions()
            .get::<UdsConnectInfo>()
            .and_then(|i| i.peer_cred)
        {
            return Peer::Unix {
                uid: cred.uid(),
                gid: cred.gid(),
                pid: cred.pid(),
            };
        }
        // Only present when the handshake verified the chain (client auth is mandatory).
        match request.peer_certs() {
            Some(certs) => Peer::Tls {
                addr: request.remote_addr(),
                names: certs.first().map(super::tls::client_names).unwrap_or_default(),
            },
            None => Peer::Unknown,
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Unix {
                uid,
                gid,
                pid: Some(pid),
            } => write!(f, "uid={uid} gid={gid} pid={pid}"),
            Peer::Unix { uid, gid, pid: None } => write!(f, "uid={uid} gid={gid}"),
            Peer::Tls { addr, names } => {
                f.write_str("tls client")?;
                if let Some(addr) = addr {
                    write!(f, " {addr}")?;
                }
                if names.is_empty() {
                    f.write_str(" (certificate has no DNS or URI names)")
                } else {
                    write!(f, " names={names:?}")
                }
            }
            Peer::Unknown => f.write_str("unknown (no peer credentials)"),
        }
    }
}

/// Allow-lists by uid (Unix socket) and by client certificate name (TCP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Uids allowed to call `Reserve`, `Release` and `ApplyResize` over the socket.
    pub writer_uids: Vec<u32>,
    /// Uids allowed to call the read-only RPCs; `None`: anyone who can open the socket.
    pub reader_uids: Option<Vec<u32>>,
    /// Client certificate names (DNS or URI SAN, compared exactly) allowed to call `Reserve`,
    /// `Release` and `ApplyResize` over TCP. Empty (the default): no TCP client may.
    pub tls_writer_names: Vec<String>,
}

impl Default for AccessPolicy {
    /// Root only for state-changing RPCs; reads open to whoever the socket's mode lets in, or who
    /// holds a verified client certificate.
    fn default() -> Self {
        Self {
            writer_uids: vec![0],
            reader_uids: None,
            tls_writer_names: Vec::new(),
        }
    }
}

impl AccessPolicy {
    /// Refuses (and logs) a caller of a state-changing RPC that is not on the writer list.
    pub fn check_writer(&self, peer: &Peer, rpc: &str) -> Result<(), Status> {
        match peer {
            Peer::Unix { uid, .. } if self.writer_uids.contains(uid) => Ok(()),
            Peer::Tls { names, .. } if names.iter().any(|n| self.tls_writer_names.contains(n)) => Ok(()),
            Peer::Tls { .. } => {
                tracing::warn!(rpc, %peer, allowed = ?self.tls_writer_names, "refused: TLS client not allowed to change state");
                Err(Status::permission_denied(format!(
                    "{rpc} refused: caller {peer} is not on the allow-list for state-changing calls \
                     over TCP (allowed certificate names: {:?}; set `server.tcp.writer_names`)",
                    self.tls_writer_names
                )))
            }
            _ => {
                tracing::warn!(rpc, %peer, allowed = ?self.writer_uids, "refused: caller not allowed to change state");
                Err(Status::permission_denied(format!(
                    "{rpc} refused: caller {peer} is not on the allow-list for state-changing calls \
                     (allowed uids: {:?}; set `server.writer_uids`)",
                    self.writer_uids
                )))
            }
        }
    }

    /// Refuses (and logs) a reader not on the reader list, when there is one. A verified TLS
    /// client may always read: on TCP the client CA is the reader gate.
    pub fn check_reader(&self, peer: &Peer, rpc: &str) -> Result<(), Status> {
        let Some(readers) = &self.reader_uids else {
            return Ok(());
        };
        match peer {
            Peer::Unix { uid, .. } if readers.contains(uid) || self.writer_uids.contains(uid) => Ok(()),
            Peer::Tls { .. } => Ok(()),
            _ => {
                tracing::warn!(rpc, %peer, allowed = ?readers, "refused: caller not allowed to read");
                Err(Status::permission_denied(format!(
                    "{rpc} refused: caller {peer} is not on the reader allow-list (allowed uids: {readers:?})"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_table_names_what_each_rpc_needs() {
        assert_eq!(
            rpc_of("/headroom.v1.Headroom/Reserve"),
            Some(("Reserve", Needs::Write))
        );
        assert_eq!(
            rpc_of("/headroom.v1.Headroom/ListPods"),
            Some(("ListPods", Needs::Read))
        );
        assert_eq!(rpc_of("/grpc.health.v1.Health/Check"), None);
        assert_eq!(rpc_of("/headroom.v1.Headroom/Nope"), None);
    }

    #[test]
    fn writers_need_credentials_on_the_list() {
        let policy = AccessPolicy::default();
        assert!(
            policy
                .check_writer(
                    &Peer::Unix {
                        uid: 0,
                        gid: 0,
                        pid: Some(1)
                    },
                    "Reserve"
                )
                .is_ok()
        );
        let err = policy
            .check_writer(
                &Peer::Unix {
                    uid: 1000,
                    gid: 1000,
                    pid: Some(7),
                },
                "Reserve",
            )
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("uid=1000"), "{}", err.message());
        assert!(policy.check_writer(&Peer::Unknown, "Release").is_err());
        assert!(policy.check_reader(&Peer::Unknown, "GetHeadroom").is_ok());
        let strict = AccessPolicy {
            reader_uids: Some(vec![42]),
            ..policy
        };
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 42,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_ok()
        );
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 0,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_ok()
        );
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 7,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_err()
        );
    }

    #[test]
    fn tls_clients_read_and_write_only_when_named() {
        let tls = |names: &[&str]| Peer::Tls {
            addr: Some(SocketAddr::from(([127, 0, 0, 1], 4000))),
            names: names.iter().map(|s| s.to_string()).collect(),
        };
        let policy = AccessPolicy {
            reader_uids: Some(vec![42]),
            tls_writer_names: vec!["spiffe://cluster/ns/headroom-system/sa/headroom".into()],
            ..AccessPolicy::default()
        };
        let shim = tls(&["shim.example", "spiffe://cluster/ns/headroom-system/sa/headroom"]);
        assert!(policy.check_writer(&shim, "Reserve").is_ok());
        assert!(policy.check_reader(&shim, "GetHeadroom").is_ok());
        let reader = tls(&["dashboard.example"]);
        assert!(policy.check_reader(&reader, "GetHeadroom").is_ok());
        let err = policy.check_writer(&reader, "ApplyResize").unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("dashboard.example"), "{}", err.message());
        assert!(
            err.message().contains("server.tcp.writer_names"),
            "{}",
            err.message()
        );
        // Case and prefixes matter: names are compared exactly.
        assert!(
            policy
                .check_writer(
                    &tls(&["SPIFFE://cluster/ns/headroom-system/sa/headroom"]),
                    "Release"
                )
                .is_err()
        );
        assert!(policy.check_writer(&tls(&[]), "Release").is_err());
        // The default: TCP is read-only.
        assert!(AccessPolicy::default().check_writer(&shim, "Reserve").is_err());
        assert_eq!(
            tls(&[]).to_string(),
            "tls client 127.0.0.1:4000 (certificate has no DNS or URI names)"
        );
    }
}
