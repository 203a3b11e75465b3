//! Bodies stream through the proxy both ways: large ones arrive whole, and a slow answer's
//! first bytes arrive before the backend has finished.

use reqwest::StatusCode;

use crate::support::{Backend, PATIENCE, client_to, pattern, proxy, route_to_app};

const EIGHT_MIB: usize = 8 * 1024 * 1024;

#[tokio::test]
async fn a_large_body_arrives_intact_both_ways() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let client = client_to(proxy.http_addr(), &["app.example.com"]);
    let port = proxy.http_addr().port();
    let sent = pattern(EIGHT_MIB);

    let echoed = client
        .post(format!("http://app.example.com:{port}/echo"))
        .body(sent.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.status(), StatusCode::OK);
    let echoed = echoed.bytes().await.unwrap();
    assert_eq!(echoed.len(), EIGHT_MIB);
    assert!(echoed == sent, "the echoed body differs from the one sent");

    let downloaded = client
        .get(format!("http://app.example.com:{port}/big?{EIGHT_MIB}"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(downloaded.len(), EIGHT_MIB);
    assert!(
        downloaded == sent,
        "the downloaded body differs from the pattern"
    );
}

#[tokio::test]
async fn a_slow_answers_first_bytes_reach_the_client_before_the_backend_finishes() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let client = client_to(proxy.http_addr(), &["app.example.com"]);
    let port = proxy.http_addr().port();
    let mut response = client
        .get(format!("http://app.example.com:{port}/slow"))
        .send()
        .await
        .unwrap();
    // The backend holds `second` back until released: buffering would wait here for ever.
    let mut received = Vec::new();
    while received.len() < b"first".len() {
        let chunk = tokio::time::timeout(PATIENCE, response.chunk())
            .await
            .expect("the first chunk arrives while the backend still holds the rest")
            .unwrap()
            .expect("the body goes on");
        received.extend_from_slice(&chunk);
    }
    assert_eq!(received, b"first");
    app.release();
    while let Some(chunk) = response.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
    }
    assert_eq!(received, b"firstsecond");
}
