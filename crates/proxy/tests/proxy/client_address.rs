//! What the backend learns about the client: the address the proxy saw, never a claim.

use crate::support::{Backend, client_to, proxy, route_to_app};

#[tokio::test]
async fn the_backend_sees_the_clients_address_even_when_the_client_forged_one() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let client = client_to(proxy.http_addr(), &["app.example.com"]);
    let port = proxy.http_addr().port();
    let response = client
        .get(format!("http://app.example.com:{port}/"))
        .header("x-forwarded-for", "6.6.6.6, 10.0.0.1")
        .header("x-real-ip", "6.6.6.6")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "bank.example")
        .send()
        .await
        .unwrap();
    let saw = |name: &str| response.headers()[name].to_str().unwrap().to_string();
    assert_eq!(saw("x-saw-xff"), "127.0.0.1");
    assert_eq!(saw("x-saw-real-ip"), "127.0.0.1");
    assert_eq!(saw("x-saw-xfp"), "http");
    assert_eq!(saw("x-saw-xfh"), format!("app.example.com:{port}"));
    assert_eq!(saw("x-saw-host"), format!("app.example.com:{port}"));
}
