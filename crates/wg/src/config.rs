//! What the caller asks for: one interface ([`DeviceConfig`]) and its whole peer set
//! ([`PeerConfig`]). Plain data; [`Device::create`](crate::Device::create) and
//! [`Device::set_peers`](crate::Device::set_peers) validate it.

use std::fmt;
use std::net::SocketAddrV4;

use ipnet::Ipv4Net;

use crate::key::KeyDisplay;

/// A WireGuard (X25519) key, public or private: 32 bytes.
pub type Key = [u8; 32];

/// The interface to create.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Interface name (at most 15 bytes, as Linux allows).
    pub name: String,
    /// This device's static private key.
    pub private_key: Key,
    /// UDP port to listen on, on 0.0.0.0; 0 picks a free one
    /// ([`Device::listen_port`](crate::Device::listen_port) tells which).
    pub listen_port: u16,
    /// The interface's own address and prefix, which also routes the prefix to the interface.
    pub address: Option<Ipv4Net>,
    /// Interface MTU (WireGuard's usual 1420 leaves room for 80 bytes of IPv6+UDP+WireGuard
    /// overhead on a 1500-byte underlay).
    pub mtu: u16,
    /// Whether to batch packets with kernel offloads.
    pub batching: Batching,
}

impl fmt::Debug for DeviceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceConfig")
            .field("name", &self.name)
            .field("private_key", &"(redacted)")
            .field("listen_port", &self.listen_port)
            .field("address", &self.address)
            .field("mtu", &self.mtu)
            .field("batching", &self.batching)
            .finish()
    }
}

/// How the datapath moves packets between the kernel and the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Batching {
    /// TUN offloads (TSO super-packets in, GRO-coalesced packets out) and UDP GSO/GRO where
    /// the kernel has them; one packet per system call where it does not.
    #[default]
    Auto,
    /// One packet per system call, always (the fallback, kept for comparison and debugging).
    Off,
}

/// One peer of the interface, as [`Device::set_peers`](crate::Device::set_peers) wants it.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The peer's static public key; identifies the peer.
    pub public_key: Key,
    /// Where to send to until the peer is heard from elsewhere; `None` for a peer that dials
    /// in (its endpoint is learnt from its first authenticated packet).
    pub endpoint: Option<SocketAddrV4>,
    /// Inner addresses routed to this peer and accepted from it.
    pub allowed_ips: Vec<Ipv4Net>,
    /// Persistent keepalive interval in seconds (keeps NAT mappings open).
    pub keepalive: Option<u16>,
}

impl fmt::Debug for PeerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerConfig")
            .field("public_key", &KeyDisplay(&self.public_key))
            .field("endpoint", &self.endpoint)
            .field("allowed_ips", &self.allowed_ips)
            .field("keepalive", &self.keepalive)
            .finish()
    }
}
