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

use std::{io, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// A client that has not finished its TLS handshake by then is disconnected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Reads and checks the three files of `tcp` and returns tonic's TLS settings for them: the
/// server identity, client certificates required and verified against `client_ca`, a handshake
/// timeout of [`HANDSHAKE_TIMEOUT`].
///
/// Everything tonic will do with the files is done here first (same rustls calls), so that
/// whatever is wrong is reported with the file's name rather than as a bare "transport error".
pub fn load(tcp: &TcpConfig) -> Result<ServerTlsConfig, TlsError> {
    let cert = File::read("server.tcp.tls_cert", &tcp.tls_cert)?;
    let key = File::read("server.tcp.tls_key", &tcp.tls_key)?;
    let ca = File::read("server.tcp.client_ca", &tcp.client_ca)?;
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
    ServerConfig::builder_with_provider(provider)
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
    // tonic builds its rustls configuration with the process-wide provider: make it `ring`
    // (a no-op if one is installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(ServerTlsConfig::new()
        .identity(Identity::from_pem(cert.bytes, key.bytes))
        .client_ca_root(Certificate::from_pem(ca.bytes))
        .client_auth_optional(false)
        .timeout(HANDSHAKE_TIMEOUT))
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
