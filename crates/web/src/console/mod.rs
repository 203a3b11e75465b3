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
mod context;
pub mod forms;
mod live;
mod members;
mod mesh;
pub mod model;
mod nodes;
mod pools;
mod projects;
mod providers;
mod tokens;
mod usage;
pub mod views;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use self::api::ZoneApi;
use self::api::{ApiAs, ApiRefusal};
use self::context::*;
use self::members::*;
use self::mesh::*;
use self::model::{
    Current, FieldErrors, Frame, MembersPage, PoolPage, PoolsPage, ProjectsPage, ProviderCard,
    ProvidersPage, ReconfigurePage, Section, TokensPage, UnpricedNode, UsagePage, WizardInput,
    WizardPage,
};
pub use self::nodes::exec_result;
use self::nodes::*;
use self::pools::*;
use self::projects::*;
use self::providers::*;
use self::tokens::*;
use self::usage::*;
pub use self::usage::{unpriced_nodes, usage_model};
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
        || path == views::LIVE_SCRIPT_PATH
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
    if path == views::LIVE_SCRIPT_PATH {
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
