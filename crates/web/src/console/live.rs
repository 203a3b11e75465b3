//! Live deploy progress: a pool page's nodes, sent again as server-sent events while the
//! page is open, and the one small script that puts them in place. Without JavaScript the
//! page is whole as served; reloading it shows the same as the stream would.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio_stream::wrappers::ReceiverStream;

use super::model::{Current, Frame, Section};
use super::{Cx, PageResult, pool_and_nodes, views};

/// How often a stream looks at the pool again.
const EVERY: Duration = Duration::from_secs(2);

/// How long one stream lasts; the browser's `EventSource` then opens a new one, which the
/// edge checks like any request. A stream reads as the person it was opened for, so this
/// bounds how long it outlives a sign-out or a revoked token.
const LIFETIME: Duration = Duration::from_secs(60);

/// Finds every element with `data-live` and replaces its content with each `progress`
/// event's HTML (rendered and escaped by the server, from the same view as the page).
const SCRIPT: &str = "\
document.querySelectorAll('[data-live]').forEach(function (el) {\n\
  if (!window.EventSource) { return; }\n\
  var source = new EventSource(el.getAttribute('data-live'));\n\
  source.addEventListener('progress', function (event) { el.innerHTML = event.data; });\n\
});\n";

/// The script.
pub fn script() -> Response {
    let mut response = (StatusCode::OK, SCRIPT).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `…/pools/<pool>/live`: the pool's nodes every [`EVERY`] while they change, as `progress`
/// events. Readable by whoever may read the pool (the API's check, each time).
pub(super) async fn stream(cx: &Cx<'_>, current: &Current, pool: &str) -> PageResult {
    let api = cx.api.clone();
    // The first read answers the request: a person who may not see the pool gets the
    // API's refusal, not an empty stream.
    pool_and_nodes(&api, current, pool)
        .await
        .map_err(|e| cx.refused(&e))?;
    let frame = Frame {
        section: Section::Pools,
        ..cx.frame(Section::Pools, Some(current.clone())).await?
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(2);
    let current = current.clone();
    let pool = pool.to_string();
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut last = String::new();
        while started.elapsed() < LIFETIME {
            let Ok((view, nodes)) = pool_and_nodes(&api, &current, &pool).await else {
                break;
            };
            let html = views::pool_progress(&frame, &view, &nodes).into_string();
            if html != last {
                if tx
                    .send(Ok(Event::default().event("progress").data(html.clone())))
                    .await
                    .is_err()
                {
                    break;
                }
                last = html;
            }
            tokio::time::sleep(EVERY).await;
            if tx.is_closed() {
                break;
            }
        }
    });
    let mut response = Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
