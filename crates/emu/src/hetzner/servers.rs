//! Servers: create (with the API's validation order and capacity errors), list, get,
//! update, delete and the server actions.
//!
//! Status lifecycle, in emulated time from the request:
//! - create: `initializing` for half of `timings.create`, then `starting` until
//!   `timings.create`, then `running` (or `off` when `start_after_create` is false or the
//!   create action failed);
//! - poweron: `starting` → `running`; poweroff and shutdown: `stopping` → `off`;
//!   rebuild: `rebuilding` → `running`; delete: `deleting`, then the server is gone; each
//!   takes `timings.power`.
//!
//! A failed action (control API) leaves the server's status as it was before the action.
//!
//! Capacity checks, in order: unknown type/image/location → `422 invalid_input`; type not
//! offered in the location → `422 invalid_input "unsupported location for server type"`;
//! location disabled → `412 resource_unavailable "server location disabled"`; (type,
//! location) sold out → `412 resource_unavailable "error during placement"`; then the
//! account's server limit (`403 resource_limit_exceeded`) and name uniqueness (`409`).

use std::net::Ipv4Addr;

use axum::extract::State;
use axum::http::StatusCode;
use rand::Rng;
use rand::distr::Alphanumeric;
use serde_json::{Value, json};

use super::catalog::ServerType;
use super::known_action;
use super::named::{Resource, ensure_name_free, find, list_page};
use super::networks::allocate_ip;
use super::pagination::{ListQuery, Listing};
use super::wire::{
    AttachToNetwork, ChangeType, CreateServer, DnsPtr, EnableRescue, IdOrName, NetworkRef,
    Protection, Rebuild, check_hostname, check_labels, required,
};
use super::world::{
    Event, Family, PrimaryIp, PrivateNet, Server, Status, default_ptr_v4, ip_matches, ts,
};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, IdAndName, PathId, created, decode, ok};

/// Largest `user_data` the API accepts.
const MAX_USER_DATA: usize = 32 * 1024;

fn random_password() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(20)
        .map(char::from)
        .collect()
}

fn server_mut<'w>(ctx: &'w mut Ctx<'_>, id: u64) -> Result<&'w mut Server, ApiError> {
    ctx.world
        .servers
        .get_mut(&id)
        .ok_or_else(|| ApiError::not_found("server", id))
}

/// A server as the API shows it, read at the current time.
pub(crate) fn server_json(ctx: &Ctx<'_>, s: &Server) -> Value {
    let cat = &ctx.hz.catalog;
    let faults = ctx.hz.core.faults();
    let st = cat.server_type_by_id(s.server_type);
    let ipv4 = s.ipv4.and_then(|id| ctx.world.primary_ips.get(&id)).map(|ip| {
        json!({
            "id": ip.id,
            "ip": ip.ip,
            "blocked": false,
            "dns_ptr": ip.dns_ptr.get(&ip.ip).cloned().unwrap_or_else(|| default_ptr_v4(&ip.ip)),
        })
    });
    let ipv6 = s
        .ipv6
        .and_then(|id| ctx.world.primary_ips.get(&id))
        .map(|ip| {
            json!({
                "id": ip.id,
                "ip": ip.ip,
                "blocked": false,
                "dns_ptr": super::world::ptr_list(&ip.dns_ptr),
            })
        });
    let floating: Vec<u64> = ctx
        .world
        .floating_ips
        .values()
        .filter(|f| f.server == Some(s.id))
        .map(|f| f.id)
        .collect();
    let volumes: Vec<u64> = ctx
        .world
        .volumes
        .values()
        .filter(|v| v.server == Some(s.id))
        .map(|v| v.id)
        .collect();
    let included_traffic = st.and_then(|t| cat.included_traffic(t, &s.location));
    let mut v = json!({
        "id": s.id,
        "name": s.name,
        "status": s.status.as_str(),
        "created": ts(s.created),
        "public_net": {
            "ipv4": ipv4,
            "ipv6": ipv6,
            "floating_ips": floating,
            "firewalls": [],
        },
        "private_net": s.private_net.iter().map(|p| json!({
            "network": p.network,
            "ip": p.ip.to_string(),
            "alias_ips": p.alias_ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "mac_address": p.mac_address,
        })).collect::<Vec<_>>(),
        "server_type": st.map(|t| cat.server_type_json(t, &faults)),
        "location": cat.location_json(&s.location),
        "image": s.image.and_then(|i| cat.image_by_id(i)).map(|i| cat.image_json(i)),
        "iso": null,
        "rescue_enabled": s.rescue_enabled,
        "locked": ctx.world.locked("server", s.id, ctx.now),
        "backup_window": null,
        "outgoing_traffic": 0,
        "ingoing_traffic": 0,
        "included_traffic": included_traffic,
        "protection": {"delete": s.protect_delete, "rebuild": s.protect_rebuild},
        "labels": s.labels,
        "volumes": volumes,
        "load_balancers": [],
        "primary_disk_size": st.map(|t| t.disk).unwrap_or(0),
        "placement_group": null,
    });
    if ctx.hz.options.emit_datacenter {
        v["datacenter"] = cat.datacenter_json(&s.location, &faults);
    }
    v
}

