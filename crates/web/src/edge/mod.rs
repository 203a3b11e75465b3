//! The access edge: the zone's HTTPS reverse proxy in front of pools' http endpoints.
//!
//! A pool's endpoint is reached as `<project>--<pool>[-<endpoint>][-<slot>].<org>.<domain>`
//! (`orc_access::names`); the zone's own pages (sign-in, sign-out, the list of what a person
//! may open) are on `<domain>` itself. For every request to an endpoint the edge:
//! 1. finds who asks: the session cookie a sign-in set, or `Authorization: Bearer <API
//!    token>` (scripts and the CLI); nobody gets the sign-in page (a browser) or a 401;
//! 2. reads the name against the org's pools, and checks the right `access_service` on the
//!    pool's project: project owners and members, and `sys` org owners and members
//!    ([`orc_zone_model::access::project_role_in`] at least member). Viewers get a 403; a person
//!    with no role there gets the same 404 as a name that leads nowhere;
//! 3. drops every header the client sent that the app must not trust or see
//!    (`X-Orc-Access-Assertion`, `Authorization` when it carried the token, the session
//!    cookie, hop-by-hop headers), adds `X-Forwarded-*` and one freshly signed access
//!    assertion (ES256, audience `<project>/<pool>/<endpoint>`, lifetime
//!    [`EdgeConfig::assertion_lifetime`]);
//! 4. forwards the request to the slot's address ([`EndpointDirectory`]; without a slot
//!    part, the lowest slot that answers) and streams the answer back (server-sent events
//!    included), dropping any `Set-Cookie` for the session cookie.
//!
//! Every answer carries [`STRICT_TRANSPORT_SECURITY`] (https only, for the domain and every
//! name under it, all of which the edge serves over TLS).
//!
//! Sessions live in the store ([`EdgeStore::web_session`]), so every controller of
//! a zone honours them; the cookie is `__Secure-orc_session`, `Domain=<domain>`, `Secure`,
//! `HttpOnly`, `SameSite=Lax`. Sign-in takes an API token or a user name and password;
//! failed sign-ins are limited per client address.
//!
//! Must not import the hub or the reconcilers; it reads the store, signs with the zone's
//! access keys and asks an [`EndpointDirectory`] where slots listen.

mod certs;
mod identity;
mod pages;
mod proxy;
mod recent;
mod services;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use orc_access::names::{self, EdgeName, EdgePool, NameError};

pub use certs::EdgeCerts;
pub use identity::SESSION_COOKIE;
pub use services::{NoPrivateServices, PrivateReplica, PrivateServices};

use crate::visitor::{Person, from_own_pages};

use crate::access_keys::AccessKeys;
use crate::model::{Name, Org, Pool, Project, Role, Timestamp};
use crate::store::{EdgeStore, StoreFailure};
use orc_zone_model::access::{project_role_in, rank};
pub use orc_zone_model::endpoints::{EndpointDirectory, host_url};
pub use orc_zone_model::session::SessionPolicy;

/// Default address of the edge.
pub const DEFAULT_EDGE_ADDR: &str = "127.0.0.1:7443";
/// Default zone domain of `orc up` (an org's zone is `<org>.orc.localhost`).
pub const DEFAULT_DOMAIN: &str = "orc.localhost";

/// How the edge runs.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Where it listens (port 0 picks a free port).
    pub addr: SocketAddr,
    /// The zone domain: its pages are at `https://<domain>`, an org's endpoints under
    /// `<org>.<domain>`.
    pub domain: String,
    /// The port in the URLs the edge writes (redirects, links); `None`: the listen port.
    /// Set it when a load balancer in front listens elsewhere (443).
    pub public_port: Option<u16>,
    /// How long sessions last.
    pub sessions: SessionPolicy,
    /// How long an assertion the edge adds holds (at most 300 s).
    pub assertion_lifetime: Duration,
    /// Failed sign-ins allowed per client address per minute.
    pub sign_in_failures_per_minute: u32,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 7443)),
            domain: DEFAULT_DOMAIN.to_string(),
            public_port: None,
            sessions: SessionPolicy::default(),
            assertion_lifetime: Duration::from_secs(120),
            sign_in_failures_per_minute: 10,
        }
    }
}

