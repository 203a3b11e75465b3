//! Hetzner Cloud API v1 emulator.
//!
//! Serves the endpoints orc's client and the official `hcloud` CLI use (see
//! `docs/emulators/hetzner.md` for the list) under `/v1`, with bearer-token accounts whose
//! resources are isolated from each other.
//!
//! Layout: this module builds the router, checks the token and holds the extractors that
//! turn every malformed request into the API's own error envelope; `world` keeps the
//! per-account state, `catalog` the seed catalogue, and one module per resource family
//! holds its handlers; `named` holds the get, update and list that the six named resource
//! kinds share.
//!
//! Invariants:
//! - Routing comes before authentication: an unknown path is `404 not_found` with or without
//!   a token; a known path without a valid token is `401 unauthorized`.
//! - Every response, errors included, is JSON with `Content-Type: application/json`.
//! - Progress is lazy: resources store when their pending transitions happen and every
//!   request first settles the account's world at `core.now()`; no background task runs.
//! - The store lock is never held across an `.await`; it may take the faults lock inside it
//!   (the gate never takes them in the other order).

mod actions;
mod catalog;
mod ips;
pub mod labels;
mod named;
mod networks;
mod pagination;
mod servers;
mod ssh_keys;
mod volumes;
mod wire;
mod world;

use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::control::EmuCore;
use crate::server::FlavorApp;

use catalog::Catalog;
use world::{FloatingIp, Network, PrimaryIp, Server, SshKey, Store, Volume, World};

/// Switches for behaviour that differs between old and new Hetzner clients.
#[derive(Debug, Clone)]
pub struct Options {
    /// Emit the `datacenter` field on servers and primary IPs (removed from the API in
    /// July 2026, still required by older clients such as Debian's `hcloud`).
    pub emit_datacenter: bool,
    /// Serve `GET /datacenters` in its historical shape instead of `410 Gone`.
    pub serve_datacenters: bool,
    /// Accept (and ignore) a `datacenter` field in `POST /servers` and `POST /primary_ips`
    /// instead of answering `422 invalid_input`.
    pub accept_datacenter_field: bool,
    /// Write `assignee_type: "server"` on unassigned primary IPs (the shape before August
    /// 2026) instead of `"unassigned"`.
    pub legacy_assignee_type: bool,
    /// Servers an account may have before `403 resource_limit_exceeded`.
    pub server_limit: usize,
    /// Materialised mode: every server becomes a namespace of this fabric, and public
    /// addresses come from its reserved slice.
    pub fabric: Option<Arc<crate::netns::Fabric>>,
}

impl Default for Options {
    /// What today's API does, plus the `datacenter` field Debian's `hcloud` needs.
    fn default() -> Self {
        Options {
            emit_datacenter: true,
            serve_datacenters: false,
            accept_datacenter_field: false,
            legacy_assignee_type: false,
            server_limit: 100,
            fabric: None,
        }
    }
}

/// Everything the handlers share.
#[derive(Debug)]
pub(crate) struct Hz {
    pub core: Arc<EmuCore>,
    pub options: Options,
    pub catalog: Catalog,
    store: Mutex<Store>,
    materialiser: Option<Arc<crate::materialise::Materialiser>>,
}

impl Hz {
    /// The store, locked. Poisoning cannot leave it half-updated in a way that matters more
    /// than losing the emulator, so a poisoned lock is taken over.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the caller's world, settled at the current emulated time.
    pub fn with_world<T>(&self, account: &Account, f: impl FnOnce(&mut Ctx<'_>) -> T) -> T {
        let now = self.core.now();
        let mut store = self.store();
        let store = &mut *store;
        let world = store.worlds.entry(account.0.clone()).or_default();
        world.settle(now);
        let mut ctx = Ctx {
            hz: self,
            world,
            ids: &mut store.ids,
            now,
        };
        let out = f(&mut ctx);
        if let Some(materialiser) = &self.materialiser {
            materialiser.want(wants(store, now));
        }
        out
    }
}

/// What every server and network of every account should be in the fabric, settled at
/// `now`. A network's router sits at its gateway address with its route table, as Hetzner's
/// does.
fn wants(store: &mut Store, now: chrono::DateTime<chrono::Utc>) -> crate::materialise::Wants {
    let mut out = Vec::new();
    let mut networks = Vec::new();
    for world in store.worlds.values_mut() {
        world.settle(now);
        for net in world.networks.values() {
            networks.push(crate::materialise::NetworkWant {
                key: format!("hnet{}", net.id),
                router: net.ip_range.first_host(),
                prefix: net.ip_range.prefix,
                routes: net
                    .routes
                    .iter()
                    .map(|r| {
                        (
                            format!("{}/{}", r.destination.addr, r.destination.prefix),
                            r.gateway,
                        )
                    })
                    .collect(),
            });
        }
        for s in world.servers.values() {
            let public_ipv4 = s
                .ipv4
                .and_then(|id| world.primary_ips.get(&id))
                .and_then(|ip| ip.ip.parse().ok());
            let private = s
                .private_net
                .iter()
                .filter_map(|p| {
                    let net = world.networks.get(&p.network)?;
                    Some((format!("hnet{}", p.network), p.ip, net.ip_range.prefix))
                })
                .collect();
            out.push(crate::materialise::ServerWant {
                key: format!("h{}", s.id),
                public_ipv4,
                private,
                powered_on: matches!(s.status, world::Status::Running | world::Status::Stopping),
                boot: s.boot,
                user_data: s.user_data.clone(),
                cloud_init: true,
                rescue: None,
            });
        }
    }
    crate::materialise::Wants {
        servers: out,
        networks,
    }
}

/// One request's view: the shared state, the caller's world, the id counters and the time.
pub(crate) struct Ctx<'a> {
    pub hz: &'a Hz,
    pub world: &'a mut World,
    pub ids: &'a mut world::Ids,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// The authenticated account's name, put in the request by [`authenticate`].
#[derive(Debug, Clone)]
pub(crate) struct Account(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Account {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Account>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("token is required"))
    }
}

