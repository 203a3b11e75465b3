//! Serving one HTTP or HTTPS client connection: HTTP/1.1 or HTTP/2 (hyper-util's `auto`),
//! each request routed by the table in force when it arrives.
//!
//! The table is loaded per request, not per connection, so a keep-alive connection picks
//! up a new table at its next request. HTTPS connections first pass the TLS handshake
//! within the handshake timeout; a failed handshake (an unknown server name, most often)
//! is logged at debug level, since scanners cause them by the thousand. When the proxy
//! drains, a connection finishes its requests in flight and closes.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::body::ProxyBody;
use crate::listen::ClientConn;
use crate::pages;
use crate::proxy::Worker;
use crate::routing::{Decision, decide, host_of};
use crate::stats::RouteCounters;
use crate::table::Upstream;

/// Serves a plain-HTTP connection.
pub(crate) async fn serve_http(worker: Arc<Worker>, tcp: TcpStream, conn: ClientConn) {
    serve(worker, tcp, Arc::new(conn)).await;
}

/// Shakes hands, then serves an HTTPS connection.
pub(crate) async fn serve_https(worker: Arc<Worker>, tcp: TcpStream, conn: ClientConn) {
    let mut stage = conn.stage.clone();
    let shared = &worker.shared;
    let handshake = tokio::time::timeout(shared.handshake_timeout, shared.tls.accept(tcp));
    let tls = tokio::select! {
        tls = handshake => tls,
        () = stage.draining() => return,
    };
    match tls {
        Ok(Ok(tls)) => serve(worker, tls, Arc::new(conn)).await,
        Ok(Err(e)) => tracing::debug!(peer = %conn.peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(peer = %conn.peer, "TLS handshake timed out"),
    }
}

async fn serve<I>(worker: Arc<Worker>, io: I, conn: Arc<ClientConn>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut stage = conn.stage.clone();
    let peer = conn.peer;
    let service = {
        let worker = worker.clone();
        service_fn(move |request| {
            let worker = worker.clone();
            let conn = conn.clone();
            async move { Ok::<_, Infallible>(answer(&worker, &conn, request).await) }
        })
    };
    let mut connection = pin!(
        worker
            .shared
            .http
            .serve_connection_with_upgrades(TokioIo::new(io), service)
    );
    tokio::select! {
        served = connection.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "client connection ended with an error");
            }
            return;
        }
        () = stage.draining() => {}
    }
    connection.as_mut().graceful_shutdown();
    tokio::select! {
        _ = connection => {}
        () = stage.closing() => {}
    }
}

/// What a request gets, once the table has been consulted.
enum Way {
    Answer(Response<ProxyBody>),
    Forward(Arc<Upstream>),
}

async fn answer(
    worker: &Worker,
    conn: &Arc<ClientConn>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let shared = &worker.shared;
    let way = {
        // HTTP/2's `:authority` and an absolute-form target name the host in the URI; else
        // the `Host` header does.
        let host = match request.uri().host() {
            Some(host) => Some(host_of(host)),
            None => request
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(host_of),
        };
        let table = shared.table.load();
        let decision = decide(
            &table,
            conn.scheme,
            request.method(),
            request.uri().path(),
            host.as_deref(),
        );
        match decision {
            Decision::Forward(upstream) => Way::Forward(upstream.clone()),
            Decision::Challenge(Some(key_authorization)) => {
                Way::Answer(pages::challenge(key_authorization.clone()))
            }
            Decision::Challenge(None) => Way::Answer(pages::unknown_challenge()),
            Decision::RedirectToHttps => {
                let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
                let host = host.as_deref().unwrap_or_default();
                Way::Answer(
                    match HeaderValue::try_from(format!("https://{host}{path}")) {
                        Ok(location) => pages::to_https(location),
                        Err(_) => pages::bad_request(),
                    },
                )
            }
            Decision::Connect => Way::Answer(pages::connect_refused()),
            Decision::NoRoute => {
                RouteCounters::add(&shared.registry.unrouted_requests, 1);
                tracing::debug!(host = host.as_deref(), peer = %conn.peer, "no route");
                Way::Answer(pages::no_route(host.as_deref()))
            }
        }
    };
    match way {
        Way::Answer(response) => response,
        Way::Forward(upstream) => worker.forwarder.forward(conn, &upstream, request).await,
    }
}
