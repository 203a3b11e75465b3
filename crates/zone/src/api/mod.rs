//! The zone's HTTP/JSON API (axum), for the `orc` CLI, the web console and scripts.
//!
//! Resources: orgs, projects, users and their API tokens, memberships (roles), providers
//! (visibility, scope, pricing strategy, catalog and replicas), pools (create, resize,
//! reconfigure, delete), nodes, a project's secrets, events, usage (invoice lines) and quotes. `docs/zone/api.md`
//! describes them; `crates/zone/openapi.json` is the OpenAPI document generated from this
//! module ([`openapi`]) and a test keeps it in step.
//!
//! Invariants:
//! - every request but `GET /api/health` and `GET /api/openapi.json` carries
//!   `Authorization: Bearer <token>`; [`access`] decides what the caller's roles allow;
//! - every error is JSON `{"error": {"code", "message", "field"}}` ([`error`]), including
//!   unknown paths, wrong methods and malformed bodies;
//! - lists come in a fixed order (by name, or by id = creation order, as each says);
//! - the API writes desired state to the store only; after a write that changes desired
//!   state it wakes the reconcilers, which do the work.
//!
//! Must not import the hub or the running apps supervisor: the zone hands in what the API
//! needs from them ([`Backends`] for quotes, a [`ProviderDirectory`] for replicas and
//! catalogs, a [`LogSource`] for app logs, the apps' [`AppsConfig`] for the params each app
//! declares sensitive, a waker) when it assembles itself (`crate::zone`). The JSON shapes are
//! `orc-zone-api-types`, re-exported as [`views`] and in [`error`].

pub mod access;
mod app_exec;
mod apps;
pub mod error;
pub mod extract;
mod keys;
mod mesh;
pub mod nodes;
pub mod oci;
mod placement;
mod pools;
mod providers;
pub mod registry;
mod secrets;
mod tenancy;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use tokio::net::TcpListener;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::apps::AppsConfig;
use crate::backend::Backends;
use crate::model::{Provider, Timestamp};
use crate::store::Store;
use error::{ApiError, ErrorCode};
pub use orc_zone_api_types::views;
use views::LogLineView;
use views::{CatalogView, ReplicaView};

/// What the API learns about connected providers from the hub.
pub trait ProviderDirectory: Send + Sync + 'static {
    /// The provider's connected replicas: serving first, then standbys by slot.
    fn replicas(&self, provider: &Provider) -> Vec<ReplicaView>;
    /// The catalog the provider's replicas last reported, if any.
    fn catalog(&self, provider: &Provider) -> Option<orc_proto::Catalog>;
}

/// A directory that knows no replicas (a zone without a hub, and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDirectory;

impl ProviderDirectory for NoDirectory {
    fn replicas(&self, _provider: &Provider) -> Vec<ReplicaView> {
        Vec::new()
    }
    fn catalog(&self, _provider: &Provider) -> Option<orc_proto::Catalog> {
        None
    }
}

/// Future returned by [`LogSource::logs`].
pub type LogsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<LogLineView>, String>> + Send + 'a>>;

/// Where the API reads the logs of a pool's app slots (the apps supervisor).
pub trait LogSource: Send + Sync + 'static {
    /// The kept lines of the pool's slots (one slot if `slot` is set) at `level` or more
    /// severe, oldest first.
    fn logs<'a>(
        &'a self,
        pool: &'a crate::model::Pool,
        slot: Option<u32>,
        level: &'a str,
    ) -> LogsFuture<'a>;
}

/// What the API may do with nodes' agents (the agent hub).
pub trait AgentAccess: Send + Sync + 'static {
    /// The last contact of `node`'s open agent stream, if it has one.
    fn live(&self, node: &crate::model::NodeId) -> Option<Timestamp>;
    /// Starts `what` on `node`'s agent; see [`crate::agents::AgentHub::exec`].
    fn exec(
        &self,
        node: &crate::model::NodeId,
        what: crate::agents::ExecWhat,
        timeout: Duration,
    ) -> Result<tokio::sync::mpsc::Receiver<crate::agents::ExecEvent>, crate::agents::ExecError>;
    /// The fingerprint of the CA join tokens pin; `None` on a plain zone.
    fn ca_fingerprint(&self) -> Option<String>;
    /// The URL agents dial.
    fn endpoint(&self) -> String;
    /// The mesh config of `node` in the plan last published (empty: none).
    fn mesh_of(&self, node: &crate::model::NodeId) -> orc_mesh::MeshConfig;
    /// The latest mesh status `node`'s agent reported to this controller.
    fn mesh_status(&self, node: &crate::model::NodeId) -> Option<crate::agents::MeshStatusReport>;
    /// Says that nodes' assignments may have changed (a node's ingress): every session
    /// looks at its node's at once.
    fn assignments_changed(&self);
}

