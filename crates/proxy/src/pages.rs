//! Every answer the proxy gives itself rather than an app: one line of plain text, in the
//! words tenants and their visitors read. Nothing else in the crate writes a page.

use std::time::Duration;

use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use crate::body::{ProxyBody, page};

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut response = Response::new(page(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `404`: no route for the host the request named (`None`: it named none).
pub(crate) fn no_route(host: Option<&str>) -> Response<ProxyBody> {
    text(
        StatusCode::NOT_FOUND,
        format!("no route for {}\n", host.unwrap_or("(no host)")),
    )
}

/// `200`: an ACME HTTP-01 challenge's key authorization, exactly.
pub(crate) fn challenge(key_authorization: Bytes) -> Response<ProxyBody> {
    let mut response = Response::new(page(key_authorization));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// `404`: an ACME challenge token the table does not hold.
pub(crate) fn unknown_challenge() -> Response<ProxyBody> {
    text(StatusCode::NOT_FOUND, "no such ACME challenge\n")
}

/// `308` to `location`, the same request over HTTPS.
pub(crate) fn to_https(location: HeaderValue) -> Response<ProxyBody> {
    let mut response = text(
        StatusCode::PERMANENT_REDIRECT,
        "this site is served over HTTPS\n",
    );
    response.headers_mut().insert(header::LOCATION, location);
    response
}

/// `400`: a request the proxy cannot pass on.
pub(crate) fn bad_request() -> Response<ProxyBody> {
    text(
        StatusCode::BAD_REQUEST,
        "this request cannot be forwarded\n",
    )
}

/// `503`: the route has no ready replica.
pub(crate) fn no_ready_replica(route: &str) -> Response<ProxyBody> {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{route} has no ready replica\n"),
    )
}

/// `502`: no replica took the request, or the one that did failed it.
pub(crate) fn no_replica_answered(route: &str) -> Response<ProxyBody> {
    text(
        StatusCode::BAD_GATEWAY,
        format!("no replica of {route} answered\n"),
    )
}

/// `504`: the replica did not start answering within `limit`.
pub(crate) fn no_answer_in_time(route: &str, limit: Duration) -> Response<ProxyBody> {
    let limit = if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} ms", limit.as_millis())
    };
    text(
        StatusCode::GATEWAY_TIMEOUT,
        format!("no replica of {route} answered within {limit}\n"),
    )
}

/// `405`: `CONNECT`, which an ingress does not tunnel.
pub(crate) fn connect_refused() -> Response<ProxyBody> {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        "CONNECT is not served here\n",
    );
    response.headers_mut().insert(
        header::ALLOW,
        HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"),
    );
    response
}
