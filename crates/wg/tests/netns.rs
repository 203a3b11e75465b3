//! Privileged tests: two namespaces joined by a veth pair, one orc-wg device in each
//! (mesh 10.99.0.1/24 and 10.99.0.2/24), real pings and TCP through the tunnel.
//!
//! They need root and /dev/net/tun and fail, rather than skip, without them. Every test
//! builds its own namespaces (named `orcwg-<pid>-<n>-a|b`), and a guard removes them and
//! everything running in them, also when the test fails.

mod support;

use std::net::SocketAddrV4;

use orc_wg::{Batching, Device, PeerStats};
use support::{MESH_A, MESH_B, PORT, Pair, UNDERLAY_A, checksum, pattern, peer_of, tcp_transfer};

fn stats_of(device: &Device, peer: &Device) -> PeerStats {
    device
        .stats()
        .into_iter()
        .find(|s| s.public_key == peer.public_key())
        .expect("the peer is in the stats")
}

fn ping_and_transfer(batching: Batching) {
    let pair = Pair::new(batching, true);
    let t = &pair.topology;
    assert!(t.ping_until_answered(&t.a, MESH_B, 10), "A never reached B");
    assert!(t.ping(&t.a, MESH_B, 2), "ping A -> B");
    assert!(t.ping(&t.b, MESH_A, 2), "ping B -> A");

    let data = pattern(7, 8 << 20);
    let received = tcp_transfer(&t.a, &t.b, MESH_B, 5001, data.clone());
    assert_eq!(received.len(), data.len(), "bytes received");
    assert_eq!(
        checksum(&received),
        checksum(&data),
        "checksum of what arrived"
    );

    let back = pattern(11, 3 << 20);
    let received = tcp_transfer(&t.b, &t.a, MESH_A, 5002, back.clone());
    assert_eq!(checksum(&received), checksum(&back), "checksum B -> A");

    let a_sees_b = stats_of(pair.a(), pair.b());
    assert!(a_sees_b.last_handshake.is_some(), "{a_sees_b:?}");
    assert!(a_sees_b.tx_bytes > 8 << 20, "{a_sees_b:?}");
    assert!(a_sees_b.rx_bytes > 3 << 20, "{a_sees_b:?}");
    assert_eq!(
        a_sees_b.endpoint,
        Some(SocketAddrV4::new(support::UNDERLAY_B, PORT))
    );
    let b_sees_a = stats_of(pair.b(), pair.a());
    assert!(b_sees_a.last_handshake.is_some(), "{b_sees_a:?}");
    assert!(b_sees_a.rx_bytes > 8 << 20, "{b_sees_a:?}");
}

#[test]
fn ping_and_tcp_both_ways_with_batching() {
    ping_and_transfer(Batching::Auto);
}

#[test]
fn batching_uses_the_kernel_offloads() {
    // This kind of machine has them (DESIGN.md §8); without them the batched tests above
    // would only exercise the fallback.
    let pair = Pair::new(Batching::Auto, true);
    let batching = pair.a().batching();
    assert!(batching.tun_offload, "no TUN offloads: {batching:?}");
    assert!(batching.udp_gso_segments > 1, "no UDP GSO: {batching:?}");
    assert!(batching.udp_gro_segments > 1, "no UDP GRO: {batching:?}");
    let off = Pair::new(Batching::Off, true);
    let batching = off.a().batching();
    assert!(
        !batching.tun_offload && batching.udp_gso_segments == 1,
        "{batching:?}"
    );
}

#[test]
fn ping_and_tcp_both_ways_one_packet_per_call() {
    ping_and_transfer(Batching::Off);
}

#[test]
fn removing_the_peer_stops_traffic_and_adding_it_back_restores_it() {
    let pair = Pair::new(Batching::Auto, true);
    let t = &pair.topology;
    assert!(t.ping_until_answered(&t.a, MESH_B, 10), "A never reached B");

    pair.a().set_peers(&[]).expect("no peers");
    assert!(pair.a().stats().is_empty());
    assert!(!t.ping(&t.a, MESH_B, 1), "A reached B with no peers");
    assert!(!t.ping(&t.b, MESH_A, 1), "B reached A, which has no peers");

    pair.a()
        .set_peers(&[peer_of(
            pair.b(),
            Some(support::UNDERLAY_B),
            &["10.99.0.2/32"],
        )])
        .expect("peer back");
    assert!(
        t.ping_until_answered(&t.a, MESH_B, 10),
        "A -> B after re-adding"
    );
    assert!(t.ping(&t.b, MESH_A, 2), "B -> A after re-adding");
}

#[test]
fn changing_a_peer_keeps_its_session() {
    let pair = Pair::new(Batching::Auto, true);
    let t = &pair.topology;
    assert!(t.ping_until_answered(&t.a, MESH_B, 10), "A never reached B");
    let before = stats_of(pair.a(), pair.b()).last_handshake;
    assert!(before.is_some());

    let mut changed = peer_of(
        pair.b(),
        Some(support::UNDERLAY_B),
        &["10.99.0.2/32", "10.99.7.0/24"],
    );
    changed.keepalive = Some(25);
    pair.a().set_peers(&[changed]).expect("changed peer");
    assert!(t.ping(&t.a, MESH_B, 2), "A -> B after the change");
    assert_eq!(
        stats_of(pair.a(), pair.b()).last_handshake,
        before,
        "the change started a new session"
    );
}

