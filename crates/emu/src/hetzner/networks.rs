//! Private networks: create, list, get, update, delete and the network actions, plus the
//! private IP allocation servers use when they attach.
//!
//! Addressing rules: a network's `ip_range` is an RFC 1918 IPv4 block; subnets lie inside it
//! and do not overlap; every subnet's `gateway` is the first host of the network range.
//! A server attaching gets the lowest free host of a subnet whose `network_zone` contains
//! its location (never the network address, the gateway or the broadcast address).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::named::{Resource, ensure_name_free, find, list_page};
use super::not_found_route;
use super::pagination::{ListQuery, Listing};
use super::wire::{
    CreateNetwork, IpRange, Protection, RouteReq, SubnetReq, Update, check_labels, check_name,
    required,
};
use super::world::{Network, Route, Subnet, World, ts};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, IdAndName, PathId, created, decode};

/// An IPv4 block `addr/prefix` whose host bits are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Cidr {
    fn mask(self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        }
    }

    fn first(self) -> u32 {
        u32::from(self.addr)
    }

    fn last(self) -> u32 {
        self.first() | !self.mask()
    }

    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == self.first()
    }

    pub fn contains_block(self, other: Cidr) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }

    pub fn overlaps(self, other: Cidr) -> bool {
        self.contains_block(other) || other.contains_block(self)
    }

    /// The first host address, the gateway of a network.
    pub fn first_host(self) -> Ipv4Addr {
        Ipv4Addr::from(self.first().saturating_add(1))
    }

    fn is_private(self) -> bool {
        let private = [
            Cidr {
                addr: Ipv4Addr::new(10, 0, 0, 0),
                prefix: 8,
            },
            Cidr {
                addr: Ipv4Addr::new(172, 16, 0, 0),
                prefix: 12,
            },
            Cidr {
                addr: Ipv4Addr::new(192, 168, 0, 0),
                prefix: 16,
            },
        ];
        private.iter().any(|p| p.contains_block(self))
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| format!("'{s}' is not an IPv4 block like 10.0.0.0/16"))?;
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("'{a}' is not an IPv4 address"))?;
        let prefix: u8 = p
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("'{p}' is not a prefix length"))?;
        let c = Cidr { addr, prefix };
        if u32::from(addr) & c.mask() != u32::from(addr) {
            return Err(format!("'{s}' has host bits set"));
        }
        Ok(c)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn cidr_field(field: &str, s: &str) -> Result<Cidr, ApiError> {
    s.parse()
        .map_err(|e| ApiError::invalid_field(field, vec![e]))
}

const ZONES: [&str; 4] = ["eu-central", "us-east", "us-west", "ap-southeast"];

/// The lowest free host of a subnet in `zone`, or `wanted` if it is free and in such a
/// subnet.
pub(crate) fn allocate_ip(
    world: &World,
    net: &Network,
    zone: &str,
    wanted: Option<Ipv4Addr>,
) -> Result<Ipv4Addr, ApiError> {
    let used = |ip: Ipv4Addr| {
        ip == net.ip_range.first_host()
            || world.servers.values().any(|s| {
                s.private_net
                    .iter()
                    .any(|p| p.network == net.id && (p.ip == ip || p.alias_ips.contains(&ip)))
            })
    };
    let subnets: Vec<&Subnet> = net
        .subnets
        .iter()
        .filter(|s| s.network_zone == zone && s.kind != "vswitch")
        .collect();
    if subnets.is_empty() {
        return Err(ApiError::unprocessable(
            "no_subnet_available",
            format!("network {} has no subnet in network zone {zone}", net.id),
        ));
    }
    if let Some(ip) = wanted {
        let inside = subnets.iter().any(|s| {
            s.ip_range.contains(ip)
                && u32::from(ip) != s.ip_range.first()
                && u32::from(ip) != s.ip_range.last()
        });
        if !inside || used(ip) {
            return Err(ApiError::unprocessable(
                "ip_not_available",
                format!("IP {ip} is not available in network {}", net.id),
            ));
        }
        return Ok(ip);
    }
    for s in subnets {
        for n in s.ip_range.first().saturating_add(1)..s.ip_range.last() {
            let ip = Ipv4Addr::from(n);
            if !used(ip) {
                return Ok(ip);
            }
        }
    }
    Err(ApiError::unprocessable(
        "no_subnet_available",
        format!("network {} has no free IP in network zone {zone}", net.id),
    ))
}

