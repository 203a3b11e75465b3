//! A small client of the zone API: JSON in, JSON out, bearer token, and errors turned into
//! one line that names the field the zone complained about.

use std::fmt;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a call to the zone failed.
#[derive(Debug)]
pub enum CallError {
    /// The zone answered with an error body.
    Api {
        status: StatusCode,
        code: String,
        message: String,
        field: Option<String>,
    },
    /// The zone could not be reached.
    Unreachable { url: String, detail: String },
    /// The answer was not what the API documents.
    Unreadable { url: String, detail: String },
    /// An error answer that is not the zone's: something else listens at the URL.
    NotAZone {
        status: StatusCode,
        first_line: String,
    },
}

impl std::error::Error for CallError {}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Api {
                status,
                code,
                message,
                field,
            } => {
                write!(f, "{message}")?;
                if let Some(field) = field {
                    write!(f, " (field: {field})")?;
                }
                write!(f, " [{} {code}]", status.as_u16())
            }
            CallError::NotAZone { status, first_line } => write!(
                f,
                "the server answered {} in a form no orc zone uses ({first_line:?}): is the URL \
                 the zone's API (https://HOST:7070)?",
                status.as_u16()
            ),
            CallError::Unreachable { url, detail } => {
                write!(f, "cannot reach the zone at {url}: {detail}")
            }
            CallError::Unreadable { url, detail } => {
                write!(
                    f,
                    "the zone's answer from {url} could not be read: {detail}"
                )
            }
        }
    }
}

/// A client of one zone.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Percent-encodes one path segment.
pub fn segment(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    /// A client of the zone at `base` (`https://HOST:PORT`, or `http://` for a plain zone
    /// on loopback) that trusts only `ca`, the zone's CA.
    pub fn new(
        base: &str,
        token: Option<String>,
        ca: Option<&orc_tls::PinnedCa>,
    ) -> anyhow::Result<Self> {
        let mut http = reqwest::Client::builder().tls_built_in_root_certs(false);
        if let Some(ca) = ca {
            let cert = reqwest::Certificate::from_pem(ca.pem().as_bytes()).map_err(|e| {
                anyhow::anyhow!("the zone's CA {} cannot be used: {e}", ca.origin())
            })?;
            http = http.add_root_certificate(cert);
        }
        let http = http
            .build()
            .map_err(|e| anyhow::anyhow!("cannot set up the HTTP client: {e}"))?;
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            http,
        })
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, CallError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.answer(url, request).await
    }

    /// Sends `request` with the token and reads its answer as JSON (an empty one as null).
    async fn answer<T: DeserializeOwned>(
        &self,
        url: String,
        mut request: reqwest::RequestBuilder,
    ) -> Result<T, CallError> {
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| CallError::Unreachable {
            url: self.base.clone(),
            detail: error_chain(&e),
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| CallError::Unreachable {
            url: self.base.clone(),
            detail: error_chain(&e),
        })?;
        if !status.is_success() {
            return Err(api_error(status, &bytes));
        }
        let bytes = if bytes.is_empty() {
            &b"null"[..]
        } else {
            &bytes[..]
        };
        serde_json::from_slice(bytes).map_err(|e| CallError::Unreadable {
            url,
            detail: e.to_string(),
        })
    }

    /// `GET path`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        self.call::<(), T>(Method::GET, path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, CallError> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, CallError> {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// `POST path` with a JSON body, for an answer read as it streams: the response once
    /// its status says success.
    pub async fn post_streaming<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<reqwest::Response, CallError> {
        let url = format!("{}{path}", self.base);
        self.send_streaming(self.http.post(&url).json(body)).await
    }

    /// `GET path`, its answer left to be read as it comes.
    pub async fn get_streaming(&self, path: &str) -> Result<reqwest::Response, CallError> {
        let url = format!("{}{path}", self.base);
        self.send_streaming(self.http.get(&url)).await
    }

    /// Sends `request` with the token; a success is returned unread, anything else read
    /// as the API's error.
    async fn send_streaming(
        &self,
        mut request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, CallError> {
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| CallError::Unreachable {
            url: self.base.clone(),
            detail: error_chain(&e),
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let bytes = response.bytes().await.unwrap_or_default();
        Err(api_error(status, &bytes))
    }

    /// `PUT path` with `bytes` as an `application/octet-stream` body.
    pub async fn put_bytes<T: DeserializeOwned>(
        &self,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<T, CallError> {
        let url = format!("{}{path}", self.base);
        let request = self
            .http
            .put(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes);
        self.answer(url, request).await
    }

    /// The same client acting with `token`.
    pub fn with_token(mut self, token: String) -> Self {
        self.token = Some(token);
        self
    }

    /// `DELETE path`.
    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        self.call::<(), T>(Method::DELETE, path, None).await
    }
}

/// What went wrong reaching the zone: what TLS found wrong, in words, when that was it;
/// else the whole error chain.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(failure) = orc_tls::explain(e) {
        return failure.to_string();
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn api_error(status: StatusCode, body: &[u8]) -> CallError {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Detail,
    }
    #[derive(serde::Deserialize)]
    struct Detail {
        code: String,
        message: String,
        field: Option<String>,
    }
    match serde_json::from_slice::<Body>(body) {
        Ok(b) => CallError::Api {
            status,
            code: b.error.code,
            message: b.error.message,
            field: b.error.field,
        },
        Err(_) => CallError::NotAZone {
            status,
            first_line: orc_common::text::printable(
                &String::from_utf8_lossy(body)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect::<String>(),
            )
            .into_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_as_one_line_naming_the_field() {
        let e = api_error(
            StatusCode::BAD_REQUEST,
            br#"{"error":{"code":"invalid","message":"size must be 0 to 10000, not 20000","field":"size"}}"#,
        );
        assert_eq!(
            e.to_string(),
            "size must be 0 to 10000, not 20000 (field: size) [400 invalid]"
        );
    }

    #[test]
    fn an_answer_not_from_a_zone_says_so() {
        let e = api_error(
            StatusCode::NOT_FOUND,
            b"<html><body>Not Found</body></html>",
        );
        assert_eq!(
            e.to_string(),
            "the server answered 404 in a form no orc zone uses (\"<html><body>Not Found</body></html>\"): \
             is the URL the zone's API (https://HOST:7070)?"
        );
    }

    #[test]
    fn segments_are_escaped() {
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
        assert_eq!(segment("web-1"), "web-1");
    }
}
