//! Shutdown: listeners close at once, requests in flight finish.

use std::collections::BTreeMap;
use std::time::Duration;

use orc_proxy::{Route, Routes};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::support::{
    Backend, EchoServer, PATIENCE, client_to, echo_through, eventually, free_port, proxy,
    route_to_app,
};

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_a_request_in_flight_finish() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let http_addr = proxy.http_addr();
    let client = client_to(http_addr, &["app.example.com"]);
    let mut response = client
        .get(format!("http://app.example.com:{}/slow", http_addr.port()))
        .send()
        .await
        .unwrap();
    let first = tokio::time::timeout(PATIENCE, response.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, "first");

    let stopping = tokio::spawn(proxy.shutdown(PATIENCE));
    eventually("the HTTP listener to close", async || {
        TcpStream::connect(http_addr).await.is_err()
    })
    .await;
    assert!(
        !stopping.is_finished(),
        "shutdown did not wait for the request"
    );

    app.release();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(rest, b"second");
    let report = tokio::time::timeout(PATIENCE, stopping)
        .await
        .expect("shutdown finishes once the request has")
        .unwrap();
    assert_eq!(report.connections_cut, 0);
}

#[tokio::test]
async fn shutdown_cuts_what_is_still_open_at_the_deadline() {
    let proxy = proxy().await;
    let echo = EchoServer::start().await;
    let port = free_port().await;
    proxy
        .set_routes(Routes {
            tcp: BTreeMap::from([(port, Route::new("a/db", [echo.addr]))]),
            ..Routes::default()
        })
        .await
        .unwrap();
    // A TCP connection has no way to be told to finish: it runs until the deadline.
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(echo_through(&mut tcp, b"open").await, b"open");
    let report = proxy.shutdown(Duration::from_millis(200)).await;
    assert_eq!(report.connections_cut, 1);
    let mut byte = [0u8];
    let read = tokio::time::timeout(PATIENCE, tcp.read(&mut byte))
        .await
        .expect("the cut connection closes");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