type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What every request of the edge shares.
#[derive(Clone)]
pub struct EdgeState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn EdgeStore>,
    keys: Arc<AccessKeys>,
    endpoints: Arc<dyn EndpointDirectory>,
    /// Apps' private services and the way to their replicas.
    services: Arc<dyn PrivateServices>,
    /// The zone's web URL, written as `iss` in assertions.
    issuer: String,
    domain: String,
    /// The port the edge's URLs carry.
    port: u16,
    config: EdgeConfig,
    clock: Clock,
    client: proxy::Client,
    sign_ins: identity::SignInLimiter,
    /// Who a credential belongs to, by the credential's hash.
    people: recent::Recent<Person>,
    /// An org's pools that serve http endpoints, by org name.
    orgs: recent::Recent<Option<OrgPools>>,
    /// The web console on the edge's own host, when the zone runs one.
    console: Option<crate::console::Console>,
}

/// An org and its pools that serve http endpoints, with their projects.
#[derive(Debug, Clone)]
struct OrgPools {
    org: Org,
    pools: Vec<(Project, Pool)>,
    /// Its apps' private services.
    services: Vec<services::OrgService>,
}

impl std::fmt::Debug for EdgeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeState")
            .field("domain", &self.inner.domain)
            .field("issuer", &self.inner.issuer)
            .finish_non_exhaustive()
    }
}

impl EdgeState {
    /// An edge over `store` that signs with `keys` as `issuer` (the zone's web URL) and
    /// finds slots through `endpoints`; `port` is the port its URLs carry.
    pub fn new(
        store: Arc<dyn EdgeStore>,
        keys: Arc<AccessKeys>,
        endpoints: Arc<dyn EndpointDirectory>,
        issuer: String,
        config: EdgeConfig,
        port: u16,
    ) -> EdgeState {
        let port = config.public_port.unwrap_or(port);
        EdgeState {
            inner: Arc::new(Inner {
                store,
                keys,
                endpoints,
                issuer,
                domain: config.domain.to_ascii_lowercase(),
                port,
                sign_ins: identity::SignInLimiter::new(config.sign_in_failures_per_minute),
                config,
                clock: Arc::new(Timestamp::now),
                client: proxy::client(),
                services: Arc::new(NoPrivateServices),
                people: recent::Recent::new(recent::PERSON_TTL_MS),
                orgs: recent::Recent::new(recent::ORG_TTL_MS),
                console: None,
            }),
        }
    }

    /// Times come from this clock (tests move it).
    pub fn with_clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.clock = Arc::new(clock);
        }
        self
    }

    /// Apps' private services, reached through `services`.
    pub fn with_services(mut self, services: Arc<dyn PrivateServices>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.services = services;
        }
        self
    }

    /// The web console on the edge's own host, over the zone's API.
    pub fn with_console(mut self, console: crate::console::Console) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.console = Some(console);
        }
        self
    }

    fn now(&self) -> Timestamp {
        (self.inner.clock)()
    }

    /// The edge's own URL: `https://<domain>[:port]`.
    pub fn url(&self) -> String {
        host_url(&self.inner.domain, self.inner.port)
    }

    /// The URL of a host under the domain.
    fn url_of(&self, host: &str) -> String {
        host_url(host, self.inner.port)
    }

    /// The port the edge's URLs carry (its public port).
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// The zone domain, lower case.
    pub fn domain(&self) -> &str {
        &self.inner.domain
    }
}

/// The edge's routes: everything goes through [`handle`], which looks at the host first.
pub fn router(state: EdgeState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// Serves the edge on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: EdgeState,
    options: orc_tls::ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let options = orc_tls::ServeOptions {
        what: "access edge",
        http2_only: false,
        ..options
    };
    orc_tls::serve(listener, router(state), options, shutdown).await
}

/// How long an ended or expired session stays in the store before [`sweep_sessions`]
/// deletes it.
pub const ENDED_SESSIONS_KEPT: Duration = Duration::from_secs(24 * 3600);

/// Every `every`, deletes the sessions that ended or expired more than
/// [`ENDED_SESSIONS_KEPT`] ago, so the table holds live sessions and a day of history.
/// Runs until its task is dropped; several controllers sweeping at once is harmless.
pub async fn sweep_sessions(store: Arc<dyn EdgeStore>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let before = Timestamp::now()
            .plus_millis(-i64::try_from(ENDED_SESSIONS_KEPT.as_millis()).unwrap_or(i64::MAX));
        match store.delete_old_web_sessions(before).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "old sessions of the access edge deleted"),
            Err(e) => {
                tracing::warn!(error = %e, "old sessions could not be deleted; trying again later")
            }
        }
    }
}

