//! The access edge's keys: the JWKS apps check assertions against (public, no token), and
//! their list and rotation (zone operators).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use orc_zone_api_types::views::{AccessKeyView, RotateAccessKey, RotatedAccessKeyView};

use super::ApiState;
use super::access::Requirements as _;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::JsonBody;
use crate::model::EventScope;
use orc_web::access_keys::{AccessKeyError, AccessKeys, DEFAULT_OVERLAP, MAX_OVERLAP};
use orc_zone_model::access::Caller;

fn keys(state: &ApiState) -> ApiResult<&AccessKeys> {
    state.access_keys.as_deref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unavailable,
            "this zone has no access keys (it runs without its access edge)",
        )
    })
}

fn failed(error: AccessKeyError) -> ApiError {
    match error {
        // The zone's store stands behind the keys: its errors keep their meaning.
        AccessKeyError::Store(failure) => match failure.0.downcast::<crate::store::StoreError>() {
            Ok(e) => ApiError::from(*e),
            Err(other) => ApiError::internal(other.as_ref()),
        },
        other => ApiError::internal(&other),
    }
}

/// The public keys of the access edge, as a JWKS: an app behind the edge checks the
/// `X-Orc-Access-Assertion` of every request against them. Needs no token.
#[utoipa::path(get, path = "/.well-known/orc-access/jwks.json", tag = "access",
    security(()),
    responses((status = 200, description = "The JWKS document (EC P-256 keys, ES256)",
        content_type = "application/json"), (status = 503, body = ErrorBody)))]
pub(super) async fn jwks(State(state): State<ApiState>) -> ApiResult<impl IntoResponse> {
    let document = keys(&state)?.jwks(state.now()).await.map_err(failed)?;
    Ok((
        [
            (header::CACHE_CONTROL, "public, max-age=60"),
            (header::CONTENT_TYPE, "application/json"),
        ],
        document.to_string(),
    ))
}

/// The access edge's signing keys still published (zone operators).
#[utoipa::path(get, path = "/api/zone/access-keys", tag = "access",
    responses((status = 200, body = Vec<AccessKeyView>), (status = 403, body = ErrorBody)))]
pub(super) async fn list_access_keys(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<Vec<AccessKeyView>>> {
    caller.require_operator()?;
    let listed = keys(&state)?.list(state.now()).await.map_err(failed)?;
    Ok(Json(
        listed
            .iter()
            .map(|k| AccessKeyView {
                kid: k.kid.clone(),
                current: k.retire_at.is_none(),
                created_at: k.created_at.millis(),
                retire_at: k.retire_at.map(|t| t.millis()),
            })
            .collect(),
    ))
}

/// Makes a new access key the signing one; the one it replaces stays published for the
/// overlap, so assertions it signed and the keys apps hold keep checking (zone operators).
#[utoipa::path(post, path = "/api/zone/access-keys/rotate", tag = "access",
    request_body = RotateAccessKey,
    responses((status = 200, body = RotatedAccessKeyView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
pub(super) async fn rotate_access_key(
    State(state): State<ApiState>,
    caller: Caller,
    body: JsonBody<RotateAccessKey>,
) -> ApiResult<Json<RotatedAccessKeyView>> {
    caller.require_operator()?;
    let body = body.parse()?;
    let overlap = match body.overlap_seconds {
        None => DEFAULT_OVERLAP,
        Some(secs) if Duration::from_secs(secs) <= MAX_OVERLAP => Duration::from_secs(secs),
        Some(secs) => {
            return Err(ApiError::invalid(
                "overlap_seconds",
                format!(
                    "an overlap of {secs} s is longer than the {} s (7 days) allowed",
                    MAX_OVERLAP.as_secs()
                ),
            ));
        }
    };
    let rotated = keys(&state)?
        .rotate(state.now(), overlap)
        .await
        .map_err(failed)?;
    let words = match &rotated.replaced {
        Some((old, _)) => format!(
            "{} rotated the access key: {} signs now, {old} stays published for {} s",
            caller.user.name,
            rotated.kid,
            overlap.as_secs()
        ),
        None => format!("{} made access key {}", caller.user.name, rotated.kid),
    };
    if let Err(e) = state
        .store
        .record_event(
            &EventScope::default(),
            "zone.access_key_rotated",
            &words,
            state.now(),
        )
        .await
    {
        tracing::warn!(error = %e, "access key event not recorded");
    }
    Ok(Json(RotatedAccessKeyView {
        kid: rotated.kid,
        replaced: rotated.replaced.as_ref().map(|r| r.0.clone()),
        replaced_until: rotated.replaced.map(|r| r.1.millis()),
    }))
}
