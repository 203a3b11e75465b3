//! `/v2/reserved-ips` (floating addresses), `/v2/vpcs` (private networks) and the retired
//! `/v2/vpc2`.
//!
//! Rules: a reserved IP attaches only to an instance of its own region and to one instance
//! at a time ("Floating IPv4 address is already attached to another server"); a VPC cannot
//! be deleted while an instance is attached to it; every VPC 2.0 route answers 400 "no
//! longer supported", as the real API does since VPC 2.0 was retired.

use std::net::Ipv4Addr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use super::Vultr;
use super::http::{Body, Id, Params, Reply, VultrError, json, no_content};
use super::page::{Order, paginate};
use super::wire::{
    self, ConvertReservedIp, CreateReservedIp, InstanceRef, Relabel, VpcBody, given,
};
use super::world::{ReservedIp, Vpc};

type Shared = State<Arc<Vultr>>;

fn reserved_not_found() -> VultrError {
    VultrError::not_found("Invalid reserved-ip ID")
}

fn vpc_not_found() -> VultrError {
    VultrError::not_found("Invalid VPC ID")
}

fn known_region(v: &Vultr, region: &Option<String>) -> Result<String, VultrError> {
    let region = given(region)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: region."))?;
    if v.catalog.region(region).is_none() {
        return Err(VultrError::bad_request("Invalid region chosen."));
    }
    Ok(region.to_string())
}

/// `GET /v2/reserved-ips`.
pub(crate) async fn list_reserved(State(v): Shared, headers: HeaderMap, params: Params) -> Reply {
    let account = v.account(&headers)?;
    let items = v.world(&account, |w, _| {
        w.reserved_ips
            .values()
            .map(|r| (r.id.clone(), wire::reserved_ip(r)))
            .collect()
    });
    let page = paginate(items, &params, Order::ByKey)?;
    json(
        StatusCode::OK,
        json!({"reserved_ips": page.items, "meta": page.meta()}),
    )
}

/// `POST /v2/reserved-ips {region, ip_type, label}` → 201.
pub(crate) async fn create_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<CreateReservedIp>,
) -> Reply {
    let account = v.account(&headers)?;
    let region = known_region(&v, &b.region)?;
    let v6 = match given(&b.ip_type) {
        Some("v4") => false,
        Some("v6") => true,
        Some(other) => {
            return Err(VultrError::bad_request(format!(
                "Invalid ip_type {other:?}: use \"v4\" or \"v6\"."
            )));
        }
        None => {
            return Err(VultrError::bad_request(
                "Missing required parameter: ip_type.",
            ));
        }
    };
    let body = v.world(&account, |w, alloc| {
        let (subnet, subnet_size) = if v6 {
            (alloc.ipv6_net().to_string(), 64)
        } else {
            (alloc.ipv4().to_string(), 32)
        };
        let r = ReservedIp {
            id: alloc.uuid(),
            region,
            v6,
            subnet,
            subnet_size,
            label: b.label.clone().unwrap_or_default(),
            instance_id: None,
        };
        let body = wire::reserved_ip(&r);
        w.reserved_ips.insert(r.id.clone(), r);
        body
    });
    json(StatusCode::CREATED, json!({"reserved_ip": body}))
}

/// `POST /v2/reserved-ips/convert {ip_address, label}` → 201: an instance's main IPv4
/// becomes a reserved IP that stays attached to it.
pub(crate) async fn convert_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<ConvertReservedIp>,
) -> Reply {
    let account = v.account(&headers)?;
    let raw = given(&b.ip_address)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: ip_address."))?;
    let ip: Ipv4Addr = raw
        .parse()
        .map_err(|_| VultrError::bad_request(format!("Invalid IP address: {raw}")))?;
    let body = v.world(&account, |w, alloc| {
        if w.reserved_ips.values().any(|r| r.subnet == ip.to_string()) {
            return Err(VultrError::bad_request("IP address is already reserved."));
        }
        let inst = w
            .instances
            .values()
            .find(|i| i.v4 == Some(ip))
            .ok_or_else(|| {
                VultrError::bad_request(format!(
                    "Invalid IP address: {ip} is not the main IP of one of your instances."
                ))
            })?;
        let r = ReservedIp {
            id: alloc.uuid(),
            region: inst.region.clone(),
            v6: false,
            subnet: ip.to_string(),
            subnet_size: 32,
            label: b.label.clone().unwrap_or_default(),
            instance_id: Some(inst.id.clone()),
        };
        let body = wire::reserved_ip(&r);
        w.reserved_ips.insert(r.id.clone(), r);
        Ok(body)
    })?;
    json(StatusCode::CREATED, json!({"reserved_ip": body}))
}

