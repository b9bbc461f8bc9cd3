//! The optional TCP listener: mutual TLS only (tonic's rustls, `ring` provider).
//!
//! The server presents `tls_cert`/`tls_key`; every client must present a certificate that chains
//! to `client_ca`, or the handshake fails and no request is read. The files are read and checked
//! here, before anything is bound, so a missing file, an unreadable key, garbage instead of PEM or
//! a key that does not belong to the certificate is one error naming the setting and the file.
//!
//! Who a TLS client is: the names in the subject alternative names (DNS names and URIs, e.g. a
//! SPIFFE id) of its verified certificate ([`client_names`]). What it may do is decided in
//! [`super::access`].
//!
//! The files are re-read every [`RELOAD_CHECK_EVERY`] ([`ReloadingTls`]): cert-manager and the
//! kubelet rotate a Secret's files in place, and new connections get the new certificate and
//! client CA at once. Files that do not load are refused as at start (logged once, naming the
//! file), and the ones loaded before keep being served: nothing half-applied.

use std::{io, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::wrappers::ReceiverStream;

use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};

/// A client that has not finished its TLS handshake by then is disconnected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the TLS files are compared with what is being served.
pub const RELOAD_CHECK_EVERY: Duration = Duration::from_secs(5);

/// TCP listener settings (mutual TLS is mandatory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Server certificate chain (PEM), leaf first.
    pub tls_cert: PathBuf,
    /// Server key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub tls_key: PathBuf,
    /// CA(s) that client certificates must chain to (PEM).
    pub client_ca: PathBuf,
}

/// A TLS file that cannot be used. Each names the setting and the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read (missing, a directory, no permission).
    #[error("{setting} {}: cannot read: {error}", path.display())]
    Read {
        /// `server.tcp.tls_cert`, `server.tcp.tls_key` or `server.tcp.client_ca`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// The error (in the message already, so not also a `source()`: one line, said once).
        error: io::Error,
    },
    /// The file was read but holds nothing usable.
    #[error("{setting} {}: {problem}", path.display())]
    Content {
        /// `server.tcp.tls_cert`, `server.tcp.tls_key` or `server.tcp.client_ca`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Certificate and key are each fine but do not go together.
    #[error("server.tcp.tls_cert {} and server.tcp.tls_key {}: {problem}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// The crypto provider: `ring`, named explicitly so that no other provider (aws-lc) is ever
/// chosen, and a build that enabled two could not make rustls panic on "which one?".
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

struct File {
    setting: &'static str,
    path: PathBuf,
    bytes: Vec<u8>,
}

impl File {
    fn read(setting: &'static str, path: &std::path::Path) -> Result<File, TlsError> {
        let bytes = std::fs::read(path).map_err(|error| TlsError::Read {
            setting,
            path: path.to_path_buf(),
            error,
        })?;
        Ok(File {
            setting,
            path: path.to_path_buf(),
            bytes,
        })
    }

    fn problem(&self, problem: impl Into<String>) -> TlsError {
        TlsError::Content {
            setting: self.setting,
            path: self.path.clone(),
            problem: problem.into(),
        }
    }

    /// Every `CERTIFICATE` block, each parsed as X.509; at least one.
    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let certs = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.problem(format!("not valid PEM: {e}")))?;
        if certs.is_empty() {
            return Err(self.problem("no certificate found (expected a PEM \"CERTIFICATE\" block)"));
        }
        for (i, der) in certs.iter().enumerate() {
            webpki::EndEntityCert::try_from(der).map_err(|e| {
                self.problem(format!(
                    "certificate {} of {} is not a valid X.509 certificate: {e}",
                    i + 1,
                    certs.len()
                ))
            })?;
        }
        Ok(certs)
    }

    /// The one private key.
    fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        PrivateKeyDer::from_pem_slice(&self.bytes).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => self.problem(
                "no private key found (expected a PEM \"PRIVATE KEY\", \"RSA PRIVATE KEY\" or \
                 \"EC PRIVATE KEY\" block)",
            ),
            e => self.problem(format!("not valid PEM: {e}")),
        })
    }
}

/// The three files' contents, as last read.
#[derive(Clone, PartialEq, Eq)]
struct Contents([Vec<u8>; 3]);

fn read_all(tcp: &TcpConfig) -> Result<(File, File, File), TlsError> {
    Ok((
        File::read("server.tcp.tls_cert", &tcp.tls_cert)?,
        File::read("server.tcp.tls_key", &tcp.tls_key)?,
        File::read("server.tcp.client_ca", &tcp.client_ca)?,
    ))
}

/// Reads and checks the three files of `tcp` and builds the server's TLS configuration: its
/// identity, client certificates required and verified against `client_ca`, HTTP/2 by ALPN.
/// Whatever is wrong is reported with the file's name rather than as a bare "transport error".
pub fn load(tcp: &TcpConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let (cert, key, ca) = read_all(tcp)?;
    build(&cert, &key, &ca)
}

