//! Backend choice: round robin, dead backends skipped, and the proxy's own `502`, `503`
//! and `504`.

use std::collections::BTreeMap;
use std::time::Duration;

use orc_proxy::{Route, Routes};
use reqwest::StatusCode;

use crate::support::{Backend, client_to, dead_addr, proxy, proxy_with, route};

async fn serve_app(proxy: &orc_proxy::Proxy, route: Route) -> reqwest::Client {
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("app.example.com".into(), route)]),
            ..Routes::default()
        })
        .await
        .unwrap();
    client_to(proxy.http_addr(), &["app.example.com"])
}

#[tokio::test]
async fn requests_take_turns_across_backends() {
    let proxy = proxy().await;
    let a = Backend::start("a").await;
    let b = Backend::start("b").await;
    let client = serve_app(&proxy, route("x/app", &[&a, &b])).await;
    let port = proxy.http_addr().port();
    let mut answers = Vec::new();
    for _ in 0..6 {
        let response = client
            .get(format!("http://app.example.com:{port}/"))
            .send()
            .await
            .unwrap();
        answers.push(response.text().await.unwrap());
    }
    assert!(
        answers.windows(2).all(|pair| pair[0] != pair[1]),
        "{answers:?}"
    );
    assert_eq!((a.hits(), b.hits()), (3, 3));
}

#[tokio::test]
async fn a_dead_backend_is_skipped_without_failing_a_request() {
    let proxy = proxy().await;
    let alive = Backend::start("alive").await;
    let dead = dead_addr().await;
    let client = serve_app(&proxy, Route::new("x/app", [dead, alive.addr])).await;
    let port = proxy.http_addr().port();
    for i in 0..4 {
        let response = client
            .get(format!("http://app.example.com:{port}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "request {i}");
        assert_eq!(response.text().await.unwrap(), "alive");
        // A request with a body goes on to the next backend too: it was never sent.
        let body = format!("post {i}");
        let response = client
            .post(format!("http://app.example.com:{port}/echo"))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "post {i}");
        assert_eq!(response.text().await.unwrap(), body);
    }
    assert_eq!(alive.hits(), 8);
    let stats = proxy.stats();
    assert_eq!(stats.routes["x/app"].requests, 8);
    assert_eq!(stats.routes["x/app"].proxy_errors, 0);
}

#[tokio::test]
async fn a_route_without_backends_is_a_503_naming_it() {
    let proxy = proxy().await;
    let client = serve_app(&proxy, Route::new("x/app", [])).await;
    let port = proxy.http_addr().port();
    let response = client
        .get(format!("http://app.example.com:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.text().await.unwrap(),
        "x/app has no ready replica\n"
    );
    let stats = proxy.stats();
    assert_eq!(stats.routes["x/app"].requests, 1);
    assert_eq!(stats.routes["x/app"].proxy_errors, 1);
}

#[tokio::test]
async fn a_route_whose_backends_are_all_dead_is_a_502_naming_it() {
    let proxy = proxy().await;
    let client = serve_app(
        &proxy,
        Route::new("x/app", [dead_addr().await, dead_addr().await]),
    )
    .await;
    let port = proxy.http_addr().port();
    let response = client
        .post(format!("http://app.example.com:{port}/echo"))
        .body("lost")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(
        response.text().await.unwrap(),
        "no replica of x/app answered\n"
    );
    assert_eq!(proxy.stats().routes["x/app"].proxy_errors, 1);
}

#[tokio::test]
async fn a_backend_that_does_not_start_answering_in_time_is_a_504_naming_the_route() {
    let proxy = proxy_with(|config| config.response_timeout = Duration::from_millis(300)).await;
    let app = Backend::start("app").await;
    let client = serve_app(&proxy, route("x/app", &[&app])).await;
    let port = proxy.http_addr().port();
    let response = client
        .get(format!("http://app.example.com:{port}/hang"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        response.text().await.unwrap(),
        "no replica of x/app answered within 300 ms\n"
    );
    assert_eq!(proxy.stats().routes["x/app"].proxy_errors, 1);
    app.release();
}