/// The host a request names (HTTP/1 `Host`, HTTP/2 `:authority`), lower case, no port.
fn request_host(request: &Request) -> Option<String> {
    let raw = request.uri().host().map(str::to_string).or_else(|| {
        request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    })?;
    let host = match raw.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or("").to_string(),
        None => raw.split(':').next().unwrap_or("").to_string(),
    };
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

fn client_ip(request: &Request) -> Option<IpAddr> {
    request
        .extensions()
        .get::<orc_tls::PeerAddr>()
        .map(|peer| peer.0.ip())
}

/// What every answer of the edge carries: browsers are to reach the domain and every name
/// under it over https only, for a year. The names under the domain are the edge's own (each
/// an app it serves over TLS, never in clear), and the session cookie goes to all of them,
/// so the policy covers them too (`includeSubDomains`); the domain must be the zone's alone.
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000; includeSubDomains";

async fn handle(State(edge): State<EdgeState>, request: Request) -> Response {
    let mut response = answer(&edge, request).await;
    response.headers_mut().insert(
        header::STRICT_TRANSPORT_SECURITY,
        HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
    );
    response
}

/// The answer to a request of the edge: one of its own pages, or an endpoint's.
async fn answer(edge: &EdgeState, request: Request) -> Response {
    let Some(host) = request_host(&request) else {
        return pages::refusal(
            StatusCode::BAD_REQUEST,
            "No host name",
            "The request names no host; open an endpoint by its name under this zone.",
            None,
        );
    };
    if host == edge.inner.domain {
        return own_page(edge, request).await;
    }
    if !host.ends_with(&format!(".{}", edge.inner.domain)) {
        return pages::refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "Not a name of this zone",
            &format!(
                "This edge serves names under {}; {host} is not one of them.",
                edge.inner.domain
            ),
            None,
        );
    }
    let result = endpoint_request(edge, &host, request).await;
    result.unwrap_or_else(|refused| refused)
}

/// The zone's own pages on `<domain>`: sign-in, sign-out, the list of endpoints and the
/// web console.
async fn own_page(edge: &EdgeState, request: Request) -> Response {
    let path = request.uri().path().to_string();
    if let Some(console) = &edge.inner.console
        && crate::console::owns_path(&path)
    {
        return console_page(edge, console, request).await;
    }
    match (request.method().clone(), path.as_str()) {
        (Method::GET, "/") => home(edge, request).await,
        (Method::GET, "/sign-in") => {
            let next = query_value(&request, "next");
            let next = next.and_then(|n| edge.next_target(&n));
            pages::sign_in(&edge.url(), next.as_deref(), None, StatusCode::OK)
        }
        (Method::POST, "/sign-in") => identity::sign_in(edge, request).await,
        (Method::POST, "/sign-out") => identity::sign_out(edge, request).await,
        (Method::GET | Method::HEAD, "/healthz") => (StatusCode::OK, "ok\n").into_response(),
        (Method::GET, orc_access::JWKS_PATH) => jwks(edge).await,
        _ => pages::refusal(
            StatusCode::NOT_FOUND,
            "Not found",
            "The zone's pages here are sign-in, sign-out, the list of your endpoints and the \
             console.",
            Some(&edge.url()),
        ),
    }
}

/// A console page for whoever is signed in; a browser that is not goes to the sign-in page
/// and comes back after.
async fn console_page(
    edge: &EdgeState,
    console: &crate::console::Console,
    request: Request,
) -> Response {
    let person = match identity::identify(edge, request.headers(), request.extensions()).await {
        Ok(Some(person)) => person,
        Ok(None) => {
            let domain = edge.inner.domain.clone();
            return identity::ask_to_sign_in(edge, &domain, &request);
        }
        Err(e) => return e,
    };
    crate::console::handle(console, &edge.url(), person, request).await
}

/// The access keys' JWKS, as the API publishes it, so a zone whose web URL is the edge's
/// (`--web-url https://<domain>`) publishes its keys on that same origin.
async fn jwks(edge: &EdgeState) -> Response {
    match edge.inner.keys.jwks(edge.now()).await {
        Ok(document) => (
            [
                (header::CACHE_CONTROL, "public, max-age=60"),
                (header::CONTENT_TYPE, "application/json"),
            ],
            document.to_string(),
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "the access edge could not read the access keys");
            pages::refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again shortly",
                "The zone could not read its keys right now.",
                None,
            )
        }
    }
}

