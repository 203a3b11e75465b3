//! `/v2/instances`: create, list, read, update, delete, power, reinstall, user data,
//! addresses with their reverse DNS, and VPC membership.
//!
//! Lifecycle (lazy, from the emulated clock and `Timings::create` = D): the first quarter
//! of D `pending`/`none`, the second `pending`/`locked`, then `active`/`installingbooting`
//! with its addresses, and `active`/`ok` from D on. Delete and reinstall are refused with
//! the real API's 500 "Server is currently locked" while `none` or `locked`. A failure
//! token (`POST /_emu/fail-next-action`) is spent by whichever comes first: an instance
//! create, whose install then never finishes (`installingbooting` and `stopped` forever), or
//! a start or halt, which answers 500.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use chrono::{DateTime, Utc};
use rand::Rng;
use rand::distr::Alphanumeric;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::Vultr;
use super::catalog::Plan;
use super::http::{Body, Id, Params, Reply, VultrError, json, no_content};
use super::page::{Order, paginate};
use super::wire::{
    self, CreateInstance, InstanceIds, Reinstall, Reverse, UpdateInstance, VpcId, given,
};
use super::world::{Alloc, Instance, Phase, Secret, Source, Vpc, VpcPort, World, default_ptr};

type Shared = State<Arc<Vultr>>;

const VPC2_GONE: &str = "VPC 2.0 is no longer supported. Use VPC networks (/v2/vpcs) instead.";

pub(crate) fn instance_not_found() -> VultrError {
    VultrError::not_found("instance not found")
}

fn locked(what: &str) -> VultrError {
    VultrError::internal(format!("{what}: Server is currently locked"))
}

/// Base64 with or without padding.
const LENIENT_B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Checks base64 user data and returns it in standard padded form.
fn user_data(raw: &str) -> Result<String, VultrError> {
    let compact: String = raw.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = LENIENT_B64.decode(compact.as_bytes()).map_err(|_| {
        VultrError::bad_request("Invalid user_data: the value must be base64 encoded.")
    })?;
    Ok(STANDARD.encode(bytes))
}