type Waker = Arc<dyn Fn() + Send + Sync>;
type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub(crate) store: Store,
    backends: Option<Backends>,
    directory: Arc<dyn ProviderDirectory>,
    logs: Option<Arc<dyn LogSource>>,
    pub(crate) agents: Option<Arc<dyn AgentAccess>>,
    pub(crate) agent_binary: Option<Arc<nodes::ServedBinary>>,
    waker: Waker,
    clock: Clock,
    apps: Arc<AppsConfig>,
    pub(crate) mesh: Arc<crate::mesh::MeshOptions>,
    pub(crate) mesh_signal: crate::mesh::MeshSignal,
    pub(crate) access_keys: Option<Arc<orc_web::access_keys::AccessKeys>>,
    pub(crate) edge: Option<Arc<EdgeLinks>>,
    /// The app registry's binaries; `None` when the zone keeps no registry.
    pub(crate) blobs: Option<crate::apps::Blobs>,
    /// What signs and checks the registry pull grants nodes carry.
    pub(crate) pull_key: Arc<orc_zone_model::oci::PullKey>,
}

/// What the API tells about the access edge: its URL and where slots listen.
#[derive(Clone)]
pub struct EdgeLinks {
    /// The zone domain.
    pub domain: String,
    /// The port the edge's URLs carry.
    pub port: u16,
    /// Where app slots serve their http endpoints.
    pub endpoints: Arc<dyn orc_zone_model::endpoints::EndpointDirectory>,
}

impl fmt::Debug for EdgeLinks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeLinks")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl EdgeLinks {
    /// The URL of an edge name (`<label>.<org>`) under the domain.
    pub fn url_of(&self, name: &orc_access::names::EdgeName, org: &str) -> String {
        format!(
            "{}/",
            orc_zone_model::endpoints::host_url(&name.host(org, &self.domain), self.port)
        )
    }
}

impl fmt::Debug for ApiState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiState")
            .field("store", &self.store)
            .field("backends", &self.backends.is_some())
            .field("logs", &self.logs.is_some())
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// An API over `store` with no backends (quotes answer 503), no replicas, no logs, a
    /// waker that does nothing and the wall clock.
    pub fn new(store: Store) -> Self {
        ApiState {
            store,
            backends: None,
            directory: Arc::new(NoDirectory),
            logs: None,
            agents: None,
            agent_binary: None,
            waker: Arc::new(|| {}),
            clock: Arc::new(Timestamp::now),
            apps: Arc::new(AppsConfig::default()),
            mesh: Arc::new(crate::mesh::MeshOptions::default()),
            mesh_signal: crate::mesh::MeshSignal::default(),
            access_keys: None,
            edge: None,
            blobs: None,
            pull_key: Arc::new(orc_zone_model::oci::PullKey::generate()),
        }
    }

    /// Registry pull grants are checked with this key (the agent hub signs with it).
    pub fn with_pull_key(mut self, key: Arc<orc_zone_model::oci::PullKey>) -> Self {
        self.pull_key = key;
        self
    }

    /// The access edge the zone runs, for endpoint URLs.
    pub fn with_edge(mut self, edge: EdgeLinks) -> Self {
        self.edge = Some(Arc::new(edge));
        self
    }

    /// The access edge's keys: published at the JWKS path, rotated by operators.
    pub fn with_access_keys(mut self, keys: Arc<orc_web::access_keys::AccessKeys>) -> Self {
        self.access_keys = Some(keys);
        self
    }

    /// Workstations get addresses of this mesh range and quarantine, and their changes go
    /// to the mesh reconciler through `signal`.
    pub fn with_mesh(
        mut self,
        options: crate::mesh::MeshOptions,
        signal: crate::mesh::MeshSignal,
    ) -> Self {
        self.mesh = Arc::new(options);
        self.mesh_signal = signal;
        self
    }

    /// The app registry keeps its binaries here.
    pub fn with_registry(mut self, blobs: crate::apps::Blobs) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Apps resolve through this config (for the params each declares sensitive).
    pub fn with_apps(mut self, apps: AppsConfig) -> Self {
        self.apps = Arc::new(apps);
        self
    }

    /// Quotes go to these backends.
    pub fn with_backends(mut self, backends: Backends) -> Self {
        self.backends = Some(backends);
        self
    }

    /// Replicas and catalogs come from this directory.
    pub fn with_directory(mut self, directory: Arc<dyn ProviderDirectory>) -> Self {
        self.directory = directory;
        self
    }

    /// App logs come from this source.
    pub fn with_logs(mut self, logs: Arc<dyn LogSource>) -> Self {
        self.logs = Some(logs);
        self
    }

    /// Nodes' agents are reached through this (`orc exec`, join tokens).
    pub fn with_agents(mut self, agents: Arc<dyn AgentAccess>) -> Self {
        self.agents = Some(agents);
        self
    }

    /// `GET /api/agent/orc` serves this binary.
    pub fn with_agent_binary(mut self, binary: nodes::ServedBinary) -> Self {
        self.agent_binary = Some(Arc::new(binary));
        self
    }

    /// Called after every write that changes desired state (wakes the reconcilers).
    pub fn with_waker(mut self, waker: impl Fn() + Send + Sync + 'static) -> Self {
        self.waker = Arc::new(waker);
        self
    }

    /// Times written by the API come from this clock.
    pub fn with_clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    pub(crate) fn now(&self) -> Timestamp {
        (self.clock)()
    }

    pub(crate) fn wake(&self) {
        (self.waker)()
    }
}

