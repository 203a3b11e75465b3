//! State shared by an emulator's API handlers and its control API under `/_emu/`.
//!
//! The control API is how a test or a demo changes the world on purpose. It needs no
//! credentials (the emulators are local tools) and answers JSON. Routes:
//!
//! | route | body | effect |
//! |---|---|---|
//! | `GET /_emu/state` | | faults, clock and rate-limit settings in force |
//! | `POST /_emu/sold-out` | `{"plan","location","sold_out":true}` | plan sold out (or back) at a location |
//! | `POST /_emu/locations` | `{"location","disabled":true}` | location closed for new servers (or open) |
//! | `POST /_emu/faults` | `{"path","method"?,"status","count","code"?,"message"?}` | the next `count` requests whose path starts with `path` get that error |
//! | `DELETE /_emu/faults` | | removes injected errors |
//! | `POST /_emu/latency` | `{"ms"}` | every API request waits this long first |
//! | `POST /_emu/fail-next-action` | `{"count"}` | the next `count` actions end in error |
//! | `POST /_emu/rate-limit` | `{"limit"?,"remaining"?,"per_seconds"?}` | sets the rate-limit budget |
//! | `GET /_emu/clock` | | `{"mode","now"}` |
//! | `POST /_emu/clock` | `{"mode":"auto"\|"explicit"}` | switches clock mode |
//! | `POST /_emu/clock/advance` | `{"seconds"}` | moves emulated time forward |
//! | `GET /_emu/requests` | | the request log, oldest first |
//! | `GET /_emu/counters` | | requests per operation (`METHOD /path/{id}`) |
//! | `POST /_emu/reset` | | forgets every resource, fault and log; seeds again |

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::accounts::Accounts;
use crate::clock::{ClockMode, EmuClock};

/// Which cloud API an emulator speaks; decides error shapes and rate-limit behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    Hetzner,
    Vultr,
    Robot,
}

impl Api {
    /// An error response in this API's own shape. `code` is the machine code where the API
    /// has one (Hetzner `invalid_input`, Robot `SERVER_NOT_FOUND`); Vultr has none.
    pub fn error(self, status: StatusCode, code: &str, message: &str) -> Response {
        let body = match self {
            Api::Hetzner => {
                json!({"error": {"code": code, "message": message, "details": null}})
            }
            Api::Vultr => json!({"error": message, "status": status.as_u16()}),
            Api::Robot => {
                json!({"error": {"status": status.as_u16(), "code": code, "message": message}})
            }
        };
        (status, Json(body)).into_response()
    }

    fn default_budget(self) -> RateBudget {
        match self {
            // 3600 requests an hour, refilled one a second.
            Api::Hetzner => RateBudget {
                limit: 3600,
                per: Duration::from_secs(3600),
            },
            // About 30 requests a second per client address.
            Api::Vultr => RateBudget {
                limit: 30,
                per: Duration::from_secs(1),
            },
            // Robot limits per endpoint per hour; 200 is the documented example.
            Api::Robot => RateBudget {
                limit: 200,
                per: Duration::from_secs(3600),
            },
        }
    }
}

/// How long emulated work takes, in emulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Creating a server or instance until it is running.
    pub create: Duration,
    /// Power actions, rebuilds and resets.
    pub power: Duration,
    /// Reverse DNS, IP and network changes.
    pub quick: Duration,
}

impl Timings {
    /// Close to the real clouds: creates take about 20 s.
    pub fn realistic() -> Self {
        Timings {
            create: Duration::from_secs(20),
            power: Duration::from_secs(5),
            quick: Duration::from_secs(1),
        }
    }

    /// Everything finishes at once (emulated time still has to be read after the call).
    pub fn instant() -> Self {
        Timings {
            create: Duration::ZERO,
            power: Duration::ZERO,
            quick: Duration::ZERO,
        }
    }
}

/// A rate-limit budget: `limit` requests per `per`, refilled evenly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBudget {
    pub limit: u64,
    pub per: Duration,
}

/// A token bucket in real time. Rate limits follow real time in every clock mode, so that
/// a client's wait before its retry is a real wait.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

