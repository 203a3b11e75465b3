//! The error answer of the zone API: `{"error": {"code", "message", "field"}}`.
//!
//! `code` is a stable machine word ([`ErrorCode`]) a client may branch on, `message` one
//! sentence for a person, `field` the request field at fault when one is. How the zone's own
//! errors map onto these codes is the controller's business (`orc_zone::api::error`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The stable machine words of error answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the request is malformed or a field is invalid (`field` names it).
    Invalid,
    /// 401: no token, or a token that is unknown, revoked or expired.
    Unauthenticated,
    /// 403: the caller's role does not allow this.
    Forbidden,
    /// 404: no such object, or one the caller may not see.
    NotFound,
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 408: the request took longer than the API allows (a body sent too slowly).
    RequestTimeout,
    /// 409: a name is taken, or the object changed or is in a state that refuses this.
    Conflict,
    /// 413: the body is larger than the API takes.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: nothing the provider offers can ever take the request as asked (no site sells
    /// the shape, the OS or the plan); `message` says what it offers instead.
    Unplaceable,
    /// 503: a provider could not be asked (no replica connected, timeout).
    Unavailable,
    /// 500: something failed inside the zone; the log has the detail.
    Internal,
}

impl ErrorCode {
    /// The HTTP status of this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Invalid => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::Unplaceable => 422,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
        }
    }
}

/// The JSON body of an error answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
    /// The request field at fault (`size`, `shape.cpu`, `pool`), or null.
    pub field: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_wire_words_and_statuses() {
        let codes = [
            (ErrorCode::Invalid, "invalid", 400),
            (ErrorCode::Unauthenticated, "unauthenticated", 401),
            (ErrorCode::Forbidden, "forbidden", 403),
            (ErrorCode::NotFound, "not_found", 404),
            (ErrorCode::MethodNotAllowed, "method_not_allowed", 405),
            (ErrorCode::RequestTimeout, "request_timeout", 408),
            (ErrorCode::Conflict, "conflict", 409),
            (ErrorCode::PayloadTooLarge, "payload_too_large", 413),
            (
                ErrorCode::UnsupportedMediaType,
                "unsupported_media_type",
                415,
            ),
            (ErrorCode::Unavailable, "unavailable", 503),
            (ErrorCode::Internal, "internal", 500),
        ];
        for (code, word, status) in codes {
            assert_eq!(serde_json::to_value(code).unwrap(), word);
            assert_eq!(
                serde_json::from_value::<ErrorCode>(word.into()).unwrap(),
                code
            );
            assert_eq!(code.http_status(), status, "{word}");
        }
    }
}
