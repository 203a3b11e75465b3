//! The HTTP machinery the three clients share: authentication, the client-side rate limit,
//! bounded retries, request counters, tracing and error classification.
//!
//! Invariants: every attempt takes a token from the account's bucket and is counted under
//! its operation name before it is sent; a tracing event per attempt carries method, path,
//! status and attempt number but never a header or a body; only `GET`s are repeated after a
//! transport error or a 502/503/504.
//!
//! [`TransportHooks`] swap two parts of a client for callers that need it: where the bearer
//! token comes from (a [`TokenSource`] resolved before every attempt, so a rotated token
//! takes effect on the next request) and what carries a request to the API (an
//! [`Exchange`]; [`RecordingExchange`] writes every answer to an NDJSON file and
//! [`ReplayExchange`] answers from such a file with no server). A recording never holds a
//! credential: the exchange receives the token apart from the request and writes only the
//! request's method, path, query and body.

use std::fmt;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::counters::RequestCounters;
use crate::error::{CloudApi, CloudError, classify_response};
use crate::ratelimit::{AccountKey, AccountLimiter, RateLimitHeaders, RetryPolicy};
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
    hooks: TransportHooks,
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
            .field("hooks", &self.hooks)
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
        Transport::with_hooks(
            api,
            base_url,
            auth,
            limiter,
            options,
            TransportHooks::default(),
        )
    }

    pub(crate) fn with_hooks(
        api: CloudApi,
        base_url: &str,
        auth: Auth,
        limiter: AccountLimiter,
        options: ClientOptions,
        hooks: TransportHooks,
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
        let credentials = match &auth {
            Auth::Bearer(token) => token.expose().to_string(),
            Auth::Basic { user, password } => format!("{user}:{}", password.expose()),
        };
        let origin = parsed.origin().ascii_serialization();
        let account = AccountKey::new(api.as_str(), &origin, &credentials, limiter.quota());
        Ok(Transport {
            api,
            http,
            base: base_url.trim_end_matches('/').to_string(),
            auth,
            limiter: AccountLimiter::for_account(account, limiter),
            counters: RequestCounters::default(),
            retry: RetryPolicy {
                max_attempts: options.retry.max_attempts.max(1),
                ..options.retry
            },
            hooks,
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
        let answer = match &self.hooks.exchange {
            Some(exchange) => {
                let token = self.bearer_token(call)?;
                let request = WireRequest::from_call(call);
                let response = exchange.exchange(&request, &token).await?;
                Ok((response.status, response.header_map(), response.body))
            }
            None => self.send_http(call).await,
        };
        let (status, headers, body) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                tracing::debug!(
                    api = %self.api,
                    operation = call.operation,
                    method = %call.method,
                    path = %call.path,
                    attempt,
                    "request did not complete"
                );
                return Err(error);
            }
        };
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
        let rate = RateLimitHeaders::from_headers(&headers, now);
        if (200..300).contains(&status) {
            Ok(body)
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

    /// The bearer token of this attempt: from the hooks' source when there is one.
    fn bearer_token(&self, call: &Call) -> Result<Secret, CloudError> {
        if let Some(source) = &self.hooks.token {
            return source.token().map_err(|problem| CloudError::InvalidInput {
                what: "token",
                problem,
            });
        }
        match &self.auth {
            Auth::Bearer(token) => Ok(token.clone()),
            Auth::Basic { .. } => Err(CloudError::InvalidInput {
                what: "exchange",
                problem: format!(
                    "{} uses basic authentication, which an exchange hook does not carry",
                    call.operation
                ),
            }),
        }
    }

    async fn send_http(&self, call: &Call) -> Result<(u16, HeaderMap, Reply), CloudError> {
        let url = format!("{}{}", self.base, call.path);
        let mut request = self.http.request(call.method.clone(), &url);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        request = match &self.auth {
            Auth::Bearer(_) => request.bearer_auth(self.bearer_token(call)?.expose()),
            Auth::Basic { user, password } => request.basic_auth(user, Some(password.expose())),
        };
        request = match &call.body {
            Body::Empty => request,
            Body::Json(value) => request.json(value),
            Body::Form(pairs) => request.form(pairs),
        };
        let response = request
            .send()
            .await
            .map_err(|source| CloudError::Transport {
                operation: call.operation,
                source: source.without_url(),
            })?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|source| CloudError::Transport {
                operation: call.operation,
                source: source.without_url(),
            })?;
        Ok((status, headers, body.to_vec()))
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

/// Where a client's bearer token comes from on each request.
pub trait TokenSource: Send + Sync + 'static {
    /// The token to send now, or why there is none (never the token itself).
    fn token(&self) -> Result<Secret, String>;
}

impl<F> TokenSource for F
where
    F: Fn() -> Result<Secret, String> + Send + Sync + 'static,
{
    fn token(&self) -> Result<Secret, String> {
        self()
    }
}

/// A request as it goes to the API, without its credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRequest {
    pub method: String,
    /// The path below the base URL (`/servers`).
    pub path: String,
    pub query: Vec<(String, String)>,
    /// A JSON body; form bodies are written as an object of their pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

impl WireRequest {
    fn from_call(call: &Call) -> Self {
        let body = match &call.body {
            Body::Empty => None,
            Body::Json(value) => Some(value.clone()),
            Body::Form(pairs) => Some(serde_json::Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
            )),
        };
        WireRequest {
            method: call.method.as_str().to_string(),
            path: call.path.clone(),
            query: call.query.clone(),
            body,
        }
    }
}

