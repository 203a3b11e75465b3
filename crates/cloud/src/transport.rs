//! The HTTP machinery the three clients share: authentication, the client-side rate limit,
//! bounded retries, request counters, tracing and error classification.
//!
//! Invariants: every attempt takes a token from the account's bucket and is counted under
//! its operation name before it is sent; a tracing event per attempt carries method, path,
//! status and attempt number but never a header or a body; only `GET`s are repeated after a
//! transport error or a 502/503/504.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::counters::RequestCounters;
use crate::error::{CloudApi, CloudError, classify_response};
use crate::ratelimit::{AccountLimiter, RateLimitHeaders, RetryPolicy};
use crate::secret::Secret;

/// How requests prove who they are.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    Bearer(Secret),
    Basic { user: String, password: Secret },
}

/// A request body.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    Empty,
    Json(serde_json::Value),
    Form(Vec<(String, String)>),
}

/// One API call before it is sent.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub operation: &'static str,
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Body,
}

impl Call {
    pub(crate) fn new(operation: &'static str, method: Method, path: impl Into<String>) -> Self {
        Call {
            operation,
            method,
            path: path.into(),
            query: Vec::new(),
            body: Body::Empty,
        }
    }

    pub(crate) fn get(operation: &'static str, path: impl Into<String>) -> Self {
        Call::new(operation, Method::GET, path)
    }

    pub(crate) fn query(mut self, key: &str, value: impl ToString) -> Self {
        self.query.push((key.to_string(), value.to_string()));
        self
    }

    pub(crate) fn query_opt(self, key: &str, value: Option<impl ToString>) -> Self {
        match value {
            Some(v) => self.query(key, v),
            None => self,
        }
    }

    pub(crate) fn json(mut self, body: serde_json::Value) -> Self {
        self.body = Body::Json(body);
        self
    }

    pub(crate) fn form(mut self, pairs: Vec<(String, String)>) -> Self {
        self.body = Body::Form(pairs);
        self
    }
}

/// The body of a successful answer.
pub(crate) type Reply = Vec<u8>;

/// Settings common to the three clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    /// Bounded automatic retries.
    pub retry: RetryPolicy,
    /// Time limit of one HTTP attempt.
    pub request_timeout: Duration,
    /// Time limit to open a connection.
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

pub(crate) struct Transport {
    api: CloudApi,
    http: reqwest::Client,
    base: String,
    auth: Auth,
    limiter: Arc<AccountLimiter>,
    counters: RequestCounters,
    retry: RetryPolicy,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.auth {
            Auth::Bearer(_) => "bearer <redacted>".to_string(),
            Auth::Basic { user, .. } => format!("basic {user}:<redacted>"),
        };
        f.debug_struct("Transport")
            .field("api", &self.api)
            .field("base", &self.base)
            .field("auth", &auth)
            .field("limiter", &self.limiter)
            .field("retry", &self.retry)
            .finish()
    }
}

