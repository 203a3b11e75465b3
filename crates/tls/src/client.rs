//! The client side: a rustls config that trusts only the zone's CA, reading a pinned CA
//! from its file, and turning a failed connection's error chain into words an operator
//! can act on ([`explain`]).

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError};

/// A pinned CA could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The file could not be read.
    #[error("cannot read the zone's CA certificate {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file holds no certificate.
    #[error("{} holds no PEM certificate (it should be the zone's ca.pem)", path.display())]
    NotPem { path: PathBuf },
}

/// The zone's CA as a client pins it: the certificates of one PEM file.
#[derive(Clone, PartialEq, Eq)]
pub struct PinnedCa {
    pem: String,
    certs: Vec<CertificateDer<'static>>,
    origin: String,
}

impl std::fmt::Debug for PinnedCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedCa")
            .field("origin", &self.origin)
            .field("certificates", &self.certs.len())
            .finish()
    }
}

impl PinnedCa {
    /// Reads the CA from a PEM file.
    pub fn from_file(path: &Path) -> Result<PinnedCa, PinError> {
        let pem = std::fs::read_to_string(path).map_err(|source| PinError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        PinnedCa::from_pem(&pem, &path.display().to_string()).ok_or_else(|| PinError::NotPem {
            path: path.to_path_buf(),
        })
    }

    /// The CA from PEM text; `origin` says where it came from in messages. `None` when the
    /// text holds no certificate.
    pub fn from_pem(pem: &str, origin: &str) -> Option<PinnedCa> {
        let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .filter_map(Result::ok)
            .collect();
        if certs.is_empty() {
            return None;
        }
        Some(PinnedCa {
            pem: pem.to_string(),
            certs,
            origin: origin.to_string(),
        })
    }

    /// The PEM text, for clients that take PEM (reqwest, tonic).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Where the CA came from (a path), for messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The fingerprint of the first certificate (`sha256:<hex>`).
    pub fn fingerprint(&self) -> String {
        crate::ca::fingerprint(self.certs[0].as_ref())
    }

    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &self.certs {
            // A certificate rustls cannot use simply does not become a root; the handshake
            // then fails with "not signed by the pinned CA", which names the file.
            let _ = roots.add(cert.clone());
        }
        roots
    }

    /// A rustls client config that trusts only this CA, with ALPN `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let config = builder()
            .with_root_certificates(self.roots())
            .with_no_client_auth();
        with_alpn(config, alpn)
    }

    /// A client config that trusts only this CA and presents a client certificate: `chain`
    /// (PEM, the node certificate first) with its `key`. `None` when `chain` holds no
    /// certificate or the key does not fit it.
    pub fn client_config_with_identity(
        &self,
        alpn: &[&[u8]],
        chain: &str,
        key: PrivateKeyDer<'static>,
    ) -> Option<Arc<rustls::ClientConfig>> {
        let chain: Vec<_> = CertificateDer::pem_slice_iter(chain.as_bytes())
            .filter_map(Result::ok)
            .collect();
        if chain.is_empty() {
            return None;
        }
        let config = builder()
            .with_root_certificates(self.roots())
            .with_client_auth_cert(chain, key)
            .ok()?;
        Some(with_alpn(config, alpn))
    }
}

/// A client config builder with the ring provider and the default protocol versions.
fn builder() -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier> {
    rustls::ClientConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
}