/// An API's answer: status, the headers the client reads (rate limits) and the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireResponse {
    pub status: u16,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body as text (every API orc speaks answers JSON or nothing).
    #[serde(with = "body_text")]
    pub body: Vec<u8>,
}

mod body_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(body: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&String::from_utf8_lossy(body))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        String::deserialize(deserializer).map(String::into_bytes)
    }
}

/// Headers a recording keeps: the ones rate limiting and retries read.
const KEPT_HEADERS: [&str; 4] = [
    "retry-after",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
];

impl WireResponse {
    fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                map.append(name, value);
            }
        }
        map
    }
}

/// The answer of an [`Exchange`].
pub type ExchangeFuture<'a> =
    Pin<Box<dyn Future<Output = Result<WireResponse, CloudError>> + Send + 'a>>;

/// Carries one request to an API and brings back its answer. The default is HTTP through
/// reqwest; [`RecordingExchange`] and [`ReplayExchange`] record and replay traffic.
pub trait Exchange: Send + Sync + 'static {
    /// Sends `request` with `token` as bearer credentials.
    fn exchange<'a>(&'a self, request: &'a WireRequest, token: &'a Secret) -> ExchangeFuture<'a>;
}

/// What a client may swap: the token's source and the exchange.
#[derive(Clone, Default)]
pub struct TransportHooks {
    /// Resolved before every attempt; `None`: the config's token.
    pub token: Option<Arc<dyn TokenSource>>,
    /// Carries requests; `None`: HTTP to the config's base URL.
    pub exchange: Option<Arc<dyn Exchange>>,
}

impl fmt::Debug for TransportHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportHooks")
            .field("token", &self.token.as_ref().map(|_| "source"))
            .field("exchange", &self.exchange.as_ref().map(|_| "hook"))
            .finish()
    }
}

/// HTTP through reqwest to a base URL: what a client does without hooks, as an
/// [`Exchange`] that a [`RecordingExchange`] can wrap.
#[derive(Debug, Clone)]
pub struct HttpExchange {
    http: reqwest::Client,
    base: String,
}

impl HttpExchange {
    /// An exchange to `base_url` with the options' timeouts.
    pub fn new(base_url: &str, options: ClientOptions) -> Result<Self, CloudError> {
        let http = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .user_agent(concat!("orc-cloud/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CloudError::InvalidInput {
                what: "http client",
                problem: e.to_string(),
            })?;
        Ok(HttpExchange {
            http,
            base: base_url.trim_end_matches('/').to_string(),
        })
    }
}

