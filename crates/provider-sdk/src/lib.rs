//! Provider side of orc's provider protocol.
//!
//! A provider implements one trait, [`Provider`], and hands it to [`run_provider`]: the
//! runner dials the zone, introduces the replica, answers the zone's requests concurrently,
//! keeps the stream alive and reconnects when it drops.
//!
//! For tests, and only with the `testing` feature, the crate also carries the zone's side
//! of the stream (`harness`), the conformance cases every provider must pass
//! (`conformance`) and a deterministic in-memory provider (`fake::FakeProvider`). A crate
//! that uses them does so from its `[dev-dependencies]`, so no provider binary links them.
//!
//! Provider binaries share their process glue (runtime, zone credentials, logging, hello,
//! offer listings) through [`process`], and their building blocks with each other: one
//! serving-role gate ([`role`]), one quote-token codec ([`token`]), one cloud-init
//! builder ([`cloud_init`]) and one way to refuse a config ([`config`]).

pub mod cloud_init;
pub mod config;
#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod fake;
#[cfg(feature = "testing")]
pub mod harness;
pub mod machine;
pub mod process;
pub mod provider;
pub mod role;
pub mod runner;
pub mod secret;
mod session;
pub mod token;
pub mod transport;

pub use provider::{HelloInfo, ProgressSink, Provider};
pub use role::RoleGate;
pub use runner::{ProviderRunner, RunnerError, RunnerOptions, RunnerStatus, run_provider};
pub use transport::{
    ConnectError, Connector, GrpcConnector, InvalidCredentials, InvalidEndpoint, ZoneCredentials,
};
