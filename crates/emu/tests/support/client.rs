//! HTTP access to a running emulator and the checks every response gets.
//!
//! [`Fidelity`] collects findings instead of stopping at the first one, so one run of an
//! area's test lists everything that differs from the description; it panics at
//! [`Fidelity::finish`] (or at [`Fidelity::need`] when a later step cannot run) with the
//! whole list.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::spec::{Expected, Flavor, Spec};

/// Credentials sent with a request.
#[derive(Clone)]
pub enum Auth {
    Bearer(String),
    Basic { user: String, password: String },
    None,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Auth::Basic { user, .. } => write!(f, "Basic({user}, <redacted>)"),
            Auth::None => f.write_str("None"),
        }
    }
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    None,
    Json(Value),
    Form(Vec<(String, String)>),
    Raw {
        content_type: Option<String>,
        bytes: Vec<u8>,
    },
}

/// A response as received.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// Response headers, names in lower case (repeated headers joined with `, `).
    pub headers: BTreeMap<String, String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    pub json: Option<Value>,
}

impl Reply {
    /// The body as text, cut for messages.
    pub fn snippet(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut s: String = text.chars().take(400).collect();
        if text.chars().count() > 400 {
            s.push('…');
        }
        s
    }
}

/// One API of a running emulator.
#[derive(Debug, Clone)]
pub struct ApiClient {
    pub flavor: Flavor,
    pub base: String,
    pub auth: Auth,
    pub spec: Arc<Spec>,
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new(flavor: Flavor, base: String, auth: Auth, spec: Arc<Spec>) -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        ApiClient {
            flavor,
            base,
            auth,
            spec,
            http,
        }
    }

    /// The same API with other credentials.
    pub fn with_auth(&self, auth: Auth) -> Self {
        ApiClient {
            auth,
            ..self.clone()
        }
    }

    /// Sends `method base+path[?query]`. `Err` means no HTTP answer arrived (the
    /// connection was refused, reset or closed early, or the request timed out).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        body: &Body,
    ) -> Result<Reply, String> {
        let mut url = format!("{}{}", self.base, path);
        if let Some(q) = query {
            url.push('?');
            url.push_str(q);
        }
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut req = self.http.request(method, &url);
        req = match &self.auth {
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic { user, password } => req.basic_auth(user, Some(password)),
            Auth::None => req,
        };
        req = match body {
            Body::None => req,
            Body::Json(v) => req.json(v),
            Body::Form(pairs) => req.form(pairs),
            Body::Raw {
                content_type,
                bytes,
            } => {
                let r = match content_type {
                    Some(ct) => req.header(reqwest::header::CONTENT_TYPE, ct),
                    None => req,
                };
                r.body(bytes.clone())
            }
        };
        let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in resp.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_ascii_lowercase())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = resp.bytes().await.map_err(|e| format!("{e:?}"))?.to_vec();
        let json = serde_json::from_slice(&bytes).ok();
        Ok(Reply {
            status,
            headers,
            content_type,
            bytes,
            json,
        })
    }
}

