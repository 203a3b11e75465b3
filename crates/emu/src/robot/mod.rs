//! Emulator of the Hetzner Robot webservice (dedicated servers), served at `/` with HTTP
//! basic auth `NAME:SECRET`.
//!
//! Layout: [`http`] (error envelope, form bodies), [`world`] (seeded servers, keys, rDNS,
//! key fingerprints), and handlers per area: [`servers`], [`boot`] (resets and the rescue
//! system), [`keys`], [`rdns`].
//!
//! Invariants: credentials are checked before any lookup (a 404 proves the login worked);
//! after [`MAX_FAILED_LOGINS`] failed logins in a row a client address is refused for
//! [`LOGIN_BLOCK`] of emulated time, correct credentials included; bodies are
//! form-encoded; every answer is JSON, errors in Robot's `{"error":{…}}` envelope. Paths
//! with a `.yaml` suffix are not served (404). The per-user, per-endpoint hourly rate
//! limit (403 `RATE_LIMIT_EXCEEDED`) is the gate's (see `crate::gate`).

mod boot;
mod control;
mod http;
mod keys;
mod rdns;
mod servers;
mod world;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::StatusCode;
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, TimeDelta, Utc};

use crate::control::EmuCore;
use crate::server::FlavorApp;
use http::RobotError;
use world::World;

/// Failed logins in a row after which a client address is blocked.
pub const MAX_FAILED_LOGINS: u32 = 3;
/// How long a blocked address stays blocked, in emulated time.
pub const LOGIN_BLOCK: TimeDelta = TimeDelta::minutes(10);

/// Shared state of the Robot handlers.
pub(crate) struct Robot {
    core: Arc<EmuCore>,
    materialiser: Option<Arc<crate::materialise::Materialiser>>,
    worlds: Mutex<BTreeMap<String, World>>,
    logins: Mutex<BTreeMap<IpAddr, FailedLogins>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct FailedLogins {
    count: u32,
    blocked_until: Option<DateTime<Utc>>,
}

impl Robot {
    /// Runs `f` on the account's world, seeding it on first use.
    fn world<R>(&self, account: &str, f: impl FnOnce(&mut World) -> R) -> R {
        let mut worlds = self.worlds.lock().unwrap_or_else(PoisonError::into_inner);
        let index = u32::try_from(worlds.len()).unwrap_or(u32::MAX);
        let world = worlds.entry(account.to_string()).or_insert_with(|| World {
            index,
            ..World::seeded()
        });
        let Some(materialiser) = &self.materialiser else {
            return f(world);
        };
        world.address_in(materialiser.fabric().plan());
        let out = f(world);
        world.address_in(materialiser.fabric().plan());
        materialiser.want(wants(&worlds));
        out
    }

    fn reset(&self) {
        if let Some(materialiser) = &self.materialiser {
            materialiser.want(crate::materialise::Wants::default());
        }
        self.worlds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.logins
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Checks basic-auth credentials from `client`, counting failures.
    fn login(&self, client: IpAddr, authorization: Option<&str>) -> Result<String, RobotError> {
        let now = self.core.now();
        let mut logins = self.logins.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = logins.entry(client).or_default();
        match entry.blocked_until {
            Some(until) if until > now => {
                let seconds = (until - now).num_seconds().max(1);
                return Err(RobotError::new(
                    StatusCode::FORBIDDEN,
                    "BLOCKED",
                    format!(
                        "too many failed logins from this address; blocked for another {seconds} s"
                    ),
                ));
            }
            Some(_) => *entry = FailedLogins::default(),
            None => {}
        }
        let account = authorization
            .and_then(|a| {
                a.strip_prefix("Basic ")
                    .or_else(|| a.strip_prefix("basic "))
            })
            .and_then(|b| STANDARD.decode(b.trim()).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| {
                let (user, password) = s.split_once(':')?;
                self.core
                    .accounts
                    .by_login(user, password)
                    .map(|a| a.name.clone())
            });
        match account {
            Some(name) => {
                *entry = FailedLogins::default();
                Ok(name)
            }
            // A request without credentials is no login attempt (clients that wait for the
            // challenge send one first) and does not count.
            None if authorization.is_none() => Err(RobotError::unauthorized()),
            None => {
                entry.count += 1;
                if entry.count >= MAX_FAILED_LOGINS {
                    entry.blocked_until = now.checked_add_signed(LOGIN_BLOCK);
                }
                Err(RobotError::unauthorized())
            }
        }
    }
}

/// The logged-in account of a request.
#[derive(Debug)]
pub(crate) struct Login(pub String);

impl FromRequestParts<Arc<Robot>> for Login {
    type Rejection = RobotError;

