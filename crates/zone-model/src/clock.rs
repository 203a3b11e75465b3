//! The zone's injected clock: reconcilers and the hub read time only through [`Clock`], so
//! tests drive it with [`ManualClock`]. These are the vocabulary's clock types, re-exported
//! where the zone has always found them.

pub use orc_common::time::{Clock, ManualClock, SharedClock, SystemClock};
