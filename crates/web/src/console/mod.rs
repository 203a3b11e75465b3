//! The zone's web console, on the access edge's own host (`https://<domain>`): projects,
//! pools and their nodes, the request wizard, Resource Providers, usage, members and API
//! tokens, for a person signed in at the edge.
//!
//! Pages are rendered on the server from plain view models ([`model`]) by pure functions
//! ([`views`]), work with JavaScript off, and one small script ([`live`]) updates a pool's
//! nodes from server-sent events where it runs. Forms are read purely ([`forms`]).
//!
//! Invariants:
//! - every read and every change is a request to the zone's JSON API made in process on
//!   behalf of the person ([`api::ApiAs`]): the API's own checks decide what they may see
//!   and do, so a viewer's forged form post is refused exactly as `orc` would be;
//! - a request that changes something (any method but GET, HEAD, OPTIONS, TRACE) is taken
//!   only with the edge's own `Origin`, or without one only with `Sec-Fetch-Site:
//!   same-origin` (no other site, and no script replaying a cookie, can post one);
//! - no secret reaches a page, a log or a URL: a new API token's value is shown once, in the
//!   answer to the post that made it; a sensitive param is shown as set, never its value;
//! - where a node went (cloud, place, plan) shows only to members of org `sys`: the API
//!   leaves it out for everyone else.
//!
//! URLs are stable and name what they show: `/orgs`, `/orgs/<org>/members`,
//! `/orgs/<org>/projects/<project>/{pools,request,providers,usage}`,
//! `/orgs/<org>/projects/<project>/pools/<pool>[/delete|/reconfigure]`, `/tokens`.
//! `docs/console.md` describes every page.

pub mod api;
pub mod forms;
mod live;
pub mod model;
pub mod views;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use self::api::ZoneApi;
use self::api::{ApiAs, ApiRefusal};
use self::model::{
    Current, FieldErrors, Frame, MembersPage, PoolPage, PoolsPage, ProjectsPage, ProviderCard,
    ProvidersPage, ReconfigurePage, Section, TokensPage, UnpricedNode, UsagePage, WizardInput,
    WizardPage,
};
use crate::model::{ApiToken, Month, Role, Timestamp, TokenHash, TokenId};
use crate::visitor::{Person, from_own_pages};
use orc_zone_api_types::views::{
    CreateMembership, CreateToken, EventView, MembershipView, NewTokenView, NodeView, OrgView,
    PoolEndpointsView, PoolView, ProjectView, ProviderView, QuoteView, SetPricing, TokenView,
    UsageView, WhoAmIView,
};
use orc_zone_model::access::{Caller, zone_role_in};

/// The newest log lines of an app pool its page shows.
const LOG_LINES_SHOWN: usize = 200;

/// The largest form the console reads.
const MAX_FORM_BYTES: usize = 256 * 1024;

