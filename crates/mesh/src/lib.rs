//! The mesh of a zone, computed without I/O.
//!
//! - [`range`]: the zone's mesh range, one prefix per project, member addresses, and the
//!   check that the zone's ranges do not overlap.
//! - [`plan`]: every agent's desired [`MeshConfig`] from sites, members, projects and keys.
//! - [`config`]: what an agent sets up (WireGuard interfaces and peers, routes, a gateway's
//!   NAT and forwards), with a digest that tells whether it changed.
//! - [`changes`]: what changed from one config to the next, which is what the zone sends
//!   an agent once it holds a whole config.
//! - [`workstation`]: a workstation's config as a `wg-quick` file.
//!
//! The zone runs the plan after every change that may matter and pushes a config only to
//! the agents whose digest changed; agents apply the difference.

pub mod changes;
pub mod config;
pub mod key;
pub mod plan;
pub mod range;
pub mod workstation;

pub use changes::MeshChanges;
pub use config::MeshConfig;
pub use key::PublicKey;
pub use plan::{
    Member, MemberKind, PoolAddress, Project, Site, SiteRef, World, plan, plan_workstation,
};
pub use range::{MeshRange, WorkloadRange};

#[cfg(test)]
mod plan_tests;