fn with_alpn(mut config: rustls::ClientConfig, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Trusting a zone by its CA's fingerprint alone, as a join token pins it: the server's
/// chain must hold a certificate with that fingerprint, and the server certificate must be
/// validly signed by it (name, expiry, signature, as with a pinned file). The CA certificate
/// that matched is kept, so the client can pin the file from then on.
#[derive(Debug)]
pub struct FingerprintPin {
    fingerprint: String,
    matched: std::sync::Mutex<Option<CertificateDer<'static>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl FingerprintPin {
    /// A pin of `fingerprint` (`sha256:<hex>`, as `orc zone ca` prints it).
    pub fn new(fingerprint: &str) -> Arc<FingerprintPin> {
        Arc::new(FingerprintPin {
            fingerprint: fingerprint.to_ascii_lowercase(),
            matched: std::sync::Mutex::new(None),
            provider: crate::provider(),
        })
    }

    /// A client config that trusts only a server whose chain carries the pinned CA.
    pub fn client_config(self: &Arc<Self>, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let config = builder()
            .dangerous()
            .with_custom_certificate_verifier(self.clone())
            .with_no_client_auth();
        with_alpn(config, alpn)
    }

    /// The CA certificate that matched the pin in the last verified handshake, in PEM form.
    pub fn matched_pem(&self) -> Option<String> {
        let matched = self
            .matched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        matched
            .as_ref()
            .map(|der| pem::encode(&pem::Pem::new("CERTIFICATE", der.to_vec())))
    }
}

impl rustls::client::danger::ServerCertVerifier for FingerprintPin {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let ca = intermediates
            .iter()
            .find(|cert| crate::ca::fingerprint(cert.as_ref()) == self.fingerprint)
            .ok_or(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            ))?;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(ca.clone().into_owned())
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            self.provider.clone(),
        )
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?;
        let verified =
            verifier.verify_server_cert(end_entity, &[], server_name, ocsp_response, now)?;
        *self
            .matched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(ca.clone().into_owned());
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Why a TLS connection failed, in terms an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server's certificate is not signed by the pinned CA.
    UnknownCa,
    /// The server's certificate has expired (or is not valid yet).
    Expired,
    /// The server's certificate does not name the address dialled.
    WrongName,
    /// The server did not answer in TLS: a plain listener.
    PlainServer,
    /// The server speaks TLS and the client sent plain text.
    TlsRequired,
    /// The peer refused our certificate or the handshake, with this alert.
    PeerRefused(String),
    /// Some other TLS failure.
    Other(String),
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsFailure::UnknownCa => {
                f.write_str("its certificate is not signed by the pinned CA (a different zone, or the wrong ca.pem)")
            }
            TlsFailure::Expired => f.write_str(
                "its certificate has expired or is not valid yet (check both machines' clocks; \
                 a zone renews its certificate at start)",
            ),
            TlsFailure::WrongName => f.write_str(
                "its certificate does not name the address dialled (the zone lists its names with --tls-name)",
            ),
            TlsFailure::PlainServer => {
                f.write_str("it did not answer in TLS: it is a plain listener, dial http:// instead")
            }
            TlsFailure::TlsRequired => f.write_str(
                "it speaks TLS and was sent plain text: dial https:// with the zone's CA",
            ),
            TlsFailure::PeerRefused(alert) => write!(f, "it refused the handshake ({alert})"),
            TlsFailure::Other(what) => write!(f, "TLS failed: {what}"),
        }
    }
}

/// What went wrong with TLS somewhere in `error`'s source chain, if anything did.
pub fn explain(error: &(dyn StdError + 'static)) -> Option<TlsFailure> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(classify(tls));
        }
        // An `io::Error` wrapping another error reports the inner one's source, not the
        // inner one itself, so descend into it here.
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            current = Some(inner);
            continue;
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>()
            && h2.reason() == Some(h2::Reason::INADEQUATE_SECURITY)
        {
            return Some(TlsFailure::TlsRequired);
        }
        current = e.source();
    }
    None
}

/// The words for one rustls error.
pub fn classify(error: &rustls::Error) -> TlsFailure {
    match error {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsFailure::UnknownCa
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TlsFailure::Expired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsFailure::WrongName
            }
            other => TlsFailure::Other(format!("{other:?}")),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            TlsFailure::PlainServer
        }
        rustls::Error::AlertReceived(alert) => match alert {
            AlertDescription::UnknownCA | AlertDescription::BadCertificate => {
                TlsFailure::PeerRefused("the peer does not trust our certificate".into())
            }
            AlertDescription::CertificateExpired => {
                TlsFailure::PeerRefused("the peer found our certificate expired".into())
            }
            other => TlsFailure::PeerRefused(format!("{other:?}")),
        },
        other => TlsFailure::Other(other.to_string()),
    }
}