#[test]
fn packets_from_outside_the_allowed_ips_are_dropped() {
    let pair = Pair::new(Batching::Auto, true);
    let t = &pair.topology;
    assert!(t.ping_until_answered(&t.a, MESH_B, 10), "A never reached B");
    // A gets a second address that B does not allow for A; B routes replies to it through
    // the tunnel so that only cryptokey routing can stop the exchange.
    support::must(
        "ip",
        &[
            "-n",
            &t.a,
            "addr",
            "add",
            "10.99.1.1/32",
            "dev",
            support::WG_NAME,
        ],
    );
    support::must(
        "ip",
        &[
            "-n",
            &t.b,
            "route",
            "add",
            "10.99.1.0/24",
            "dev",
            support::WG_NAME,
        ],
    );
    let from_outside = |t: &support::Topology| {
        t.exec(
            &t.a,
            &[
                "ping",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "2",
                "-q",
                "-I",
                "10.99.1.1",
                "10.99.0.2",
            ],
        )
        .status
        .success()
    };
    let delivered_to_b = |t: &support::Topology| -> u64 {
        let out = t.exec(
            &t.b,
            &[
                "cat",
                &format!("/sys/class/net/{}/statistics/rx_packets", support::WG_NAME),
            ],
        );
        // What the device writes to its TUN device, the kernel counts as received.
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("counter")
    };
    let before = delivered_to_b(t);
    assert!(
        !from_outside(t),
        "B accepted a source outside A's allowed IPs"
    );
    assert_eq!(
        delivered_to_b(t),
        before,
        "B's device wrote the packets to its TUN"
    );

    // Control: once B allows it (and A routes replies back), the same ping goes through.
    pair.b()
        .set_peers(&[peer_of(
            pair.a(),
            Some(UNDERLAY_A),
            &["10.99.0.1/32", "10.99.1.0/24"],
        )])
        .expect("B allows 10.99.1.0/24");
    assert!(from_outside(t), "the allowed source did not get through");
}

#[test]
fn a_peer_without_endpoint_is_reached_once_it_has_sent() {
    let pair = Pair::new(Batching::Auto, false);
    let t = &pair.topology;
    assert!(
        !t.ping(&t.b, MESH_A, 1),
        "B reached A without an endpoint for it"
    );
    assert_eq!(stats_of(pair.b(), pair.a()).endpoint, None);

    assert!(t.ping_until_answered(&t.a, MESH_B, 10), "A never reached B");
    assert_eq!(
        stats_of(pair.b(), pair.a()).endpoint,
        Some(SocketAddrV4::new(UNDERLAY_A, PORT)),
        "B did not learn A's endpoint"
    );
    assert!(t.ping(&t.b, MESH_A, 2), "B -> A after A dialled in");
}

#[test]
fn shutdown_removes_the_interface() {
    let mut pair = Pair::new(Batching::Auto, true);
    let shown = |pair: &Pair| {
        pair.topology
            .exec(&pair.topology.a, &["ip", "link", "show", support::WG_NAME])
            .status
            .success()
    };
    assert!(shown(&pair), "interface missing after create");
    let a = pair.a.take().expect("device A");
    pair.rt_a.run(a.shutdown());
    assert!(!shown(&pair), "interface still there after shutdown");
}

/// orc-wg speaks WireGuard: it interoperates with Debian's wireguard-go (the userspace
/// implementation nodes without orc-wg run), batched on both sides.
#[test]
fn interoperates_with_wireguard_go() {
    let topology = support::Topology::new();
    let rt_a = support::NsRuntime::new(&topology.a, 2);
    let a = rt_a
        .run(Device::create(support::device_config(
            MESH_A,
            Batching::Auto,
        )))
        .expect("device A");
    let b_key = orc_wg::generate_private_key().expect("key");
    let name = format!("wgoit{}", std::process::id() % 100_000);
    let _b = support::WireguardGo::start(
        &topology.b,
        &name,
        &b_key,
        MESH_B,
        &peer_of(&a, Some(UNDERLAY_A), &["10.99.0.1/32"]),
    );
    a.set_peers(&[orc_wg::PeerConfig {
        public_key: orc_wg::public_key(&b_key),
        endpoint: Some(SocketAddrV4::new(support::UNDERLAY_B, PORT)),
        allowed_ips: vec!["10.99.0.2/32".parse().unwrap()],
        keepalive: None,
    }])
    .expect("A's peers");

    let t = &topology;
    assert!(
        t.ping_until_answered(&t.a, MESH_B, 10),
        "A never reached wireguard-go"
    );
    assert!(t.ping(&t.b, MESH_A, 2), "wireguard-go -> A");
    let data = pattern(3, 4 << 20);
    let received = tcp_transfer(&t.a, &t.b, MESH_B, 5003, data.clone());
    assert_eq!(checksum(&received), checksum(&data), "A -> wireguard-go");
    let received = tcp_transfer(&t.b, &t.a, MESH_A, 5004, data.clone());
    assert_eq!(checksum(&received), checksum(&data), "wireguard-go -> A");
    rt_a.run(a.shutdown());
}
