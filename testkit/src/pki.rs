//! The control plane's throw-away PKI, made at start: a CA, the API server's serving
//! certificate, an administrator's client certificate (`system:masters`), the service-account
//! signing key, and the one node's kubelet client certificate (`system:node:<name>` in
//! `system:nodes`, what the Node authorizer and NodeRestriction expect).
use std::{fs, net::Ipv4Addr, path::Path};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::control_plane::ControlPlaneError;

/// File names inside the control plane's directory.
pub(crate) const CA_CERT: &str = "ca.crt";
pub(crate) const SERVING_CERT: &str = "apiserver.crt";
pub(crate) const SERVING_KEY: &str = "apiserver.key";
pub(crate) const ADMIN_CERT: &str = "admin.crt";
pub(crate) const ADMIN_KEY: &str = "admin.key";
pub(crate) const SERVICE_ACCOUNT_KEY: &str = "service-account.key";
pub(crate) const SERVICE_ACCOUNT_PUBLIC_KEY: &str = "service-account.pub";
pub(crate) const KUBELET_CERT: &str = "kubelet.crt";
pub(crate) const KUBELET_KEY: &str = "kubelet.key";
pub(crate) const SCHEDULER_CERT: &str = "kube-scheduler.crt";
pub(crate) const SCHEDULER_KEY: &str = "kube-scheduler.key";
/// The name the kubelet registers its Node under (its certificate's `system:node:` name).
pub const NODE_NAME: &str = "headroom-node";

fn pki_error(e: rcgen::Error) -> ControlPlaneError {
    ControlPlaneError::Pki(e.to_string())
}

/// `apiserver_address` is named in the serving certificate beside 127.0.0.1.
pub(crate) fn write(dir: &Path, apiserver_address: Ipv4Addr) -> Result<(), ControlPlaneError> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(pki_error)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "headroom-test-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(pki_error)?;
    let issuer = CertifiedIssuer::self_signed(ca, ca_key).map_err(pki_error)?;
    put(dir, CA_CERT, &issuer.pem())?;

    let mut serving = CertificateParams::new(Vec::<String>::new()).map_err(pki_error)?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.subject_alt_names = vec![
        SanType::IpAddress(Ipv4Addr::LOCALHOST.into()),
        SanType::IpAddress(apiserver_address.into()),
        dns("localhost")?,
        dns("kubernetes")?,
        dns("kubernetes.default.svc")?,
    ];
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf(dir, serving, &issuer, SERVING_CERT, SERVING_KEY)?;

    // The organisation is the group: `system:masters` is the API server's built-in superuser.
    client(
        dir,
        &issuer,
        "headroom-test-admin",
        Some("system:masters"),
        ADMIN_CERT,
        ADMIN_KEY,
    )?;
    client(
        dir,
        &issuer,
        &format!("system:node:{NODE_NAME}"),
        Some("system:nodes"),
        KUBELET_CERT,
        KUBELET_KEY,
    )?;
    // kube-scheduler as kubeadm runs it: the bootstrap RBAC's `system:kube-scheduler` user, not a
    // superuser, so its calls are authorised by RBAC and classified by API Priority and Fairness
    // (the `kube-scheduler` FlowSchema) as on a real cluster.
    client(
        dir,
        &issuer,
        "system:kube-scheduler",
        None,
        SCHEDULER_CERT,
        SCHEDULER_KEY,
    )?;

    let service_accounts = KeyPair::generate().map_err(pki_error)?;
    put(dir, SERVICE_ACCOUNT_KEY, &service_accounts.serialize_pem())?;
    // The verifying side wants the public key itself: it does not read PKCS#8 private keys.
    put(
        dir,
        SERVICE_ACCOUNT_PUBLIC_KEY,
        &service_accounts.public_key_pem(),
    )
}

/// A client certificate for `user` (the common name) in `group` (the organisation).
fn client(
    dir: &Path,
    issuer: &CertifiedIssuer<'static, KeyPair>,
    user: &str,
    group: Option<&str>,
    cert_file: &str,
    key_file: &str,
) -> Result<(), ControlPlaneError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki_error)?;
    params.distinguished_name.push(DnType::CommonName, user);
    if let Some(group) = group {
        params.distinguished_name.push(DnType::OrganizationName, group);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf(dir, params, issuer, cert_file, key_file)
}

fn dns(name: &str) -> Result<SanType, ControlPlaneError> {
    Ok(SanType::DnsName(name.try_into().map_err(pki_error)?))
}

fn leaf(
    dir: &Path,
    params: CertificateParams,
    issuer: &CertifiedIssuer<'static, KeyPair>,
    cert_file: &str,
    key_file: &str,
) -> Result<(), ControlPlaneError> {
    let key = KeyPair::generate().map_err(pki_error)?;
    let cert = params.signed_by(&key, issuer).map_err(pki_error)?;
    put(dir, cert_file, &cert.pem())?;
    put(dir, key_file, &key.serialize_pem())
}

fn put(dir: &Path, name: &str, contents: &str) -> Result<(), ControlPlaneError> {
    let path = dir.join(name);
    fs::write(&path, contents).map_err(|source| ControlPlaneError::Io {
        what: format!("write {}", path.display()),
        source,
    })
}