pub(crate) type Hs = State<Arc<Hz>>;
pub(crate) type ApiResult = Result<Response, ApiError>;

/// An error in the Hetzner envelope `{"error":{"code","message","details"}}`.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: Value::Null,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    pub fn unauthorized(message: &str) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found(kind: &str, id: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{kind} with ID '{id}' not found"),
        )
    }

    /// `400 invalid_input`, for bad query parameters.
    pub fn bad_query(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    /// `422 invalid_input` naming the field and what is wrong with it.
    pub fn invalid_field(field: &str, messages: Vec<String>) -> Self {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("invalid input in field '{field}'"),
        )
        .with_details(json!({"fields": [{"name": field, "messages": messages}]}))
    }

    /// `422 invalid_input` with a message only.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
    }

    /// `422` with another code of the API.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn locked(kind: &str) -> Self {
        ApiError::new(
            StatusCode::LOCKED,
            "locked",
            format!("cannot perform operation because {kind} is locked"),
        )
    }

    pub fn protected(kind: &str) -> Self {
        ApiError::new(
            StatusCode::LOCKED,
            "protected",
            format!("{kind} is protected against this operation"),
        )
    }

    pub fn uniqueness(message: &str, details: Value) -> Self {
        ApiError::new(StatusCode::CONFLICT, "uniqueness_error", message).with_details(details)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "code": self.code,
            "message": self.message,
            "details": self.details,
        }});
        json_response(self.status, &body)
    }
}

/// A JSON response with the given status.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `200` JSON.
pub(crate) fn ok(body: Value) -> ApiResult {
    Ok(json_response(StatusCode::OK, &body))
}

/// `201` JSON.
pub(crate) fn created(body: Value) -> ApiResult {
    Ok(json_response(StatusCode::CREATED, &body))
}

/// A JSON request body: not JSON → `400 json_error`; JSON of the wrong shape → `422
/// invalid_input` naming serde's complaint.
#[derive(Debug)]
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "json_error", format!("{e}")))?;
        let text = if bytes.iter().all(u8::is_ascii_whitespace) {
            &b"{}"[..]
        } else {
            &bytes[..]
        };
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "json_error",
                format!("request body is not valid JSON: {e}"),
            )
        })?;
        if !value.is_object() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "json_error",
                "request body must be a JSON object",
            ));
        }
        decode(value).map(Body)
    }
}

/// A JSON object decoded into a request type; a wrong shape is `422 invalid_input`.
pub(crate) fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("invalid input: {e}")))
}

/// The one `{id}` segment of a path. A segment that is not a number is `400 invalid_input`.
#[derive(Debug)]
pub(crate) struct PathId(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(segment) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found_route())?;
        segment
            .parse::<u64>()
            .map(PathId)
            .map_err(|_| invalid_id(&segment))
    }
}

/// The id segment and the action name of `POST /{resource}/{id}/actions/{name}`, or the
/// action id of `GET /{resource}/{id}/actions/{action_id}`.
#[derive(Debug)]
pub(crate) struct IdAndName(pub u64, pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdAndName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((id, name)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found_route())?;
        let id = id.parse::<u64>().map_err(|_| invalid_id(&id))?;
        Ok(IdAndName(id, name))
    }
}

fn invalid_id(segment: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_input",
        format!("invalid ID '{segment}': must be a positive integer"),
    )
}

/// The answer to a path no route serves, including an action name the resource lacks.
pub(crate) fn not_found_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "not found")
}

