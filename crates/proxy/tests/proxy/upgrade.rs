//! Upgrades: the `101` passes through and the two upgraded connections are joined.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Backend, PATIENCE, echo_through, proxy, route_to_app};

/// Reads an HTTP/1 answer head, byte by byte so nothing after it is consumed.
async fn read_head(tcp: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        let read = tokio::time::timeout(PATIENCE, tcp.read(&mut byte))
            .await
            .expect("the answer head arrives")
            .unwrap();
        assert_eq!(read, 1, "the connection closed within the head: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn an_upgraded_connection_echoes_through_the_proxy() {
    let proxy = proxy().await;
    let app = Backend::start("app").await;
    route_to_app(&proxy, &app).await;
    let mut tcp = TcpStream::connect(proxy.http_addr()).await.unwrap();
    tcp.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: app.example.com\r\n\
          Connection: Upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    let head = read_head(&mut tcp).await.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("\r\nupgrade: echo\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: upgrade\r\n"), "{head}");

    for message in [&b"hello through the tunnel"[..], &[7u8; 100_000][..]] {
        assert_eq!(echo_through(&mut tcp, message).await, message);
    }
    assert_eq!(proxy.stats().open_connections, 1);
    drop(tcp);
    crate::support::eventually("the tunnel to close", async || {
        proxy.stats().open_connections == 0
    })
    .await;
}
