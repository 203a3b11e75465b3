//! Typed async clients for the cloud APIs orc uses: Hetzner Cloud v1 ([`hetzner`]), Vultr v2
//! ([`vultr`]) and the Hetzner Robot webservice ([`robot`]).
//!
//! Every client shares the same machinery: the base URL comes from its config (so tests
//! point it at the emulators of `orc-emu`), every listing follows pagination to the end,
//! failures are one [`CloudError`] classified exhaustively, requests take a token from a
//! client-side bucket per account before they leave, rate-limited requests are retried
//! within a bounded [`RetryPolicy`], and every request is counted per operation
//! ([`RequestCounters`]). Credentials are [`Secret`]s and never appear in `Debug`, logs or
//! errors.
//!
//! Money is `rust_decimal::Decimal` (Hetzner strings and Vultr JSON numbers alike), never a
//! float. This crate must never import the emulators: they keep their own types so that
//! tests catch disagreements instead of sharing bugs.

pub mod counters;
pub mod error;
pub mod hetzner;
pub mod ids;
pub mod ratelimit;
pub mod robot;
pub mod secret;
mod transport;
pub mod vultr;

pub use counters::RequestCounters;
pub use error::{CloudApi, CloudError};
pub use hetzner::{HetznerClient, HetznerConfig};
pub use ids::*;
pub use ratelimit::{RateQuota, RetryPolicy};
pub use robot::{RobotClient, RobotConfig};
pub use secret::Secret;
pub use transport::{
    ClientOptions, Exchange, ExchangeFuture, HttpExchange, RecordedExchange, RecordingExchange,
    ReplayExchange, TokenSource, TransportHooks, WireRequest, WireResponse,
};
pub use vultr::{VultrClient, VultrConfig};
