//! What one agent is told to set up: its WireGuard interfaces with their peers, its routes,
//! and (on a site gateway) the NAT and forwarding of its site. Private keys are not part of
//! it: each agent makes its own and only its public key travels.
//!
//! Every list is sorted, so two equal configs serialise to the same bytes and
//! [`MeshConfig::digest`] tells whether an agent's config changed.

use std::net::{Ipv4Addr, SocketAddrV4};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::key::PublicKey;

/// The name of a node's project mesh interface.
pub const MESH_INTERFACE: &str = "orc-mesh";
/// The name of a gateway's backbone interface.
pub const BACKBONE_INTERFACE: &str = "orc-backbone";
/// The UDP port of every project mesh interface.
pub const MESH_PORT: u16 = 51820;
/// The UDP port of every gateway's backbone interface.
pub const BACKBONE_PORT: u16 = 51821;
/// A gateway forwards UDP port `FORWARD_BASE + h` of its stable address to the mesh port of
/// its site's node whose private address ends in `h`, so peers outside the backbone (and
/// workstations) reach nodes that have no public address.
pub const FORWARD_BASE: u16 = 52000;
/// The MTU of a gateway's backbone interface: a 1500-byte underlay less WireGuard's 80
/// bytes of overhead.
pub const BACKBONE_MTU: u16 = 1420;
/// The MTU of a project mesh interface: its packets may cross the backbone inside a second
/// WireGuard layer, so 80 bytes less again (no fragments, no lost big packets).
pub const MESH_MTU: u16 = 1340;
/// Keep-alive of a peer behind NAT, seconds.
pub const KEEPALIVE_SECONDS: u16 = 25;

/// An agent's whole mesh config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshConfig {
    /// A node's project mesh, or a gateway's backbone (never both).
    pub interfaces: Vec<Interface>,
    /// Routes through the interfaces (a gateway's remote sites).
    pub routes: Vec<Route>,
    /// What a gateway does for its site.
    pub gateway: Option<GatewayRole>,
    /// Names the agent answers for (`<node>.<project>.<org>.internal`), sorted by name.
    pub hosts: Vec<HostEntry>,
}

impl MeshConfig {
    /// True when there is nothing to set up.
    pub fn is_empty(&self) -> bool {
        self.interfaces.is_empty() && self.gateway.is_none()
    }

    /// True when it is the default (nothing at all), so it may be left out of a digest.
    pub fn is_unset(&self) -> bool {
        *self == MeshConfig::default()
    }

    /// A digest of the config: equal configs have equal digests.
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("a config serialises");
        let digest = Sha256::digest(bytes);
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The interface named `name`.
    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }
}

/// A WireGuard interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    /// The interface's own address and its prefix (`10.88.3.7/24`); a backbone has none.
    pub address: Option<Ipv4Net>,
    pub listen_port: u16,
    /// Sorted by public key.
    pub peers: Vec<Peer>,
}

/// One peer of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// Who the peer is (a node id, `site:<provider>/<site>`, `workstation:<id>`), for people.
    pub name: String,
    pub public_key: PublicKey,
    /// Where to send to; `None` when the peer dials in (it is behind NAT or roams).
    pub endpoint: Option<SocketAddrV4>,
    /// Sorted.
    pub allowed_ips: Vec<Ipv4Net>,
    /// Seconds between keep-alives, for a side that must hold a NAT mapping open.
    pub keepalive: Option<u16>,
}

/// A route through one of the interfaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Route {
    pub destination: Ipv4Net,
    pub interface: String,
}

/// A site gateway's NAT and forwarding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayRole {
    /// `<provider>/<site>`.
    pub site: String,
    /// The site's private prefix.
    pub site_prefix: Ipv4Net,
    /// The stable address that egress leaves by and pool addresses arrive at.
    pub stable_ipv4: Ipv4Addr,
    /// Prefixes that are never masqueraded (the site prefixes reached over the backbone).
    pub no_nat: Vec<Ipv4Net>,
    /// Destinations a gateway never forwards to (the mesh range: mesh traffic is inside
    /// WireGuard, so a mesh address seen in the clear is a stray or an attack).
    pub blocked: Vec<Ipv4Net>,
    /// UDP ports of the stable address forwarded to nodes' mesh ports, sorted by port.
    pub udp_forwards: Vec<UdpForward>,
    /// Pool addresses served at this site, sorted by address.
    pub pool_forwards: Vec<PoolForward>,
}

/// One forwarded UDP port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpForward {
    pub port: u16,
    pub to: SocketAddrV4,
}

/// A public pool's address: what arrives on it is forwarded to the pool's healthy nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolForward {
    /// `<org>/<project>/<pool>`.
    pub pool: String,
    pub address: Ipv4Addr,
    /// Sorted by port.
    pub ports: Vec<ForwardPort>,
    /// The pool's nodes, as the gateway reaches them; sorted. The gateway checks each one's
    /// health and forwards only to those that answer.
    pub targets: Vec<Ipv4Addr>,
}

/// One port of a pool address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardPort {
    /// `tcp` (also for http endpoints) or `udp`.
    pub protocol: String,
    pub port: u16,
}

/// A name the agent answers for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostEntry {
    pub name: String,
    pub address: Ipv4Addr,
}
