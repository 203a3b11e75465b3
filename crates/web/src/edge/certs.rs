//! The edge's certificates, picked by the name a browser asks for (SNI).
//!
//! An org's endpoints all sit one label under `<org>.<domain>`, so one wildcard certificate
//! `*.<org>.<domain>` serves them all; the zone's own pages use `<domain>` (with
//! `*.<domain>`). Each is signed by the zone's CA the first time a handshake asks for it,
//! kept, and signed again when a third of its lifetime is left. Names outside the domain
//! get the domain's certificate (and a browser's name check then fails, as it should).
//! The cache is bounded: a flood of made-up org names cannot grow it without end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use orc_tls::ZoneCa;
use orc_tls::rustls::server::{ClientHello, ResolvesServerCert};
use orc_tls::rustls::sign::CertifiedKey;

/// Certificates kept at most; past that, every org certificate is dropped and signed
/// again when asked for.
const MAX_CACHED: usize = 1024;

/// Signs and keeps the edge's certificates.
pub struct EdgeCerts {
    ca: Arc<ZoneCa>,
    domain: String,
    lifetime: Duration,
    cache: Mutex<BTreeMap<String, (Arc<CertifiedKey>, SystemTime)>>,
}

impl std::fmt::Debug for EdgeCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeCerts")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl EdgeCerts {
    /// Certificates under `domain` signed by `ca`, each valid for `lifetime`.
    pub fn new(ca: Arc<ZoneCa>, domain: &str, lifetime: Duration) -> EdgeCerts {
        EdgeCerts {
            ca,
            domain: domain.to_ascii_lowercase(),
            lifetime,
            cache: Mutex::new(BTreeMap::new()),
        }
    }

    /// The certificate's scope for a requested name: `<org>.<domain>` for a name two or
    /// more labels under the domain, else the domain itself.
    pub fn scope_of(&self, server_name: Option<&str>) -> String {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.domain.clone();
        };
        let Some(under) = name.strip_suffix(&format!(".{}", self.domain)) else {
            return self.domain.clone();
        };
        match under.rsplit_once('.') {
            Some((_, org)) if is_label(org) => format!("{org}.{}", self.domain),
            _ => self.domain.clone(),
        }
    }

    /// The names a certificate of `scope` carries.
    fn names_of(&self, scope: &str) -> Vec<String> {
        if scope == self.domain {
            vec![self.domain.clone(), format!("*.{}", self.domain)]
        } else {
            vec![format!("*.{scope}")]
        }
    }

    /// The TLS config of the edge's listener: these certificates, HTTP/2 and HTTP/1.1.
    pub fn server_config(self: Arc<Self>) -> Arc<orc_tls::rustls::ServerConfig> {
        orc_tls::server_config_with_resolver(self, orc_tls::ALPN_HTTP)
    }

    /// The certificate for `scope`, signed now if none is kept or the kept one is old.
    pub fn certificate(&self, scope: &str) -> Option<Arc<CertifiedKey>> {
        let now = SystemTime::now();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((key, not_after)) = cache.get(scope)
            && not_after.duration_since(now).unwrap_or_default() > self.lifetime / 3
        {
            return Some(key.clone());
        }
        let identity = match self.ca.issue_server(&self.names_of(scope), self.lifetime) {
            Ok(identity) => identity,
            Err(e) => {
                tracing::warn!(scope, error = %e, "the edge could not sign a certificate");
                return None;
            }
        };
        let (key, not_after) = orc_tls::certified(identity).ok()?;
        if cache.len() >= MAX_CACHED {
            let domain = self.domain.clone();
            cache.retain(|scope, _| *scope == domain);
        }
        cache.insert(scope.to_string(), (key.clone(), not_after));
        Some(key)
    }
}

impl ResolvesServerCert for EdgeCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.certificate(&self.scope_of(hello.server_name()))
    }
}

/// A DNS label: 1–63 lower-case letters, digits and `-`, not at either end.
fn is_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wildcard_per_org_and_the_domain_for_everything_else() {
        let ca = Arc::new(ZoneCa::generate().unwrap());
        let certs = EdgeCerts::new(ca, "orc.localhost", Duration::from_secs(3600));
        assert_eq!(
            certs.scope_of(Some("sys--partner.sys.orc.localhost")),
            "sys.orc.localhost"
        );
        assert_eq!(
            certs.scope_of(Some("Web--API-1.Acme.orc.localhost")),
            "acme.orc.localhost"
        );
        assert_eq!(certs.scope_of(Some("orc.localhost")), "orc.localhost");
        assert_eq!(certs.scope_of(Some("acme.orc.localhost")), "orc.localhost");
        assert_eq!(certs.scope_of(Some("example.com")), "orc.localhost");
        assert_eq!(certs.scope_of(Some("a.b_c.orc.localhost")), "orc.localhost");
        assert_eq!(certs.scope_of(None), "orc.localhost");
        assert_eq!(certs.names_of("sys.orc.localhost"), ["*.sys.orc.localhost"]);
        assert_eq!(
            certs.names_of("orc.localhost"),
            ["orc.localhost", "*.orc.localhost"]
        );
        let first = certs.certificate("sys.orc.localhost").unwrap();
        let again = certs.certificate("sys.orc.localhost").unwrap();
        assert!(Arc::ptr_eq(&first, &again), "kept, not signed again");
        let other = certs.certificate("acme.orc.localhost").unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
    }
}
