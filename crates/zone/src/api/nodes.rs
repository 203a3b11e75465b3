//! A node's agent from the API: `orc exec` and the node's join tokens.
//!
//! Members of the node's project run commands on it and mint or revoke its join tokens;
//! viewers list the tokens (never a secret). Every exec is a `node.exec` event naming who ran
//! which program with how many arguments; the arguments themselves stay out of events and
//! logs, since they may carry secrets.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use orc_common::text::quoted;
use tokio_stream::StreamExt as _;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::project_with_role;
use super::views::{CreateJoinToken, CreatedJoinToken, ExecLine, ExecRequest, JoinTokenView};
use crate::agents::{ExecError, ExecEvent, ExecStream};
use crate::model::{EventScope, JoinTokenId, Node, NodeId, NodeState, Org, Project, Role};
use crate::store::{NewJoinToken, StoreError};
use orc_zone_model::JoinTtl;
use orc_zone_model::access::Caller;

/// The longest `orc exec` may run.
pub const MAX_EXEC_SECONDS: u32 = 3600;
/// How long `orc exec` runs when the request names no timeout.
pub const DEFAULT_EXEC_SECONDS: u32 = 600;
/// The most arguments, and bytes over all of them, an exec takes.
const MAX_ARGS: usize = 1024;
const MAX_ARG_BYTES: usize = 64 << 10;

/// The node `id` of project `org/project`, if the caller holds `needed` there.
pub(super) async fn node_with_role(
    state: &ApiState,
    caller: &Caller,
    org: &str,
    project: &str,
    id: &str,
    needed: Role,
) -> ApiResult<(Org, Project, Node)> {
    let (org_row, project_row) = project_with_role(state, caller, org, project, needed).await?;
    let missing = || ApiError::not_found("node", format!("node {id} not found in {org}/{project}"));
    let node_id: NodeId = id.parse().map_err(|_| missing())?;
    let node = match state.store.get_node(&node_id).await {
        Ok(n) => n,
        Err(StoreError::NotFound { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    let pool = state.store.get_pool(&node.pool_id).await?;
    if pool.project_id != project_row.id {
        return Err(missing());
    }
    Ok((org_row, project_row, node))
}

fn scope_of(org: &Org, project: &Project, node: &Node) -> EventScope {
    EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        provider_id: None,
        pool_id: Some(node.pool_id.clone()),
        node_id: Some(node.id.clone()),
    }
}

async fn node_event(state: &ApiState, scope: &EventScope, kind: &str, words: &str) {
    if let Err(e) = state
        .store
        .record_event(scope, kind, words, state.now())
        .await
    {
        tracing::warn!(error = %e, kind, "node event not recorded");
    }
}

/// Runs a command on the node through its agent, without a shell.
///
/// The answer streams as `application/x-ndjson`: `{"type":"output","stream":"stdout",
/// "data":"<base64>"}` lines as the command writes, then one `{"type":"exit","code":0}`.
/// Closing the connection kills the command.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/exec",
    tag = "nodes", request_body = ExecRequest,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, description = "Output and exit, one JSON object per line",
            content_type = "application/x-ndjson", body = ExecLine),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub(super) async fn exec_node(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
    body: JsonBody<ExecRequest>,
) -> ApiResult<Response> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    let body = body.parse()?;
    let Some(program) = body.argv.first().filter(|p| !p.is_empty()) else {
        return Err(ApiError::invalid("argv", "argv must name a program"));
    };
    if body.argv.len() > MAX_ARGS
        || body.argv.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES
    {
        return Err(ApiError::invalid(
            "argv",
            format!("argv takes at most {MAX_ARGS} arguments and {MAX_ARG_BYTES} bytes"),
        ));
    }
    let seconds = body.timeout_seconds.unwrap_or(DEFAULT_EXEC_SECONDS);
    if !(1..=MAX_EXEC_SECONDS).contains(&seconds) {
        return Err(ApiError::invalid(
            "timeout_seconds",
            format!("timeout_seconds must be 1 to {MAX_EXEC_SECONDS}, not {seconds}"),
        ));
    }
    if node.status.state != NodeState::Running {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "node {} is {}; commands run only on running nodes",
                node.id, node.status.state
            ),
        ));
    }
    let Some(agents) = state.agents.as_ref() else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this zone has no agent hub",
        ));
    };
    let events = agents
        .exec(
            &node.id,
            crate::agents::ExecWhat::Node(body.argv.clone()),
            Duration::from_secs(u64::from(seconds)),
        )
        .map_err(exec_error)?;
    let words = format!(
        "{} ran {} with {} argument(s) (timeout {seconds} s)",
        caller.user.name,
        quoted(program),
        body.argv.len() - 1
    );
    node_event(
        &state,
        &scope_of(&org, &project, &node),
        "node.exec",
        &words,
    )
    .await;
    tracing::info!(node = %node.id, user = %caller.user.name, program = %program, args = body.argv.len() - 1, "exec");
    Ok(exec_answer(events))
}