/// What the console needs: the API it calls on people's behalf, and the time.
#[derive(Clone)]
pub struct Console {
    api: Arc<dyn ZoneApi>,
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

impl Console {
    /// A console over the zone's `api`, reading the time from `clock`.
    pub fn new(
        api: Arc<dyn ZoneApi>,
        clock: impl Fn() -> Timestamp + Send + Sync + 'static,
    ) -> Console {
        Console {
            api,
            clock: Arc::new(clock),
        }
    }
}

/// Whether a path of the edge's own host is the console's.
pub fn owns_path(path: &str) -> bool {
    path == "/orgs"
        || path.starts_with("/orgs/")
        || path == "/tokens"
        || path.starts_with("/tokens/")
        || path == live::SCRIPT_PATH
}

/// A path segment, percent-encoded where it is not a plain name character.
pub fn seg(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unseg(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The API caller a signed-in person is: their token when they came with one (a bearer, or
/// a session made with a token), else the user with a stand-in token that only names the
/// session.
fn caller_of(person: &Person) -> Caller {
    let token = person.token.clone().unwrap_or_else(|| ApiToken {
        id: TokenId::from_counter(0),
        user_id: person.user.id.clone(),
        label: "web session".to_string(),
        hash: TokenHash::from_hex(&"0".repeat(64))
            .unwrap_or_else(|| crate::model::TokenSecret::from_presented(String::new()).hash()),
        created_at: person
            .session
            .as_ref()
            .map_or(Timestamp::from_unix_millis(0), |s| s.created_at),
        expires_at: None,
        revoked_at: None,
        service_pool: None,
        default_project: None,
    });
    Caller {
        user: person.user.clone(),
        token,
        memberships: person.memberships.clone(),
    }
}

/// A refusal in a bare frame (before the person is known).
fn plain_problem(status: StatusCode, title: &str, message: &str) -> Response {
    let frame = Frame {
        user: String::new(),
        zone_member: false,
        projects: Vec::new(),
        current: None,
        section: Section::Projects,
    };
    html(status, views::problem(&frame, title, message))
}

/// One request of a signed-in person to a console page.
pub async fn handle(
    console: &Console,
    edge_url: &str,
    person: Person,
    request: Request,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    if path == live::SCRIPT_PATH {
        return live::script();
    }
    if !from_own_pages(edge_url, &method, request.headers()) {
        return plain_problem(
            StatusCode::FORBIDDEN,
            "Not from here",
            "Console forms are taken only from the zone's own pages: this request named \
             another origin, or none.",
        );
    }
    let caller = caller_of(&person);
    let query = request.uri().query().unwrap_or("").to_string();
    let body = if method == Method::POST {
        match axum::body::to_bytes(request.into_body(), MAX_FORM_BYTES).await {
            Ok(body) => forms::pairs(&body),
            Err(_) => {
                return plain_problem(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Too large",
                    "The form was too large.",
                );
            }
        }
    } else {
        Vec::new()
    };
    let cx = Cx {
        console,
        api: ApiAs::new(console.api.clone(), caller.clone()),
        caller,
        me: tokio::sync::OnceCell::new(),
        query,
        body,
    };
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
        .map(unseg)
        .collect();
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    let result = match (&method, s.as_slice()) {
        (&Method::GET, ["orgs"]) => projects_page(&cx).await,
        (&Method::GET, ["orgs", "switch"]) => Ok(switch(&cx)),
        (&Method::GET, ["tokens"]) => tokens_page(&cx, None, FieldErrors::new(), None).await,
        (&Method::POST, ["tokens"]) => create_token(&cx).await,
        (&Method::POST, ["tokens", id, "revoke"]) => revoke_token(&cx, id).await,
        (&Method::GET, ["orgs", org, "members"]) => {
            members_page(&cx, org, FieldErrors::new(), None, StatusCode::OK).await
        }
        (&Method::POST, ["orgs", org, "members"]) => add_member(&cx, org).await,
        (&Method::POST, ["orgs", org, "members", id, "remove"]) => {
            remove_member(&cx, org, id).await
        }
        (_, ["orgs", org, "projects", project, rest @ ..]) => {
            project_request(&cx, &method, org, project, rest).await
        }
        _ => Err(not_found(&cx).await),
    };
    result.unwrap_or_else(|refused| refused)
}

/// What every handler shares for one request.
struct Cx<'a> {
    console: &'a Console,
    api: ApiAs,
    caller: Caller,
    /// The caller as the API describes them, once asked ([`Cx::me`]).
    me: tokio::sync::OnceCell<WhoAmIView>,
    query: String,
    body: Vec<(String, String)>,
}

type PageResult = Result<Response, Response>;

impl Cx<'_> {
    fn query_value(&self, name: &str) -> Option<String> {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&self.query)
            .ok()?
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    fn form(&self, name: &str) -> String {
        forms::value(&self.body, name).unwrap_or("").to_string()
    }

    /// Who the caller is to the API (`GET /api/whoami`): asked once per request.
    async fn me(&self) -> Result<&WhoAmIView, Response> {
        self.me
            .get_or_try_init(|| async {
                self.api
                    .get::<WhoAmIView>("/api/whoami")
                    .await
                    .map_err(|e| self.refused(&e))
            })
            .await
    }

    /// The frame of a page: who, the projects they may open, the current one.
    async fn frame(&self, section: Section, current: Option<Current>) -> Result<Frame, Response> {
        let me = self.me().await?;
        Ok(Frame {
            user: self.caller.user.name.to_string(),
            zone_member: me.zone_role.is_some(),
            projects: me.projects.iter().map(|p| p.project.clone()).collect(),
            current,
            section,
        })
    }

    /// The project `org/project` and the person's role there, as the API's access rules
    /// give it; the same "not found" as the API for a project they have no role in.
    async fn current(&self, org: &str, project: &str) -> Result<Current, Response> {
        let path = format!("/api/orgs/{}/projects/{}", seg(org), seg(project));
        let _: ProjectView = self.api.get(&path).await.map_err(|e| self.refused(&e))?;
        let wanted = format!("{org}/{project}");
        let access = self
            .me()
            .await?
            .projects
            .iter()
            .find(|p| p.project == wanted)
            .ok_or_else(|| self.refused(&not_found_refusal()))?;
        Ok(Current {
            org: org.to_string(),
            project: project.to_string(),
            role: access.role.clone(),
            org_wide: access.org_role.is_some(),
        })
    }

    /// A refusal of the API as a page (in a bare frame: no further look-ups).
    fn refused(&self, refusal: &ApiRefusal) -> Response {
        let frame = Frame {
            user: self.caller.user.name.to_string(),
            zone_member: zone_role_in(&self.caller.memberships).is_some(),
            projects: Vec::new(),
            current: None,
            section: Section::Projects,
        };
        let title = match refusal.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::FORBIDDEN => "Not allowed",
            _ => "Not done",
        };
        html(
            refusal.status,
            views::problem(&frame, title, &refusal.message),
        )
    }
}

fn not_found_refusal() -> ApiRefusal {
    ApiRefusal {
        status: StatusCode::NOT_FOUND,
        message: "There is no such page of the console, or nothing here you may see.".into(),
        field: None,
    }
}

async fn not_found(cx: &Cx<'_>) -> Response {
    cx.refused(&not_found_refusal())
}

/// Headers of every console page: no caching (pages can show a token once), no framing,
/// scripts and event streams from this host only.
fn console_headers(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    console_headers(response.headers_mut());
    response
}

/// `303 See Other` to a console path (after a form post, so a reload posts nothing).
fn see_other(path: &str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(value) = HeaderValue::from_str(path) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    console_headers(response.headers_mut());
    response
}

async fn projects_page(cx: &Cx<'_>) -> PageResult {
    let orgs: Vec<OrgView> = cx.api.get("/api/orgs").await.map_err(|e| cx.refused(&e))?;
    let mut list = Vec::new();
    for org in orgs {
        let projects: Vec<ProjectView> = cx
            .api
            .get(&format!("/api/orgs/{}/projects", seg(&org.name)))
            .await
            .map_err(|e| cx.refused(&e))?;
        let frame_projects: Vec<ProjectView> = projects;
        list.push((org, frame_projects));
    }
    let frame = cx.frame(Section::Projects, None).await?;
    let visible: Vec<(OrgView, Vec<ProjectView>)> = list
        .into_iter()
        .map(|(org, projects)| {
            let projects = projects
                .into_iter()
                .filter(|p| frame.projects.contains(&format!("{}/{}", org.name, p.name)))
                .collect();
            (org, projects)
        })
        .collect();
    Ok(html(
        StatusCode::OK,
        views::projects(&frame, &ProjectsPage { orgs: visible }),
    ))
}

fn switch(cx: &Cx<'_>) -> Response {
    match cx
        .query_value("to")
        .as_deref()
        .and_then(|t| t.split_once('/'))
    {
        Some((org, project)) => see_other(&format!(
            "/orgs/{}/projects/{}/pools",
            seg(org),
            seg(project)
        )),
        None => see_other("/orgs"),
    }
}

async fn project_request(
    cx: &Cx<'_>,
    method: &Method,
    org: &str,
    project: &str,
    rest: &[&str],
) -> PageResult {
    let current = cx.current(org, project).await?;
    match (method, rest) {
        (&Method::GET, []) => Ok(see_other(&format!("{}/pools", current.url()))),
        (&Method::GET, ["pools"]) => pools_page(cx, current).await,
        (&Method::GET, ["request"]) => {
            let input: WizardInput = serde_urlencoded::from_str(&cx.query).unwrap_or_default();
            wizard_page(cx, current, input, false).await
        }
        (&Method::POST, ["request"]) => {
            let input: WizardInput = serde_urlencoded::from_str(
                &serde_urlencoded::to_string(&cx.body).unwrap_or_default(),
            )
            .unwrap_or_default();
            wizard_page(cx, current, input, true).await
        }
        (&Method::GET, ["pools", pool]) => {
            pool_page(cx, current, pool, None, FieldErrors::new(), None).await
        }
        (&Method::GET, ["pools", pool, "live"]) => live::stream(cx, &current, pool).await,
        (&Method::GET, ["pools", pool, "nodes", node]) => {
            node_page(cx, current, pool, node, NodeExtras::default()).await
        }
        (&Method::POST, ["pools", pool, "nodes", node, "exec"]) => {
            run_command(cx, current, pool, node).await
        }
        (&Method::POST, ["pools", pool, "nodes", node, "join-token"]) => {
            mint_join_token(cx, current, pool, node).await
        }
        (&Method::POST, ["pools", pool, "resize"]) => resize(cx, current, pool).await,
        (&Method::GET, ["pools", pool, "delete"]) => {
            let view = pool_view(cx, &current, pool).await?;
            let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
            Ok(html(
                StatusCode::OK,
                views::delete_confirm(&frame, &current, &view),
            ))
        }
        (&Method::POST, ["pools", pool, "delete"]) => {
            let path = format!("{}/pools/{}", api_project(&current), seg(pool));
            cx.api
                .send_empty(Method::DELETE, &path)
                .await
                .map_err(|e| cx.refused(&e))?;
            Ok(see_other(&format!("{}/pools/{}", current.url(), seg(pool))))
        }
        (&Method::GET, ["apps"]) => {
            let package = cx.query_value("package").unwrap_or_default();
            app_pool_page(cx, current, package, None).await
        }
        (&Method::POST, ["apps"]) => run_app(cx, current).await,
        (&Method::GET, ["pools", pool, "reconfigure"]) => {
            reconfigure_page(cx, current, pool, None).await
        }
        (&Method::POST, ["pools", pool, "reconfigure"]) => reconfigure(cx, current, pool).await,
        (&Method::GET, ["providers"]) => {
            providers_page(cx, current, BTreeMap::new(), None, StatusCode::OK).await
        }
        (&Method::POST, ["providers", provider, action @ ("scope" | "pricing")]) => {
            change_provider(cx, current, provider, action).await
        }
        (&Method::GET, ["usage"]) => usage_page(cx, current).await,
        (&Method::GET, ["mesh"]) => mesh_page(cx, current, MeshExtras::default()).await,
        (&Method::POST, ["mesh"]) => connect_workstation(cx, current).await,
        (&Method::POST, ["mesh", "workstations", name, "remove"]) => {
            let path = format!("{}/mesh/workstations/{}", api_project(&current), seg(name));
            cx.api
                .send_empty(Method::DELETE, &path)
                .await
                .map_err(|e| cx.refused(&e))?;
            Ok(see_other(&format!("{}/mesh", current.url())))
        }
        _ => Err(not_found(cx).await),
    }
}

/// `/api/orgs/<org>/projects/<project>`.
fn api_project(current: &Current) -> String {
    format!(
        "/api/orgs/{}/projects/{}",
        seg(&current.org),
        seg(&current.project)
    )
}

async fn pools_page(cx: &Cx<'_>, current: Current) -> PageResult {
    let pools: Vec<PoolView> = cx
        .api
        .get(&format!("{}/pools", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        StatusCode::OK,
        views::pools(&frame, &current, &PoolsPage { pools }),
    ))
}

async fn pool_view(cx: &Cx<'_>, current: &Current, pool: &str) -> Result<PoolView, Response> {
    cx.api
        .get(&format!("{}/pools/{}", api_project(current), seg(pool)))
        .await
        .map_err(|e| cx.refused(&e))
}

/// A pool's view and nodes, as the live updates read them too.
async fn pool_and_nodes(
    api: &ApiAs,
    current: &Current,
    pool: &str,
) -> Result<(PoolView, Vec<NodeView>), ApiRefusal> {
    let base = format!("{}/pools/{}", api_project(current), seg(pool));
    let view: PoolView = api.get(&base).await?;
    let nodes: Vec<NodeView> = api.get(&format!("{base}/nodes")).await?;
    Ok((view, nodes))
}

async fn pool_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    resize_to: Option<String>,
    errors: FieldErrors,
    notice: Option<String>,
) -> PageResult {
    let (view, nodes) = pool_and_nodes(&cx.api, &current, pool)
        .await
        .map_err(|e| cx.refused(&e))?;
    let events: Vec<EventView> = cx
        .api
        .get(&format!(
            "{}/events?pool={}&limit=50&newest=true",
            api_project(&current),
            seg(pool)
        ))
        .await
        .unwrap_or_default();
    let endpoints: Option<PoolEndpointsView> = if view.endpoints.is_empty() {
        None
    } else {
        cx.api
            .get(&format!(
                "{}/pools/{}/endpoints",
                api_project(&current),
                seg(pool)
            ))
            .await
            .ok()
    };
    let log_level = cx
        .query_value("level")
        .filter(|l| matches!(l.as_str(), "error" | "warn" | "info" | "debug" | "trace"))
        .unwrap_or_else(|| "info".to_string());
    let logs: Option<Vec<orc_zone_api_types::views::LogLineView>> = if view.app.is_some() {
        cx.api
            .get(&format!(
                "{}/pools/{}/logs?level={log_level}",
                api_project(&current),
                seg(pool)
            ))
            .await
            .ok()
            .map(|mut lines: Vec<orc_zone_api_types::views::LogLineView>| {
                let keep = lines.len().saturating_sub(LOG_LINES_SHOWN);
                lines.drain(..keep);
                lines
            })
    } else {
        None
    };
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    let page = PoolPage {
        logs,
        log_level,
        resize_to: resize_to.unwrap_or_else(|| view.size.to_string()),
        pool: view,
        nodes,
        events,
        endpoints,
        errors,
        notice,
    };
    Ok(html(status, views::pool(&frame, &current, &page)))
}

