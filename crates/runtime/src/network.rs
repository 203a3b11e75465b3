//! Replicas' networks: each replica in a network namespace of its own, with one address of
//! its node's workload subnet, on a bridge of the node.
//!
//! The node holds a bridge (`orc-br0`) with the subnet's first address as the replicas'
//! gateway. A replica's namespace (`orc-r-<hash of the replica>`, under `/var/run/netns`) gets a veth
//! whose other end is on the bridge, its address with the subnet's prefix, and a default
//! route through the bridge. Traffic to other nodes' workload subnets leaves the node by its
//! own routes (the mesh), with the replica's address as source: no NAT, so every replica of
//! a project reaches every other by its address. Everything runs in the network namespace
//! of the process that calls, which on a node is the node's.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use tokio::process::Command;

/// The node's bridge for replicas.
pub const BRIDGE: &str = "orc-br0";

/// Why a replica's network could not be made or removed.
#[derive(Debug, thiserror::Error)]
#[error("{command}: {output}")]
pub struct NetworkError {
    /// The command that failed.
    pub command: String,
    /// What it said.
    pub output: String,
}

async fn run(program: &str, args: &[&str]) -> Result<String, NetworkError> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| NetworkError {
            command: command.clone(),
            output: e.to_string(),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(NetworkError {
            command,
            output: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// A node's workload subnet: replicas' addresses and their gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    /// The network, e.g. `10.89.3.0/24`.
    pub net: ipnet::Ipv4Net,
}

impl Subnet {
    /// The bridge's address, the replicas' gateway: the subnet's first address.
    pub fn gateway(&self) -> Ipv4Addr {
        self.net.hosts().next().unwrap_or(self.net.network())
    }
}

/// The prefix of replicas' namespace names on a node.
pub const DEFAULT_PREFIX: &str = "orc-r-";

/// The namespace name of replica `id`: `prefix` and a hash of the id (interface names are
/// short, so the id is hashed into them).
pub fn namespace_of(prefix: &str, id: &str) -> String {
    format!("{prefix}{}", short_hash(id))
}

/// The path runc joins for replica `id`.
pub fn namespace_path(prefix: &str, id: &str) -> PathBuf {
    PathBuf::from("/var/run/netns").join(namespace_of(prefix, id))
}

fn short_hash(id: &str) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(id.as_bytes());
    hash.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

/// Makes sure the node's bridge exists, is up and holds the subnet's gateway address.
pub async fn ensure_bridge(subnet: &Subnet) -> Result<(), NetworkError> {
    let exists = run("ip", &["link", "show", BRIDGE]).await.is_ok();
    if !exists {
        run("ip", &["link", "add", BRIDGE, "type", "bridge"]).await?;
    }
    let address = format!("{}/{}", subnet.gateway(), subnet.net.prefix_len());
    let shown = run("ip", &["-o", "-4", "addr", "show", "dev", BRIDGE]).await?;
    if !shown.contains(&format!(" {address} ")) {
        run("ip", &["addr", "replace", &address, "dev", BRIDGE]).await?;
    }
    run("ip", &["link", "set", BRIDGE, "up"]).await?;
    // Replicas' packets to other nodes are forwarded by the node.
    let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", "1");
    Ok(())
}

/// Gives replica `id` its namespace, address and route; returns the namespace's path.
/// A namespace that exists already is kept as it is (an agent that restarts finds its
/// replicas' networks in place).
pub async fn attach(
    prefix: &str,
    id: &str,
    subnet: &Subnet,
    address: Ipv4Addr,
) -> Result<PathBuf, NetworkError> {
    let ns = namespace_of(prefix, id);
    let path = namespace_path(prefix, id);
    if path.exists() {
        return Ok(path);
    }
    let hash = short_hash(id);
    let (host_end, replica_end) = (format!("orcv{hash}"), format!("orcp{hash}"));
    run("ip", &["netns", "add", &ns]).await?;
    let result = async {
        let _ = run("ip", &["link", "del", &host_end]).await;
        run(
            "ip",
            &[
                "link",
                "add",
                &host_end,
                "type",
                "veth",
                "peer",
                "name",
                &replica_end,
            ],
        )
        .await?;
        run("ip", &["link", "set", &host_end, "master", BRIDGE]).await?;
        run("ip", &["link", "set", &host_end, "up"]).await?;
        run("ip", &["link", "set", &replica_end, "netns", &ns]).await?;
        run(
            "ip",
            &["-n", &ns, "link", "set", &replica_end, "name", "eth0"],
        )
        .await?;
        let cidr = format!("{address}/{}", subnet.net.prefix_len());
        run("ip", &["-n", &ns, "addr", "add", &cidr, "dev", "eth0"]).await?;
        run("ip", &["-n", &ns, "link", "set", "eth0", "up"]).await?;
        run("ip", &["-n", &ns, "link", "set", "lo", "up"]).await?;
        run(
            "ip",
            &[
                "-n",
                &ns,
                "route",
                "add",
                "default",
                "via",
                &subnet.gateway().to_string(),
            ],
        )
        .await?;
        Ok::<_, NetworkError>(())
    }
    .await;
    if let Err(error) = result {
        let _ = run("ip", &["netns", "del", &ns]).await;
        let _ = run("ip", &["link", "del", &host_end]).await;
        return Err(error);
    }
    Ok(path)
}

/// Removes replica `id`'s namespace and its veth.
pub async fn detach(prefix: &str, id: &str) {
    let hash = short_hash(id);
    let _ = run("ip", &["netns", "del", &namespace_of(prefix, id)]).await;
    let _ = run("ip", &["link", "del", &format!("orcv{hash}")]).await;
}