/// `stdout` or `stderr`.
pub(super) fn stream_word(stream: ExecStream) -> String {
    match stream {
        ExecStream::Stdout => "stdout",
        ExecStream::Stderr => "stderr",
    }
    .to_string()
}

/// An `application/x-ndjson` answer: each of `lines` as JSON on a line of its own, sent as
/// it comes.
pub(super) fn ndjson<T: serde::Serialize>(
    lines: impl tokio_stream::Stream<Item = T> + Send + 'static,
) -> Response {
    let lines = lines.map(|line| {
        let mut text = serde_json::to_vec(&line).unwrap_or_default();
        text.push(b'\n');
        Ok::<_, std::convert::Infallible>(text)
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response()
}

/// An exec's events as its answer: output lines, then the exit.
pub(super) fn exec_answer(events: tokio::sync::mpsc::Receiver<ExecEvent>) -> Response {
    ndjson(
        tokio_stream::wrappers::ReceiverStream::new(events).map(|event| match event {
            ExecEvent::Output { stream, data } => ExecLine::Output {
                stream: stream_word(stream),
                data: base64::engine::general_purpose::STANDARD.encode(data),
            },
            ExecEvent::Exit { code, error } => ExecLine::Exit { code, error },
        }),
    )
}

/// Why an exec could not start, as the API says it.
pub(super) fn exec_error(e: ExecError) -> ApiError {
    match e {
        ExecError::NotConnected(_) => ApiError::new(
            ErrorCode::Unavailable,
            format!("{e}; `orc nodes` shows when it was last heard from"),
        ),
        ExecError::EmptyCommand => ApiError::invalid("argv", e.to_string()),
    }
}

/// Mints a join token for the node (revoking its earlier live ones). The answer carries
/// the token's secret: the only time it is shown.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/join-tokens",
    tag = "nodes", request_body = CreateJoinToken,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 201, body = CreatedJoinToken), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn create_join_token(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
    body: JsonBody<CreateJoinToken>,
) -> ApiResult<(StatusCode, Json<CreatedJoinToken>)> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    let body = body.parse()?;
    let ttl = match body.ttl_seconds {
        None => JoinTtl::default(),
        Some(seconds) => JoinTtl::new(Duration::from_secs(seconds))
            .map_err(|e| ApiError::invalid("ttl_seconds", e.to_string()))?,
    };
    let product_uuid = body
        .product_uuid
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    if let Some(uuid) = product_uuid
        && (uuid.len() > 64 || !uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
    {
        return Err(ApiError::invalid(
            "product_uuid",
            "product_uuid must be a UUID as the machine's DMI data gives it",
        ));
    }
    if node.status.state == NodeState::Ended {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("node {} has ended; it cannot join", node.id),
        ));
    }
    let (agents, fingerprint) = match state
        .agents
        .as_ref()
        .and_then(|a| Some((a, a.ca_fingerprint()?)))
    {
        Some(found) => found,
        None => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "this zone serves plain text and has no CA, so nodes cannot join it",
            ));
        }
    };
    let created_by = format!("user:{}", caller.user.id);
    let new = NewJoinToken {
        ca_fingerprint: &fingerprint,
        created_by: &created_by,
        ttl,
        product_uuid,
    };
    let now = state.now();
    let (token, secret) = state.store.create_join_token(&node.id, &new, now).await?;
    let words = format!(
        "{} minted join token {} (expires in {} min)",
        caller.user.name,
        token.id,
        ttl.get().as_secs() / 60
    );
    node_event(
        &state,
        &scope_of(&org, &project, &node),
        "node.join_token",
        &words,
    )
    .await;
    Ok((
        StatusCode::CREATED,
        Json(CreatedJoinToken {
            token: JoinTokenView::of(&token, now),
            secret: secret.expose().to_string(),
            endpoint: agents.endpoint(),
        }),
    ))
}

