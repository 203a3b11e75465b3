//! The single-cloud machine model, and the one adapter that serves it to a zone.
//!
//! A standalone provider (Hetzner Cloud, Vultr, Hetzner Robot) implements
//! [`MachineProvider`]: offers, idempotent create, get, list, delete, power and reinstall
//! against one cloud account. [`MachineAdapter`] turns any such implementation into a
//! [`Provider`](crate::Provider) the runner serves:
//!
//! - quotes are answered from an offers snapshot that a background task refreshes while
//!   the replica serves, so a quote never calls a cloud; the quote's class is the location
//!   and `placement["plan"]` picks an exact plan, else the cheapest available offer whose
//!   vCPUs, memory and architecture equal the shape;
//! - deploy creates the machine with the node id as idempotency key, so a repeated or
//!   resent deploy finds the machine it already made;
//! - destroy deletes (a machine that is already gone counts as destroyed);
//! - inventory lists the machines this provider manages, or reports nothing when the list
//!   could not be read completely.
//!
//! The parts, each in a module of its own:
//!
//! | part | what it holds |
//! |---|---|
//! | model | the machine types, [`MachineProvider`] and the hostname rule; no I/O |
//! | error | [`MachineError`] and its conversion from a cloud's neutral fault |
//! | offer | the pure decisions: [`describe_catalog`], [`screen_quote`], [`pick_offer`], [`plan_deploy`], the quote token and the user data |
//! | adapter | [`MachineAdapter`]: the snapshot and its refresh, the role, the clock and the cloud calls |
//! | [`words`] | the generic words tenants read |
//!
//! Error words: a [`MachineError`] carries the cloud's own message for operators; the
//! adapter logs it at DEBUG only and gives the zone generic words, with the
//! refusal kind taken from the error's class ([`MachineError::refusal_kind`]).

mod adapter;
mod error;
mod model;
mod offer;
pub mod words;

pub use adapter::{AdapterOptions, MachineAdapter, inventory_of};
pub use error::MachineError;
pub use model::{
    CatalogEntry, Install, Machine, MachineCatalog, MachineKey, MachineOffer, MachineProvider,
    MachineSpec, MachineState, OfferQuery, PowerAction, hostname_for,
};
pub use offer::{
    DeployPlan, DeployStep, OffersSnapshot, QuoteRefusal, describe_catalog, pick_offer,
    plan_deploy, screen_quote, user_data,
};
