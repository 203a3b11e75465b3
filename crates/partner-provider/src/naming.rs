//! How the partner marks the instances it creates, and how it reads those marks back.
//!
//! The marks and their keys are here; each cloud module writes and reads them in its own
//! form (`crate::clouds::hetzner::labels`, `crate::clouds::vultr::tags`, and their
//! `resource_*` counterparts). Every instance carries, as Hetzner labels or Vultr tags:
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
//! | pool | `orc-pool=<pool label>` | `orc-pool=<pool label>` | the pool the node belongs to ([`pool_label`]) |
//! | gateway generation | `orc-gw-gen=<generation>` | `orc-gw-gen=…` | the gateway shape a gateway was created with ([`gateway_generation`]) |
//!
//! The pool and the gateway generation are optional when read back (instances created before
//! they were recorded carry neither).
//!
//! Site resources carry [`ResourceMarks`]: as Hetzner labels, or on Vultr (whose VPCs,
//! reserved IPs, SSH keys and blocks take no tags) as `key=value` words separated by spaces
//! in the description, label or name:
//!
//! | resource | Hetzner | Vultr | marks besides owner and child |
//! |---|---|---|---|
//! | site network | network | VPC description | `orc-kind=network`, site, `orc-prefix` |
//! | stable IPv4 | primary IP | reserved IP label | `orc-kind=stable`, site, `orc-closed` once closed |
//! | pool address | floating IP (raw pool id in its description) | reserved IP label | `orc-kind=pool`, pool, site |
//! | sealed key | SSH key | SSH key name | `orc-kind=sealed` |
//! | extra disk | volume | block label | `orc-kind=disk`, node id, `orc-disk=<index>` |
//!
//! A site's private prefix is a /24 in `10.128.0.0/10` ([`Prefix`]): the cloud's router (on
//! Hetzner) is `.1`, the site gateway's fixed private address is `.254`.
//!
//! Invariants: the partner adopts an instance only when it carries the child tag of this
//! partner id and the owner tag or one of the also-owned tags; a node id or partner id that
//! cannot be written as a Hetzner label value is handled here (node ids are refused, partner
//! ids are hashed), never silently truncated.

use orc_common::Purpose;
use std::fmt;
use std::net::Ipv4Addr;

use orc_partner::ids::{Cloud, Timestamp};
use orc_partner::params::Config;
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
/// Label key / tag prefix of the node's pool ([`pool_label`]).
pub const POOL_KEY: &str = "orc-pool";
/// Label key / tag prefix of the gateway shape generation a gateway was created with.
pub const GEN_KEY: &str = "orc-gw-gen";
/// Label key / word of a site resource's kind ([`ResourceKind`]).
pub const KIND_KEY: &str = "orc-kind";
/// Label key / word of a site network's private prefix ([`Prefix`]).
pub const PREFIX_KEY: &str = "orc-prefix";
/// Label key / word of a stable IPv4's close time, milliseconds since the Unix epoch.
pub const CLOSED_KEY: &str = "orc-closed";
/// Label key / word of an extra disk's index among its node's disks.
pub const DISK_KEY: &str = "orc-disk";
/// How long a closed site's stable IPv4 is kept for a returning site.
pub const STABLE_KEEP: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Whether `value` is a valid mark value on every cloud (a Hetzner label value: at most 63
/// characters of letters, digits, `-`, `_` and `.`, beginning and ending with a letter or
/// digit).
pub use orc_partner::admission::is_mark_value as is_label_value;

/// The child tag's value for `partner_id`: the id itself when it is a valid label value,
/// else `h` and the first 40 hex digits of its SHA-256 (the same on both clouds, so one
/// partner id always has one child value).
pub fn child_value(partner_id: &str) -> String {
    if is_label_value(partner_id) {
        partner_id.to_string()
    } else {
        hashed(partner_id)
    }
}

/// SHA-256 of `text` as `h` and its first 40 hex digits: a valid label value.
fn hashed(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("h{}", &hex[..40])
}

/// The pool mark of `pool` (`<org>/<project>/<name>`): the id with `/` written as `.` when
/// that is a label value and the id has no `.` of its own (so [`pool_from_label`] reads it
/// back), else its hash ([`child_value`]'s form).
pub fn pool_label(pool: &str) -> String {
    let dotted = pool.replace('/', ".");
    if !pool.contains('.') && is_label_value(&dotted) {
        dotted
    } else {
        hashed(pool)
    }
}

/// The pool id a pool mark stands for, when it is not a hash.
pub fn pool_from_label(label: &str) -> Option<String> {
    label.contains('.').then(|| label.replace('.', "/"))
}

/// The gateway shape generation of `cloud` under `config`: `g` and 10 hex digits of a hash
/// of the gateway minimum and `<cloud>_gateway_plan`. A gateway whose recorded generation
/// differs was created on an older shape.
pub fn gateway_generation(config: &Config, cloud: Cloud) -> String {
    let plan = config
        .cloud(cloud)
        .and_then(|c| c.gateway_plan.as_ref())
        .map_or_else(|| "-".to_string(), |p| p.to_string());
    let text = format!(
        "cpu={};mem={};plan={plan}",
        config.gateway.cpu, config.gateway.mem_gib
    );
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    format!("g{hex}")
}

/// The instance name (Hetzner server name, Vultr hostname and label) for a node: `orc-`
/// and the node id in lower case with every character other than a letter, digit or `-`
/// turned into `-`, at most 63 characters, ending in a letter or digit.
pub fn hostname(node_id: &str) -> String {
    orc_common::text::dns_label(&format!("orc-{node_id}"))
}

/// The mark value of what an instance is for: `node` for a tenant's node, `gateway` for a
/// site gateway.
pub fn purpose_mark(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::Tenant => "node",
        Purpose::Gateway => "gateway",
    }
}