/// The node's join tokens, oldest first (never their secrets).
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/join-tokens",
    tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = Vec<JoinTokenView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_join_tokens(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<Vec<JoinTokenView>>> {
    let (_, _, node) = node_with_role(&state, &caller, &org, &project, &node, Role::Viewer).await?;
    let now = state.now();
    let tokens = state.store.list_join_tokens(&node.id).await?;
    Ok(Json(
        tokens.iter().map(|t| JoinTokenView::of(t, now)).collect(),
    ))
}

/// Revokes one of the node's join tokens (revoking it again changes nothing).
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/join-tokens/{token}",
    tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id"),
        ("token" = String, Path, description = "Join token id (`j-…`)")),
    responses((status = 200, body = JoinTokenView), (status = 404, body = ErrorBody)))]
pub(super) async fn revoke_join_token(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node, token)): PathArgs<(String, String, String, String)>,
) -> ApiResult<Json<JoinTokenView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    let missing = || {
        ApiError::not_found(
            "token",
            format!("join token {token} of node {} not found", node.id),
        )
    };
    let id: JoinTokenId = token.parse().map_err(|_| missing())?;
    let tokens = state.store.list_join_tokens(&node.id).await?;
    if !tokens.iter().any(|t| t.id == id) {
        return Err(missing());
    }
    let now = state.now();
    let revoked = state.store.revoke_join_token(&id, now).await?;
    let words = format!("{} revoked join token {}", caller.user.name, revoked.id);
    node_event(
        &state,
        &scope_of(&org, &project, &node),
        "node.join_token",
        &words,
    )
    .await;
    Ok(Json(JoinTokenView::of(&revoked, now)))
}

/// The `orc` binary nodes install, as the zone serves it.
#[derive(Debug, Clone)]
pub struct ServedBinary {
    pub path: std::path::PathBuf,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

fn served_binary(state: &ApiState) -> ApiResult<&ServedBinary> {
    state.agent_binary.as_deref().ok_or_else(|| {
        ApiError::not_found(
            "binary",
            "this zone serves no agent binary; nodes bring their own orc",
        )
    })
}

/// The `orc` binary, for a node's bootstrap to install (it checks the SHA-256 it was given).
/// Needs no token: the binary is no secret.
#[utoipa::path(get, path = "/api/agent/orc", tag = "nodes", security(()),
    responses((status = 200, description = "The orc binary", content_type = "application/octet-stream"),
        (status = 404, body = ErrorBody)))]
pub(super) async fn agent_binary(State(state): State<ApiState>) -> ApiResult<Response> {
    stream_binary(served_binary(&state)?).await
}

/// The served binary as a streamed answer with its length and SHA-256.
pub(super) async fn stream_binary(binary: &ServedBinary) -> ApiResult<Response> {
    let file = tokio::fs::File::open(&binary.path).await.map_err(|e| {
        tracing::warn!(path = %binary.path.display(), error = %e, "the agent binary cannot be read");
        ApiError::new(ErrorCode::Unavailable, "the agent binary cannot be read right now")
    })?;
    let length = file.metadata().await.map(|m| m.len()).ok();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (
                header::HeaderName::from_static("x-orc-sha256"),
                binary.sha256.clone(),
            ),
        ],
        body,
    )
        .into_response();
    if let Some(length) = length
        && let Ok(value) = header::HeaderValue::from_str(&length.to_string())
    {
        response.headers_mut().insert(header::CONTENT_LENGTH, value);
    }
    Ok(response)
}

/// The SHA-256 of the `orc` binary, as `sha256sum` prints it (`<hex>  orc`).
#[utoipa::path(get, path = "/api/agent/orc.sha256", tag = "nodes", security(()),
    responses((status = 200, description = "`<hex>  orc`", content_type = "text/plain"),
        (status = 404, body = ErrorBody)))]
pub(super) async fn agent_binary_sha256(State(state): State<ApiState>) -> ApiResult<Response> {
    let binary = served_binary(&state)?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{}  orc\n", binary.sha256),
    )
        .into_response())
}

/// The SHA-256 of the file at `path`, lowercase hex.
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
