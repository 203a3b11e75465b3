//! A gateway's pool addresses. The cloud routes each public pool address of the site (a
//! Hetzner floating IP, a Vultr reserved IP) to the gateway, and, as both clouds ask of a
//! server that holds such an address, the gateway puts it on the interface that holds its
//! stable address, as a /32: the gateway then answers for it, and the DNAT rules of its
//! table ([`super::nft`]) send the pool's ports on to the pool's healthy nodes.
//!
//! The agent adds the addresses its role names and removes the ones it added that the role
//! no longer names (a pool that stopped being public, or a gateway that lost its role); it
//! never touches an address it did not add.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use orc_mesh::config::GatewayRole;

use super::{MeshError, run};

/// The addresses this agent added, with the interface each is on.
#[derive(Debug, Default)]
pub struct PoolAddresses {
    held: BTreeMap<Ipv4Addr, String>,
}

impl PoolAddresses {
    /// Makes the interface addresses match `role` (none: remove every one added).
    pub async fn apply(&mut self, role: Option<&GatewayRole>) -> Result<(), MeshError> {
        let wanted: BTreeSet<Ipv4Addr> = role
            .iter()
            .flat_map(|r| r.pool_forwards.iter().map(|p| p.address))
            .filter(|a| Some(*a) != role.map(|r| r.stable_ipv4))
            .collect();
        let gone: Vec<(Ipv4Addr, String)> = self
            .held
            .iter()
            .filter(|(a, _)| !wanted.contains(a))
            .map(|(a, i)| (*a, i.clone()))
            .collect();
        for (address, interface) in gone {
            // The interface may be gone with its address: that is no failure.
            let _ = run(
                "ip",
                &["addr", "del", &format!("{address}/32"), "dev", &interface],
            )
            .await;
            self.held.remove(&address);
            tracing::info!(%address, %interface, "released a pool address");
        }
        let Some(role) = role else {
            return Ok(());
        };
        if wanted.iter().all(|a| self.held.contains_key(a)) {
            return Ok(());
        }
        let listing = output("ip", &["-o", "-4", "addr", "show"]).await?;
        let Some(interface) = interface_holding(&listing, role.stable_ipv4) else {
            tracing::warn!(stable = %role.stable_ipv4, "no interface holds the site's stable address; the pool addresses are not added");
            return Ok(());
        };
        for address in wanted {
            if self.held.contains_key(&address) {
                continue;
            }
            run(
                "ip",
                &[
                    "addr",
                    "replace",
                    &format!("{address}/32"),
                    "dev",
                    &interface,
                ],
            )
            .await?;
            tracing::info!(%address, %interface, "holds a pool address");
            self.held.insert(address, interface.clone());
        }
        Ok(())
    }
}

/// The interface that holds `address`, from `ip -o -4 addr show` output
/// (`2: eth0    inet 198.18.0.20/20 brd … scope global eth0`).
pub fn interface_holding(listing: &str, address: Ipv4Addr) -> Option<String> {
    listing.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let _index = words.next()?;
        let interface = words.next()?;
        let words: Vec<&str> = words.collect();
        let cidr = words.iter().skip_while(|w| **w != "inet").nth(1)?;
        let held: Ipv4Addr = cidr.split('/').next()?.parse().ok()?;
        (held == address).then(|| interface.split('@').next().unwrap_or(interface).to_string())
    })
}

async fn output(program: &str, args: &[&str]) -> Result<String, MeshError> {
    let command = format!("{program} {}", args.join(" "));
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| MeshError::Command {
            command: command.clone(),
            output: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(MeshError::Command {
            command,
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::interface_holding;

    const LISTING: &str = "\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 198.18.0.20/20 brd 198.18.15.255 scope global eth0\\       valid_lft forever preferred_lft forever
2: eth0    inet 198.18.0.41/32 scope global eth0\\       valid_lft forever preferred_lft forever
3: ens10@if12    inet 10.128.0.2/24 brd 10.128.0.255 scope global ens10\\       valid_lft forever
";

    #[test]
    fn the_interface_holding_an_address_is_found() {
        assert_eq!(
            interface_holding(LISTING, "198.18.0.20".parse().unwrap()).as_deref(),
            Some("eth0")
        );
        assert_eq!(
            interface_holding(LISTING, "10.128.0.2".parse().unwrap()).as_deref(),
            Some("ens10")
        );
        assert_eq!(
            interface_holding(LISTING, "198.18.0.21".parse().unwrap()),
            None
        );
    }
}
