//! Primary IPs and floating IPs.
//!
//! Rules kept: a primary IP is assigned only to a server that is `off`, in its location,
//! holding no other primary IP of the same family; deleting or unassigning requires the
//! server to be off and deleting requires the IP to be unassigned (`must_be_unassigned`).
//! Unassigned primary IPs show `assignee_type: "unassigned"` (the `legacy_assignee_type`
//! option restores the older `"server"` with `assignee_id: null`). Floating IPs can be
//! assigned to a server in the same network zone as their home location.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::known_action;
use super::named::{Resource, ensure_name_free, find, list_page};
use super::pagination::{ListQuery, Listing};
use super::servers::set_ptr;
use super::wire::{
    AssignFloatingIp, AssignPrimaryIp, CreateFloatingIp, CreatePrimaryIp, DnsPtr, Protection,
    Update, check_labels, check_name, required,
};
use super::world::{
    Family, FloatingIp, PrimaryIp, Status, default_ptr_v4, ip_matches, ptr_list, ts,
};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, IdAndName, PathId, created, decode};

fn primary_json(ctx: &Ctx<'_>, p: &PrimaryIp) -> Value {
    let assignee_type = if p.assignee.is_some() || ctx.hz.options.legacy_assignee_type {
        "server"
    } else {
        "unassigned"
    };
    let mut v = json!({
        "id": p.id,
        "name": p.name,
        "labels": p.labels,
        "created": ts(p.created),
        "blocked": false,
        "location": ctx.hz.catalog.location_json(&p.location),
        "ip": p.ip,
        "dns_ptr": ptr_list(&p.dns_ptr),
        "protection": {"delete": p.protect_delete},
        "type": p.family.as_str(),
        "auto_delete": p.auto_delete,
        "assignee_type": assignee_type,
        "assignee_id": p.assignee,
    });
    if ctx.hz.options.emit_datacenter {
        let faults = ctx.hz.core.faults();
        v["datacenter"] = ctx.hz.catalog.datacenter_json(&p.location, &faults);
    }
    v
}

