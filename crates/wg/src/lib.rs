//! The node agent's userspace WireGuard interface (docs/wireguard.md tells the whole story).
//!
//! A [`Device`] is one interface: a TUN device for the inner packets, a UDP socket for the
//! underlay, and tokio tasks in between. boringtun's `noise::Tunn` is the WireGuard state
//! machine (handshakes, sessions, encryption), used as a library without I/O; everything
//! else lives here:
//!
//! - [`config`]: what the caller asks for ([`DeviceConfig`], [`PeerConfig`]).
//! - `diff`: the difference between the peer set a device has and the one it is given.
//! - `routing`: cryptokey routing, the allowed-IPs table (longest prefix match).
//! - `engine`: the per-packet logic between the loops (peer lookup, roaming, timers, stats);
//!   it takes packets and returns packets, with no I/O.
//! - `io`: the loops: batched with TUN offloads and UDP GSO/GRO where the kernel has them,
//!   one packet per system call where it does not.
//!
//! This crate has no `unsafe` code: the system calls that batching needs are made by
//! `tun-rs` (TUN offloads, splitting and coalescing) and `quinn-udp` (UDP GSO/GRO).
//!
//! Nothing here reads the zone's config or knows about projects; the agent turns its mesh
//! config into [`PeerConfig`]s.

pub mod config;
mod device;
mod diff;
mod engine;
mod error;
mod io;
mod key;
mod routing;

pub use config::{Batching, DeviceConfig, Key, PeerConfig};
pub use device::{BatchingInUse, Device};
pub use engine::PeerStats;
pub use error::Error;
pub use key::{generate_private_key, public_key};