impl Transport {
    pub(crate) fn new(
        api: CloudApi,
        base_url: &str,
        auth: Auth,
        limiter: AccountLimiter,
        options: ClientOptions,
    ) -> Result<Self, CloudError> {
        let parsed = url::Url::parse(base_url).map_err(|e| CloudError::InvalidInput {
            what: "base_url",
            problem: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(CloudError::InvalidInput {
                what: "base_url",
                problem: format!("scheme {:?} is not http or https", parsed.scheme()),
            });
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(CloudError::InvalidInput {
                what: "base_url",
                problem: "credentials belong in the client config, not in the URL".into(),
            });
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(CloudError::InvalidInput {
                what: "base_url",
                problem: "a base URL has no query or fragment".into(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .user_agent(concat!("orc-cloud/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CloudError::InvalidInput {
                what: "http client",
                problem: e.to_string(),
            })?;
        Ok(Transport {
            api,
            http,
            base: base_url.trim_end_matches('/').to_string(),
            auth,
            limiter: Arc::new(limiter),
            counters: RequestCounters::default(),
            retry: RetryPolicy {
                max_attempts: options.retry.max_attempts.max(1),
                ..options.retry
            },
        })
    }

    pub(crate) fn counters(&self) -> &RequestCounters {
        &self.counters
    }

    pub(crate) fn base_url(&self) -> &str {
        &self.base
    }

    /// Sends a call, retrying within the policy, and answers the success body.
    pub(crate) async fn send(&self, call: &Call) -> Result<Reply, CloudError> {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let outcome = self.attempt(call, attempt).await;
            let error = match outcome {
                Ok(reply) => return Ok(reply),
                Err(error) => error,
            };
            if attempt >= self.retry.max_attempts {
                return Err(error);
            }
            match self.retry_wait(call, &error, attempt) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(error),
            }
        }
    }

    fn retry_wait(&self, call: &Call, error: &CloudError, attempt: u32) -> Option<Duration> {
        let backoff = || {
            self.retry
                .get_backoff
                .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
        };
        match error {
            CloudError::RateLimited { retry_after, .. } => {
                (*retry_after <= self.retry.max_rate_limit_wait).then_some(*retry_after)
            }
            CloudError::Transport { .. } => (call.method == Method::GET).then(backoff),
            CloudError::Provider { status, .. } => {
                (call.method == Method::GET && matches!(status, 502..=504)).then(backoff)
            }
            CloudError::NotFound { .. }
            | CloudError::NoCapacity { .. }
            | CloudError::Decode { .. }
            | CloudError::Protocol { .. }
            | CloudError::ActionFailed { .. }
            | CloudError::Deadline { .. }
            | CloudError::InvalidInput { .. } => None,
        }
    }

    async fn attempt(&self, call: &Call, attempt: u32) -> Result<Reply, CloudError> {
        self.limiter.acquire(&call.path).await;
        self.counters.record(call.operation);
        let url = format!("{}{}", self.base, call.path);
        let mut request = self.http.request(call.method.clone(), &url);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        request = match &self.auth {
            Auth::Bearer(token) => request.bearer_auth(token.expose()),
            Auth::Basic { user, password } => request.basic_auth(user, Some(password.expose())),
        };
        request = match &call.body {
            Body::Empty => request,
            Body::Json(value) => request.json(value),
            Body::Form(pairs) => request.form(pairs),
        };
        let response = request.send().await;
        let response = match response {
            Ok(response) => response,
            Err(source) => {
                tracing::debug!(
                    api = %self.api,
                    operation = call.operation,
                    method = %call.method,
                    path = %call.path,
                    attempt,
                    "request did not complete"
                );
                return Err(CloudError::Transport {
                    operation: call.operation,
                    source: source.without_url(),
                });
            }
        };
        let status = response.status().as_u16();
        tracing::debug!(
            api = %self.api,
            operation = call.operation,
            method = %call.method,
            path = %call.path,
            status,
            attempt,
            "request answered"
        );
        let now = SystemTime::now();
        let rate = RateLimitHeaders::from_headers(response.headers(), now);
        let body = response
            .bytes()
            .await
            .map_err(|source| CloudError::Transport {
                operation: call.operation,
                source: source.without_url(),
            })?;
        if (200..300).contains(&status) {
            Ok(body.to_vec())
        } else {
            Err(classify_response(
                self.api,
                call.operation,
                &call.path,
                status,
                &rate,
                &body,
                now,
            ))
        }
    }

    /// Sends a call and decodes its JSON answer.
    pub(crate) async fn json<T: DeserializeOwned>(&self, call: &Call) -> Result<T, CloudError> {
        let reply = self.send(call).await?;
        decode(call.operation, &reply)
    }

    /// Sends a call whose answer body does not matter.
    pub(crate) async fn unit(&self, call: &Call) -> Result<(), CloudError> {
        self.send(call).await.map(|_| ())
    }
}

/// Decodes JSON, naming the path of the first field that did not fit.
pub(crate) fn decode<T: DeserializeOwned>(
    operation: &'static str,
    body: &[u8],
) -> Result<T, CloudError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| CloudError::Decode {
        operation,
        at: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// Decodes an already parsed JSON value.
pub(crate) fn decode_value<T: DeserializeOwned>(
    operation: &'static str,
    value: serde_json::Value,
) -> Result<T, CloudError> {
    serde_path_to_error::deserialize(value).map_err(|e| CloudError::Decode {
        operation,
        at: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// `Ok(None)` for a missing resource, the error otherwise.
pub(crate) fn absent_as_none<T>(result: Result<T, CloudError>) -> Result<Option<T>, CloudError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Thing {
        id: u64,
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        cores: u32,
    }

    #[test]
    fn decode_errors_name_the_field() {
        let err = decode::<Thing>("op.x", br#"{"id":1,"inner":{"cores":"two"}}"#).unwrap_err();
        match &err {
            CloudError::Decode { operation, at, .. } => {
                assert_eq!(*operation, "op.x");
                assert_eq!(at, "inner.cores");
            }
            other => panic!("expected Decode, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "op.x: cannot decode the answer at `inner.cores`"
        );
        assert!(!err.retryable());
        assert!(decode::<Thing>("op.x", b"<html>").is_err());
    }

    #[test]
    fn missing_resources_become_none() {
        let missing: Result<u8, CloudError> = Err(CloudError::NotFound {
            operation: "op",
            path: "/x/1".into(),
        });
        assert_eq!(absent_as_none(missing).unwrap(), None);
        let failed: Result<u8, CloudError> = Err(CloudError::Protocol {
            operation: "op",
            problem: "p".into(),
        });
        assert!(absent_as_none(failed).is_err());
        assert_eq!(absent_as_none(Ok(3u8)).unwrap(), Some(3));
    }
}