fn query_value(request: &Request, name: &str) -> Option<String> {
    let query = request.uri().query()?;
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

impl EdgeState {
    /// Where a sign-in may send the browser afterwards, if `next` is such a place: only
    /// https URLs of this edge (its domain or a name under it), so the form is no open
    /// redirect, and only text that is whole as it stands: a `next` holding a control
    /// character (a line break would end the `Location` header) is no place. The URL comes
    /// back as the URL parser writes it, so it always makes a valid header.
    fn next_target(&self, next: &str) -> Option<String> {
        if next.chars().any(char::is_control) {
            return None;
        }
        let url = url::Url::parse(next).ok()?;
        let port_ok = url.port_or_known_default() == Some(self.port());
        let host_ok = url.host_str().is_some_and(|h| {
            let h = h.to_ascii_lowercase();
            h == self.inner.domain || h.ends_with(&format!(".{}", self.inner.domain))
        });
        let allowed = url.scheme() == "https" && host_ok && port_ok && url.username().is_empty();
        allowed.then(|| url.to_string())
    }
}

/// The page a signed-in person sees on the zone's own host: who they are, and every
/// endpoint they may open.
async fn home(edge: &EdgeState, request: Request) -> Response {
    let person = match identity::identify(edge, request.headers(), request.extensions()).await {
        Ok(Some(person)) => person,
        Ok(None) => {
            return Redirect::to(&format!("{}/sign-in", edge.url())).into_response();
        }
        Err(e) => return e,
    };
    match reachable_endpoints(edge, &person).await {
        Ok(list) => pages::home(&edge.url(), &person, &list, edge.inner.console.is_some()),
        Err(e) => store_failure(&e),
    }
}

/// An endpoint a person may open, for the home page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reachable {
    pub pool: String,
    pub endpoint: String,
    pub url: String,
}

async fn reachable_endpoints(
    edge: &EdgeState,
    person: &Person,
) -> Result<Vec<Reachable>, StoreFailure> {
    let store = edge.inner.store.as_ref();
    let mut list = Vec::new();
    for org in store.orgs().await? {
        for project in store.projects(&org.id).await? {
            if !may_open(project_role_in(&person.memberships, &project)) {
                continue;
            }
            let pools = http_pools(store, &project).await?;
            for pool in &pools {
                for name in names::names_of(&edge_pool(&project, pool)) {
                    if name.slot.is_some() {
                        continue;
                    }
                    let endpoint = endpoint_of(&name, pool).unwrap_or_default();
                    list.push(Reachable {
                        pool: format!("{}/{}/{}", org.name, project.name, pool.name),
                        endpoint,
                        url: format!(
                            "{}/",
                            edge.url_of(&name.host(org.name.as_str(), &edge.inner.domain))
                        ),
                    });
                }
            }
            // Apps' private services, named as a pool `<app>-<service>` would be.
            let services = match edge.inner.services.private_services(&project.id).await {
                Ok(services) => services,
                Err(error) => {
                    tracing::warn!(project = %project.id, %error, "a project's private services cannot be read");
                    Vec::new()
                }
            };
            for (app, service) in services {
                let name = EdgeName {
                    project: project.name.to_string(),
                    pool: format!("{app}-{service}"),
                    endpoint: None,
                    slot: None,
                };
                list.push(Reachable {
                    pool: format!("{}/{}/{app} (app)", org.name, project.name),
                    endpoint: service,
                    url: format!(
                        "{}/",
                        edge.url_of(&name.host(org.name.as_str(), &edge.inner.domain))
                    ),
                });
            }
        }
    }
    Ok(list)
}

/// Whether a role in a project carries `access_service`.
fn may_open(role: Option<Role>) -> bool {
    role.is_some_and(|r| rank(r) >= rank(Role::Member))
}

async fn http_pools(store: &dyn EdgeStore, project: &Project) -> Result<Vec<Pool>, StoreFailure> {
    Ok(store
        .pools(&project.id)
        .await?
        .into_iter()
        .filter(|p| !p.deleting && !p.spec.http_endpoints().is_empty())
        .collect())
}

fn edge_pool(project: &Project, pool: &Pool) -> EdgePool {
    EdgePool {
        project: project.name.to_string(),
        pool: pool.name.to_string(),
        endpoints: pool.spec.http_endpoints(),
        slots: pool.size,
    }
}

/// The endpoint a name leads to: the one it names, or the pool's only one.
fn endpoint_of(name: &EdgeName, pool: &Pool) -> Option<String> {
    name.endpoint
        .clone()
        .or_else(|| pool.spec.http_endpoints().into_iter().next())
}

