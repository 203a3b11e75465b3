//! The zone's certificate authority: an ECDSA P-256 key and a self-signed CA certificate,
//! made on a zone's first start and kept in two files, and the short-lived server
//! certificates it signs for the zone's listeners.
//!
//! Invariants: the key file is created 0600 with `create_new` (never overwritten, never
//! readable by others); the CA's subject is derived from its public key, so a CA read back
//! from its files signs exactly as the one that was made; nothing here logs or formats the
//! key.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

/// How long a new CA certificate is valid: ten years.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How long a server certificate is valid unless the caller says otherwise: 30 days. The
/// zone signs a new one at every start and renews it while it runs.
pub const SERVER_CERT_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long a node certificate is valid: 30 days. Agents renew theirs over their stream
/// when a third of its life is left.
pub const NODE_CERT_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// How far back a new certificate's validity starts, so clocks a little behind accept it.
const BACKDATE: Duration = Duration::from_secs(3600);

/// The CA could not be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A CA file could not be read or written.
    #[error("cannot use the CA file {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// One of the two CA files exists and the other does not.
    #[error(
        "the CA certificate {} and its key {} must both exist or both be absent; \
         restore the missing one from a backup",
        cert.display(),
        key.display()
    )]
    HalfPresent { cert: PathBuf, key: PathBuf },
    /// A file holds no PEM object of the kind expected.
    #[error("{} holds no {what} in PEM form", path.display())]
    NotPem { path: PathBuf, what: &'static str },
    /// The key does not belong to the certificate.
    #[error(
        "the CA key {} does not belong to the certificate {}",
        key.display(),
        cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
    /// A node's public key is not an uncompressed ECDSA P-256 point.
    #[error("the public key is not an uncompressed ECDSA P-256 point (65 bytes starting 0x04)")]
    BadPublicKey,
    /// A name given for a server certificate is neither an IP address nor a DNS name.
    #[error("{0:?} is neither an IP address nor a DNS name")]
    BadName(String),
    /// rustls refused a certificate and key this CA made.
    #[error("the server certificate cannot be used")]
    Key(#[source] rustls::Error),
    /// Signing failed.
    #[error("signing a certificate failed")]
    Sign(#[source] rcgen::Error),
}

/// The zone's CA: its certificate (public, given to clients to pin) and its signing key.
pub struct ZoneCa {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ZoneCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneCa")
            .field("fingerprint", &self.fingerprint())
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A node's certificate as the zone signed it for the node's own key.
#[derive(Debug, Clone)]
pub struct NodeCertificate {
    /// The node certificate, then the CA certificate, in PEM form.
    pub chain_pem: String,
    /// The fingerprint of the node certificate (`sha256:<hex>`), by which the zone knows
    /// the node when it presents the certificate.
    pub fingerprint: String,
    /// When the node certificate stops being valid.
    pub not_after: SystemTime,
}

/// A node's public key as rcgen signs it: the raw uncompressed P-256 point.
struct NodeKey<'a>(&'a [u8]);

impl rcgen::PublicKeyData for NodeKey<'_> {
    fn der_bytes(&self) -> &[u8] {
        self.0
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &PKCS_ECDSA_P256_SHA256
    }
}

/// A certificate and its key, as a TLS server presents them.
#[derive(Debug)]
pub struct ServerIdentity {
    /// The server certificate, then the CA certificate.
    pub chain: Vec<CertificateDer<'static>>,
    /// The server certificate's key (PKCS#8).
    pub key: PrivateKeyDer<'static>,
    /// When the server certificate stops being valid.
    pub not_after: SystemTime,
}

impl ZoneCa {
    /// Reads the CA from `cert` and `key`, or makes a new one there when both are missing.
    /// Returns the CA and whether it was made now.
    pub fn load_or_create(cert: &Path, key: &Path) -> Result<(ZoneCa, bool), CaError> {
        match (cert.exists(), key.exists()) {
            (true, true) => Ok((ZoneCa::load(cert, key)?, false)),
            (false, false) => Ok((ZoneCa::create(cert, key)?, true)),
            _ => Err(CaError::HalfPresent {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            }),
        }
    }

    /// A new CA, kept in memory only (tests, and `load_or_create`).
    pub fn generate() -> Result<ZoneCa, CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CaError::Sign)?;
        let now = SystemTime::now();
        ZoneCa::from_key(key, now - BACKDATE, now + CA_LIFETIME)
    }

    /// A CA valid only between `not_before` and `not_after` (tests of expiry).
    pub fn generate_valid(
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<ZoneCa, CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CaError::Sign)?;
        ZoneCa::from_key(key, not_before, not_after)
    }

    fn create(cert: &Path, key: &Path) -> Result<ZoneCa, CaError> {
        let ca = ZoneCa::generate()?;
        // The key first, `create_new`: two zones starting at once cannot both write it.
        write_new(key, &ca.issuer.key().serialize_pem(), 0o600)?;
        write_new(cert, &ca.cert_pem, 0o600)?;
        Ok(ca)
    }

    fn load(cert_path: &Path, key_path: &Path) -> Result<ZoneCa, CaError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| CaError::Io {
                path: path.to_path_buf(),
                source,
            })
        };
        let cert_pem = read(cert_path)?;
        let key_pem = read(key_path)?;
        let key = KeyPair::from_pem(&key_pem).map_err(|_| CaError::NotPem {
            path: key_path.to_path_buf(),
            what: "private key",
        })?;
        let cert_der =
            CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|_| CaError::NotPem {
                path: cert_path.to_path_buf(),
                what: "certificate",
            })?;
        // The certificate carries the key's public half; a key from another CA does not fit.
        let public = key.public_key_raw();
        if !contains(cert_der.as_ref(), public) {
            return Err(CaError::Mismatch {
                cert: cert_path.to_path_buf(),
                key: key_path.to_path_buf(),
            });
        }
        let params = ca_params(&key, SystemTime::now(), SystemTime::now());
        Ok(ZoneCa {
            cert_pem,
            cert_der,
            issuer: Issuer::new(params, key),
        })
    }

    fn from_key(
        key: KeyPair,
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<ZoneCa, CaError> {
        let params = ca_params(&key, not_before, not_after);
        let cert = params.self_signed(&key).map_err(CaError::Sign)?;
        Ok(ZoneCa {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate in PEM form: what clients pin.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate in DER form.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// `sha256:` and the hex SHA-256 of the CA certificate's DER form, as `orc zone ca`
    /// prints it for operators to compare.
    pub fn fingerprint(&self) -> String {
        fingerprint(self.cert_der.as_ref())
    }

    /// Signs a server certificate for `names` (IP addresses or DNS names) valid for
    /// `lifetime` from now (backdated an hour).
    pub fn issue_server(
        &self,
        names: &[String],
        lifetime: Duration,
    ) -> Result<ServerIdentity, CaError> {
        let now = SystemTime::now();
        self.issue_server_valid(names, now - BACKDATE, now + lifetime)
    }

    /// Signs a server certificate for `names` valid between the two instants given.
    pub fn issue_server_valid(
        &self,
        names: &[String],
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<ServerIdentity, CaError> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = names
            .iter()
            .map(|name| san(name))
            .collect::<Result<_, _>>()?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_else(|| "orc zone".into()),
        );
        params.distinguished_name = dn;
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CaError::Sign)?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(CaError::Sign)?;
        Ok(ServerIdentity {
            chain: vec![cert.der().clone(), self.cert_der.clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            not_after,
        })
    }

    /// Signs a client certificate for node `node` over the node's own key (`public_key`: the
    /// uncompressed P-256 point, as [`NodeIdentity::public_key`] gives it), valid for
    /// `lifetime` from now (backdated an hour). The node's private key never leaves it.
    pub fn issue_node(
        &self,
        node: &str,
        public_key: &[u8],
        lifetime: Duration,
    ) -> Result<NodeCertificate, CaError> {
        if public_key.len() != 65 || public_key[0] != 0x04 {
            return Err(CaError::BadPublicKey);
        }
        let now = SystemTime::now();
        let not_after = now + lifetime;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, node.to_string());
        dn.push(DnType::OrganizationalUnitName, "orc node".to_string());
        params.distinguished_name = dn;
        params.not_before = (now - BACKDATE).into();
        params.not_after = not_after.into();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&NodeKey(public_key), &self.issuer)
            .map_err(CaError::Sign)?;
        Ok(NodeCertificate {
            chain_pem: format!("{}{}", cert.pem(), self.cert_pem),
            fingerprint: fingerprint(cert.der().as_ref()),
            not_after,
        })
    }

    /// A certificate store holding only this CA, for clients in the same process.
    pub fn roots(&self) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        // The CA certificate was made or parsed here, so the store takes it.
        let _ = roots.add(self.cert_der.clone());
        Arc::new(roots)
    }
}