impl Exchange for HttpExchange {
    fn exchange<'a>(&'a self, request: &'a WireRequest, token: &'a Secret) -> ExchangeFuture<'a> {
        Box::pin(async move {
            let operation = "exchange";
            let method = Method::from_bytes(request.method.as_bytes()).map_err(|_| {
                CloudError::InvalidInput {
                    what: "method",
                    problem: format!("{} is not an HTTP method", request.method),
                }
            })?;
            let url = format!("{}{}", self.base, request.path);
            let mut builder = self.http.request(method, &url).bearer_auth(token.expose());
            if !request.query.is_empty() {
                builder = builder.query(&request.query);
            }
            if let Some(body) = &request.body {
                builder = builder.json(body);
            }
            let response = builder
                .send()
                .await
                .map_err(|source| CloudError::Transport {
                    operation,
                    source: source.without_url(),
                })?;
            let status = response.status().as_u16();
            let headers = KEPT_HEADERS
                .iter()
                .filter_map(|name| {
                    let value = response.headers().get(*name)?.to_str().ok()?;
                    Some((name.to_string(), value.to_string()))
                })
                .collect();
            let body = response
                .bytes()
                .await
                .map_err(|source| CloudError::Transport {
                    operation,
                    source: source.without_url(),
                })?;
            Ok(WireResponse {
                status,
                headers,
                body: body.to_vec(),
            })
        })
    }
}

/// One request and its answer, a line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedExchange {
    pub request: WireRequest,
    pub response: WireResponse,
}

/// Passes every request to an inner exchange and appends it with its answer to an NDJSON
/// file. Requests that did not complete are not recorded.
pub struct RecordingExchange {
    inner: Arc<dyn Exchange>,
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl fmt::Debug for RecordingExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingExchange")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RecordingExchange {
    /// Records into `path`, which is created or emptied.
    pub fn create(inner: Arc<dyn Exchange>, path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        Ok(RecordingExchange {
            inner,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }
}

impl Exchange for RecordingExchange {
    fn exchange<'a>(&'a self, request: &'a WireRequest, token: &'a Secret) -> ExchangeFuture<'a> {
        Box::pin(async move {
            let response = self.inner.exchange(request, token).await?;
            let line = serde_json::to_string(&RecordedExchange {
                request: request.clone(),
                response: response.clone(),
            })
            .map_err(|e| CloudError::Protocol {
                operation: "recording",
                problem: format!("cannot write the exchange: {e}"),
            })?;
            let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(file, "{line}").map_err(|e| CloudError::Protocol {
                operation: "recording",
                problem: format!("cannot write {}: {e}", self.path.display()),
            })?;
            Ok(response)
        })
    }
}

/// Answers requests from a recording, with no server. Each request takes the first unused
/// recorded exchange with the same method, path, query and body; a request the recording
/// does not hold fails with [`CloudError::Protocol`] naming it.
#[derive(Debug)]
pub struct ReplayExchange {
    exchanges: Mutex<Vec<(RecordedExchange, bool)>>,
}

impl ReplayExchange {
    /// Replays the exchanges of an NDJSON recording.
    pub fn from_ndjson(text: &str) -> Result<Self, serde_json::Error> {
        let mut exchanges = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            exchanges.push((serde_json::from_str(line)?, false));
        }
        Ok(ReplayExchange {
            exchanges: Mutex::new(exchanges),
        })
    }

    /// How many recorded exchanges no request has used yet.
    pub fn unused(&self) -> usize {
        let exchanges = self.exchanges.lock().unwrap_or_else(|p| p.into_inner());
        exchanges.iter().filter(|(_, used)| !used).count()
    }
}

impl Exchange for ReplayExchange {
    fn exchange<'a>(&'a self, request: &'a WireRequest, _token: &'a Secret) -> ExchangeFuture<'a> {
        Box::pin(async move {
            let mut exchanges = self.exchanges.lock().unwrap_or_else(|p| p.into_inner());
            let found = exchanges
                .iter_mut()
                .find(|(recorded, used)| !*used && recorded.request == *request);
            match found {
                Some((recorded, used)) => {
                    *used = true;
                    Ok(recorded.response.clone())
                }
                None => Err(CloudError::Protocol {
                    operation: "replay",
                    problem: format!(
                        "the recording holds no unused answer to {} {}",
                        request.method, request.path
                    ),
                }),
            }
        })
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
