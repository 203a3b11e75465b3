//! The middleware every API request passes: injected latency, rate limits, injected errors,
//! the per-API response headers, and the request log and counters.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::json;

use crate::control::{Api, EmuCore, RateDecision};

pub(crate) async fn gate(State(core): State<Arc<EmuCore>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with("/_emu/") || path == "/_emu" {
        return next.run(req).await;
    }
    let method = req.method().as_str().to_string();
    let query = req.uri().query().map(str::to_string);

    let latency = core.faults().latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }

    let key = rate_key(core.api, &req, &path);
    let decision = core.rate_limit(&key);
    let mut response = if !decision.allowed {
        rate_limited(core.api, &decision)
    } else if let Some(fault) = core.take_fault(&method, &path) {
        let status =
            StatusCode::from_u16(fault.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let code = fault
            .code
            .unwrap_or_else(|| default_code(core.api, status).to_string());
        let message = fault
            .message
            .unwrap_or_else(|| default_message(status).to_string());
        core.error(status, &code, &message)
    } else {
        next.run(req).await
    };

    decorate(core.api, response.headers_mut(), &decision);
    core.record(&method, &path, query.as_deref(), response.status().as_u16());
    response
}

/// Whose budget a request spends: Hetzner's bucket is per token, Vultr's per client
/// address, Robot's per user and endpoint.
fn rate_key(api: Api, req: &Request, path: &str) -> String {
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match api {
        Api::Hetzner => auth
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string(),
        Api::Vultr => req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_default(),
        Api::Robot => {
            let user = auth
                .and_then(|a| a.strip_prefix("Basic "))
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.split_once(':').map(|(u, _)| u.to_string()))
                .unwrap_or_default();
            let endpoint = path.trim_start_matches('/').split('/').next().unwrap_or("");
            format!("{user} {endpoint}")
        }
    }
}

fn rate_limited(api: Api, d: &RateDecision) -> Response {
    match api {
        Api::Hetzner => api.error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            &format!("limit of {} requests per hour reached", d.limit),
        ),
        Api::Vultr => api.error(
            StatusCode::TOO_MANY_REQUESTS,
            "",
            &format!(
                "Rate limit reached - please try your request again later.  Current rate limit: {} requests/sec",
                d.limit
            ),
        ),
        Api::Robot => (
            StatusCode::FORBIDDEN,
            Json(json!({"error": {
                "status": 403,
                "code": "RATE_LIMIT_EXCEEDED",
                "max_request": d.limit,
                "interval": 3600,
                "message": "rate limit exceeded",
            }})),
        )
            .into_response(),
    }
}

fn decorate(api: Api, headers: &mut HeaderMap, d: &RateDecision) {
    match api {
        Api::Hetzner => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let reset = (now + d.until_full).as_secs_f64().ceil() as u64;
            headers.insert("RateLimit-Limit", HeaderValue::from(d.limit));
            headers.insert("RateLimit-Remaining", HeaderValue::from(d.remaining));
            headers.insert("RateLimit-Reset", HeaderValue::from(reset));
            let id: u64 = rand::random();
            if let Ok(v) = HeaderValue::from_str(&format!("{id:016x}")) {
                headers.insert("X-Correlation-Id", v);
            }
            headers.insert(
                "Access-Control-Expose-Headers",
                HeaderValue::from_static("Link,X-Correlation-ID"),
            );
        }
        Api::Vultr => {
            headers.insert(header::SERVER, HeaderValue::from_static("nginx"));
            headers.insert(
                header::STRICT_TRANSPORT_SECURITY,
                HeaderValue::from_static("max-age=63072000"),
            );
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            headers.insert(
                "x-robots-tag",
                HeaderValue::from_static("noindex,noarchive"),
            );
        }
        Api::Robot => {}
    }
}

fn default_code(api: Api, status: StatusCode) -> &'static str {
    match api {
        Api::Hetzner => match status.as_u16() {
            400 => "invalid_input",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            409 => "conflict",
            412 => "resource_unavailable",
            422 => "invalid_input",
            423 => "locked",
            429 => "rate_limit_exceeded",
            502 => "bad_gateway",
            503 => "unavailable",
            504 => "timeout",
            _ => "server_error",
        },
        Api::Vultr => "",
        Api::Robot => match status.as_u16() {
            400 => "INVALID_INPUT",
            401 => "UNAUTHORIZED",
            404 => "NOT_FOUND",
            409 => "CONFLICT",
            _ => "INTERNAL_ERROR",
        },
    }
}

fn default_message(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("error")
}