/// The same answer for a name that leads nowhere and one the person may not know of.
fn no_endpoint(edge: &EdgeState, host: &str) -> Response {
    pages::refusal(
        StatusCode::NOT_FOUND,
        "No endpoint here",
        &format!(
            "{host} leads to no endpoint you may open. Endpoint names are \
             <project>--<pool>[-<endpoint>][-<slot>].<org>.{}.",
            edge.inner.domain
        ),
        Some(&edge.url()),
    )
}

fn store_failure(error: &StoreFailure) -> Response {
    tracing::warn!(error = %error, "the access edge could not read the store");
    pages::refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again shortly",
        "The zone could not look this up right now.",
        None,
    )
}

/// A request to a pool's endpoint: who, where, may they, then forward.
async fn endpoint_request(
    edge: &EdgeState,
    host: &str,
    request: Request,
) -> Result<Response, Response> {
    let (org_name, label) = names::split_host(host, &edge.inner.domain).map_err(|e| {
        pages::refusal(
            StatusCode::NOT_FOUND,
            "No endpoint here",
            &e.to_string(),
            Some(&edge.url()),
        )
    })?;
    let person = match identity::identify(edge, request.headers(), request.extensions()).await? {
        Some(person) => person,
        None => return Ok(identity::ask_to_sign_in(edge, host, &request)),
    };
    let Some(OrgPools {
        org,
        pools,
        services,
    }) = org_pools(edge, &org_name)
        .await
        .map_err(|e| store_failure(&e))?
    else {
        return Err(no_endpoint(edge, host));
    };
    // A private service reads as a pool named `<app>-<service>` with one endpoint.
    let edge_pools: Vec<EdgePool> = pools
        .iter()
        .map(|(project, pool)| edge_pool(project, pool))
        .chain(services.iter().map(|s| EdgePool {
            project: s.project.name.to_string(),
            pool: s.label(),
            endpoints: Vec::new(),
            slots: 0,
        }))
        .collect();
    let name = match names::resolve(org.name.as_str(), &label, &edge_pools) {
        Ok(name) => name,
        Err(NameError::Ambiguous { .. } | NameError::EndpointNeeded { .. })
            if !person.sees_org(&org) =>
        {
            return Err(no_endpoint(edge, host));
        }
        Err(e @ (NameError::Ambiguous { .. } | NameError::EndpointNeeded { .. })) => {
            return Err(pages::refusal(
                StatusCode::NOT_FOUND,
                "Which endpoint?",
                &e.to_string(),
                Some(&edge.url()),
            ));
        }
        Err(_) => return Err(no_endpoint(edge, host)),
    };
    if let Some(service) = services
        .into_iter()
        .find(|s| s.project.name.as_str() == name.project && s.label() == name.pool)
    {
        check_role(edge, host, &person, &org, &service.project).map_err(|e| *e)?;
        return service_request(edge, host, request, &person, &org, service).await;
    }
    let Some((project, pool)) = pools
        .into_iter()
        .find(|(p, pool)| p.name.as_str() == name.project && pool.name.as_str() == name.pool)
    else {
        return Err(no_endpoint(edge, host));
    };
    check_role(edge, host, &person, &org, &project).map_err(|e| *e)?;
    let endpoint = endpoint_of(&name, &pool).ok_or_else(|| no_endpoint(edge, host))?;
    let slots: Vec<(u32, SocketAddr)> = edge
        .inner
        .endpoints
        .http_endpoints(&pool.id)
        .into_iter()
        .filter(|(slot, e, _)| *e == endpoint && name.slot.is_none_or(|want| want == *slot))
        .map(|(slot, _, addr)| (slot, addr))
        .collect();
    if slots.is_empty() {
        let which = name
            .slot
            .map_or_else(|| "no slot".to_string(), |s| format!("slot {s}"));
        return Err(pages::refusal(
            StatusCode::BAD_GATEWAY,
            "Not serving right now",
            &format!(
                "Pool {}/{}/{} has {which} serving endpoint {endpoint} right now; it may be \
                 starting. Try again shortly.",
                org.name, project.name, pool.name
            ),
            Some(&edge.url()),
        ));
    }
    let audience = format!("{}/{}/{endpoint}", project.name, pool.name);
    let what = format!("{}/{}/{}", org.name, project.name, pool.name);
    let forward =
        forward_for(edge, host, &request, &person, &org, &audience, what).map_err(|e| *e)?;
    Ok(proxy::forward(edge, request, &slots, forward).await)
}

