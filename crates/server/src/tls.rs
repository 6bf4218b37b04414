//! Mutually authenticated TLS on the links between nodes and between DCs.
//!
//! Without TLS, anyone who reaches a node's replication port can announce itself as a DC or a node and inject
//! transactions. With a `[tls]` section, every link is TLS 1.2/1.3 (rustls) in both directions, and each end
//! proves it is a member of the cluster:
//!
//! - every node holds a certificate, signed by the cluster's CA, whose subject alternative names include
//!   [`member_name`]: `dc<D>-n<N>.<cluster>` for node N of DC D of the cluster named `cluster`;
//! - the node that opens a link checks that the peer's certificate chains to the CA and names the node it dialled
//!   (ordinary server-name verification, with the member name as the server name);
//! - the node that accepts a link requires a client certificate that chains to the CA, then reads the link's hello
//!   (the sender's DC and node) and refuses the link, before reading a single message, unless the certificate
//!   names that DC and node of this cluster. A certificate of another cluster signed by the same CA names another
//!   cluster and is refused; so is a member's certificate used to pose as a different member.
//!
//! [`LocalCa`] makes a CA and member certificates; `causet cluster start` uses it so that a local cluster is
//! authenticated with no setup, and `causet certs` writes them for clusters of real machines.

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The `[tls]` section of a node's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The cluster's CA certificate (PEM): every member's certificate must chain to it.
    pub ca: PathBuf,
    /// This node's certificate (PEM; its chain up to, not including, the CA).
    pub cert: PathBuf,
    /// This node's private key (PEM, PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The cluster's name: a member's certificate names `dc<D>-n<N>.<cluster>`.
    pub cluster: String,
}

/// The `[client_tls]` section: TLS on the client port (server-authenticated only: AntidoteDB's protocol has no
/// client certificates; applications authenticate the server).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsConfig {
    /// The certificate chain the node presents to clients (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

/// How long a TLS handshake may take, on a link or on the client port, before the connection is given up.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A handshake bounded by [`HANDSHAKE_TIMEOUT`]: running past it is an error like any other.
async fn handshake<T>(shake: impl std::future::Future<Output = std::io::Result<T>>) -> std::io::Result<T> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, shake)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the TLS handshake timed out")))
}

/// TLS on the client port.
#[derive(Clone)]
pub struct ClientTls(TlsAcceptor);

impl ClientTls {
    /// Loads the certificate and key. Errors name the file and the problem.
    pub fn load(c: &ClientTlsConfig) -> Result<ClientTls, String> {
        let (certs, key) = read_identity(&c.cert, &c.key, "client-port")?;
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                format!("the client-port certificate {} and key {}: {e}", c.cert.display(), c.key.display())
            })?;
        Ok(ClientTls(TlsAcceptor::from(Arc::new(config))))
    }

    /// Accepts a client's TLS session, within [`HANDSHAKE_TIMEOUT`].
    pub async fn accept(&self, tcp: TcpStream) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        handshake(self.0.accept(tcp)).await
    }
}

/// The name node `node` of DC `dc` of cluster `cluster` carries in its certificate.
pub fn member_name(cluster: &str, dc: u16, node: u16) -> String {
    format!("dc{dc}-n{node}.{cluster}")
}

