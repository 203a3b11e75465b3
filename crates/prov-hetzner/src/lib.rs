//! Standalone Hetzner Cloud provider.
//!
//! One Hetzner Cloud project (an API token and a home location) becomes a provider of
//! machines: [`HetznerMachines`] implements the provider SDK's
//! [`MachineProvider`](orc_provider_sdk::machine::MachineProvider), and the SDK's
//! [`MachineAdapter`](orc_provider_sdk::machine::MachineAdapter) serves it to a zone.
//!
//! - [`config`]: the account (`{token: <secret ref>, location}`), parsed raw and validated;
//! - [`machines`]: offers, idempotent create by label, power, reinstall, managed-only list;
//! - [`cli`]: `orc-prov-hetzner serve | offers | validate`, embeddable by `orc`.
//!
//! Invariant: every server this provider creates carries the labels
//! [`machines::KEY_LABEL`] (the zone's node id) and [`machines::MANAGED_LABEL`]`=true`;
//! servers without them are never listed, changed or deleted.

pub mod cli;
pub mod config;
pub mod machines;
pub mod recording;

pub use config::{Account, AccountError, HetznerLocation};
pub use machines::{HetznerMachines, HetznerOptions};
