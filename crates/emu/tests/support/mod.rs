//! Shared by the fidelity tests (`openapi.rs`) and the robustness tests (`fuzz.rs`): the
//! published API descriptions as validators ([`spec`]) and HTTP access to running
//! emulators with the checks every response gets ([`client`]).
//!
//! Every test starts its own emulators on loopback ports, so tests never share state.
//! Rate limits are raised first: they are real-time budgets, and a test that sends a few
//! hundred requests must not see 429s it did not ask for.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod client;
pub mod spec;

use std::sync::Arc;

use orc_emu::{EmuConfig, RunningEmulators};
use serde_json::json;

// Each test binary uses a different part of these.
#[allow(unused_imports)]
pub use client::{
    ApiClient, Auth, Body, Fidelity, Reply, error_shape_findings, fill, id_at, transport_findings,
};
#[allow(unused_imports)]
pub use spec::{Flavor, Spec};

/// The `demo` account's secret: Hetzner and Vultr token, Robot password.
pub const SECRET: &str = "demo-token";
/// The `demo` account's Robot user name.
pub const ROBOT_USER: &str = "demo";

/// Three running emulators and a client for each.
#[derive(Debug)]
pub struct World {
    pub emu: RunningEmulators,
    pub hetzner: ApiClient,
    pub vultr: ApiClient,
    pub robot: ApiClient,
}

fn load(flavor: Flavor) -> Arc<Spec> {
    match Spec::load(flavor) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("the committed description data is broken: {e}"),
    }
}

/// Starts all three emulators (instant timings, explicit clock) with generous rate limits.
pub async fn start() -> World {
    start_with(EmuConfig::for_tests()).await
}

/// [`start`] with another configuration (it must start all three emulators).
pub async fn start_with(config: EmuConfig) -> World {
    let emu = match config.start().await {
        Ok(e) => e,
        Err(e) => panic!("emulators did not start: {e}"),
    };
    let root = |h: &Option<orc_emu::server::EmuHandle>| match h {
        Some(h) => h.root_url(),
        None => panic!("the fidelity tests need all three emulators started"),
    };
    let roots = [root(&emu.hetzner), root(&emu.vultr), root(&emu.robot)];
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_default();
    for r in &roots {
        let resp = http
            .post(format!("{r}/_emu/rate-limit"))
            .json(&json!({"limit": 1_000_000_u64}))
            .send()
            .await;
        match resp {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => panic!("raising the rate limit at {r}: status {}", resp.status()),
            Err(e) => panic!("raising the rate limit at {r}: {e}"),
        }
    }
    let [h, v, r] = roots;
    World {
        hetzner: ApiClient::new(
            Flavor::Hetzner,
            format!("{h}/v1"),
            Auth::Bearer(SECRET.into()),
            load(Flavor::Hetzner),
        ),
        vultr: ApiClient::new(
            Flavor::Vultr,
            format!("{v}/v2"),
            Auth::Bearer(SECRET.into()),
            load(Flavor::Vultr),
        ),
        robot: ApiClient::new(
            Flavor::Robot,
            r,
            Auth::Basic {
                user: ROBOT_USER.into(),
                password: SECRET.into(),
            },
            load(Flavor::Robot),
        ),
        emu,
    }
}

impl World {
    fn root(&self, flavor: Flavor) -> String {
        let handle = match flavor {
            Flavor::Hetzner => &self.emu.hetzner,
            Flavor::Vultr => &self.emu.vultr,
            Flavor::Robot => &self.emu.robot,
        };
        handle.as_ref().map(|h| h.root_url()).unwrap_or_default()
    }

    /// `POST /_emu/<path>` on one emulator's control API; panics unless it succeeds (the
    /// control API is the test's own lever, not the thing under test).
    pub async fn control(&self, flavor: Flavor, path: &str, body: serde_json::Value) {
        let url = format!("{}/_emu/{path}", self.root(flavor));
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default();
        match http.post(&url).json(&body).send().await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => panic!("control call {url}: status {}", r.status()),
            Err(e) => panic!("control call {url}: {e}"),
        }
    }

    /// Moves the emulated clock (shared by the three emulators) forward.
    pub async fn advance(&self, seconds: u64) {
        self.control(
            Flavor::Hetzner,
            "clock/advance",
            json!({"seconds": seconds}),
        )
        .await;
    }
}
