//! How the partner marks the instances it creates, and how it reads those marks back.
//!
//! Every instance carries, as Hetzner labels or Vultr tags:
//!
//! | mark | Hetzner label | Vultr tag | meaning |
//! |---|---|---|---|
//! | owner tag | `orc-owner=<owner tag>` | `<owner tag>` | which installation's account share it is |
//! | child tag | `orc-partner-child=<partner id>` | `orc-partner-child=<partner id>` | created by this partner |
//! | node id | `orc-node=<node id>` | `orc-node=<node id>` | the idempotency key |
//! | site | `orc-site=<site>` | `orc-site=<site>` | the neutral site name |
//! | role | `orc-role=node\|gateway` | `orc-role=node\|gateway` | tenant node or site gateway |
//! | rate | `orc-rate=<USD per unit>\|none` | `orc-rate=…` | exchange rate recorded at creation |
//! | price | `orc-price=<account monthly>` | `orc-price=…` | the plan's monthly price at creation, account currency |
//!
//! Invariants: the partner adopts an instance only when it carries the child tag of this
//! partner id and the owner tag or one of the also-owned tags; a node id or partner id that
//! cannot be written as a Hetzner label value is handled here (node ids are refused, partner
//! ids are hashed), never silently truncated.

use std::collections::BTreeMap;

use orc_partner::ids::Cloud;
use rust_decimal::Decimal;
use sha2::{Digest, Sha256};

/// Label key (Hetzner) and tag prefix (Vultr) of the owner tag (Hetzner only; Vultr uses the
/// bare tag).
pub const OWNER_KEY: &str = "orc-owner";
/// Label key / tag prefix of the child tag.
pub const CHILD_KEY: &str = "orc-partner-child";
/// Label key / tag prefix of the node id.
pub const NODE_KEY: &str = "orc-node";
/// Label key / tag prefix of the site name.
pub const SITE_KEY: &str = "orc-site";
/// Label key / tag prefix of the role.
pub const ROLE_KEY: &str = "orc-role";
/// Label key / tag prefix of the exchange rate recorded at creation.
pub const RATE_KEY: &str = "orc-rate";
/// Label key / tag prefix of the monthly price recorded at creation (account currency).
pub const PRICE_KEY: &str = "orc-price";

/// Whether `value` is a valid Hetzner label value: at most 63 characters of letters, digits,
/// `-`, `_` and `.`, beginning and ending with a letter or digit.
pub fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The child tag's value for `partner_id`: the id itself when it is a valid label value,
/// else `h` and the first 40 hex digits of its SHA-256 (the same on both clouds, so one
/// partner id always has one child value).
pub fn child_value(partner_id: &str) -> String {
    if is_label_value(partner_id) {
        partner_id.to_string()
    } else {
        let digest = Sha256::digest(partner_id.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("h{}", &hex[..40])
    }
}

/// The instance name (Hetzner server name, Vultr hostname and label) for a node: `orc-`
/// and the node id in lower case with every character other than a letter, digit or `-`
/// turned into `-`, at most 63 characters, ending in a letter or digit.
pub fn hostname(node_id: &str) -> String {
    let mut name: String = format!("orc-{node_id}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    while name.ends_with('-') {
        name.pop();
    }
    name
}

/// A tenant node or a site gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Node,
    Gateway,
}

impl Role {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Gateway => "gateway",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        match s {
            "node" => Some(Role::Node),
            "gateway" => Some(Role::Gateway),
            _ => None,
        }
    }
}

/// What the partner records on an instance it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks {
    pub owner_tag: String,
    pub child: String,
    pub node_id: String,
    pub site: String,
    pub role: Role,
    /// USD per unit of the account currency at creation; `None`: unpriced.
    pub rate: Option<Decimal>,
    /// The plan's monthly price at creation, in the account currency.
    pub account_monthly: Decimal,
}

