//! The Hetzner Robot provider: dedicated servers an account already has, served to a zone
//! as machines.
//!
//! - [`config`]: the account config (user, password and rescue key as secret references,
//!   image, product overrides) and its validation;
//! - [`products`]: what each Robot product is made of;
//! - [`machines`]: [`RobotMachines`], the account as a
//!   [`MachineProvider`](orc_provider_sdk::machine::MachineProvider) (offers of unnamed
//!   servers, claims by name, resets for power), plus rescue, identify and bootstrap;
//! - [`ssh`]: the SSH executor trait, the real client and a test double;
//! - [`script`]: the POSIX shell text the bootstrap sends;
//! - [`cli`]: the `orc-prov-robot` command line.
//!
//! Ordering and cancelling servers are contracts between people and Hetzner; this crate
//! never does either.

pub mod cli;
pub mod config;
pub mod machines;
pub mod products;
pub mod rescue_key;
pub mod script;
pub use orc_ssh as ssh;

pub use config::{InstallMode, RobotAccount, parse_account};
pub use machines::{BootstrapError, BootstrapReport, RobotMachines, SshOptions};
pub use products::{ProductSpec, ProductTable};
pub use script::{BootstrapParams, RescueLayout};
pub use ssh::{RusshExecutor, ScriptedSsh, SshExecutor, SshOutput, SshTarget};
