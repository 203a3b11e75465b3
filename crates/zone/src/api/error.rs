//! Errors of the HTTP API and how they reach a client.
//!
//! Every error answer is JSON `{"error": {"code", "message", "field"}}`: `code` is a stable
//! machine word (see [`ErrorCode`]), `message` one sentence for a person, and `field` names the
//! request field at fault (`size`, `shape.cpu`, `params.api_key`, a path segment such as
//! `pool`) when one is. Store errors are classified here, once; a database failure becomes a
//! 500 whose message says nothing about the database (the detail goes to the log). No error
//! carries a token or a sensitive param value.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
pub use orc_zone_api_types::error::{ErrorBody, ErrorCode, ErrorDetail};

use crate::backend::BackendError;
use crate::store::StoreError;

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// The request field at fault, if one is.
    pub field: Option<String>,
}

impl ApiError {
    /// An error with no field.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            field: None,
        }
    }

    /// A 400 naming the field at fault.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            code: ErrorCode::Invalid,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A 404 about a named object; `field` is the path segment or body field that named it.
    pub fn not_found(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            code: ErrorCode::NotFound,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A 403 saying which role is needed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    /// A 401.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Unauthenticated, message)
    }

    /// Sets the field at fault.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Names `path` where the message names the internal id `id` (the store's errors speak
    /// of ids; people know paths such as `acme/web/db`).
    pub fn naming(mut self, id: &impl std::fmt::Display, path: &str) -> Self {
        self.message = self.message.replace(&id.to_string(), path);
        self
    }

    /// A 500 for an internal failure; `detail` is logged, never sent.
    pub fn internal(detail: &dyn std::error::Error) -> Self {
        tracing::error!(error = %detail, source = ?detail.source(), "API request failed");
        ApiError::new(
            ErrorCode::Internal,
            "the zone could not complete the request; its log has the detail",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound { .. } => ApiError::new(ErrorCode::NotFound, e.to_string()),
            StoreError::Unique { field, .. } => ApiError {
                code: ErrorCode::Conflict,
                message: e.to_string(),
                field: Some(unique_field(field).to_string()),
            },
            StoreError::Conflict { .. } | StoreError::Invalid { .. } => {
                ApiError::new(ErrorCode::Conflict, e.to_string())
            }
            StoreError::Reference { .. } => ApiError::new(ErrorCode::NotFound, e.to_string()),
            StoreError::Corrupt { .. }
            | StoreError::Connect { .. }
            | StoreError::Migrate(_)
            | StoreError::NoSealingKey { .. }
            | StoreError::WrongSealingKey { .. }
            | StoreError::Seal(_)
            | StoreError::Database { .. } => ApiError::internal(&e),
        }
    }
}

/// The request field a store uniqueness rule is about.
fn unique_field(field: &str) -> &str {
    match field {
        "resource URI" => "resource_uri",
        "scope" => "user",
        other => other,
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        match &e {
            BackendError::NoReplica { .. }
            | BackendError::Disconnected { .. }
            | BackendError::Timeout { .. }
            | BackendError::ShuttingDown
            | BackendError::Bootstrap { .. } => {
                ApiError::new(ErrorCode::Unavailable, e.to_string())
            }
            BackendError::Protocol { .. } => {
                tracing::warn!(error = %e, "provider answered a quote wrongly");
                ApiError::new(ErrorCode::Unavailable, e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                field: self.field,
            },
        };
        (status, Json(body)).into_response()
    }
}

/// Result of an API handler.
pub type ApiResult<T> = Result<T, ApiError>;
