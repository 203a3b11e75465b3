//! The page's HTTP server: plain HTTP/1.1 on the loopback address the zone gives the slot
//! (the access edge terminates TLS in front of it), through the accept loop of `orc-tls`
//! (connection limit, header-read and idle timeouts).
//!
//! Routes, all behind the gate ([`super::gate`]):
//!
//! | path | view |
//! |---|---|
//! | `GET /` | Overview |
//! | `GET /config` | Config |
//! | `GET /children` | Children |
//! | `GET /quote?class=…&cpu=…&mem=…&arch=…&os=…&site=…&disks=…` | Quote preview |
//! | `GET /addresses` | Pool addresses |
//! | `GET /validate`, `POST /validate` (form) | Validate |
//! | `GET /events` | server-sent `status` events for the Overview |
//!
//! Every response is HTML (or the event stream) with `Cache-Control: no-store`, a content
//! security policy that allows only the page's own inline style and script (by hash) and
//! same-origin forms and events, `nosniff` and `no-referrer`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Form, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use orc_partner::admin::{forms, layout, views};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::IntervalStream;

use super::gate::{Gate, Turned};
use super::view::AdminView;

/// How often the event stream looks for a change.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(2);

/// The largest form the Validate view reads (four drafts of 64 KiB, form-encoded).
const MAX_FORM_BYTES: usize = 4 * 3 * 64 * 1024;

#[derive(Debug, Clone)]
struct PageServer {
    view: AdminView,
    gate: Arc<Gate>,
}

/// The router of the page over `view`, behind `gate`.
pub fn router(view: AdminView, gate: Arc<Gate>) -> Router {
    let state = PageServer { view, gate };
    Router::new()
        .route("/", get(overview))
        .route("/config", get(config))
        .route("/children", get(children))
        .route("/quote", get(quote_preview))
        .route("/addresses", get(addresses))
        .route("/validate", get(validate_blank).post(validate))
        .route("/events", get(events))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), gatekeeper))
        .layer(middleware::map_response(secure_headers))
        .with_state(state)
}

/// Serves the page on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    view: AdminView,
    gate: Arc<Gate>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let options = orc_tls::ServeOptions {
        what: "admin page",
        tls: None,
        max_connections: 64,
        // Only the access edge dials the page, so every connection comes from its address
        // and none marks itself authenticated: the per-source share and the reserve would
        // only take slots from the edge.
        max_connections_per_source: Some(64),
        reserved_for_authenticated: Some(0),
        ..orc_tls::ServeOptions::default()
    };
    orc_tls::serve(listener, router(view, gate), options, shutdown).await
}

fn now_secs(view: &AdminView) -> u64 {
    u64::try_from(view.now().millis() / 1000).unwrap_or(0)
}

async fn gatekeeper(State(server): State<PageServer>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    match server
        .gate
        .check(request.headers(), now_secs(&server.view))
        .await
    {
        Ok(assertion) => {
            tracing::debug!(sub = %assertion.sub, path, "admin page request");
            next.run(request).await
        }
        Err(Turned::Closed) => html(StatusCode::SERVICE_UNAVAILABLE, views::closed()),
        Err(Turned::NoZoneCa) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            views::refused(
                "The zone's CA (ORC_ZONE_CA_FILE) was not given to this replica, so it cannot fetch the access keys to check this request.",
            ),
        ),
        Err(Turned::Refused(refusal)) => {
            tracing::info!(path, reason = %refusal.reason, "The admin page refused a request");
            let status =
                StatusCode::from_u16(refusal.status.code()).unwrap_or(StatusCode::UNAUTHORIZED);
            html(status, views::refused(&refusal.reason))
        }
    }
}

/// The content security policy: the page's own inline style and script by their hashes,
/// events and forms to the same origin, nothing else.
static CSP: LazyLock<String> = LazyLock::new(|| {
    let hash = |text: &str| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
    };
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        hash(layout::STYLE),
        hash(views::LIVE_SCRIPT)
    )
});

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Ok(csp) = HeaderValue::from_str(&CSP) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    response
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn overview(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(StatusCode::OK, views::overview(&snapshot.page()))
}

async fn config(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(StatusCode::OK, views::config(&snapshot.page()))
}

async fn children(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(StatusCode::OK, views::children(&snapshot.page()))
}

async fn addresses(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(StatusCode::OK, views::addresses(&snapshot.page()))
}

async fn quote_preview(
    State(server): State<PageServer>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let query: BTreeMap<String, String> = pairs.into_iter().collect();
    let snapshot = server.view.snapshot();
    let page = snapshot.page();
    let (form, request) = forms::read_preview(&query, page.config, page.now);
    html(
        StatusCode::OK,
        views::quote_preview(&page, &form, request.as_ref()),
    )
}

async fn validate_blank(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(
        StatusCode::OK,
        views::validate(&snapshot.page(), &forms::ValidateForm::default()),
    )
}

async fn validate(
    State(server): State<PageServer>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> Response {
    let fields: BTreeMap<String, String> = pairs.into_iter().collect();
    let form = forms::read_validate(&fields);
    let snapshot = server.view.snapshot();
    html(StatusCode::OK, views::validate(&snapshot.page(), &form))
}

async fn not_found(State(server): State<PageServer>) -> Response {
    let snapshot = server.view.snapshot();
    html(StatusCode::NOT_FOUND, views::not_found(&snapshot.page()))
}

/// The Overview's live texts: a `status` event now and whenever they change, looked at every
/// [`EVENT_INTERVAL`].
async fn events(
    State(server): State<PageServer>,
) -> Sse<impl tokio_stream::Stream<Item = Result<Event, Infallible>>> {
    let view = server.view.clone();
    let mut last: Option<String> = None;
    let ticks = IntervalStream::new(tokio::time::interval(EVENT_INTERVAL));
    let stream = ticks.filter_map(move |_| {
        let snapshot = view.snapshot();
        let data = serde_json::to_string(&views::live_status(&snapshot.page())).ok()?;
        if last.as_ref() == Some(&data) {
            return None;
        }
        last = Some(data.clone());
        Some(Ok(Event::default().event("status").data(data)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
