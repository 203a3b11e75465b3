//! robot API emulator.

use std::sync::Arc;

use axum::Router;

use crate::control::EmuCore;
use crate::server::FlavorApp;

pub fn app(core: Arc<EmuCore>) -> FlavorApp {
    let _ = core;
    FlavorApp {
        router: Router::new(),
        reset: Arc::new(|| {}),
    }
}
