//! A throwaway PKI for the TLS tests, made at test time with rcgen (ring): a CA, a server
//! certificate for `localhost`/127.0.0.1, client certificates with chosen SANs.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use headroomd::server::TcpConfig;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate and its key, PEM.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn leaf(&self, common_name: &str, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Pem {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.subject_alt_names = names
            .iter()
            .map(|n| {
                if let Ok(ip) = n.parse() {
                    SanType::IpAddress(ip)
                } else if n.contains(':') {
                    SanType::URI((*n).try_into().unwrap())
                } else {
                    SanType::DnsName((*n).try_into().unwrap())
                }
            })
            .collect();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Pem {
        self.leaf(
            "headroomd",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate carrying `names` (URIs when they contain ':', DNS names otherwise).
    /// Its common name is `common_name`, which headroomd does not consult.
    pub fn client(&self, common_name: &str, names: &[&str]) -> Pem {
        self.leaf(common_name, names, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// Writes the server's files into `dir` and returns a `[server.tcp]` on 127.0.0.1:0.
pub fn server_files(dir: &Path, ca: &Ca) -> TcpConfig {
    let server = ca.server();
    let write = |name: &str, text: &str| -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    TcpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls_cert: write("server.crt", &server.cert),
        tls_key: write("server.key", &server.key),
        client_ca: write("ca.crt", &ca.pem()),
    }
}
