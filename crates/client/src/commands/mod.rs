//! The verbs that talk to a zone's API, one module per resource. Each prints a table for
//! people or, with `--json`, the API's JSON unchanged (pretty-printed) for scripts.
//!
//! This module holds what every verb shares: finding the zone and its token (`--url`,
//! `--token`, else the files a running zone writes in its data dir), parsing `ORG/PROJECT`
//! and `ORG/PROJECT/NAME` paths, and printing JSON. Argument parsing is the `orc` binary's
//! (`crates/cli/src/main.rs`); HTTP in [`crate::client`]; table layout in [`crate::table`].

pub mod agent;
pub mod app;
pub mod endpoints;
pub mod events;
pub mod logs;
pub mod mesh;
pub mod money;
pub mod nodes;
pub mod params;
pub mod placement;
pub mod pools;
pub mod prompt;
pub mod providers;
pub mod quote;
pub mod registry;
pub mod secret;
pub mod shape;
pub mod tenancy;
pub mod usage;
pub mod zone;

use std::path::PathBuf;

use anyhow::bail;

use crate::ConnArgs;
use crate::client::{Client, segment};

/// The default API URL when nothing else names one.
const DEFAULT_URL: &str = "https://127.0.0.1:7070";

fn data_dir() -> PathBuf {
    orc_zone_api_types::data_dir::default_data_dir()
}

fn read_trimmed(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// A secret from a file: its first line, trimmed; an empty file is an error.
pub fn read_secret_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        bail!("{} is empty", path.display());
    }
    Ok(line.to_string())
}

/// The client for `conn`: URL from `--url`/`ORC_URL`, else `<data dir>/zone-url`, else the
/// default; token from `--token-file`, else `ORC_TOKEN`, else `<data dir>/admin-token`; the
/// CA to trust from `--ca-file`/`ORC_CA_FILE`, else `<data dir>/ca.pem`.
pub fn client(conn: &ConnArgs) -> anyhow::Result<Client> {
    let dir = data_dir();
    let url = conn
        .url
        .clone()
        .or_else(|| read_trimmed(&dir.join(orc_zone_api_types::data_dir::ZONE_URL_FILE)))
        .unwrap_or_else(|| DEFAULT_URL.to_string());
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        bail!(
            "the zone URL {url:?} has no scheme: give https://{} (or http:// for a zone \
             started with --plain)",
            url.trim_start_matches("//")
        );
    }
    let token = match &conn.token_file {
        // A named file that cannot be read is not silently replaced by another token.
        Some(path) => {
            Some(read_secret_file(path).map_err(|e| {
                anyhow::anyhow!("cannot read the token file {}: {e}", path.display())
            })?)
        }
        None => std::env::var("ORC_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| read_trimmed(&dir.join(orc_zone_api_types::data_dir::ADMIN_TOKEN_FILE))),
    };
    let ca = match &conn.ca_file {
        Some(path) => Some(orc_tls::PinnedCa::from_file(path)?),
        None => {
            let local = dir.join(orc_zone_api_types::data_dir::CA_CERT_FILE);
            if local.exists() {
                Some(orc_tls::PinnedCa::from_file(&local)?)
            } else {
                None
            }
        }
    };
    if url.starts_with("https://") && ca.is_none() {
        bail!(
            "the zone at {url} speaks TLS, but there is no CA to trust: give --ca-file PATH \
             (the zone's ca.pem; `orc zone ca` on the zone's machine prints it)"
        );
    }
    Client::new(&url, token, ca.as_ref())
}

/// The project a command means when none is named: the token's default project, else the
/// caller's first project role, else
/// the first project of the first org they have a role in (`sys/sys` for operators).
pub async fn default_project(client: &Client) -> anyhow::Result<(String, String)> {
    let me: orc_zone_api_types::views::WhoAmIView = client.get("/api/whoami").await?;
    if let Some((org, project)) = me
        .default_project
        .as_deref()
        .and_then(|p| p.split_once('/'))
    {
        return Ok((org.to_string(), project.to_string()));
    }
    if let Some(m) = me.memberships.iter().find(|m| m.project.is_some()) {
        return Ok((m.org.clone(), m.project.clone().unwrap_or_default()));
    }
    for m in &me.memberships {
        if m.org == "sys" {
            return Ok(("sys".into(), "sys".into()));
        }
        let projects: Vec<orc_zone_api_types::views::ProjectView> = client
            .get(&format!("/api/orgs/{}/projects", segment(&m.org)))
            .await?;
        if let Some(p) = projects.first() {
            return Ok((p.org.clone(), p.name.clone()));
        }
    }
    bail!(
        "{} has no role in any project yet, so there is no project to default to: name one \
         (ORG/PROJECT), or ask an org owner for a role (`orc member add`)",
        me.user.name
    )
}

/// The project `project` names (`ORG/PROJECT`), else [`default_project`].
async fn project_of(client: &Client, project: Option<&str>) -> anyhow::Result<(String, String)> {
    match project {
        Some(path) => project_path(path),
        None => default_project(client).await,
    }
}

/// `ORG/PROJECT`.
fn project_path(text: &str) -> anyhow::Result<(String, String)> {
    match text.split('/').collect::<Vec<_>>().as_slice() {
        [org, project] if !org.is_empty() && !project.is_empty() => {
            Ok((org.to_string(), project.to_string()))
        }
        _ => bail!("{text:?} is not ORG/PROJECT"),
    }
}

/// `ORG/PROJECT/NAME`, or `ORG/NAME` for the org's project of the same name (`sys/partner`
/// is pool `partner` of project `sys/sys`).
pub fn object_path(text: &str, what: &str) -> anyhow::Result<(String, String, String)> {
    match text.split('/').collect::<Vec<_>>().as_slice() {
        [org, project, name] if [org, project, name].iter().all(|s| !s.is_empty()) => {
            Ok((org.to_string(), project.to_string(), name.to_string()))
        }
        [org, name] if !org.is_empty() && !name.is_empty() => {
            Ok((org.to_string(), org.to_string(), name.to_string()))
        }
        _ => bail!("{text:?} is not ORG/PROJECT/{what} (or ORG/{what})"),
    }
}

fn project_url(org: &str, project: &str) -> String {
    format!("/api/orgs/{}/projects/{}", segment(org), segment(project))
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Compares `actual` with golden file `tests/golden/NAME.snap` (`INSTA_UPDATE=always`
/// rewrites it). The golden tests next to each table render it from fixed views (the
/// integration tests in `tests/cli.rs` render the rest from a live zone).
#[cfg(test)]
fn check_golden(name: &str, actual: &str) {
    orc_testkit::golden::check(env!("CARGO_MANIFEST_DIR"), name, actual);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_name_what_is_wrong() {
        assert_eq!(
            object_path("acme/web/db", "POOL").unwrap(),
            ("acme".into(), "web".into(), "db".into())
        );
        assert_eq!(
            object_path("sys/partner", "POOL").unwrap(),
            ("sys".into(), "sys".into(), "partner".into())
        );
        let e = object_path("a//b", "POOL").unwrap_err().to_string();
        assert_eq!(e, "\"a//b\" is not ORG/PROJECT/POOL (or ORG/POOL)");
        assert!(project_path("acme").is_err());
    }
}
