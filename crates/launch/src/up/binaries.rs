//! Which binaries `orc up` runs: the partner and the standalone providers, found next to
//! `orc` or embedded in it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::PARTNER_APP;

/// How to run the partner: `--partner-bin`, else `orc-prov-partner` next to `orc`, else `orc`
/// itself, which embeds the partner (`orc prov-partner serve`).
pub(crate) fn partner_binary(given: Option<&Path>) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let serve = || vec!["serve".to_string()];
    if let Some(path) = given {
        if path.is_file() {
            return Ok((path.to_path_buf(), serve()));
        }
        bail!("the partner binary {} does not exist", path.display());
    }
    if let Some(path) = next_to_exe(PARTNER_APP) {
        return Ok((path, serve()));
    }
    let orc = std::env::current_exe().context("cannot find the running orc executable")?;
    Ok((
        orc,
        vec![
            crate::embedded::EMBEDDED_PARTNER.to_string(),
            "serve".to_string(),
        ],
    ))
}

/// How to run a standalone provider: `--providers-bin BIN` (as `BIN prov-<name> serve`), else
/// `orc-prov-<name>` next to `orc`, else `orc` itself, which embeds it.
pub(crate) fn provider_binary(
    binary: &str,
    embedded_arg: &str,
    given: Option<&Path>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let embedded = || vec![embedded_arg.to_string(), "serve".to_string()];
    if let Some(path) = given {
        if path.is_file() {
            return Ok((path.to_path_buf(), embedded()));
        }
        bail!("the providers binary {} does not exist", path.display());
    }
    if let Some(path) = next_to_exe(binary) {
        return Ok((path, vec!["serve".to_string()]));
    }
    let orc = std::env::current_exe().context("cannot find the running orc executable")?;
    Ok((orc, embedded()))
}

/// `name` in the directory of the running executable, or in its parent when that is a test
/// binary's `target/*/deps`, as `cargo build` leaves them.
pub(super) fn next_to_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent().filter(|_| dir.ends_with("deps"))]
        .into_iter()
        .flatten()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
