//! The JSON shapes of the zone's HTTP API, shared by the controller that serves them, the
//! `orc` CLI that reads them and the web pages to come.
//!
//! - [`views`]: request bodies (`deny_unknown_fields`), query strings, and the views answers
//!   are made of, each built from the model's records;
//! - [`error`]: the error answer `{"error": {"code", "message", "field"}}`.
//!
//! Every type derives serde and a utoipa schema; the controller assembles them into the
//! committed OpenAPI document (`crates/zone/openapi.json`), so a change here shows up there.
//! Depends on the pure model only: never on the store, the HTTP server, the hub or a
//! runtime, so a client can link it without linking the controller.

pub mod error;
pub mod views;