/// The API's routes.
pub fn router(state: ApiState) -> Router {
    use pools as pl;
    use providers as pv;
    use registry as rg;
    use tenancy as tn;
    let project = "/api/orgs/{org}/projects/{project}";
    Router::new()
        .route("/api/health", get(health))
        .route("/api/openapi.json", get(openapi_json))
        .route("/api/agent/orc", get(nodes::agent_binary))
        .route("/api/agent/orc.sha256", get(nodes::agent_binary_sha256))
        .route("/api/whoami", get(tn::whoami))
        .route(orc_access::JWKS_PATH, get(keys::jwks))
        .route("/api/zone/access-keys", get(keys::list_access_keys))
        .route(
            "/api/zone/access-keys/rotate",
            post(keys::rotate_access_key),
        )
        .route("/api/orgs", get(tn::list_orgs).post(tn::create_org))
        .route("/api/orgs/{org}", get(tn::get_org).delete(tn::delete_org))
        .route(
            "/api/orgs/{org}/projects",
            get(tn::list_projects).post(tn::create_project),
        )
        .route(project, get(tn::get_project).delete(tn::delete_project))
        .route(
            "/api/orgs/{org}/memberships",
            get(tn::list_memberships).post(tn::create_membership),
        )
        .route(
            "/api/orgs/{org}/memberships/{membership}",
            axum::routing::delete(tn::delete_membership),
        )
        .route("/api/users", get(tn::list_users).post(tn::create_user))
        .route("/api/users/{user}", axum::routing::delete(tn::delete_user))
        .route(
            "/api/users/{user}/password",
            put(tn::set_password).delete(tn::remove_password),
        )
        .route(
            "/api/users/{user}/tokens",
            get(tn::list_tokens).post(tn::create_token),
        )
        .route(
            "/api/users/{user}/tokens/{token}",
            axum::routing::delete(tn::revoke_token),
        )
        .route("/api/orgs/{org}/apps", get(rg::list_apps))
        .route("/api/orgs/{org}/apps/{app}", get(rg::get_app))
        .route(
            "/api/orgs/{org}/apps/{app}/tags/{tag}",
            put(rg::push_tag).delete(rg::delete_tag),
        )
        .route(
            "/api/orgs/{org}/registry/blobs/{digest}",
            get(rg::get_blob)
                .put(rg::put_blob)
                .layer(axum::extract::DefaultBodyLimit::max(
                    usize::try_from(registry::MAX_BLOB_BYTES).unwrap_or(usize::MAX),
                )),
        )
        .route("/downloads/orc/{file}", get(rg::download))
        .route("/v2", axum::routing::any(oci::serve))
        .route("/v2/", axum::routing::any(oci::serve))
        .route(
            "/v2/{*path}",
            axum::routing::any(oci::serve).layer(axum::extract::DefaultBodyLimit::max(
                usize::try_from(registry::MAX_BLOB_BYTES).unwrap_or(usize::MAX),
            )),
        )
        .route(
            &format!("{project}/apps"),
            get(apps::list_apps).post(apps::deploy_app),
        )
        .route(&format!("{project}/apps/plan"), post(apps::plan_app))
        .route(
            &format!("{project}/apps/{{app}}"),
            get(apps::get_app).delete(apps::remove_app),
        )
        .route(
            &format!("{project}/apps/{{app}}/revisions"),
            get(apps::list_revisions),
        )
        .route(
            &format!("{project}/apps/{{app}}/rollback"),
            post(apps::rollback_app),
        )
        .route(
            &format!("{project}/apps/{{app}}/exec"),
            post(app_exec::exec_app),
        )
        .route(
            &format!("{project}/apps/{{app}}/logs"),
            get(app_exec::app_logs),
        )
        .route(&format!("{project}/providers"), get(pv::list_providers))
        .route(
            &format!("{project}/providers/{{provider}}"),
            get(pv::get_provider),
        )
        .route(
            &format!("{project}/providers/{{provider}}/change-scope"),
            post(pv::change_scope),
        )
        .route(
            &format!("{project}/providers/{{provider}}/sites"),
            get(pv::list_sites),
        )
        .route(
            &format!("{project}/providers/{{provider}}/pricing"),
            put(pv::set_pricing).delete(pv::remove_pricing),
        )
        .route(
            &format!("{project}/pools"),
            get(pl::list_pools).post(pl::create_pool),
        )
        .route(
            &format!("{project}/pools/{{pool}}"),
            get(pl::get_pool).delete(pl::delete_pool),
        )
        .route(
            &format!("{project}/pools/{{pool}}/resize"),
            post(pl::resize_pool),
        )
        .route(
            &format!("{project}/pools/{{pool}}/reconfigure"),
            post(pl::reconfigure_pool),
        )
        .route(
            &format!("{project}/pools/{{pool}}/nodes"),
            get(pl::list_nodes),
        )
        .route(
            &format!("{project}/pools/{{pool}}/logs"),
            get(pl::pool_logs),
        )
        .route(
            &format!("{project}/pools/{{pool}}/endpoints"),
            get(pl::pool_endpoints),
        )
        .route(
            &format!("{project}/nodes/{{node}}/placement"),
            get(placement::get_placement),
        )
        .route(
            &format!("{project}/nodes/{{node}}/labels/{{name}}"),
            put(placement::set_label).delete(placement::remove_label),
        )
        .route(
            &format!("{project}/nodes/{{node}}/cordon"),
            post(placement::cordon),
        )
        .route(
            &format!("{project}/nodes/{{node}}/uncordon"),
            post(placement::uncordon),
        )
        .route(
            &format!("{project}/nodes/{{node}}/ingress/enable"),
            post(placement::enable_ingress),
        )
        .route(
            &format!("{project}/nodes/{{node}}/ingress/disable"),
            post(placement::disable_ingress),
        )
        .route(
            &format!("{project}/nodes/{{node}}/drain"),
            post(placement::drain),
        )
        .route(
            &format!("{project}/nodes/{{node}}/exec"),
            post(nodes::exec_node),
        )
        .route(
            &format!("{project}/nodes/{{node}}/join-tokens"),
            get(nodes::list_join_tokens).post(nodes::create_join_token),
        )
        .route(
            &format!("{project}/nodes/{{node}}/join-tokens/{{token}}"),
            axum::routing::delete(nodes::revoke_join_token),
        )
        .route(&format!("{project}/mesh"), get(mesh::mesh_status))
        .route(
            &format!("{project}/mesh/workstations"),
            get(mesh::list_workstations).post(mesh::connect_workstation),
        )
        .route(
            &format!("{project}/mesh/workstations/{{name}}"),
            axum::routing::delete(mesh::disconnect_workstation),
        )
        .route(&format!("{project}/secrets"), get(secrets::list_secrets))
        .route(
            &format!("{project}/secrets/{{name}}"),
            put(secrets::set_secret).delete(secrets::delete_secret),
        )
        .route(&format!("{project}/events"), get(pl::list_events))
        .route(&format!("{project}/usage"), get(pl::usage))
        .route(&format!("{project}/quote"), post(pl::quote))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(
            extract::MAX_BODY_BYTES,
        ))
        .with_state(state)
}

