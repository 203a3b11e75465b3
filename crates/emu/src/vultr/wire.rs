//! Vultr wire shapes: request bodies as clients send them, and the JSON objects the
//! emulator answers with.
//!
//! Request bodies accept unknown fields (clients send fields the emulator does not model)
//! but reject wrong types. Zero numbers and empty strings count as absent, as govultr
//! leaves them out with `omitempty`. Objects follow the wire, not the stale OpenAPI schema:
//! an instance carries the flat `v6_network`, `v6_main_ip`, `v6_network_size`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::catalog::{Plan, money};
use super::world::{
    Block, Instance, Phase, ReservedIp, SshKey, Vpc, VpcPort, gateway_of, vultr_time,
};
use rust_decimal::Decimal;

/// `POST /v2/instances`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CreateInstance {
    pub region: Option<String>,
    pub plan: Option<String>,
    pub os_id: Option<u64>,
    pub iso_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub app_id: Option<u64>,
    pub image_id: Option<String>,
    pub label: Option<String>,
    pub hostname: Option<String>,
    /// Deprecated in favour of `tags`, still accepted: the instance gets it as a tag.
    pub tag: Option<String>,
    pub tags: Option<Vec<String>>,
    pub user_data: Option<String>,
    pub sshkey_id: Option<Vec<String>>,
    pub enable_ipv6: Option<bool>,
    pub disable_public_ipv4: Option<bool>,
    pub attach_vpc: Option<Vec<String>>,
    pub enable_vpc: Option<bool>,
    pub attach_vpc2: Option<Vec<String>>,
    pub enable_vpc2: Option<bool>,
    pub backups: Option<String>,
    pub ddos_protection: Option<bool>,
    pub firewall_group_id: Option<String>,
    pub reserved_ipv4: Option<String>,
    pub user_scheme: Option<String>,
}

/// `PATCH /v2/instances/{id}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UpdateInstance {
    pub label: Option<String>,
    /// Deprecated in favour of `tags`, still accepted: adds it as a tag.
    pub tag: Option<String>,
    pub tags: Option<Vec<String>>,
    pub plan: Option<String>,
    pub firewall_group_id: Option<String>,
    pub user_data: Option<String>,
    pub attach_vpc: Option<Vec<String>>,
    pub detach_vpc: Option<Vec<String>>,
    pub enable_ipv6: Option<bool>,
    pub backups: Option<String>,
    pub ddos_protection: Option<bool>,
    pub os_id: Option<Value>,
    pub app_id: Option<Value>,
    pub image_id: Option<Value>,
    pub attach_vpc2: Option<Vec<String>>,
    pub detach_vpc2: Option<Vec<String>>,
    pub enable_vpc2: Option<bool>,
}

/// `POST /v2/instances/{id}/reinstall`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Reinstall {
    pub hostname: Option<String>,
}

/// Bulk `POST /v2/instances/start|halt|reboot`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InstanceIds {
    pub instance_ids: Option<Vec<String>>,
}

/// `{ip, reverse}` for reverse DNS.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Reverse {
    pub ip: Option<String>,
    pub reverse: Option<String>,
}

/// `{vpc_id}` for attaching an instance to a VPC.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct VpcId {
    pub vpc_id: Option<String>,
}

/// `POST /v2/reserved-ips`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CreateReservedIp {
    pub region: Option<String>,
    pub ip_type: Option<String>,
    pub label: Option<String>,
}

/// `POST /v2/reserved-ips/convert`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ConvertReservedIp {
    pub ip_address: Option<String>,
    pub label: Option<String>,
}

/// `PATCH /v2/reserved-ips/{id}` (`label`) and `PATCH /v2/blocks/{id}` (`label`, `size_gb`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Relabel {
    pub label: Option<String>,
    pub size_gb: Option<u64>,
}

/// `{instance_id}` for reserved-IP and block attach. Block attach and detach also take
/// `live`, which is accepted and has no effect: the emulator never restarts an instance to
/// attach a volume.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InstanceRef {
    pub instance_id: Option<String>,
}

/// `POST /v2/vpcs` and `PUT /v2/vpcs/{id}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct VpcBody {
    pub region: Option<String>,
    pub description: Option<String>,
    pub v4_subnet: Option<String>,
    pub v4_subnet_mask: Option<u8>,
}

/// `POST /v2/ssh-keys`, `PATCH /v2/ssh-keys/{id}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SshKeyBody {
    pub name: Option<String>,
    pub ssh_key: Option<String>,
}