/// Tags without empty strings and duplicates, first occurrence kept.
fn clean_tags(tags: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

fn password() -> Secret {
    Secret(
        rand::rng()
            .sample_iter(&Alphanumeric)
            .take(16)
            .map(char::from)
            .collect(),
    )
}

fn render(v: &Vultr, i: &Instance, now: DateTime<Utc>, with_password: bool) -> Value {
    let phase = i.phase(now, v.core.timings.create);
    wire::instance(i, v.catalog.plan(&i.plan), phase, with_password)
}

/// What an instance has cost so far: hourly per started hour, capped at the monthly price.
pub(crate) fn charge(i: &Instance, plan: Option<&Plan>, now: DateTime<Utc>) -> Decimal {
    let Some(plan) = plan else {
        return Decimal::ZERO;
    };
    let seconds = (now - i.created).num_seconds().max(0);
    let hours = Decimal::from((seconds + 3599) / 3600);
    (plan.hourly * hours).min(plan.monthly)
}

/// Checks that `plan` may be ordered in `region` now.
fn check_stock(v: &Vultr, plan: &Plan, region: &str) -> Result<(), VultrError> {
    let faults = v.core.faults();
    let in_stock = plan.locations.iter().any(|l| l == region)
        && !faults.is_sold_out(&plan.id, region)
        && !faults.is_disabled(region);
    drop(faults);
    if in_stock {
        Ok(())
    } else {
        Err(VultrError::bad_request(
            "Plan is not available in the selected region.",
        ))
    }
}

fn source(v: &Vultr, b: &CreateInstance) -> Result<Source, VultrError> {
    if given(&b.snapshot_id).is_some() {
        return Err(VultrError::bad_request("Invalid snapshot ID."));
    }
    if given(&b.iso_id).is_some() {
        return Err(VultrError::bad_request("Invalid ISO ID."));
    }
    let application = |app_id: u64, image_id: &str| Source {
        os_id: 186,
        os_name: "Application".to_string(),
        app_id,
        image_id: image_id.to_string(),
    };
    if let Some(app_id) = b.app_id.filter(|&a| a > 0) {
        return Ok(application(app_id, ""));
    }
    if let Some(image) = given(&b.image_id) {
        return Ok(application(0, image));
    }
    match b.os_id.filter(|&o| o > 0) {
        None => Err(VultrError::bad_request(
            "You must specify one of os_id, iso_id, snapshot_id, app_id or image_id.",
        )),
        Some(os_id) => match v.catalog.os(os_id) {
            Some(os)
                if !matches!(
                    os.family.as_str(),
                    "iso" | "snapshot" | "backup" | "application"
                ) =>
            {
                Ok(Source {
                    os_id,
                    os_name: os.name.clone(),
                    app_id: 0,
                    image_id: String::new(),
                })
            }
            Some(_) | None => Err(VultrError::bad_request("Invalid operating system chosen.")),
        },
    }
}

/// Attaches `inst` to the VPC `vpc_id` of the same world.
fn join_vpc(
    vpcs: &mut std::collections::BTreeMap<String, Vpc>,
    alloc: &mut Alloc,
    inst: &mut Instance,
    vpc_id: &str,
) -> Result<(), VultrError> {
    let vpc = vpcs
        .get_mut(vpc_id)
        .ok_or_else(|| VultrError::bad_request(format!("Invalid VPC ID: {vpc_id}")))?;
    if vpc.region != inst.region {
        return Err(VultrError::bad_request(
            "The VPC network and the instance must be in the same region.",
        ));
    }
    if inst.vpcs.iter().any(|p| p.vpc_id == vpc_id) {
        return Err(VultrError::bad_request(
            "The instance is already attached to this VPC network.",
        ));
    }
    let ip = vpc
        .next_ip()
        .ok_or_else(|| VultrError::bad_request("The VPC network has no free addresses."))?;
    inst.vpcs.push(VpcPort {
        vpc_id: vpc_id.to_string(),
        mac: alloc.mac(),
        ip,
    });
    Ok(())
}

fn leave_vpc(inst: &mut Instance, vpc_id: &str) -> Result<(), VultrError> {
    let before = inst.vpcs.len();
    inst.vpcs.retain(|p| p.vpc_id != vpc_id);
    if inst.vpcs.len() == before {
        return Err(VultrError::bad_request(
            "The instance is not attached to this VPC network.",
        ));
    }
    Ok(())
}

/// The region's VPC used by `enable_vpc`: the oldest one, created when there is none.
fn default_vpc(w: &mut World, alloc: &mut Alloc, region: &str, now: DateTime<Utc>) -> String {
    if let Some(vpc) = w.vpcs.values().find(|p| p.region == region) {
        return vpc.id.clone();
    }
    let id = alloc.uuid();
    let subnet = alloc.vpc_subnet();
    w.vpcs.insert(
        id.clone(),
        Vpc {
            id: id.clone(),
            region: region.to_string(),
            description: "Default VPC".to_string(),
            subnet,
            mask: 20,
            created: now,
            next_host: 3,
        },
    );
    id
}

/// `POST /v2/instances` → 202 `{"instance"}`.
pub(crate) async fn create(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<CreateInstance>,
) -> Reply {
    let account = v.account(&headers)?;
    let region = given(&b.region)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: region."))?
        .to_string();
    if v.catalog.region(&region).is_none() {
        return Err(VultrError::bad_request("Invalid region chosen."));
    }
    let plan_id = given(&b.plan)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: plan."))?;
    let plan = v
        .catalog
        .plan(plan_id)
        .ok_or_else(|| VultrError::bad_request("Invalid plan chosen."))?;
    check_stock(&v, plan, &region)?;
    if b.enable_vpc2 == Some(true) || b.attach_vpc2.as_ref().is_some_and(|l| !l.is_empty()) {
        return Err(VultrError::bad_request(VPC2_GONE));
    }
    let source = source(&v, &b)?;
    let user_data = given(&b.user_data).map(user_data).transpose()?;
    let backups = match given(&b.backups) {
        None | Some("disabled") => false,
        Some("enabled") => true,
        Some(other) => {
            return Err(VultrError::bad_request(format!(
                "Invalid backups value {other:?}: use \"enabled\" or \"disabled\"."
            )));
        }
    };
    let user_scheme = match given(&b.user_scheme) {
        None => "root",
        Some("root") => "root",
        Some("limited") => "limited",
        Some(other) => {
            return Err(VultrError::bad_request(format!(
                "Invalid user_scheme {other:?}: use \"root\" or \"limited\"."
            )));
        }
    };
    let ipv6 = b.enable_ipv6 == Some(true) || plan.ipv6_only();
    let v6_only = ipv6 && b.disable_public_ipv4 == Some(true);
    let public_v4 = !(plan.ipv6_only() || v6_only);
    let now = v.core.now();
    let label = b.label.clone().unwrap_or_default();
    let hostname = given(&b.hostname)
        .or(given(&b.label))
        .unwrap_or("vultr.guest")
        .to_string();
    let tags = clean_tags(
        b.tags
            .iter()
            .flatten()
            .chain(b.tag.iter())
            .cloned()
            .collect(),
    );
    let body = v.world(&account, |w, alloc| -> Result<Value, VultrError> {
        let ssh_keys = b.sshkey_id.clone().unwrap_or_default();
        if let Some(unknown) = ssh_keys.iter().find(|k| !w.ssh_keys.contains_key(*k)) {
            return Err(VultrError::bad_request(format!(
                "Invalid SSH key ID: {unknown}"
            )));
        }
        let reserved = match given(&b.reserved_ipv4) {
            None => None,
            Some(rid) => {
                let r = w
                    .reserved_ips
                    .values()
                    .find(|r| r.id == rid || r.subnet == rid)
                    .filter(|r| !r.v6)
                    .ok_or_else(|| VultrError::bad_request("Invalid reserved IPv4 ID."))?;
                if r.region != region {
                    return Err(VultrError::bad_request(
                        "The reserved IP and the instance must be in the same region.",
                    ));
                }
                if r.instance_id.is_some() {
                    return Err(VultrError::bad_request(
                        "Floating IPv4 address is already attached to another server",
                    ));
                }
                Some(r.id.clone())
            }
        };
        let mut vpc_ids = b.attach_vpc.clone().unwrap_or_default();
        for id in &vpc_ids {
            match w.vpcs.get(id) {
                None => return Err(VultrError::bad_request(format!("Invalid VPC ID: {id}"))),
                Some(vpc) if vpc.region != region => {
                    return Err(VultrError::bad_request(
                        "The VPC network and the instance must be in the same region.",
                    ));
                }
                Some(_) => {}
            }
        }
        if b.enable_vpc == Some(true) && vpc_ids.is_empty() {
            vpc_ids.push(default_vpc(w, alloc, &region, now));
        }
        let install_fails = v.core.faults().take_action_failure();
        let v4 = match (&reserved, public_v4) {
            (_, false) => None,
            (Some(rid), true) => w.reserved_ips[rid].subnet.parse::<Ipv4Addr>().ok(),
            (None, true) => Some(alloc.ipv4()),
        };
        let id = alloc.uuid();
        let mut inst = Instance {
            id: id.clone(),
            region: region.clone(),
            plan: plan.id.clone(),
            source,
            label,
            hostname,
            tags,
            user_data: user_data.unwrap_or_default(),
            firewall_group_id: b.firewall_group_id.clone().unwrap_or_default(),
            user_scheme: user_scheme.to_string(),
            backups,
            ddos_protection: b.ddos_protection == Some(true),
            created: now,
            install_started: now,
            reinstall: false,
            install_fails,
            powered: true,
            v4,
            v6_net: ipv6.then(|| alloc.ipv6_net()),
            vpcs: Vec::new(),
            reverse_v4: Default::default(),
            reverse_v6: Default::default(),
            default_password: password(),
            kvm_token: alloc.uuid().replace('-', ""),
            boot: 1,
        };
        for vpc_id in &vpc_ids {
            join_vpc(&mut w.vpcs, alloc, &mut inst, vpc_id)?;
        }
        if let Some(r) = reserved.and_then(|rid| w.reserved_ips.get_mut(&rid)) {
            r.instance_id = Some(id.clone());
        }
        let body = render(&v, &inst, now, true);
        w.instances.insert(id, inst);
        Ok(body)
    })?;
    json(StatusCode::ACCEPTED, json!({"instance": body}))
}

/// `GET /v2/instances[?tag=&label=&main_ip=&region=&firewall_group_id=]`.
pub(crate) async fn list(State(v): Shared, headers: HeaderMap, params: Params) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    let items = v.world(&account, |w, _| {
        w.instances
            .values()
            .filter(|i| {
                let phase = i.phase(now, v.core.timings.create);
                let shown_ip =
                    i.v4.filter(|_| phase.has_addresses())
                        .map(|ip| ip.to_string())
                        .unwrap_or_default();
                params
                    .get("tag")
                    .is_none_or(|t| i.tags.iter().any(|x| x == t))
                    && params.get("label").is_none_or(|l| i.label == l)
                    && params.get("main_ip").is_none_or(|m| shown_ip == m)
                    && params.get("region").is_none_or(|r| i.region == r)
                    && params
                        .get("firewall_group_id")
                        .is_none_or(|f| i.firewall_group_id == f)
            })
            .map(|i| (i.id.clone(), render(&v, i, now, false)))
            .collect::<Vec<_>>()
    });
    let page = paginate(items, &params, Order::ByKey)?;
    json(
        StatusCode::OK,
        json!({"instances": page.items, "meta": page.meta()}),
    )
}

