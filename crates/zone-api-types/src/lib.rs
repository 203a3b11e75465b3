//! The JSON shapes of the zone's HTTP API, shared by the controller that serves them, the
//! `orc` CLI that reads them and the web pages to come.
//!
//! - [`views`]: request bodies (`deny_unknown_fields`), query strings, and the views answers
//!   are made of, each built from the model's records;
//! - [`error`]: the error answer `{"error": {"code", "message", "field"}}`;
//! - [`data_dir`]: the files a zone leaves in its data dir for the clients on its machine.
//!
//! Every type derives serde and a utoipa schema; the controller assembles them into the
//! committed OpenAPI document (`crates/zone/openapi.json`), so a change here shows up there.
//! Depends on the pure model only: never on the store, the HTTP server, the hub or a
//! runtime, so a client can link it without linking the controller. These are shapes, not
//! rules: access checks, validation of a body's values and the mapping of the zone's errors
//! onto codes are the controller's handlers, and must not be rebuilt from these types.

pub mod data_dir;
pub mod error;
pub mod views;
