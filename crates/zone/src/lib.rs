//! The zone controller: it drives pools and nodes toward what tenants asked for.
//!
//! - [`agents`]: the zone's side of the agent protocol: joins, node streams, `orc exec`;
//! - [`backend`]: the seam between the reconcilers and whatever carries out a node's work
//!   (the hub for remote providers, the app supervisor for `core`);
//! - [`hub`]: the zone's side of the provider protocol, over gRPC;
//! - [`reconcile`]: the node state machine (pure) and the passes that carry it out;
//! - [`rollouts`]: apps on nodes: rolling updates, placement of waiting replicas,
//!   deadlines and automatic rollbacks;
//! - [`api`]: the HTTP/JSON API's handlers and its OpenAPI document;
//! - [`web`]: the zone's side of the web layer (`orc-web`: the access edge and the
//!   console): the store as the edge uses it, the API as the console calls it;
//! - [`zone`]: [`Zone`](zone::Zone), every part assembled on a data dir and stopped together.
//!
//! The layers below live in their own crates and are re-exported here under the paths
//! callers use: [`model`] and [`pricing`] (`orc-zone-model`, pure), [`store`]
//! (`orc-zone-store`, the only database code), [`apps`] (`orc-zone-apps`, the `core`
//! provider's supervisor) and [`api::views`] (`orc-zone-api-types`). None of them may import
//! this crate. See `docs/zone/controller.md`.

pub mod agents;
pub mod api;
pub mod backend;
pub mod certificates;
pub mod hub;
pub mod mesh;
pub mod reconcile;
pub mod rollouts;
mod streams;
pub mod web;
pub mod zone;

pub use orc_zone_apps as apps;
pub use orc_zone_model::{model, pricing};
pub use orc_zone_store as store;
