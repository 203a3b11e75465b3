//! Request extractors whose failures are [`ApiError`]s naming the field at fault, instead of
//! axum's plain-text rejections.
//!
//! - [`JsonBody`] reads a JSON body through `serde_path_to_error`, so a wrong type names its
//!   path (`shape.cpu`) and a missing or unknown field names that field.
//! - [`QueryArgs`] reads the query string; query structs hold text that handlers parse with
//!   [`parse_query_value`], so a bad value names its parameter.
//! - [`Caller`] authenticates `Authorization: Bearer <token>` against the store and loads the
//!   caller's memberships once per request; a caller it admits marks the connection
//!   authenticated ([`orc_tls::ConnectionAuth`]), which keeps it out of the listener's
//!   limits for unauthenticated connections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use orc_common::text::quoted;
use serde::de::DeserializeOwned;

use super::ApiState;
use super::error::{ApiError, ErrorCode};
use crate::model::TokenSecret;
use orc_zone_model::access::Caller;

/// The largest request body the API reads, in bytes; a larger one is answered 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// A JSON request body, read but not yet judged: a handler authorizes the caller first and
/// then calls [`JsonBody::parse`], so a caller without the role gets 403, not a 400 or 415
/// about a body it may not send. Errors name the field. Only a body over the size limit is
/// refused at once (413), so it is never held.
#[derive(Debug)]
pub struct JsonBody<T>(Result<T, ApiError>);

impl<T> JsonBody<T> {
    /// The body, or why it is not acceptable (415 not JSON, 400 naming the field).
    pub fn parse(self) -> Result<T, ApiError> {
        self.0
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v.split(';').next().unwrap_or("").trim();
                mime.eq_ignore_ascii_case("application/json")
            })
            .unwrap_or(false);
        let bytes = match Bytes::from_request(req, state).await {
            Ok(bytes) => bytes,
            Err(e) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("the body is larger than the API takes ({MAX_BODY_BYTES} bytes)"),
                ));
            }
            Err(e) => {
                return Ok(JsonBody(Err(ApiError::invalid(
                    "body",
                    format!("the body could not be read: {e}"),
                ))));
            }
        };
        if !is_json {
            return Ok(JsonBody(Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "the request body must be JSON (Content-Type: application/json)",
            ))));
        }
        Ok(JsonBody(parse_json(&bytes)))
    }
}

/// Parses a JSON document, naming the field at fault on error.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    match value {
        Ok(v) => match de.end() {
            Ok(()) => Ok(v),
            Err(e) => Err(ApiError::invalid(
                "body",
                format!("the body is not valid JSON: {e}"),
            )),
        },
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            let message = inner.to_string();
            if inner.is_syntax() || inner.is_eof() {
                return Err(ApiError::invalid(
                    "body",
                    format!("the body is not valid JSON: {message}"),
                ));
            }
            let message = match message.rfind(" at line ") {
                Some(i) => message[..i].to_string(),
                None => message,
            };
            Err(ApiError::invalid(field_of(&path, &message), message))
        }
    }
}

/// The field a serde message is about: for "missing field `x`" the field `x` under `path`
/// (serde reports the parent's path), for anything else `path` itself (which already ends in
/// the unknown or ill-typed field); `body` at the top level.
fn field_of(path: &str, message: &str) -> String {
    let prefix = if path == "." { "" } else { path };
    if let Some(rest) = message.strip_prefix("missing field `")
        && let Some(end) = rest.find('`')
    {
        let name = &rest[..end];
        return if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && prefix.is_empty()
        && let Some(end) = rest.find('`')
    {
        return rest[..end].to_string();
    }
    if prefix.is_empty() {
        "body".to_string()
    } else {
        prefix.to_string()
    }
}

/// Query-string arguments; errors name the parameter.
#[derive(Debug)]
pub struct QueryArgs<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(QueryArgs)
            .map_err(|err| {
                let message = err.to_string();
                ApiError::invalid(field_of(".", &message), message)
            })
    }
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &ApiState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(vouched) = parts.extensions.get::<VouchedCaller>() {
            return Ok(vouched.0.clone());
        }
        let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
            ApiError::unauthenticated("missing Authorization header (Authorization: Bearer TOKEN)")
        })?;
        let value = header
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                ApiError::unauthenticated("the Authorization header must be \"Bearer TOKEN\"")
            })?;
        caller_of_token(state, parts, value).await
    }
}

/// The caller a presented API token identifies: the bearer of `Authorization: Bearer`, and
/// the password of the registry's `Authorization: Basic`. A service credential opens nothing
/// here.
pub(crate) async fn caller_of_token(
    state: &ApiState,
    parts: &Parts,
    value: &str,
) -> Result<Caller, ApiError> {
    let secret = TokenSecret::from_presented(value.to_string());
    let now = state.now();
    let token = state
        .store
        .authenticate_token(&secret, now)
        .await?
        .ok_or_else(|| ApiError::unauthenticated("the token is unknown, revoked or expired"))?;
    if let Some(pool) = &token.service_pool {
        // A service credential's only use is its app pool's provider stream.
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "this is the service credential of app pool {pool}: it opens only that \
                 pool's provider stream, nothing on the API"
            ),
        ));
    }
    let user = state.store.get_user(&token.user_id).await?;
    let memberships = state.store.list_memberships_of_user(&user.id).await?;
    if let Some(connection) = parts.extensions.get::<orc_tls::ConnectionAuth>() {
        connection.mark_authenticated();
    }
    Ok(Caller {
        user,
        token,
        memberships,
    })
}

/// A caller the zone itself has already identified (the web console's signed-in person),
/// carried in a request's extensions when the console calls the API in process. Extensions
/// never come from the network, so only code of this crate can vouch; the API then decides
/// what the caller may do exactly as for a bearer token.
#[derive(Debug, Clone)]
pub(crate) struct VouchedCaller(pub(crate) Caller);

/// Parses an optional query parameter, naming it on error.
pub fn parse_query_value<T>(name: &str, value: Option<&str>) -> Result<Option<T>, ApiError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value
        .map(|v| {
            v.parse::<T>().map_err(|e| {
                ApiError::invalid(name, format!("{name} {} is invalid: {e}", quoted(v)))
            })
        })
        .transpose()
}

/// Path segments; a segment that cannot be read (bad percent-encoding) is a 400 naming the
/// path.
#[derive(Debug)]
pub struct PathArgs<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathArgs(p.0))
            .map_err(|e| ApiError::invalid("path", e.body_text()))
    }
}