/// A node's own key pair: made on the node, kept in a 0600 file, never sent anywhere. Only
/// its public half travels, in a join or a renewal.
pub struct NodeIdentity {
    key: KeyPair,
}

impl std::fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeIdentity(<redacted>)")
    }
}

impl NodeIdentity {
    /// A new ECDSA P-256 key.
    pub fn generate() -> Result<NodeIdentity, CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CaError::Sign)?;
        Ok(NodeIdentity { key })
    }

    /// The key read back from its PEM form; `None` when the text is not a P-256 key.
    pub fn from_pem(pem: &str) -> Option<NodeIdentity> {
        let key = KeyPair::from_pem(pem).ok()?;
        key.is_compatible(&PKCS_ECDSA_P256_SHA256)
            .then_some(NodeIdentity { key })
    }

    /// The private key in PEM form, for the node's key file.
    pub fn to_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The public key as the zone signs it: the uncompressed point.
    pub fn public_key(&self) -> &[u8] {
        self.key.public_key_raw()
    }

    /// The private key as rustls takes it.
    pub fn private_key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }
}

/// `sha256:<hex>` of a certificate's DER bytes.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The CA's parameters: its subject is derived from its public key, so the same key gives
/// the same issuer name whether the CA was just made or read back.
fn ca_params(key: &KeyPair, not_before: SystemTime, not_after: SystemTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    let id = fingerprint(key.public_key_raw());
    dn.push(DnType::OrganizationName, "orc");
    dn.push(
        DnType::CommonName,
        format!("orc zone CA {}", &id["sha256:".len().."sha256:".len() + 12]),
    );
    params.distinguished_name = dn;
    params.not_before = not_before.into();
    params.not_after = not_after.into();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn san(name: &str) -> Result<SanType, CaError> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    name.to_string()
        .try_into()
        .map(SanType::DnsName)
        .map_err(|_| CaError::BadName(name.to_string()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), CaError> {
    let io = |source| CaError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}