impl Resource for Server {
    fn to_json(&self, ctx: &Ctx<'_>) -> Value {
        server_json(ctx, self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_hostname(name)
    }
}

fn resolve_ssh_keys(ctx: &Ctx<'_>, keys: &[IdOrName], field: &str) -> Result<(), ApiError> {
    for k in keys {
        let found = ctx.world.ssh_keys.values().any(|s| match k {
            IdOrName::Id(id) => s.id == *id,
            IdOrName::Name(n) => &s.name == n || s.id.to_string() == *n,
        });
        if !found {
            return Err(ApiError::invalid_field(
                field,
                vec![format!("SSH key '{}' not found", k.key())],
            ));
        }
    }
    Ok(())
}

/// Checks that `t` can be placed in `location` now.
fn check_capacity(ctx: &Ctx<'_>, t: &ServerType, location: &str) -> Result<(), ApiError> {
    if !ctx.hz.catalog.offered(t, location) {
        return Err(ApiError::invalid("unsupported location for server type"));
    }
    let faults = ctx.hz.core.faults();
    if faults.is_disabled(location) {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "resource_unavailable",
            "server location disabled",
        ));
    }
    if !ctx.hz.catalog.available(t, location, &faults) {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "resource_unavailable",
            "error during placement",
        ));
    }
    Ok(())
}