/// What the gate decided about one request's rate limit.
#[derive(Debug, Clone, Copy)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u64,
    pub remaining: u64,
    /// Time until the bucket is full again.
    pub until_full: Duration,
    /// Time until the next request would be allowed.
    pub until_next: Duration,
}

/// An error injected through the control API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InjectedFault {
    /// Requests whose path starts with this (including `/v1`, `/v2`) are hit.
    pub path: String,
    /// Only this method (`GET`, `POST`, …); any when absent.
    #[serde(default)]
    pub method: Option<String>,
    pub status: u16,
    /// How many requests still get the error.
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

fn one() -> u32 {
    1
}

/// One request as the emulator saw it.
#[derive(Debug, Clone, Serialize)]
pub struct LoggedRequest {
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// `METHOD /path/{id}` with ids folded, the key of the counters.
    pub operation: String,
    pub status: u16,
}

/// Requests kept in the log; older ones are dropped (counters keep counting).
const LOG_CAPACITY: usize = 10_000;

/// Everything the control API can change.
#[derive(Debug, Default)]
pub struct Faults {
    /// (plan or server type name, location) pairs that are sold out.
    pub sold_out: BTreeSet<(String, String)>,
    /// Locations closed for new servers.
    pub disabled_locations: BTreeSet<String>,
    pub injected: Vec<InjectedFault>,
    pub latency: Duration,
    /// Actions still to fail.
    pub fail_next_actions: u32,
    budget: Option<RateBudget>,
    /// Level a new client's bucket starts at, once the control API set one.
    preset: Option<Bucket>,
    buckets: BTreeMap<String, Bucket>,
    log: VecDeque<LoggedRequest>,
    counters: BTreeMap<String, u64>,
    seq: u64,
}

impl Faults {
    pub fn is_sold_out(&self, plan: &str, location: &str) -> bool {
        self.sold_out
            .contains(&(plan.to_string(), location.to_string()))
    }

    pub fn is_disabled(&self, location: &str) -> bool {
        self.disabled_locations.contains(location)
    }

    /// Takes one "fail the next action" token, if any is left.
    pub fn take_action_failure(&mut self) -> bool {
        if self.fail_next_actions > 0 {
            self.fail_next_actions -= 1;
            true
        } else {
            false
        }
    }
}

/// Shared state of one emulator: its API, accounts, clock, timings and faults.
#[derive(Debug)]
pub struct EmuCore {
    pub api: Api,
    pub accounts: Accounts,
    pub clock: Arc<EmuClock>,
    pub timings: Timings,
    faults: Mutex<Faults>,
}

