//! Nodes' agents: `orc exec` (a command on a node, its output streamed back), `orc node
//! join create|list|revoke` (a node's join tokens), and `orc agent` (the agent itself).

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use orc_zone_api_types::views::{
    CreateJoinToken, CreatedJoinToken, ExecLine, ExecRequest, JoinTokenView,
};

use super::{client, print_json, project_of, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

/// The remote command's exit code, for `main` to exit with (nothing more is printed).
#[derive(Debug)]
pub struct RemoteExit(pub u8);

impl std::fmt::Display for RemoteExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the command exited with {}", self.0)
    }
}

impl std::error::Error for RemoteExit {}

/// `orc exec NODE -- CMD…`: runs CMD on the node and exits with its exit code.
pub async fn exec(
    conn: &ConnArgs,
    node: &str,
    project: Option<&str>,
    argv: Vec<String>,
    timeout: Duration,
) -> anyhow::Result<()> {
    if argv.is_empty() {
        bail!("name the command to run after `--`: orc exec {node} -- ip -4 addr");
    }
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let body = ExecRequest {
        argv,
        timeout_seconds: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
    };
    let path = format!(
        "{}/nodes/{}/exec",
        project_url(&org, &project),
        segment(node)
    );
    let response = client.post_streaming(&path, &body).await?;
    print_exec(response, &format!("on {node}")).await
}

/// Prints an exec's answer as it comes (stdout and stderr to this process's), and returns
/// as the command exited: with [`RemoteExit`] for a non-zero code.
pub(crate) async fn print_exec(mut response: reqwest::Response, place: &str) -> anyhow::Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    let mut exit: Option<(Option<i32>, Option<String>)> = None;
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let lost = |e: reqwest::Error| anyhow::anyhow!("the connection to the zone broke: {e}");
    while let Some(chunk) = response.chunk().await.map_err(lost)? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line: ExecLine = serde_json::from_slice(&line[..end])
                .context("the zone sent a line that is not an exec event")?;
            match line {
                ExecLine::Output { stream, data } => {
                    let data = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .context("the zone sent output that is not base64")?;
                    let written = if stream == "stderr" {
                        stderr.write_all(&data)
                    } else {
                        stdout.write_all(&data).and_then(|()| stdout.flush())
                    };
                    match written {
                        Ok(()) => {}
                        // `orc exec … | head`: the reader has what it wanted. Dropping the
                        // answer hangs up, and the zone stops the command.
                        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                        Err(e) => return Err(e).context("cannot write the command's output"),
                    }
                }
                ExecLine::Exit { code, error } => exit = Some((code, error)),
            }
        }
    }
    match exit {
        None => bail!("the zone ended the answer before the command's exit"),
        Some((Some(0), _)) => Ok(()),
        Some((Some(code), _)) => {
            Err(RemoteExit(u8::try_from(code.clamp(1, 255)).unwrap_or(1)).into())
        }
        Some((None, error)) => bail!(
            "the command {place} did not finish: {}",
            error.unwrap_or_else(|| "no reason given".into())
        ),
    }
}

/// `30s`, `10m`, `1h`, `24h` (a bare number is seconds).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30m or 1h"))?;
    let seconds = match unit {
        "" | "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        _ => return Err(format!("{text:?}: the unit must be s, m or h")),
    };
    Ok(Duration::from_secs(seconds))
}

fn when(millis: i64) -> String {
    orc_common::time::format_time(orc_common::Timestamp(millis))
}

fn tokens_url(org: &str, project: &str, node: &str) -> String {
    format!(
        "{}/nodes/{}/join-tokens",
        project_url(org, project),
        segment(node)
    )
}

/// `orc node join create NODE`: prints the token alone on stdout (or writes it to `output`,
/// 0600), and what it admits on stderr.
pub async fn join_create(
    conn: &ConnArgs,
    node: &str,
    project: Option<&str>,
    ttl: Duration,
    product_uuid: Option<String>,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let body = CreateJoinToken {
        ttl_seconds: Some(ttl.as_secs()),
        product_uuid,
    };
    let created: CreatedJoinToken = client
        .post(&tokens_url(&org, &project, node), &body)
        .await?;
    if conn.json && output.is_none() {
        return print_json(&created);
    }
    match output {
        Some(path) => {
            orc_zone_api_types::data_dir::write_private_file(path, &created.secret)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("Wrote the join token to {} (0600).", path.display());
        }
        None => println!("{}", created.secret),
    }
    eprintln!(
        "Join token {} admits node {} once, until {}; on the node run:\n  orc agent --zone {} --node {} --join-token-file FILE",
        created.token.id,
        created.token.node_id,
        when(created.token.expires_at),
        created.endpoint,
        created.token.node_id
    );
    Ok(())
}

/// `orc node join list NODE`.
pub async fn join_list(conn: &ConnArgs, node: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let tokens: Vec<JoinTokenView> = client.get(&tokens_url(&org, &project, node)).await?;
    if conn.json {
        return print_json(&tokens);
    }
    if tokens.is_empty() {
        outln!("No join tokens.");
        return Ok(());
    }
    let mut t = Table::new(&["TOKEN", "STATE", "CREATED BY", "EXPIRES", "USED", "MACHINE"]);
    for token in &tokens {
        t.row(vec![
            token.id.clone(),
            token.state.clone(),
            token.created_by.clone(),
            when(token.expires_at),
            token.used_at.map_or("-".to_string(), when),
            token.product_uuid.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out!("{}", t.render());
    Ok(())
}

/// `orc node join revoke NODE TOKEN`.
pub async fn join_revoke(
    conn: &ConnArgs,
    node: &str,
    token: &str,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let revoked: JoinTokenView = client
        .delete(&format!(
            "{}/{}",
            tokens_url(&org, &project, node),
            segment(token)
        ))
        .await?;
    if conn.json {
        return print_json(&revoked);
    }
    outln!(
        "Revoked join token {} of node {}.",
        revoked.id,
        revoked.node_id
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_read_like_people_write_them() {
        assert_eq!(parse_ttl("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_ttl("24h"), Ok(Duration::from_secs(86_400)));
        assert!(
            parse_ttl("1d")
                .unwrap_err()
                .contains("unit must be s, m or h")
        );
        assert!(parse_ttl("soon").unwrap_err().contains("not a duration"));
    }
}
