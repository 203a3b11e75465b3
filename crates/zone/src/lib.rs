//! The zone controller's library: the domain model (`model`, pure) and the store (`store`,
//! SQLite or PostgreSQL). See `docs/store.md`.

pub mod api;
pub mod backend;
pub mod hub;
pub mod reconcile;
pub mod zone;

pub use orc_zone_apps as apps;
pub use orc_zone_model::{model, pricing};
pub use orc_zone_store as store;
