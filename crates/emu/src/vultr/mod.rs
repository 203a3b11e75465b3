//! Emulator of the Vultr API v2, served under `/v2` with `Authorization: Bearer <key>`.
//!
//! Layout: [`http`] (error envelope and extractors), [`page`] (cursor pagination),
//! [`catalog`] (seeded plans, regions, OS and their routes), [`world`] (per-account state
//! and allocators), [`wire`] (request bodies and response objects), and one module of
//! handlers per resource: [`instances`], [`network`] (reserved IPs, VPCs, VPC 2.0),
//! [`keys`] (SSH keys), [`blocks`] (block storage), [`account`].
//!
//! Invariants: every answer, errors and unknown routes included, is JSON in Vultr's
//! `{"error","status"}` envelope; the catalogue routes answer without a key, every other
//! route checks the key before anything else; each account sees only its own resources.
//! Rate limiting, injected errors and latency are the gate's (see `crate::gate`).

mod account;
mod blocks;
mod catalog;
mod http;
mod instances;
mod keys;
mod network;
mod page;
mod wire;
mod world;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use chrono::{DateTime, Utc};

use crate::control::EmuCore;
use crate::server::FlavorApp;
use catalog::Catalog;
use http::VultrError;
use world::{Alloc, World};

/// Shared state of the Vultr handlers.
pub(crate) struct Vultr {
    core: Arc<EmuCore>,
    catalog: &'static Catalog,
    state: Mutex<Worlds>,
    materialiser: Option<Arc<crate::materialise::Materialiser>>,
}

struct Worlds {
    accounts: BTreeMap<String, World>,
    alloc: Alloc,
    /// When the emulator was (re)seeded; the account's last payment date.
    seeded: DateTime<Utc>,
}

impl Vultr {
    /// The account whose API key the request carries, or 401.
    fn account(&self, headers: &HeaderMap) -> Result<String, VultrError> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        token
            .and_then(|t| self.core.accounts.by_token(t))
            .map(|a| a.name.clone())
            .ok_or_else(VultrError::unauthorized)
    }

    /// Runs `f` on the account's world and the emulator's allocator under the lock.
    fn world<R>(&self, account: &str, f: impl FnOnce(&mut World, &mut Alloc) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *guard;
        let world = state.accounts.entry(account.to_string()).or_default();
        let out = f(world, &mut state.alloc);
        if let Some(materialiser) = &self.materialiser {
            materialiser.want(self.wants(state));
        }
        out
    }

    /// What every instance of every account should be in the fabric now.
    fn wants(&self, state: &Worlds) -> crate::materialise::Wants {
        use base64::Engine as _;
        let now = self.core.now();
        let install = self.core.timings.create;
        let mut out = Vec::new();
        for world in state.accounts.values() {
            for i in world.instances.values() {
                let phase = i.phase(now, install);
                let private = i
                    .vpcs
                    .iter()
                    .filter_map(|port| {
                        let vpc = world.vpcs.get(&port.vpc_id)?;
                        Some((format!("vvpc{}", vpc.id), port.ip, vpc.mask))
                    })
                    .collect();
                let user_data = base64::engine::general_purpose::STANDARD
                    .decode(&i.user_data)
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .filter(|text| !text.is_empty())
                    .map(Arc::from);
                out.push(crate::materialise::ServerWant {
                    key: format!("v{}", &i.id[..13].replace('-', "")),
                    public_ipv4: i.v4,
                    private,
                    powered_on: i.powered
                        && matches!(phase, world::Phase::Installing | world::Phase::Ready),
                    boot: i.boot,
                    user_data,
                    cloud_init: true,
                    rescue: None,
                });
            }
        }
        crate::materialise::Wants {
            servers: out,
            networks: Vec::new(),
        }
    }

    fn seeded(&self) -> DateTime<Utc> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seeded
    }

    fn reset(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut alloc = Alloc::default();
        alloc.public_slice = state.alloc.public_slice;
        *state = Worlds {
            accounts: BTreeMap::new(),
            alloc,
            seeded: self.core.now(),
        };
    }
}

/// The Vultr API routes, with state applied, and the reset hook.
pub fn app(core: Arc<EmuCore>, fabric: Option<Arc<crate::netns::Fabric>>) -> FlavorApp {
    let seeded = core.now();
    let mut alloc = Alloc::default();
    alloc.public_slice = fabric.as_ref().map(|f| f.plan());
    let vultr = Arc::new(Vultr {
        core,
        catalog: &catalog::CATALOG,
        state: Mutex::new(Worlds {
            accounts: BTreeMap::new(),
            alloc,
            seeded,
        }),
        materialiser: fabric.map(crate::materialise::Materialiser::spawn),
    });
    let reset = {
        let vultr = vultr.clone();
        Arc::new(move || vultr.reset())
    };
    FlavorApp {
        router: router(vultr.clone()).with_state(vultr),
        reset,
    }
}

