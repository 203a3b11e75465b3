//! Forwarding a request to a slot and its answer back.
//!
//! What reaches the app: the method, path, query and body as sent; the client's headers
//! minus hop-by-hop ones, every `X-Orc-Access-Assertion`, `Forwarded`, `X-Forwarded-*` and
//! client-address header ([`CLIENT_ADDRESS_HEADERS`]: `X-Real-IP` and its kin) it sent, the
//! session cookie (other cookies stay) and, when it carried the bearer token,
//! `Authorization`; plus `Host` as the client named it, `X-Forwarded-Host`,
//! `X-Forwarded-Proto: https`, `X-Forwarded-For` and `X-Real-IP` (both the address the
//! edge's connection came from) and the one assertion the edge signed. So whatever an app
//! reads as the client's address is what the edge saw, never what the client claimed.
//! What reaches the client: the app's answer, streamed, minus hop-by-hop headers and any
//! `Set-Cookie` for the session cookie.
//!
//! A request without a slot part goes to the lowest slot; when that slot refuses the
//! connection, a request that can be sent again (GET, HEAD, OPTIONS) tries the next.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version, header};
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::identity::SESSION_COOKIE;
use super::{EdgeState, pages};

/// The client the edge forwards with: HTTP/1.1 to loopback slots, connections reused.
pub(super) type Client = HyperClient<HttpConnector, Body>;

/// How long a slot may take to start answering.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn client() -> Client {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    HyperClient::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// What the edge adds to a forwarded request.
pub(super) struct Forward {
    /// The host the client named.
    pub host: String,
    /// The edge's public port.
    pub port: u16,
    pub client: Option<IpAddr>,
    pub assertion: String,
    /// The client's `Authorization` carried the bearer token: do not pass it on.
    pub drop_authorization: bool,
    /// `org/project/pool`, for log lines and error pages.
    pub pool: String,
}

/// Headers that describe one connection, never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// The client's cookies without the session cookie; `None` when none is left.
fn cookies_without_session(headers: &HeaderMap) -> Option<HeaderValue> {
    let kept: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|pair| {
            !pair.is_empty() && pair.split('=').next().map(str::trim) != Some(SESSION_COOKIE)
        })
        .collect();
    if kept.is_empty() {
        None
    } else {
        HeaderValue::from_str(&kept.join("; ")).ok()
    }
}

/// Headers through which proxies and CDNs name a client's address; apps and their
/// frameworks trust them, so a client's own are dropped. The edge sets `X-Real-IP` itself.
pub(super) const CLIENT_ADDRESS_HEADERS: [&str; 6] = [
    "x-real-ip",
    "true-client-ip",
    "x-client-ip",
    "cf-connecting-ip",
    "x-cluster-client-ip",
    "fastly-client-ip",
];

