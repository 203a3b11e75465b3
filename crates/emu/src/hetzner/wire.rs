//! Request bodies as the API accepts them. These are the emulator's own types (never the
//! client's). Required fields are `Option` here so that a missing one is reported as
//! `422 invalid_input` naming the field, like the API does, rather than as a parse error.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A reference that may be a numeric id or a name (`server_type`, `image`, `location`,
/// `ssh_keys[]`). An all-digit string counts as an id.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum IdOrName {
    Id(u64),
    Name(String),
}

impl IdOrName {
    /// The reference as text (`"114"` or `"cx23"`); catalogue lookups accept both.
    pub fn key(&self) -> String {
        match self {
            IdOrName::Id(id) => id.to_string(),
            IdOrName::Name(n) => n.clone(),
        }
    }
}

pub(crate) type Labels = BTreeMap<String, String>;

/// `POST /servers`. `firewalls`, `automount` and `placement_group` are accepted and
/// ignored (no firewalls or placement groups are emulated).
#[derive(Debug, Deserialize)]
pub(crate) struct CreateServer {
    pub name: Option<String>,
    pub server_type: Option<IdOrName>,
    pub image: Option<IdOrName>,
    pub location: Option<IdOrName>,
    pub datacenter: Option<Value>,
    pub ssh_keys: Option<Vec<IdOrName>>,
    pub user_data: Option<String>,
    pub labels: Option<Labels>,
    pub networks: Option<Vec<u64>>,
    pub volumes: Option<Vec<u64>>,
    pub start_after_create: Option<bool>,
    pub public_net: Option<PublicNet>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct PublicNet {
    pub enable_ipv4: Option<bool>,
    pub enable_ipv6: Option<bool>,
    pub ipv4: Option<u64>,
    pub ipv6: Option<u64>,
}

/// `PUT` of most resources: a new name and/or a new label set (which replaces the old).
#[derive(Debug, Deserialize)]
pub(crate) struct Update {
    pub name: Option<String>,
    pub labels: Option<Labels>,
    pub description: Option<String>,
    pub auto_delete: Option<bool>,
    pub expose_routes_to_vswitch: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DnsPtr {
    pub ip: Option<String>,
    pub dns_ptr: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Protection {
    pub delete: Option<bool>,
    pub rebuild: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Rebuild {
    pub image: Option<IdOrName>,
    pub user_data: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AttachToNetwork {
    pub network: Option<u64>,
    pub ip: Option<String>,
    pub alias_ips: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct NetworkRef {
    pub network: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct EnableRescue {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub ssh_keys: Option<Vec<IdOrName>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChangeType {
    pub server_type: Option<IdOrName>,
    pub upgrade_disk: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreatePrimaryIp {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub location: Option<IdOrName>,
    pub datacenter: Option<Value>,
    pub assignee_type: Option<String>,
    pub assignee_id: Option<u64>,
    pub auto_delete: Option<bool>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AssignPrimaryIp {
    pub assignee_type: Option<String>,
    pub assignee_id: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateFloatingIp {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub server: Option<u64>,
    pub home_location: Option<IdOrName>,
    pub description: Option<String>,
    pub name: Option<String>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AssignFloatingIp {
    pub server: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateNetwork {
    pub name: Option<String>,
    pub ip_range: Option<String>,
    pub subnets: Option<Vec<SubnetReq>>,
    pub routes: Option<Vec<RouteReq>>,
    pub labels: Option<Labels>,
    pub expose_routes_to_vswitch: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SubnetReq {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub ip_range: Option<String>,
    pub network_zone: Option<String>,
    pub vswitch_id: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RouteReq {
    pub destination: Option<String>,
    pub gateway: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct IpRange {
    pub ip_range: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateSshKey {
    pub name: Option<String>,
    pub public_key: Option<String>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateVolume {
    pub name: Option<String>,
    pub size: Option<u64>,
    pub location: Option<IdOrName>,
    pub server: Option<u64>,
    pub labels: Option<Labels>,
    pub format: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AttachVolume {
    pub server: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ResizeVolume {
    pub size: Option<u64>,
}

/// `field` or `422 invalid_input` saying it is missing.
pub(crate) fn required<T>(value: Option<T>, field: &str) -> Result<T, super::ApiError> {
    value.ok_or_else(|| {
        super::ApiError::invalid_field(field, vec!["Missing data for required field.".into()])
    })
}

/// Checks labels, `422 invalid_input` on `labels` listing every problem.
pub(crate) fn check_labels(labels: &Option<Labels>) -> Result<(), super::ApiError> {
    match labels {
        Some(l) => super::labels::validate_labels(l)
            .map_err(|p| super::ApiError::invalid_field("labels", p)),
        None => Ok(()),
    }
}

/// Checks a resource name: non-empty, at most 63 characters for most resources.
pub(crate) fn check_name(name: &str, max: usize) -> Result<(), super::ApiError> {
    if name.trim().is_empty() {
        return Err(super::ApiError::invalid_field(
            "name",
            vec!["must not be empty".into()],
        ));
    }
    if name.chars().count() > max {
        return Err(super::ApiError::invalid_field(
            "name",
            vec![format!("is longer than {max} characters")],
        ));
    }
    Ok(())
}

/// Checks a server name: a valid hostname (RFC 1123), labels of letters, digits and `-`
/// joined by dots.
pub(crate) fn check_hostname(name: &str) -> Result<(), super::ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        });
    if ok {
        Ok(())
    } else {
        Err(super::ApiError::invalid_field(
            "name",
            vec!["must be a valid hostname".into()],
        ))
    }
}