/// `GET /v2/reserved-ips/{id}`.
pub(crate) async fn get_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
) -> Reply {
    let account = v.account(&headers)?;
    let body = v.world(&account, |w, _| {
        w.reserved_ips
            .get(&id)
            .map(wire::reserved_ip)
            .ok_or_else(reserved_not_found)
    })?;
    json(StatusCode::OK, json!({"reserved_ip": body}))
}

/// `PATCH /v2/reserved-ips/{id} {label}` → 200 `{"reserved_ip"}`.
pub(crate) async fn update_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Relabel>,
) -> Reply {
    let account = v.account(&headers)?;
    let body = v.world(&account, |w, _| {
        let r = w.reserved_ips.get_mut(&id).ok_or_else(reserved_not_found)?;
        if let Some(label) = &b.label {
            r.label = label.clone();
        }
        Ok(wire::reserved_ip(r))
    })?;
    json(StatusCode::OK, json!({"reserved_ip": body}))
}

/// `DELETE /v2/reserved-ips/{id}` → 204.
pub(crate) async fn delete_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        w.reserved_ips
            .remove(&id)
            .map(|_| ())
            .ok_or_else(reserved_not_found)
    })?;
    no_content()
}

/// `POST /v2/reserved-ips/{id}/attach {instance_id}` → 204.
pub(crate) async fn attach_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<InstanceRef>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let r = w.reserved_ips.get(&id).ok_or_else(reserved_not_found)?;
        let iid = given(&b.instance_id)
            .ok_or_else(|| VultrError::bad_request("Missing required parameter: instance_id."))?;
        let inst = w
            .instances
            .get(iid)
            .ok_or_else(|| VultrError::bad_request(format!("Invalid instance ID: {iid}")))?;
        if r.instance_id.is_some() {
            return Err(VultrError::bad_request(
                "Floating IPv4 address is already attached to another server",
            ));
        }
        if inst.region != r.region {
            return Err(VultrError::bad_request(
                "The reserved IP and the instance must be in the same region.",
            ));
        }
        let iid = inst.id.clone();
        if let Some(r) = w.reserved_ips.get_mut(&id) {
            r.instance_id = Some(iid);
        }
        Ok(())
    })?;
    no_content()
}

/// `POST /v2/reserved-ips/{id}/detach` → 204.
pub(crate) async fn detach_reserved(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let r = w.reserved_ips.get_mut(&id).ok_or_else(reserved_not_found)?;
        match r.instance_id.take() {
            Some(_) => Ok(()),
            None => Err(VultrError::bad_request(
                "The reserved IP is not attached to a server.",
            )),
        }
    })?;
    no_content()
}

/// `GET /v2/vpcs`.
pub(crate) async fn list_vpcs(State(v): Shared, headers: HeaderMap, params: Params) -> Reply {
    let account = v.account(&headers)?;
    let items = v.world(&account, |w, _| {
        w.vpcs
            .values()
            .map(|p| (p.id.clone(), wire::vpc(p)))
            .collect()
    });
    let page = paginate(items, &params, Order::ByKey)?;
    json(
        StatusCode::OK,
        json!({"vpcs": page.items, "meta": page.meta()}),
    )
}