/// Runs `f` on one instance of the caller's world, or 404.
fn with_instance<R>(
    v: &Vultr,
    headers: &HeaderMap,
    id: &str,
    f: impl FnOnce(&mut Instance, DateTime<Utc>) -> Result<R, VultrError>,
) -> Result<R, VultrError> {
    let account = v.account(headers)?;
    let now = v.core.now();
    v.world(&account, |w, _| {
        let inst = w.instances.get_mut(id).ok_or_else(instance_not_found)?;
        f(inst, now)
    })
}

/// `GET /v2/instances/{id}`.
pub(crate) async fn get_one(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let body = with_instance(&v, &headers, &id, |i, now| Ok(render(&v, i, now, false)))?;
    json(StatusCode::OK, json!({"instance": body}))
}

/// `PATCH /v2/instances/{id}` → 202 `{"instance"}`.
pub(crate) async fn update(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<UpdateInstance>,
) -> Reply {
    let account = v.account(&headers)?;
    let changes_os = [&b.os_id, &b.app_id, &b.image_id].iter().any(|f| {
        f.as_ref()
            .is_some_and(|x| !(x.is_null() || x == &json!(0) || x == &json!("")))
    });
    if changes_os {
        return Err(VultrError::bad_request(
            "Changing the operating system or application is not supported here; use reinstall.",
        ));
    }
    if b.enable_vpc2 == Some(true)
        || b.attach_vpc2.as_ref().is_some_and(|l| !l.is_empty())
        || b.detach_vpc2.as_ref().is_some_and(|l| !l.is_empty())
    {
        return Err(VultrError::bad_request(VPC2_GONE));
    }
    let user_data = given(&b.user_data).map(user_data).transpose()?;
    let backups = match given(&b.backups) {
        None => None,
        Some("enabled") => Some(true),
        Some("disabled") => Some(false),
        Some(other) => {
            return Err(VultrError::bad_request(format!(
                "Invalid backups value {other:?}: use \"enabled\" or \"disabled\"."
            )));
        }
    };
    let now = v.core.now();
    let body = v.world(&account, |w, alloc| -> Result<Value, VultrError> {
        let region = w
            .instances
            .get(&id)
            .ok_or_else(instance_not_found)?
            .region
            .clone();
        let new_plan = match given(&b.plan) {
            None => None,
            Some(p) => {
                let plan = v
                    .catalog
                    .plan(p)
                    .ok_or_else(|| VultrError::bad_request("Invalid plan chosen."))?;
                check_stock(&v, plan, &region)?;
                Some(plan.id.clone())
            }
        };
        let mut inst = w.instances[&id].clone();
        if let Some(label) = &b.label {
            inst.label = label.clone();
        }
        if let Some(tags) = &b.tags {
            inst.tags = clean_tags(tags.clone());
        }
        if let Some(tag) = &b.tag {
            let mut tags = inst.tags.clone();
            tags.push(tag.clone());
            inst.tags = clean_tags(tags);
        }
        if let Some(plan) = new_plan {
            inst.plan = plan;
        }
        if let Some(fw) = &b.firewall_group_id {
            inst.firewall_group_id = fw.clone();
        }
        if let Some(ud) = user_data {
            inst.user_data = ud;
        }
        if let Some(on) = backups {
            inst.backups = on;
        }
        if let Some(ddos) = b.ddos_protection {
            inst.ddos_protection = ddos;
        }
        if b.enable_ipv6 == Some(true) && inst.v6_net.is_none() {
            inst.v6_net = Some(alloc.ipv6_net());
        }
        for vpc_id in b.detach_vpc.iter().flatten() {
            leave_vpc(&mut inst, vpc_id)?;
        }
        for vpc_id in b.attach_vpc.iter().flatten() {
            join_vpc(&mut w.vpcs, alloc, &mut inst, vpc_id)?;
        }
        let body = render(&v, &inst, now, false);
        w.instances.insert(id.clone(), inst);
        Ok(body)
    })?;
    json(StatusCode::ACCEPTED, json!({"instance": body}))
}