async fn resize(cx: &Cx<'_>, current: Current, pool: &str) -> PageResult {
    let typed = cx.form("size");
    let mut errors = FieldErrors::new();
    let Some(size) = forms::size(&mut errors, &typed, 0) else {
        return pool_page(cx, current, pool, Some(typed), errors, None).await;
    };
    let path = format!("{}/pools/{}/resize", api_project(&current), seg(pool));
    let answer: Result<PoolView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &path,
            &orc_zone_api_types::views::ResizePool { size },
        )
        .await;
    match answer {
        Ok(_) => Ok(see_other(&format!("{}/pools/{}", current.url(), seg(pool)))),
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            errors.insert(e.field.unwrap_or_else(|| "size".into()), e.message);
            pool_page(cx, current, pool, Some(typed), errors, None).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

async fn wizard_page(
    cx: &Cx<'_>,
    current: Current,
    input: WizardInput,
    create: bool,
) -> PageResult {
    let providers: Vec<ProviderView> = cx
        .api
        .get(&format!("{}/providers", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    // Pools on `core` run apps; the wizard requests nodes.
    let providers: Vec<ProviderView> = providers
        .into_iter()
        .filter(|p| p.name != orc_zone_model::CORE_PROVIDER_NAME)
        .collect();
    let mut page = WizardPage {
        providers,
        input,
        errors: FieldErrors::new(),
        quote: None,
        quote_problem: None,
    };
    let catalog = page.chosen().and_then(|p| p.catalog.clone());
    let mut status = StatusCode::OK;
    if create {
        match forms::create_pool(&page.input, catalog.as_ref()) {
            Err(errors) => page.errors = errors,
            Ok(body) => {
                let path = format!("{}/pools", api_project(&current));
                let answer: Result<PoolView, ApiRefusal> =
                    cx.api.send(Method::POST, &path, &body).await;
                match answer {
                    Ok(pool) => {
                        return Ok(see_other(&format!(
                            "{}/pools/{}",
                            current.url(),
                            seg(&pool.name)
                        )));
                    }
                    Err(e)
                        if e.status.is_client_error()
                            && e.status != StatusCode::FORBIDDEN
                            && e.status != StatusCode::NOT_FOUND =>
                    {
                        page.errors
                            .insert(e.field.unwrap_or_else(|| "form".into()), e.message);
                    }
                    Err(e) => return Err(cx.refused(&e)),
                }
            }
        }
        status = StatusCode::BAD_REQUEST;
    } else if page.input.quote == "1" && current.writes() {
        match forms::quote_request(&page.input, catalog.as_ref()) {
            Err(errors) => {
                page.errors = errors;
                status = StatusCode::BAD_REQUEST;
            }
            Ok(body) => {
                let path = format!("{}/quote", api_project(&current));
                let answer: Result<QuoteView, ApiRefusal> =
                    cx.api.send(Method::POST, &path, &body).await;
                match answer {
                    Ok(quote) => page.quote = Some(quote),
                    Err(e) => match e.field {
                        Some(field) => {
                            page.errors.insert(field, e.message);
                            status = StatusCode::BAD_REQUEST;
                        }
                        None => page.quote_problem = Some(e.message),
                    },
                }
                let mut size_errors = FieldErrors::new();
                if forms::size(&mut size_errors, &page.input.size, 1).is_none()
                    || page.input.name.trim().is_empty()
                {
                    // A quote is an answer; what is still missing for the request shows too.
                    page.errors.extend(size_errors);
                    if page.input.name.trim().is_empty() {
                        page.errors
                            .insert("name".into(), "Name the pool to request it.".into());
                    }
                    if page.quote.as_ref().is_some_and(|q| q.outcome == "offer") {
                        page.quote_problem = Some(
                            "Fill in the size and the pool's name, then get the quote again to request it."
                                .into(),
                        );
                        page.quote = page.quote.take().map(|mut q| {
                            q.outcome = "offer-incomplete".into();
                            q
                        });
                    }
                }
            }
        }
    }
    let frame = cx.frame(Section::Request, Some(current.clone())).await?;
    Ok(html(status, views::wizard(&frame, &current, &page)))
}

async fn reconfigure_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    failed: Option<(Vec<model::ParamField>, FieldErrors)>,
) -> PageResult {
    let view = pool_view(cx, &current, pool).await?;
    let Some(app) = &view.app else {
        return Err(cx.refused(&ApiRefusal {
            status: StatusCode::NOT_FOUND,
            message: format!("Pool {} runs no app, so it has no params.", view.path),
            field: None,
        }));
    };
    let (params, errors, status) = match failed {
        Some((fields, errors)) => (fields, errors, StatusCode::BAD_REQUEST),
        None => (
            shown_params(cx, app).await,
            FieldErrors::new(),
            StatusCode::OK,
        ),
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        status,
        views::reconfigure(
            &frame,
            &current,
            &ReconfigurePage {
                pool: view,
                params,
                errors,
            },
        ),
    ))
}

async fn reconfigure(cx: &Cx<'_>, current: Current, pool: &str) -> PageResult {
    let view = pool_view(cx, &current, pool).await?;
    let Some(app) = &view.app else {
        return Err(not_found(cx).await);
    };
    let shown = shown_params(cx, app).await;
    let form = match forms::reconfigure(&shown, &cx.body) {
        Ok(form) => form,
        Err(failed) => return reconfigure_page(cx, current, pool, Some(failed)).await,
    };
    let body = forms::reconfigure_request(&form);
    let path = format!("{}/pools/{}/reconfigure", api_project(&current), seg(pool));
    let answer: Result<PoolView, ApiRefusal> = cx.api.send(Method::POST, &path, &body).await;
    match answer {
        Ok(_) => Ok(see_other(&format!("{}/pools/{}", current.url(), seg(pool)))),
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "form".into()), e.message);
            reconfigure_page(cx, current, pool, Some((form.fields, errors))).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

/// The manifest of `package` (`org/name:tag`) as the registry holds it for the person, and
/// its package's digest: the package the tag names, or the one with `digest`.
async fn manifest_of(
    cx: &Cx<'_>,
    package: &str,
    digest: Option<&str>,
) -> Option<crate::registry::AppManifest> {
    let (org, rest) = package.split_once('/')?;
    let (name, tag) = rest.split_once(':').unwrap_or((rest, "latest"));
    let detail: orc_zone_api_types::views::RegistryAppDetail = cx
        .api
        .get(&format!("/api/orgs/{}/apps/{}", seg(org), seg(name)))
        .await
        .ok()?;
    detail
        .packages
        .into_iter()
        .find(|p| match digest {
            Some(d) => p.digest == d,
            None => p.tags.iter().any(|t| t == tag),
        })
        .map(|p| p.manifest)
}

/// The pool form's fields for an app pool: as its package's manifest declares them, or as
/// the pool holds them when the registry has no manifest for it.
async fn shown_params(
    cx: &Cx<'_>,
    app: &orc_zone_api_types::views::AppView,
) -> Vec<model::ParamField> {
    match manifest_of(cx, &app.package, app.digest.as_deref()).await {
        Some(manifest) => {
            forms::manifest_fields(&manifest.params, &app.params, &app.sensitive_params)
        }
        None => forms::param_fields(&app.params, &app.sensitive_params),
    }
}

async fn app_pool_page(
    cx: &Cx<'_>,
    current: Current,
    package: String,
    failed: Option<(Vec<model::ParamField>, FieldErrors)>,
) -> PageResult {
    let mut orgs = vec![current.org.clone()];
    if current.org != "sys" {
        orgs.push("sys".to_string());
    }
    let mut packages = Vec::new();
    for org in orgs {
        let apps: Vec<orc_zone_api_types::views::RegistryAppView> = cx
            .api
            .get(&format!("/api/orgs/{}/apps", seg(&org)))
            .await
            .unwrap_or_default();
        for app in apps {
            packages.extend(app.tags.into_iter().map(|t| t.package));
        }
    }
    packages.sort();
    let manifest = if package.is_empty() {
        None
    } else {
        manifest_of(cx, &package, None).await
    };
    let mut errors = FieldErrors::new();
    if !package.is_empty() && manifest.is_none() && failed.is_none() {
        errors.insert(
            "app".into(),
            format!("The registry holds no package {package} that you may run."),
        );
    }
    let (params, status) = match failed {
        Some((fields, failed_errors)) => {
            errors.extend(failed_errors);
            (fields, StatusCode::BAD_REQUEST)
        }
        None => (
            manifest
                .as_ref()
                .map(|m| forms::manifest_fields(&m.params, &BTreeMap::new(), &[]))
                .unwrap_or_default(),
            if errors.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            },
        ),
    };
    let page = model::AppPoolPage {
        packages,
        package: if manifest.is_some() || status == StatusCode::BAD_REQUEST {
            package
        } else {
            String::new()
        },
        description: manifest.map(|m| m.description).unwrap_or_default(),
        params,
        name: cx.form("name"),
        size: {
            let typed = cx.form("size");
            if typed.is_empty() { "1".into() } else { typed }
        },
        errors,
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(status, views::app_pool(&frame, &current, &page)))
}