pub(crate) async fn create(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreateServer>,
) -> ApiResult {
    let name = required(b.name, "name")?;
    check_hostname(&name)?;
    check_labels(&b.labels)?;
    if b.user_data
        .as_ref()
        .is_some_and(|u| u.len() > MAX_USER_DATA)
    {
        return Err(ApiError::invalid_field(
            "user_data",
            vec![format!("is longer than {MAX_USER_DATA} bytes")],
        ));
    }
    if b.datacenter.is_some() && !hz.options.accept_datacenter_field {
        return Err(ApiError::invalid_field(
            "datacenter",
            vec!["the datacenter property has been removed, use location".into()],
        ));
    }
    let type_ref = required(b.server_type, "server_type")?;
    let image_ref = required(b.image, "image")?;
    let timings = hz.core.timings;
    hz.with_world(&account, |ctx| {
        let cat = &ctx.hz.catalog;
        let st = cat.server_type(&type_ref.key()).ok_or_else(|| {
            ApiError::invalid_field(
                "server_type",
                vec![format!("server type '{}' not found", type_ref.key())],
            )
        })?;
        let image = cat
            .image(&image_ref.key(), &st.architecture)
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "image",
                    vec![format!(
                        "image '{}' not found for architecture {}",
                        image_ref.key(),
                        st.architecture
                    )],
                )
            })?;
        if image.architecture != st.architecture {
            return Err(ApiError::invalid_field(
                "image",
                vec![format!(
                    "image {} is for {}, server type {} is {}",
                    image.id, image.architecture, st.name, st.architecture
                )],
            ));
        }
        let location = match &b.location {
            Some(l) => cat
                .location(&l.key())
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "location",
                        vec![format!("location '{}' not found", l.key())],
                    )
                })?
                .name
                .clone(),
            None => {
                let faults = ctx.hz.core.faults();
                cat.locations
                    .iter()
                    .find(|l| cat.available(st, &l.name, &faults))
                    .or_else(|| cat.locations.iter().find(|l| cat.offered(st, &l.name)))
                    .map(|l| l.name.clone())
                    .unwrap_or_default()
            }
        };
        check_capacity(ctx, st, &location)?;
        let ssh_keys = b.ssh_keys.clone().unwrap_or_default();
        resolve_ssh_keys(ctx, &ssh_keys, "ssh_keys")?;
        let zone = cat
            .location(&location)
            .map(|l| l.network_zone.clone())
            .unwrap_or_default();
        let networks = b.networks.clone().unwrap_or_default();
        for n in &networks {
            let net = ctx.world.networks.get(n).ok_or_else(|| {
                ApiError::invalid_field("networks", vec![format!("network {n} not found")])
            })?;
            if !net.subnets.iter().any(|s| s.network_zone == zone) {
                return Err(ApiError::unprocessable(
                    "no_subnet_available",
                    format!("network {n} has no subnet in network zone {zone}"),
                ));
            }
        }
        let volume_ids = b.volumes.clone().unwrap_or_default();
        for v in &volume_ids {
            let vol = ctx.world.volumes.get(v).ok_or_else(|| {
                ApiError::invalid_field("volumes", vec![format!("volume {v} not found")])
            })?;
            if vol.server.is_some() {
                return Err(ApiError::invalid_field(
                    "volumes",
                    vec![format!("volume {v} is already attached")],
                ));
            }
            if vol.location != location {
                return Err(ApiError::invalid_field(
                    "volumes",
                    vec![format!("volume {v} is in {}, not {location}", vol.location)],
                ));
            }
        }
        let pn = b.public_net.unwrap_or_default();
        let mut given = [None, None];
        for (slot, (family, id)) in [(Family::V4, pn.ipv4), (Family::V6, pn.ipv6)]
            .into_iter()
            .enumerate()
        {
            let Some(id) = id else { continue };
            let ip = ctx.world.primary_ips.get(&id).ok_or_else(|| {
                ApiError::invalid_field(
                    &format!("public_net.{}", family.as_str()),
                    vec![format!("primary IP {id} not found")],
                )
            })?;
            if ip.family != family {
                return Err(ApiError::new(
                    StatusCode::PRECONDITION_FAILED,
                    "primary_ip_version_mismatch",
                    format!("primary IP {id} is not an {} address", family.as_str()),
                ));
            }
            if ip.assignee.is_some() {
                return Err(ApiError::unprocessable(
                    "primary_ip_assigned",
                    format!("primary IP {id} is already assigned"),
                ));
            }
            if ip.location != location {
                return Err(ApiError::unprocessable(
                    "primary_ip_datacenter_mismatch",
                    format!("primary IP {id} is in {}, not {location}", ip.location),
                ));
            }
            given[slot] = Some(id);
        }
        let want_v4 = pn.enable_ipv4.unwrap_or(true);
        let want_v6 = pn.enable_ipv6.unwrap_or(true);
        if !want_v4 && !want_v6 && networks.is_empty() {
            return Err(ApiError::invalid_field(
                "public_net",
                vec!["a server without public IPs must be attached to a network".into()],
            ));
        }
        if ctx.world.servers.len() >= ctx.hz.options.server_limit {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "resource_limit_exceeded",
                "server limit exceeded",
            )
            .with_details(json!({"limits": [{"name": "server_limit"}]})));
        }
        ensure_name_free(&ctx.world.servers, &name, None)?;

        let id = ctx.ids.server();
        let mut primary = [None, None];
        for (slot, (family, wanted)) in [(Family::V4, want_v4), (Family::V6, want_v6)]
            .into_iter()
            .enumerate()
        {
            if let Some(existing) = given[slot] {
                if let Some(ip) = ctx.world.primary_ips.get_mut(&existing) {
                    ip.assignee = Some(id);
                }
                primary[slot] = Some(existing);
            } else if wanted {
                let ip_id = ctx.ids.primary_ip();
                let address = match family {
                    Family::V4 => ctx.ids.public_ipv4(),
                    Family::V6 => ctx.ids.public_ipv6(),
                };
                ctx.world.primary_ips.insert(
                    ip_id,
                    PrimaryIp {
                        id: ip_id,
                        name: format!("primary_ip-{ip_id}"),
                        labels: Default::default(),
                        created: ctx.now,
                        location: location.clone(),
                        dns_ptr: match family {
                            Family::V4 => [(address.clone(), default_ptr_v4(&address))].into(),
                            Family::V6 => Default::default(),
                        },
                        ip: address,
                        family,
                        protect_delete: false,
                        auto_delete: true,
                        assignee: Some(id),
                    },
                );
                primary[slot] = Some(ip_id);
            }
        }
        let mut server = Server {
            id,
            name,
            created: ctx.now,
            labels: b.labels.unwrap_or_default(),
            server_type: st.id,
            location: location.clone(),
            image: Some(image.id),
            status: Status::Initializing,
            timeline: Vec::new(),
            ipv4: primary[0],
            ipv6: primary[1],
            private_net: Vec::new(),
            rescue_enabled: false,
            protect_delete: false,
            protect_rebuild: false,
            user_data: b.user_data.as_deref().map(std::sync::Arc::from),
            boot: 1,
        };
        for n in &networks {
            let Some(net) = ctx.world.networks.get(n) else {
                continue;
            };
            let ip = allocate_ip(ctx.world, net, &zone, None)?;
            server.private_net.push(PrivateNet {
                network: *n,
                ip,
                alias_ips: Vec::new(),
                mac_address: ctx.ids.mac(),
            });
        }
        for v in &volume_ids {
            if let Some(vol) = ctx.world.volumes.get_mut(v) {
                vol.server = Some(id);
            }
        }
        ctx.world.servers.insert(id, server);

        let start = b.start_after_create.unwrap_or(true);
        let half = timings.create / 2;
        let mut resources = vec![(id, "server"), (image.id, "image")];
        resources.extend(networks.iter().map(|n| (*n, "network")));
        let (create_action, create_fails) = if start {
            ctx.start_action("create_server", resources, half)
        } else {
            ctx.start_action("create_server", resources, timings.create)
        };
        let mut next_actions = Vec::new();
        let mut events = Vec::new();
        if create_fails {
            events.push((ctx.after(timings.create), Event::Becomes(Status::Off)));
        } else if start {
            let (start_action, start_fails) =
                ctx.start_action("start_server", vec![(id, "server")], timings.create);
            next_actions.push(start_action);
            events.push((ctx.after(half), Event::Becomes(Status::Starting)));
            let end = if start_fails {
                Status::Off
            } else {
                Status::Running
            };
            events.push((ctx.after(timings.create), Event::Becomes(end)));
        } else {
            events.push((ctx.after(timings.create), Event::Becomes(Status::Off)));
        }
        if let Some(s) = ctx.world.servers.get_mut(&id) {
            s.timeline = events;
        }
        let root_password = ssh_keys.is_empty().then(random_password);
        let server = json!(server_json(ctx, find::<Server>(ctx, id)?));
        created(json!({
            "server": server,
            "action": ctx.action_json(create_action),
            "next_actions": next_actions.iter().map(|a| ctx.action_json(*a)).collect::<Vec<_>>(),
            "root_password": root_password,
        }))
    })
}