/// `DELETE /v2/instances/{id}` → 204; 500 "locked" while the install has not begun.
pub(crate) async fn delete(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    v.world(&account, |w, _| -> Result<(), VultrError> {
        let inst = w.instances.get(&id).ok_or_else(instance_not_found)?;
        if inst.phase(now, v.core.timings.create).is_locked() {
            return Err(locked("Unable to destroy server: Unable to remove VM"));
        }
        let cost = charge(inst, v.catalog.plan(&inst.plan), now);
        w.closed_charges += cost;
        w.instances.remove(&id);
        for r in w.reserved_ips.values_mut() {
            if r.instance_id.as_deref() == Some(id.as_str()) {
                r.instance_id = None;
            }
        }
        for b in w.blocks.values_mut() {
            if b.attached.as_deref() == Some(id.as_str()) {
                b.attached = None;
            }
        }
        Ok(())
    })?;
    no_content()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    Start,
    Halt,
    Reboot,
}

impl Power {
    fn verb(self) -> &'static str {
        match self {
            Power::Start => "start",
            Power::Halt => "halt",
            Power::Reboot => "reboot",
        }
    }

    /// Start and halt spend a failure token; reboot does not.
    fn may_fail(self) -> bool {
        match self {
            Power::Start | Power::Halt => true,
            Power::Reboot => false,
        }
    }

    fn apply(self, i: &mut Instance) {
        match self {
            Power::Start | Power::Reboot => i.powered = true,
            Power::Halt => i.powered = false,
        }
    }
}