/// Whether `person` may open what `project` serves at the edge: a 404 for no role there (as
/// for a name that leads nowhere), a 403 for a viewer.
fn check_role(
    edge: &EdgeState,
    host: &str,
    person: &Person,
    org: &Org,
    project: &Project,
) -> Result<(), Box<Response>> {
    match project_role_in(&person.memberships, project) {
        None => Err(Box::new(no_endpoint(edge, host))),
        Some(role) if !may_open(Some(role)) => Err(Box::new(pages::refusal(
            StatusCode::FORBIDDEN,
            "Not for viewers",
            &format!(
                "Opening endpoints of project {}/{} needs the member or owner role there; \
                 you are {role}.",
                org.name, project.name
            ),
            Some(&edge.url()),
        ))),
        Some(_) => Ok(()),
    }
}

/// A request to an app's private service: to one of its ready replicas, through the node
/// that runs it.
async fn service_request(
    edge: &EdgeState,
    host: &str,
    request: Request,
    person: &Person,
    org: &Org,
    service: services::OrgService,
) -> Result<Response, Response> {
    let what = format!(
        "service {} of app {} in {}/{}",
        service.service, service.app, org.name, service.project.name
    );
    let replicas = edge
        .inner
        .services
        .replicas(&service.project.id, &service.app, &service.service)
        .await
        .map_err(|error| {
            tracing::warn!(%error, "a private service's replicas cannot be read");
            pages::refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again shortly",
                "The zone could not look this up right now.",
                None,
            )
        })?;
    if replicas.is_empty() {
        return Err(pages::refusal(
            StatusCode::BAD_GATEWAY,
            "Not serving right now",
            &format!("The {what} has no ready replica right now. Try again shortly."),
            Some(&edge.url()),
        ));
    }
    let audience = format!(
        "{}/{}/{}",
        service.project.name, service.app, service.service
    );
    let forward =
        forward_for(edge, host, &request, person, org, &audience, what).map_err(|e| *e)?;
    Ok(proxy::forward_to_replicas(edge, request, &replicas, forward).await)
}

/// What the edge adds to `request` as it forwards it for `person`: one assertion for
/// `audience`, and where the request came from; `what` names the destination in logs and
/// pages.
fn forward_for(
    edge: &EdgeState,
    host: &str,
    request: &Request,
    person: &Person,
    org: &Org,
    audience: &str,
    what: String,
) -> Result<proxy::Forward, Box<Response>> {
    let assertion = identity::assertion(edge, person, org, audience)?;
    Ok(proxy::Forward {
        host: host.to_string(),
        port: edge.port(),
        client: client_ip(request),
        assertion,
        drop_authorization: person.by_bearer,
        pool: what,
    })
}

/// An org's pools that serve http endpoints (kept for [`recent::ORG_TTL_MS`]); `None` when
/// there is no such org.
async fn org_pools(edge: &EdgeState, name: &str) -> Result<Option<OrgPools>, StoreFailure> {
    let now = edge.now();
    if let Some(kept) = edge.inner.orgs.get(name, now) {
        return Ok(kept);
    }
    let store = edge.inner.store.as_ref();
    let found = match org_named(store, name).await? {
        None => None,
        Some(org) => {
            let mut pools = Vec::new();
            let mut services = Vec::new();
            for project in store.projects(&org.id).await? {
                for pool in http_pools(store, &project).await? {
                    pools.push((project.clone(), pool));
                }
                match edge.inner.services.private_services(&project.id).await {
                    Ok(found) => services.extend(found.into_iter().map(|(app, service)| {
                        services::OrgService {
                            project: project.clone(),
                            app,
                            service,
                        }
                    })),
                    Err(error) => {
                        tracing::warn!(project = %project.id, %error, "a project's private services cannot be read");
                    }
                }
            }
            Some(OrgPools {
                org,
                pools,
                services,
            })
        }
    };
    edge.inner.orgs.put(name.to_string(), found.clone(), now);
    Ok(found)
}

async fn org_named(store: &dyn EdgeStore, name: &str) -> Result<Option<Org>, StoreFailure> {
    let Ok(name) = name.parse::<Name>() else {
        return Ok(None);
    };
    store.org_by_name(&name).await
}

/// Headers of a response that the edge's pages carry: no caching, no framing, no sniffing.
fn page_headers(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' https:; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
}

fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    page_headers(response.headers_mut());
    response
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}
