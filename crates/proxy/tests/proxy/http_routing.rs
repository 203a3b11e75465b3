//! The plain-HTTP listener: domain routes, the catch-all, `404`s, ACME challenges and
//! redirects to HTTPS.

use std::collections::BTreeMap;

use orc_proxy::Routes;
use reqwest::StatusCode;

use crate::support::{Backend, TestCa, client_to, proxy, route, route_to_app};

#[tokio::test]
async fn domain_routes_win_over_the_catch_all_which_takes_every_other_host() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    let public = Backend::start("public").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("app.example.com".into(), route("a/app", &[&app]))]),
            catch_all: Some(route("b/public", &[&public])),
            ..Routes::default()
        })
        .await
        .unwrap();
    let client = client_to(proxy.http_addr(), &["app.example.com", "other.example.com"]);
    let port = proxy.http_addr().port();
    for (url, expected) in [
        (format!("http://app.example.com:{port}/"), "app"),
        (
            format!("http://app.example.com:{port}/deep/path?q=1"),
            "app",
        ),
        (format!("http://other.example.com:{port}/"), "public"),
        (format!("http://127.0.0.1:{port}/"), "public"),
    ] {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        assert_eq!(response.text().await.unwrap(), expected, "{url}");
    }
    let stats = proxy.stats();
    assert_eq!(stats.routes["a/app"].requests, 2);
    assert_eq!(stats.routes["b/public"].requests, 2);
}

#[tokio::test]
async fn without_a_catch_all_an_unknown_host_gets_a_404_naming_it() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let client = client_to(proxy.http_addr(), &["other.example.com"]);
    let port = proxy.http_addr().port();
    let response = client
        .get(format!("http://other.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        response.text().await.unwrap(),
        "no route for other.example.com\n"
    );
    assert_eq!(proxy.stats().unrouted_requests, 1);
    assert_eq!(app.hits(), 0);
}

#[tokio::test]
async fn an_acme_challenge_is_answered_for_any_host_before_any_route() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let app = Backend::start("app").await;
    let public = Backend::start("public").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("secure.example.com".into(), route("a/app", &[&app]))]),
            catch_all: Some(route("b/public", &[&public])),
            certificates: BTreeMap::from([(
                "secure.example.com".into(),
                ca.certificate(&["secure.example.com"]),
            )]),
            challenges: BTreeMap::from([("tok-123".into(), "tok-123.thumbprint".into())]),
            ..Routes::default()
        })
        .await
        .unwrap();
    let client = client_to(
        proxy.http_addr(),
        &["secure.example.com", "new.example.com"],
    );
    let port = proxy.http_addr().port();
    for host in ["secure.example.com", "new.example.com"] {
        let response = client
            .get(format!(
                "http://{host}:{port}/.well-known/acme-challenge/tok-123"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{host}");
        assert_eq!(response.headers()["content-type"], "text/plain");
        assert_eq!(response.text().await.unwrap(), "tok-123.thumbprint");

        let unknown = client
            .get(format!(
                "http://{host}:{port}/.well-known/acme-challenge/other"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(unknown.status(), StatusCode::NOT_FOUND, "{host}");
    }
    assert_eq!(app.hits() + public.hits(), 0);
}

#[tokio::test]
async fn a_domain_with_a_certificate_is_redirected_to_https_and_one_without_is_served() {
    let proxy = proxy().await;
    let ca = TestCa::new();
    let app = Backend::start("app").await;
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([
                ("secure.example.com".into(), route("a/secure", &[&app])),
                ("plain.example.com".into(), route("a/plain", &[&app])),
            ]),
            certificates: BTreeMap::from([(
                "secure.example.com".into(),
                ca.certificate(&["secure.example.com"]),
            )]),
            ..Routes::default()
        })
        .await
        .unwrap();
    let client = client_to(
        proxy.http_addr(),
        &["secure.example.com", "plain.example.com"],
    );
    let port = proxy.http_addr().port();
    let redirected = client
        .post(format!("http://secure.example.com:{port}/a/b?c=d&e"))
        .send()
        .await
        .unwrap();
    assert_eq!(redirected.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(
        redirected.headers()["location"],
        "https://secure.example.com/a/b?c=d&e"
    );
    let served = client
        .get(format!("http://plain.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(served.text().await.unwrap(), "app");
    assert_eq!(app.hits(), 1);
}