/// Limits of the API beyond those of its listener.
#[derive(Debug, Clone)]
pub struct ApiLimits {
    /// A request not answered within this long gets `408 request_timeout`. Longer than the
    /// longest wait inside a request (a quote waits up to 30 s). Default 60 s.
    pub request_timeout: Duration,
    /// Requests handled at once; more wait their turn (within their timeout). Default 256.
    pub max_in_flight: usize,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            request_timeout: Duration::from_secs(60),
            max_in_flight: 256,
        }
    }
}

/// Serves the API on `listener` (TLS, timeouts and connection limit as `options` say) until
/// `shutdown` completes, then finishes the requests in flight.
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    options: orc_tls::ServeOptions,
    limits: ApiLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let timeout = limits.request_timeout;
    let app = router(state)
        .layer(tower::limit::ConcurrencyLimitLayer::new(
            limits.max_in_flight.max(1),
        ))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                use axum::response::IntoResponse;
                match tokio::time::timeout(timeout, next.run(request)).await {
                    Ok(response) => response,
                    Err(_) => ApiError::new(
                        ErrorCode::RequestTimeout,
                        format!(
                            "the request was not complete within {} s",
                            timeout.as_secs()
                        ),
                    )
                    .into_response(),
                }
            },
        ));
    let options = orc_tls::ServeOptions {
        what: "API",
        http2_only: false,
        ..options
    };
    orc_tls::serve(listener, app, options, shutdown).await
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such API path")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this API path does not take this method",
    )
}