fn build(cert: &File, key: &File, ca: &File) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = cert.certificates()?;
    let private_key = key.private_key()?;
    let provider = provider();
    provider
        .key_provider
        .load_private_key(private_key.clone_key())
        .map_err(|e| key.problem(format!("not a usable private key: {e}")))?;
    let mut roots = RootCertStore::empty();
    let anchors = ca.certificates()?;
    let count = anchors.len();
    for (i, der) in anchors.into_iter().enumerate() {
        roots.add(der).map_err(|e| {
            ca.problem(format!(
                "certificate {} of {count} cannot be a trust anchor: {e}",
                i + 1
            ))
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ca.problem(format!("cannot verify clients with it: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_client_cert_verifier(verifier)
                .with_single_cert(chain, private_key)
        })
        .map_err(|e| TlsError::Pair {
            cert: cert.path.clone(),
            key: key.path.clone(),
            problem: match e {
                rustls::Error::InconsistentKeys(_) => {
                    "the key does not belong to the certificate (the first one in the file)".into()
                }
                e => e.to_string(),
            },
        })?;
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The TCP listener's TLS configuration, replaced when its files change.
pub struct ReloadingTls {
    tcp: TcpConfig,
    current: ArcSwap<ServerConfig>,
    /// What `current` was built from, and the last contents refused (so a refusal is logged
    /// once, not at every check).
    seen: std::sync::Mutex<(Contents, Option<Contents>)>,
}

impl ReloadingTls {
    /// Loads the files once; an error here refuses the start.
    pub fn load(tcp: &TcpConfig) -> Result<Arc<Self>, TlsError> {
        let (cert, key, ca) = read_all(tcp)?;
        let config = build(&cert, &key, &ca)?;
        let contents = Contents([cert.bytes, key.bytes, ca.bytes]);
        Ok(Arc::new(ReloadingTls {
            tcp: tcp.clone(),
            current: ArcSwap::new(config),
            seen: std::sync::Mutex::new((contents, None)),
        }))
    }

    /// The configuration new connections get.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    /// Re-reads the files; `Some(Ok(()))` when a new configuration is served from now on,
    /// `Some(Err(_))` when changed files were refused (the old one is kept), `None` when nothing
    /// changed (or the same refused contents are still there).
    pub fn check(&self) -> Option<Result<(), TlsError>> {
        let read = read_all(&self.tcp);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let (cert, key, ca) = match read {
            Ok(files) => files,
            // A file mid-rotation may be missing for a moment: report it only if it persists
            // to the next check with the same error text.
            Err(e) => {
                let marker = Contents([e.to_string().into_bytes(), Vec::new(), Vec::new()]);
                if seen.1.as_ref() == Some(&marker) {
                    return None;
                }
                seen.1 = Some(marker);
                return Some(Err(e));
            }
        };
        let contents = Contents([cert.bytes.clone(), key.bytes.clone(), ca.bytes.clone()]);
        if contents == seen.0 {
            seen.1 = None;
            return None;
        }
        if seen.1.as_ref() == Some(&contents) {
            return None;
        }
        match build(&cert, &key, &ca) {
            Ok(config) => {
                self.current.store(config);
                *seen = (contents, None);
                Some(Ok(()))
            }
            Err(e) => {
                seen.1 = Some(contents);
                Some(Err(e))
            }
        }
    }

    /// Checks every `every` until the returned task is aborted.
    pub fn watch(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let this = this.clone();
                // File reads: off the runtime's worker threads.
                let checked = tokio::task::spawn_blocking(move || this.check()).await;
                match checked {
                    Ok(Some(Ok(()))) => tracing::info!(
                        "TLS files changed: new connections get the new certificate and client CA"
                    ),
                    Ok(Some(Err(error))) => {
                        tracing::warn!(%error, "TLS files changed but cannot be used; still serving the ones loaded before")
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "TLS reload check failed"),
                }
            }
        })
    }
}

/// TLS handshakes on the accepted connections, each with [`HANDSHAKE_TIMEOUT`] and the
/// configuration current when it was accepted; yields the connections that completed one. A
/// failed handshake costs that connection only.
pub fn handshakes<IO>(
    mut accepted: impl futures::Stream<Item = io::Result<IO>> + Send + Unpin + 'static,
    tls: Arc<ReloadingTls>,
) -> ReceiverStream<io::Result<TlsStream<IO>>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                // tonic dropped its incoming: the server is stopping.
                () = tx.closed() => return,
                next = accepted.next() => next,
            };
            let Some(next) = next else { return };
            let stream = match next {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "accept");
                    continue;
                }
            };
            let acceptor = TlsAcceptor::from(tls.current());
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The names a verified client certificate carries: its DNS and URI subject alternative names,
/// as written in the certificate. The subject's common name is not consulted (RFC 6125 retired
/// it as an identity; SANs are what certificate issuers for workloads, such as cert-manager and
/// SPIFFE, fill in).
pub fn client_names(cert: &CertificateDer<'_>) -> Vec<String> {
    match webpki::EndEntityCert::try_from(cert) {
        Ok(cert) => cert
            .valid_dns_names()
            .chain(cert.valid_uri_names())
            .map(str::to_owned)
            .collect(),
        Err(_) => Vec::new(),
    }
}
