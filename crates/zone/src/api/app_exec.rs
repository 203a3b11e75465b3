//! Reaching an app's replicas where they run: a command inside one (`orc app exec`) and
//! their output (`orc app logs`), both carried by the node's agent stream like `orc exec`.
//!
//! Both answer `application/x-ndjson` as they go. An exec runs in the chosen replica's
//! container with its environment, its output sent once it ends, then its exit; closing the
//! connection kills it. Logs merge every chosen replica's stdout and stderr, each chunk
//! named by its replica (`web[0]`), and end each replica with an `end` line; followed, they
//! go on until the connection closes (or an hour).

use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use base64::Engine as _;
use orc_common::text::quoted;
use tokio_stream::StreamExt as _;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs, QueryArgs};
use super::nodes::{
    DEFAULT_EXEC_SECONDS, MAX_EXEC_SECONDS, exec_answer, exec_error, ndjson, stream_word,
};
use super::tenancy::{parse_name, project_with_role};
use super::views::{AppExecRequest, AppLogLine, AppLogsQuery, ExecLine};
use crate::agents::{ExecEvent, ExecWhat};
use crate::model::{EventScope, Role};
use crate::store::AppReplicaRow;
use orc_zone_model::access::Caller;

/// The end of each stream `orc app logs` shows by default.
const DEFAULT_TAIL_BYTES: u64 = 16 << 10;
/// How long logs are followed at most.
const FOLLOW_SECONDS: u64 = 3600;

/// The replicas of app `app` of `project`; not found when it has no revision.
async fn replicas_of(
    state: &ApiState,
    project: &crate::model::Project,
    app: &str,
) -> ApiResult<(crate::model::Name, Vec<AppReplicaRow>)> {
    let name = parse_name("app", app)?;
    if state
        .store
        .newest_app_revision(&project.id, &name)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("app", format!("app {app} not found")));
    }
    let replicas = state.store.list_app_replicas(&project.id, &name).await?;
    Ok((name, replicas))
}

/// The replica id on its node, as the zone assigns it.
fn replica_id(app: &str, row: &AppReplicaRow) -> String {
    format!("{app}-{}-{}", row.workload, row.slot)
}

/// Runs a command inside one replica of an app.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/apps/{app}/exec",
    tag = "apps", request_body = AppExecRequest,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 200, description = "Output and exit, one JSON object per line",
            content_type = "application/x-ndjson", body = ExecLine),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub(super) async fn exec_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
    body: JsonBody<AppExecRequest>,
) -> ApiResult<Response> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let Some(program) = body.argv.first().filter(|p| !p.is_empty()).cloned() else {
        return Err(ApiError::invalid("argv", "argv must name a program"));
    };
    let seconds = body.timeout_seconds.unwrap_or(DEFAULT_EXEC_SECONDS);
    if !(1..=MAX_EXEC_SECONDS).contains(&seconds) {
        return Err(ApiError::invalid(
            "timeout_seconds",
            format!("timeout_seconds must be 1 to {MAX_EXEC_SECONDS}, not {seconds}"),
        ));
    }
    let (name, replicas) = replicas_of(&state, &project, &app).await?;
    let of_workload: Vec<&AppReplicaRow> = replicas
        .iter()
        .filter(|r| r.workload == body.workload)
        .collect();
    if of_workload.is_empty() {
        return Err(ApiError::invalid(
            "workload",
            format!("app {name} has no replica of {:?}", body.workload),
        ));
    }
    let chosen = match body.slot {
        Some(slot) => of_workload
            .iter()
            .find(|r| r.slot == slot)
            .copied()
            .ok_or_else(|| {
                ApiError::invalid("slot", format!("{} has no slot {slot}", body.workload))
            })?,
        None => of_workload
            .iter()
            .find(|r| r.ready && r.node_id.is_some())
            .or_else(|| of_workload.iter().find(|r| r.node_id.is_some()))
            .copied()
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Conflict,
                    format!("no replica of {} runs on a node yet", body.workload),
                )
            })?,
    };
    let Some(node) = chosen.node_id.clone() else {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("{}[{}] waits for a node", chosen.workload, chosen.slot),
        ));
    };
    let Some(agents) = state.agents.as_ref() else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this zone has no agent hub",
        ));
    };
    let events = agents
        .exec(
            &node,
            ExecWhat::Replica {
                replica: replica_id(name.as_str(), chosen),
                argv: body.argv.clone(),
            },
            Duration::from_secs(u64::from(seconds)),
        )
        .map_err(exec_error)?;
    let scope = EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        node_id: Some(node.clone()),
        ..Default::default()
    };
    let words = format!(
        "{} ran {} with {} argument(s) in {name}/{}[{}] (timeout {seconds} s)",
        caller.user.name,
        quoted(&program),
        body.argv.len() - 1,
        chosen.workload,
        chosen.slot
    );
    if let Err(e) = state
        .store
        .record_event(&scope, "app.exec", &words, state.now())
        .await
    {
        tracing::warn!(error = %e, "app event not recorded");
    }
    Ok(exec_answer(events))
}

