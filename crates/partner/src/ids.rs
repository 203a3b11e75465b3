//! Typed identifiers and plain time values used across the partner core.
//!
//! The ids the partner shares with the rest of orc (node, pool, site, class, OS) are the
//! vocabulary's own, from `orc-common`; the cloud's own ids (location, plan, image) are
//! declared here with the same macro. None is ever empty; the parsers that admit values
//! from operators (the map parsers in [`crate::maps`], the params in [`crate::params`])
//! enforce the naming rules, and catalogs take ids as the cloud spells them.
//!
//! Time is a plain value ([`Timestamp`]): nothing in this crate reads a clock, so every
//! decision that depends on time takes it as an input.

use std::fmt;
use std::time::Duration;

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

pub use orc_common::ids::{ClassId, EmptyId, NodeId, OsId, PoolId, SiteName};

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

/// A point in time, in milliseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// From milliseconds since the Unix epoch.
    pub const fn from_unix_millis(ms: u64) -> Self {
        Timestamp(ms)
    }

    /// From seconds since the Unix epoch.
    pub const fn from_unix_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_millis(self) -> u64 {
        self.0
    }

    /// This time plus `d`, saturating at the end of representable time.
    pub fn plus(self, d: Duration) -> Timestamp {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// How long after `earlier` this is; zero when it is not later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}