fn power(v: &Vultr, headers: &HeaderMap, ids: &[String], action: Power) -> Reply {
    let account = v.account(headers)?;
    if ids.is_empty() {
        return Err(VultrError::bad_request(
            "Missing required parameter: instance_ids.",
        ));
    }
    v.world(&account, |w, _| -> Result<(), VultrError> {
        if ids.iter().any(|id| !w.instances.contains_key(id)) {
            return Err(instance_not_found());
        }
        if action.may_fail() && v.core.faults().take_action_failure() {
            return Err(VultrError::internal(format!(
                "Unable to {} server: an internal error occurred, please try again.",
                action.verb()
            )));
        }
        for id in ids {
            if let Some(i) = w.instances.get_mut(id) {
                action.apply(i);
            }
        }
        Ok(())
    })?;
    no_content()
}

/// `POST /v2/instances/{id}/start` → 204.
pub(crate) async fn start(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    power(&v, &headers, &[id], Power::Start)
}

/// `POST /v2/instances/{id}/halt` → 204.
pub(crate) async fn halt(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    power(&v, &headers, &[id], Power::Halt)
}

/// `POST /v2/instances/{id}/reboot` → 204.
pub(crate) async fn reboot(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    power(&v, &headers, &[id], Power::Reboot)
}

/// `POST /v2/instances/start {"instance_ids"}` → 204.
pub(crate) async fn bulk_start(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<InstanceIds>,
) -> Reply {
    power(
        &v,
        &headers,
        &b.instance_ids.unwrap_or_default(),
        Power::Start,
    )
}

