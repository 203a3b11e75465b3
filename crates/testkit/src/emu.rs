//! A typed client for the emulators' control API (`/_emu/…`): sell out a plan, close a
//! location, inject errors, slow answers, fail actions, set the rate-limit budget, move the
//! emulated clock, read the request log and counters, reset everything.
//!
//! The control API is the test's own lever, not the thing under test, so every call panics
//! with the route and the answer when the emulator refuses it. The wire types are this
//! module's own, written from the emulator's documented control API.

use std::collections::BTreeMap;

use orc_emu::RunningEmulators;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The control API of one running emulator (Hetzner Cloud, Vultr or Robot).
#[derive(Debug, Clone)]
pub struct EmuControl {
    root: String,
    http: reqwest::Client,
}

/// An error the emulator answers instead of serving a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// Requests whose path starts with this (`/v1/servers`) are hit.
    pub path: String,
    /// Only this method (`POST`); any when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// 400 to 599.
    pub status: u16,
    /// How many requests get the error.
    pub count: u32,
    /// The API's error code (Hetzner, Robot), when not the status's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Fault {
    /// `count` answers of `status` to requests under `path`, of any method.
    pub fn new(path: &str, status: u16, count: u32) -> Fault {
        Fault {
            path: path.to_string(),
            method: None,
            status,
            count,
            code: None,
            message: None,
        }
    }

    /// Only requests of `method`.
    pub fn method(mut self, method: &str) -> Fault {
        self.method = Some(method.to_string());
        self
    }

    /// With the API's error `code`.
    pub fn code(mut self, code: &str) -> Fault {
        self.code = Some(code.to_string());
        self
    }

    /// With `message` as the error's words.
    pub fn message(mut self, message: &str) -> Fault {
        self.message = Some(message.to_string());
        self
    }
}

/// One request as the emulator logged it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LoggedRequest {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// `METHOD /path/{id}` with ids folded: the key of the counters.
    pub operation: String,
    pub status: u16,
}

/// Requests counted per operation since the start (or the last reset).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Counters {
    pub total: u64,
    pub operations: BTreeMap<String, u64>,
}

impl EmuControl {
    /// The control API under `root` (`http://127.0.0.1:PORT`, without `/v1`).
    pub fn new(root: impl Into<String>) -> EmuControl {
        EmuControl {
            root: root.into().trim_end_matches('/').to_string(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
        }
    }

    /// The running Hetzner Cloud emulator's control API.
    pub fn hetzner(emu: &RunningEmulators) -> EmuControl {
        EmuControl::new(
            emu.hetzner
                .as_ref()
                .expect("the Hetzner emulator runs")
                .root_url(),
        )
    }

    /// The running Vultr emulator's control API.
    pub fn vultr(emu: &RunningEmulators) -> EmuControl {
        EmuControl::new(
            emu.vultr
                .as_ref()
                .expect("the Vultr emulator runs")
                .root_url(),
        )
    }

    /// The running Robot emulator's control API.
    pub fn robot(emu: &RunningEmulators) -> EmuControl {
        EmuControl::new(
            emu.robot
                .as_ref()
                .expect("the Robot emulator runs")
                .root_url(),
        )
    }

    /// The emulator's root URL.
    pub fn root(&self) -> &str {
        &self.root
    }

    async fn send(&self, method: reqwest::Method, route: &str, body: Option<Value>) -> Value {
        let url = format!("{}/_emu/{}", self.root, route.trim_start_matches('/'));
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(e) => panic!("control call {url}: {e}"),
        };
        let status = answer.status();
        let text = answer.text().await.unwrap_or_default();
        assert!(status.is_success(), "control call {url}: {status} {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("control call {url}: not JSON ({e}): {text}"))
        }
    }

    /// `POST /_emu/<route>` with `body`: for routes this client has no method for (the
    /// Robot emulator's `robot/servers`).
    pub async fn post(&self, route: &str, body: Value) -> Value {
        self.send(reqwest::Method::POST, route, Some(body)).await
    }

    /// Sells `plan` out at `location` (or back in with `false`).
    pub async fn sold_out(&self, plan: &str, location: &str, sold_out: bool) {
        self.post(
            "sold-out",
            json!({"plan": plan, "location": location, "sold_out": sold_out}),
        )
        .await;
    }

    /// Closes `location` for new servers (or opens it again with `false`).
    pub async fn location_disabled(&self, location: &str, disabled: bool) {
        self.post(
            "locations",
            json!({"location": location, "disabled": disabled}),
        )
        .await;
    }

    /// Injects `fault`.
    pub async fn fault(&self, fault: Fault) {
        let body = serde_json::to_value(&fault).expect("a fault is plain data");
        self.post("faults", body).await;
    }

    /// Removes every injected fault.
    pub async fn clear_faults(&self) {
        self.send(reqwest::Method::DELETE, "faults", None).await;
    }

    /// Delays every answer by `ms` milliseconds.
    pub async fn latency(&self, ms: u64) {
        self.post("latency", json!({"ms": ms})).await;
    }

    /// Makes the next `count` actions end in error.
    pub async fn fail_next_actions(&self, count: u32) {
        self.post("fail-next-action", json!({"count": count})).await;
    }

    /// Sets the rate-limit budget: `limit` requests per `per_seconds`, every client's
    /// bucket starting at `remaining` (full when `None`).
    pub async fn rate_limit(&self, limit: u64, per_seconds: f64, remaining: Option<u64>) {
        self.post(
            "rate-limit",
            json!({"limit": limit, "per_seconds": per_seconds, "remaining": remaining}),
        )
        .await;
    }

    /// Moves the emulated clock forward by `seconds`.
    pub async fn advance_clock(&self, seconds: f64) {
        self.post("clock/advance", json!({"seconds": seconds}))
            .await;
    }

    /// The logged requests, oldest first.
    pub async fn requests(&self) -> Vec<LoggedRequest> {
        let log = self.send(reqwest::Method::GET, "requests", None).await;
        serde_json::from_value(log["requests"].clone())
            .unwrap_or_else(|e| panic!("the request log has an unexpected shape: {e}"))
    }

    /// The request counters.
    pub async fn counters(&self) -> Counters {
        let counters = self.send(reqwest::Method::GET, "counters", None).await;
        serde_json::from_value(counters)
            .unwrap_or_else(|e| panic!("the counters have an unexpected shape: {e}"))
    }

    /// Empties the emulated world and removes every fault.
    pub async fn reset(&self) {
        self.post("reset", json!({})).await;
    }
}
