//! The zone controller's library: the domain model (`model`, pure) and the store (`store`,
//! SQLite or PostgreSQL). See `docs/store.md`.

pub mod api;
pub mod apps;
pub mod backend;
pub mod hub;
pub mod model;
pub mod pricing;
pub mod reconcile;
pub mod store;
pub mod zone;