fn parse_purpose_mark(mark: &str) -> Option<Purpose> {
    match mark {
        "node" => Some(Purpose::Tenant),
        "gateway" => Some(Purpose::Gateway),
        _ => None,
    }
}

/// What the partner records on an instance it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks {
    pub owner_tag: String,
    pub child: String,
    pub node_id: String,
    pub site: String,
    pub purpose: Purpose,
    /// USD per unit of the account currency at creation; `None`: unpriced.
    pub rate: Option<Decimal>,
    /// The plan's monthly price at creation, in the account currency.
    pub account_monthly: Decimal,
    /// The pool mark ([`pool_label`]); `None` on instances that predate it.
    pub pool: Option<String>,
    /// The gateway shape generation (gateways only).
    pub gateway_gen: Option<String>,
}

impl Marks {
    /// The USD monthly price at the recorded rate, when priced.
    pub fn usd_monthly(&self) -> Option<Decimal> {
        self.rate.map(|r| (self.account_monthly * r).normalize())
    }

    /// Every mark but the owner tag, as `(key, value)`: each cloud writes the owner tag its
    /// own way ([`OWNER_KEY`]).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (CHILD_KEY, self.child.clone()),
            (NODE_KEY, self.node_id.clone()),
            (SITE_KEY, self.site.clone()),
            (ROLE_KEY, purpose_mark(self.purpose).to_string()),
            (
                RATE_KEY,
                self.rate
                    .map_or_else(|| "none".to_string(), |r| r.normalize().to_string()),
            ),
            (PRICE_KEY, self.account_monthly.normalize().to_string()),
        ];
        if let Some(pool) = &self.pool {
            pairs.push((POOL_KEY, pool.clone()));
        }
        if let Some(generation) = &self.gateway_gen {
            pairs.push((GEN_KEY, generation.clone()));
        }
        pairs
    }

    /// The marks of an instance whose owner tag is `owner_tag` and whose other marks `get`
    /// reads; `None` when a mark is missing or unreadable.
    pub fn read(owner_tag: Option<String>, get: impl Fn(&str) -> Option<String>) -> Option<Marks> {
        let owner_tag = owner_tag?;
        let rate = match get(RATE_KEY)?.as_str() {
            "none" => None,
            text => Some(text.parse().ok()?),
        };
        Some(Marks {
            owner_tag,
            child: get(CHILD_KEY)?,
            node_id: get(NODE_KEY)?,
            site: get(SITE_KEY)?,
            purpose: parse_purpose_mark(&get(ROLE_KEY)?)?,
            rate,
            account_monthly: get(PRICE_KEY)?.parse().ok()?,
            pool: get(POOL_KEY),
            gateway_gen: get(GEN_KEY),
        })
    }
}

/// The range every site prefix is taken from.
pub const SITE_RANGE: &str = "10.128.0.0/10";

/// A site's private prefix: the `index`-th /24 of `10.128.0.0/10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix(u16);

impl Prefix {
    /// How many prefixes there are.
    pub const COUNT: u16 = 16384;

    /// The `index`-th prefix, when there is one.
    pub fn new(index: u16) -> Option<Prefix> {
        (index < Prefix::COUNT).then_some(Prefix(index))
    }

    /// Its index.
    pub fn index(self) -> u16 {
        self.0
    }

