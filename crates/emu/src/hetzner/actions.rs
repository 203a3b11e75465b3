//! Actions: starting them (with the control API's "fail the next action" switch) and the
//! endpoints that read them back.
//!
//! `GET /actions` requires at least one `id` (listing every action was removed from the
//! API); ids that are unknown are simply absent from the answer, which is one unpaginated
//! list without `meta`, as the API describes it. The per-resource lists are paginated.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use super::pagination::{ListQuery, SortValue, page_of, sort_items};
use super::world::Action;
use super::{Account, ApiError, ApiResult, Ctx, Hs, IdAndName, PathId, ok};
use axum::extract::State;
use std::sync::Arc;

/// Resource families whose actions have their own list endpoints, with the `type` their
/// actions name and the word used in errors.
const FAMILIES: [(&str, &str, &str); 6] = [
    ("servers", "server", "server"),
    ("primary_ips", "primary_ip", "primary IP"),
    ("floating_ips", "floating_ip", "floating IP"),
    ("networks", "network", "network"),
    ("volumes", "volume", "volume"),
    ("images", "image", "image"),
];

const SORT_FIELDS: [&str; 5] = ["id", "command", "status", "started", "finished"];

impl Ctx<'_> {
    /// Starts an action taking `duration` of emulated time. Returns its id and whether it
    /// will end in error (the control API's next-action failures are consumed here).
    pub fn start_action(
        &mut self,
        command: &'static str,
        resources: Vec<(u64, &'static str)>,
        duration: Duration,
    ) -> (u64, bool) {
        let fails = self.hz.core.faults().take_action_failure();
        let id = self.ids.action();
        let finishes = self.after(duration);
        self.world.actions.insert(
            id,
            Action {
                id,
                command,
                started: self.now,
                finishes,
                fails,
                resources,
            },
        );
        (id, fails)
    }

    /// An action as JSON, read at the current time.
    pub fn action_json(&self, id: u64) -> Value {
        self.world
            .actions
            .get(&id)
            .map(|a| a.to_json(self.now))
            .unwrap_or(Value::Null)
    }

    /// `now + d`, saturating.
    pub fn after(&self, d: Duration) -> DateTime<Utc> {
        TimeDelta::from_std(d)
            .ok()
            .and_then(|d| self.now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// `423 locked` if an action on this resource is running.
    pub fn ensure_unlocked(&self, kind: &'static str, id: u64) -> Result<(), ApiError> {
        if self.world.locked(kind, id, self.now) {
            Err(ApiError::locked(&kind.replace('_', " ")))
        } else {
            Ok(())
        }
    }
}

fn sorted_page(ctx: &Ctx<'_>, q: &ListQuery, mut actions: Vec<&Action>) -> ApiResult {
    let sorts = q.sort(&SORT_FIELDS)?;
    let statuses = q.all_of("status", &["running", "success", "error"])?;
    let now = ctx.now;
    actions.retain(|a| statuses.is_empty() || statuses.iter().any(|s| s == a.status(now)));
    sort_items(&mut actions, &sorts, |a, f| sort_value(a, f, now));
    page_of(
        q,
        "actions",
        actions.iter().map(|a| a.to_json(now)).collect(),
    )
}

fn sort_value(a: &Action, field: &str, now: DateTime<Utc>) -> SortValue {
    match field {
        "command" => SortValue::Text(a.command.to_string()),
        "status" => SortValue::Text(a.status(now).to_string()),
        "started" => SortValue::Time(a.started),
        "finished" => SortValue::Time(a.finishes),
        _ => SortValue::Int(a.id),
    }
}

fn parse_ids(q: &ListQuery) -> Result<Vec<u64>, ApiError> {
    q.all("id")
        .into_iter()
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_query(format!("invalid action id '{s}'")))
        })
        .collect()
}