/// `POST /v2/blocks`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CreateBlock {
    pub region: Option<String>,
    pub size_gb: Option<u64>,
    pub label: Option<String>,
    pub block_type: Option<String>,
}

/// A present, non-empty string.
pub(crate) fn given(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The instance object; `default_password` only when `with_password`.
pub(crate) fn instance(
    i: &Instance,
    plan: Option<&Plan>,
    phase: Phase,
    with_password: bool,
) -> Value {
    let up = phase.has_addresses();
    let v4 = i.v4.filter(|_| up);
    let v6 = i.v6_net.filter(|_| up);
    let main_ip = match (up, v4) {
        (_, Some(ip)) => ip.to_string(),
        (false, None) => "0.0.0.0".to_string(),
        (true, None) => String::new(),
    };
    let mut features = Vec::new();
    if i.backups {
        features.push("auto_backups");
    }
    if i.v6_net.is_some() {
        features.push("ipv6");
    }
    if i.ddos_protection {
        features.push("ddos_protection");
    }
    let mut body = json!({
        "id": i.id,
        "os": i.source.os_name,
        "ram": plan.map_or(0, |p| p.ram),
        "disk": if up { plan.map_or(0, |p| p.disk) } else { 0 },
        "main_ip": main_ip,
        "vcpu_count": plan.map_or(0, |p| p.vcpu_count),
        "region": i.region,
        "plan": i.plan,
        "date_created": vultr_time(i.created),
        "status": phase.status(),
        "allowed_bandwidth": plan.map_or(0, |p| p.bandwidth),
        "netmask_v4": if v4.is_some() { "255.255.254.0" } else { "" },
        "gateway_v4": v4.map_or_else(|| "0.0.0.0".to_string(), |ip| gateway_of(ip).to_string()),
        "power_status": i.power_status(phase),
        "server_status": phase.server_status(),
        "v6_network": v6.map(|n| n.to_string()).unwrap_or_default(),
        "v6_main_ip": if up { i.v6_main().map(|ip| ip.to_string()).unwrap_or_default() } else { String::new() },
        "v6_network_size": if v6.is_some() { 64 } else { 0 },
        "label": i.label,
        "internal_ip": i.vpcs.first().map(|p| p.ip.to_string()).unwrap_or_default(),
        "kvm": if up { format!("https://my.vultr.com/subs/vps/novnc/api.php?data={}", i.kvm_token) } else { String::new() },
        "hostname": i.hostname,
        "os_id": i.source.os_id,
        "app_id": i.source.app_id,
        "image_id": i.source.image_id,
        "snapshot_id": "",
        "firewall_group_id": i.firewall_group_id,
        "features": features,
        "tags": i.tags,
        // The deprecated single tag: the first of the instance's tags.
        "tag": i.tags.first().cloned().unwrap_or_default(),
        "user_scheme": i.user_scheme,
        "vpc_only": false,
    });
    if with_password {
        body["default_password"] = json!(i.default_password.0);
    }
    body
}

/// `{id, mac_address, ip_address}` of an instance's VPC membership.
pub(crate) fn vpc_port(p: &VpcPort) -> Value {
    json!({"id": p.vpc_id, "mac_address": p.mac, "ip_address": p.ip.to_string()})
}

pub(crate) fn reserved_ip(r: &ReservedIp) -> Value {
    json!({
        "id": r.id,
        "region": r.region,
        "ip_type": if r.v6 { "v6" } else { "v4" },
        "subnet": r.subnet,
        "subnet_size": r.subnet_size,
        "label": r.label,
        "instance_id": r.instance_id.clone().unwrap_or_default(),
    })
}

pub(crate) fn vpc(v: &Vpc) -> Value {
    json!({
        "id": v.id,
        "region": v.region,
        "date_created": vultr_time(v.created),
        "description": v.description,
        "v4_subnet": v.subnet.to_string(),
        "v4_subnet_mask": v.mask,
    })
}

pub(crate) fn ssh_key(k: &SshKey) -> Value {
    json!({
        "id": k.id,
        "date_created": vultr_time(k.created),
        "name": k.name,
        "ssh_key": k.ssh_key,
    })
}

pub(crate) fn block(b: &Block, status: &str, cost: Decimal) -> Value {
    json!({
        "id": b.id,
        "cost": money(cost),
        "status": status,
        "size_gb": b.size_gb,
        "region": b.region,
        "attached_to_instance": b.attached.clone().unwrap_or_default(),
        "date_created": vultr_time(b.created),
        "label": b.label,
        "mount_id": b.mount_id,
        "block_type": b.block_type,
    })
}
