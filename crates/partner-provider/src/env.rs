//! The process's params: the environment and the file system as an
//! [`orc_partner::params::ParamSource`], the one place the partner reads either.
//!
//! The pure crate parses what this hands it; nothing here interprets a value.

use orc_partner::params::{NotUnicode, ParamSource};

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
