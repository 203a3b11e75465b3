//! Hetzner Cloud API v1 emulator.

use std::sync::Arc;

use axum::Router;

use crate::control::EmuCore;
use crate::server::FlavorApp;

/// Switches for behaviour that differs between old and new Hetzner clients.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Emit the `datacenter` field on servers and primary IPs (removed from the API in
    /// July 2026, still required by older clients such as Debian's `hcloud`).
    pub emit_datacenter: bool,
}

pub fn app(core: Arc<EmuCore>, _options: Options) -> FlavorApp {
    let _ = core;
    FlavorApp {
        router: Router::new(),
        reset: Arc::new(|| {}),
    }
}