/// Whether the zone answers.
#[utoipa::path(get, path = "/api/health", tag = "zone", security(()),
    responses((status = 200, description = "The zone answers: `{\"status\": \"ok\"}`")))]
async fn health() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/api/openapi.json", tag = "zone", security(()),
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json")))]
async fn openapi_json(State(_): State<ApiState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi_pretty_json(),
    )
        .into_response()
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "orc zone API", description = "The zone controller's HTTP/JSON API. See docs/zone/api.md."),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    paths(
        health, openapi_json,
        tenancy::whoami, tenancy::list_orgs, tenancy::create_org, tenancy::get_org,
        tenancy::delete_org, tenancy::list_projects, tenancy::create_project,
        tenancy::get_project, tenancy::delete_project,
        tenancy::list_memberships, tenancy::create_membership, tenancy::delete_membership,
        tenancy::list_users, tenancy::create_user, tenancy::delete_user,
        tenancy::list_tokens, tenancy::create_token, tenancy::revoke_token,
        tenancy::set_password, tenancy::remove_password,
        providers::list_providers, providers::get_provider, providers::change_scope,
        providers::set_pricing, providers::remove_pricing, providers::list_sites,
        pools::list_pools, pools::create_pool, pools::get_pool, pools::delete_pool,
        pools::resize_pool, pools::reconfigure_pool, pools::list_nodes, pools::pool_logs,
        pools::pool_endpoints,
        pools::list_events, pools::usage, pools::quote,
        nodes::exec_node, nodes::create_join_token, nodes::list_join_tokens,
        nodes::revoke_join_token, nodes::agent_binary, nodes::agent_binary_sha256,
        mesh::mesh_status, mesh::list_workstations, mesh::connect_workstation,
        mesh::disconnect_workstation,
        secrets::list_secrets, secrets::set_secret, secrets::delete_secret,
        keys::jwks, keys::list_access_keys, keys::rotate_access_key,
        apps::plan_app, apps::deploy_app, apps::list_apps, apps::get_app, apps::list_revisions,
        apps::rollback_app, apps::remove_app, app_exec::exec_app, app_exec::app_logs,
        placement::get_placement, placement::set_label, placement::remove_label,
        placement::cordon, placement::uncordon, placement::drain,
        placement::enable_ingress, placement::disable_ingress,
        registry::get_blob, registry::put_blob, registry::push_tag, registry::list_apps,
        registry::get_app, registry::delete_tag, registry::download,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail, ErrorCode, LogLineView, CatalogView))
)]
struct ApiDoc;

/// The OpenAPI document of the API, generated from the handlers and views.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// [`openapi`] as pretty JSON with a final newline: the text of `crates/zone/openapi.json`.
pub fn openapi_pretty_json() -> String {
    let mut text = openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
