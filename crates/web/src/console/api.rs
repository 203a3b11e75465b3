//! The console's way into the zone's JSON API: the API's own router, called in process on
//! behalf of the signed-in person ([`ZoneApi`]). Every read and every change the
//! console makes is the API's request, authorised by the API's own checks, so a page can
//! never allow more than `orc` on the command line would.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use orc_zone_api_types::error::ErrorBody;
use orc_zone_model::access::Caller;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The zone's API, called in process on behalf of a caller the edge identified. The zone
/// implements it over the API's own router, vouching for the caller so the API takes them
/// as it would take their bearer token; nothing from the network can vouch.
#[async_trait]
pub trait ZoneApi: Send + Sync + 'static {
    /// Answers `request` as the API answers `caller`.
    async fn call(&self, caller: &Caller, request: Request<Body>) -> Response;
}

/// The largest answer the console reads from the API.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Why the API said no, as it said it.
#[derive(Debug, Clone)]
pub struct ApiRefusal {
    pub status: StatusCode,
    pub message: String,
    /// The request field at fault (`size`, `shape.cpu`, `os`), if one is.
    pub field: Option<String>,
}

/// The API, as one person.
#[derive(Clone)]
pub struct ApiAs {
    api: Arc<dyn ZoneApi>,
    caller: Caller,
}

impl std::fmt::Debug for ApiAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAs")
            .field("user", &self.caller.user.name)
            .finish_non_exhaustive()
    }
}

impl ApiAs {
    /// The zone's `api`, called as `caller`.
    pub fn new(api: Arc<dyn ZoneApi>, caller: Caller) -> ApiAs {
        ApiAs { api, caller }
    }

    /// `GET path`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiRefusal> {
        self.call(Method::GET, path, None::<&()>).await
    }

    /// `method path` with a JSON body.
    pub async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<T, ApiRefusal> {
        self.call(method, path, Some(body)).await
    }

    /// `DELETE path` whose answer is a JSON view.
    pub async fn call_delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiRefusal> {
        self.call(Method::DELETE, path, None::<&()>).await
    }

    /// `method path` whose answer has no body worth reading.
    pub async fn send_empty(&self, method: Method, path: &str) -> Result<(), ApiRefusal> {
        self.call::<(), serde::de::IgnoredAny>(method, path, None)
            .await
            .map(|_| ())
    }

    /// `method path` with a JSON body, for an answer that is not one JSON document (an
    /// exec's lines): its bytes, at most 16 MiB of them.
    pub async fn send_raw<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<axum::body::Bytes, ApiRefusal> {
        let internal = |message: &str| ApiRefusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.to_string(),
            field: None,
        };
        let body =
            serde_json::to_vec(body).map_err(|_| internal("the request could not be written"))?;
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .map_err(|_| internal("the request could not be made"))?;
        let response = self.api.call(&self.caller, request).await;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|_| internal("the answer was larger than the console reads (16 MiB)"))?;
        if status.is_success() {
            return Ok(bytes);
        }
        Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => ApiRefusal {
                status,
                message: body.error.message,
                field: body.error.field,
            },
            Err(_) => ApiRefusal {
                status,
                message: format!("the zone answered {status}"),
                field: None,
            },
        })
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ApiRefusal> {
        let internal = |message: &str| ApiRefusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.to_string(),
            field: None,
        };
        let body = match body {
            Some(b) => Body::from(
                serde_json::to_vec(b).map_err(|_| internal("the request could not be written"))?,
            ),
            None => Body::empty(),
        };
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|_| internal("the request could not be made"))?;
        let response = self.api.call(&self.caller, request).await;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|_| internal("the answer could not be read"))?;
        if status.is_success() {
            let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
            return serde_json::from_slice(bytes).map_err(|e| {
                tracing::warn!(%path, error = %e, "the console could not read an API answer");
                internal("the zone's answer could not be read")
            });
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => Err(ApiRefusal {
                status,
                message: body.error.message,
                field: body.error.field,
            }),
            Err(_) => Err(ApiRefusal {
                status,
                message: format!("the zone answered {status}"),
                field: None,
            }),
        }
    }
}