/// Replaces the `{…}` placeholders of `template` by `args`, in order.
pub fn fill(template: &str, args: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = template;
    let mut args = args.iter();
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map_or(rest.len(), |e| start + e + 1);
        out.push_str(args.next().copied().unwrap_or("MISSING"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Checks that hold for every response of every API: JSON bodies say
/// `Content-Type: application/json`, parse, and write integral numbers without a fraction.
pub fn transport_findings(reply: &Reply) -> Vec<String> {
    let mut out = Vec::new();
    if reply.bytes.is_empty() {
        return out;
    }
    let ct = reply.content_type.as_deref().unwrap_or("");
    if !ct.starts_with("application/json") {
        out.push(format!(
            "Content-Type is {:?}, expected application/json",
            reply.content_type
        ));
    }
    match &reply.json {
        None => out.push(format!("body is not JSON: {}", reply.snippet())),
        Some(v) => fractional_integers(v, String::new(), &mut out),
    }
    out
}

/// Integral values written with a fraction (`2.0`): serde_json keeps integers written as
/// integers as `u64`/`i64`, so an `f64` with no fractional part was written with one.
fn fractional_integers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.is_finite()
                && f.fract() == 0.0
            {
                out.push(format!(
                    "{at}: integral number written with a fraction ({n})"
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                fractional_integers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                fractional_integers(item, format!("{at}/{k}"), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// Findings of one API area, collected across many requests.
#[derive(Debug)]
pub struct Fidelity {
    area: String,
    findings: Vec<String>,
    checked: usize,
    last: Option<Reply>,
}

impl Fidelity {
    pub fn new(area: &str) -> Self {
        Fidelity {
            area: area.to_string(),
            findings: Vec::new(),
            checked: 0,
            last: None,
        }
    }

    /// Sends the request, checks the status is `expect` and the response matches the
    /// description for the status it actually has; returns the JSON body (`Null` if none).
    pub async fn call(
        &mut self,
        api: &ApiClient,
        method: &str,
        template: &str,
        args: &[&str],
        body: Body,
        expect: u16,
    ) -> Value {
        self.call_query(api, method, template, args, None, body, expect)
            .await
    }

    /// [`Fidelity::call`] with a query string.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_query(
        &mut self,
        api: &ApiClient,
        method: &str,
        template: &str,
        args: &[&str],
        query: Option<&str>,
        body: Body,
        expect: u16,
    ) -> Value {
        self.call_either(api, method, template, args, query, body, &[expect])
            .await
    }

    /// [`Fidelity::call_query`] where the description leaves open which of some statuses
    /// answers (EMULATOR-SPEC marks these "unverified").
    #[allow(clippy::too_many_arguments)]
    pub async fn call_either(
        &mut self,
        api: &ApiClient,
        method: &str,
        template: &str,
        args: &[&str],
        query: Option<&str>,
        body: Body,
        expect: &[u16],
    ) -> Value {
        let path = fill(template, args);
        let shown = match query {
            Some(q) => format!("{method} {path}?{q}"),
            None => format!("{method} {path}"),
        };
        self.checked += 1;
        let reply = match api.send(method, &path, query, &body).await {
            Ok(r) => r,
            Err(e) => {
                self.findings.push(format!("{shown}: no HTTP answer ({e})"));
                return Value::Null;
            }
        };
        self.check_reply(api, method, template, &shown, &reply, expect);
        let body = reply.json.clone().unwrap_or(Value::Null);
        self.last = Some(reply);
        body
    }

    /// The checks of [`Fidelity::call`] on a reply obtained elsewhere.
    pub fn check_reply(
        &mut self,
        api: &ApiClient,
        method: &str,
        template: &str,
        shown: &str,
        reply: &Reply,
        expect: &[u16],
    ) {
        if !expect.contains(&reply.status) {
            self.findings.push(format!(
                "{shown}: status {}, expected {expect:?}; body: {}",
                reply.status,
                reply.snippet()
            ));
        }
        for f in transport_findings(reply) {
            self.findings.push(format!("{shown}: {f}"));
        }
        for f in header_findings(api.flavor, method, reply) {
            self.findings.push(format!("{shown}: {f}"));
        }
        match api.spec.expected(method, template, reply.status) {
            Err(e) => self.findings.push(format!("{shown}: {e}")),
            Ok(Expected::Empty) => {
                if !reply.bytes.is_empty() {
                    self.findings.push(format!(
                        "{shown}: status {} has no body in the description, got: {}",
                        reply.status,
                        reply.snippet()
                    ));
                }
            }
            Ok(Expected::Json(pointer)) => match &reply.json {
                None => self.findings.push(format!(
                    "{shown}: status {} needs a JSON body, got: {}",
                    reply.status,
                    reply.snippet()
                )),
                Some(body) => {
                    for v in api.spec.validate(&pointer, body) {
                        self.findings
                            .push(format!("{shown} [{}]: {v}", reply.status));
                    }
                    if let Some(f) = envelope_status_mismatch(api.flavor, reply.status, body) {
                        self.findings.push(format!("{shown}: {f}"));
                    }
                }
            },
        }
    }

    /// Sends a request no operation of the description covers (an unknown route, a
    /// malformed path) and checks the answer is `expect` with the API's error shape.
    pub async fn call_unrouted(&mut self, api: &ApiClient, method: &str, path: &str, expect: u16) {
        let shown = format!("{method} {path}");
        self.checked += 1;
        let reply = match api.send(method, path, None, &Body::None).await {
            Ok(r) => r,
            Err(e) => {
                self.findings.push(format!("{shown}: no HTTP answer ({e})"));
                return;
            }
        };
        if reply.status != expect {
            self.findings.push(format!(
                "{shown}: status {}, expected {expect}; body: {}",
                reply.status,
                reply.snippet()
            ));
        }
        for f in error_shape_findings(api, &reply) {
            self.findings.push(format!("{shown}: {f}"));
        }
    }

    /// A header of the last answer [`Fidelity::call`] received (name in lower case).
    pub fn last_header(&self, name: &str) -> Option<&str> {
        self.last.as_ref()?.headers.get(name).map(String::as_str)
    }

    /// Records a behaviour finding that is not a schema violation.
    pub fn note(&mut self, finding: String) {
        self.findings.push(finding);
    }

    /// Records a finding unless `ok`.
    pub fn expect(&mut self, ok: bool, finding: impl FnOnce() -> String) {
        self.checked += 1;
        if !ok {
            self.findings.push(finding());
        }
    }

    /// The value a later step needs; panics with every finding so far if it is missing.
    #[track_caller]
    pub fn need<T>(&self, value: Option<T>, what: &str) -> T {
        match value {
            Some(v) => v,
            None => panic!(
                "{}: cannot go on without {what}\n{}",
                self.area,
                self.report()
            ),
        }
    }

    fn report(&self) -> String {
        let mut s = format!(
            "{} finding(s) in {} check(s):\n",
            self.findings.len(),
            self.checked
        );
        for f in &self.findings {
            s.push_str("  - ");
            s.push_str(f);
            s.push('\n');
        }
        s
    }

    /// Panics listing every finding, if there is any.
    #[track_caller]
    pub fn finish(self) {
        assert!(
            self.findings.is_empty(),
            "{}: responses differ from the description\n{}",
            self.area,
            self.report()
        );
        assert!(self.checked > 0, "{}: nothing was checked", self.area);
    }
}

/// The transport checks plus: the body is the API's error envelope.
pub fn error_shape_findings(api: &ApiClient, reply: &Reply) -> Vec<String> {
    let mut out = transport_findings(reply);
    match &reply.json {
        None => out.push(format!(
            "error answer without a JSON body: {}",
            reply.snippet()
        )),
        Some(body) => {
            out.extend(api.spec.validate(&api.spec.error_schema_pointer(), body));
            out.extend(envelope_status_mismatch(api.flavor, reply.status, body));
        }
    }
    out
}

/// Headers a client reads: Hetzner sends its rate-limit budget and a correlation id on
/// every answer, and a `Link` header with at least `rel="last"` on every list.
fn header_findings(flavor: Flavor, method: &str, reply: &Reply) -> Vec<String> {
    let mut out = Vec::new();
    match flavor {
        Flavor::Hetzner => {
            for name in [
                "ratelimit-limit",
                "ratelimit-remaining",
                "ratelimit-reset",
                "x-correlation-id",
            ] {
                if !reply.headers.contains_key(name) {
                    out.push(format!("header {name} missing"));
                }
            }
            let is_list = method.eq_ignore_ascii_case("GET")
                && reply.status == 200
                && reply
                    .json
                    .as_ref()
                    .is_some_and(|v| v.pointer("/meta/pagination").is_some());
            if is_list
                && !reply
                    .headers
                    .get("link")
                    .is_some_and(|l| l.contains("rel=\"last\""))
            {
                out.push(format!(
                    "list answer without a Link header naming rel=\"last\" (Link: {:?})",
                    reply.headers.get("link")
                ));
            }
        }
        Flavor::Vultr | Flavor::Robot => {}
    }
    out
}

/// Vultr and Robot repeat the HTTP status inside the error body; they must agree.
fn envelope_status_mismatch(flavor: Flavor, status: u16, body: &Value) -> Option<String> {
    if status < 400 {
        return None;
    }
    let inner = match flavor {
        Flavor::Vultr => body.get("status"),
        Flavor::Robot => body.pointer("/error/status"),
        Flavor::Hetzner => None,
    }?;
    (inner.as_u64() != Some(u64::from(status)))
        .then(|| format!("error body says status {inner}, HTTP status is {status}"))
}

/// An id at `pointer` in `v`, whether the API writes ids as numbers or strings.
pub fn id_at(v: &Value, pointer: &str) -> Option<String> {
    match v.pointer(pointer)? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}
