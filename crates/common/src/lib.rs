//! Pure vocabulary shared by every orc crate: money, node shapes, typed identifiers and
//! cloud failures in neutral words.
//!
//! Nothing here does I/O or depends on an async runtime, so every crate may use it and its
//! tests run in milliseconds.

pub mod fault;
pub mod money;
pub mod shape;

pub use fault::{CloudFault, FaultClass};
pub use money::{Currency, Money, MoneyError, Period};
pub use shape::{Architecture, Shape};