    fn octets(self, host: u8) -> Ipv4Addr {
        let [hi, lo] = self.0.to_be_bytes();
        Ipv4Addr::new(10, 128 + hi, lo, host)
    }

    /// The network address.
    pub fn network(self) -> Ipv4Addr {
        self.octets(0)
    }

    /// The cloud router's address (Hetzner's network gateway).
    pub fn router(self) -> Ipv4Addr {
        self.octets(1)
    }

    /// The site gateway's fixed private address.
    pub fn gateway(self) -> Ipv4Addr {
        self.octets(254)
    }

    /// The prefix length.
    pub fn bits(self) -> u8 {
        24
    }

    /// As a label value: `10.128.3.0-24` (a label value holds no `/`).
    pub fn label_value(self) -> String {
        format!("{}-{}", self.network(), self.bits())
    }

    /// Reads `10.128.3.0/24` or `10.128.3.0-24`.
    pub fn parse(text: &str) -> Option<Prefix> {
        let (ip, len) = text.split_once('/').or_else(|| text.split_once('-'))?;
        if len != "24" {
            return None;
        }
        let [a, b, c, d]: [u8; 4] = ip.parse::<Ipv4Addr>().ok()?.octets();
        if a != 10 || d != 0 || !(128..192).contains(&b) {
            return None;
        }
        Prefix::new(u16::from_be_bytes([b - 128, c]))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.bits())
    }
}

/// What a site resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceKind {
    /// A site's private network (Hetzner network, Vultr VPC).
    Network,
    /// A site's stable public IPv4 (Hetzner primary IP, Vultr reserved IP).
    Stable,
    /// A public pool's address (Hetzner floating IP, Vultr reserved IP).
    PoolAddress,
    /// The sealed SSH key of a cloud account.
    SealedKey,
    /// An extra disk of a node (Hetzner volume, Vultr block).
    Disk,
}

impl ResourceKind {
    /// The mark's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Network => "network",
            ResourceKind::Stable => "stable",
            ResourceKind::PoolAddress => "pool",
            ResourceKind::SealedKey => "sealed",
            ResourceKind::Disk => "disk",
        }
    }

    fn parse(text: &str) -> Option<ResourceKind> {
        match text {
            "network" => Some(ResourceKind::Network),
            "stable" => Some(ResourceKind::Stable),
            "pool" => Some(ResourceKind::PoolAddress),
            "sealed" => Some(ResourceKind::SealedKey),
            "disk" => Some(ResourceKind::Disk),
            _ => None,
        }
    }
}

/// What the partner records on a site resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMarks {
    pub owner_tag: String,
    pub child: String,
    pub kind: ResourceKind,
    /// The site (networks, stable IPv4s, pool addresses).
    pub site: Option<String>,
    /// The private prefix (networks).
    pub prefix: Option<Prefix>,
    /// When the site closed (stable IPv4s of closed sites).
    pub closed_at: Option<Timestamp>,
    /// The pool mark ([`pool_label`]) of a pool address.
    pub pool: Option<String>,
    /// The node of an extra disk.
    pub node: Option<String>,
    /// The index of an extra disk among its node's disks.
    pub disk: Option<u32>,
}

impl ResourceMarks {
    /// Marks of `kind` with only owner and child set.
    pub fn new(owner_tag: &str, child: &str, kind: ResourceKind) -> ResourceMarks {
        ResourceMarks {
            owner_tag: owner_tag.to_string(),
            child: child.to_string(),
            kind,
            site: None,
            prefix: None,
            closed_at: None,
            pool: None,
            node: None,
            disk: None,
        }
    }

