//! What one agent is told to set up: its WireGuard interfaces with their peers, its routes,
//! and (on a site gateway) the NAT and forwarding of its site. Private keys are not part of
//! it: each agent makes its own and only its public key travels.
//!
//! Every list is sorted, so two equal configs serialise to the same bytes and
//! [`MeshConfig::digest`] tells whether an agent's config changed.
//!
//! The big lists are shared: every node of a project holds the same peer table (less itself)
//! and the same host names, so a plan of N nodes holds each table once ([`Shared`],
//! [`PeerList`]), not N times, and each table's digest is computed once.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use ipnet::Ipv4Net;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

use crate::key::PublicKey;

/// A value that many configs hold at once: cloning it is cheap, and its digest (SHA-256 of
/// its JSON) is computed once.
pub struct Shared<T>(Arc<SharedValue<T>>);

struct SharedValue<T> {
    value: T,
    digest: OnceLock<[u8; 32]>,
}

impl<T> Shared<T> {
    pub fn new(value: T) -> Shared<T> {
        Shared(Arc::new(SharedValue {
            value,
            digest: OnceLock::new(),
        }))
    }

    /// True when both are the same value (not a copy of it).
    pub fn same(&self, other: &Shared<T>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T: Serialize> Shared<T> {
    /// SHA-256 of the value's JSON: equal values have equal digests.
    pub fn digest(&self) -> [u8; 32] {
        *self.0.digest.get_or_init(|| {
            let bytes = serde_json::to_vec(&self.0.value).expect("a config part serialises");
            Sha256::digest(bytes).into()
        })
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Shared::new(value)
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared::new(T::default())
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || self.0.value == other.0.value
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Shared::new)
    }
}

/// An interface's peers: a table sorted by public key, shared by every member that sees the
/// same peers, less the member's own entry (`skip`).
#[derive(Clone, Default)]
pub struct PeerList {
    table: Shared<Vec<Peer>>,
    skip: Option<PublicKey>,
}

impl PeerList {
    /// A list of `peers` of one's own (sorted here).
    pub fn new(mut peers: Vec<Peer>) -> PeerList {
        peers.sort_by_key(|p| p.public_key);
        PeerList {
            table: Shared::new(peers),
            skip: None,
        }
    }

    /// The peers of `table` (sorted by public key) but the one whose key is `skip`.
    pub fn shared(table: Shared<Vec<Peer>>, skip: Option<PublicKey>) -> PeerList {
        debug_assert!(table.is_sorted_by_key(|p| p.public_key));
        PeerList { table, skip }
    }

    /// The whole table and the key left out of it.
    pub fn parts(&self) -> (&Shared<Vec<Peer>>, Option<PublicKey>) {
        (&self.table, self.skip)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Peer> + '_ {
        let skip = self.skip;
        self.table
            .iter()
            .filter(move |p| Some(p.public_key) != skip)
    }

    pub fn len(&self) -> usize {
        let skipped = self
            .skip
            .is_some_and(|key| self.get_in_table(&key).is_some());
        self.table.len() - usize::from(skipped)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The peer with `key`.
    pub fn get(&self, key: &PublicKey) -> Option<&Peer> {
        if self.skip == Some(*key) {
            return None;
        }
        self.get_in_table(key)
    }

    fn get_in_table(&self, key: &PublicKey) -> Option<&Peer> {
        self.table
            .binary_search_by_key(key, |p| p.public_key)
            .ok()
            .map(|i| &self.table[i])
    }

    pub fn to_vec(&self) -> Vec<Peer> {
        self.iter().cloned().collect()
    }
}

impl From<Vec<Peer>> for PeerList {
    fn from(peers: Vec<Peer>) -> Self {
        PeerList::new(peers)
    }
}

impl PartialEq for PeerList {
    fn eq(&self, other: &Self) -> bool {
        (self.table.same(&other.table) && self.skip == other.skip) || self.iter().eq(other.iter())
    }
}

impl Eq for PeerList {}

impl fmt::Debug for PeerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for PeerList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for PeerList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Peer>::deserialize(deserializer).map(PeerList::new)
    }
}

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
    /// Names the agent answers for (`<node>.<project>.<org>.internal`), sorted by name;
    /// shared by every node of a project.
    pub hosts: Shared<Vec<HostEntry>>,
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

    /// A digest of the config: equal configs have equal digests. The shared tables enter by
    /// their own digests, so a node's digest costs the same whatever the size of its mesh.
    /// (Two configs whose tables differ only in the entry each leaves out get different
    /// digests although they hold the same peers: a needless push, never a missed one.)
    pub fn digest(&self) -> String {
        #[derive(Serialize)]
        struct Form<'a> {
            interfaces: Vec<InterfaceForm<'a>>,
            routes: &'a [Route],
            gateway: &'a Option<GatewayRole>,
            hosts: [u8; 32],
        }
        #[derive(Serialize)]
        struct InterfaceForm<'a> {
            name: &'a str,
            address: Option<Ipv4Net>,
            listen_port: u16,
            peers: [u8; 32],
            skip: Option<PublicKey>,
        }
        let form = Form {
            interfaces: self
                .interfaces
                .iter()
                .map(|i| InterfaceForm {
                    name: &i.name,
                    address: i.address,
                    listen_port: i.listen_port,
                    peers: i.peers.table.digest(),
                    skip: i.peers.skip,
                })
                .collect(),
            routes: &self.routes,
            gateway: &self.gateway,
            hosts: self.hosts.digest(),
        };
        let bytes = serde_json::to_vec(&form).expect("a config serialises");
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
    pub peers: PeerList,
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
