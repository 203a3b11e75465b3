//! Volumes: create (in a location, or attached to a server at once), list, get, update,
//! delete, and the attach, detach, resize and change_protection actions.
//!
//! Rules kept: size is 10 to 10240 GB and only grows; a volume attaches to one server of
//! its own location; an attached or protected volume cannot be deleted.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::known_action;
use super::named::{Resource, ensure_name_free, find, list_page};
use super::pagination::{ListQuery, Listing};
use super::wire::{
    AttachVolume, CreateVolume, Protection, ResizeVolume, check_labels, check_name, required,
};
use super::world::{Volume, ts};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, IdAndName, PathId, created, decode};

const MIN_SIZE: u64 = 10;
const MAX_SIZE: u64 = 10_240;

fn volume_json(ctx: &Ctx<'_>, v: &Volume) -> Value {
    json!({
        "id": v.id,
        "created": ts(v.created),
        "name": v.name,
        "server": v.server,
        "location": ctx.hz.catalog.location_json(&v.location),
        "size": v.size,
        "linux_device": format!("/dev/disk/by-id/scsi-0HC_Volume_{}", v.id),
        "protection": {"delete": v.protect_delete},
        "labels": v.labels,
        "status": "available",
        "format": v.format,
    })
}

impl Resource for Volume {
    fn to_json(&self, ctx: &Ctx<'_>) -> Value {
        volume_json(ctx, self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_name(name, 64)
    }
}

fn check_size(size: u64) -> Result<(), ApiError> {
    if (MIN_SIZE..=MAX_SIZE).contains(&size) {
        Ok(())
    } else {
        Err(ApiError::invalid_field(
            "size",
            vec![format!("must be between {MIN_SIZE} and {MAX_SIZE} GB")],
        ))
    }
}

fn check_server(ctx: &Ctx<'_>, server: u64, location: &str) -> Result<(), ApiError> {
    let s = ctx
        .world
        .servers
        .get(&server)
        .ok_or_else(|| ApiError::not_found("server", server))?;
    if s.location != location {
        return Err(ApiError::invalid(format!(
            "server {server} is in {}, the volume in {location}",
            s.location
        )));
    }
    Ok(())
}

pub(crate) async fn create(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreateVolume>,
) -> ApiResult {
    let name = required(b.name, "name")?;
    check_name(&name, 64)?;
    check_labels(&b.labels)?;
    let size = required(b.size, "size")?;
    check_size(size)?;
    if let Some(f) = &b.format
        && f != "ext4"
        && f != "xfs"
    {
        return Err(ApiError::invalid_field(
            "format",
            vec![format!("'{f}' is not one of ext4, xfs")],
        ));
    }
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let location = match (&b.location, b.server) {
            (Some(l), _) => ctx
                .hz
                .catalog
                .location(&l.key())
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "location",
                        vec![format!("location '{}' not found", l.key())],
                    )
                })?
                .name
                .clone(),
            (None, Some(server)) => ctx
                .world
                .servers
                .get(&server)
                .ok_or_else(|| ApiError::not_found("server", server))?
                .location
                .clone(),
            (None, None) => {
                return Err(ApiError::invalid("one of location or server is required"));
            }
        };
        if let Some(server) = b.server {
            check_server(ctx, server, &location)?;
        }
        ensure_name_free(&ctx.world.volumes, &name, None)?;
        let id = ctx.ids.volume();
        ctx.world.volumes.insert(
            id,
            Volume {
                id,
                name,
                size,
                location,
                server: None,
                protect_delete: false,
                labels: b.labels.unwrap_or_default(),
                created: ctx.now,
                format: b.format,
            },
        );
        let (create_action, _) = ctx.start_action("create_volume", vec![(id, "volume")], quick);
        let mut next = Vec::new();
        if let Some(server) = b.server {
            let (a, fails) = ctx.start_action(
                "attach_volume",
                vec![(id, "volume"), (server, "server")],
                quick,
            );
            if !fails && let Some(v) = ctx.world.volumes.get_mut(&id) {
                v.server = Some(server);
            }
            next.push(ctx.action_json(a));
        }
        let v = find::<Volume>(ctx, id)?;
        created(json!({
            "volume": volume_json(ctx, v),
            "action": ctx.action_json(create_action),
            "next_actions": next,
        }))
    })
}

pub(crate) async fn list(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let listing = Listing::parse(&q, &["id", "name", "created"])?;
    let statuses = q.all_of("status", &["available", "creating"])?;
    // Every volume is `available` as soon as it is made.
    let available = statuses.is_empty() || statuses.iter().any(|s| s == "available");
    list_page(&hz, &account, &q, listing, |_: &Volume| available)
}

pub(crate) async fn delete(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        let v = find::<Volume>(ctx, id)?;
        if v.protect_delete {
            return Err(ApiError::protected("volume"));
        }
        if v.server.is_some() {
            return Err(ApiError::unprocessable(
                "must_be_unassigned",
                format!("volume {id} must be detached before it can be deleted"),
            ));
        }
        ctx.ensure_unlocked("volume", id)?;
        ctx.world.volumes.remove(&id);
        Ok(StatusCode::NO_CONTENT.into_response())
    })
}

/// `POST /volumes/{id}/actions/{name}`.
pub(crate) async fn action(
    State(hz): Hs,
    account: Account,
    IdAndName(id, name): IdAndName,
    Body(body): Body<Value>,
) -> ApiResult {
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let v = find::<Volume>(ctx, id)?.clone();
        known_action(&name, &["attach", "detach", "resize", "change_protection"])?;
        ctx.ensure_unlocked("volume", id)?;
        let me = (id, "volume");
        let action = match name.as_str() {
            "attach" => {
                let b: AttachVolume = decode(body)?;
                let server = required(b.server, "server")?;
                if v.server.is_some() {
                    return Err(ApiError::unprocessable(
                        "volume_already_attached",
                        format!("volume {id} is already attached"),
                    ));
                }
                check_server(ctx, server, &v.location)?;
                ctx.ensure_unlocked("server", server)?;
                let (a, fails) =
                    ctx.start_action("attach_volume", vec![me, (server, "server")], quick);
                if !fails && let Some(v) = ctx.world.volumes.get_mut(&id) {
                    v.server = Some(server);
                }
                a
            }
            "detach" => {
                let mut resources = vec![me];
                resources.extend(v.server.map(|s| (s, "server")));
                let (a, fails) = ctx.start_action("detach_volume", resources, quick);
                if !fails && let Some(v) = ctx.world.volumes.get_mut(&id) {
                    v.server = None;
                }
                a
            }
            "resize" => {
                let b: ResizeVolume = decode(body)?;
                let size = required(b.size, "size")?;
                check_size(size)?;
                if size < v.size {
                    return Err(ApiError::invalid_field(
                        "size",
                        vec![format!("must be at least the current size {}", v.size)],
                    ));
                }
                let (a, fails) = ctx.start_action("resize_volume", vec![me], quick);
                if !fails && let Some(v) = ctx.world.volumes.get_mut(&id) {
                    v.size = size;
                }
                a
            }
            _ => {
                let b: Protection = decode(body)?;
                let (a, fails) = ctx.start_action("change_protection", vec![me], quick);
                if !fails
                    && let Some(d) = b.delete
                    && let Some(v) = ctx.world.volumes.get_mut(&id)
                {
                    v.protect_delete = d;
                }
                a
            }
        };
        created(json!({"action": ctx.action_json(action)}))
    })
}