impl Resource for PrimaryIp {
    fn to_json(&self, ctx: &Ctx<'_>) -> Value {
        primary_json(ctx, self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_name(name, 255)
    }
    fn apply_update(&mut self, update: &Update) {
        if let Some(auto_delete) = update.auto_delete {
            self.auto_delete = auto_delete;
        }
    }
}

fn family_field(kind: Option<String>) -> Result<Family, ApiError> {
    let kind = required(kind, "type")?;
    Family::parse(&kind).ok_or_else(|| {
        ApiError::invalid_field("type", vec![format!("'{kind}' is not one of ipv4, ipv6")])
    })
}

/// Checks that `server` can take a primary IP of `family` from `location`.
fn check_assignable(
    ctx: &Ctx<'_>,
    server_id: u64,
    family: Family,
    location: Option<&str>,
) -> Result<(), ApiError> {
    let s = ctx
        .world
        .servers
        .get(&server_id)
        .ok_or_else(|| ApiError::not_found("server", server_id))?;
    if s.status != Status::Off {
        return Err(ApiError::unprocessable(
            "server_not_stopped",
            format!("server {server_id} must be off"),
        ));
    }
    if let Some(l) = location
        && l != s.location
    {
        return Err(ApiError::unprocessable(
            "primary_ip_datacenter_mismatch",
            format!("primary IP is in {l}, server {server_id} in {}", s.location),
        ));
    }
    match family {
        Family::V4 if s.ipv4.is_some() => Err(ApiError::unprocessable(
            "server_has_ipv4",
            format!("server {server_id} already has a primary IPv4"),
        )),
        Family::V6 if s.ipv6.is_some() => Err(ApiError::unprocessable(
            "server_has_ipv6",
            format!("server {server_id} already has a primary IPv6"),
        )),
        Family::V4 | Family::V6 => Ok(()),
    }
}

fn attach_primary(ctx: &mut Ctx<'_>, ip_id: u64, server_id: u64) {
    let Some(p) = ctx.world.primary_ips.get_mut(&ip_id) else {
        return;
    };
    p.assignee = Some(server_id);
    let family = p.family;
    if let Some(s) = ctx.world.servers.get_mut(&server_id) {
        match family {
            Family::V4 => s.ipv4 = Some(ip_id),
            Family::V6 => s.ipv6 = Some(ip_id),
        }
    }
}

fn detach_primary(ctx: &mut Ctx<'_>, ip_id: u64) {
    let Some(p) = ctx.world.primary_ips.get_mut(&ip_id) else {
        return;
    };
    let Some(server_id) = p.assignee.take() else {
        return;
    };
    if let Some(s) = ctx.world.servers.get_mut(&server_id) {
        if s.ipv4 == Some(ip_id) {
            s.ipv4 = None;
        }
        if s.ipv6 == Some(ip_id) {
            s.ipv6 = None;
        }
    }
}

pub(crate) async fn create_primary(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreatePrimaryIp>,
) -> ApiResult {
    let name = required(b.name, "name")?;
    check_name(&name, 255)?;
    check_labels(&b.labels)?;
    let family = family_field(b.kind)?;
    if b.datacenter.is_some() && !hz.options.accept_datacenter_field {
        return Err(ApiError::invalid_field(
            "datacenter",
            vec!["the datacenter property has been removed, use location".into()],
        ));
    }
    if let Some(t) = &b.assignee_type
        && t != "server"
    {
        return Err(ApiError::invalid_field(
            "assignee_type",
            vec![format!("'{t}' is not 'server'")],
        ));
    }
    if b.location.is_some() && b.assignee_id.is_some() {
        return Err(ApiError::invalid(
            "location and assignee_id are mutually exclusive",
        ));
    }
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let location = match (&b.location, b.assignee_id) {
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
            (None, Some(server)) => {
                check_assignable(ctx, server, family, None)?;
                ctx.world
                    .servers
                    .get(&server)
                    .map(|s| s.location.clone())
                    .unwrap_or_default()
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "one of location or assignee_id is required",
                ));
            }
        };
        ensure_name_free(&ctx.world.primary_ips, &name, None)?;
        let id = ctx.ids.primary_ip();
        let ip = match family {
            Family::V4 => ctx.ids.public_ipv4(),
            Family::V6 => ctx.ids.public_ipv6(),
        };
        let dns_ptr = match family {
            Family::V4 => [(ip.clone(), default_ptr_v4(&ip))].into(),
            Family::V6 => Default::default(),
        };
        ctx.world.primary_ips.insert(
            id,
            PrimaryIp {
                id,
                name,
                labels: b.labels.unwrap_or_default(),
                created: ctx.now,
                location,
                ip,
                family,
                dns_ptr,
                protect_delete: false,
                auto_delete: b.auto_delete.unwrap_or(false),
                assignee: None,
            },
        );
        let action = match b.assignee_id {
            Some(server) => {
                let (a, fails) = ctx.start_action(
                    "create_primary_ip",
                    vec![(id, "primary_ip"), (server, "server")],
                    quick,
                );
                if !fails {
                    attach_primary(ctx, id, server);
                }
                ctx.action_json(a)
            }
            None => Value::Null,
        };
        let p = find::<PrimaryIp>(ctx, id)?;
        created(json!({"primary_ip": primary_json(ctx, p), "action": action}))
    })
}

pub(crate) async fn list_primary(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let listing = Listing::parse(&q, &["id", "created"])?;
    let ip = q.get("ip");
    list_page(&hz, &account, &q, listing, |p: &PrimaryIp| {
        ip.is_none_or(|i| p.ip == i)
    })
}

pub(crate) async fn delete_primary(
    State(hz): Hs,
    account: Account,
    PathId(id): PathId,
) -> ApiResult {
    hz.with_world(&account, |ctx| {
        let p = find::<PrimaryIp>(ctx, id)?;
        if p.protect_delete {
            return Err(ApiError::protected("primary IP"));
        }
        if p.assignee.is_some() {
            return Err(ApiError::unprocessable(
                "must_be_unassigned",
                format!("primary IP {id} must be unassigned before it can be deleted"),
            ));
        }
        ctx.ensure_unlocked("primary_ip", id)?;
        ctx.world.primary_ips.remove(&id);
        Ok(StatusCode::NO_CONTENT.into_response())
    })
}