pub(crate) async fn list(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let selector = q.selector()?;
    let statuses = q.all_of("status", &Status::ALL)?;
    let sorts = q.sort(&["id", "name", "created"])?;
    list_page(
        &hz,
        &account,
        &q,
        Listing { selector, sorts },
        |s: &Server| statuses.is_empty() || statuses.iter().any(|x| x == s.status.as_str()),
    )
}

pub(crate) async fn delete(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    let power = hz.core.timings.power;
    hz.with_world(&account, |ctx| {
        let s = find::<Server>(ctx, id)?;
        if s.protect_delete {
            return Err(ApiError::protected("server"));
        }
        ctx.ensure_unlocked("server", id)?;
        let (action, fails) = ctx.start_action("delete_server", vec![(id, "server")], power);
        let end = ctx.after(power);
        let s = server_mut(ctx, id)?;
        if fails {
            let before = s.status;
            s.status = Status::Deleting;
            s.timeline = vec![(end, Event::Becomes(before))];
        } else {
            s.status = Status::Deleting;
            s.timeline = vec![(end, Event::Gone)];
        }
        ok(json!({"action": ctx.action_json(action)}))
    })
}

/// Sets `during` now and `after` (or the old status when the action fails) at `end`.
fn transition(
    ctx: &mut Ctx<'_>,
    id: u64,
    fails: bool,
    during: Status,
    after: Status,
    duration: std::time::Duration,
) {
    let end = ctx.after(duration);
    if let Some(s) = ctx.world.servers.get_mut(&id) {
        let before = s.status;
        s.status = during;
        s.timeline = vec![(end, Event::Becomes(if fails { before } else { after }))];
    }
}

