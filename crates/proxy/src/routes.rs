//! The route table as the agent hands it over: plain data, replaced whole by
//! [`Proxy::set_routes`](crate::Proxy::set_routes).
//!
//! Nothing here is checked or compiled; [`crate::table`] does that when the table is set.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

/// The whole route table of one ingress node. Every call to
/// [`Proxy::set_routes`](crate::Proxy::set_routes) replaces the previous table entirely.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// Domain routes, by host name: lower-case, no port, no trailing dot (upper case and a
    /// trailing dot are normalised away; a port makes the entry invalid). Served on the HTTP
    /// listener and, for hosts with a certificate, on the HTTPS listener.
    pub http: BTreeMap<String, Route>,
    /// The plain-HTTP catch-all: every request on the HTTP listener whose host has no domain
    /// route (an app's `public = true`). Never served over HTTPS.
    pub catch_all: Option<Route>,
    /// Raw TCP forwarding, by public port: no HTTP and no TLS, bytes in both directions.
    pub tcp: BTreeMap<u16, Route>,
    /// Certificates for HTTPS, by host name as in [`Routes::http`]; a key `*.example.com`
    /// covers every name one label below `example.com`.
    pub certificates: BTreeMap<String, Certificate>,
    /// ACME HTTP-01 challenges: token -> key authorization, answered on the HTTP listener for
    /// any host at `/.well-known/acme-challenge/<token>`.
    pub challenges: BTreeMap<String, String>,
}

/// Where the requests (or connections) of one route go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// `app/service`: named in log lines, statistics and the pages the proxy answers itself.
    pub name: String,
    /// The route's ready replicas. Empty: requests are answered `503`, TCP connections closed.
    pub backends: Vec<SocketAddr>,
}

impl Route {
    /// A route named `name` to `backends`.
    pub fn new(name: impl Into<String>, backends: impl IntoIterator<Item = SocketAddr>) -> Route {
        Route {
            name: name.into(),
            backends: backends.into_iter().collect(),
        }
    }
}

/// A certificate chain and its private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The leaf certificate first, then its intermediates.
    pub chain_pem: String,
    /// The leaf's private key: PKCS#8, SEC1 (EC) or PKCS#1 (RSA).
    pub key_pem: String,
}

/// Shows the chain's length, never the key.
impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("chain_pem", &format_args!("{} bytes", self.chain_pem.len()))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificates_debug_form_never_shows_the_key() {
        let certificate = Certificate {
            chain_pem: "-----BEGIN CERTIFICATE-----".into(),
            key_pem: "-----BEGIN PRIVATE KEY-----secret".into(),
        };
        let shown = format!("{certificate:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
