//! The shim's API-server client: kube-rs's layers over an HTTP/2 connection, as client-go talks
//! to the API server.
//!
//! kube 5 speaks HTTP/1.1 only (kube-rs/kube#1923): each request in flight needs a connection of
//! its own, so the victims' marks, the reservation's watch traffic and the delete that follows
//! them opened new TLS connections mid-preemption (a delete measured waiting ~44 ms for one on
//! the real node). Over HTTP/2 requests in flight share one connection, multiplexed. The
//! shim needs no WebSocket upgrade (no exec, attach or port-forward), which is what keeps kube
//! itself on HTTP/1.1.
//!
//! The shim keeps two such connections ([`ApiClients`]): its calls on one, its watches on the
//! other. The API server writes a connection's frames one after another and a call is answered
//! only once its frames are out, so on a shared connection the answer to a victim's mark can
//! wait behind the watch events that same mark sets off. In `kube_node` the API server's own time
//! on the mark went from 0.52× of kube-scheduler's at p99 to 0.99× once the watches moved
//! (docs/real-cluster.md, "Where the last milliseconds go").
//!
//! It names itself as client-go does ([`headroom_client::kube_user_agent`]): the API server
//! takes the field manager of the victims' `DisruptionTarget` marks from it.
//!
//! Everything else is kube's own: its TLS configuration (CA, client identity, CA reload), its
//! base-URI, authentication and impersonation layers. Two things are left out on purpose: kube's
//! retry layer (an Eviction refused with 429 must reach the reconciler at once) and its read
//! timeout on the socket (one multiplexed connection carries watches that are legitimately quiet
//! for minutes); HTTP/2 PINGs find a dead connection instead, with client-go's figures.

use std::time::Duration;

use hyper_util::{
    client::legacy::connect::HttpConnector,
    rt::{TokioExecutor, TokioTimer},
};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// client-go's `ReadIdleTimeout`: a PING after this long without a frame.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);
/// client-go's `PingTimeout`: the connection is closed if the PING is not answered in time.
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// Used when the kubeconfig sets no connect timeout (kube's own default).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The shim's API-server clients: `calls` for its requests, `watches` for its informers' lists
/// and watches, each over a connection of its own when built by [`ApiClients::new`].
#[derive(Clone)]
pub struct ApiClients {
    pub calls: kube::Client,
    pub watches: kube::Client,
}

impl ApiClients {
    /// Two [`http2_client`]s for `config`, hence two connections.
    pub fn new(config: kube::Config) -> Result<Self, kube::Error> {
        Ok(Self {
            watches: http2_client(config.clone())?,
            calls: http2_client(config)?,
        })
    }
}

impl From<kube::Client> for ApiClients {
    /// One client for both (a test's mock service, say).
    fn from(client: kube::Client) -> Self {
        Self {
            calls: client.clone(),
            watches: client,
        }
    }
}

/// A client for `config` that negotiates HTTP/2 by ALPN (HTTP/1.1 if the server offers only
/// that), with kube's TLS and authentication. `config.default_retry` is not honoured: see above.
pub fn http2_client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config
        .headers
        .push(headroom_client::kube_user_agent("headroom-shim"));
    if config.proxy_url.is_some() {
        // Through a proxy, kube's own stack (HTTP/1.1), which knows the proxy protocols.
        tracing::info!("the kubeconfig names a proxy: the API server is reached over HTTP/1.1");
        return kube::Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout.unwrap_or(CONNECT_TIMEOUT)));

    let tls = config.rustls_client_config()?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = name
            .clone()
            .try_into()
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let connector = https.enable_http1().enable_http2().wrap_connector(http);

    let transport = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_AFTER_IDLE)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(transport);
    Ok(kube::Client::new(service, config.default_namespace))
}
