//! TCP routes: bytes through, ports opened and closed with the table, a port in use
//! reported.

use std::collections::BTreeMap;

use orc_proxy::{Route, RouteProblem, Routes};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{EchoServer, echo_through, eventually, free_port, proxy};

fn tcp_routes(ports: &[u16], echo: &EchoServer) -> Routes {
    Routes {
        tcp: ports
            .iter()
            .map(|&port| (port, Route::new("a/db", [echo.addr])))
            .collect::<BTreeMap<_, _>>(),
        ..Routes::default()
    }
}

#[tokio::test]
async fn a_tcp_port_forwards_bytes_both_ways_and_counts_them() {
    let proxy = proxy().await;
    let echo = EchoServer::start().await;
    let port = free_port().await;
    proxy.set_routes(tcp_routes(&[port], &echo)).await.unwrap();
    assert_eq!(proxy.tcp_ports().await, [port]);

    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let message = b"bytes, not HTTP";
    assert_eq!(echo_through(&mut tcp, message).await, message);
    let big = vec![42u8; 1 << 20];
    assert_eq!(echo_through(&mut tcp, &big).await, big);

    let sent = (message.len() + big.len()) as u64;
    eventually("the counters to catch up", async || {
        let stats = proxy.stats().routes["a/db"];
        stats.tcp_bytes_from_clients == sent && stats.tcp_bytes_to_clients == sent
    })
    .await;
    assert_eq!(proxy.stats().routes["a/db"].tcp_connections, 1);
}

#[tokio::test]
async fn a_removed_port_stops_accepting_while_its_connections_carry_on() {
    let proxy = proxy().await;
    let echo = EchoServer::start().await;
    let port = free_port().await;
    proxy.set_routes(tcp_routes(&[port], &echo)).await.unwrap();
    let mut established = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(echo_through(&mut established, b"before").await, b"before");

    proxy.set_routes(Routes::default()).await.unwrap();
    assert!(proxy.tcp_ports().await.is_empty());
    let refused = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(echo_through(&mut established, b"after").await, b"after");
}

#[tokio::test]
async fn a_port_in_use_is_reported_the_others_open_and_it_opens_once_free() {
    let proxy = proxy().await;
    let echo = EchoServer::start().await;
    let squatter = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let busy = squatter.local_addr().unwrap().port();
    let free = free_port().await;

    let partly = proxy
        .set_routes(tcp_routes(&[busy, free], &echo))
        .await
        .unwrap_err();
    assert_eq!(partly.problems.len(), 1, "{partly}");
    match &partly.problems[0] {
        RouteProblem::PortUnavailable { port, source, .. } => {
            assert_eq!(*port, busy);
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        other => panic!("{other}"),
    }
    assert!(partly.problems[0].may_clear_by_itself());
    let message = partly.to_string();
    assert!(
        message.contains(&format!("TCP port {busy} cannot be opened on 127.0.0.1: ")),
        "{message}"
    );
    assert_eq!(proxy.tcp_ports().await, [free]);
    let mut tcp = TcpStream::connect(("127.0.0.1", free)).await.unwrap();
    assert_eq!(echo_through(&mut tcp, b"free").await, b"free");

    drop(squatter);
    proxy
        .set_routes(tcp_routes(&[busy, free], &echo))
        .await
        .unwrap();
    let mut ports = vec![busy, free];
    ports.sort();
    assert_eq!(proxy.tcp_ports().await, ports);
    let mut tcp = TcpStream::connect(("127.0.0.1", busy)).await.unwrap();
    assert_eq!(echo_through(&mut tcp, b"busy").await, b"busy");
}