/// `POST /v2/instances/halt {"instance_ids"}` → 204.
pub(crate) async fn bulk_halt(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<InstanceIds>,
) -> Reply {
    power(
        &v,
        &headers,
        &b.instance_ids.unwrap_or_default(),
        Power::Halt,
    )
}

/// `POST /v2/instances/reboot {"instance_ids"}` → 204.
pub(crate) async fn bulk_reboot(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<InstanceIds>,
) -> Reply {
    power(
        &v,
        &headers,
        &b.instance_ids.unwrap_or_default(),
        Power::Reboot,
    )
}

/// `POST /v2/instances/{id}/reinstall {hostname?}` → 202 `{"instance"}`.
pub(crate) async fn reinstall(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Reinstall>,
) -> Reply {
    let body = with_instance(&v, &headers, &id, |i, now| {
        if i.phase(now, v.core.timings.create).is_locked() {
            return Err(locked("Unable to reinstall server"));
        }
        if let Some(h) = given(&b.hostname) {
            i.hostname = h.to_string();
        }
        i.install_started = now;
        i.reinstall = true;
        i.boot += 1;
        i.install_fails = false;
        i.powered = true;
        Ok(render(&v, i, now, false))
    })?;
    json(StatusCode::ACCEPTED, json!({"instance": body}))
}

/// `GET /v2/instances/{id}/user-data`.
pub(crate) async fn get_user_data(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
) -> Reply {
    let data = with_instance(&v, &headers, &id, |i, _| Ok(i.user_data.clone()))?;
    json(StatusCode::OK, json!({"user_data": {"data": data}}))
}

/// Public IPv4 addresses of an instance once assigned: main first, then attached
/// reserved IPs.
fn public_v4s(w: &World, i: &Instance, phase: Phase) -> Vec<(Ipv4Addr, &'static str)> {
    let mut out = Vec::new();
    if !phase.has_addresses() {
        return out;
    }
    if let Some(ip) = i.v4 {
        out.push((ip, "main_ip"));
    }
    for r in w.reserved_ips.values() {
        if r.instance_id.as_deref() == Some(i.id.as_str())
            && !r.v6
            && let Ok(ip) = r.subnet.parse::<Ipv4Addr>()
            && Some(ip) != i.v4
        {
            out.push((ip, "secondary_ip"));
        }
    }
    out
}

