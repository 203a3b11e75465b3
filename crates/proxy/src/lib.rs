//! The ingress proxy: what lets the public internet reach tenants' containers through an
//! ingress node. The node's agent receives a route table from the zone, hands it to a
//! [`Proxy`] with [`Proxy::set_routes`], and the proxy serves it until the next one.
//!
//! # Listeners
//!
//! - **HTTP** ([`ProxyConfig::http_addr`], port 80 in production): ACME HTTP-01 challenges,
//!   redirects to HTTPS, domain routes that have no certificate yet, and the catch-all.
//! - **HTTPS** ([`ProxyConfig::https_addr`], port 443): domain routes. rustls picks the
//!   certificate by SNI (exact name, else a `*.parent` wildcard one label up); ALPN offers
//!   `h2` and `http/1.1`, and both HTTP versions are served. A server name without a
//!   certificate fails the handshake (logged at debug level: scanners cause many).
//! - **TCP**: one listener per port of [`Routes::tcp`] on [`ProxyConfig::tcp_bind_ip`],
//!   opened and closed as tables come and go; bytes pass through untouched.
//!
//! # Routing rules
//!
//! On the HTTP listener, in order:
//! 1. `GET` or `HEAD /.well-known/acme-challenge/<token>`, whatever the host: the token's
//!    key authorization from [`Routes::challenges`] (`text/plain`), or `404`.
//! 2. A host with a domain route ([`Routes::http`]; host compared without port, in lower
//!    case): a `308` to `https://host/path?query` when a certificate covers the host; when
//!    none does (not issued yet, or unusable), the route is served over plain HTTP, so a
//!    domain works from the moment it is routed rather than from the moment its
//!    certificate arrives.
//! 3. Any other host: the catch-all ([`Routes::catch_all`]) when there is one, else `404`
//!    with the page `no route for HOST`. Domain routes always win over the catch-all.
//!
//! On the HTTPS listener: the domain route of the request's `Host` (HTTP/1) or
//! `:authority` (HTTP/2), else `404`. The route follows the host the request names, not
//! the TLS server name, so HTTP/2 connections that browsers share between names of one
//! wildcard certificate reach the right route.
//!
//! # Forwarding
//!
//! HTTP and HTTPS are served by [`ProxyConfig::workers`] threads (one per core by default),
//! each with its own runtime, its own listening sockets on the same ports (`SO_REUSEPORT`)
//! and its own pool of backend connections, so a request stays on the thread that
//! accepted its connection.
//!
//! HTTP/1.1 to the route's backends through the thread's pooled client; bodies stream both ways,
//! whatever their size. Round robin per route; a backend that cannot be connected to is
//! skipped (the request was never sent, so any method may go on to the next); all fail:
//! `502 no replica of APP/SERVICE answered`; no backends: `503 APP/SERVICE has no ready
//! replica`; no answer head within [`ProxyConfig::response_timeout`]: `504`. The backend
//! sees `Host` as the client sent it, `X-Forwarded-For` and `X-Real-IP` set to the client
//! connection's address (a client's own claims are dropped, never appended to: the
//! ingress is the edge of the trust boundary), `X-Forwarded-Proto` and
//! `X-Forwarded-Host`; hop-by-hop headers are stripped both ways. WebSockets and other
//! upgrades from HTTP/1.1 clients are forwarded, and after the backend's `101` the two
//! connections are joined byte for byte. HTTP/2 clients cannot upgrade (extended CONNECT
//! is not offered), so browsers use HTTP/1.1 for WebSockets.
//!
//! # Tables
//!
//! A table is replaced whole and atomically: each request and each new connection reads
//! the table in force when it arrives (a keep-alive connection reads it again for every
//! request), and whatever was under way finishes with the backend it had. A backend that
//! leaves the table gets no new requests; its requests in flight finish. Parts of a table
//! that cannot be used (a bad certificate, a port already taken, a key that is not a host
//! name) are reported by [`Proxy::set_routes`] and logged, and the rest serves.
//!
//! # Limits
//!
//! At most [`ProxyConfig::max_connections`] client connections (default 10,000) over all
//! listeners; beyond, accepting waits. Request heads are capped by hyper's defaults
//! (HTTP/1: about 400 KiB of buffer and 100 headers; HTTP/2: 16 KiB of header list).
//! Bodies have no size limit: they stream. TLS handshakes and HTTP/1 request heads have
//! timeouts; a backend has [`ProxyConfig::response_timeout`] to start answering and no
//! limit after that.
//!
//! # Observability
//!
//! `tracing`: info when a listener opens or closes, warn for the parts of a table left
//! out and for a full connection limit, debug per request and per connection. Counters per
//! route (requests, the proxy's own `5xx`, TCP connections and bytes) in
//! [`Proxy::stats`].
//!
//! # What it never does
//!
//! It never terminates TLS for TCP routes, speaks HTTP/2 or TLS to backends, buffers a
//! whole body, retries a request that reached a backend, caches, compresses, rewrites
//! paths or bodies, trusts a client's forwarding headers, serves the catch-all or the
//! challenges over HTTPS, or serves a default certificate. It holds no state but the
//! table and its counters, and it reads no files: certificates arrive in the table.
//!
//! # Shape
//!
//! | module | what |
//! |---|---|
//! | `routes` | the table as the agent hands it over (plain data) |
//! | `table` | the compiled table: normalised keys, parsed certificates, counters |
//! | `routing` | which way a request goes (pure) |
//! | `headers` | what changes in headers, each way (pure) |
//! | `certs` | PEM to rustls keys, lookup by name, the SNI resolver |
//! | `forward` | sending a request to the backends and the answer back; upgrades |
//! | `http`, `tcp` | serving a client connection of each kind |
//! | `listen`, `lifecycle` | the accept loop and connection limit; draining and closing |
//! | `pages` | every answer the proxy writes itself |
//! | `stats`, `error` | counters; what can go wrong |

mod body;
mod certs;
mod error;
mod forward;
mod headers;
mod http;
mod lifecycle;
mod listen;
mod pages;
mod proxy;
mod routes;
mod routing;
mod stats;
mod table;
mod tcp;

pub use error::{CertificateDefect, PartlyApplied, RouteProblem, StartError};
pub use proxy::{Proxy, ProxyConfig, ShutdownReport};
pub use routes::{Certificate, Route, Routes};
pub use stats::{ProxyStats, RouteStats};
