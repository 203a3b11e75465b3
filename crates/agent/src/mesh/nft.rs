//! A site gateway's NAT and forwarding as one nftables table (`ip orc`), rendered from its
//! [`GatewayRole`] and the pool targets that answer their health checks now.
//!
//! The script replaces the whole table in one transaction (`nft -f`), so the gateway is
//! never half configured: it adds the table (harmless when it exists), deletes it, and adds
//! it again with its chains.
//!
//! - **prerouting (dstnat):** each node's forward port on the stable address to the node's
//!   mesh port; each pool address's ports to its healthy targets, spread with `numgen`. A
//!   pool address with no healthy target forwards nothing, so the connection is refused
//!   rather than sent to a node that is down.
//! - **postrouting (srcnat):** the site's traffic toward a prefix in `no_nat` (its own
//!   site and the backbone's) leaves unchanged; everything else from the site leaves as the
//!   stable address.
//! - **forward (filter):** nothing is forwarded to or from a `blocked` prefix (the mesh
//!   range: mesh traffic only ever travels inside WireGuard).

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use orc_mesh::config::GatewayRole;

/// The table's family and name.
pub const TABLE: &str = "ip orc";

/// The `nft -f` script for `role`, with `healthy(pool address, target)` telling which
/// targets answer.
pub fn gateway_script(role: &GatewayRole, healthy: impl Fn(Ipv4Addr, Ipv4Addr) -> bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "table {TABLE} {{}}");
    let _ = writeln!(s, "delete table {TABLE}");
    let _ = writeln!(s, "table {TABLE} {{");

    let _ = writeln!(s, "  chain prerouting {{");
    let _ = writeln!(
        s,
        "    type nat hook prerouting priority dstnat; policy accept;"
    );
    for forward in &role.udp_forwards {
        let _ = writeln!(
            s,
            "    ip daddr {} udp dport {} dnat to {}",
            role.stable_ipv4, forward.port, forward.to
        );
    }
    for pool in &role.pool_forwards {
        let targets: Vec<Ipv4Addr> = pool
            .targets
            .iter()
            .copied()
            .filter(|t| healthy(pool.address, *t))
            .collect();
        if targets.is_empty() {
            let _ = writeln!(
                s,
                "    # {} at {}: no healthy node",
                pool.pool, pool.address
            );
            continue;
        }
        for port in &pool.ports {
            let protocol = if port.protocol == "udp" { "udp" } else { "tcp" };
            let to = match targets.as_slice() {
                [one] => one.to_string(),
                many => {
                    let map: Vec<String> = many
                        .iter()
                        .enumerate()
                        .map(|(i, t)| format!("{i} : {t}"))
                        .collect();
                    format!("numgen inc mod {} map {{ {} }}", many.len(), map.join(", "))
                }
            };
            let _ = writeln!(
                s,
                "    ip daddr {} {protocol} dport {} dnat to {to}",
                pool.address, port.port
            );
        }
    }
    let _ = writeln!(s, "  }}");

    let _ = writeln!(s, "  chain postrouting {{");
    let _ = writeln!(
        s,
        "    type nat hook postrouting priority srcnat; policy accept;"
    );
    if !role.no_nat.is_empty() {
        let _ = writeln!(
            s,
            "    ip saddr {} ip daddr {{ {} }} accept",
            role.site_prefix,
            join(&role.no_nat)
        );
    }
    let _ = writeln!(
        s,
        "    ip saddr {} snat to {}",
        role.site_prefix, role.stable_ipv4
    );
    let _ = writeln!(s, "  }}");

    let _ = writeln!(s, "  chain forward {{");
    let _ = writeln!(
        s,
        "    type filter hook forward priority filter; policy accept;"
    );
    if !role.blocked.is_empty() {
        let blocked = join(&role.blocked);
        let _ = writeln!(s, "    ip daddr {{ {blocked} }} drop");
        let _ = writeln!(s, "    ip saddr {{ {blocked} }} drop");
    }
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "}}");
    s
}

/// The script that removes the table (a gateway that lost its role).
pub fn removal_script() -> String {
    format!("table {TABLE} {{}}\ndelete table {TABLE}\n")
}

fn join<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use orc_mesh::config::{ForwardPort, PoolForward, UdpForward};

    use super::*;

    fn role() -> GatewayRole {
        GatewayRole {
            site: "partner/eu-central-a".into(),
            site_prefix: "10.128.0.0/24".parse().unwrap(),
            stable_ipv4: "198.18.1.10".parse().unwrap(),
            no_nat: vec![
                "10.128.0.0/24".parse().unwrap(),
                "10.128.1.0/24".parse().unwrap(),
            ],
            blocked: vec!["10.88.0.0/16".parse().unwrap()],
            udp_forwards: vec![UdpForward {
                port: 52011,
                to: "10.128.0.11:51820".parse().unwrap(),
            }],
            pool_forwards: vec![PoolForward {
                pool: "acme/web/api".into(),
                address: "198.18.1.20".parse().unwrap(),
                ports: vec![ForwardPort {
                    protocol: "tcp".into(),
                    port: 80,
                }],
                targets: vec![
                    "10.128.0.11".parse().unwrap(),
                    "10.128.1.12".parse().unwrap(),
                ],
            }],
        }
    }

    #[test]
    fn the_table_is_replaced_whole_with_forwards_nat_and_blocks() {
        let script = gateway_script(&role(), |_, _| true);
        assert!(script.starts_with("table ip orc {}\ndelete table ip orc\ntable ip orc {\n"));
        for line in [
            "    ip daddr 198.18.1.10 udp dport 52011 dnat to 10.128.0.11:51820\n",
            "    ip daddr 198.18.1.20 tcp dport 80 dnat to numgen inc mod 2 map { 0 : 10.128.0.11, 1 : 10.128.1.12 }\n",
            "    ip saddr 10.128.0.0/24 ip daddr { 10.128.0.0/24, 10.128.1.0/24 } accept\n",
            "    ip saddr 10.128.0.0/24 snat to 198.18.1.10\n",
            "    ip daddr { 10.88.0.0/16 } drop\n",
        ] {
            assert!(script.contains(line), "{line} missing from:\n{script}");
        }
    }

    #[test]
    fn only_healthy_targets_are_forwarded_to() {
        let down: Ipv4Addr = "10.128.1.12".parse().unwrap();
        let script = gateway_script(&role(), |_, t| t != down);
        assert!(
            script.contains("ip daddr 198.18.1.20 tcp dport 80 dnat to 10.128.0.11\n"),
            "{script}"
        );
        let none = gateway_script(&role(), |_, _| false);
        assert!(!none.contains("198.18.1.20 tcp"), "{none}");
        assert!(none.contains("# acme/web/api at 198.18.1.20: no healthy node"));
    }
}