/// Refuses an action `name` that is not among `known`, as an unknown route.
pub(crate) fn known_action(name: &str, known: &[&str]) -> Result<(), ApiError> {
    if known.contains(&name) {
        Ok(())
    } else {
        Err(not_found_route())
    }
}

/// Checks the bearer token of a request whose route exists.
async fn authenticate(State(hz): Hs, mut req: Request, next: Next) -> Response {
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let token = match auth {
        None | Some("") => None,
        Some(a) => Some(
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
                .unwrap_or("")
                .trim(),
        ),
    };
    let Some(token) = token else {
        return ApiError::unauthorized("token is required").into_response();
    };
    if token.is_empty() {
        return ApiError::unauthorized("token is required").into_response();
    }
    let Some(account) = hz.core.accounts.by_token(token) else {
        return ApiError::unauthorized("the token you have provided is invalid").into_response();
    };
    req.extensions_mut().insert(Account(account.name.clone()));
    next.run(req).await
}

async fn unknown_route() -> Response {
    not_found_route().into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed",
    )
    .into_response()
}

/// Builds the Hetzner Cloud emulator: its routes and its reset hook.
pub fn app(core: Arc<EmuCore>, options: Options) -> FlavorApp {
    let materialiser = options
        .fabric
        .clone()
        .map(crate::materialise::Materialiser::spawn);
    let mut store = Store::default();
    store.ids.public_slice = options.fabric.as_ref().map(|f| f.plan());
    let hz = Arc::new(Hz {
        core,
        options,
        catalog: Catalog::load(),
        store: Mutex::new(store),
        materialiser,
    });
    let v1 = |p: &str| format!("/v1{p}");
    let router = Router::new()
        .route(&v1("/actions"), get(actions::list_by_id))
        .route(&v1("/actions/{id}"), get(actions::get_one))
        .route(&v1("/server_types"), get(catalog::list_server_types))
        .route(&v1("/server_types/{id}"), get(catalog::get_server_type))
        .route(&v1("/locations"), get(catalog::list_locations))
        .route(&v1("/locations/{id}"), get(catalog::get_location))
        .route(&v1("/datacenters"), get(catalog::list_datacenters))
        .route(&v1("/datacenters/{id}"), get(catalog::get_datacenter))
        .route(&v1("/images"), get(catalog::list_images))
        .route(&v1("/images/{id}"), get(catalog::get_image))
        .route(&v1("/pricing"), get(catalog::pricing))
        .route(&v1("/servers"), get(servers::list).post(servers::create))
        .route(
            &v1("/servers/{id}"),
            get(named::get_one::<Server>)
                .put(named::update::<Server>)
                .delete(servers::delete),
        )
        .route(&v1("/ssh_keys"), get(ssh_keys::list).post(ssh_keys::create))
        .route(
            &v1("/ssh_keys/{id}"),
            get(named::get_one::<SshKey>)
                .put(named::update::<SshKey>)
                .delete(ssh_keys::delete),
        )
        .route(
            &v1("/primary_ips"),
            get(ips::list_primary).post(ips::create_primary),
        )
        .route(
            &v1("/primary_ips/{id}"),
            get(named::get_one::<PrimaryIp>)
                .put(named::update::<PrimaryIp>)
                .delete(ips::delete_primary),
        )
        .route(
            &v1("/floating_ips"),
            get(ips::list_floating).post(ips::create_floating),
        )
        .route(
            &v1("/floating_ips/{id}"),
            get(named::get_one::<FloatingIp>)
                .put(named::update::<FloatingIp>)
                .delete(ips::delete_floating),
        )
        .route(&v1("/networks"), get(networks::list).post(networks::create))
        .route(
            &v1("/networks/{id}"),
            get(named::get_one::<Network>)
                .put(named::update::<Network>)
                .delete(networks::delete),
        )
        .route(&v1("/volumes"), get(volumes::list).post(volumes::create))
        .route(
            &v1("/volumes/{id}"),
            get(named::get_one::<Volume>)
                .put(named::update::<Volume>)
                .delete(volumes::delete),
        );
    let router = actions::resource_action_routes(router, &v1)
        .route(&v1("/servers/{id}/actions/{action}"), post(servers::action))
        .route(
            &v1("/primary_ips/{id}/actions/{action}"),
            post(ips::primary_action),
        )
        .route(
            &v1("/floating_ips/{id}/actions/{action}"),
            post(ips::floating_action),
        )
        .route(
            &v1("/networks/{id}/actions/{action}"),
            post(networks::action),
        )
        .route(&v1("/volumes/{id}/actions/{action}"), post(volumes::action))
        .route_layer(axum::middleware::from_fn_with_state(
            hz.clone(),
            authenticate,
        ))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(hz.clone());
    let reset_hz = hz.clone();
    FlavorApp {
        router,
        reset: Arc::new(move || *reset_hz.store() = Store::default()),
    }
}
