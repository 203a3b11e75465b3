//! HTTPS certificates: PEM to rustls keys, the lookup by server name, and the SNI resolver
//! the HTTPS listener's TLS config uses.
//!
//! A name matches an exact entry first, then a wildcard entry `*.parent` when the name is
//! exactly one label below `parent` (`a.example.com` matches `*.example.com`;
//! `a.b.example.com` and `example.com` do not). A handshake whose server name matches
//! nothing, or that names no server, fails: there is no default certificate. The proxy
//! does not check a certificate's names or dates; whoever issues them does.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::InconsistentKeys;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::error::CertificateDefect;
use crate::routes::Certificate;
use crate::table::Table;

/// Parses `certificate` into a key rustls can serve, checking that the key is the leaf's.
pub(crate) fn certified_key(
    certificate: &Certificate,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, CertificateDefect> {
    let chain = CertificateDer::pem_slice_iter(certificate.chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| CertificateDefect::ChainNotPem)?;
    if chain.is_empty() {
        return Err(CertificateDefect::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(certificate.key_pem.as_bytes())
        .map_err(|_| CertificateDefect::NoKey)?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|_| CertificateDefect::UnsupportedKey)?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // A key type whose public half rustls cannot derive is taken on trust.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {
            Ok(Arc::new(certified))
        }
        Err(_) => Err(CertificateDefect::KeyMismatch),
    }
}

/// The usable certificates of one table, by the names they serve.
#[derive(Default)]
pub(crate) struct CertStore {
    exact: HashMap<Box<str>, Arc<CertifiedKey>>,
    /// `*.parent` entries, by `parent`.
    wildcard: HashMap<Box<str>, Arc<CertifiedKey>>,
}

impl CertStore {
    /// Adds the certificate for `host` (`name` or `*.parent`, already normalised).
    pub fn insert(&mut self, host: &str, key: Arc<CertifiedKey>) {
        match host.strip_prefix("*.") {
            Some(parent) => self.wildcard.insert(parent.into(), key),
            None => self.exact.insert(host.into(), key),
        };
    }

    /// The certificate that serves `name` (lower-case, no port).
    pub fn find(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        self.exact.get(name).or_else(|| {
            let (_, parent) = name.split_once('.')?;
            self.wildcard.get(parent)
        })
    }

    /// Whether some certificate serves `name`.
    pub fn covers(&self, name: &str) -> bool {
        self.find(name).is_some()
    }
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<String> = self.exact.keys().map(|k| k.to_string()).collect();
        names.extend(self.wildcard.keys().map(|k| format!("*.{k}")));
        names.sort();
        f.debug_struct("CertStore").field("names", &names).finish()
    }
}

/// Picks the certificate for a handshake from the table in force when the handshake
/// starts.
pub(crate) struct SniResolver {
    pub table: Arc<ArcSwap<Table>>,
}

impl fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SniResolver").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // Unknown names come from scanners by the thousand: debug, not warn.
        let Some(name) = client_hello.server_name() else {
            tracing::debug!("TLS handshake without a server name refused");
            return None;
        };
        let found = self.table.load().certificates.find(name).cloned();
        if found.is_none() {
            tracing::debug!(
                server_name = name,
                "no certificate for the server name; handshake refused"
            );
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> CryptoProvider {
        rustls::crypto::ring::default_provider()
    }

    fn certificate_for(names: &[&str]) -> Certificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        Certificate {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    #[test]
    fn a_certificate_and_its_key_make_a_certified_key() {
        let certificate = certificate_for(&["app.example.com"]);
        let key = certified_key(&certificate, &provider()).unwrap();
        assert_eq!(key.cert.len(), 1);
    }

    #[test]
    fn each_defect_is_named() {
        let good = certificate_for(&["app.example.com"]);
        let other = certificate_for(&["other.example.com"]);
        let cases = [
            (
                Certificate {
                    chain_pem: String::new(),
                    key_pem: good.key_pem.clone(),
                },
                CertificateDefect::NoCertificate,
            ),
            (
                Certificate {
                    chain_pem: "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"
                        .into(),
                    key_pem: good.key_pem.clone(),
                },
                CertificateDefect::ChainNotPem,
            ),
            (
                Certificate {
                    chain_pem: good.chain_pem.clone(),
                    key_pem: "not a key".into(),
                },
                CertificateDefect::NoKey,
            ),
            (
                Certificate {
                    chain_pem: good.chain_pem.clone(),
                    key_pem: other.key_pem.clone(),
                },
                CertificateDefect::KeyMismatch,
            ),
        ];
        for (certificate, defect) in cases {
            assert_eq!(
                certified_key(&certificate, &provider()).err(),
                Some(defect.clone()),
                "{defect}"
            );
        }
    }

    #[test]
    fn a_wildcard_serves_one_label_below_its_parent_and_exact_names_win() {
        let wildcard = certified_key(&certificate_for(&["*.example.com"]), &provider()).unwrap();
        let exact = certified_key(&certificate_for(&["app.example.com"]), &provider()).unwrap();
        let mut store = CertStore::default();
        store.insert("*.example.com", wildcard.clone());
        store.insert("app.example.com", exact.clone());

        assert!(Arc::ptr_eq(store.find("app.example.com").unwrap(), &exact));
        assert!(Arc::ptr_eq(
            store.find("web.example.com").unwrap(),
            &wildcard
        ));
        assert!(store.find("example.com").is_none());
        assert!(store.find("a.b.example.com").is_none());
        assert!(store.find("example.org").is_none());
        assert!(!store.covers("localhost"));
    }
}
