//! Why a device could not be created or a peer set could not be applied.

use std::io;

use ipnet::Ipv4Net;

/// An error of this crate. Each variant names what it was about; the underlying system
/// error, where there is one, is its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The interface name is empty, too long for Linux (15 bytes) or has a `/` or a space.
    #[error("interface name {name:?} is not usable (1 to 15 bytes, no '/' or whitespace)")]
    InvalidName { name: String },
    /// The MTU is outside what WireGuard over IPv4 can carry.
    #[error("interface {name}: MTU {mtu} is outside 576..=65455")]
    InvalidMtu { name: String, mtu: u16 },
    /// Opening `/dev/net/tun`, creating the interface or configuring it failed.
    #[error("interface {name}: could not create or configure the TUN device")]
    Tun {
        name: String,
        #[source]
        source: io::Error,
    },
    /// The UDP socket could not be bound or set up.
    #[error("interface {name}: could not open UDP port {port}")]
    Udp {
        name: String,
        port: u16,
        #[source]
        source: io::Error,
    },
    /// A peer appears twice in one peer set.
    #[error("peer {peer} is listed twice")]
    DuplicatePeer { peer: String },
    /// A peer has this device's own public key.
    #[error("peer {peer} is this device's own key")]
    OwnKey { peer: String },
    /// The same allowed IP prefix is given to two peers, so routing to it is ambiguous.
    #[error("allowed IP {prefix} is given to both peer {first} and peer {second}")]
    AllowedIpConflict {
        prefix: Ipv4Net,
        first: String,
        second: String,
    },
    /// The operating system's random source failed.
    #[error("the operating system's random source failed: {0}")]
    Random(getrandom::Error),
}
