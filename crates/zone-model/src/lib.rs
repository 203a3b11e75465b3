//! The zone's pure vocabulary: what every other zone crate programs against.
//!
//! - [`model`]: typed ids, names, and the records the store keeps (orgs, projects, users,
//!   tokens, providers, pools, nodes, events, usage lines);
//! - [`access`]: roles, who holds which, and what an authenticated caller is;
//! - [`gateway`]: site gateways' pools, named and recognised by their provider's id;
//! - [`pricing`]: what a tenant pays for a node and how its hours become usage lines;
//! - [`endpoints`]: where app pools' slots serve http, and the URL of an edge name;
//! - [`ssh`]: the OpenSSH public keys a tenant has installed on a pool's nodes;
//! - [`agent`]: a node's agent: its certificate, facts and config generations;
//! - [`join`]: join tokens, which admit one named node once and pin the zone's CA;
//! - [`session`]: the access edge's sign-in sessions and how long they last;
//! - [`registry`]: app packages (manifest and one binary per platform) and their digests;
//! - [`oci`]: images in the registry as the OCI distribution API names them.
//!
//! Nothing here does I/O, spawns a task or reads a clock on its own (fresh token values come
//! from the thread's CSPRNG): every function takes the time it needs (only [`Clock`](orc_common::time::Clock) implementations and
//! [`Timestamp::now`](model::Timestamp::now) read the wall clock, for callers that choose
//! them; decisions take an injected clock's time, never those). This crate must never depend
//! on the store, the API, the hub or any runtime (tokio, sqlx, axum, tonic, and so not
//! `orc-proto`, which brings tonic); the store, the API types, the app supervisor and the
//! controller all depend on it.

pub mod access;
pub mod agent;
pub mod endpoints;
pub mod gateway;
pub mod join;
pub mod model;
pub mod oci;
pub mod pricing;
pub mod registry;
pub mod session;
pub mod ssh;

pub use agent::{AgentConfig, AgentIdentity, InterfaceAddress, NodeAgent, NodeFacts};
pub use join::{JoinRefusal, JoinToken, JoinTokenError, JoinTokenSecret, JoinTtl};
pub use model::*;
pub use session::{SessionId, SessionPolicy, SessionSecret, SignedInWith, WebSession};
pub use ssh::{SshKeyError, SshPublicKey};
