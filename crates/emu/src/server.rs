//! Starting emulators: in-process for tests (port 0), or from the `orc-cloud-emu` binary.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::accounts::Accounts;
use crate::clock::{ClockMode, EmuClock};
use crate::control::{self, Api, EmuCore, ResetHook, Timings};
use crate::{gate, hetzner, robot, vultr};

/// What an emulator module hands the server: its API routes and how to forget its world.
#[allow(missing_debug_implementations)]
pub struct FlavorApp {
    pub router: Router,
    pub reset: ResetHook,
}

/// Which emulators to start, where, and how they behave.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    pub hetzner: Option<SocketAddr>,
    pub vultr: Option<SocketAddr>,
    pub robot: Option<SocketAddr>,
    pub accounts: Accounts,
    pub clock_mode: ClockMode,
    pub timings: Timings,
    pub hetzner_options: hetzner::Options,
    /// Materialised mode: every emulated server becomes a namespace of this fabric.
    pub fabric: Option<Arc<crate::netns::Fabric>>,
}

impl EmuConfig {
    /// All three emulators on free loopback ports, the `demo` account, an explicit clock and
    /// instant timings: what most tests want.
    pub fn for_tests() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        EmuConfig {
            hetzner: Some(any),
            vultr: Some(any),
            robot: Some(any),
            accounts: Accounts::default(),
            clock_mode: ClockMode::Explicit,
            timings: Timings::instant(),
            hetzner_options: hetzner::Options::default(),
            fabric: None,
        }
    }

    /// Starts the configured emulators; they stop when the returned value is dropped.
    pub async fn start(self) -> std::io::Result<RunningEmulators> {
        let clock = Arc::new(EmuClock::new(self.clock_mode));
        let core = |api| {
            Arc::new(EmuCore::new(
                api,
                self.accounts.clone(),
                clock.clone(),
                self.timings,
            ))
        };
        let mut running = RunningEmulators {
            clock: clock.clone(),
            hetzner: None,
            vultr: None,
            robot: None,
        };
        if let Some(addr) = self.hetzner {
            let c = core(Api::Hetzner);
            let options = hetzner::Options {
                fabric: self.fabric.clone().or(self.hetzner_options.fabric.clone()),
                ..self.hetzner_options.clone()
            };
            let app = hetzner::app(c.clone(), options);
            running.hetzner = Some(serve(addr, c, app).await?);
        }
        if let Some(addr) = self.vultr {
            let c = core(Api::Vultr);
            let app = vultr::app(c.clone(), self.fabric.clone());
            running.vultr = Some(serve(addr, c, app).await?);
        }
        if let Some(addr) = self.robot {
            let c = core(Api::Robot);
            let app = robot::app(c.clone(), self.fabric.clone());
            running.robot = Some(serve(addr, c, app).await?);
        }
        Ok(running)
    }
}

/// One running emulator.
#[derive(Debug)]
pub struct EmuHandle {
    pub addr: SocketAddr,
    pub core: Arc<EmuCore>,
    task: JoinHandle<()>,
}

impl EmuHandle {
    /// `http://ADDR`, where the control API lives.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for EmuHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The emulators started by [`EmuConfig::start`].
#[derive(Debug)]
pub struct RunningEmulators {
    pub clock: Arc<EmuClock>,
    pub hetzner: Option<EmuHandle>,
    pub vultr: Option<EmuHandle>,
    pub robot: Option<EmuHandle>,
}

impl RunningEmulators {
    /// Base URL of the Hetzner Cloud API (`http://ADDR/v1`).
    pub fn hetzner_url(&self) -> Option<String> {
        self.hetzner
            .as_ref()
            .map(|h| format!("{}/v1", h.root_url()))
    }

    /// Base URL of the Vultr API (`http://ADDR/v2`).
    pub fn vultr_url(&self) -> Option<String> {
        self.vultr.as_ref().map(|h| format!("{}/v2", h.root_url()))
    }

    /// Base URL of the Robot webservice (`http://ADDR`).
    pub fn robot_url(&self) -> Option<String> {
        self.robot.as_ref().map(EmuHandle::root_url)
    }
}

async fn serve(addr: SocketAddr, core: Arc<EmuCore>, app: FlavorApp) -> std::io::Result<EmuHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let router = app
        .router
        .merge(control::router(core.clone(), app.reset))
        .layer(axum::middleware::from_fn_with_state(
            core.clone(),
            gate::gate,
        ));
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, service).await {
            tracing::error!(error = %e, "emulator server stopped");
        }
    });
    Ok(EmuHandle { addr, core, task })
}