async fn run_app(cx: &Cx<'_>, current: Current) -> PageResult {
    let package = cx.form("package");
    let Some(manifest) = manifest_of(cx, &package, None).await else {
        return app_pool_page(cx, current, package, None).await;
    };
    let shown = forms::manifest_fields(&manifest.params, &BTreeMap::new(), &[]);
    let form = match forms::reconfigure(&shown, &cx.body) {
        Ok(form) => form,
        Err(failed) => return app_pool_page(cx, current, package, Some(failed)).await,
    };
    let body = match forms::app_pool(&package, &cx.form("name"), &cx.form("size"), &form) {
        Ok(body) => body,
        Err(errors) => {
            return app_pool_page(cx, current, package, Some((form.fields, errors))).await;
        }
    };
    let path = format!("{}/pools", api_project(&current));
    let answer: Result<PoolView, ApiRefusal> = cx.api.send(Method::POST, &path, &body).await;
    match answer {
        Ok(pool) => Ok(see_other(&format!(
            "{}/pools/{}",
            current.url(),
            seg(&pool.name)
        ))),
        Err(e)
            if e.status.is_client_error()
                && e.status != StatusCode::FORBIDDEN
                && e.status != StatusCode::NOT_FOUND =>
        {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "app".into()), e.message);
            app_pool_page(cx, current, package, Some((form.fields, errors))).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

async fn providers_page(
    cx: &Cx<'_>,
    current: Current,
    errors: BTreeMap<String, FieldErrors>,
    notice: Option<String>,
    status: StatusCode,
) -> PageResult {
    let providers: Vec<ProviderView> = cx
        .api
        .get(&format!("{}/providers", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let mut cards = Vec::new();
    for p in providers {
        let sites: Vec<orc_zone_api_types::views::SiteView> = cx
            .api
            .get(&format!(
                "{}/providers/{}/sites",
                api_project(&current),
                seg(&p.name)
            ))
            .await
            .unwrap_or_default();
        cards.push(ProviderCard {
            home: p.project == current.path(),
            errors: errors.get(&p.name).cloned().unwrap_or_default(),
            sites,
            provider: p,
        });
    }
    let frame = cx.frame(Section::Providers, Some(current.clone())).await?;
    let page = ProvidersPage {
        cards,
        notice,
        operator: cx.caller.is_operator(),
    };
    Ok(html(status, views::providers(&frame, &current, &page)))
}

async fn change_provider(
    cx: &Cx<'_>,
    current: Current,
    provider: &str,
    action: &str,
) -> PageResult {
    let base = format!("{}/providers/{}", api_project(&current), seg(provider));
    let (answer, field, notice): (Result<ProviderView, ApiRefusal>, &str, String) = if action
        == "scope"
    {
        let scope = cx.form("scope");
        let body = orc_zone_api_types::views::ChangeScope {
            scope: scope.clone(),
        };
        let shown = if scope == "zone" {
            "Global"
        } else {
            "this project"
        };
        (
            cx.api
                .send(Method::POST, &format!("{base}/change-scope"), &body)
                .await,
            "scope",
            format!("Provider {provider} is now visible to {shown}."),
        )
    } else {
        let markup = cx.form("markup").trim().to_string();
        if markup.is_empty() {
            (
                cx.api.call_delete(&format!("{base}/pricing")).await,
                "markup",
                format!(
                    "Provider {provider} has no pricing strategy now: its new nodes are unpriced."
                ),
            )
        } else {
            let body = SetPricing {
                markup: Some(markup.clone()),
            };
            (
                cx.api
                    .send(Method::PUT, &format!("{base}/pricing"), &body)
                    .await,
                "markup",
                format!(
                    "Provider {provider} now prices with a markup of {markup}, for nodes admitted from now on."
                ),
            )
        }
    };
    match answer {
        Ok(_) => providers_page(cx, current, BTreeMap::new(), Some(notice), StatusCode::OK).await,
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            let mut errors = BTreeMap::new();
            let mut card = FieldErrors::new();
            card.insert(field.to_string(), e.message);
            errors.insert(provider.to_string(), card);
            providers_page(cx, current, errors, None, StatusCode::BAD_REQUEST).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

async fn usage_page(cx: &Cx<'_>, current: Current) -> PageResult {
    let now = (cx.console.clock)();
    let month = match cx.query_value("month") {
        Some(m) => m,
        None => crate::pricing::month_of(now).to_string(),
    };
    let usage: UsageView = cx
        .api
        .get(&format!(
            "{}/usage?month={}",
            api_project(&current),
            seg(&month)
        ))
        .await
        .map_err(|e| cx.refused(&e))?;
    let parsed: Month = usage
        .month
        .parse()
        .unwrap_or_else(|_| crate::pricing::month_of(now));
    let pools: Vec<PoolView> = cx
        .api
        .get(&format!("{}/pools", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    // Every pool's nodes at once: one API request each, read side by side.
    let mut reads = tokio::task::JoinSet::new();
    for (index, pool) in pools.iter().enumerate() {
        let api = cx.api.clone();
        let path = format!(
            "{}/pools/{}/nodes?include_ended=true",
            api_project(&current),
            seg(&pool.name)
        );
        reads.spawn(async move { (index, api.get::<Vec<NodeView>>(&path).await) });
    }
    let mut by_pool: Vec<Option<Vec<NodeView>>> = vec![None; pools.len()];
    while let Some(read) = reads.join_next().await {
        let Ok((index, nodes)) = read else {
            return Err(plain_problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Try again shortly",
                "The pools' nodes could not be read.",
            ));
        };
        by_pool[index] = Some(nodes.map_err(|e| cx.refused(&e))?);
    }
    let mut unpriced = Vec::new();
    for (pool, nodes) in pools.iter().zip(by_pool) {
        unpriced.extend(unpriced_nodes(
            pool,
            &nodes.unwrap_or_default(),
            &parsed,
            now,
        ));
    }
    let page = usage_model(usage, unpriced, &parsed);
    let frame = cx.frame(Section::Usage, Some(current.clone())).await?;
    Ok(html(StatusCode::OK, views::usage(&frame, &current, &page)))
}

/// The nodes of a pool that ran unpriced in `month`, with their node-hours in it.
pub fn unpriced_nodes(
    pool: &PoolView,
    nodes: &[NodeView],
    month: &Month,
    now: Timestamp,
) -> Vec<UnpricedNode> {
    let (start, end) = month_bounds(month);
    nodes
        .iter()
        .filter(|n| n.price.is_none() && n.site.is_some())
        .filter_map(|n| {
            let from = n.created_at.max(start);
            let until = n.ended_at.unwrap_or(now.millis()).min(end);
            (until > from).then(|| UnpricedNode {
                pool: pool.name.clone(),
                node: n.id.clone(),
                line: views::price_line(pool),
                hours: views::decimal_text(
                    &(rust_decimal::Decimal::from(until - from)
                        / rust_decimal::Decimal::from(3_600_000))
                    .to_string(),
                ),
                running: n.ended_at.is_none() && n.state == "running",
            })
        })
        .collect()
}

/// The first and last millisecond (exclusive) of a month, UTC.
fn month_bounds(month: &Month) -> (i64, i64) {
    use chrono::{Datelike, NaiveDate};
    let text = month.to_string();
    let first =
        NaiveDate::parse_from_str(&format!("{text}-01"), "%Y-%m-%d").unwrap_or(NaiveDate::MIN);
    let next = if first.month() == 12 {
        NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
    }
    .unwrap_or(NaiveDate::MAX);
    let millis = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0)
            .map_or(0, |t| t.and_utc().timestamp_millis())
    };
    (millis(first), millis(next))
}

fn shift_month(month: &Month, by: i32) -> String {
    let text = month.to_string();
    let (y, m) = text.split_once('-').unwrap_or(("1970", "01"));
    let index = y.parse::<i32>().unwrap_or(1970) * 12 + m.parse::<i32>().unwrap_or(1) - 1 + by;
    format!(
        "{:04}-{:02}",
        index.div_euclid(12),
        index.rem_euclid(12) + 1
    )
}

/// The usage page's model: the API's lines, the unpriced nodes, node-hours of both.
pub fn usage_model(usage: UsageView, unpriced: Vec<UnpricedNode>, month: &Month) -> UsagePage {
    use std::str::FromStr;
    let mut hours = rust_decimal::Decimal::ZERO;
    for line in &usage.lines {
        if line.description != crate::pricing::PUBLIC_IPV4_LINE {
            hours += rust_decimal::Decimal::from_str(&line.hours).unwrap_or_default();
        }
    }
    for n in &unpriced {
        hours += rust_decimal::Decimal::from_str(&n.hours).unwrap_or_default();
    }
    UsagePage {
        usage,
        unpriced,
        node_hours: views::decimal_text(&hours.to_string()),
        previous: shift_month(month, -1),
        next: shift_month(month, 1),
    }
}

async fn members_page(
    cx: &Cx<'_>,
    org: &str,
    errors: FieldErrors,
    notice: Option<String>,
    status: StatusCode,
) -> PageResult {
    let memberships: Vec<MembershipView> = cx
        .api
        .get(&format!("/api/orgs/{}/memberships", seg(org)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let projects: Vec<ProjectView> = cx
        .api
        .get(&format!("/api/orgs/{}/projects", seg(org)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let owns_in_org = cx
        .me()
        .await?
        .memberships
        .iter()
        .any(|m| m.org == org && m.role == Role::Owner.to_string());
    let manages = owns_in_org || cx.caller.is_operator();
    let frame = cx.frame(Section::Members, None).await?;
    let page = MembersPage {
        org: org.to_string(),
        memberships,
        projects: projects.into_iter().map(|p| p.name).collect(),
        manages,
        errors,
        notice,
    };
    Ok(html(status, views::members(&frame, &page)))
}

async fn add_member(cx: &Cx<'_>, org: &str) -> PageResult {
    let project = cx.form("project");
    let body = CreateMembership {
        user: cx.form("user").trim().to_string(),
        role: cx.form("role"),
        project: (!project.is_empty()).then_some(project),
    };
    let answer: Result<MembershipView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &format!("/api/orgs/{}/memberships", seg(org)),
            &body,
        )
        .await;
    match answer {
        Ok(m) => {
            let notice = format!(
                "{} is now {} of {}.",
                m.user,
                m.role,
                m.project.unwrap_or(m.org)
            );
            members_page(cx, org, FieldErrors::new(), Some(notice), StatusCode::OK).await
        }
        Err(e) if e.status.is_client_error() && e.status != StatusCode::FORBIDDEN => {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "user".into()), e.message);
            members_page(cx, org, errors, None, StatusCode::BAD_REQUEST).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

async fn remove_member(cx: &Cx<'_>, org: &str, id: &str) -> PageResult {
    cx.api
        .send_empty(
            Method::DELETE,
            &format!("/api/orgs/{}/memberships/{}", seg(org), seg(id)),
        )
        .await
        .map_err(|e| cx.refused(&e))?;
    Ok(see_other(&format!("/orgs/{}/members", seg(org))))
}

async fn tokens_page(
    cx: &Cx<'_>,
    created: Option<NewTokenView>,
    errors: FieldErrors,
    notice: Option<String>,
) -> PageResult {
    let user = cx.caller.user.name.to_string();
    let tokens: Vec<TokenView> = cx
        .api
        .get(&format!("/api/users/{}/tokens", seg(&user)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let frame = cx.frame(Section::Tokens, None).await?;
    let page = TokensPage {
        user,
        tokens,
        created: created.map(|c| (c.token, c.value)),
        errors,
        notice,
    };
    Ok(html(status, views::tokens(&frame, &page)))
}

async fn create_token(cx: &Cx<'_>) -> PageResult {
    let user = cx.caller.user.name.to_string();
    let body = CreateToken {
        label: cx.form("label").trim().to_string(),
        expires_at: None,
        project: None,
    };
    let mut errors = FieldErrors::new();
    if body.label.is_empty() {
        errors.insert("label".into(), "Label the token.".into());
        return tokens_page(cx, None, errors, None).await;
    }
    let answer: Result<NewTokenView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &format!("/api/users/{}/tokens", seg(&user)),
            &body,
        )
        .await;
    match answer {
        Ok(created) => tokens_page(cx, Some(created), errors, None).await,
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            errors.insert(e.field.unwrap_or_else(|| "label".into()), e.message);
            tokens_page(cx, None, errors, None).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

async fn revoke_token(cx: &Cx<'_>, id: &str) -> PageResult {
    let user = cx.caller.user.name.to_string();
    cx.api
        .send_empty(
            Method::DELETE,
            &format!("/api/users/{}/tokens/{}", seg(&user), seg(id)),
        )
        .await
        .map_err(|e| cx.refused(&e))?;
    tokens_page(
        cx,
        None,
        FieldErrors::new(),
        Some(format!("Token {id} is revoked.")),
    )
    .await
}

/// What a node's page shows besides the node: a token just minted, a command's result,
/// and the forms' values and problems.
#[derive(Default)]
struct NodeExtras {
    created: Option<orc_zone_api_types::views::CreatedJoinToken>,
    exec: Option<model::ExecResult>,
    command: String,
    timeout: String,
    ttl: String,
    errors: FieldErrors,
    status: Option<StatusCode>,
}

/// The node `node` of `pool`, as the API shows it to the person.
async fn node_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    node: &str,
    extras: NodeExtras,
) -> PageResult {
    let (_, nodes) = pool_and_nodes(&cx.api, &current, pool)
        .await
        .map_err(|e| cx.refused(&e))?;
    let Some(found) = nodes.into_iter().find(|n| n.id == node) else {
        return Err(cx.refused(&ApiRefusal {
            status: StatusCode::NOT_FOUND,
            message: format!("pool {}/{pool} has no live node {node}", current.path()),
            field: None,
        }));
    };
    let tokens: Vec<orc_zone_api_types::views::JoinTokenView> = cx
        .api
        .get(&format!(
            "{}/nodes/{}/join-tokens",
            api_project(&current),
            seg(node)
        ))
        .await
        .unwrap_or_default();
    let page = model::NodePage {
        pool: pool.to_string(),
        node: found,
        tokens,
        created: extras.created,
        command: extras.command,
        timeout: if extras.timeout.is_empty() {
            "60".into()
        } else {
            extras.timeout
        },
        ttl: if extras.ttl.is_empty() {
            "3600".into()
        } else {
            extras.ttl
        },
        exec: extras.exec,
        errors: extras.errors,
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        extras.status.unwrap_or(StatusCode::OK),
        views::node(&frame, &current, &page),
    ))
}

/// Output a node's page shows of one stream.
const EXEC_SHOWN_BYTES: usize = 64 * 1024;

/// Runs the form's command on the node's agent and shows what it printed.
async fn run_command(cx: &Cx<'_>, current: Current, pool: &str, node: &str) -> PageResult {
    let mut extras = NodeExtras {
        command: cx.form("command"),
        timeout: cx.form("timeout"),
        ..NodeExtras::default()
    };
    let argv = forms::command(&mut extras.errors, &extras.command);
    let timeout = forms::exec_timeout(&mut extras.errors, &extras.timeout);
    let (Some(argv), Some(timeout)) = (argv, timeout) else {
        extras.status = Some(StatusCode::BAD_REQUEST);
        return node_page(cx, current, pool, node, extras).await;
    };
    let path = format!("{}/nodes/{}/exec", api_project(&current), seg(node));
    let body = orc_zone_api_types::views::ExecRequest {
        argv: argv.clone(),
        timeout_seconds: Some(timeout),
    };
    match cx.api.send_raw(Method::POST, &path, &body).await {
        Ok(bytes) => extras.exec = Some(exec_result(argv, &bytes)),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "command".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    node_page(cx, current, pool, node, extras).await
}

/// An exec's lines (`application/x-ndjson`) as what each stream printed and how it ended.
pub fn exec_result(argv: Vec<String>, ndjson: &[u8]) -> model::ExecResult {
    use base64::Engine as _;
    let mut result = model::ExecResult {
        argv,
        ..model::ExecResult::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for line in ndjson.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<orc_zone_api_types::views::ExecLine>(line) {
            Ok(orc_zone_api_types::views::ExecLine::Output { stream, data }) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .unwrap_or_default();
                let target = if stream == "stderr" {
                    &mut err
                } else {
                    &mut out
                };
                let room = EXEC_SHOWN_BYTES.saturating_sub(target.len());
                if bytes.len() > room {
                    result.truncated = true;
                }
                target.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok(orc_zone_api_types::views::ExecLine::Exit { code, error }) => {
                result.code = code;
                result.error = error;
            }
            Err(_) => result.error = Some("the agent's answer could not be read".into()),
        }
    }
    result.stdout = String::from_utf8_lossy(&out).into_owned();
    result.stderr = String::from_utf8_lossy(&err).into_owned();
    result
}

/// Mints a join token for the node and shows its secret this once.
async fn mint_join_token(cx: &Cx<'_>, current: Current, pool: &str, node: &str) -> PageResult {
    let mut extras = NodeExtras {
        ttl: cx.form("ttl"),
        ..NodeExtras::default()
    };
    let Some(ttl) = forms::join_ttl(&mut extras.errors, &extras.ttl) else {
        extras.status = Some(StatusCode::BAD_REQUEST);
        return node_page(cx, current, pool, node, extras).await;
    };
    let path = format!("{}/nodes/{}/join-tokens", api_project(&current), seg(node));
    let body = orc_zone_api_types::views::CreateJoinToken {
        ttl_seconds: Some(ttl),
        product_uuid: None,
    };
    match cx.api.send(Method::POST, &path, &body).await {
        Ok(created) => extras.created = Some(created),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "ttl".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    node_page(cx, current, pool, node, extras).await
}

/// What the mesh page shows besides the mesh.
#[derive(Default)]
struct MeshExtras {
    connected: Option<orc_zone_api_types::views::ConnectedWorkstation>,
    name: String,
    public_key: String,
    errors: FieldErrors,
    status: Option<StatusCode>,
}

async fn mesh_page(cx: &Cx<'_>, current: Current, extras: MeshExtras) -> PageResult {
    let mesh: orc_zone_api_types::views::MeshView = cx
        .api
        .get(&format!("{}/mesh", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let page = model::MeshPage {
        mesh,
        connected: extras.connected,
        name: extras.name,
        public_key: extras.public_key,
        errors: extras.errors,
    };
    let frame = cx.frame(Section::Mesh, Some(current.clone())).await?;
    Ok(html(
        extras.status.unwrap_or(StatusCode::OK),
        views::mesh(&frame, &current, &page),
    ))
}

/// Puts a workstation on the project's mesh with the public key given.
async fn connect_workstation(cx: &Cx<'_>, current: Current) -> PageResult {
    let mut extras = MeshExtras {
        name: cx.form("name").trim().to_string(),
        public_key: cx.form("public_key").trim().to_string(),
        ..MeshExtras::default()
    };
    let body = orc_zone_api_types::views::ConnectWorkstation {
        name: extras.name.clone(),
        public_key: extras.public_key.clone(),
    };
    let path = format!("{}/mesh/workstations", api_project(&current));
    match cx.api.send(Method::POST, &path, &body).await {
        Ok(connected) => extras.connected = Some(connected),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "name".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    mesh_page(cx, current, extras).await
}