/// `GET /v2/instances/{id}/ipv4`.
pub(crate) async fn list_ipv4(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    params: Params,
) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    let items =
        v.world(
            &account,
            |w, _| -> Result<Vec<(String, Value)>, VultrError> {
                let i = w.instances.get(&id).ok_or_else(instance_not_found)?;
                let phase = i.phase(now, v.core.timings.create);
                let mut items: Vec<(String, Value)> = public_v4s(w, i, phase)
            .into_iter()
            .map(|(ip, kind)| {
                let reverse = i.reverse_v4.get(&ip).cloned().unwrap_or_else(|| default_ptr(ip));
                let gateway = super::world::gateway_of(ip).to_string();
                (
                    ip.to_string(),
                    json!({"ip": ip.to_string(), "netmask": "255.255.254.0", "gateway": gateway,
                           "type": kind, "reverse": reverse}),
                )
            })
            .collect();
                for port in &i.vpcs {
                    let mask = w.vpcs.get(&port.vpc_id).map_or(20, |p| p.mask);
                    let netmask = Ipv4Addr::from(u32::MAX << (32 - u32::from(mask)));
                    items.push((
                port.ip.to_string(),
                json!({"ip": port.ip.to_string(), "netmask": netmask.to_string(), "gateway": "",
                       "type": "private", "reverse": port.ip.to_string()}),
            ));
                }
                Ok(items)
            },
        )?;
    let page = paginate(items, &params, Order::Listed)?;
    json(
        StatusCode::OK,
        json!({"ipv4s": page.items, "meta": page.meta()}),
    )
}

fn reverse_name(b: &Reverse) -> Result<String, VultrError> {
    given(&b.reverse)
        .map(str::to_string)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: reverse."))
}

fn body_ip(b: &Reverse) -> Result<IpAddr, VultrError> {
    let raw =
        given(&b.ip).ok_or_else(|| VultrError::bad_request("Missing required parameter: ip."))?;
    raw.parse()
        .map_err(|_| VultrError::bad_request(format!("Invalid IP address: {raw}")))
}

fn set_v4_reverse(
    v: &Vultr,
    headers: &HeaderMap,
    id: &str,
    b: &Reverse,
    ptr: Option<String>,
) -> Reply {
    let account = v.account(headers)?;
    let ip = match body_ip(b)? {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(ip) => {
            return Err(VultrError::bad_request(format!(
                "Invalid IPv4 address: {ip}"
            )));
        }
    };
    let now = v.core.now();
    v.world(&account, |w, _| -> Result<(), VultrError> {
        let i = w.instances.get(id).ok_or_else(instance_not_found)?;
        let phase = i.phase(now, v.core.timings.create);
        if !public_v4s(w, i, phase).iter().any(|(a, _)| *a == ip) {
            return Err(VultrError::bad_request(format!(
                "Invalid IP address: {ip} does not belong to this instance."
            )));
        }
        if let Some(i) = w.instances.get_mut(id) {
            match &ptr {
                Some(name) => i.reverse_v4.insert(ip, name.clone()),
                None => i.reverse_v4.remove(&ip),
            };
        }
        Ok(())
    })?;
    no_content()
}

/// `POST /v2/instances/{id}/ipv4/reverse {ip, reverse}` → 204.
pub(crate) async fn set_reverse_v4(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Reverse>,
) -> Reply {
    let ptr = reverse_name(&b)?;
    set_v4_reverse(&v, &headers, &id, &b, Some(ptr))
}

/// `POST /v2/instances/{id}/ipv4/reverse/default {ip}` → 204.
pub(crate) async fn default_reverse_v4(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Reverse>,
) -> Reply {
    set_v4_reverse(&v, &headers, &id, &b, None)
}

/// `GET /v2/instances/{id}/ipv6`.
pub(crate) async fn list_ipv6(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    params: Params,
) -> Reply {
    let items = with_instance(&v, &headers, &id, |i, now| {
        let up = i.phase(now, v.core.timings.create).has_addresses();
        Ok(match (up, i.v6_net, i.v6_main()) {
            (true, Some(net), Some(main)) => vec![(
                main.to_string(),
                json!({"ip": main.to_string(), "network": net.to_string(), "network_size": 64,
                       "type": "main_ip"}),
            )],
            _ => Vec::new(),
        })
    })?;
    let page = paginate(items, &params, Order::Listed)?;
    json(
        StatusCode::OK,
        json!({"ipv6s": page.items, "meta": page.meta()}),
    )
}

