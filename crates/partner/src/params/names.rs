//! The names of the partner's params and of the environment variables that carry them.
//!
//! Param `name` arrives as `ORC_PARAM_<NAME>` (upper case) or, delivered as a file, as the
//! path in `ORC_PARAM_<NAME>_FILE`. The per-cloud params are `<cloud>_<suffix>`, plus each
//! cloud's key param ([`crate::ids::Cloud::key_param`]).

use crate::ids::Cloud;

/// `partner_id`.
pub const PARTNER_ID: &str = "partner_id";
/// `regions`.
pub const REGIONS: &str = "regions";
/// `os_map`.
pub const OS_MAP: &str = "os_map";
/// `gateway`.
pub const GATEWAY: &str = "gateway";
/// `ptr_domain`.
pub const PTR_DOMAIN: &str = "ptr_domain";
/// `access_keys_url`.
pub const ACCESS_KEYS_URL: &str = "access_keys_url";
/// `ssh_keys`.
pub const SSH_KEYS: &str = "ssh_keys";

/// The suffixes of the per-cloud params, after `<cloud>_` (the key param is separate).
pub const CLOUD_PARAM_SUFFIXES: [&str; 11] = [
    "enabled",
    "owner_tag",
    "also_owned_tags",
    "regions",
    "plans",
    "images",
    "max_nodes",
    "max_monthly_spend",
    "exchange_rate",
    "gateway_plan",
    "pool_ipv4_limit",
];

/// The default of `<cloud>_pool_ipv4_limit`.
pub const DEFAULT_POOL_IPV4_LIMIT: u32 = 10;

/// Every param name the partner reads, in a fixed order.
pub fn all_param_names() -> Vec<String> {
    let mut names: Vec<String> = [
        PARTNER_ID,
        REGIONS,
        OS_MAP,
        GATEWAY,
        PTR_DOMAIN,
        ACCESS_KEYS_URL,
        SSH_KEYS,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    for cloud in Cloud::ALL {
        names.push(cloud.key_param().to_string());
        for suffix in CLOUD_PARAM_SUFFIXES {
            names.push(format!("{cloud}_{suffix}"));
        }
    }
    names
}

/// The environment variable that carries param `name`.
pub fn param_var(name: &str) -> String {
    format!("ORC_PARAM_{}", name.to_ascii_uppercase())
}

/// The environment variable that names a file holding param `name`.
pub fn param_file_var(name: &str) -> String {
    format!("ORC_PARAM_{}_FILE", name.to_ascii_uppercase())
}
