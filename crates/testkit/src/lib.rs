//! What orc's test suites share, so each idea is written once: a typed client for the
//! emulators' control API ([`emu`]), builders of protocol messages ([`proto`]), one way to
//! wait for a condition ([`eventually`]), one golden-file check ([`golden`]), with the
//! `zone` feature an in-process zone with the standard tenancy (`zone`), and with the
//! `browser` feature a headless Chromium for the web tests (`browser`), with the `console`
//! feature fixed view models of every console page (`console_sample`).
//!
//! A dev-dependency only: no crate's library or binary may depend on it.

#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "console")]
pub mod console_sample;
pub mod emu;
pub mod golden;
#[cfg(feature = "oci")]
pub mod oci;
pub mod proto;
mod wait;
#[cfg(feature = "zone")]
pub mod zone;

pub use emu::EmuControl;
pub use wait::{eventually, eventually_some};
