//! The compiled route table: what each request and connection reads.
//!
//! [`compile`] turns the agent's [`Routes`] into a [`Table`] once per
//! [`Proxy::set_routes`](crate::Proxy::set_routes): host keys normalised, certificates parsed
//! into rustls keys (an unchanged certificate is not parsed again), every route's backends
//! given their URI authority, and every route its counters. The proxy keeps the table in an
//! `ArcSwap`: a request loads it once, takes the `Arc` of its route and lets go of the
//! table, so a swap never waits for a request and a request never sees half a table.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hyper::body::Bytes;
use hyper::http::uri::Authority;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;

use crate::certs::{CertStore, certified_key};
use crate::error::{CertificateDefect, RouteProblem};
use crate::routes::{Certificate, Route, Routes};
use crate::routing::host_key;
use crate::stats::{RouteCounters, StatsRegistry};

/// One route table, ready to serve.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub http: HashMap<Box<str>, Arc<Upstream>>,
    pub catch_all: Option<Arc<Upstream>>,
    pub tcp: HashMap<u16, Arc<Upstream>>,
    pub certificates: CertStore,
    pub challenges: HashMap<Box<str>, Bytes>,
}

/// A route with what forwarding to it needs.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// `app/service`.
    pub name: String,
    pub backends: Box<[Backend]>,
    /// Round robin: the index the next request starts at, modulo the backends.
    next: AtomicUsize,
    pub counters: Arc<RouteCounters>,
}

/// One ready replica.
#[derive(Debug)]
pub(crate) struct Backend {
    pub addr: SocketAddr,
    /// `addr` as a URI authority, made once.
    pub authority: Authority,
}

impl Upstream {
    fn new(route: &Route, counters: Arc<RouteCounters>) -> Upstream {
        let backends = route
            .backends
            .iter()
            .filter_map(|&addr| {
                let authority = Authority::try_from(addr.to_string()).ok()?;
                Some(Backend { addr, authority })
            })
            .collect();
        Upstream {
            name: route.name.clone(),
            backends,
            next: AtomicUsize::new(0),
            counters,
        }
    }

    /// The backends in the order one request (or connection) tries them: each once,
    /// starting one further along than the previous call did (round robin).
    pub fn in_turn(&self) -> impl ExactSizeIterator<Item = &Backend> {
        let n = self.backends.len();
        let start = if n == 0 {
            0
        } else {
            self.next.fetch_add(1, Ordering::Relaxed) % n
        };
        (0..n).map(move |i| &self.backends[(start + i) % n])
    }
}

/// The certificates parsed for the previous table, by host, so an unchanged one is reused.
#[derive(Debug, Default)]
pub(crate) struct CertCache {
    by_host: HashMap<String, (Certificate, Result<Arc<CertifiedKey>, CertificateDefect>)>,
}