/// `POST /servers/{id}/actions/{name}`.
pub(crate) async fn action(
    State(hz): Hs,
    account: Account,
    IdAndName(id, name): IdAndName,
    Body(body): Body<Value>,
) -> ApiResult {
    let t = hz.core.timings;
    hz.with_world(&account, |ctx| {
        let server = find::<Server>(ctx, id)?.clone();
        let known = [
            "poweron",
            "poweroff",
            "shutdown",
            "reboot",
            "reset",
            "rebuild",
            "change_dns_ptr",
            "attach_to_network",
            "detach_from_network",
            "enable_rescue",
            "disable_rescue",
            "change_protection",
            "change_type",
            "reset_password",
        ];
        known_action(&name, &known)?;
        ctx.ensure_unlocked("server", id)?;
        let me = vec![(id, "server")];
        match name.as_str() {
            "poweron" => {
                let (a, fails) = ctx.start_action("start_server", me, t.power);
                if server.status != Status::Running {
                    transition(ctx, id, fails, Status::Starting, Status::Running, t.power);
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "poweroff" | "shutdown" => {
                let command = if name == "poweroff" {
                    "stop_server"
                } else {
                    "shutdown_server"
                };
                let (a, fails) = ctx.start_action(command, me, t.power);
                if server.status != Status::Off {
                    transition(ctx, id, fails, Status::Stopping, Status::Off, t.power);
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "reboot" | "reset" => {
                let command = if name == "reboot" {
                    "reboot_server"
                } else {
                    "reset_server"
                };
                let (a, fails) = ctx.start_action(command, me, t.power);
                if server.status == Status::Off && name == "reset" {
                    transition(ctx, id, fails, Status::Starting, Status::Running, t.power);
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "rebuild" => {
                let b: Rebuild = decode(body)?;
                let image_ref = required(b.image, "image")?;
                if server.protect_rebuild {
                    return Err(ApiError::protected("server"));
                }
                let arch = ctx
                    .hz
                    .catalog
                    .server_type_by_id(server.server_type)
                    .map(|t| t.architecture.clone())
                    .unwrap_or_default();
                let image = ctx
                    .hz
                    .catalog
                    .image(&image_ref.key(), &arch)
                    .filter(|i| i.architecture == arch)
                    .ok_or_else(|| {
                        ApiError::invalid_field(
                            "image",
                            vec![format!("image '{}' not found for {arch}", image_ref.key())],
                        )
                    })?;
                let image_id = image.id;
                if b.user_data
                    .as_ref()
                    .is_some_and(|u| u.len() > MAX_USER_DATA)
                {
                    return Err(ApiError::invalid_field(
                        "user_data",
                        vec![format!("is longer than {MAX_USER_DATA} bytes")],
                    ));
                }
                let (a, fails) = ctx.start_action("rebuild_server", me, t.power);
                transition(ctx, id, fails, Status::Rebuilding, Status::Running, t.power);
                if !fails {
                    let s = server_mut(ctx, id)?;
                    s.image = Some(image_id);
                    s.user_data = b.user_data.as_deref().map(std::sync::Arc::from);
                    s.boot += 1;
                }
                created(json!({"action": ctx.action_json(a), "root_password": random_password()}))
            }
            "change_dns_ptr" => {
                let b: DnsPtr = decode(body)?;
                let ip = required(b.ip, "ip")?;
                let target = [server.ipv4, server.ipv6]
                    .into_iter()
                    .flatten()
                    .find(|pid| {
                        ctx.world
                            .primary_ips
                            .get(pid)
                            .is_some_and(|p| ip_matches(&p.ip, p.family, &ip))
                    })
                    .ok_or_else(|| {
                        ApiError::invalid_field(
                            "ip",
                            vec![format!("{ip} is not a public IP of server {id}")],
                        )
                    })?;
                let (a, fails) = ctx.start_action("change_dns_ptr", me, t.quick);
                if !fails && let Some(p) = ctx.world.primary_ips.get_mut(&target) {
                    set_ptr(p, &ip, b.dns_ptr);
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "attach_to_network" => {
                let b: AttachToNetwork = decode(body)?;
                let net_id = required(b.network, "network")?;
                let net = ctx
                    .world
                    .networks
                    .get(&net_id)
                    .ok_or_else(|| ApiError::not_found("network", net_id))?;
                if server.private_net.iter().any(|p| p.network == net_id) {
                    return Err(ApiError::unprocessable(
                        "server_already_attached",
                        format!("server {id} is already attached to network {net_id}"),
                    ));
                }
                let zone = ctx
                    .hz
                    .catalog
                    .location(&server.location)
                    .map(|l| l.network_zone.clone())
                    .unwrap_or_default();
                let wanted = match &b.ip {
                    Some(text) => Some(text.parse::<Ipv4Addr>().map_err(|_| {
                        ApiError::invalid_field(
                            "ip",
                            vec![format!("'{text}' is not an IPv4 address")],
                        )
                    })?),
                    None => None,
                };
                let ip = allocate_ip(ctx.world, net, &zone, wanted)?;
                let mut alias_ips = Vec::new();
                for text in b.alias_ips.unwrap_or_default() {
                    let alias = text.parse::<Ipv4Addr>().map_err(|_| {
                        ApiError::invalid_field(
                            "alias_ips",
                            vec![format!("'{text}' is not an IPv4 address")],
                        )
                    })?;
                    if alias == ip || !net.ip_range.contains(alias) {
                        return Err(ApiError::unprocessable(
                            "ip_not_available",
                            format!("alias IP {alias} is not available"),
                        ));
                    }
                    alias_ips.push(alias);
                }
                let (a, fails) = ctx.start_action(
                    "attach_to_network",
                    vec![(id, "server"), (net_id, "network")],
                    t.quick,
                );
                if !fails {
                    let mac_address = ctx.ids.mac();
                    server_mut(ctx, id)?.private_net.push(PrivateNet {
                        network: net_id,
                        ip,
                        alias_ips,
                        mac_address,
                    });
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "detach_from_network" => {
                let b: NetworkRef = decode(body)?;
                let net_id = required(b.network, "network")?;
                if !ctx.world.networks.contains_key(&net_id) {
                    return Err(ApiError::not_found("network", net_id));
                }
                if !server.private_net.iter().any(|p| p.network == net_id) {
                    return Err(ApiError::unprocessable(
                        "server_not_attached",
                        format!("server {id} is not attached to network {net_id}"),
                    ));
                }
                let (a, fails) = ctx.start_action(
                    "detach_from_network",
                    vec![(id, "server"), (net_id, "network")],
                    t.quick,
                );
                if !fails {
                    server_mut(ctx, id)?
                        .private_net
                        .retain(|p| p.network != net_id);
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "enable_rescue" | "disable_rescue" => {
                let enable = name == "enable_rescue";
                if enable {
                    let b: EnableRescue = decode(body)?;
                    if let Some(kind) = &b.kind
                        && kind != "linux64"
                    {
                        return Err(ApiError::invalid_field(
                            "type",
                            vec![format!("'{kind}' is not a rescue system (linux64)")],
                        ));
                    }
                    resolve_ssh_keys(ctx, &b.ssh_keys.unwrap_or_default(), "ssh_keys")?;
                }
                let command = if enable {
                    "enable_rescue"
                } else {
                    "disable_rescue"
                };
                let (a, fails) = ctx.start_action(command, me, t.quick);
                if !fails {
                    server_mut(ctx, id)?.rescue_enabled = enable;
                }
                let mut out = json!({"action": ctx.action_json(a)});
                if enable {
                    out["root_password"] = json!(random_password());
                }
                created(out)
            }
            "change_protection" => {
                let b: Protection = decode(body)?;
                let (a, fails) = ctx.start_action("change_protection", me, t.quick);
                if !fails {
                    let s = server_mut(ctx, id)?;
                    if let Some(d) = b.delete {
                        s.protect_delete = d;
                    }
                    if let Some(r) = b.rebuild {
                        s.protect_rebuild = r;
                    }
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            "change_type" => {
                let b: ChangeType = decode(body)?;
                let type_ref = required(b.server_type, "server_type")?;
                let _ = required(b.upgrade_disk, "upgrade_disk")?;
                if server.status != Status::Off {
                    return Err(ApiError::unprocessable(
                        "server_not_stopped",
                        format!("server {id} must be off to change its type"),
                    ));
                }
                let st = ctx.hz.catalog.server_type(&type_ref.key()).ok_or_else(|| {
                    ApiError::invalid_field(
                        "server_type",
                        vec![format!("server type '{}' not found", type_ref.key())],
                    )
                })?;
                let old_arch = ctx
                    .hz
                    .catalog
                    .server_type_by_id(server.server_type)
                    .map(|t| t.architecture.clone());
                if old_arch.as_deref() != Some(st.architecture.as_str()) {
                    return Err(ApiError::unprocessable(
                        "invalid_server_type",
                        "server type has another architecture",
                    ));
                }
                check_capacity(ctx, st, &server.location)?;
                let new_type = st.id;
                let (a, fails) = ctx.start_action("change_server_type", me, t.power);
                if !fails {
                    server_mut(ctx, id)?.server_type = new_type;
                }
                created(json!({"action": ctx.action_json(a)}))
            }
            _ => {
                let (a, _) = ctx.start_action("reset_password", me, t.quick);
                created(json!({"action": ctx.action_json(a), "root_password": random_password()}))
            }
        }
    })
}

/// Sets or clears the reverse DNS entry of `ip` on a primary IP; clearing an IPv4 entry
/// restores Hetzner's default name.
pub(crate) fn set_ptr(p: &mut PrimaryIp, ip: &str, ptr: Option<String>) {
    match (p.family, ptr) {
        (_, Some(name)) => {
            p.dns_ptr.insert(ip.to_string(), name);
        }
        (Family::V4, None) => {
            p.dns_ptr.insert(ip.to_string(), default_ptr_v4(ip));
        }
        (Family::V6, None) => {
            p.dns_ptr.remove(ip);
        }
    }
}