fn network_json(world: &World, n: &Network) -> Value {
    let servers: Vec<u64> = world
        .servers
        .values()
        .filter(|s| s.private_net.iter().any(|p| p.network == n.id))
        .map(|s| s.id)
        .collect();
    json!({
        "id": n.id,
        "name": n.name,
        "ip_range": n.ip_range.to_string(),
        "subnets": n.subnets.iter().map(|s| json!({
            "type": s.kind,
            "ip_range": s.ip_range.to_string(),
            "network_zone": s.network_zone,
            "gateway": s.gateway.to_string(),
            "vswitch_id": s.vswitch_id,
        })).collect::<Vec<_>>(),
        "routes": n.routes.iter().map(|r| json!({
            "destination": r.destination.to_string(),
            "gateway": r.gateway.to_string(),
        })).collect::<Vec<_>>(),
        "servers": servers,
        "load_balancers": [],
        "protection": {"delete": n.protect_delete},
        "labels": n.labels,
        "created": ts(n.created),
        "expose_routes_to_vswitch": n.expose_routes_to_vswitch,
    })
}

fn check_subnet(net: &Network, req: SubnetReq) -> Result<Subnet, ApiError> {
    let kind = req.kind.unwrap_or_else(|| "cloud".into());
    if !["cloud", "server", "vswitch"].contains(&kind.as_str()) {
        return Err(ApiError::invalid_field(
            "type",
            vec![format!("'{kind}' is not one of cloud, server, vswitch")],
        ));
    }
    let zone = required(req.network_zone, "network_zone")?;
    if !ZONES.contains(&zone.as_str()) {
        return Err(ApiError::invalid_field(
            "network_zone",
            vec![format!("unknown network zone '{zone}'")],
        ));
    }
    let range = match req.ip_range {
        Some(r) => cidr_field("ip_range", &r)?,
        None => free_block(net).ok_or_else(|| {
            ApiError::invalid_field("ip_range", vec!["no free /24 left in the network".into()])
        })?,
    };
    if !net.ip_range.contains_block(range) {
        return Err(ApiError::invalid_field(
            "ip_range",
            vec![format!("subnet {range} is not inside {}", net.ip_range)],
        ));
    }
    if net.subnets.iter().any(|s| s.ip_range.overlaps(range)) {
        return Err(ApiError::unprocessable(
            "networks_overlap",
            format!("subnet {range} overlaps another subnet"),
        ));
    }
    if kind == "vswitch" && req.vswitch_id.is_none() {
        return Err(ApiError::invalid_field(
            "vswitch_id",
            vec!["is required for vswitch subnets".into()],
        ));
    }
    Ok(Subnet {
        kind,
        ip_range: range,
        network_zone: zone,
        gateway: net.ip_range.first_host(),
        vswitch_id: req.vswitch_id,
    })
}

/// The first /24 of the network that overlaps no subnet.
fn free_block(net: &Network) -> Option<Cidr> {
    let prefix = net.ip_range.prefix.max(24);
    let step = 1u32 << (32 - u32::from(prefix));
    let mut start = net.ip_range.first();
    while start <= net.ip_range.last() {
        let c = Cidr {
            addr: Ipv4Addr::from(start),
            prefix,
        };
        if !net.subnets.iter().any(|s| s.ip_range.overlaps(c)) {
            return Some(c);
        }
        start = start.checked_add(step)?;
    }
    None
}

fn check_route(net: &Network, req: RouteReq) -> Result<Route, ApiError> {
    let destination = cidr_field("destination", &required(req.destination, "destination")?)?;
    let gateway_text = required(req.gateway, "gateway")?;
    let gateway: Ipv4Addr = gateway_text.parse().map_err(|_| {
        ApiError::invalid_field(
            "gateway",
            vec![format!("'{gateway_text}' is not an IPv4 address")],
        )
    })?;
    if !net.ip_range.contains(gateway) || gateway == net.ip_range.first_host() {
        return Err(ApiError::invalid_field(
            "gateway",
            vec![format!(
                "gateway {gateway} must be inside {} and not the network gateway",
                net.ip_range
            )],
        ));
    }
    Ok(Route {
        destination,
        gateway,
    })
}

