//! Where params come from: the [`ParamSource`] seam, and [`MapSource`], the in-memory source
//! of tests and tools. The process environment's source lives with the binary
//! (`orc-partner-provider`), so this crate reads no environment and no file itself.

use std::collections::BTreeMap;

use super::names::{param_file_var, param_var};

/// An environment variable whose value is not valid UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUnicode;

/// Where params come from.
pub trait ParamSource {
    /// The value of environment variable `name`, if set.
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode>;
    /// The text of the file at `path`, or a short reason it cannot be read.
    fn read_file(&self, path: &str) -> Result<String, String>;
}

/// An in-memory source: variables and files in maps. For tests and tools.
#[derive(Debug, Clone, Default)]
pub struct MapSource {
    vars: BTreeMap<String, String>,
    files: BTreeMap<String, String>,
}

impl MapSource {
    /// An empty source.
    pub fn new() -> Self {
        MapSource::default()
    }

    /// Sets param `name` as `ORC_PARAM_<NAME>`.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(param_var(name), value.to_string());
        self
    }

    /// Sets any environment variable.
    pub fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    /// Delivers param `name` as a file at `path`.
    pub fn param_file(mut self, name: &str, path: &str, text: &str) -> Self {
        self.vars.insert(param_file_var(name), path.to_string());
        self.files.insert(path.to_string(), text.to_string());
        self
    }
}

impl ParamSource for MapSource {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        Ok(self.vars.get(name).cloned())
    }

    fn read_file(&self, path: &str) -> Result<String, String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
}
