//! Pure vocabulary shared by every orc crate: money, node shapes and typed identifiers.
//!
//! Nothing here does I/O or depends on an async runtime, so every crate may use it and its
//! tests run in milliseconds.

pub mod money;
pub mod shape;

pub use money::{Currency, Money, MoneyError, Period};
pub use shape::{Architecture, Shape};