    /// Every mark as `(key, value)`, the prefix written by `prefix_text` (a cloud whose
    /// values hold no `/` writes [`Prefix::label_value`]).
    pub fn pairs(&self, prefix_text: impl Fn(Prefix) -> String) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (OWNER_KEY, self.owner_tag.clone()),
            (CHILD_KEY, self.child.clone()),
            (KIND_KEY, self.kind.as_str().to_string()),
        ];
        if let Some(site) = &self.site {
            pairs.push((SITE_KEY, site.clone()));
        }
        if let Some(prefix) = self.prefix {
            pairs.push((PREFIX_KEY, prefix_text(prefix)));
        }
        if let Some(at) = self.closed_at {
            pairs.push((CLOSED_KEY, at.millis().to_string()));
        }
        if let Some(pool) = &self.pool {
            pairs.push((POOL_KEY, pool.clone()));
        }
        if let Some(node) = &self.node {
            pairs.push((NODE_KEY, node.clone()));
        }
        if let Some(disk) = self.disk {
            pairs.push((DISK_KEY, disk.to_string()));
        }
        pairs
    }

    /// The marks whose values `get` reads; `None` when owner, child or kind is missing or a
    /// mark present is unreadable.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Option<ResourceMarks> {
        let prefix = match get(PREFIX_KEY) {
            Some(text) => Some(Prefix::parse(&text)?),
            None => None,
        };
        let closed_at = match get(CLOSED_KEY) {
            Some(text) => Some(Timestamp::from_unix_millis(text.parse().ok()?)),
            None => None,
        };
        let disk = match get(DISK_KEY) {
            Some(text) => Some(text.parse().ok()?),
            None => None,
        };
        Some(ResourceMarks {
            owner_tag: get(OWNER_KEY)?,
            child: get(CHILD_KEY)?,
            kind: ResourceKind::parse(&get(KIND_KEY)?)?,
            site: get(SITE_KEY),
            prefix,
            closed_at,
            pool: get(POOL_KEY),
            node: get(NODE_KEY),
            disk,
        })
    }

    /// Whether `ownership`'s child and one of its owned tags are on these marks.
    pub fn owned_by(&self, child: &str, tags: &[String]) -> bool {
        self.child == child && tags.contains(&self.owner_tag)
    }
}

/// The sealed SSH key's public half for an account share: an `ssh-ed25519` key whose 32
/// key bytes are a SHA-256 of the child value and owner tag. No private key for it is known
/// to anyone (none is ever made), so it lets no one in; it is there so the clouds never
/// mail or return a root password. The same inputs give the same key, so two replicas
/// creating it at once make one key.
pub fn sealed_public_key(child: &str, owner_tag: &str) -> String {
    use base64::Engine as _;
    let key_bytes = Sha256::digest(format!("orc-sealed-key\n{child}\n{owner_tag}").as_bytes());
    let mut blob = Vec::with_capacity(51);
    for part in [b"ssh-ed25519".as_slice(), key_bytes.as_slice()] {
        let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
        blob.extend_from_slice(&len.to_be_bytes());
        blob.extend_from_slice(part);
    }
    format!(
        "ssh-ed25519 {} orc-sealed",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}

/// A cloud-unique name for a site resource of one installation: `orc-<what>-<site>-` and
/// 8 hex digits of a hash of the child value and owner tag.
pub fn scoped_name(what: &str, site: &str, child: &str, owner_tag: &str) -> String {
    format!(
        "orc-{what}-{site}-{}",
        &hashed(&format!("{child}/{owner_tag}"))[1..9]
    )
}

/// The sealed key's name in the account.
pub fn sealed_key_name(child: &str, owner_tag: &str) -> String {
    format!(
        "orc-sealed-{}",
        &hashed(&format!("{child}/{owner_tag}"))[..13]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_distinct_24s_with_fixed_router_and_gateway() {
        let p = Prefix::new(0).unwrap();
        assert_eq!(p.to_string(), "10.128.0.0/24");
        assert_eq!(p.router(), Ipv4Addr::new(10, 128, 0, 1));
        assert_eq!(p.gateway(), Ipv4Addr::new(10, 128, 0, 254));
        let last = Prefix::new(Prefix::COUNT - 1).unwrap();
        assert_eq!(last.to_string(), "10.191.255.0/24");
        assert_eq!(Prefix::new(Prefix::COUNT), None);
        for index in [0, 1, 255, 256, 9000, Prefix::COUNT - 1] {
            let p = Prefix::new(index).unwrap();
            assert_eq!(Prefix::parse(&p.to_string()), Some(p));
            assert_eq!(Prefix::parse(&p.label_value()), Some(p));
        }
        for bad in [
            "10.127.0.0/24",
            "10.192.0.0/24",
            "10.88.0.0/24",
            "10.128.0.1/24",
            "10.128.0.0/16",
            "192.168.0.0/24",
            "x",
        ] {
            assert_eq!(Prefix::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn pool_marks_read_back_and_keys_are_sealed_and_stable() {
        assert_eq!(pool_label("acme/web/api"), "acme.web.api");
        assert_eq!(
            pool_from_label("acme.web.api").as_deref(),
            Some("acme/web/api")
        );
        let odd = pool_label("acme/web.v2/api");
        assert!(odd.starts_with('h') && is_label_value(&odd));
        assert_eq!(pool_from_label(&odd), None);
        let key = sealed_public_key("zone-1", "t");
        assert_eq!(key, sealed_public_key("zone-1", "t"));
        assert_ne!(key, sealed_public_key("zone-1", "u"));
        assert!(
            key.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"),
            "{key}"
        );
        assert!(is_label_value(&sealed_key_name("zone-1", "t")));
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
