//! The partner's read-only admin page, served on the partner pool's `admin` endpoint.
//!
//! - [`view`]: [`AdminView`], the page's read-only view of the replica's state;
//! - [`gate`]: the check of the edge's access assertion on every request;
//! - [`server`]: the routes, the HTML responses and the live updates (server-sent events).
//!
//! The HTML itself is rendered by the pure crate (`orc_partner::admin`).
//!
//! Read-only by construction: the handlers in [`server`] hold only an [`AdminView`] (and the
//! gate). Its field is private to [`view`], and its methods take `&self` and answer copies:
//! the config by shared reference (it never changes after start), and a [`view::Snapshot`]
//! of the catalogs, the quote state, what the inventory passes saw and the role. The views of
//! `orc_partner::admin` take those copies by shared reference. So a page request can neither
//! call a cloud (the view hands out no client), nor reserve capacity (a preview quotes over a
//! copy of the quote state and `quote` takes it by `&`), nor change a param. The page suite
//! also checks it at run time: the quote state, the catalogs, what the passes saw and the
//! clouds' request counts are the same after every view, previews and validations included.
//!
//! Keys never reach a response: the config's keys are `Secret`s that the views never read
//! (they show only whether a key is set), and refusals carry the verifier's reason, which
//! never repeats the token.

pub mod gate;
pub mod server;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use orc_tls::PinnedCa;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use gate::Gate;
pub use view::AdminView;

/// Starts the page on `addr` (a task of the current runtime) when the zone gave this slot an
/// admin endpoint. A param it cannot use or an address it cannot bind is logged as an error
/// naming it, and the provider goes on without a page. Logs once when the page is closed
/// (no `access_keys_url`).
pub async fn launch(
    addr: Option<SocketAddr>,
    view: AdminView,
    zone_ca: Option<&PinnedCa>,
) -> Option<JoinHandle<()>> {
    if view.config().access_keys_url.is_none() {
        tracing::warn!(
            "The admin page is closed: set the param access_keys_url to https://<zone web url>/.well-known/orc-access/jwks.json to open it"
        );
    }
    let Some(addr) = addr else {
        tracing::info!(
            "No admin page: the zone gave this slot no admin endpoint ({} is not set)",
            crate::env::ADMIN_ADDR_VAR
        );
        return None;
    };
    let gate = match Gate::from_config(view.config(), zone_ca) {
        Ok(gate) => Arc::new(gate),
        Err(e) => {
            tracing::error!(error = %e, "The admin page cannot check requests; it is not served");
            return None;
        }
    };
    if matches!(*gate, Gate::NoZoneCa) {
        tracing::error!(
            "The admin page cannot fetch the access keys: ORC_ZONE_CA_FILE is not set; every request is refused"
        );
    }
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!(%addr, error = %e, "The admin page could not bind its address {addr}; the provider goes on without it");
            return None;
        }
    };
    tracing::info!(%addr, "The admin page listens on {addr}");
    let loader = gate.clone();
    let now = u64::try_from(view.now().millis() / 1000).unwrap_or(0);
    tokio::spawn(async move { loader.load_keys(now).await });
    Some(tokio::spawn(async move {
        if let Err(e) = server::serve(listener, view, gate, std::future::pending()).await {
            tracing::error!(%addr, error = %e, "The admin page stopped serving {addr}");
        }
    }))
}