/// Whether `cluster` can end a DNS name (letters, digits, `-` and `.`; no empty label).
pub fn valid_cluster_name(cluster: &str) -> bool {
    !cluster.is_empty()
        && cluster.len() <= 200
        && cluster.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A TLS session of a link, whichever end opened it.
pub trait PeerIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> PeerIo for T {}

/// What a node needs to open and accept authenticated links.
#[derive(Clone)]
pub struct PeerTls {
    connector: TlsConnector,
    acceptor: TlsAcceptor,
    cluster: String,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").field("cluster", &self.cluster).finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("reading the {what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("the {what} {} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// A certificate chain and its private key, from PEM files (`what` names them in errors).
fn read_identity(
    cert: &Path,
    key: &Path,
    what: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs = read_certs(cert, &format!("{what} certificate"))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("reading the {what} private key {}: {e}", key.display()))?;
    Ok((certs, key))
}

impl PeerTls {
    /// Loads the CA, the node's certificate and key, and builds both ends' TLS configurations. Every error names
    /// the file and what is wrong with it.
    pub fn load(c: &TlsConfig) -> Result<PeerTls, String> {
        if !valid_cluster_name(&c.cluster) {
            return Err(format!(
                "tls.cluster {:?} is not a valid name (letters, digits, '-' and '.', as in a DNS name)",
                c.cluster
            ));
        }
        let mut roots = RootCertStore::empty();
        for ca in read_certs(&c.ca, "CA certificate")? {
            roots.add(ca).map_err(|e| format!("the CA certificate {} is not usable: {e}", c.ca.display()))?;
        }
        let roots = Arc::new(roots);
        let (certs, key) = read_identity(&c.cert, &c.key, "node")?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| format!("the CA certificate {} cannot verify peers: {e}", c.ca.display()))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| format!("the node certificate {} and key {}: {e}", c.cert.display(), c.key.display()))?;
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("the node certificate {} and key {}: {e}", c.cert.display(), c.key.display()))?;
        Ok(PeerTls {
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: TlsAcceptor::from(Arc::new(server)),
            cluster: c.cluster.clone(),
        })
    }

    /// Opens TLS on a link to node `node` of DC `dc`, which must present that member's certificate, within
    /// [`HANDSHAKE_TIMEOUT`].
    pub async fn connect(&self, tcp: TcpStream, dc: u16, node: u16) -> std::io::Result<Box<dyn PeerIo>> {
        let name = ServerName::try_from(member_name(&self.cluster, dc, node))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok(Box::new(handshake(self.connector.connect(name, tcp)).await?))
    }

    /// Accepts TLS on an incoming link: the peer's certificate chains to the CA. Returns the session and the
    /// peer's certificate, whose member name [`PeerTls::check_member`] checks against the link's hello. Within
    /// [`HANDSHAKE_TIMEOUT`].
    pub async fn accept(&self, tcp: TcpStream) -> std::io::Result<(Box<dyn PeerIo>, CertificateDer<'static>)> {
        let stream = handshake(self.acceptor.accept(tcp)).await?;
        let cert = stream.get_ref().1.peer_certificates().and_then(|c| c.first()).cloned().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the peer presented no certificate")
        })?;
        Ok((Box::new(stream), cert))
    }

    /// Whether `cert` (an accepted peer's) is that of node `node` of DC `dc` of this cluster.
    pub fn check_member(&self, cert: &CertificateDer<'_>, dc: u16, node: u16) -> Result<(), String> {
        let name = member_name(&self.cluster, dc, node);
        let cert = webpki::EndEntityCert::try_from(cert).map_err(|e| format!("the peer's certificate: {e:?}"))?;
        let server_name = ServerName::try_from(name.as_str()).map_err(|e| e.to_string())?;
        cert.verify_is_valid_for_subject_name(&server_name)
            .map_err(|_| format!("the peer announced DC {dc} node {node}, but its certificate does not name {name}"))
    }
}

/// A member of a cluster: (DC, node).
pub type Member = (u16, u16);

/// Every member of a cluster of `dcs` DCs of `nodes_per_dc` nodes, DC by DC.
pub fn every_member(dcs: u16, nodes_per_dc: u16) -> Vec<Member> {
    (0..dcs).flat_map(|dc| (0..nodes_per_dc).map(move |node| (dc, node))).collect()
}

/// A certificate authority for one cluster, and the certificates it issues to members.
pub struct LocalCa {
    issuer: rcgen::Certificate,
    key: KeyPair,
}

fn ca_params() -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, "Causet cluster CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    // Valid from a day ago (the nodes' clocks may differ) for ten years; members' certificates share the span.
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(3650);
    Ok(params)
}