/// The output of an app's replicas.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/apps/{app}/logs",
    tag = "apps", params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name"), AppLogsQuery),
    responses((status = 200, description = "Output of each replica, one JSON object per line",
            content_type = "application/x-ndjson", body = AppLogLine),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn app_logs(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
    QueryArgs(query): QueryArgs<AppLogsQuery>,
) -> ApiResult<Response> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let tail = match query.tail.as_deref() {
        None => DEFAULT_TAIL_BYTES,
        Some(text) => text.parse::<u64>().map_err(|_| {
            ApiError::invalid(
                "tail",
                format!("tail must be a number of bytes, not {text:?}"),
            )
        })?,
    };
    let follow = match query.follow.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "follow",
                format!("follow must be true or false, not {other:?}"),
            ));
        }
    };
    let (name, replicas) = replicas_of(&state, &project, &app).await?;
    let chosen: Vec<&AppReplicaRow> = replicas
        .iter()
        .filter(|r| query.workload.as_ref().is_none_or(|w| &r.workload == w))
        .collect();
    if let Some(workload) = &query.workload
        && chosen.is_empty()
    {
        return Err(ApiError::invalid(
            "workload",
            format!("app {name} has no replica of {workload:?}"),
        ));
    }
    let timeout = Duration::from_secs(if follow { FOLLOW_SECONDS } else { 60 });
    let mut streams = tokio_stream::StreamMap::new();
    let mut ends = Vec::new();
    for row in chosen {
        let label = format!("{}[{}]", row.workload, row.slot);
        let opened = match (&row.node_id, state.agents.as_ref()) {
            (Some(node), Some(agents)) => agents
                .exec(
                    node,
                    ExecWhat::Logs {
                        replica: replica_id(name.as_str(), row),
                        tail_bytes: tail,
                        follow,
                    },
                    timeout,
                )
                .map_err(|e| e.to_string()),
            (None, _) => Err("it waits for a node".to_string()),
            (_, None) => Err("this zone has no agent hub".to_string()),
        };
        match opened {
            Ok(events) => {
                streams.insert(label, tokio_stream::wrappers::ReceiverStream::new(events));
            }
            Err(error) => ends.push(AppLogLine::End {
                replica: label,
                error: Some(error),
            }),
        }
    }
    let first = tokio_stream::iter(ends);
    let rest = streams.map(|(replica, event)| match event {
        ExecEvent::Output { stream, data } => AppLogLine::Output {
            replica,
            stream: stream_word(stream),
            data: base64::engine::general_purpose::STANDARD.encode(data),
        },
        ExecEvent::Exit { error, .. } => AppLogLine::End { replica, error },
    });
    Ok(ndjson(first.chain(rest)))
}
