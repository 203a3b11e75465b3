//! One packet per system call: read one packet from the TUN device, seal it, send one
//! datagram; receive one datagram, open it, write one packet.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::engine::{Engine, MAX_SEALED};
use crate::io::{Io, carry_on};

pub(crate) async fn outbound(engine: Arc<Engine>, io: Arc<Io>) {
    let mut packet = vec![0u8; 65536];
    let mut sealed = vec![0u8; MAX_SEALED];
    loop {
        let len = match io.tun.recv(&mut packet).await {
            Ok(len) => len,
            Err(error) if carry_on("TUN read", &error).await => continue,
            Err(_) => return,
        };
        let out = engine.encapsulate(&engine.table(), &packet[..len], &mut sealed, Instant::now());
        if let Some(out) = out
            && let Err(error) = io.udp.send_to(&sealed[out.range], out.to).await
        {
            tracing::debug!(to = %out.to, %error, "UDP send failed");
        }
    }
}

pub(crate) async fn inbound(engine: Arc<Engine>, io: Arc<Io>) {
    let mut datagram = vec![0u8; 65536];
    let mut packet = vec![0u8; 65536];
    let mut control = Vec::new();
    loop {
        let (len, from) = match io.udp.recv_from(&mut datagram).await {
            Ok(received) => received,
            Err(error) if carry_on("UDP receive", &error).await => continue,
            Err(_) => return,
        };
        let SocketAddr::V4(from) = from else { continue };
        let opened = engine.decapsulate(
            &engine.table(),
            &datagram[..len],
            from,
            &mut packet,
            &mut control,
            Instant::now(),
        );
        if let Some(range) = opened
            && let Err(error) = io.tun.send(&packet[range]).await
            && !carry_on("TUN write", &error).await
        {
            return;
        }
        io.send_control(&mut control).await;
    }
}