    async fn from_request_parts(
        parts: &mut Parts,
        robot: &Arc<Robot>,
    ) -> Result<Self, Self::Rejection> {
        let client = client_ip(&parts.extensions);
        let authorization = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        robot.login(client, authorization).map(Login)
    }
}

/// What every server of every account should be in the fabric: on or off, and booted into
/// its rescue system or what is installed.
fn wants(worlds: &BTreeMap<String, World>) -> crate::materialise::Wants {
    let servers = worlds
        .values()
        .flat_map(|w| {
            w.servers.iter().filter(|s| s.fabric_ip.is_some()).map(|s| {
                crate::materialise::ServerWant {
                    key: format!("r{}s{}", w.index, s.seed.server_number),
                    public_ipv4: s.fabric_ip,
                    private: Vec::new(),
                    powered_on: s.powered,
                    boot: s.boots,
                    user_data: None,
                    cloud_init: false,
                    rescue: s.booted_rescue.then(|| s.rescue_keys.clone()),
                }
            })
        })
        .collect();
    crate::materialise::Wants {
        servers,
        networks: Vec::new(),
    }
}

/// The Robot routes, with state applied, and the reset hook. With `fabric` (materialised
/// mode) every server is a namespace of it, at an address of its public slice.
pub fn app(core: Arc<EmuCore>, fabric: Option<Arc<crate::netns::Fabric>>) -> FlavorApp {
    let robot = Arc::new(Robot {
        core,
        materialiser: fabric.map(crate::materialise::Materialiser::spawn),
        worlds: Mutex::new(BTreeMap::new()),
        logins: Mutex::new(BTreeMap::new()),
    });
    let reset = {
        let robot = robot.clone();
        Arc::new(move || robot.reset())
    };
    let router = Router::new()
        .route("/server", get(servers::list))
        .route("/server/{id}", get(servers::get_one).post(servers::rename))
        .route("/reset", get(boot::list_resets))
        .route("/reset/{id}", get(boot::get_reset).post(boot::reset))
        .route("/boot/{id}", get(boot::get_boot))
        .route(
            "/boot/{id}/rescue",
            get(boot::get_rescue)
                .post(boot::activate_rescue)
                .delete(boot::deactivate_rescue),
        )
        .route("/key", get(keys::list).post(keys::create))
        .route(
            "/key/{fingerprint}",
            get(keys::get_one).post(keys::rename).delete(keys::delete),
        )
        .route(
            "/rdns/{ip}",
            get(rdns::get_one)
                .put(rdns::create)
                .post(rdns::upsert)
                .delete(rdns::delete),
        )
        .route(
            "/_emu/robot/servers",
            axum::routing::post(control::add_server),
        )
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            robot.clone(),
            method_not_allowed,
        ))
        .with_state(robot);
    FlavorApp { router, reset }
}

async fn not_found(_login: Login) -> RobotError {
    RobotError::not_found("Not Found")
}

/// Gives axum's bare 405 (a known path, another method) Robot's error body, after the
/// credentials check every answer starts with.
async fn method_not_allowed(State(robot): State<Arc<Robot>>, req: Request, next: Next) -> Response {
    let client = client_ip(req.extensions());
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let response = next.run(req).await;
    let bare = response.status() == StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(header::CONTENT_TYPE);
    if !bare {
        return response;
    }
    match robot.login(client, authorization.as_deref()) {
        Err(e) => e.into_response(),
        Ok(_) => RobotError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            "Method not allowed",
        )
        .into_response(),
    }
}

fn client_ip(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}
