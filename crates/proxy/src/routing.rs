//! Which way a request goes, decided from the table, the listener, the method, the path
//! and the host alone: no I/O.
//!
//! On the HTTP listener, in order:
//! 1. `GET`/`HEAD /.well-known/acme-challenge/<token>`, for any host: the token's key
//!    authorization, or `404` for an unknown token;
//! 2. a host with a domain route: a `308` to `https://host/path?query` when a certificate
//!    covers the host, else the route itself over plain HTTP (so a domain works before its
//!    certificate is issued, and keeps working if its certificate is unusable);
//! 3. any other host, or none: the catch-all when there is one, else `404`.
//!
//! On the HTTPS listener: the host's domain route, else `404`. The catch-all and the
//! challenges are plain-HTTP things and never answer there.
//!
//! `CONNECT` is refused on both (`405`): an ingress tunnels for no one.

use std::borrow::Cow;
use std::sync::Arc;

use hyper::Method;
use hyper::body::Bytes;

use crate::table::{Table, Upstream};

/// The path under which ACME HTTP-01 challenges are asked for.
pub(crate) const ACME_CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// The listener a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Decision<'t> {
    /// An ACME HTTP-01 challenge: its key authorization, or `None` for an unknown token.
    Challenge(Option<&'t Bytes>),
    /// A domain route with a certificate, asked for over plain HTTP.
    RedirectToHttps,
    /// Forward to this route's backends.
    Forward(&'t Arc<Upstream>),
    /// No route for the host.
    NoRoute,
    /// `CONNECT`: an ingress is no forward proxy.
    Connect,
}

/// Decides a request's way. `host` is normalised ([`host_of`]).
pub(crate) fn decide<'t>(
    table: &'t Table,
    scheme: Scheme,
    method: &Method,
    path: &str,
    host: Option<&str>,
) -> Decision<'t> {
    if *method == Method::CONNECT {
        return Decision::Connect;
    }
    let route = host.and_then(|host| table.http.get(host).map(|route| (host, route)));
    match scheme {
        Scheme::Http => {
            if (*method == Method::GET || *method == Method::HEAD)
                && let Some(token) = path.strip_prefix(ACME_CHALLENGE_PREFIX)
            {
                return Decision::Challenge(table.challenges.get(token));
            }
            match (route, &table.catch_all) {
                (Some((host, _)), _) if table.certificates.covers(host) => {
                    Decision::RedirectToHttps
                }
                (Some((_, route)), _) => Decision::Forward(route),
                (None, Some(catch_all)) => Decision::Forward(catch_all),
                (None, None) => Decision::NoRoute,
            }
        }
        Scheme::Https => route.map_or(Decision::NoRoute, |(_, route)| Decision::Forward(route)),
    }
}

