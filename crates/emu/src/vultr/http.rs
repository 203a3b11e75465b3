//! Request plumbing shared by the Vultr handlers: the error type, and extractors that turn
//! every malformed path, query or body into Vultr's own `{"error","status"}` answer.
//!
//! Invariant: no handler uses axum's stock extractors directly, because their rejections
//! are `text/plain` and Vultr clients only understand the JSON error envelope.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawQuery, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::control::Api;

/// An error answered in Vultr's envelope `{"error":"<message>","status":<code>}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VultrError {
    pub status: StatusCode,
    pub message: String,
}

impl VultrError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        VultrError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        VultrError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        VultrError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        VultrError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub fn unauthorized() -> Self {
        VultrError::new(StatusCode::UNAUTHORIZED, "Invalid API token.")
    }
}

impl IntoResponse for VultrError {
    fn into_response(self) -> Response {
        Api::Vultr.error(self.status, "", &self.message)
    }
}

/// What every Vultr handler returns.
pub(crate) type Reply = Result<Response, VultrError>;

/// Path parameters; a malformed one is a Vultr 400, not axum's text answer.
#[derive(Debug)]
pub(crate) struct Id<T>(pub T);

impl<S, T> FromRequestParts<S> for Id<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = VultrError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Id(value)),
            Err(e) => Err(VultrError::bad_request(format!(
                "Invalid path parameter: {}",
                e.body_text()
            ))),
        }
    }
}

/// A JSON request body. An empty body reads as `{}` so that endpoints whose body is
/// optional (reinstall, detach) accept both; required fields are then reported missing.
#[derive(Debug)]
pub(crate) struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = VultrError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| VultrError::bad_request(format!("Unable to read request body: {e}")))?;
        parse_json(&bytes).map(Body)
    }
}

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, VultrError> {
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        bytes
    };
    serde_json::from_slice(text)
        .map_err(|e| VultrError::bad_request(format!("Invalid JSON in request body: {e}")))
}

/// Query parameters, last value wins when a key repeats.
#[derive(Debug, Default)]
pub(crate) struct Params(pub BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = VultrError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let RawQuery(raw) = RawQuery::from_request_parts(parts, state)
            .await
            .map_err(|e| VultrError::bad_request(e.to_string()))?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.as_deref().unwrap_or(""))
            .map_err(|e| VultrError::bad_request(format!("Invalid query string: {e}")))?;
        Ok(Params(pairs.into_iter().collect()))
    }
}

impl Params {
    /// A non-empty parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// 204 No Content.
pub(crate) fn no_content() -> Reply {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A JSON answer with this status.
pub(crate) fn json(status: StatusCode, body: serde_json::Value) -> Reply {
    Ok((status, axum::Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_body_reads_as_empty_object() {
        let v: serde_json::Value = parse_json(b"  ").unwrap();
        assert_eq!(v, serde_json::json!({}));
    }

    #[test]
    fn malformed_json_is_a_400() {
        let e = parse_json::<serde_json::Value>(b"{nope").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("Invalid JSON"));
    }
}
