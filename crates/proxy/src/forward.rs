//! Forwarding a request to a route's backends, and the answer back.
//!
//! The backends speak HTTP/1.1, reached through one pooled client (TCP_NODELAY, a connect
//! timeout, idle connections closed after a while). Bodies stream both ways; nothing is
//! collected. Headers change as [`crate::headers`] says.
//!
//! Backend choice: round robin over the route's backends. When the connection to a
//! backend fails (refused, unreachable, connect timeout), the request was never sent, so
//! it goes to the next backend whatever its method, until each backend was tried once;
//! then `502`. A failure after the request went out is a `502` at once: it may have had
//! an effect. A route without backends is `503`. No answer head within the response
//! timeout (counted from the first attempt) is `504`.
//!
//! Upgrades (WebSocket and any other `Upgrade`) from HTTP/1.1 clients: the upgrade request
//! goes to the backend; on its `101` the two upgraded connections are joined by a tunnel
//! task that copies bytes both ways until either side closes. HTTP/2 clients cannot ask
//! for an upgrade, and the listeners do not offer extended CONNECT (RFC 8441), so browsers
//! open their WebSockets over HTTP/1.1.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::http::uri::{self, PathAndQuery};
use hyper::upgrade::OnUpgrade;
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::time::Instant;

use crate::ProxyConfig;
use crate::body::{AttemptBody, ProxyBody, ResendableBody, page};
use crate::headers::{self, Origin};
use crate::listen::ClientConn;
use crate::pages;
use crate::stats::RouteCounters;
use crate::table::{Backend, Upstream};

/// Sends requests to backends.
#[derive(Debug)]
pub(crate) struct Forwarder {
    client: Client<HttpConnector, AttemptBody>,
    response_timeout: Duration,
}

impl Forwarder {
    pub fn new(config: &ProxyConfig) -> Forwarder {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(config.connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_backend)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Forwarder {
            client,
            response_timeout: config.response_timeout,
        }
    }

    /// Forwards `request` to `upstream` and returns the answer for the client.
    pub async fn forward(
        &self,
        conn: &Arc<ClientConn>,
        upstream: &Upstream,
        mut request: Request<Incoming>,
    ) -> Response<ProxyBody> {
        let counters = &upstream.counters;
        RouteCounters::add(&counters.requests, 1);
        if upstream.backends.is_empty() {
            RouteCounters::add(&counters.proxy_errors, 1);
            tracing::debug!(route = %upstream.name, "no ready replica");
            return pages::no_ready_replica(&upstream.name);
        }
        let upgrade =
            request.version() == Version::HTTP_11 && headers::asks_upgrade(request.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        let authority = match parts.uri.authority() {
            Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
            None => parts.headers.get(header::HOST).cloned(),
        };
        headers::to_backend(
            &mut parts.headers,
            Origin {
                client_ip: &conn.client_ip,
                proto: conn.scheme.as_str(),
                authority,
            },
            upgrade,
        );
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let body = ResendableBody::new(body);
        let deadline = Instant::now() + self.response_timeout;
        let backends = upstream.in_turn();
        let last = backends.len() - 1;
        for (attempt, backend) in backends.enumerate() {
            let Some(uri) = backend_uri(backend, &path) else {
                return pages::bad_request();
            };
            // The last attempt takes the headers; the others send a copy.
            let headers = if attempt == last {
                std::mem::take(&mut parts.headers)
            } else {
                parts.headers.clone()
            };
            let mut outgoing = Request::new(body.attempt());
            *outgoing.method_mut() = parts.method.clone();
            *outgoing.uri_mut() = uri;
            *outgoing.version_mut() = Version::HTTP_11;
            *outgoing.headers_mut() = headers;
            match tokio::time::timeout_at(deadline, self.client.request(outgoing)).await {
                Ok(Ok(answer)) => {
                    tracing::debug!(
                        route = %upstream.name,
                        backend = %backend.addr,
                        method = %parts.method,
                        path = %path,
                        status = answer.status().as_u16(),
                        "forwarded"
                    );
                    return answer_client(conn, upstream, answer, client_upgrade);
                }
                Ok(Err(e)) if e.is_connect() && body.unread() => {
                    tracing::debug!(route = %upstream.name, backend = %backend.addr, error = %e,
                        "connecting to a replica failed; trying the next");
                }
                Ok(Err(e)) => {
                    tracing::debug!(route = %upstream.name, backend = %backend.addr, error = %e,
                        "a replica failed the request");
                    break;
                }
                Err(_) => {
                    tracing::debug!(route = %upstream.name, backend = %backend.addr,
                        "no answer in time");
                    RouteCounters::add(&counters.proxy_errors, 1);
                    return pages::no_answer_in_time(&upstream.name, self.response_timeout);
                }
            }
        }
        RouteCounters::add(&counters.proxy_errors, 1);
        pages::no_replica_answered(&upstream.name)
    }
}

fn backend_uri(backend: &Backend, path: &PathAndQuery) -> Option<Uri> {
    let mut parts = uri::Parts::default();
    parts.scheme = Some(uri::Scheme::HTTP);
    parts.authority = Some(backend.authority.clone());
    parts.path_and_query = Some(path.clone());
    Uri::from_parts(parts).ok()
}

/// The backend's answer as the client gets it; a `101` starts the tunnel.
fn answer_client(
    conn: &Arc<ClientConn>,
    upstream: &Upstream,
    mut answer: Response<Incoming>,
    client_upgrade: Option<OnUpgrade>,
) -> Response<ProxyBody> {
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (mut parts, body) = answer.into_parts();
        headers::to_client(&mut parts.headers, false);
        return Response::from_parts(parts, ProxyBody::Left(body));
    }
    let Some(client_upgrade) = client_upgrade else {
        tracing::debug!(route = %upstream.name, "a replica switched protocols unasked");
        RouteCounters::add(&upstream.counters.proxy_errors, 1);
        return pages::no_replica_answered(&upstream.name);
    };
    let backend_upgrade = hyper::upgrade::on(&mut answer);
    tokio::spawn(tunnel(
        conn.clone(),
        client_upgrade,
        backend_upgrade,
        upstream.name.clone(),
    ));
    let (mut parts, _) = answer.into_parts();
    headers::to_client(&mut parts.headers, true);
    Response::from_parts(parts, page(""))
}

/// Joins an upgraded client connection to its upgraded backend connection. Holding `conn`
/// keeps the client's connection slot taken and lets shutdown see the tunnel.
async fn tunnel(conn: Arc<ClientConn>, client: OnUpgrade, backend: OnUpgrade, route: String) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(both) => both,
        Err(e) => {
            tracing::debug!(route, error = %e, "an upgrade did not complete");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut backend = TokioIo::new(backend);
    let mut stage = conn.stage.clone();
    tokio::select! {
        copied = tokio::io::copy_bidirectional(&mut client, &mut backend) => match copied {
            Ok((up, down)) => tracing::debug!(route, peer = %conn.peer, up, down, "upgraded connection closed"),
            Err(e) => tracing::debug!(route, peer = %conn.peer, error = %e, "upgraded connection failed"),
        },
        () = stage.closing() => {}
    }
}