/// The headers the app receives.
pub(super) fn forwarded_headers(client: &HeaderMap, forward: &Forward) -> HeaderMap {
    let mut headers = client.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(orc_access::ASSERTION_HEADER);
    headers.remove(header::FORWARDED);
    for name in ["x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"]
        .into_iter()
        .chain(CLIENT_ADDRESS_HEADERS)
    {
        headers.remove(name);
    }
    if forward.drop_authorization {
        headers.remove(header::AUTHORIZATION);
    }
    headers.remove(header::COOKIE);
    if let Some(cookies) = cookies_without_session(client) {
        headers.insert(header::COOKIE, cookies);
    }
    let host = if forward.port == 443 {
        forward.host.clone()
    } else {
        format!("{}:{}", forward.host, forward.port)
    };
    if let Ok(value) = HeaderValue::from_str(&host) {
        headers.insert(header::HOST, value.clone());
        headers.insert("x-forwarded-host", value);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
    if let Some(ip) = forward.client
        && let Ok(value) = HeaderValue::from_str(&ip.to_string())
    {
        headers.insert("x-forwarded-for", value.clone());
        headers.insert("x-real-ip", value);
    }
    if let Ok(value) = HeaderValue::from_str(&forward.assertion) {
        headers.insert(orc_access::ASSERTION_HEADER, value);
    }
    headers
}

/// The headers the client receives.
fn answered_headers(headers: &mut HeaderMap) {
    strip_hop_by_hop(headers);
    let cookies: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter(|v| {
            v.to_str().map_or(true, |text| {
                text.split('=').next().map(str::trim) != Some(SESSION_COOKIE)
            })
        })
        .cloned()
        .collect();
    headers.remove(header::SET_COOKIE);
    for cookie in cookies {
        headers.append(header::SET_COOKIE, cookie);
    }
}

fn may_resend(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A client's request on its way out, to one backend after another.
struct Outgoing {
    method: Method,
    /// The path and query.
    path: String,
    headers: HeaderMap,
    /// Taken by the first attempt.
    body: Option<Body>,
    /// Whether it may go to a second backend (GET, HEAD, OPTIONS).
    resend: bool,
}

impl Outgoing {
    fn new(request: Request, forward: &Forward) -> Outgoing {
        let (parts, body) = request.into_parts();
        Outgoing {
            headers: forwarded_headers(&parts.headers, forward),
            path: parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
            resend: may_resend(&parts.method),
            method: parts.method,
            body: Some(body),
        }
    }

    /// The request of one attempt, to `uri`. Only a request that can be sent again reaches
    /// a second backend, and then without the body (GET, HEAD and OPTIONS carry none in
    /// practice).
    fn attempt(&mut self, uri: Uri) -> axum::http::Request<Body> {
        let mut outgoing = axum::http::Request::new(self.body.take().unwrap_or_else(Body::empty));
        *outgoing.method_mut() = self.method.clone();
        *outgoing.uri_mut() = uri;
        *outgoing.version_mut() = Version::HTTP_11;
        *outgoing.headers_mut() = self.headers.clone();
        outgoing
    }
}

/// A backend's answer as the client gets it.
fn answered(answer: axum::http::Response<hyper::body::Incoming>) -> Response {
    let (mut parts, incoming) = answer.into_parts();
    answered_headers(&mut parts.headers);
    Response::from_parts(parts, Body::new(incoming))
}

fn bad_path() -> Response {
    pages::refusal(
        StatusCode::BAD_REQUEST,
        "Bad path",
        "The request's path cannot be forwarded.",
        None,
    )
}

/// `who` (`Slot 0 of pool …`) did not start answering in time.
fn no_answer_in_time(who: &str) -> Response {
    pages::refusal(
        StatusCode::GATEWAY_TIMEOUT,
        "No answer in time",
        &format!(
            "{who} did not start answering within {} s.",
            ANSWER_TIMEOUT.as_secs()
        ),
        None,
    )
}

/// No backend of `what` (`Pool …`) answered; the last said `last_error`.
fn not_serving(what: &str, last_error: &str) -> Response {
    pages::refusal(
        StatusCode::BAD_GATEWAY,
        "Not serving right now",
        &format!("{what}: {last_error}. It may be restarting; try again shortly."),
        None,
    )
    .into_response()
}

/// Sends `request` to the first of `slots` that takes it, and its answer back.
pub(super) async fn forward(
    edge: &EdgeState,
    request: Request,
    slots: &[(u32, SocketAddr)],
    forward: Forward,
) -> Response {
    let mut outgoing = Outgoing::new(request, &forward);
    let mut last_error = String::new();
    for (slot, addr) in slots {
        let Ok(uri) = format!("http://{addr}{}", outgoing.path).parse::<Uri>() else {
            return bad_path();
        };
        let request = outgoing.attempt(uri);
        match tokio::time::timeout(ANSWER_TIMEOUT, edge.inner.client.request(request)).await {
            Ok(Ok(answer)) => return answered(answer),
            Ok(Err(e)) if e.is_connect() && outgoing.resend => {
                tracing::debug!(pool = %forward.pool, slot, error = %e, "a slot refused the connection; trying the next");
                last_error = format!("slot {slot} did not take the connection");
            }
            Ok(Err(e)) => {
                tracing::info!(pool = %forward.pool, slot, error = %e, "forwarding to a slot failed");
                last_error = format!("slot {slot} did not answer");
                break;
            }
            Err(_) => {
                tracing::info!(pool = %forward.pool, slot, "a slot did not answer in time");
                return no_answer_in_time(&format!("Slot {slot} of pool {}", forward.pool));
            }
        }
    }
    not_serving(&format!("Pool {}", forward.pool), &last_error)
}

/// Sends `request` to the first of `replicas` whose node connects to it, over a stream the
/// zone relays through that node's agent, and its answer back. Replicas are tried from a
/// different one each time, so requests spread over them.
pub(super) async fn forward_to_replicas(
    edge: &EdgeState,
    request: Request,
    replicas: &[super::PrivateReplica],
    forward: Forward,
) -> Response {
    let mut outgoing = Outgoing::new(request, &forward);
    let Ok(uri) = outgoing.path.parse::<Uri>() else {
        return bad_path();
    };
    let mut last_error = String::new();
    let start = usize::from(round_robin()) % replicas.len().max(1);
    for replica in replicas.iter().cycle().skip(start).take(replicas.len()) {
        let stream = match edge
            .inner
            .services
            .connect(&replica.node, &replica.address)
            .await
        {
            Ok(stream) => stream,
            Err(error) => {
                last_error = format!("replica {} could not be reached: {error}", replica.slot);
                if !outgoing.resend {
                    break;
                }
                tracing::debug!(service = %forward.pool, slot = replica.slot, %error, "a replica could not be reached; trying the next");
                continue;
            }
        };
        let request = outgoing.attempt(uri.clone());
        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                let _ = connection.with_upgrades().await;
            });
            sender.send_request(request).await
        };
        match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => return answered(answer),
            Ok(Err(e)) => {
                tracing::info!(service = %forward.pool, slot = replica.slot, error = %e, "forwarding to a replica failed");
                last_error = format!("replica {} did not answer", replica.slot);
                break;
            }
            Err(_) => {
                return no_answer_in_time(&format!(
                    "Replica {} of the {}",
                    replica.slot, forward.pool
                ));
            }
        }
    }
    not_serving(&format!("The {}", forward.pool), &last_error)
}

