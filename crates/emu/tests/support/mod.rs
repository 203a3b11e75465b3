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
use orc_testkit::EmuControl;

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
    let [h, v, r] = roots;
    let world = World {
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
    };
    for flavor in [Flavor::Hetzner, Flavor::Vultr, Flavor::Robot] {
        world.lift_rate_limit(flavor).await;
    }
    world
}

impl World {
    /// One emulator's control API.
    pub fn control(&self, flavor: Flavor) -> EmuControl {
        match flavor {
            Flavor::Hetzner => EmuControl::hetzner(&self.emu),
            Flavor::Vultr => EmuControl::vultr(&self.emu),
            Flavor::Robot => EmuControl::robot(&self.emu),
        }
    }

    /// Lets a million requests through per the API's own default period (an hour for
    /// Hetzner and Robot, a second for Vultr), every bucket full.
    pub async fn lift_rate_limit(&self, flavor: Flavor) {
        let per_seconds = match flavor {
            Flavor::Hetzner | Flavor::Robot => 3600.0,
            Flavor::Vultr => 1.0,
        };
        self.control(flavor)
            .rate_limit(1_000_000, per_seconds, None)
            .await;
    }

    /// Moves the emulated clock (shared by the three emulators) forward.
    pub async fn advance(&self, seconds: u64) {
        self.control(Flavor::Hetzner)
            .advance_clock(seconds as f64)
            .await;
    }
}
