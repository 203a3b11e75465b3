//! The HTTPS listener: certificates by SNI (exact and wildcard), HTTP/1.1 and HTTP/2, and
//! what happens without a certificate.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use orc_proxy::{Certificate, RouteProblem, Routes};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::support::{Backend, TestCa, body_of, client_builder, proxy, route};

fn https_client(ca: &TestCa, addr: SocketAddr, hosts: &[&str]) -> reqwest::Client {
    client_builder(addr, hosts)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .build()
        .unwrap()
}

async fn tls_to(
    ca: &TestCa,
    addr: SocketAddr,
    server_name: &str,
    alpn: &[&[u8]],
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(ca.client_config(alpn))
        .connect(ServerName::try_from(server_name.to_string()).unwrap(), tcp)
        .await
}

/// `GET https://host/path` over HTTP/2, through a connection whose ALPN chose `h2`.
async fn h2_get(ca: &TestCa, addr: SocketAddr, host: &str, path: &str) -> Response<Incoming> {
    let tls = tls_to(ca, addr, host, &[b"h2"]).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get(format!("https://{host}{path}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    sender.send_request(request).await.unwrap()
}

#[tokio::test]
async fn https_serves_http1_and_http2_with_the_certificate_of_the_server_name() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let app = Backend::start("app").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("app.example.com".into(), route("a/app", &[&app]))]),
            certificates: BTreeMap::from([(
                "app.example.com".into(),
                ca.certificate(&["app.example.com"]),
            )]),
            ..Routes::default()
        })
        .await
        .unwrap();
    let port = proxy.https_addr().port();

    let client = https_client(&ca, proxy.https_addr(), &["app.example.com"]);
    let response = client
        .get(format!("https://app.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_11);
    assert_eq!(response.headers()["x-saw-xfp"], "https");
    assert_eq!(
        response.headers()["x-saw-host"],
        format!("app.example.com:{port}")
    );
    assert_eq!(response.text().await.unwrap(), "app");

    let response = h2_get(&ca, proxy.https_addr(), "app.example.com", "/x?y=1").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_2);
    // The backend hears HTTP/1.1, with the host from `:authority`.
    assert_eq!(response.headers()["x-saw-version"], "HTTP/1.1");
    assert_eq!(response.headers()["x-saw-host"], "app.example.com");
    assert_eq!(response.headers()["x-saw-xfp"], "https");
    assert_eq!(body_of(response).await, "app");
    assert_eq!(app.hits(), 2);
}

#[tokio::test]
async fn a_server_name_without_a_certificate_fails_the_handshake() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let app = Backend::start("app").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([
                ("app.example.com".into(), route("a/app", &[&app])),
                ("bare.example.com".into(), route("a/bare", &[&app])),
            ]),
            certificates: BTreeMap::from([(
                "app.example.com".into(),
                ca.certificate(&["app.example.com"]),
            )]),
            ..Routes::default()
        })
        .await
        .unwrap();
    for name in ["unknown.example.com", "bare.example.com"] {
        let refused = tls_to(&ca, proxy.https_addr(), name, &[b"http/1.1"]).await;
        assert!(refused.is_err(), "{name}: the handshake succeeded");
    }
    assert!(
        tls_to(&ca, proxy.https_addr(), "app.example.com", &[b"http/1.1"])
            .await
            .is_ok()
    );
    assert_eq!(app.hits(), 0);
}

#[tokio::test]
async fn a_wildcard_certificate_serves_names_one_label_below_it() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let web = Backend::start("web").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("web.example.com".into(), route("a/web", &[&web]))]),
            certificates: BTreeMap::from([(
                "*.example.com".into(),
                ca.certificate(&["*.example.com"]),
            )]),
            ..Routes::default()
        })
        .await
        .unwrap();
    let port = proxy.https_addr().port();
    let client = https_client(
        &ca,
        proxy.https_addr(),
        &["web.example.com", "other.example.com"],
    );
    let response = client
        .get(format!("https://web.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "web");

    // Covered by the certificate, but routed nowhere: a 404 naming the host.
    let response = client
        .get(format!("https://other.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        response.text().await.unwrap(),
        "no route for other.example.com\n"
    );

    for name in ["example.com", "a.web.example.com"] {
        assert!(
            tls_to(&ca, proxy.https_addr(), name, &[b"http/1.1"])
                .await
                .is_err(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_bad_certificate_for_one_host_is_reported_and_the_others_serve() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let app = Backend::start("app").await;
    let good = ca.certificate(&["good.example.com"]);
    let mismatched = Certificate {
        chain_pem: ca.certificate(&["bad.example.com"]).chain_pem,
        key_pem: good.key_pem.clone(),
    };
    let refused = proxy
        .set_routes(Routes {
            http: BTreeMap::from([
                ("good.example.com".into(), route("a/good", &[&app])),
                ("bad.example.com".into(), route("a/bad", &[&app])),
            ]),
            certificates: BTreeMap::from([
                ("good.example.com".into(), good),
                ("bad.example.com".into(), mismatched),
            ]),
            ..Routes::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.problems.len(), 1, "{refused}");
    assert!(
        matches!(&refused.problems[0], RouteProblem::BadCertificate { host, .. } if host == "bad.example.com"),
        "{refused}"
    );
    assert_eq!(
        refused.to_string(),
        "the route table was applied except for: the certificate for bad.example.com \
         cannot be used: the key does not belong to the leaf certificate"
    );

    let https_port = proxy.https_addr().port();
    let client = https_client(&ca, proxy.https_addr(), &["good.example.com"]);
    let response = client
        .get(format!("https://good.example.com:{https_port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "app");

    // Without a usable certificate the host is served over plain HTTP, not redirected.
    let http_port = proxy.http_addr().port();
    let plain = crate::support::client_to(proxy.http_addr(), &["bad.example.com"]);
    let response = plain
        .get(format!("http://bad.example.com:{http_port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "app");
}
