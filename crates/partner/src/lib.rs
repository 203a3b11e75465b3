//! The pure core of the partner provider (`orc-prov-partner`).
//!
//! - [`admin`]: the admin page's model, forms and views (pure HTML rendering).
//! - [`admission`]: the checks a deploy makes before it touches a cloud, as a pure decision.
//! - [`params`]: params (environment variables or files) → typed [`params::Config`], every
//!   problem reported with the param it concerns; keys held in [`secret::Secret`].
//! - [`maps`]: the region map, OS map, gateway shape and reverse-DNS domain, with their rules,
//!   built-ins and normalised form.
//! - [`catalog`]: per-cloud catalog snapshots (plans, prices, stock, images); [`seed`] builds
//!   them from the emulator seed files.
//! - [`state`]: caps, reservations, cooldowns, counting, pins and live sites.
//! - [`mod@quote`]: the explained quote engine; [`explain`] renders it for operators; [`words`]
//!   holds every tenant-facing string.
//! - [`offered`]: what a tenant may ask for in a class (shapes, and OS ids at a shape).
//! - [`validate`]: the drafts check the admin page's Validate view runs, over the same parsers.
//!
//! Invariant: the library does no I/O and has no async runtime: params come through
//! [`params::ParamSource`], whose process adapter lives in `orc-partner-provider`. Nothing
//! here may import the cloud clients: the live catalog reader fills [`catalog::CatalogSnapshot`]
//! from outside.

pub mod admin;
pub mod admission;
pub mod catalog;
pub mod explain;
pub mod ids;
pub mod maps;
pub mod offered;
pub mod params;
pub mod quote;
pub mod secret;
pub mod seed;
pub mod state;
pub mod validate;
pub mod words;

pub use catalog::{CatalogSnapshot, Catalogs};
pub use ids::{ClassId, Cloud, NodeId, OsId, PoolPath, SiteName, Timestamp};
pub use params::{Config, ConfigErrors, load_config};
pub use quote::{QuoteOutcome, QuoteRequest, quote};
pub use state::QuoteState;
