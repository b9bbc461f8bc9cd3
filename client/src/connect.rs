//! Connecting to headroomd: over its Unix socket (headroomctl, the shim, benchmarks and tests),
//! or to its TCP listener with mutual TLS.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headroom_proto::v1::headroom_client::HeadroomClient;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// A channel to the daemon at `path`. Connects lazily-but-now: fails if nothing listens.
pub async fn connect_uds(path: impl AsRef<Path>) -> Result<Channel, tonic::transport::Error> {
    let path: PathBuf = path.as_ref().to_path_buf();
    // The URI is required by the API but unused: the connector dials the socket.
    Endpoint::from_static("http://headroomd.local")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
        }))
        .await
}

/// A `headroom.v1.Headroom` client over the socket at `path`.
pub async fn headroom_client(
    path: impl AsRef<Path>,
) -> Result<HeadroomClient<Channel>, tonic::transport::Error> {
    Ok(HeadroomClient::new(connect_uds(path).await?).max_decoding_message_size(64 << 20))
}

/// A channel to headroomd's TCP listener at `addr`: TLS when `tls` is given (headroomd's listener
/// wants mutual TLS: give the client identity in `tls`), plaintext HTTP/2 otherwise. Connecting
/// and every call on the channel are bounded by `timeout`.
pub async fn connect_tcp(
    addr: SocketAddr,
    tls: Option<ClientTlsConfig>,
    timeout: Duration,
) -> Result<Channel, tonic::transport::Error> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls)?;
    }
    endpoint.connect().await
}
