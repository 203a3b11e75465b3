//! Node ports for real (root): three network namespaces stand for a client, a node and a
//! replica on the node. The node's agent publishes a TCP and a UDP port of the replica in
//! its table; the client reaches the replica through the node's address on both, and the
//! replica sees the client's own address, not the node's. Withdrawn, the ports refuse.
//! Everything made is removed, also when the test fails.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd as _;
use std::process::Command;
use std::time::Duration;

use orc_agent::node_ports::{NodePorts, Published};

/// The namespaces of one run, removed on drop.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `work` on a thread of its own inside namespace `name`.
fn inside<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/var/run/netns/{name}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the namespace exists");
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("entering the namespace (the test runs as root)");
        work()
    })
}

#[test]
fn a_node_port_reaches_the_replica_which_sees_the_clients_own_address() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test makes network namespaces: run it as root (CI does)"
    );
    let tag = std::process::id() % 100_000;
    let (client, node, replica) = (
        format!("orc-npc-{tag}"),
        format!("orc-npn-{tag}"),
        format!("orc-npr-{tag}"),
    );
    let namespaces = Namespaces(vec![client.clone(), node.clone(), replica.clone()]);
    for name in &namespaces.0 {
        ip(&["netns", "add", name]);
    }
    // client 10.250.0.2 — 10.250.0.1 node 10.251.0.1 — 10.251.0.2 replica
    ip(&[
        "-n", &client, "link", "add", "c0", "type", "veth", "peer", "name", "n0", "netns", &node,
    ]);
    ip(&[
        "-n", &node, "link", "add", "n1", "type", "veth", "peer", "name", "r0", "netns", &replica,
    ]);
    for (ns, dev, address) in [
        (&client, "c0", "10.250.0.2/24"),
        (&node, "n0", "10.250.0.1/24"),
        (&node, "n1", "10.251.0.1/24"),
        (&replica, "r0", "10.251.0.2/24"),
    ] {
        ip(&["-n", ns, "addr", "add", address, "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    ip(&[
        "-n",
        &replica,
        "route",
        "add",
        "default",
        "via",
        "10.251.0.1",
    ]);
    let forwarding = Command::new("ip")
        .args([
            "netns",
            "exec",
            &node,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])
        .status()
        .unwrap();
    assert!(forwarding.success());

    // The replica answers each TCP connection and UDP datagram with the peer it saw.
    let replica_tcp = inside(&replica, || {
        let listener = TcpListener::bind("0.0.0.0:9090").unwrap();
        let udp = UdpSocket::bind("0.0.0.0:9091").unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok((_, peer)) = udp.recv_from(&mut buf) {
                let _ = udp.send_to(peer.ip().to_string().as_bytes(), peer);
            }
        });
        for stream in listener.incoming().take(1) {
            let mut stream = stream.unwrap();
            let peer = stream.peer_addr().unwrap();
            stream.write_all(peer.ip().to_string().as_bytes()).unwrap();
        }
    });

    let published = BTreeSet::from([
        Published {
            protocol: "tcp".into(),
            port: 8080,
            address: Ipv4Addr::new(10, 251, 0, 2),
            container_port: 9090,
        },
        Published {
            protocol: "udp".into(),
            port: 8081,
            address: Ipv4Addr::new(10, 251, 0, 2),
            container_port: 9091,
        },
    ]);
    let publish = |set: BTreeSet<Published>| {
        inside(&node, move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let table = NodePorts::default();
                table.publish(set).await
            })
        })
        .join()
        .unwrap()
    };
    publish(published).expect("the table is written");

    let seen = inside(&client, || {
        let node: SocketAddr = "10.250.0.1:8080".parse().unwrap();
        let mut stream = TcpStream::connect_timeout(&node, Duration::from_secs(5)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut tcp = String::new();
        stream.read_to_string(&mut tcp).unwrap();
        let udp = UdpSocket::bind("0.0.0.0:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        udp.send_to(b"hi", "10.250.0.1:8081").unwrap();
        let mut buf = [0u8; 64];
        let (n, _) = udp.recv_from(&mut buf).unwrap();
        (tcp, String::from_utf8_lossy(&buf[..n]).into_owned())
    })
    .join()
    .unwrap();
    assert_eq!(seen.0, "10.250.0.2", "the replica sees the client over TCP");
    assert_eq!(seen.1, "10.250.0.2", "the replica sees the client over UDP");
    replica_tcp.join().unwrap();

    // Withdrawn: the node's port refuses.
    publish(BTreeSet::new()).expect("the table is emptied");
    let refused = inside(&client, || {
        let node: SocketAddr = "10.250.0.1:8080".parse().unwrap();
        TcpStream::connect_timeout(&node, Duration::from_secs(5)).is_err()
    })
    .join()
    .unwrap();
    assert!(refused, "no published port, no way in");
}