impl EmuCore {
    pub fn new(api: Api, accounts: Accounts, clock: Arc<EmuClock>, timings: Timings) -> Self {
        EmuCore {
            api,
            accounts,
            clock,
            timings,
            faults: Mutex::new(Faults::default()),
        }
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().expect("faults lock")
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// An error in this emulator's API shape.
    pub fn error(&self, status: StatusCode, code: &str, message: &str) -> Response {
        self.api.error(status, code, message)
    }

    /// Takes one token from `key`'s bucket.
    pub(crate) fn rate_limit(&self, key: &str) -> RateDecision {
        let mut faults = self.faults();
        let budget = faults.budget.unwrap_or_else(|| self.api.default_budget());
        let now = Instant::now();
        let fresh = faults.preset.clone().unwrap_or(Bucket {
            tokens: budget.limit as f64,
            last: now,
        });
        let bucket = faults.buckets.entry(key.to_string()).or_insert(fresh);
        let per_token = budget.per.as_secs_f64() / budget.limit.max(1) as f64;
        let refill = now.duration_since(bucket.last).as_secs_f64() / per_token;
        bucket.tokens = (bucket.tokens + refill).min(budget.limit as f64);
        bucket.last = now;
        let allowed = bucket.tokens >= 1.0;
        if allowed {
            bucket.tokens -= 1.0;
        }
        let missing = budget.limit as f64 - bucket.tokens;
        RateDecision {
            allowed,
            limit: budget.limit,
            remaining: bucket.tokens.floor() as u64,
            until_full: Duration::from_secs_f64((missing * per_token).max(0.0)),
            until_next: Duration::from_secs_f64(((1.0 - bucket.tokens) * per_token).max(0.0)),
        }
    }

    /// Takes the first injected fault matching this request, if any.
    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<InjectedFault> {
        let mut faults = self.faults();
        let index = faults.injected.iter().position(|f| {
            f.count > 0
                && path.starts_with(&f.path)
                && f.method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
        })?;
        let fault = &mut faults.injected[index];
        fault.count -= 1;
        let taken = fault.clone();
        if fault.count == 0 {
            faults.injected.remove(index);
        }
        Some(taken)
    }

    pub(crate) fn record(&self, method: &str, path: &str, query: Option<&str>, status: u16) {
        let at = self.now();
        let operation = format!("{method} {}", fold_ids(path));
        let mut faults = self.faults();
        faults.seq += 1;
        let seq = faults.seq;
        *faults.counters.entry(operation.clone()).or_default() += 1;
        if faults.log.len() == LOG_CAPACITY {
            faults.log.pop_front();
        }
        faults.log.push_back(LoggedRequest {
            seq,
            at,
            method: method.to_string(),
            path: path.to_string(),
            query: query.map(str::to_string),
            operation,
            status,
        });
    }

    fn reset_faults(&self) {
        *self.faults() = Faults::default();
    }
}

/// Replaces path segments that are ids (numbers, UUIDs, IPs, fingerprints) by `{id}`.
pub fn fold_ids(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            let is_id = !seg.is_empty()
                && (seg.bytes().all(|b| b.is_ascii_digit())
                    || (seg.len() >= 32
                        && seg.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
                    || seg.parse::<std::net::IpAddr>().is_ok()
                    || seg.contains(':'));
            if is_id { "{id}" } else { seg }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Forgets every resource of an emulator and seeds it again.
pub type ResetHook = Arc<dyn Fn() + Send + Sync>;

#[derive(Clone)]
struct ControlState {
    core: Arc<EmuCore>,
    reset: ResetHook,
}

/// The `/_emu/` routes of one emulator.
pub fn router(core: Arc<EmuCore>, reset: ResetHook) -> Router {
    Router::new()
        .route("/_emu/state", get(state))
        .route("/_emu/sold-out", post(sold_out))
        .route("/_emu/locations", post(location))
        .route("/_emu/faults", post(add_fault).delete(clear_faults))
        .route("/_emu/latency", post(latency))
        .route("/_emu/fail-next-action", post(fail_next_action))
        .route("/_emu/rate-limit", post(rate_limit))
        .route("/_emu/clock", get(clock).post(set_clock))
        .route("/_emu/clock/advance", post(advance_clock))
        .route("/_emu/requests", get(requests))
        .route("/_emu/counters", get(counters))
        .route("/_emu/reset", post(reset_world))
        .with_state(ControlState { core, reset })
}

type Ctl = State<ControlState>;

async fn state(State(s): Ctl) -> Json<serde_json::Value> {
    let f = s.core.faults();
    let budget = f.budget.unwrap_or_else(|| s.core.api.default_budget());
    Json(json!({
        "api": s.core.api,
        "clock": {"mode": s.core.clock.mode(), "now": s.core.now()},
        "sold_out": f.sold_out.iter().map(|(p, l)| json!({"plan": p, "location": l})).collect::<Vec<_>>(),
        "disabled_locations": f.disabled_locations,
        "faults": f.injected,
        "latency_ms": f.latency.as_millis() as u64,
        "fail_next_actions": f.fail_next_actions,
        "rate_limit": {"limit": budget.limit, "per_seconds": budget.per.as_secs_f64()},
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SoldOut {
    plan: String,
    location: String,
    #[serde(default = "yes")]
    sold_out: bool,
}

fn yes() -> bool {
    true
}

async fn sold_out(State(s): Ctl, Json(b): Json<SoldOut>) -> StatusCode {
    let mut f = s.core.faults();
    if b.sold_out {
        f.sold_out.insert((b.plan, b.location));
    } else {
        f.sold_out.remove(&(b.plan, b.location));
    }
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LocationSwitch {
    location: String,
    #[serde(default = "yes")]
    disabled: bool,
}

async fn location(State(s): Ctl, Json(b): Json<LocationSwitch>) -> StatusCode {
    let mut f = s.core.faults();
    if b.disabled {
        f.disabled_locations.insert(b.location);
    } else {
        f.disabled_locations.remove(&b.location);
    }
    StatusCode::NO_CONTENT
}

async fn add_fault(State(s): Ctl, Json(fault): Json<InjectedFault>) -> Response {
    if StatusCode::from_u16(fault.status).is_err() || fault.status < 400 {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "status must be 400 to 599"})),
        )
            .into_response();
    }
    s.core.faults().injected.push(fault);
    StatusCode::NO_CONTENT.into_response()
}

async fn clear_faults(State(s): Ctl) -> StatusCode {
    s.core.faults().injected.clear();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Latency {
    ms: u64,
}

async fn latency(State(s): Ctl, Json(b): Json<Latency>) -> StatusCode {
    s.core.faults().latency = Duration::from_millis(b.ms);
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Count {
    count: u32,
}

async fn fail_next_action(State(s): Ctl, Json(b): Json<Count>) -> StatusCode {
    s.core.faults().fail_next_actions = b.count;
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitBody {
    limit: Option<u64>,
    remaining: Option<u64>,
    per_seconds: Option<f64>,
}

async fn rate_limit(State(s): Ctl, Json(b): Json<RateLimitBody>) -> Response {
    let mut f = s.core.faults();
    let mut budget = f.budget.unwrap_or_else(|| s.core.api.default_budget());
    if let Some(limit) = b.limit {
        if limit == 0 {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": "limit must be at least 1"})),
            )
                .into_response();
        }
        budget.limit = limit;
    }
    if let Some(per) = b.per_seconds {
        match Duration::try_from_secs_f64(per) {
            Ok(per) if !per.is_zero() => budget.per = per,
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": "per_seconds must be a positive number"})),
                )
                    .into_response();
            }
        }
    }
    f.budget = Some(budget);
    let now = Instant::now();
    let tokens = b.remaining.map_or(budget.limit, |r| r.min(budget.limit)) as f64;
    // Every client, known or new, starts from the level just set.
    f.buckets.clear();
    f.preset = Some(Bucket { tokens, last: now });
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockBody {
    mode: ClockMode,
}

async fn clock(State(s): Ctl) -> Json<serde_json::Value> {
    Json(json!({"mode": s.core.clock.mode(), "now": s.core.now()}))
}

async fn set_clock(State(s): Ctl, Json(b): Json<ClockBody>) -> Json<serde_json::Value> {
    s.core.clock.set_mode(b.mode);
    clock(State(s)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Advance {
    seconds: f64,
}

async fn advance_clock(State(s): Ctl, Json(b): Json<Advance>) -> Response {
    match Duration::try_from_secs_f64(b.seconds) {
        Ok(by) => {
            s.core.clock.advance(by);
            clock(State(s)).await.into_response()
        }
        Err(_) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "seconds must be >= 0"})),
        )
            .into_response(),
    }
}

async fn requests(State(s): Ctl) -> Json<serde_json::Value> {
    let f = s.core.faults();
    Json(json!({"requests": f.log}))
}

async fn counters(State(s): Ctl) -> Json<serde_json::Value> {
    let f = s.core.faults();
    let total: u64 = f.counters.values().sum();
    Json(json!({"total": total, "operations": f.counters}))
}

async fn reset_world(State(s): Ctl) -> StatusCode {
    s.core.reset_faults();
    (s.reset)();
    StatusCode::NO_CONTENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_ids_out_of_paths() {
        assert_eq!(
            fold_ids("/v1/servers/42/actions/poweron"),
            "/v1/servers/{id}/actions/poweron"
        );
        assert_eq!(
            fold_ids("/v2/instances/4f0f12e5-1f84-404f-aa84-85f431ea5ec2"),
            "/v2/instances/{id}"
        );
        assert_eq!(fold_ids("/rdns/1.2.3.4"), "/rdns/{id}");
        assert_eq!(fold_ids("/key/b7:2f:30:aa"), "/key/{id}");
        assert_eq!(fold_ids("/v1/server_types"), "/v1/server_types");
    }
}
