//! The client half of `orc`: every command that talks to a running zone (`orc pools`,
//! `orc pool create`, `orc quote`, …). It finds the zone and its token ([`ConnArgs`], else
//! the files a zone leaves in its data dir), sends the API's typed bodies, and prints a table
//! for people or the API's JSON for scripts.
//!
//! - [`commands`]: one module per resource, each a few async functions the `orc` binary's
//!   argument parser calls;
//! - [`client`]: HTTP, the bearer token, the pinned CA, and the zone's errors as one line;
//! - [`table`]: the tables; [`out!`]/[`outln!`]: stdout that survives `| head`.
//!
//! It links the API's types and the pure model only, never the controller, the store or a
//! provider: a command here can run on any machine that reaches a zone. What starts a zone,
//! the emulators or an agent lives in `orc-launch`.

#[macro_use]
pub mod output;
pub mod client;
pub mod commands;
pub mod table;

use std::path::PathBuf;

use clap::Args;

/// How to reach a zone.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Zone connection (every command)")]
pub struct ConnArgs {
    /// The zone's API URL [default: <data dir>/zone-url, else https://127.0.0.1:7070].
    #[arg(long, global = true, env = "ORC_URL")]
    pub url: Option<String>,
    /// A file holding the API token [default: $ORC_TOKEN, else <data dir>/admin-token].
    #[arg(long, global = true, env = "ORC_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Refused: every user of the machine can read a command line.
    #[arg(long, global = true, hide = true)]
    pub token: Option<String>,
    /// The zone's CA certificate to trust [default: <data dir>/ca.pem]; `orc zone ca` on
    /// the zone's machine prints it.
    #[arg(long, global = true, env = "ORC_CA_FILE", value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}