/// Compiles `routes`. What cannot be used is left out and listed; the rest is the table.
pub(crate) fn compile(
    routes: &Routes,
    cache: &mut CertCache,
    registry: &StatsRegistry,
    provider: &CryptoProvider,
) -> (Table, Vec<RouteProblem>) {
    let mut problems = Vec::new();
    let names: HashSet<String> = routes
        .http
        .values()
        .chain(&routes.catch_all)
        .chain(routes.tcp.values())
        .map(|route| route.name.clone())
        .collect();
    let counters = registry.retain(names);
    let upstream = |route: &Route| Arc::new(Upstream::new(route, counters[&route.name].clone()));

    let mut certificates = CertStore::default();
    let mut parsed = HashMap::with_capacity(routes.certificates.len());
    for (key, certificate) in &routes.certificates {
        let Some(host) = host_key(key, true) else {
            problems.push(RouteProblem::InvalidHost {
                table: "certificates",
                host: key.clone(),
            });
            continue;
        };
        let result = match cache.by_host.remove(&host) {
            Some((previous, result)) if previous == *certificate => result,
            _ => certified_key(certificate, provider),
        };
        match &result {
            Ok(key) => certificates.insert(&host, key.clone()),
            Err(defect) => problems.push(RouteProblem::BadCertificate {
                host: host.clone(),
                defect: defect.clone(),
            }),
        }
        parsed.insert(host, (certificate.clone(), result));
    }
    cache.by_host = parsed;

    let mut http = HashMap::with_capacity(routes.http.len());
    for (key, route) in &routes.http {
        match host_key(key, false) {
            Some(host) => {
                http.insert(host.into_boxed_str(), upstream(route));
            }
            None => problems.push(RouteProblem::InvalidHost {
                table: "http",
                host: key.clone(),
            }),
        }
    }

    let mut tcp = HashMap::with_capacity(routes.tcp.len());
    for (&port, route) in &routes.tcp {
        if port == 0 {
            problems.push(RouteProblem::PortZero {
                route: route.name.clone(),
            });
        } else {
            tcp.insert(port, upstream(route));
        }
    }

    let table = Table {
        http,
        catch_all: routes.catch_all.as_ref().map(upstream),
        tcp,
        certificates,
        challenges: routes
            .challenges
            .iter()
            .map(|(token, answer)| (token.as_str().into(), Bytes::from(answer.clone())))
            .collect(),
    };
    (table, problems)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn round_robin_starts_one_further_each_time_and_tries_each_backend_once() {
        let counters = Arc::default();
        let upstream = Upstream::new(&Route::new("a/web", [addr(1), addr(2), addr(3)]), counters);
        let orders: Vec<Vec<u16>> = (0..4)
            .map(|_| upstream.in_turn().map(|b| b.addr.port()).collect())
            .collect();
        assert_eq!(
            orders,
            [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]].map(Vec::from)
        );
        let empty = Upstream::new(&Route::new("a/none", []), Arc::default());
        assert_eq!(empty.in_turn().len(), 0);
    }

    #[test]
    fn bad_parts_are_listed_and_left_out_while_the_rest_compiles() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["good.example.com".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let good = Certificate {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        let bad = Certificate {
            chain_pem: "garbage".into(),
            key_pem: "garbage".into(),
        };
        let routes = Routes {
            http: BTreeMap::from([
                ("Good.Example.com".into(), Route::new("a/good", [addr(1)])),
                ("bad.example.com:443".into(), Route::new("a/bad", [addr(2)])),
            ]),
            catch_all: None,
            tcp: BTreeMap::from([
                (0, Route::new("a/zero", [addr(3)])),
                (5432, Route::new("a/db", [addr(4)])),
            ]),
            certificates: BTreeMap::from([
                ("good.example.com".into(), good.clone()),
                ("broken.example.com".into(), bad),
            ]),
            challenges: BTreeMap::new(),
        };
        let provider = rustls::crypto::ring::default_provider();
        let mut cache = CertCache::default();
        let registry = StatsRegistry::default();
        let (table, problems) = compile(&routes, &mut cache, &registry, &provider);
        let described: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            described,
            [
                "the certificate for broken.example.com cannot be used: the chain holds no PEM certificate",
                "http entry \"bad.example.com:443\" is not a host name (lower-case, no port)",
                "TCP port 0 cannot be served (route a/zero)",
            ]
        );
        assert!(table.http.contains_key("good.example.com"));
        assert_eq!(table.http.len(), 1);
        assert_eq!(table.tcp.keys().collect::<Vec<_>>(), [&5432]);
        assert!(table.certificates.covers("good.example.com"));
        assert!(!table.certificates.covers("broken.example.com"));

        // The same certificate again is reused, not parsed again.
        let first = table.certificates.find("good.example.com").unwrap().clone();
        let (again, _) = compile(&routes, &mut cache, &registry, &provider);
        assert!(Arc::ptr_eq(
            again.certificates.find("good.example.com").unwrap(),
            &first
        ));
    }
}