impl Resource for Network {
    fn to_json(&self, ctx: &Ctx<'_>) -> Value {
        network_json(ctx.world, self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_name(name, 63)
    }
    fn apply_update(&mut self, update: &Update) {
        if let Some(expose) = update.expose_routes_to_vswitch {
            self.expose_routes_to_vswitch = expose;
        }
    }
}

pub(crate) async fn create(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreateNetwork>,
) -> ApiResult {
    let name = required(b.name, "name")?;
    check_name(&name, 63)?;
    check_labels(&b.labels)?;
    let range = cidr_field("ip_range", &required(b.ip_range, "ip_range")?)?;
    if !range.is_private() || range.prefix > 30 {
        return Err(ApiError::invalid_field(
            "ip_range",
            vec![format!(
                "{range} must be a private block (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) of prefix at most /30"
            )],
        ));
    }
    hz.with_world(&account, |ctx| {
        ensure_name_free(&ctx.world.networks, &name, None)?;
        let mut net = Network {
            id: 0,
            name,
            ip_range: range,
            subnets: Vec::new(),
            routes: Vec::new(),
            protect_delete: false,
            labels: b.labels.unwrap_or_default(),
            created: ctx.now,
            expose_routes_to_vswitch: b.expose_routes_to_vswitch.unwrap_or(false),
        };
        for s in b.subnets.unwrap_or_default() {
            let subnet = check_subnet(&net, s)?;
            net.subnets.push(subnet);
        }
        for r in b.routes.unwrap_or_default() {
            let route = check_route(&net, r)?;
            net.routes.push(route);
        }
        net.id = ctx.ids.network();
        let body = json!({"network": network_json(ctx.world, &net)});
        ctx.world.networks.insert(net.id, net);
        created(body)
    })
}

pub(crate) async fn list(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let listing = Listing::parse(&q, &["id", "name", "created"])?;
    list_page(&hz, &account, &q, listing, |_: &Network| true)
}

pub(crate) async fn delete(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        let n = find::<Network>(ctx, id)?;
        if n.protect_delete {
            return Err(ApiError::protected("network"));
        }
        ctx.ensure_unlocked("network", id)?;
        ctx.world.networks.remove(&id);
        for s in ctx.world.servers.values_mut() {
            s.private_net.retain(|p| p.network != id);
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    })
}

/// `POST /networks/{id}/actions/{name}`.
pub(crate) async fn action(
    State(hz): Hs,
    account: Account,
    IdAndName(id, name): IdAndName,
    Body(body): Body<Value>,
) -> ApiResult {
    let quick = hz.core.timings.quick;
    hz.with_world(&account, |ctx| {
        let net = find::<Network>(ctx, id)?.clone();
        let command: &'static str = match name.as_str() {
            "add_subnet" => "add_subnet",
            "delete_subnet" => "delete_subnet",
            "add_route" => "add_route",
            "delete_route" => "delete_route",
            "change_ip_range" => "change_ip_range",
            "change_protection" => "change_protection",
            _ => {
                return Err(not_found_route());
            }
        };
        ctx.ensure_unlocked("network", id)?;
        let mut changed = net.clone();
        match command {
            "add_subnet" => {
                let s = check_subnet(&changed, decode::<SubnetReq>(body)?)?;
                changed.subnets.push(s);
            }
            "delete_subnet" => {
                let r = decode::<IpRange>(body)?;
                let range = cidr_field("ip_range", &required(r.ip_range, "ip_range")?)?;
                let before = changed.subnets.len();
                changed.subnets.retain(|s| s.ip_range != range);
                if changed.subnets.len() == before {
                    return Err(ApiError::invalid_field(
                        "ip_range",
                        vec![format!("network has no subnet {range}")],
                    ));
                }
                let in_use = ctx.world.servers.values().any(|s| {
                    s.private_net
                        .iter()
                        .any(|p| p.network == id && range.contains(p.ip))
                });
                if in_use {
                    return Err(ApiError::unprocessable(
                        "service_error",
                        format!("subnet {range} still has servers attached"),
                    ));
                }
            }
            "add_route" => {
                let r = check_route(&changed, decode::<RouteReq>(body)?)?;
                if changed.routes.contains(&r) {
                    return Err(ApiError::invalid("route already exists"));
                }
                changed.routes.push(r);
            }
            "delete_route" => {
                let r = check_route(&changed, decode::<RouteReq>(body)?)?;
                let before = changed.routes.len();
                changed.routes.retain(|x| *x != r);
                if changed.routes.len() == before {
                    return Err(ApiError::invalid("network has no such route"));
                }
            }
            "change_ip_range" => {
                let r = decode::<IpRange>(body)?;
                let range = cidr_field("ip_range", &required(r.ip_range, "ip_range")?)?;
                if !range.contains_block(net.ip_range) || !range.is_private() {
                    return Err(ApiError::invalid_field(
                        "ip_range",
                        vec![format!(
                            "{range} must be a private block containing {}",
                            net.ip_range
                        )],
                    ));
                }
                changed.ip_range = range;
            }
            _ => {
                let p = decode::<Protection>(body)?;
                if let Some(d) = p.delete {
                    changed.protect_delete = d;
                }
            }
        }
        let (action, fails) = ctx.start_action(command, vec![(id, "network")], quick);
        if !fails {
            ctx.world.networks.insert(id, changed);
        }
        created(json!({"action": ctx.action_json(action)}))
    })
}
