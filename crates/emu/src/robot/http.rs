//! Request plumbing of the Robot emulator: the error envelope, form-encoded bodies and
//! path parameters.
//!
//! Invariant: every error is `{"error":{"status","code","message"}}` with
//! `Content-Type: application/json`; `INVALID_INPUT` also carries `missing` and `invalid`
//! (lists or null).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A Robot error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RobotError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub missing: Vec<String>,
    pub invalid: Vec<String>,
}

impl RobotError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        RobotError {
            status,
            code,
            message: message.into(),
            missing: Vec::new(),
            invalid: Vec::new(),
        }
    }

    /// 400 `INVALID_INPUT` naming missing and invalid parameters.
    pub fn invalid_input(missing: &[&str], invalid: &[&str]) -> Self {
        RobotError {
            status: StatusCode::BAD_REQUEST,
            code: "INVALID_INPUT",
            message: "invalid input".to_string(),
            missing: missing.iter().map(|s| s.to_string()).collect(),
            invalid: invalid.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub fn unauthorized() -> Self {
        RobotError::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "Unauthorized")
    }

    pub fn server_not_found() -> Self {
        RobotError::new(
            StatusCode::NOT_FOUND,
            "SERVER_NOT_FOUND",
            "server not found",
        )
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        RobotError::new(StatusCode::NOT_FOUND, "NOT_FOUND", message)
    }
}

impl IntoResponse for RobotError {
    fn into_response(self) -> Response {
        let list = |v: &[String]| {
            if v.is_empty() {
                serde_json::Value::Null
            } else {
                json!(v)
            }
        };
        let body = if self.code == "INVALID_INPUT" {
            json!({"error": {
                "status": self.status.as_u16(),
                "code": self.code,
                "message": self.message,
                "missing": list(&self.missing),
                "invalid": list(&self.invalid),
            }})
        } else {
            json!({"error": {
                "status": self.status.as_u16(),
                "code": self.code,
                "message": self.message,
            }})
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"Robot Webservice\""),
            );
        }
        response
    }
}

/// What every Robot handler returns.
pub(crate) type Reply = Result<Response, RobotError>;

/// A JSON answer with this status.
pub(crate) fn json(status: StatusCode, body: serde_json::Value) -> Reply {
    Ok((status, Json(body)).into_response())
}

/// A form-encoded body (`application/x-www-form-urlencoded`), keys in the order sent.
#[derive(Debug, Default)]
pub(crate) struct Form(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequest<S> for Form {
    type Rejection = RobotError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|_| RobotError::invalid_input(&[], &["body"]))?;
        parse_form(&bytes).map(Form)
    }
}

fn parse_form(bytes: &[u8]) -> Result<Vec<(String, String)>, RobotError> {
    serde_urlencoded::from_bytes(bytes).map_err(|_| RobotError::invalid_input(&[], &["body"]))
}

impl Form {
    /// The last non-empty value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// Every value of an array parameter, in any of the forms clients send:
    /// `name=a&name=b`, `name[]=a&name[]=b` or `name[0]=a&name[1]=b` (indexed entries in
    /// index order).
    pub fn list(&self, name: &str) -> Vec<String> {
        let mut plain = Vec::new();
        let mut indexed: Vec<(u64, String)> = Vec::new();
        for (k, v) in &self.0 {
            if v.is_empty() {
                continue;
            }
            if k == name || k.strip_prefix(name) == Some("[]") {
                plain.push(v.clone());
            } else if let Some(index) = k
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('['))
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|i| i.parse::<u64>().ok())
            {
                indexed.push((index, v.clone()));
            }
        }
        indexed.sort_by_key(|(i, _)| *i);
        plain.extend(indexed.into_iter().map(|(_, v)| v));
        plain
    }
}

/// One path parameter as text; percent-decoding failures read as "not found".
#[derive(Debug)]
pub(crate) struct Segment(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = RobotError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(s)| Segment(s))
            .map_err(|_| RobotError::not_found("Not Found"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_in_every_form() {
        let f = Form(parse_form(b"authorized_key%5B%5D=a&os=linux").unwrap());
        assert_eq!(f.list("authorized_key"), vec!["a"]);
        let f =
            Form(parse_form(b"authorized_key%5B1%5D=b&authorized_key%5B0%5D=a&os=linux").unwrap());
        assert_eq!(f.list("authorized_key"), vec!["a", "b"]);
        let f = Form(parse_form(b"authorized_key=a&authorized_key=b").unwrap());
        assert_eq!(f.list("authorized_key"), vec!["a", "b"]);
        assert_eq!(f.get("os"), None);
    }

    #[test]
    fn invalid_input_names_fields() {
        let e = RobotError::invalid_input(&["os"], &[]);
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.missing, vec!["os"]);
    }
}