/// `GET /v2/instances/{id}/ipv6/reverse`.
pub(crate) async fn list_reverse_v6(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
) -> Reply {
    let list = with_instance(&v, &headers, &id, |i, _| {
        Ok(i.reverse_v6
            .iter()
            .map(|(ip, ptr)| json!({"ip": ip.to_string(), "reverse": ptr}))
            .collect::<Vec<_>>())
    })?;
    json(StatusCode::OK, json!({"reverse_ipv6s": list}))
}

fn v6_of(i: &Instance, ip: IpAddr) -> Result<Ipv6Addr, VultrError> {
    match ip {
        IpAddr::V6(ip) if i.owns_v6(ip) => Ok(ip),
        other => Err(VultrError::bad_request(format!(
            "Invalid IPv6 address: {other} is not in this instance's IPv6 network."
        ))),
    }
}

/// `POST /v2/instances/{id}/ipv6/reverse {ip, reverse}` → 204.
pub(crate) async fn set_reverse_v6(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Reverse>,
) -> Reply {
    let ptr = reverse_name(&b)?;
    let ip = body_ip(&b)?;
    with_instance(&v, &headers, &id, |i, _| {
        let ip = v6_of(i, ip)?;
        i.reverse_v6.insert(ip, ptr);
        Ok(())
    })?;
    no_content()
}

/// `DELETE /v2/instances/{id}/ipv6/reverse/{ip}` → 204.
pub(crate) async fn delete_reverse_v6(
    State(v): Shared,
    headers: HeaderMap,
    Id((id, raw)): Id<(String, String)>,
) -> Reply {
    v.account(&headers)?;
    let ip: IpAddr = raw
        .parse()
        .map_err(|_| VultrError::bad_request(format!("Invalid IPv6 address: {raw}")))?;
    with_instance(&v, &headers, &id, |i, _| {
        let ip = v6_of(i, ip)?;
        i.reverse_v6.remove(&ip);
        Ok(())
    })?;
    no_content()
}

/// `GET /v2/instances/{id}/vpcs`.
pub(crate) async fn list_vpcs(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    params: Params,
) -> Reply {
    let items = with_instance(&v, &headers, &id, |i, _| {
        Ok(i.vpcs
            .iter()
            .map(|p| (p.vpc_id.clone(), wire::vpc_port(p)))
            .collect::<Vec<_>>())
    })?;
    let page = paginate(items, &params, Order::Listed)?;
    json(
        StatusCode::OK,
        json!({"vpcs": page.items, "meta": page.meta()}),
    )
}

fn vpc_id(b: &VpcId) -> Result<String, VultrError> {
    given(&b.vpc_id)
        .map(str::to_string)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: vpc_id."))
}

/// `POST /v2/instances/{id}/vpcs/attach {vpc_id}` → 204.
pub(crate) async fn attach_vpc(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<VpcId>,
) -> Reply {
    let account = v.account(&headers)?;
    let vpc = vpc_id(&b)?;
    v.world(&account, |w, alloc| -> Result<(), VultrError> {
        let inst = w.instances.get_mut(&id).ok_or_else(instance_not_found)?;
        join_vpc(&mut w.vpcs, alloc, inst, &vpc)
    })?;
    no_content()
}

/// `POST /v2/instances/{id}/vpcs/detach {vpc_id}` → 204.
pub(crate) async fn detach_vpc(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<VpcId>,
) -> Reply {
    let vpc = vpc_id(&b)?;
    with_instance(&v, &headers, &id, |i, _| leave_vpc(i, &vpc))?;
    no_content()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_keep_order_and_drop_duplicates() {
        let tags = clean_tags(vec!["b".into(), "a".into(), "b".into(), String::new()]);
        assert_eq!(tags, vec!["b".to_string(), "a".to_string()]);
    }

    #[test]
    fn user_data_must_be_base64() {
        assert_eq!(user_data("aGVsbG8").unwrap(), "aGVsbG8=");
        assert!(user_data("not base64!").is_err());
    }
}