/// A subnet chosen by the caller: a private, aligned IPv4 network of /8 to /29.
fn chosen_subnet(raw: &str, mask: Option<u8>) -> Result<(Ipv4Addr, u8), VultrError> {
    let ip: Ipv4Addr = raw
        .parse()
        .map_err(|_| VultrError::bad_request(format!("Invalid v4_subnet {raw:?}.")))?;
    let mask = mask.ok_or_else(|| {
        VultrError::bad_request("v4_subnet_mask is required together with v4_subnet.")
    })?;
    if !(8..=29).contains(&mask) {
        return Err(VultrError::bad_request(format!(
            "Invalid v4_subnet_mask {mask}: must be from 8 to 29."
        )));
    }
    if !ip.is_private() {
        return Err(VultrError::bad_request(format!(
            "Invalid v4_subnet {ip}: it must be a private (RFC 1918) network."
        )));
    }
    let net = u32::from(ip) & (u32::MAX << (32 - u32::from(mask)));
    if net != u32::from(ip) {
        return Err(VultrError::bad_request(format!(
            "Invalid v4_subnet {ip}/{mask}: the address is not the start of the network."
        )));
    }
    Ok((ip, mask))
}

/// `POST /v2/vpcs {region, description, v4_subnet, v4_subnet_mask}` → 201.
pub(crate) async fn create_vpc(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<VpcBody>,
) -> Reply {
    let account = v.account(&headers)?;
    let region = known_region(&v, &b.region)?;
    let chosen = given(&b.v4_subnet)
        .map(|s| chosen_subnet(s, b.v4_subnet_mask))
        .transpose()?;
    let now = v.core.now();
    let body = v.world(&account, |w, alloc| {
        let (subnet, mask) = chosen.unwrap_or_else(|| (alloc.vpc_subnet(), 20));
        let vpc = Vpc {
            id: alloc.uuid(),
            region,
            description: b.description.clone().unwrap_or_default(),
            subnet,
            mask,
            created: now,
            next_host: 3,
        };
        let body = wire::vpc(&vpc);
        w.vpcs.insert(vpc.id.clone(), vpc);
        body
    });
    json(StatusCode::CREATED, json!({"vpc": body}))
}

/// `GET /v2/vpcs/{id}`.
pub(crate) async fn get_vpc(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    let body = v.world(&account, |w, _| {
        w.vpcs.get(&id).map(wire::vpc).ok_or_else(vpc_not_found)
    })?;
    json(StatusCode::OK, json!({"vpc": body}))
}

/// `PUT /v2/vpcs/{id} {description}` → 204.
pub(crate) async fn update_vpc(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<VpcBody>,
) -> Reply {
    let account = v.account(&headers)?;
    let description = b
        .description
        .clone()
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: description."))?;
    v.world(&account, |w, _| {
        let vpc = w.vpcs.get_mut(&id).ok_or_else(vpc_not_found)?;
        vpc.description = description;
        Ok::<_, VultrError>(())
    })?;
    no_content()
}

/// `DELETE /v2/vpcs/{id}` → 204; refused while instances are attached.
pub(crate) async fn delete_vpc(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        if !w.vpcs.contains_key(&id) {
            return Err(vpc_not_found());
        }
        let attached = w
            .instances
            .values()
            .filter(|i| i.vpcs.iter().any(|p| p.vpc_id == id))
            .count();
        if attached > 0 {
            return Err(VultrError::bad_request(format!(
                "Unable to delete VPC network: {attached} instance(s) are still attached to this VPC network."
            )));
        }
        w.vpcs.remove(&id);
        Ok(())
    })?;
    no_content()
}

/// Every `/v2/vpc2` route and `/v2/instances/{id}/vpc2…`: 400, VPC 2.0 is retired.
pub(crate) async fn vpc2_gone(State(v): Shared, headers: HeaderMap) -> Reply {
    v.account(&headers)?;
    Err(VultrError::bad_request(
        "VPC 2.0 is no longer supported. Use VPC networks (/v2/vpcs) instead.",
    ))
}