impl Marks {
    /// The USD monthly price at the recorded rate, when priced.
    pub fn usd_monthly(&self) -> Option<Decimal> {
        self.rate.map(|r| (self.account_monthly * r).normalize())
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            (CHILD_KEY, self.child.clone()),
            (NODE_KEY, self.node_id.clone()),
            (SITE_KEY, self.site.clone()),
            (ROLE_KEY, self.role.as_str().to_string()),
            (
                RATE_KEY,
                self.rate
                    .map_or_else(|| "none".to_string(), |r| r.normalize().to_string()),
            ),
            (PRICE_KEY, self.account_monthly.normalize().to_string()),
        ]
    }

    /// Hetzner labels.
    pub fn hetzner_labels(&self) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = self
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        labels.insert(OWNER_KEY.to_string(), self.owner_tag.clone());
        labels
    }

    /// Vultr tags: the bare owner tag, then `key=value` tags.
    pub fn vultr_tags(&self) -> Vec<String> {
        let mut tags = vec![self.owner_tag.clone()];
        tags.extend(self.pairs().into_iter().map(|(k, v)| format!("{k}={v}")));
        tags
    }

    /// Reads Hetzner labels back; `None` when a mark is missing or unreadable.
    pub fn from_hetzner(labels: &BTreeMap<String, String>) -> Option<Marks> {
        Marks::from_lookup(Cloud::Hetzner, |k| labels.get(k).cloned(), |_| None)
    }

    /// Reads Vultr tags back, with `owned` the owner tags to look for; `None` when a mark is
    /// missing or unreadable, or no owned tag is present.
    pub fn from_vultr(tags: &[String], owned: &[String]) -> Option<Marks> {
        let get = |key: &str| {
            let prefix = format!("{key}=");
            tags.iter()
                .find_map(|t| t.strip_prefix(&prefix).map(str::to_string))
        };
        let owner = |_: ()| owned.iter().find(|o| tags.contains(o)).cloned();
        Marks::from_lookup(Cloud::Vultr, get, owner)
    }

    fn from_lookup(
        cloud: Cloud,
        get: impl Fn(&str) -> Option<String>,
        bare_owner: impl Fn(()) -> Option<String>,
    ) -> Option<Marks> {
        let owner_tag = match cloud {
            Cloud::Hetzner => get(OWNER_KEY)?,
            Cloud::Vultr => bare_owner(())?,
        };
        let rate = match get(RATE_KEY)?.as_str() {
            "none" => None,
            text => Some(text.parse().ok()?),
        };
        Some(Marks {
            owner_tag,
            child: get(CHILD_KEY)?,
            node_id: get(NODE_KEY)?,
            site: get(SITE_KEY)?,
            role: Role::parse(&get(ROLE_KEY)?)?,
            rate,
            account_monthly: get(PRICE_KEY)?.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks() -> Marks {
        Marks {
            owner_tag: "orc-partner-hetzner".into(),
            child: child_value("zone-1"),
            node_id: "n-000000000010".into(),
            site: "eu-central-a".into(),
            role: Role::Node,
            rate: Some("1.08".parse().unwrap()),
            account_monthly: "6.5331".parse().unwrap(),
        }
    }

    #[test]
    fn marks_round_trip_on_both_clouds() {
        let m = marks();
        assert_eq!(Marks::from_hetzner(&m.hetzner_labels()), Some(m.clone()));
        let owned = vec!["old".to_string(), "orc-partner-hetzner".to_string()];
        assert_eq!(Marks::from_vultr(&m.vultr_tags(), &owned), Some(m.clone()));
        assert_eq!(Marks::from_vultr(&m.vultr_tags(), &["other".into()]), None);
        assert!(m.hetzner_labels().values().all(|v| is_label_value(v)));
        assert_eq!(m.usd_monthly(), Some("7.055748".parse().unwrap()));
        let unpriced = Marks { rate: None, ..m };
        assert_eq!(
            Marks::from_hetzner(&unpriced.hetzner_labels()),
            Some(unpriced)
        );
    }

    #[test]
    fn names_and_child_values_fit_the_clouds() {
        assert_eq!(hostname("n-000000000010"), "orc-n-000000000010");
        assert_eq!(hostname("Node_1."), "orc-node-1");
        assert_eq!(hostname(&"x".repeat(80)).len(), 63);
        assert_eq!(child_value("zone-1"), "zone-1");
        let hashed = child_value("zone/1");
        assert!(hashed.starts_with('h') && hashed.len() == 41 && is_label_value(&hashed));
        assert!(!is_label_value("-a") && !is_label_value("") && is_label_value("a.b_c-1"));
    }
}