/// A request's host as the table keys it: without port and trailing dot, lower-case.
/// IPv6 literals keep their brackets (`[::1]`).
pub(crate) fn host_of(raw: &str) -> Cow<'_, str> {
    let host = if raw.starts_with('[') {
        raw.find(']').map_or(raw, |end| &raw[..=end])
    } else {
        match raw.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => raw,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// A table's host key, normalised (lower-case, no trailing dot), or `None` when it is not
/// a host name. `*.parent` is accepted when `wildcard` is.
pub(crate) fn host_key(key: &str, wildcard: bool) -> Option<String> {
    let key = key.strip_suffix('.').unwrap_or(key).to_ascii_lowercase();
    let name = match key.strip_prefix("*.") {
        Some(parent) if wildcard => parent,
        _ => &key,
    };
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    valid.then_some(key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::routes::{Certificate, Route, Routes};
    use crate::stats::StatsRegistry;
    use crate::table::{CertCache, compile};

    fn certificate_for(name: &str) -> Certificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        Certificate {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    fn table(catch_all: bool) -> Table {
        let addr = "127.0.0.1:9".parse().unwrap();
        let routes = Routes {
            http: BTreeMap::from([
                ("plain.example.com".into(), Route::new("a/plain", [addr])),
                ("secure.example.com".into(), Route::new("a/secure", [addr])),
            ]),
            catch_all: catch_all.then(|| Route::new("b/public", [addr])),
            tcp: BTreeMap::new(),
            certificates: BTreeMap::from([(
                "secure.example.com".into(),
                certificate_for("secure.example.com"),
            )]),
            challenges: BTreeMap::from([("tok".into(), "tok.thumb".into())]),
        };
        let (table, problems) = compile(
            &routes,
            &mut CertCache::default(),
            &StatsRegistry::default(),
            &rustls::crypto::ring::default_provider(),
        );
        assert!(problems.is_empty(), "{problems:?}");
        table
    }

    fn route_name(decision: Decision<'_>) -> String {
        match decision {
            Decision::Forward(route) => route.name.clone(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn plain_http_goes_by_host_then_to_the_catch_all() {
        let with = table(true);
        let without = table(false);
        let get = &Method::GET;
        let http = Scheme::Http;
        assert_eq!(
            route_name(decide(&with, http, get, "/", Some("plain.example.com"))),
            "a/plain"
        );
        assert_eq!(
            route_name(decide(&with, http, get, "/", Some("other.example.com"))),
            "b/public"
        );
        assert_eq!(route_name(decide(&with, http, get, "/", None)), "b/public");
        assert!(matches!(
            decide(&without, http, get, "/", Some("other.example.com")),
            Decision::NoRoute
        ));
        assert!(matches!(
            decide(&with, http, get, "/x", Some("secure.example.com")),
            Decision::RedirectToHttps
        ));
    }

    #[test]
    fn challenges_answer_on_plain_http_for_any_host_and_only_for_get_and_head() {
        let table = table(true);
        let path = "/.well-known/acme-challenge/tok";
        for host in [Some("secure.example.com"), Some("nobody.example"), None] {
            for method in [Method::GET, Method::HEAD] {
                match decide(&table, Scheme::Http, &method, path, host) {
                    Decision::Challenge(Some(answer)) => assert_eq!(answer, "tok.thumb"),
                    other => panic!("{host:?} {method}: {other:?}"),
                }
            }
        }
        assert!(matches!(
            decide(
                &table,
                Scheme::Http,
                &Method::GET,
                "/.well-known/acme-challenge/nope",
                None
            ),
            Decision::Challenge(None)
        ));
        assert_eq!(
            route_name(decide(&table, Scheme::Http, &Method::POST, path, None)),
            "b/public"
        );
        assert!(matches!(
            decide(
                &table,
                Scheme::Https,
                &Method::GET,
                path,
                Some("nobody.example")
            ),
            Decision::NoRoute
        ));
    }

    #[test]
    fn https_serves_domain_routes_only() {
        let table = table(true);
        let get = &Method::GET;
        assert_eq!(
            route_name(decide(
                &table,
                Scheme::Https,
                get,
                "/",
                Some("secure.example.com")
            )),
            "a/secure"
        );
        assert_eq!(
            route_name(decide(
                &table,
                Scheme::Https,
                get,
                "/",
                Some("plain.example.com")
            )),
            "a/plain"
        );
        assert!(matches!(
            decide(&table, Scheme::Https, get, "/", Some("other.example.com")),
            Decision::NoRoute
        ));
    }

    #[test]
    fn connect_is_refused_whatever_the_host() {
        let table = table(true);
        for scheme in [Scheme::Http, Scheme::Https] {
            assert!(matches!(
                decide(
                    &table,
                    scheme,
                    &Method::CONNECT,
                    "",
                    Some("plain.example.com")
                ),
                Decision::Connect
            ));
        }
    }

    #[test]
    fn hosts_lose_port_trailing_dot_and_case() {
        assert_eq!(host_of("App.Example.com:8080"), "app.example.com");
        assert_eq!(host_of("app.example.com."), "app.example.com");
        assert_eq!(host_of("app.example.com"), "app.example.com");
        assert!(matches!(host_of("app.example.com"), Cow::Borrowed(_)));
        assert_eq!(host_of("[::1]:80"), "[::1]");
        assert_eq!(host_of("203.0.113.5:80"), "203.0.113.5");
    }

    #[test]
    fn table_keys_must_be_host_names() {
        assert_eq!(
            host_key("App.Example.COM.", false).as_deref(),
            Some("app.example.com")
        );
        assert_eq!(
            host_key("*.example.com", true).as_deref(),
            Some("*.example.com")
        );
        for bad in [
            "",
            "app.example.com:443",
            "a b",
            "a..b",
            "app/x",
            "*.example.com",
        ] {
            assert_eq!(host_key(bad, false), None, "{bad:?}");
        }
        assert_eq!(host_key("*", true), None);
        assert_eq!(host_key("a.*.example.com", true), None);
    }
}
