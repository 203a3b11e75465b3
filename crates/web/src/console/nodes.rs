//! A node's page: its facts, commands run on it (`orc exec`), and join tokens.

use super::*;

/// What a node's page shows besides the node: a token just minted, a command's result,
/// and the forms' values and problems.
#[derive(Default)]
pub(super) struct NodeExtras {
    pub(super) created: Option<orc_zone_api_types::views::CreatedJoinToken>,
    pub(super) exec: Option<model::ExecResult>,
    pub(super) command: String,
    pub(super) timeout: String,
    pub(super) ttl: String,
    pub(super) errors: FieldErrors,
    pub(super) status: Option<StatusCode>,
}

/// The node `node` of `pool`, as the API shows it to the person.
pub(super) async fn node_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    node: &str,
    extras: NodeExtras,
) -> PageResult {
    let (_, nodes) = pool_and_nodes(&cx.api, &current, pool)
        .await
        .map_err(|e| cx.refused(&e))?;
    let Some(found) = nodes.into_iter().find(|n| n.id == node) else {
        return Err(cx.refused(&ApiRefusal {
            status: StatusCode::NOT_FOUND,
            message: format!("pool {}/{pool} has no live node {node}", current.path()),
            field: None,
        }));
    };
    let tokens: Vec<orc_zone_api_types::views::JoinTokenView> = cx
        .api
        .get(&format!(
            "{}/nodes/{}/join-tokens",
            api_project(&current),
            seg(node)
        ))
        .await
        .unwrap_or_default();
    let page = model::NodePage {
        pool: pool.to_string(),
        node: found,
        tokens,
        created: extras.created,
        command: extras.command,
        timeout: if extras.timeout.is_empty() {
            "60".into()
        } else {
            extras.timeout
        },
        ttl: if extras.ttl.is_empty() {
            "3600".into()
        } else {
            extras.ttl
        },
        exec: extras.exec,
        errors: extras.errors,
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        extras.status.unwrap_or(StatusCode::OK),
        views::node(&frame, &current, &page),
    ))
}

/// Output a node's page shows of one stream.
pub(super) const EXEC_SHOWN_BYTES: usize = 64 * 1024;

/// Runs the form's command on the node's agent and shows what it printed.
pub(super) async fn run_command(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    node: &str,
) -> PageResult {
    let mut extras = NodeExtras {
        command: cx.form("command"),
        timeout: cx.form("timeout"),
        ..NodeExtras::default()
    };
    let argv = forms::command(&mut extras.errors, &extras.command);
    let timeout = forms::exec_timeout(&mut extras.errors, &extras.timeout);
    let (Some(argv), Some(timeout)) = (argv, timeout) else {
        extras.status = Some(StatusCode::BAD_REQUEST);
        return node_page(cx, current, pool, node, extras).await;
    };
    let path = format!("{}/nodes/{}/exec", api_project(&current), seg(node));
    let body = orc_zone_api_types::views::ExecRequest {
        argv: argv.clone(),
        timeout_seconds: Some(timeout),
    };
    match cx.api.send_raw(Method::POST, &path, &body).await {
        Ok(bytes) => extras.exec = Some(exec_result(argv, &bytes)),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "command".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    node_page(cx, current, pool, node, extras).await
}

/// An exec's lines (`application/x-ndjson`) as what each stream printed and how it ended.
pub fn exec_result(argv: Vec<String>, ndjson: &[u8]) -> model::ExecResult {
    use base64::Engine as _;
    let mut result = model::ExecResult {
        argv,
        ..model::ExecResult::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for line in ndjson.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<orc_zone_api_types::views::ExecLine>(line) {
            Ok(orc_zone_api_types::views::ExecLine::Output { stream, data }) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .unwrap_or_default();
                let target = if stream == "stderr" {
                    &mut err
                } else {
                    &mut out
                };
                let room = EXEC_SHOWN_BYTES.saturating_sub(target.len());
                if bytes.len() > room {
                    result.truncated = true;
                }
                target.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok(orc_zone_api_types::views::ExecLine::Exit { code, error }) => {
                result.code = code;
                result.error = error;
            }
            Err(_) => result.error = Some("the agent's answer could not be read".into()),
        }
    }
    result.stdout = String::from_utf8_lossy(&out).into_owned();
    result.stderr = String::from_utf8_lossy(&err).into_owned();
    result
}

/// Mints a join token for the node and shows its secret this once.
pub(super) async fn mint_join_token(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    node: &str,
) -> PageResult {
    let mut extras = NodeExtras {
        ttl: cx.form("ttl"),
        ..NodeExtras::default()
    };
    let Some(ttl) = forms::join_ttl(&mut extras.errors, &extras.ttl) else {
        extras.status = Some(StatusCode::BAD_REQUEST);
        return node_page(cx, current, pool, node, extras).await;
    };
    let path = format!("{}/nodes/{}/join-tokens", api_project(&current), seg(node));
    let body = orc_zone_api_types::views::CreateJoinToken {
        ttl_seconds: Some(ttl),
        product_uuid: None,
    };
    match cx.api.send(Method::POST, &path, &body).await {
        Ok(created) => extras.created = Some(created),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "ttl".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    node_page(cx, current, pool, node, extras).await
}