/// Where the next request starts among replicas: round robin over the edge.
fn round_robin() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_sees_only_what_the_edge_vouches_for() {
        let mut client = HeaderMap::new();
        client.append(
            orc_access::ASSERTION_HEADER,
            HeaderValue::from_static("forged-1"),
        );
        client.append(
            "X-Orc-Access-Assertion",
            HeaderValue::from_static("forged-2"),
        );
        client.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer orc_x"),
        );
        client.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; __Secure-orc_session=orc_s; lang=en"),
        );
        client.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        client.insert(header::FORWARDED, HeaderValue::from_static("for=6.6.6.6"));
        client.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        client.insert("x-private", HeaderValue::from_static("1"));
        client.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let forward = Forward {
            host: "sys--partner.sys.orc.localhost".into(),
            port: 7443,
            client: Some("127.0.0.1".parse().unwrap()),
            assertion: "signed".into(),
            drop_authorization: true,
            pool: "sys/sys/partner".into(),
        };
        let headers = forwarded_headers(&client, &forward);
        let assertions: Vec<_> = headers
            .get_all(orc_access::ASSERTION_HEADER)
            .iter()
            .collect();
        assert_eq!(assertions, [HeaderValue::from_static("signed")]);
        assert!(headers.get(header::AUTHORIZATION).is_none());
        assert_eq!(headers[header::COOKIE], "theme=dark; lang=en");
        assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
        assert!(headers.get(header::FORWARDED).is_none());
        assert!(headers.get("x-private").is_none() && headers.get(header::CONNECTION).is_none());
        assert_eq!(headers[header::HOST], "sys--partner.sys.orc.localhost:7443");
        assert_eq!(headers["x-forwarded-proto"], "https");
        assert_eq!(headers[header::ACCEPT], "text/html");

        let only_session = {
            let mut h = HeaderMap::new();
            h.insert(
                header::COOKIE,
                HeaderValue::from_static("__Secure-orc_session=orc_s"),
            );
            h
        };
        assert!(
            forwarded_headers(&only_session, &forward)
                .get(header::COOKIE)
                .is_none()
        );

        let mut answer = HeaderMap::new();
        answer.append(header::SET_COOKIE, HeaderValue::from_static("a=1; Path=/"));
        answer.append(
            header::SET_COOKIE,
            HeaderValue::from_static("__Secure-orc_session=stolen; Domain=orc.localhost"),
        );
        answer.insert(header::CONNECTION, HeaderValue::from_static("close"));
        answered_headers(&mut answer);
        let cookies: Vec<_> = answer.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, [HeaderValue::from_static("a=1; Path=/")]);
        assert!(answer.get(header::CONNECTION).is_none());
    }

    /// Attack: a client names its own address in `X-Real-IP` (or a CDN's header) to pass an
    /// app's address check or to be logged as someone else.
    #[test]
    fn the_app_reads_the_address_the_edge_saw_never_the_clients_claim() {
        let claims = [
            "x-real-ip",
            "true-client-ip",
            "x-client-ip",
            "cf-connecting-ip",
        ];
        let mut client = HeaderMap::new();
        for name in claims {
            client.append(name, HeaderValue::from_static("10.0.0.1"));
            client.append(name, HeaderValue::from_static("203.0.113.9"));
        }
        client.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        let mut forward = Forward {
            host: "web--site.acme.orc.localhost".into(),
            port: 443,
            client: Some("198.51.100.7".parse().unwrap()),
            assertion: "signed".into(),
            drop_authorization: false,
            pool: "acme/web/site".into(),
        };
        let headers = forwarded_headers(&client, &forward);
        for name in claims {
            let values: Vec<_> = headers.get_all(name).iter().collect();
            if name == "x-real-ip" {
                assert_eq!(values, [HeaderValue::from_static("198.51.100.7")]);
            } else {
                assert!(values.is_empty(), "{name}: {values:?}");
            }
        }
        assert_eq!(headers["x-forwarded-for"], "198.51.100.7");

        // Without a peer address the edge vouches for none.
        forward.client = None;
        let headers = forwarded_headers(&client, &forward);
        for name in CLIENT_ADDRESS_HEADERS
            .into_iter()
            .chain(["x-forwarded-for"])
        {
            assert!(headers.get(name).is_none(), "{name}");
        }
    }
}
