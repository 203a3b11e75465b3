//! In-memory emulators of the three cloud APIs orc uses: Hetzner Cloud v1, Vultr v2 and the
//! Hetzner Robot webservice.
//!
//! Each emulator is an HTTP server that an official client cannot tell from the real service
//! on the endpoints orc uses: same paths, status codes, error bodies, pagination and
//! rate-limit headers. Catalogue data (plans, prices, locations, images) is the seed data in
//! `seed/`, so stock-outs and price changes are data, not code.
//!
//! Every emulator also serves a control API under `/_emu/` (see [`control`]) through which a
//! test or a demo decides when the world changes: sold-out plans, disabled locations,
//! injected errors, latency, failing actions, rate-limit budgets and the emulated clock.
//!
//! [`first_boot`] reads a server's user data as a cloud's first boot would (the cloud-init
//! subset orc's providers write), for servers that run it.
//!
//! [`netns`] is materialised mode: each emulated server a Linux network namespace on bridges
//! standing for its networks, with the emulated internet and a host on it (root only).
//!
//! Invariant: this crate never imports the cloud clients (`orc-cloud`). An emulator that
//! shared the client's types would agree with the client's bugs.

pub mod accounts;
pub mod clock;
pub mod control;
pub mod first_boot;
mod gate;
pub mod hetzner;
#[cfg(target_os = "linux")]
pub mod materialise;
#[cfg(target_os = "linux")]
pub mod netns;
pub mod robot;
pub mod server;
#[cfg(target_os = "linux")]
pub mod static_hosts;
pub mod vultr;

pub use accounts::{Account, Accounts};
pub use clock::{ClockMode, EmuClock};
pub use control::{Api, EmuCore, Timings};
pub use server::{EmuConfig, RunningEmulators};
