//! The kinds of orc's one vocabulary: what a node is for ([`Purpose`]), what a replica is
//! doing ([`Role`]) and why a request was refused ([`RefusalKind`]), with what the zone
//! does about each refusal ([`ZoneAction`]).
//!
//! `Purpose` (a tenant's node or a site gateway) and `Role` (serving or standing by) are
//! different ideas and never share a name.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the zone has made of a replica of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaRole {
    /// The replica is handed all work of its resource.
    Serving,
    /// Another replica serves; this one waits and must not touch any cloud account.
    Standby,
}

impl fmt::Display for ReplicaRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplicaRole::Serving => "serving",
            ReplicaRole::Standby => "standby",
        })
    }
}

/// Why a node is quoted: a tenant's node or a site gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Tenant,
    Gateway,
}

/// The kind of a refusal; the zone's next step depends on it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// No place can take the node now.
    NoCapacity,
    /// The provider is still counting what it holds.
    Counting,
    /// A passing fault (a cloud's rate limit, a timeout).
    Transient,
    /// Only a change to the provider's configuration can fix it.
    OperatorFix,
    /// This attempt failed.
    Failed,
    /// Nothing the provider offers can ever take the request as asked (no site sells the
    /// shape, the OS or the plan at all); only another request, or a new catalog, helps.
    Unplaceable,
}

/// What the zone does with a node whose request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneAction {
    /// Park the node with the provider's words and ask again later.
    ParkAndRetryLater,
    /// Ask again after this fixed delay.
    RetryAfter(Duration),
    /// Retry with the zone's retry backoff.
    RetryWithBackoff,
    /// Park the node until the provider's configuration changes (a new catalog or hello).
    ParkUntilConfigChanges,
    /// The node takes its normal failure backoff.
    NormalBackoff,
    /// Refuse a pool that asks for this at creation; park a node until the provider's
    /// catalog changes.
    RefuseAtCreation,
}

impl RefusalKind {
    /// Every kind, in wire order.
    pub const ALL: [RefusalKind; 6] = [
        RefusalKind::NoCapacity,
        RefusalKind::Counting,
        RefusalKind::Transient,
        RefusalKind::OperatorFix,
        RefusalKind::Failed,
        RefusalKind::Unplaceable,
    ];

    /// The zone's reaction to this kind.
    pub fn zone_action(self) -> ZoneAction {
        match self {
            RefusalKind::NoCapacity => ZoneAction::ParkAndRetryLater,
            RefusalKind::Counting => ZoneAction::RetryAfter(Duration::from_secs(5)),
            RefusalKind::Transient => ZoneAction::RetryWithBackoff,
            RefusalKind::OperatorFix => ZoneAction::ParkUntilConfigChanges,
            RefusalKind::Failed => ZoneAction::NormalBackoff,
            RefusalKind::Unplaceable => ZoneAction::RefuseAtCreation,
        }
    }

    /// The snake_case name used in logs and docs (`no_capacity`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::NoCapacity => "no_capacity",
            RefusalKind::Counting => "counting",
            RefusalKind::Transient => "transient",
            RefusalKind::OperatorFix => "operator_fix",
            RefusalKind::Failed => "failed",
            RefusalKind::Unplaceable => "unplaceable",
        }
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that names no [`RefusalKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a valid refusal kind", crate::text::quoted(.value))]
pub struct UnknownRefusalKind {
    pub value: String,
}

impl FromStr for RefusalKind {
    type Err = UnknownRefusalKind;

    /// The kind named by its snake_case name, as [`RefusalKind::as_str`] writes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RefusalKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownRefusalKind {
                value: s.to_string(),
            })
    }
}

impl Purpose {
    /// The lower-case name (`tenant`, `gateway`).
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Tenant => "tenant",
            Purpose::Gateway => "gateway",
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a provider put a node, in its own terms: what a zone operator needs to find the
/// instance, never shown to a tenant (who sees the neutral site).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Whereabouts {
    /// The cloud (`hetzner`, `vultr`, `robot`).
    pub cloud: String,
    /// The cloud's location (`fsn1`, `ewr`).
    pub location: String,
    /// The cloud's plan or product (`cx22`, `vc2-2c-4gb`); empty when it has none.
    pub plan: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_one_name_each() {
        let names: Vec<&str> = RefusalKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "no_capacity",
                "counting",
                "transient",
                "operator_fix",
                "failed",
                "unplaceable"
            ]
        );
        assert_eq!(
            serde_json::to_string(&RefusalKind::OperatorFix).unwrap(),
            "\"operator_fix\""
        );
        assert_eq!(
            serde_json::to_string(&Purpose::Gateway).unwrap(),
            "\"gateway\""
        );
        assert_eq!(ReplicaRole::Standby.to_string(), "standby");
    }

    #[test]
    fn a_kind_parses_from_its_name_and_nothing_else() {
        for kind in RefusalKind::ALL {
            assert_eq!(kind.as_str().parse::<RefusalKind>(), Ok(kind));
        }
        assert_eq!(
            "sleeping".parse::<RefusalKind>().unwrap_err().to_string(),
            "\"sleeping\" is not a valid refusal kind"
        );
    }
}
