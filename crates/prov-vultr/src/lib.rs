//! Standalone Vultr provider.
//!
//! One Vultr account (an API key and a home region) becomes a provider of machines:
//! [`VultrMachines`] implements the provider SDK's
//! [`MachineProvider`](orc_provider_sdk::machine::MachineProvider), and the SDK's
//! [`MachineAdapter`](orc_provider_sdk::machine::MachineAdapter) serves it to a zone.
//!
//! - [`config`]: the account (`{api_key: <secret ref>, region}`), parsed raw and validated;
//! - [`machines`]: offers, idempotent create by tag, power, reinstall, managed-only list;
//! - [`cli`]: `orc-prov-vultr serve | offers | validate`, embeddable by `orc`.
//!
//! Invariant: every instance this provider creates carries the tags
//! `orc.dev/idempotency-key=<node id>` and `orc.dev/managed=true`; instances without them
//! are never listed, changed or deleted.

pub mod cli;
pub mod config;
pub mod machines;

pub use config::{Account, AccountError, REGIONS};
pub use machines::{VultrMachines, VultrOptions};