/// `POST /primary_ips/{id}/actions/{name}`.
pub(crate) async fn primary_action(
    State(hz): Hs,
    account: Account,
    IdAndName(id, name): IdAndName,
    Body(body): Body<Value>,
) -> ApiResult {
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let p = find::<PrimaryIp>(ctx, id)?.clone();
        known_action(
            &name,
            &["assign", "unassign", "change_dns_ptr", "change_protection"],
        )?;
        ctx.ensure_unlocked("primary_ip", id)?;
        let me = (id, "primary_ip");
        let action = match name.as_str() {
            "assign" => {
                let b: AssignPrimaryIp = decode(body)?;
                let kind = required(b.assignee_type, "assignee_type")?;
                if kind != "server" {
                    return Err(ApiError::invalid_field(
                        "assignee_type",
                        vec![format!("'{kind}' is not 'server'")],
                    ));
                }
                let server = required(b.assignee_id, "assignee_id")?;
                if p.assignee.is_some() {
                    return Err(ApiError::unprocessable(
                        "primary_ip_already_assigned",
                        format!("primary IP {id} is already assigned"),
                    ));
                }
                check_assignable(ctx, server, p.family, Some(&p.location))?;
                ctx.ensure_unlocked("server", server)?;
                let (a, fails) =
                    ctx.start_action("assign_primary_ip", vec![me, (server, "server")], quick);
                if !fails {
                    attach_primary(ctx, id, server);
                }
                a
            }
            "unassign" => {
                let mut resources = vec![me];
                if let Some(server) = p.assignee {
                    let off = ctx
                        .world
                        .servers
                        .get(&server)
                        .is_none_or(|s| s.status == Status::Off);
                    if !off {
                        return Err(ApiError::unprocessable(
                            "server_not_stopped",
                            format!("server {server} must be off"),
                        ));
                    }
                    ctx.ensure_unlocked("server", server)?;
                    resources.push((server, "server"));
                }
                let (a, fails) = ctx.start_action("unassign_primary_ip", resources, quick);
                if !fails {
                    detach_primary(ctx, id);
                }
                a
            }
            "change_dns_ptr" => {
                let b: DnsPtr = decode(body)?;
                let ip = required(b.ip, "ip")?;
                if !ip_matches(&p.ip, p.family, &ip) {
                    return Err(ApiError::invalid_field(
                        "ip",
                        vec![format!("{ip} does not belong to primary IP {id}")],
                    ));
                }
                let (a, fails) = ctx.start_action("change_dns_ptr", vec![me], quick);
                if !fails && let Some(p) = ctx.world.primary_ips.get_mut(&id) {
                    set_ptr(p, &ip, b.dns_ptr);
                }
                a
            }
            _ => {
                let b: Protection = decode(body)?;
                let (a, fails) = ctx.start_action("change_protection", vec![me], quick);
                if !fails
                    && let Some(d) = b.delete
                    && let Some(p) = ctx.world.primary_ips.get_mut(&id)
                {
                    p.protect_delete = d;
                }
                a
            }
        };
        created(json!({"action": ctx.action_json(action)}))
    })
}

fn floating_json(ctx: &Ctx<'_>, f: &FloatingIp) -> Value {
    json!({
        "id": f.id,
        "name": f.name,
        "description": f.description,
        "ip": f.ip,
        "type": f.family.as_str(),
        "server": f.server,
        "dns_ptr": ptr_list(&f.dns_ptr),
        "home_location": ctx.hz.catalog.location_json(&f.home_location),
        "blocked": false,
        "protection": {"delete": f.protect_delete},
        "labels": f.labels,
        "created": ts(f.created),
    })
}

impl Resource for FloatingIp {
    fn to_json(&self, ctx: &Ctx<'_>) -> Value {
        floating_json(ctx, self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_name(name, 255)
    }
    fn apply_update(&mut self, update: &Update) {
        if let Some(description) = &update.description {
            self.description = Some(description.clone());
        }
    }
}

fn zone_of(ctx: &Ctx<'_>, location: &str) -> String {
    ctx.hz
        .catalog
        .location(location)
        .map(|l| l.network_zone.clone())
        .unwrap_or_default()
}

/// Checks that the floating IP homed in `home` can point at `server`.
fn check_floating_target(ctx: &Ctx<'_>, home: &str, server: u64) -> Result<(), ApiError> {
    let s = ctx
        .world
        .servers
        .get(&server)
        .ok_or_else(|| ApiError::not_found("server", server))?;
    if zone_of(ctx, &s.location) != zone_of(ctx, home) {
        return Err(ApiError::invalid(format!(
            "server {server} is not in the network zone of {home}"
        )));
    }
    Ok(())
}

pub(crate) async fn create_floating(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreateFloatingIp>,
) -> ApiResult {
    check_labels(&b.labels)?;
    let family = family_field(b.kind)?;
    if let Some(n) = &b.name {
        check_name(n, 255)?;
    }
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let home = match (&b.home_location, b.server) {
            (Some(l), _) => ctx
                .hz
                .catalog
                .location(&l.key())
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "home_location",
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
                return Err(ApiError::invalid(
                    "one of home_location or server is required",
                ));
            }
        };
        if let Some(server) = b.server {
            check_floating_target(ctx, &home, server)?;
        }
        let id = ctx.ids.floating_ip();
        let name = b.name.unwrap_or_else(|| format!("floating_ip-{id}"));
        ensure_name_free(&ctx.world.floating_ips, &name, None)?;
        let ip = ctx.ids.floating(family);
        let dns_ptr = match family {
            Family::V4 => [(ip.clone(), default_ptr_v4(&ip))].into(),
            Family::V6 => Default::default(),
        };
        ctx.world.floating_ips.insert(
            id,
            FloatingIp {
                id,
                name,
                description: b.description,
                ip,
                family,
                server: None,
                dns_ptr,
                home_location: home,
                protect_delete: false,
                labels: b.labels.unwrap_or_default(),
                created: ctx.now,
            },
        );
        let action = match b.server {
            Some(server) => {
                let (a, fails) = ctx.start_action(
                    "assign_floating_ip",
                    vec![(id, "floating_ip"), (server, "server")],
                    quick,
                );
                if !fails && let Some(f) = ctx.world.floating_ips.get_mut(&id) {
                    f.server = Some(server);
                }
                ctx.action_json(a)
            }
            None => Value::Null,
        };
        let f = find::<FloatingIp>(ctx, id)?;
        created(json!({"floating_ip": floating_json(ctx, f), "action": action}))
    })
}

