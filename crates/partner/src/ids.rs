//! Typed identifiers and plain time values used across the partner core.
//!
//! The ids the partner shares with the rest of orc (node, pool, site, class, OS) are the
//! vocabulary's own, from `orc-common`; the cloud's own ids (location, plan, image) are
//! declared here with the same macro. None is ever empty; the parsers that admit values
//! from operators (the map parsers in [`crate::maps`], the params in [`crate::params`])
//! enforce the naming rules, and catalogs take ids as the cloud spells them.
//!
//! Time is a plain value (the vocabulary's [`Timestamp`]): nothing in this crate reads a clock, so every
//! decision that depends on time takes it as an input.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A partner cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cloud {
    Hetzner,
    Vultr,
}

impl Cloud {
    /// Every supported cloud, in a fixed order.
    pub const ALL: [Cloud; 2] = [Cloud::Hetzner, Cloud::Vultr];

    /// The lower-case name used in maps (`hetzner:fsn1`) and as the param prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Hetzner => "hetzner",
            Cloud::Vultr => "vultr",
        }
    }

    /// Parses the lower-case name.
    pub fn parse(s: &str) -> Option<Cloud> {
        match s {
            "hetzner" => Some(Cloud::Hetzner),
            "vultr" => Some(Cloud::Vultr),
            _ => None,
        }
    }

    /// The name of the param that holds this cloud's account key.
    pub fn key_param(self) -> &'static str {
        match self {
            Cloud::Hetzner => "hetzner_api_token",
            Cloud::Vultr => "vultr_api_key",
        }
    }

    /// The environment variable that overrides this cloud's API base URL.
    pub fn endpoint_var(self) -> &'static str {
        match self {
            Cloud::Hetzner => "ORC_HETZNER_ENDPOINT",
            Cloud::Vultr => "ORC_VULTR_ENDPOINT",
        }
    }

    /// The cloud's public API base URL.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Cloud::Hetzner => "https://api.hetzner.cloud/v1",
            Cloud::Vultr => "https://api.vultr.com",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use orc_common::ids::{ClassId, EmptyId, NodeId, OsId, PoolPath, SiteName};
pub use orc_common::time::Timestamp;

orc_common::string_id!(
    /// A cloud's own location id (`fsn1`, `ewr`).
    LocationId,
    "location id"
);
orc_common::string_id!(
    /// A cloud's own plan id (`cx23`, `vc2-2c-4gb`).
    PlanId,
    "plan id"
);
orc_common::string_id!(
    /// A cloud's own image id: a Vultr `os_id` or a Hetzner image id, as text.
    ImageId,
    "image id"
);
