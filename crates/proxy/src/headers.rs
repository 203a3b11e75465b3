//! What the proxy changes in the headers it passes on: pure functions over a `HeaderMap`.
//!
//! To the backend: the client's headers without hop-by-hop ones (those of RFC 9110 §7.6.1
//! and any the client's `Connection` names), without any claim the client made about
//! where a request came from (`Forwarded`, `X-Forwarded-*`, `X-Real-IP` and the CDN
//! headers in [`CLIENT_CLAIMS`]); then `Host` as the client named it (the `Host` header,
//! or the authority of an HTTP/2 or absolute-form request), `X-Forwarded-Host` (the same),
//! `X-Forwarded-Proto` (`http` or `https`), and `X-Forwarded-For` and `X-Real-IP`, both the
//! address the client's connection came from. The ingress is the edge of the trust
//! boundary, so a client's own `X-Forwarded-For` is replaced, never appended to. An upgrade
//! request keeps `Upgrade` and carries `Connection: upgrade`.
//!
//! To the client: the backend's headers without hop-by-hop ones; a `101` keeps `Upgrade`
//! and carries `Connection: upgrade`.

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Headers that describe one connection, never passed on.
static HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Headers through which proxies and CDNs name a client's address, host or scheme. Apps
/// and their frameworks trust them, so whatever a client sent is dropped.
pub(crate) static CLIENT_CLAIMS: [HeaderName; 10] = [
    header::FORWARDED,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-real-ip"),
    HeaderName::from_static("true-client-ip"),
    HeaderName::from_static("x-client-ip"),
    HeaderName::from_static("cf-connecting-ip"),
    HeaderName::from_static("x-cluster-client-ip"),
    HeaderName::from_static("fastly-client-ip"),
];

/// What the proxy vouches for about a request.
#[derive(Debug)]
pub(crate) struct Origin<'a> {
    /// The client connection's IP address, as a header value.
    pub client_ip: &'a HeaderValue,
    /// `http` or `https`.
    pub proto: &'static str,
    /// The host (and port) the client named, if any.
    pub authority: Option<HeaderValue>,
}

/// Whether the request asks to switch protocols (`Connection: upgrade` with `Upgrade`),
/// which only HTTP/1.1 can.
pub(crate) fn asks_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(header::CONNECTION) {
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
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Turns the client's request headers into the backend's; `upgrade` keeps the upgrade.
pub(crate) fn to_backend(headers: &mut HeaderMap, origin: Origin<'_>, upgrade: bool) {
    let upgrade = if upgrade {
        headers.get(header::UPGRADE).cloned()
    } else {
        None
    };
    strip_hop_by_hop(headers);
    for name in &CLIENT_CLAIMS {
        headers.remove(name);
    }
    if let Some(authority) = origin.authority {
        headers.insert(header::HOST, authority.clone());
        headers.insert(X_FORWARDED_HOST.clone(), authority);
    }
    headers.insert(
        X_FORWARDED_PROTO.clone(),
        HeaderValue::from_static(origin.proto),
    );
    headers.insert(X_FORWARDED_FOR.clone(), origin.client_ip.clone());
    headers.insert(X_REAL_IP.clone(), origin.client_ip.clone());
    if let Some(protocol) = upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
}

/// Turns the backend's answer headers into the client's; `switching` (a `101`) keeps the
/// upgrade.
pub(crate) fn to_client(headers: &mut HeaderMap, switching: bool) {
    let upgrade = if switching {
        headers.get(header::UPGRADE).cloned()
    } else {
        None
    };
    strip_hop_by_hop(headers);
    if let Some(protocol) = upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_static("app.example.com:8080"),
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        headers.append("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        headers.append("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        headers.insert("x-real-ip", HeaderValue::from_static("6.6.6.6"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        headers.insert("cf-connecting-ip", HeaderValue::from_static("6.6.6.6"));
        headers.insert(header::FORWARDED, HeaderValue::from_static("for=6.6.6.6"));
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers
    }

    #[test]
    fn the_backend_reads_what_the_proxy_saw_never_what_the_client_claimed() {
        let mut headers = client_headers();
        let ip = HeaderValue::from_static("198.51.100.7");
        let authority = headers.get(header::HOST).cloned();
        to_backend(
            &mut headers,
            Origin {
                client_ip: &ip,
                proto: "http",
                authority,
            },
            false,
        );
        let all = |name: &str| -> Vec<&str> {
            headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect()
        };
        assert_eq!(all("x-forwarded-for"), ["198.51.100.7"]);
        assert_eq!(all("x-real-ip"), ["198.51.100.7"]);
        assert_eq!(all("x-forwarded-proto"), ["http"]);
        assert_eq!(all("x-forwarded-host"), ["app.example.com:8080"]);
        assert_eq!(all("host"), ["app.example.com:8080"]);
        assert_eq!(all("accept"), ["text/html"]);
        for gone in [
            "cf-connecting-ip",
            "forwarded",
            "connection",
            "x-private",
            "keep-alive",
            "te",
            "transfer-encoding",
        ] {
            assert!(all(gone).is_empty(), "{gone}");
        }
    }

    #[test]
    fn an_upgrade_keeps_its_protocol_both_ways() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(asks_upgrade(&headers));
        let ip = HeaderValue::from_static("127.0.0.1");
        to_backend(
            &mut headers,
            Origin {
                client_ip: &ip,
                proto: "http",
                authority: None,
            },
            true,
        );
        assert_eq!(headers[header::CONNECTION], "upgrade");
        assert_eq!(headers[header::UPGRADE], "websocket");

        let mut answer = HeaderMap::new();
        answer.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        answer.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        answer.insert("sec-websocket-accept", HeaderValue::from_static("x"));
        to_client(&mut answer, true);
        assert_eq!(answer[header::CONNECTION], "upgrade");
        assert_eq!(answer[header::UPGRADE], "websocket");
        assert_eq!(answer["sec-websocket-accept"], "x");

        let mut plain = HeaderMap::new();
        plain.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert!(!asks_upgrade(&plain));
        to_client(&mut plain, false);
        assert!(plain.is_empty());
    }
}
