//! Node ports: ports of the node's own addresses sent straight to a replica, by a
//! destination NAT rule in the agent's table `ip orc-ports`, so the container sees the
//! client's own address and no process of the node stands in between.
//!
//! A replica's ports are published while it is ready (for a service with `udp`, its
//! `http` or `tcp` endpoint says so; UDP is not probed) and none of them is taken by a
//! process of the node: a port a host process listens on is reported on the replica as
//! `node_port_unavailable` and left to that process. Only packets to one of the node's own
//! addresses (`fib daddr type local`) arriving from outside are translated, so a replica's
//! own connections to some other host's port of the same number leave untouched, and the
//! node's connections to itself are not translated either (test from another machine).
//! The whole table is written in one `nft -f` transaction when what is published changes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::sync::Mutex;

/// The table's family and name.
pub const TABLE: &str = "ip orc-ports";

/// One published port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Published {
    /// `tcp` or `udp`.
    pub protocol: String,
    /// The node's port.
    pub port: u16,
    /// The replica's address.
    pub address: Ipv4Addr,
    /// The container's port.
    pub container_port: u16,
}

/// The `nft -f` script that makes the table hold `published`, and nothing else.
pub fn script(published: &BTreeSet<Published>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "table {TABLE} {{}}");
    let _ = writeln!(s, "delete table {TABLE}");
    if published.is_empty() {
        return s;
    }
    let _ = writeln!(s, "table {TABLE} {{");
    let _ = writeln!(s, "  chain prerouting {{");
    let _ = writeln!(
        s,
        "    type nat hook prerouting priority dstnat; policy accept;"
    );
    for p in published {
        let protocol = if p.protocol == "udp" { "udp" } else { "tcp" };
        let _ = writeln!(
            s,
            "    fib daddr type local {protocol} dport {} dnat to {}:{}",
            p.port, p.address, p.container_port
        );
    }
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "}}");
    s
}

/// Whether no process of the node holds `port` for `protocol` (a listening TCP socket or
/// a bound UDP one): the port is tried, and given back at once.
pub fn port_free(protocol: &str, port: u16) -> bool {
    let any = SocketAddr::from(([0, 0, 0, 0], port));
    match protocol {
        "udp" => std::net::UdpSocket::bind(any).is_ok(),
        _ => std::net::TcpListener::bind(any).is_ok(),
    }
}

/// The node's table of published ports, as last written.
#[derive(Debug, Default)]
pub struct NodePorts {
    written: Mutex<Option<BTreeSet<Published>>>,
}

impl NodePorts {
    /// Makes the table hold `published`; nothing is run when it already does.
    pub async fn publish(&self, published: BTreeSet<Published>) -> Result<(), String> {
        let mut written = self.written.lock().await;
        if written.as_ref() == Some(&published) {
            return Ok(());
        }
        if written.is_none() && published.is_empty() {
            // Nothing to publish at the first look: only a table an earlier run left goes,
            // and a node without nftables is not troubled for nothing.
            let _ = tokio::process::Command::new("nft")
                .args(["delete", "table", "ip", "orc-ports"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .await;
            *written = Some(published);
            return Ok(());
        }
        crate::mesh::nft(&script(&published))
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(
            ports = published.len(),
            "the node's published ports changed"
        );
        *written = Some(published);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_published_port_is_one_rule_for_the_nodes_own_addresses() {
        let published = BTreeSet::from([
            Published {
                protocol: "tcp".into(),
                port: 25565,
                address: "10.96.3.2".parse().unwrap(),
                container_port: 25565,
            },
            Published {
                protocol: "udp".into(),
                port: 19132,
                address: "10.96.3.2".parse().unwrap(),
                container_port: 19133,
            },
        ]);
        let script = script(&published);
        assert!(script.starts_with("table ip orc-ports {}\ndelete table ip orc-ports\n"));
        assert!(
            script.contains("    fib daddr type local tcp dport 25565 dnat to 10.96.3.2:25565\n")
        );
        assert!(
            script.contains("    fib daddr type local udp dport 19132 dnat to 10.96.3.2:19133\n")
        );
        assert_eq!(
            super::script(&BTreeSet::new()),
            "table ip orc-ports {}\ndelete table ip orc-ports\n",
            "nothing published: no table"
        );
    }

    #[test]
    fn a_port_a_process_holds_is_not_free() {
        let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = held.local_addr().unwrap().port();
        assert!(!port_free("tcp", port));
        drop(held);
        assert!(port_free("tcp", port));
        let held = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = held.local_addr().unwrap().port();
        assert!(!port_free("udp", port));
    }
}