fn router(vultr: Arc<Vultr>) -> Router<Arc<Vultr>> {
    use instances as i;
    Router::new()
        .route("/v2/regions", get(catalog::list_regions))
        .route(
            "/v2/regions/{region}/availability",
            get(catalog::region_availability),
        )
        .route("/v2/plans", get(catalog::list_plans))
        .route("/v2/os", get(catalog::list_os))
        .route("/v2/account", get(account::get_account))
        .route("/v2/instances", get(i::list).post(i::create))
        .route("/v2/instances/start", post(i::bulk_start))
        .route("/v2/instances/halt", post(i::bulk_halt))
        .route("/v2/instances/reboot", post(i::bulk_reboot))
        .route(
            "/v2/instances/{id}",
            get(i::get_one).patch(i::update).delete(i::delete),
        )
        .route("/v2/instances/{id}/start", post(i::start))
        .route("/v2/instances/{id}/halt", post(i::halt))
        .route("/v2/instances/{id}/reboot", post(i::reboot))
        .route("/v2/instances/{id}/reinstall", post(i::reinstall))
        .route("/v2/instances/{id}/user-data", get(i::get_user_data))
        .route("/v2/instances/{id}/ipv4", get(i::list_ipv4))
        .route("/v2/instances/{id}/ipv4/reverse", post(i::set_reverse_v4))
        .route(
            "/v2/instances/{id}/ipv4/reverse/default",
            post(i::default_reverse_v4),
        )
        .route("/v2/instances/{id}/ipv6", get(i::list_ipv6))
        .route(
            "/v2/instances/{id}/ipv6/reverse",
            get(i::list_reverse_v6).post(i::set_reverse_v6),
        )
        .route(
            "/v2/instances/{id}/ipv6/reverse/{ip}",
            axum::routing::delete(i::delete_reverse_v6),
        )
        .route("/v2/instances/{id}/vpcs", get(i::list_vpcs))
        .route("/v2/instances/{id}/vpcs/attach", post(i::attach_vpc))
        .route("/v2/instances/{id}/vpcs/detach", post(i::detach_vpc))
        .route("/v2/instances/{id}/vpc2", any(network::vpc2_gone))
        .route("/v2/instances/{id}/vpc2/{*rest}", any(network::vpc2_gone))
        .route(
            "/v2/reserved-ips",
            get(network::list_reserved).post(network::create_reserved),
        )
        .route("/v2/reserved-ips/convert", post(network::convert_reserved))
        .route(
            "/v2/reserved-ips/{id}",
            get(network::get_reserved)
                .patch(network::update_reserved)
                .delete(network::delete_reserved),
        )
        .route(
            "/v2/reserved-ips/{id}/attach",
            post(network::attach_reserved),
        )
        .route(
            "/v2/reserved-ips/{id}/detach",
            post(network::detach_reserved),
        )
        .route(
            "/v2/vpcs",
            get(network::list_vpcs).post(network::create_vpc),
        )
        .route(
            "/v2/vpcs/{id}",
            get(network::get_vpc)
                .put(network::update_vpc)
                .delete(network::delete_vpc),
        )
        .route("/v2/vpc2", any(network::vpc2_gone))
        .route("/v2/vpc2/{*rest}", any(network::vpc2_gone))
        .route("/v2/ssh-keys", get(keys::list).post(keys::create))
        .route(
            "/v2/ssh-keys/{id}",
            get(keys::get_one).patch(keys::update).delete(keys::delete),
        )
        .route("/v2/blocks", get(blocks::list).post(blocks::create))
        .route(
            "/v2/blocks/{id}",
            get(blocks::get_one)
                .patch(blocks::update)
                .delete(blocks::delete),
        )
        .route("/v2/blocks/{id}/attach", post(blocks::attach))
        .route("/v2/blocks/{id}/detach", post(blocks::detach))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(vultr, finish))
}

async fn not_found() -> VultrError {
    VultrError::not_found("Not found.")
}

/// Last touches on every answer: axum's bare 405 (a known path, another method) gets
/// Vultr's error body, and a request with a valid key gets `x-user` (the account's
/// e-mail address), as the real API sends.
async fn finish(State(vultr): State<Arc<Vultr>>, req: Request, next: Next) -> Response {
    let user = vultr.account(req.headers()).ok();
    let response = next.run(req).await;
    let bare = response.status() == StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(header::CONTENT_TYPE);
    let mut response = if bare {
        VultrError::new(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.").into_response()
    } else {
        response
    };
    if let Some(value) = user.and_then(|u| HeaderValue::from_str(&account_email(&u)).ok()) {
        response.headers_mut().insert("x-user", value);
    }
    response
}

/// The e-mail address the emulator gives an account.
fn account_email(account: &str) -> String {
    format!("{account}@example.com")
}
