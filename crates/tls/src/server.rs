//! The server side: a rustls config presenting a certificate the zone's CA signed, renewed
//! in place before it expires, so a zone that runs for months never serves an expired one.

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::ca::{CaError, ServerIdentity, ZoneCa};

/// The certificate a listener presents; [`RenewingCert::renew`] swaps in a new one without
/// touching open connections.
#[derive(Debug)]
pub struct RenewingCert {
    current: RwLock<(Arc<CertifiedKey>, SystemTime)>,
}

impl RenewingCert {
    /// Starts with `identity`.
    pub fn new(identity: ServerIdentity) -> Result<Arc<RenewingCert>, CaError> {
        let (key, not_after) = certified(identity)?;
        Ok(Arc::new(RenewingCert {
            current: RwLock::new((key, not_after)),
        }))
    }

    /// Presents `identity` to new connections from now on.
    pub fn renew(&self, identity: ServerIdentity) -> Result<(), CaError> {
        let next = certified(identity)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    /// When the certificate presented now expires.
    pub fn not_after(&self) -> SystemTime {
        self.current.read().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Renews from `ca` for `names` whenever two thirds of the certificate's lifetime have
    /// passed; runs until the task is dropped.
    pub async fn keep_renewed(
        self: Arc<Self>,
        ca: Arc<ZoneCa>,
        names: Vec<String>,
        lifetime: Duration,
    ) {
        loop {
            let left = self
                .not_after()
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            // Renew when a third of the lifetime is left, checking at least hourly.
            let wait = left
                .saturating_sub(lifetime / 3)
                .clamp(Duration::from_secs(1), Duration::from_secs(3600));
            tokio::time::sleep(wait).await;
            let left = self
                .not_after()
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            if left > lifetime / 3 {
                continue;
            }
            match ca
                .issue_server(&names, lifetime)
                .and_then(|id| self.renew(id))
            {
                Ok(()) => tracing::info!("the zone's server certificate was renewed"),
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the server certificate failed; retrying in an hour")
                }
            }
        }
    }
}

impl ResolvesServerCert for RenewingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .clone(),
        )
    }
}

/// `identity` as rustls presents it, with the time it expires.
pub fn certified(identity: ServerIdentity) -> Result<(Arc<CertifiedKey>, SystemTime), CaError> {
    let provider = crate::provider();
    let key =
        CertifiedKey::from_der(identity.chain, identity.key, &provider).map_err(CaError::Key)?;
    Ok((Arc::new(key), identity.not_after))
}

/// A rustls server config presenting `cert`, with ALPN `alpn`, that also accepts client
/// certificates signed by `clients` (node certificates) without requiring one. A client that
/// presents a certificate not signed by `clients`, or expired, fails the handshake; the
/// application decides what a connection without one may do.
pub fn server_config_with_clients(
    cert: Arc<RenewingCert>,
    alpn: &[&[u8]],
    clients: Arc<rustls::RootCertStore>,
) -> Arc<rustls::ServerConfig> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(clients, crate::provider())
            .allow_unauthenticated()
            .build()
            .expect("a store with the zone's CA builds a client verifier");
    let mut config = rustls::ServerConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(cert);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A rustls server config presenting `cert`, with ALPN `alpn` and no client certificates.
pub fn server_config(cert: Arc<RenewingCert>, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    server_config_with_resolver(cert, alpn)
}

/// A rustls server config presenting what `certs` picks for each handshake (by the name the
/// client asks for), with ALPN `alpn` and no client certificates.
pub fn server_config_with_resolver(
    certs: Arc<dyn ResolvesServerCert>,
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}
