//! A project's secrets from the command line: `orc secret set NAME`, `orc secret list` and
//! `orc secret delete NAME`, each in `--project ORG/PROJECT` or the token's project.
//!
//! A value never comes from the command line, where every user of the machine can read it:
//! `set` asks for it on the terminal with the echo off, or reads all of stdin when it is a
//! pipe or a file. Nothing here prints a value or puts one in an error.

use std::io::{IsTerminal as _, Read};

use anyhow::{Context as _, bail};
use orc_common::time::format_time;
use orc_zone_api_types::views::{SecretView, SetSecret};
use orc_zone_model::Timestamp;

use super::{client, print_json, project_of, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

/// The most bytes a secret's value holds (the zone's limit, `docs/zone/secrets.md`).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// A secret's value from a pipe or file: all of `input`, less one trailing newline (`\n` or
/// `\r\n`), as `echo` and editors leave one. Refuses an empty value, one that is not UTF-8
/// text and one longer than [`MAX_VALUE_BYTES`] (reading no more than that).
pub fn value_from(input: impl Read) -> anyhow::Result<String> {
    let limit = u64::try_from(MAX_VALUE_BYTES + 2).unwrap_or(u64::MAX);
    let mut bytes = Vec::new();
    input
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .context("cannot read the secret's value from stdin")?;
    let Ok(mut text) = String::from_utf8(bytes) else {
        bail!("the value on stdin is not UTF-8 text; a secret's value is text");
    };
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.is_empty() {
        bail!("stdin held no value; a secret's value must not be empty");
    }
    if text.len() > MAX_VALUE_BYTES {
        bail!("the value on stdin is longer than {MAX_VALUE_BYTES} bytes, the most a secret holds");
    }
    Ok(text)
}

/// The value of secret `name`: asked on the terminal without echo, else read from stdin.
fn read_value(name: &str, path: &str) -> anyhow::Result<String> {
    if !std::io::stdin().is_terminal() {
        return value_from(std::io::stdin().lock());
    }
    let value = super::prompt::hidden(&format!("Value of secret {name} in {path}: "))?;
    if value.is_empty() {
        bail!("no value was typed; a secret's value must not be empty, and nothing was set");
    }
    Ok(value)
}

fn secrets_url(org: &str, project: &str) -> String {
    format!("{}/secrets", project_url(org, project))
}

/// `orc secret set NAME [--project ORG/PROJECT]`.
pub async fn set(conn: &ConnArgs, name: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let path = format!("{org}/{project}");
    let value = read_value(name, &path)?;
    let view: SecretView = client
        .put(
            &format!("{}/{}", secrets_url(&org, &project), segment(name)),
            &SetSecret { value },
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    outln!(
        "Secret {} set in {path} (version {}).",
        view.name,
        view.version
    );
    Ok(())
}

/// The table `orc secret list` prints.
pub(crate) fn secrets_table(secrets: &[SecretView]) -> String {
    let mut t = Table::new(&["NAME", "VERSION", "UPDATED", "BY"]);
    for secret in secrets {
        t.row(vec![
            secret.name.clone(),
            secret.version.to_string(),
            format_time(Timestamp(secret.updated_at)),
            secret.updated_by.clone(),
        ]);
    }
    t.render()
}

/// `orc secret list [--project ORG/PROJECT]`.
pub async fn list(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let secrets: Vec<SecretView> = client.get(&secrets_url(&org, &project)).await?;
    if conn.json {
        return print_json(&secrets);
    }
    if secrets.is_empty() {
        outln!("No secrets in {org}/{project}.");
        return Ok(());
    }
    out!("{}", secrets_table(&secrets));
    Ok(())
}

/// `orc secret delete NAME [--project ORG/PROJECT]`.
pub async fn delete(conn: &ConnArgs, name: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let _: serde_json::Value = client
        .delete(&format!(
            "{}/{}",
            secrets_url(&org, &project),
            segment(name)
        ))
        .await?;
    if !conn.json {
        outln!("Secret {name} deleted from {org}/{project}.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::check_golden;

    fn read(bytes: &[u8]) -> anyhow::Result<String> {
        value_from(bytes)
    }

    #[test]
    fn one_trailing_newline_is_stripped_and_no_more() {
        assert_eq!(read(b"hunter2\n").unwrap(), "hunter2");
        assert_eq!(read(b"hunter2\r\n").unwrap(), "hunter2");
        assert_eq!(read(b"hunter2").unwrap(), "hunter2");
        assert_eq!(read(b"hunter2\n\n").unwrap(), "hunter2\n");
        assert_eq!(read(b"line one\nline two\n").unwrap(), "line one\nline two");
        assert_eq!(read(b"  spaced  \n").unwrap(), "  spaced  ");
    }

    #[test]
    fn empty_long_and_binary_values_are_refused_without_showing_them() {
        for empty in [&b""[..], b"\n", b"\r\n"] {
            assert_eq!(
                read(empty).unwrap_err().to_string(),
                "stdin held no value; a secret's value must not be empty"
            );
        }
        let mut longest = vec![b'v'; MAX_VALUE_BYTES];
        assert_eq!(read(&longest).unwrap().len(), MAX_VALUE_BYTES);
        longest.push(b'\n');
        assert_eq!(read(&longest).unwrap().len(), MAX_VALUE_BYTES);
        longest.insert(0, b'v');
        let err = read(&longest).unwrap_err().to_string();
        assert_eq!(
            err,
            "the value on stdin is longer than 65536 bytes, the most a secret holds"
        );
        let huge = vec![b'v'; 10 * MAX_VALUE_BYTES];
        assert!(read(&huge).is_err());
        let err = read(b"secret-\xff-bytes").unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
        assert!(!err.contains("secret-"), "{err}");
    }

    #[test]
    fn the_list_shows_names_versions_times_and_who() {
        let secrets = [
            SecretView {
                name: "api.key".into(),
                version: 1,
                updated_at: 1_767_225_600_000,
                updated_by: "admin".into(),
            },
            SecretView {
                name: "db-password".into(),
                version: 12,
                updated_at: 1_767_312_000_123,
                updated_by: "u-000000000007".into(),
            },
        ];
        check_golden("secrets", &secrets_table(&secrets));
    }
}
