//! What orc's test suites share, so each idea is written once: a typed client for the
//! emulators' control API ([`emu`]), builders of protocol messages ([`proto`]), one way to
//! wait for a condition ([`eventually`]) and one golden-file check ([`golden`]).
//!
//! A dev-dependency only: no crate's library or binary may depend on it.

pub mod emu;
pub mod golden;
pub mod proto;
mod wait;

pub use emu::EmuControl;
pub use wait::{eventually, eventually_some};
