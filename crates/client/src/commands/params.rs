//! Parsing what the command line gives for a pool's params and placement: `NAME=VALUE`
//! pairs, sensitive params (`NAME=@FILE`, `NAME=-`, `NAME=VALUE`) and reading their values,
//! and the placement object of `--placement` and `--plan`. Pure but for
//! [`read_sensitive`], which reads the files and standard input it is pointed at.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};

/// The placement object of `--placement K=V` and `--plan P`; `--plan` wins over a
/// `--placement plan=…`.
pub fn placement(pairs: Vec<(String, String)>, plan: Option<String>) -> BTreeMap<String, String> {
    let mut placement: BTreeMap<String, String> = pairs.into_iter().collect();
    if let Some(plan) = plan {
        placement.insert("plan".to_string(), plan);
    }
    placement
}

/// Parses `NAME=VALUE`: the name ends at the first `=`.
pub fn parse_param(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

/// Where a sensitive param's value comes from. Its `Debug` never shows an inline value.
#[derive(Clone, PartialEq, Eq)]
pub enum SensitiveSource {
    Inline(String),
    File(PathBuf),
    Stdin,
}

/// One `--sensitive NAME=…`. Its `Debug` never shows an inline value.
#[derive(Clone, PartialEq, Eq)]
pub struct SensitiveParam {
    pub name: String,
    pub source: SensitiveSource,
}

impl std::fmt::Debug for SensitiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SensitiveSource::Inline(_) => f.write_str("<inline>"),
            SensitiveSource::File(path) => write!(f, "@{}", path.display()),
            SensitiveSource::Stdin => f.write_str("-"),
        }
    }
}

impl std::fmt::Debug for SensitiveParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}", self.name, self.source)
    }
}

/// Parses `NAME=@FILE`, `NAME=-` or `NAME=VALUE`; the error never repeats the value.
pub fn parse_sensitive(text: &str) -> Result<SensitiveParam, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err("a sensitive param is NAME=@FILE, NAME=- or NAME=VALUE".to_string());
    };
    if name.is_empty() {
        return Err("a sensitive param needs a NAME before the =".to_string());
    }
    let source = if value == "-" {
        SensitiveSource::Stdin
    } else if let Some(path) = value.strip_prefix('@') {
        if path.is_empty() {
            return Err(format!("sensitive param {name}: give a file after the @"));
        }
        SensitiveSource::File(path.into())
    } else {
        SensitiveSource::Inline(value.to_string())
    };
    Ok(SensitiveParam {
        name: name.to_string(),
        source,
    })
}

/// Reads every sensitive param's value: a file's or standard input's text without its
/// final line break. At most one may come from standard input.
pub fn read_sensitive(params: Vec<SensitiveParam>) -> anyhow::Result<BTreeMap<String, String>> {
    let from_stdin = params
        .iter()
        .filter(|p| p.source == SensitiveSource::Stdin)
        .count();
    if from_stdin > 1 {
        bail!("only one sensitive param can be read from standard input (NAME=-)");
    }
    let mut values = BTreeMap::new();
    for param in params {
        let value = match param.source {
            SensitiveSource::Inline(value) => value,
            SensitiveSource::File(path) => std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "cannot read sensitive param {} from {}",
                    param.name,
                    path.display()
                )
            })?,
            SensitiveSource::Stdin => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).with_context(
                    || {
                        format!(
                            "cannot read sensitive param {} from standard input",
                            param.name
                        )
                    },
                )?;
                text
            }
        };
        let value = value.strip_suffix('\n').unwrap_or(&value);
        let value = value.strip_suffix('\r').unwrap_or(value).to_string();
        if value.is_empty() {
            bail!("sensitive param {} is empty", param.name);
        }
        if values.insert(param.name.clone(), value).is_some() {
            bail!("sensitive param {} is given twice", param.name);
        }
    }
    Ok(values)
}
