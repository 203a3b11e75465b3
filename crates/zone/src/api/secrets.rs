//! A project's secrets from the API: `orc secret set`, `orc secret list` and
//! `orc secret delete`.
//!
//! Members of the project set and delete secrets; viewers list their names. A value goes one
//! way: in through `PUT`, sealed by the store, and out only to the zone itself when it
//! delivers secrets to the nodes that run a workload naming them. No answer, error, event or
//! log line here carries a value: answers are [`SecretView`]s, and a body the API cannot read
//! is refused without quoting what it held.
//!
//! Setting a secret changes no running workload (a workload reads the value when it is
//! deployed), so it does not wake the reconcilers.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_zone_store::{SecretName, SecretRecord};

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::project_with_role;
use super::views::{SecretView, SetSecret};
use crate::model::{EventScope, Org, Project, Role};
use orc_zone_model::access::Caller;

/// The most bytes a secret's value may hold.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// The secret name in a path, or a 400 naming `name`.
fn secret_name(text: &str) -> ApiResult<SecretName> {
    text.parse::<SecretName>()
        .map_err(|e| ApiError::invalid("name", format!("name: {e}")))
}

/// The value of a set request, or a 400 naming `value` that does not quote it.
fn secret_value(body: JsonBody<SetSecret>) -> ApiResult<String> {
    let body = body.parse().map_err(|e| {
        // serde quotes a scalar of the wrong type ("invalid type: integer `…`"): say what is
        // wrong without it. A missing field quotes nothing and keeps its words.
        if e.field.as_deref() == Some("value") && !e.message.starts_with("missing field") {
            ApiError::invalid("value", "value: must be text (a JSON string)")
        } else {
            e
        }
    })?;
    if body.value.is_empty() {
        return Err(ApiError::invalid(
            "value",
            "value: a secret's value must not be empty",
        ));
    }
    if body.value.len() > MAX_SECRET_BYTES {
        return Err(ApiError::invalid(
            "value",
            format!("value: a secret's value holds at most {MAX_SECRET_BYTES} bytes (64 KiB)"),
        ));
    }
    Ok(body.value)
}

fn secret_view(record: &SecretRecord) -> SecretView {
    SecretView {
        name: record.name.to_string(),
        version: record.version,
        updated_at: record.updated_at.millis(),
        updated_by: record
            .updated_by_name
            .as_ref()
            .map_or_else(|| record.updated_by.to_string(), ToString::to_string),
    }
}

/// Records a secret's event in its project; a failure to record is logged, never the
/// request's.
async fn secret_event(state: &ApiState, org: &Org, project: &Project, kind: &str, words: &str) {
    let scope = EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        provider_id: None,
        pool_id: None,
        node_id: None,
    };
    if let Err(e) = state
        .store
        .record_event(&scope, kind, words, state.now())
        .await
    {
        tracing::warn!(project = %project.id, error = %e, "secret event not recorded");
    }
}

/// The project's secrets by name: names, versions and who set them, never a value.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/secrets", tag = "secrets",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<SecretView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_secrets(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<SecretView>>> {
    let (_, project_row) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let records = state.store.list_secrets(&project_row.id).await?;
    Ok(Json(records.iter().map(secret_view).collect()))
}

/// Sets a secret: a new name starts at version 1, a name set before gets its next version.
/// The answer names the version; the value is never shown again.
#[utoipa::path(put, path = "/api/orgs/{org}/projects/{project}/secrets/{name}", tag = "secrets",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("name" = String, Path,
            description = "Secret name: 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")),
    request_body = SetSecret,
    responses((status = 200, body = SecretView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn set_secret(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, name)): PathArgs<(String, String, String)>,
    body: JsonBody<SetSecret>,
) -> ApiResult<Json<SecretView>> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let name = secret_name(&name)?;
    let value = secret_value(body)?;
    let now = state.now();
    let version = state
        .store
        .set_secret(&project_row.id, &name, &value, &caller.user.id, now)
        .await?;
    let words = format!(
        "secret {name} set (version {version}) by {}",
        caller.user.name
    );
    secret_event(&state, &org_row, &project_row, "secret.set", &words).await;
    // A revision blocked on this secret may roll out now.
    state.wake();
    Ok(Json(SecretView {
        name: name.to_string(),
        version,
        updated_at: now.millis(),
        updated_by: caller.user.name.to_string(),
    }))
}

/// Deletes a secret.
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/secrets/{name}",
    tag = "secrets",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("name" = String, Path, description = "Secret name")),
    responses((status = 204, description = "Deleted"), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_secret(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, name)): PathArgs<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let name = secret_name(&name)?;
    if !state.store.delete_secret(&project_row.id, &name).await? {
        return Err(ApiError::not_found(
            "name",
            format!("secret {name} not found in project {org}/{project}"),
        ));
    }
    let words = format!("secret {name} deleted by {}", caller.user.name);
    secret_event(&state, &org_row, &project_row, "secret.deleted", &words).await;
    Ok(StatusCode::NO_CONTENT)
}
