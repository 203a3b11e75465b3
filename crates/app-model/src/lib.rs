//! Pure model of orc's apps.
//!
//! - [`schema`]: the schema of `orch.pkl`, as data: the typed Pkl module app files amend,
//!   the untyped one orc evaluates them against, and the rules the checker enforces.
//! - [`check`]: an evaluated app file (JSON) checked into a typed [`AppSpec`], each problem
//!   named by its field.
//! - [`spec`]: the typed app and image references.
//! - [`init`]: the starter file of `orc app init`.
//! - [`planner`]: which node runs each replica, as a pure function.
//! - [`rollout`]: the next step of a rolling update, as a pure function.
//! - [`revision`]: apps with their images resolved, their digests and diffs, deployment states.
//! - `pkl` (feature `pkl`): evaluating a file in pure Rust and placing each problem on its
//!   file and line.
//!
//! This crate does no network I/O and never imports tokio, reqwest, tonic or sqlx; only the
//! `pkl` feature reads files.

pub mod check;
pub mod init;
#[cfg(feature = "pkl")]
pub mod pkl;
pub mod planner;
pub mod revision;
pub mod rollout;
pub mod schema;
pub mod spec;

pub use check::{FieldPath, Invalid, Problem, check};
pub use spec::{AppSpec, ImageRef, Service, Workload, WorkloadKind};
