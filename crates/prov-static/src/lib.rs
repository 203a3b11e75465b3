//! The static provider: hosts the operator lists (address, SSH user, host key) are the
//! machines. A pool on it claims free hosts over SSH, joins each with the zone's bootstrap
//! (the join token travels as SSH stdin, never in a command line), and releases them when
//! it shrinks: the agent stops, what the bootstrap left is removed, the host is free again.
//! Nothing is provisioned and nothing is powered off.
//!
//! - [`config`]: the host list and its validation;
//! - [`script`]: the commands run on a host;
//! - [`machines`]: [`StaticMachines`], the [`MachineProvider`](orc_provider_sdk::machine::MachineProvider);
//! - [`cli`]: the `orc-prov-static` command line.

pub mod cli;
pub mod config;
pub mod machines;
pub mod script;

pub use config::{Host, StaticAccount, parse_account};
pub use machines::{Claim, HostStatus, SshOptions, StaticMachines};
