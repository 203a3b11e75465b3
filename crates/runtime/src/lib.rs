//! The agent's side of apps.
//!
//! - [`containerd`]: containerd over its gRPC API (containers, tasks), from our own
//!   wire-compatible protos compiled with `protox`.
//! - [`daemon`]: a containerd of the agent's own (root, state, socket, config), started and
//!   supervised, or the host's at a given socket.
//! - [`image`]: images pulled by digest from a registry (or read from an OCI layout), every
//!   blob checked against its digest, layers unpacked once each.
//! - [`spec`]: the OCI runtime spec of a replica.
//! - [`registry`]: an OCI registry's credentials and challenges, as any client answers them.
//! - [`network`]: each replica's network namespace and address on the node's bridge.
//! - [`supervisor`]: the node's replicas kept as the last assignment says: created,
//!   restarted by their policy, probed, adopted after an agent restart.
//!
//! Nothing here decides what runs: the agent's assignment does.

pub mod containerd;
pub mod daemon;
pub mod image;
pub mod network;
pub mod registry;
pub mod spec;
pub mod supervisor;