/// `GET /actions?id=…`.
pub(crate) async fn list_by_id(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let ids = parse_ids(&q)?;
    if ids.is_empty() {
        return Err(ApiError::bad_query(
            "the id parameter is required: listing all actions is no longer supported",
        )
        .with_details(
            json!({"fields": [{"name": "id", "messages": ["Missing data for required field."]}]}),
        ));
    }
    let sorts = q.sort(&SORT_FIELDS)?;
    hz.with_world(&account, |ctx| {
        let mut actions: Vec<&Action> = ids
            .iter()
            .filter_map(|id| ctx.world.actions.get(id))
            .collect();
        let now = ctx.now;
        sort_items(&mut actions, &sorts, |a, f| sort_value(a, f, now));
        actions.dedup_by_key(|a| a.id);
        ok(json!({"actions": actions.iter().map(|a| a.to_json(now)).collect::<Vec<_>>()}))
    })
}

/// `GET /actions/{id}`.
pub(crate) async fn get_one(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        let action = ctx
            .world
            .actions
            .get(&id)
            .ok_or_else(|| ApiError::not_found("action", id))?;
        ok(json!({"action": action.to_json(ctx.now)}))
    })
}

fn exists(ctx: &Ctx<'_>, kind: &str, id: u64) -> bool {
    let w = &ctx.world;
    match kind {
        "server" => w.servers.contains_key(&id),
        "primary_ip" => w.primary_ips.contains_key(&id),
        "floating_ip" => w.floating_ips.contains_key(&id),
        "network" => w.networks.contains_key(&id),
        "volume" => w.volumes.contains_key(&id),
        "image" => ctx.hz.catalog.image_by_id(id).is_some(),
        _ => false,
    }
}

/// Adds `GET /{family}/actions`, `/{family}/actions/{id}`, `/{family}/{id}/actions` and
/// `/{family}/{id}/actions/{action_id}` for every family.
pub(crate) fn resource_action_routes(
    mut router: Router<Arc<super::Hz>>,
    v1: &dyn Fn(&str) -> String,
) -> Router<Arc<super::Hz>> {
    for (path, kind, word) in FAMILIES {
        router = router
            .route(
                &v1(&format!("/{path}/actions")),
                get(move |State(hz): Hs, account: Account, q: ListQuery| async move {
                    let ids = parse_ids(&q)?;
                    hz.with_world(&account, |ctx| {
                        let actions = ctx
                            .world
                            .actions
                            .values()
                            .filter(|a| a.resources.iter().any(|(_, k)| *k == kind))
                            .filter(|a| ids.is_empty() || ids.contains(&a.id))
                            .collect();
                        sorted_page(ctx, &q, actions)
                    })
                }),
            )
            .route(
                &v1(&format!("/{path}/actions/{{id}}")),
                get(move |State(hz): Hs, account: Account, PathId(id): PathId| async move {
                                        hz.with_world(&account, |ctx| {
                        let action = ctx
                            .world
                            .actions
                            .get(&id)
                            .filter(|a| a.resources.iter().any(|(_, k)| *k == kind))
                            .ok_or_else(|| ApiError::not_found("action", id))?;
                        ok(json!({"action": action.to_json(ctx.now)}))
                    })
                }),
            )
            .route(
                &v1(&format!("/{path}/{{id}}/actions")),
                get(
                    move |State(hz): Hs, account: Account, PathId(id): PathId, q: ListQuery| async move {
                                                hz.with_world(&account, |ctx| {
                            if !exists(ctx, kind, id) {
                                return Err(ApiError::not_found(word, id));
                            }
                            let actions = ctx
                                .world
                                .actions
                                .values()
                                .filter(|a| a.touches(kind, id))
                                .collect();
                            sorted_page(ctx, &q, actions)
                        })
                    },
                ),
            )
            .route(
                &v1(&format!("/{path}/{{id}}/actions/{{action}}")),
                get(
                    move |State(hz): Hs, account: Account, IdAndName(id, action): IdAndName| async move {
                        let action_id = action
                            .parse::<u64>()
                            .map_err(|_| ApiError::not_found("action", &action))?;
                        hz.with_world(&account, |ctx| {
                            if !exists(ctx, kind, id) {
                                return Err(ApiError::not_found(word, id));
                            }
                            let a = ctx
                                .world
                                .actions
                                .get(&action_id)
                                .filter(|a| a.touches(kind, id))
                                .ok_or_else(|| ApiError::not_found("action", action_id))?;
                            ok(json!({"action": a.to_json(ctx.now)}))
                        })
                    },
                ),
            );
    }
    router
}