impl LocalCa {
    /// A new CA with a fresh key.
    pub fn create() -> Result<LocalCa, String> {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let issuer = ca_params()?.self_signed(&key).map_err(|e| e.to_string())?;
        Ok(LocalCa { issuer, key })
    }

    /// The CA that [`LocalCa::write_cluster`] wrote into `dir` (`ca.key`), to issue more members' certificates.
    /// (The CA certificate is made again from the key: what it signs chains to the one in `ca.pem`, which has the
    /// same name and key.)
    pub fn open(dir: &Path) -> Result<LocalCa, String> {
        let path = dir.join("ca.key");
        let pem = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let key = KeyPair::from_pem(&pem).map_err(|e| format!("the CA key {}: {e}", path.display()))?;
        let issuer = ca_params()?.self_signed(&key).map_err(|e| e.to_string())?;
        Ok(LocalCa { issuer, key })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// The CA's private key, PEM (keep it secret: whoever holds it can make members).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Issues a certificate for node `node` of DC `dc`: (certificate PEM, private key PEM).
    pub fn issue(&self, cluster: &str, dc: u16, node: u16) -> Result<(String, String), String> {
        let name = member_name(cluster, dc, node);
        let mut params = CertificateParams::new(vec![name.clone()]).map_err(|e| e.to_string())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = self.issuer.params().not_before;
        params.not_after = self.issuer.params().not_after;
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params.signed_by(&key, &self.issuer, &self.key).map_err(|e| e.to_string())?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Writes the CA (`ca.pem`, `ca.key`, unless `dir` has them already) and, for every (DC, node),
    /// `dc<D>-n<N>.pem` and `.key` into `dir`, and returns each node's [`TlsConfig`] by (DC, node).
    pub fn write_cluster(
        &self,
        dir: &Path,
        cluster: &str,
        members: &[Member],
    ) -> Result<Vec<(Member, TlsConfig)>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let write = |name: &str, text: &str, secret: bool| -> Result<PathBuf, String> {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            #[cfg(unix)]
            if secret {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            }
            #[cfg(not(unix))]
            let _ = secret;
            Ok(path)
        };
        let ca = dir.join("ca.pem");
        if !ca.exists() {
            write("ca.pem", &self.cert_pem(), false)?;
            write("ca.key", &self.key_pem(), true)?;
        }
        let mut configs = Vec::new();
        for &(dc, node) in members {
            let (cert_pem, key_pem) = self.issue(cluster, dc, node)?;
            let cert = write(&format!("dc{dc}-n{node}.pem"), &cert_pem, false)?;
            let key = write(&format!("dc{dc}-n{node}.key"), &key_pem, true)?;
            configs.push(((dc, node), TlsConfig { ca: ca.clone(), cert, key, cluster: cluster.to_string() }));
        }
        Ok(configs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_dns_suffixes() {
        for good in ["causet", "prod-eu.example.com", "a1"] {
            assert!(valid_cluster_name(good), "{good}");
        }
        for bad in ["", "a..b", "-a", "a-", "a b", "a_b", ".a"] {
            assert!(!valid_cluster_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_bad_file_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let ca = LocalCa::create().unwrap();
        let configs = ca.write_cluster(dir.path(), "c", &[(0, 0)]).unwrap();
        let good = configs[0].1.clone();
        assert!(PeerTls::load(&good).is_ok());
        let missing = TlsConfig { ca: dir.path().join("nope.pem"), ..good.clone() };
        assert!(PeerTls::load(&missing).unwrap_err().contains("nope.pem"));
        let not_pem = dir.path().join("garbage.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let garbage = TlsConfig { cert: not_pem, ..good.clone() };
        assert!(PeerTls::load(&garbage).unwrap_err().contains("garbage.pem"));
        let other_key = TlsConfig { key: dir.path().join("ca.key"), ..good.clone() };
        assert!(PeerTls::load(&other_key).is_err(), "a key that does not match the certificate");
        let bad_name = TlsConfig { cluster: "a b".into(), ..good };
        assert!(PeerTls::load(&bad_name).unwrap_err().contains("not a valid name"));
    }
}