pub(crate) async fn list_floating(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let listing = Listing::parse(&q, &["id", "created"])?;
    list_page(&hz, &account, &q, listing, |_: &FloatingIp| true)
}

pub(crate) async fn delete_floating(
    State(hz): Hs,
    account: Account,
    PathId(id): PathId,
) -> ApiResult {
    hz.with_world(&account, |ctx| {
        let f = find::<FloatingIp>(ctx, id)?;
        if f.protect_delete {
            return Err(ApiError::protected("floating IP"));
        }
        if f.server.is_some() {
            return Err(ApiError::unprocessable(
                "must_be_unassigned",
                format!("floating IP {id} must be unassigned before it can be deleted"),
            ));
        }
        ctx.ensure_unlocked("floating_ip", id)?;
        ctx.world.floating_ips.remove(&id);
        Ok(StatusCode::NO_CONTENT.into_response())
    })
}

/// `POST /floating_ips/{id}/actions/{name}`.
pub(crate) async fn floating_action(
    State(hz): Hs,
    account: Account,
    IdAndName(id, name): IdAndName,
    Body(body): Body<Value>,
) -> ApiResult {
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let f = find::<FloatingIp>(ctx, id)?.clone();
        known_action(
            &name,
            &["assign", "unassign", "change_dns_ptr", "change_protection"],
        )?;
        ctx.ensure_unlocked("floating_ip", id)?;
        let me = (id, "floating_ip");
        let action = match name.as_str() {
            "assign" => {
                let b: AssignFloatingIp = decode(body)?;
                let server = required(b.server, "server")?;
                check_floating_target(ctx, &f.home_location, server)?;
                let (a, fails) =
                    ctx.start_action("assign_floating_ip", vec![me, (server, "server")], quick);
                if !fails && let Some(f) = ctx.world.floating_ips.get_mut(&id) {
                    f.server = Some(server);
                }
                a
            }
            "unassign" => {
                let mut resources = vec![me];
                resources.extend(f.server.map(|s| (s, "server")));
                let (a, fails) = ctx.start_action("unassign_floating_ip", resources, quick);
                if !fails && let Some(f) = ctx.world.floating_ips.get_mut(&id) {
                    f.server = None;
                }
                a
            }
            "change_dns_ptr" => {
                let b: DnsPtr = decode(body)?;
                let ip = required(b.ip, "ip")?;
                if !ip_matches(&f.ip, f.family, &ip) {
                    return Err(ApiError::invalid_field(
                        "ip",
                        vec![format!("{ip} does not belong to floating IP {id}")],
                    ));
                }
                let (a, fails) = ctx.start_action("change_dns_ptr", vec![me], quick);
                if !fails && let Some(f) = ctx.world.floating_ips.get_mut(&id) {
                    match (f.family, b.dns_ptr) {
                        (_, Some(name)) => {
                            f.dns_ptr.insert(ip, name);
                        }
                        (Family::V4, None) => {
                            let default = default_ptr_v4(&ip);
                            f.dns_ptr.insert(ip, default);
                        }
                        (Family::V6, None) => {
                            f.dns_ptr.remove(&ip);
                        }
                    }
                }
                a
            }
            _ => {
                let b: Protection = decode(body)?;
                let (a, fails) = ctx.start_action("change_protection", vec![me], quick);
                if !fails
                    && let Some(d) = b.delete
                    && let Some(f) = ctx.world.floating_ips.get_mut(&id)
                {
                    f.protect_delete = d;
                }
                a
            }
        };
        created(json!({"action": ctx.action_json(action)}))
    })
}
