//! The process's params: the environment and the file system as an
//! [`orc_partner::params::ParamSource`], the one place the partner reads either; and the
//! address the zone gives the admin page ([`admin_addr`]).
//!
//! The pure crate parses the params this hands it; nothing here interprets their values.

use std::net::SocketAddr;

use orc_partner::params::{NotUnicode, ParamSource};

/// The variable holding the loopback address the zone gives the partner pool's `admin`
/// endpoint in this slot (`ORC_HTTP_<ENDPOINT>_ADDR`).
pub const ADMIN_ADDR_VAR: &str = "ORC_HTTP_ADMIN_ADDR";

/// The admin page's address could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ADMIN_ADDR_VAR} {value:?} is not an address and port such as 127.0.0.1:41234")]
pub struct BadAdminAddr {
    pub value: String,
}

/// Where the admin page listens: `None` when the zone gave this slot no `admin` endpoint
/// (the variable is unset or empty), and no page is served.
pub fn admin_addr() -> Result<Option<SocketAddr>, BadAdminAddr> {
    let Some(raw) = std::env::var_os(ADMIN_ADDR_VAR) else {
        return Ok(None);
    };
    let value = raw.to_string_lossy().trim().to_string();
    if value.is_empty() {
        return Ok(None);
    }
    value.parse().map(Some).map_err(|_| BadAdminAddr { value })
}

/// The process environment and file system: the thin adapter the binary uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl ParamSource for ProcessEnv {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        match std::env::var_os(name) {
            None => Ok(None),
            Some(v) => v.into_string().map(Some).map_err(|_| NotUnicode),
        }
    }

    fn read_file(&self, path: &str) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.kind().to_string())
    }
}
