//! The partner provider process (`orc-prov-partner`): the asynchronous side around the pure
//! core in `orc-partner`.
//!
//! - [`live`]: live catalogs read through the cloud clients into catalog snapshots, refreshed
//!   in the background and never during a quote;
//! - [`provider`]: the `orc_provider_sdk::Provider` implementation — hello, catalog, quotes
//!   over the live catalogs and the quote state, deploys, destroys, inventory, counting;
//! - [`deploy`]: deploys and destroys of tenant nodes and site gateways;
//! - [`pools`]: public pools' addresses;
//! - [`instances`]: finding, listing, creating and deleting the partner's instances;
//! - [`inventory`]: the inventory pass sent to the zone;
//! - [`sites`]: site networks, stable addresses and sealed keys, opened and closed;
//! - [`naming`]: the labels and tags recorded on every instance, and instance names;
//! - `quote_book`: the quote state and the known sites of nodes, each behind its own lock;
//! - [`token`]: quote tokens that carry an offer to its deploy;
//! - [`clouds`]: the one seam per cloud — every operation in a cloud account behind one
//!   trait, one module per cloud;
//! - [`clients`]: the accounts of the keyed clouds;
//! - [`mod@env`]: the process environment and files as the params' source;
//! - [`admin`]: the read-only admin page on the pool's `admin` endpoint: its gate, its
//!   server and its view of the replica's state (the HTML is `orc_partner::admin`'s);
//! - [`cli`]: the `orc-prov-partner` command line;
//! - `testing` (feature `testing`): known state for tests and benches.
//!
//! Invariants: the pure crate decides (quotes, words, state rules); this crate only reads
//! and writes the clouds and keeps the state current. Tenant-facing words come from
//! `orc_partner::words` only. Nothing here writes to disk; [`mod@env`] is the only reader of the
//! process environment.

pub mod admin;
pub mod cli;
pub mod clients;
pub mod clouds;
pub mod deploy;
pub mod env;
pub mod instances;
pub mod inventory;
pub mod live;
pub mod naming;
pub mod pools;
pub mod provider;
mod quote_book;
pub mod sites;
mod sync;
#[cfg(feature = "testing")]
pub mod testing;
pub mod token;

pub use provider::{PartnerOptions, PartnerProvider, ReplicaInfo};
