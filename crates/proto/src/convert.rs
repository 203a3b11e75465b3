//! Conversions between the wire messages ([`crate::pb`]) and the domain values
//! ([`crate::domain`]).
//!
//! Wire → domain is `TryFrom` and checks every required field: a missing message, an empty
//! id, an unspecified enum, an unparsable amount or address. The error names the field by
//! its path from the envelope (`quote_reply.offer.price.amount`), so a peer's bug is found
//! from one log line. Domain → wire is `From` and cannot fail.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use orc_common::{Architecture, Currency, Money, Period, Shape};
use rust_decimal::Decimal;

use crate::domain::*;
use crate::ids::*;
use crate::pb;

/// A wire message could not become a domain value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// A required field is absent, empty or unspecified.
    #[error("{field} is missing")]
    Missing { field: String },
    /// A field is present but its value cannot be used.
    #[error("{field} is invalid: {reason}")]
    Invalid { field: String, reason: String },
}

impl ConvertError {
    fn missing(field: &str) -> Self {
        ConvertError::Missing {
            field: field.to_string(),
        }
    }

    fn invalid(field: &str, reason: impl Into<String>) -> Self {
        ConvertError::Invalid {
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// The path of the offending field.
    pub fn field(&self) -> &str {
        match self {
            ConvertError::Missing { field } | ConvertError::Invalid { field, .. } => field,
        }
    }

    /// Prefixes the field path with the name of the enclosing field.
    fn within(self, parent: &str) -> Self {
        match self {
            ConvertError::Missing { field } => ConvertError::Missing {
                field: format!("{parent}.{field}"),
            },
            ConvertError::Invalid { field, reason } => ConvertError::Invalid {
                field: format!("{parent}.{field}"),
                reason,
            },
        }
    }
}

type Result<T> = std::result::Result<T, ConvertError>;

fn id<T: TryFrom<String>>(value: String, field: &str) -> Result<T> {
    T::try_from(value).map_err(|_| ConvertError::missing(field))
}

/// A site name as it enters from the wire: a DNS label (1–63 characters of `a-z`, `0-9` and
/// `-`, neither starting nor ending with `-`). Site names reach events, views and pages, so
/// nothing that acts on a terminal or reads differently than it is gets in.
fn site(value: String, field: &str) -> Result<SiteName> {
    if value.is_empty() {
        return Err(ConvertError::missing(field));
    }
    let label = value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if !label {
        return Err(ConvertError::invalid(
            field,
            format!(
                "{} is no site name (1-63 of a-z, 0-9 and -, not starting or ending with -)",
                orc_common::text::quoted(&value)
            ),
        ));
    }
    id(value, field)
}

fn optional_site(value: String, field: &str) -> Result<Option<SiteName>> {
    if value.is_empty() {
        Ok(None)
    } else {
        site(value, field).map(Some)
    }
}

/// Placement keys are short lowercase words; values are non-empty.
fn placement(map: std::collections::HashMap<String, String>) -> Result<BTreeMap<String, String>> {
    let mut placement = BTreeMap::new();
    for (key, value) in map {
        let key_ok = !key.is_empty()
            && key.len() <= 64
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !key_ok {
            return Err(ConvertError::invalid(
                "placement",
                format!("key {key:?} must be 1 to 64 of a-z, 0-9 and _"),
            ));
        }
        if value.is_empty() {
            return Err(ConvertError::missing(&format!("placement.{key}")));
        }
        placement.insert(key, value);
    }
    Ok(placement)
}

fn text(value: String, field: &str) -> Result<String> {
    if value.is_empty() {
        Err(ConvertError::missing(field))
    } else {
        Ok(value)
    }
}

/// The most a line of words from the wire keeps (refusals, progress, titles, hosts).
pub const WORDS_MAX_BYTES: usize = 1024;

/// Words from the wire, for people to read: one line of at most [`WORDS_MAX_BYTES`] without
/// control or bidirectional characters (`orc_common::text::clean_line`), the same rule the
/// zone applies to progress notes. Everything a peer writes that reaches an event, a view or
/// a page passes here.
fn words(value: String, field: &str) -> Result<String> {
    let cleaned = orc_common::text::clean_line(&value, WORDS_MAX_BYTES);
    text(cleaned, field)
}

/// Like [`words`] for a field that may be empty.
fn optional_words(value: String) -> String {
    orc_common::text::clean_line(&value, WORDS_MAX_BYTES)
}

fn message<T, D>(value: Option<T>, field: &str) -> Result<D>
where
    D: TryFrom<T, Error = ConvertError>,
{
    let value = value.ok_or_else(|| ConvertError::missing(field))?;
    D::try_from(value).map_err(|e| e.within(field))
}

fn optional_message<T, D>(value: Option<T>, field: &str) -> Result<Option<D>>
where
    D: TryFrom<T, Error = ConvertError>,
{
    value
        .map(|v| D::try_from(v).map_err(|e| e.within(field)))
        .transpose()
}

fn enum_value<E: TryFrom<i32>>(value: i32, field: &str) -> Result<E> {
    E::try_from(value).map_err(|_| ConvertError::invalid(field, format!("unknown value {value}")))
}

// ------------------------------------------------------------------ enums

/// A generated enum's `UNSPECIFIED` value, which no domain value stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the value is unspecified")]
pub struct Unspecified;

/// A wire enum field as its domain value: an unknown number is invalid, `UNSPECIFIED` is
/// missing.
fn wire_enum<W, D>(value: i32, field: &str) -> Result<D>
where
    W: TryFrom<i32>,
    D: TryFrom<W, Error = Unspecified>,
{
    D::try_from(enum_value::<W>(value, field)?).map_err(|Unspecified| ConvertError::missing(field))
}

impl TryFrom<pb::Role> for ReplicaRole {
    type Error = Unspecified;
    fn try_from(r: pb::Role) -> std::result::Result<ReplicaRole, Unspecified> {
        match r {
            pb::Role::Unspecified => Err(Unspecified),
            pb::Role::Serving => Ok(ReplicaRole::Serving),
            pb::Role::Standby => Ok(ReplicaRole::Standby),
        }
    }
}

impl From<ReplicaRole> for pb::Role {
    fn from(r: ReplicaRole) -> pb::Role {
        match r {
            ReplicaRole::Serving => pb::Role::Serving,
            ReplicaRole::Standby => pb::Role::Standby,
        }
    }
}

impl TryFrom<pb::RefusalKind> for RefusalKind {
    type Error = Unspecified;
    fn try_from(k: pb::RefusalKind) -> std::result::Result<RefusalKind, Unspecified> {
        match k {
            pb::RefusalKind::Unspecified => Err(Unspecified),
            pb::RefusalKind::NoCapacity => Ok(RefusalKind::NoCapacity),
            pb::RefusalKind::Counting => Ok(RefusalKind::Counting),
            pb::RefusalKind::Transient => Ok(RefusalKind::Transient),
            pb::RefusalKind::OperatorFix => Ok(RefusalKind::OperatorFix),
            pb::RefusalKind::Failed => Ok(RefusalKind::Failed),
            pb::RefusalKind::Unplaceable => Ok(RefusalKind::Unplaceable),
        }
    }
}

impl From<RefusalKind> for pb::RefusalKind {
    fn from(k: RefusalKind) -> pb::RefusalKind {
        match k {
            RefusalKind::NoCapacity => pb::RefusalKind::NoCapacity,
            RefusalKind::Counting => pb::RefusalKind::Counting,
            RefusalKind::Transient => pb::RefusalKind::Transient,
            RefusalKind::OperatorFix => pb::RefusalKind::OperatorFix,
            RefusalKind::Failed => pb::RefusalKind::Failed,
            RefusalKind::Unplaceable => pb::RefusalKind::Unplaceable,
        }
    }
}

impl TryFrom<pb::NodeState> for InstanceState {
    type Error = Unspecified;
    fn try_from(s: pb::NodeState) -> std::result::Result<InstanceState, Unspecified> {
        match s {
            pb::NodeState::Unspecified => Err(Unspecified),
            pb::NodeState::Provisioning => Ok(InstanceState::Provisioning),
            pb::NodeState::Running => Ok(InstanceState::Running),
            pb::NodeState::Stopped => Ok(InstanceState::Stopped),
            pb::NodeState::Deleting => Ok(InstanceState::Deleting),
        }
    }
}

impl From<InstanceState> for pb::NodeState {
    fn from(s: InstanceState) -> pb::NodeState {
        match s {
            InstanceState::Provisioning => pb::NodeState::Provisioning,
            InstanceState::Running => pb::NodeState::Running,
            InstanceState::Stopped => pb::NodeState::Stopped,
            InstanceState::Deleting => pb::NodeState::Deleting,
        }
    }
}

// ------------------------------------------------------------------ shared values

impl TryFrom<pb::Money> for Money {
    type Error = ConvertError;
    fn try_from(m: pb::Money) -> Result<Money> {
        let amount_text = text(m.amount, "amount")?;
        let amount = Decimal::from_str(&amount_text).map_err(|_| {
            ConvertError::invalid("amount", format!("{amount_text:?} is not a decimal"))
        })?;
        let currency = Currency::from_str(&text(m.currency, "currency")?)
            .map_err(|e| ConvertError::invalid("currency", e.to_string()))?;
        let period = match enum_value::<pb::Period>(m.period, "period")? {
            pb::Period::Unspecified => return Err(ConvertError::missing("period")),
            pb::Period::Hour => Period::Hour,
            pb::Period::Month => Period::Month,
            pb::Period::Once => Period::Once,
        };
        Ok(Money::new(amount, currency, period))
    }
}

impl From<Money> for pb::Money {
    fn from(m: Money) -> pb::Money {
        let period = match m.period {
            Period::Hour => pb::Period::Hour,
            Period::Month => pb::Period::Month,
            Period::Once => pb::Period::Once,
        };
        pb::Money {
            amount: m.amount.to_string(),
            currency: m.currency.to_string(),
            period: period as i32,
        }
    }
}

impl TryFrom<pb::Refusal> for Refusal {
    type Error = ConvertError;
    fn try_from(r: pb::Refusal) -> Result<Refusal> {
        Ok(Refusal {
            kind: wire_enum::<pb::RefusalKind, _>(r.kind, "kind")?,
            words: words(r.words, "words")?,
        })
    }
}

impl From<Refusal> for pb::Refusal {
    fn from(r: Refusal) -> pb::Refusal {
        pb::Refusal {
            kind: pb::RefusalKind::from(r.kind) as i32,
            words: r.words,
        }
    }
}

impl TryFrom<pb::Shape> for Shape {
    type Error = ConvertError;
    fn try_from(s: pb::Shape) -> Result<Shape> {
        if s.vcpus == 0 {
            return Err(ConvertError::missing("vcpus"));
        }
        if s.memory_gib == 0 {
            return Err(ConvertError::missing("memory_gib"));
        }
        let arch = match enum_value::<pb::Architecture>(s.arch, "arch")? {
            pb::Architecture::Unspecified => return Err(ConvertError::missing("arch")),
            pb::Architecture::X8664 => Architecture::X86_64,
            pb::Architecture::Arm64 => Architecture::Arm64,
        };
        if let Some(index) = s.disks_gib.iter().position(|gib| *gib == 0) {
            return Err(ConvertError::invalid(
                &format!("disks_gib[{index}]"),
                "a disk must have at least 1 GiB",
            ));
        }
        Ok(Shape {
            vcpus: s.vcpus,
            memory_gib: s.memory_gib,
            arch,
            disks_gib: s.disks_gib,
        })
    }
}

impl From<Shape> for pb::Shape {
    fn from(s: Shape) -> pb::Shape {
        let arch = match s.arch {
            Architecture::X86_64 => pb::Architecture::X8664,
            Architecture::Arm64 => pb::Architecture::Arm64,
        };
        pb::Shape {
            vcpus: s.vcpus,
            memory_gib: s.memory_gib,
            arch: arch as i32,
            disks_gib: s.disks_gib,
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

// ------------------------------------------------------------------ provider → zone

impl TryFrom<pb::Replica> for Replica {
    type Error = ConvertError;
    fn try_from(r: pb::Replica) -> Result<Replica> {
        Ok(Replica {
            host: words(r.host, "host")?,
            pid: r.pid,
            slot: r.slot,
        })
    }
}

impl From<Replica> for pb::Replica {
    fn from(r: Replica) -> pb::Replica {
        pb::Replica {
            host: r.host,
            pid: r.pid,
            slot: r.slot,
        }
    }
}

impl TryFrom<pb::Hello> for Hello {
    type Error = ConvertError;
    fn try_from(h: pb::Hello) -> Result<Hello> {
        if h.protocol_version == 0 {
            return Err(ConvertError::missing("protocol_version"));
        }
        Ok(Hello {
            provider: id(h.provider, "provider")?,
            resource_uri: id(h.resource_uri, "resource_uri")?,
            replica: message(h.replica, "replica")?,
            version: words(h.version, "version")?,
            protocol_version: h.protocol_version,
        })
    }
}

impl From<Hello> for pb::Hello {
    fn from(h: Hello) -> pb::Hello {
        pb::Hello {
            provider: h.provider.into(),
            resource_uri: h.resource_uri.into(),
            replica: Some(h.replica.into()),
            version: h.version,
            protocol_version: h.protocol_version,
        }
    }
}

fn indexed<T, D>(items: Vec<T>, field: &str) -> Result<Vec<D>>
where
    D: TryFrom<T, Error = ConvertError>,
{
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| D::try_from(item).map_err(|e| e.within(&format!("{field}[{i}]"))))
        .collect()
}

impl TryFrom<pb::ClassInfo> for ClassInfo {
    type Error = ConvertError;
    fn try_from(c: pb::ClassInfo) -> Result<ClassInfo> {
        Ok(ClassInfo {
            id: id(c.id, "id")?,
            title: words(c.title, "title")?,
            offerings: indexed(c.offerings, "offerings")?,
        })
    }
}

impl TryFrom<pb::Offering> for Offering {
    type Error = ConvertError;
    fn try_from(o: pb::Offering) -> Result<Offering> {
        Ok(Offering {
            shape: message(o.shape, "shape")?,
            plan: Some(optional_words(o.plan)).filter(|p| !p.is_empty()),
        })
    }
}

impl TryFrom<pb::OsInfo> for OsInfo {
    type Error = ConvertError;
    fn try_from(o: pb::OsInfo) -> Result<OsInfo> {
        Ok(OsInfo {
            id: id(o.id, "id")?,
            title: words(o.title, "title")?,
        })
    }
}

impl TryFrom<pb::ClassAvailability> for ClassAvailability {
    type Error = ConvertError;
    fn try_from(c: pb::ClassAvailability) -> Result<ClassAvailability> {
        Ok(ClassAvailability {
            class: id(c.class, "class")?,
            can_place: c.can_place,
        })
    }
}

impl TryFrom<pb::Availability> for Availability {
    type Error = ConvertError;
    fn try_from(a: pb::Availability) -> Result<Availability> {
        Ok(Availability {
            classes: indexed(a.classes, "classes")?,
            public_ipv4_offered: a.public_ipv4_offered,
        })
    }
}

impl TryFrom<pb::Catalog> for Catalog {
    type Error = ConvertError;
    fn try_from(c: pb::Catalog) -> Result<Catalog> {
        Ok(Catalog {
            classes: indexed(c.classes, "classes")?,
            os: indexed(c.os, "os")?,
            availability: message(c.availability, "availability")?,
            site_gateways: c.site_gateways,
        })
    }
}

impl From<Catalog> for pb::Catalog {
    fn from(c: Catalog) -> pb::Catalog {
        pb::Catalog {
            classes: c
                .classes
                .into_iter()
                .map(|c| pb::ClassInfo {
                    id: c.id.into(),
                    title: c.title,
                    offerings: c
                        .offerings
                        .into_iter()
                        .map(|o| pb::Offering {
                            shape: Some(o.shape.into()),
                            plan: o.plan.unwrap_or_default(),
                        })
                        .collect(),
                })
                .collect(),
            os: c
                .os
                .into_iter()
                .map(|o| pb::OsInfo {
                    id: o.id.into(),
                    title: o.title,
                })
                .collect(),
            availability: Some(pb::Availability {
                classes: c
                    .availability
                    .classes
                    .into_iter()
                    .map(|a| pb::ClassAvailability {
                        class: a.class.into(),
                        can_place: a.can_place,
                    })
                    .collect(),
                public_ipv4_offered: c.availability.public_ipv4_offered,
            }),
            site_gateways: c.site_gateways,
        }
    }
}

impl TryFrom<pb::Offer> for Offer {
    type Error = ConvertError;
    fn try_from(o: pb::Offer) -> Result<Offer> {
        if o.expires_unix_ms == 0 {
            return Err(ConvertError::missing("expires_unix_ms"));
        }
        Ok(Offer {
            site: site(o.site, "site")?,
            price: optional_message(o.price, "price")?,
            words: words(o.words, "words")?,
            quote_token: id(o.quote_token, "quote_token")?,
            expires: UNIX_EPOCH + Duration::from_millis(o.expires_unix_ms),
        })
    }
}

impl From<Offer> for pb::Offer {
    fn from(o: Offer) -> pb::Offer {
        pb::Offer {
            site: o.site.into(),
            price: o.price.map(Into::into),
            words: o.words,
            quote_token: o.quote_token.into(),
            expires_unix_ms: unix_ms(o.expires),
        }
    }
}

fn quote_reply(r: pb::QuoteReply) -> Result<ProviderBody> {
    let node_id = id(r.node_id, "node_id")?;
    let reply = match r.outcome {
        None => return Err(ConvertError::missing("outcome")),
        Some(pb::quote_reply::Outcome::Offer(o)) => {
            QuoteReply::Offer(Offer::try_from(o).map_err(|e| e.within("offer"))?)
        }
        Some(pb::quote_reply::Outcome::Refusal(r)) => {
            QuoteReply::Refused(Refusal::try_from(r).map_err(|e| e.within("refusal"))?)
        }
    };
    Ok(ProviderBody::QuoteReply { node_id, reply })
}

fn quote_reply_to_pb(node_id: NodeId, reply: QuoteReply) -> pb::QuoteReply {
    let outcome = match reply {
        QuoteReply::Offer(o) => pb::quote_reply::Outcome::Offer(o.into()),
        QuoteReply::Refused(r) => pb::quote_reply::Outcome::Refusal(r.into()),
    };
    pb::QuoteReply {
        node_id: node_id.into(),
        outcome: Some(outcome),
    }
}

impl TryFrom<pb::DeployProgress> for DeployProgress {
    type Error = ConvertError;
    fn try_from(p: pb::DeployProgress) -> Result<DeployProgress> {
        Ok(DeployProgress {
            node_id: id(p.node_id, "node_id")?,
            words: words(p.words, "words")?,
            product_uuid: Some(p.product_uuid).filter(|u| !u.is_empty()),
        })
    }
}

impl TryFrom<pb::DeployDone> for Deployed {
    type Error = ConvertError;
    fn try_from(d: pb::DeployDone) -> Result<Deployed> {
        let addresses = d
            .addresses
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                IpAddr::from_str(&a).map_err(|_| {
                    ConvertError::invalid(
                        &format!("addresses[{i}]"),
                        format!("{a:?} is not an IP address"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Deployed {
            node_id: id(d.node_id, "node_id")?,
            site: site(d.site, "site")?,
            addresses,
            price: optional_message(d.price, "price")?,
            instance_ref: id(optional_words(d.instance_ref), "instance_ref")?,
            placed: d
                .placed
                .map(|w| {
                    if w.cloud.is_empty() {
                        return Err(ConvertError::missing("placed.cloud"));
                    }
                    Ok(Whereabouts {
                        cloud: optional_words(w.cloud),
                        location: optional_words(w.location),
                        plan: optional_words(w.plan),
                    })
                })
                .transpose()?,
        })
    }
}

impl From<Deployed> for pb::DeployDone {
    fn from(d: Deployed) -> pb::DeployDone {
        pb::DeployDone {
            node_id: d.node_id.into(),
            site: d.site.into(),
            addresses: d.addresses.iter().map(ToString::to_string).collect(),
            price: d.price.map(Into::into),
            instance_ref: d.instance_ref.into(),
            placed: d.placed.map(|w| pb::Whereabouts {
                cloud: w.cloud,
                location: w.location,
                plan: w.plan,
            }),
        }
    }
}

impl TryFrom<pb::InventoryNode> for InventoryNode {
    type Error = ConvertError;
    fn try_from(n: pb::InventoryNode) -> Result<InventoryNode> {
        Ok(InventoryNode {
            node_id: id(n.node_id, "node_id")?,
            site: site(n.site, "site")?,
            instance_ref: id(optional_words(n.instance_ref), "instance_ref")?,
            state: wire_enum::<pb::NodeState, _>(n.state, "state")?,
        })
    }
}

impl TryFrom<pb::InventorySite> for InventorySite {
    type Error = ConvertError;
    fn try_from(s: pb::InventorySite) -> Result<InventorySite> {
        let public_ipv4 = if s.public_ipv4.is_empty() {
            None
        } else {
            Some(Ipv4Addr::from_str(&s.public_ipv4).map_err(|_| {
                ConvertError::invalid(
                    "public_ipv4",
                    format!("{:?} is not an IPv4 address", s.public_ipv4),
                )
            })?)
        };
        Ok(InventorySite {
            site: site(s.site, "site")?,
            public_ipv4,
            private_prefix: (!s.private_prefix.is_empty()).then_some(s.private_prefix),
        })
    }
}

impl TryFrom<pb::PoolAddress> for PoolAddress {
    type Error = ConvertError;
    fn try_from(a: pb::PoolAddress) -> Result<PoolAddress> {
        let ipv4 = Ipv4Addr::from_str(&a.ipv4).map_err(|_| {
            ConvertError::invalid("ipv4", format!("{:?} is not an IPv4 address", a.ipv4))
        })?;
        Ok(PoolAddress {
            pool: id(a.pool, "pool")?,
            site: site(a.site, "site")?,
            ipv4,
        })
    }
}

impl TryFrom<pb::Inventory> for Inventory {
    type Error = ConvertError;
    fn try_from(i: pb::Inventory) -> Result<Inventory> {
        if !i.complete {
            return Err(ConvertError::invalid(
                "complete",
                "an inventory must be complete; a provider that cannot read everything sends none",
            ));
        }
        Ok(Inventory {
            nodes: indexed(i.nodes, "nodes")?,
            sites: indexed(i.sites, "sites")?,
            pool_addresses: indexed(i.pool_addresses, "pool_addresses")?,
        })
    }
}

impl From<Inventory> for pb::Inventory {
    fn from(i: Inventory) -> pb::Inventory {
        pb::Inventory {
            complete: true,
            nodes: i
                .nodes
                .into_iter()
                .map(|n| {
                    let state = pb::NodeState::from(n.state);
                    pb::InventoryNode {
                        node_id: n.node_id.into(),
                        site: n.site.into(),
                        instance_ref: n.instance_ref.into(),
                        state: state as i32,
                    }
                })
                .collect(),
            sites: i
                .sites
                .into_iter()
                .map(|s| pb::InventorySite {
                    site: s.site.into(),
                    public_ipv4: s.public_ipv4.map(|a| a.to_string()).unwrap_or_default(),
                    private_prefix: s.private_prefix.unwrap_or_default(),
                })
                .collect(),
            pool_addresses: i
                .pool_addresses
                .into_iter()
                .map(|a| pb::PoolAddress {
                    pool: a.pool.into(),
                    site: a.site.into(),
                    ipv4: a.ipv4.to_string(),
                })
                .collect(),
        }
    }
}

fn node_refusal(node_id: String, refusal: Option<pb::Refusal>) -> Result<(NodeId, Refusal)> {
    Ok((id(node_id, "node_id")?, message(refusal, "refusal")?))
}

impl TryFrom<pb::ProviderMessage> for ProviderMessage {
    type Error = ConvertError;
    fn try_from(m: pb::ProviderMessage) -> Result<ProviderMessage> {
        use pb::provider_message::Body;
        let body = match m.body.ok_or_else(|| ConvertError::missing("body"))? {
            Body::Hello(h) => {
                ProviderBody::Hello(Hello::try_from(h).map_err(|e| e.within("hello"))?)
            }
            Body::Catalog(c) => {
                ProviderBody::Catalog(Catalog::try_from(c).map_err(|e| e.within("catalog"))?)
            }
            Body::QuoteReply(r) => quote_reply(r).map_err(|e| e.within("quote_reply"))?,
            Body::DeployProgress(p) => ProviderBody::DeployProgress(
                DeployProgress::try_from(p).map_err(|e| e.within("deploy_progress"))?,
            ),
            Body::DeployDone(d) => ProviderBody::DeployDone(
                Deployed::try_from(d).map_err(|e| e.within("deploy_done"))?,
            ),
            Body::DeployRefused(r) => {
                let (node_id, refusal) =
                    node_refusal(r.node_id, r.refusal).map_err(|e| e.within("deploy_refused"))?;
                ProviderBody::DeployRefused { node_id, refusal }
            }
            Body::DestroyDone(d) => ProviderBody::DestroyDone {
                node_id: id(d.node_id, "destroy_done.node_id")?,
            },
            Body::DestroyRefused(r) => {
                let (node_id, refusal) =
                    node_refusal(r.node_id, r.refusal).map_err(|e| e.within("destroy_refused"))?;
                ProviderBody::DestroyRefused { node_id, refusal }
            }
            Body::Inventory(i) => {
                ProviderBody::Inventory(Inventory::try_from(i).map_err(|e| e.within("inventory"))?)
            }
            Body::KeepAlive(pb::KeepAlive {}) => ProviderBody::KeepAlive,
        };
        Ok(ProviderMessage {
            request_id: RequestId(m.request_id),
            body,
        })
    }
}

impl From<ProviderMessage> for pb::ProviderMessage {
    fn from(m: ProviderMessage) -> pb::ProviderMessage {
        use pb::provider_message::Body;
        let body = match m.body {
            ProviderBody::Hello(h) => Body::Hello(h.into()),
            ProviderBody::Catalog(c) => Body::Catalog(c.into()),
            ProviderBody::QuoteReply { node_id, reply } => {
                Body::QuoteReply(quote_reply_to_pb(node_id, reply))
            }
            ProviderBody::DeployProgress(p) => Body::DeployProgress(pb::DeployProgress {
                node_id: p.node_id.into(),
                words: p.words,
                product_uuid: p.product_uuid.unwrap_or_default(),
            }),
            ProviderBody::DeployDone(d) => Body::DeployDone(d.into()),
            ProviderBody::DeployRefused { node_id, refusal } => {
                Body::DeployRefused(pb::DeployRefused {
                    node_id: node_id.into(),
                    refusal: Some(refusal.into()),
                })
            }
            ProviderBody::DestroyDone { node_id } => Body::DestroyDone(pb::DestroyDone {
                node_id: node_id.into(),
            }),
            ProviderBody::DestroyRefused { node_id, refusal } => {
                Body::DestroyRefused(pb::DestroyRefused {
                    node_id: node_id.into(),
                    refusal: Some(refusal.into()),
                })
            }
            ProviderBody::Inventory(i) => Body::Inventory(i.into()),
            ProviderBody::KeepAlive => Body::KeepAlive(pb::KeepAlive {}),
        };
        pb::ProviderMessage {
            request_id: m.request_id.0,
            body: Some(body),
        }
    }
}

// ------------------------------------------------------------------ zone → provider

fn purpose(value: i32, field: &str) -> Result<Purpose> {
    match enum_value::<pb::Purpose>(value, field)? {
        pb::Purpose::Unspecified => Err(ConvertError::missing(field)),
        pb::Purpose::Tenant => Ok(Purpose::Tenant),
        pb::Purpose::Gateway => Ok(Purpose::Gateway),
    }
}

impl TryFrom<pb::Quote> for Quote {
    type Error = ConvertError;
    fn try_from(q: pb::Quote) -> Result<Quote> {
        Ok(Quote {
            pool: id::<PoolPath>(q.pool, "pool")?,
            node_id: id(q.node_id, "node_id")?,
            purpose: purpose(q.purpose, "purpose")?,
            shape: message(q.shape, "shape")?,
            class: id::<ClassId>(q.class, "class")?,
            os: id::<OsId>(q.os, "os")?,
            pinned_site: optional_site(q.pinned_site, "pinned_site")?,
            public: q.public,
            placement: placement(q.placement)?,
            preview: q.preview,
        })
    }
}

impl From<Quote> for pb::Quote {
    fn from(q: Quote) -> pb::Quote {
        let purpose = match q.purpose {
            Purpose::Tenant => pb::Purpose::Tenant,
            Purpose::Gateway => pb::Purpose::Gateway,
        };
        pb::Quote {
            pool: q.pool.into(),
            node_id: q.node_id.into(),
            purpose: purpose as i32,
            shape: Some(q.shape.into()),
            class: q.class.into(),
            os: q.os.into(),
            pinned_site: q.pinned_site.map(String::from).unwrap_or_default(),
            public: q.public,
            placement: q.placement.into_iter().collect(),
            preview: q.preview,
        }
    }
}

impl TryFrom<pb::Deploy> for Deploy {
    type Error = ConvertError;
    fn try_from(d: pb::Deploy) -> Result<Deploy> {
        if let Some(index) = d.ssh_keys.iter().position(String::is_empty) {
            return Err(ConvertError::missing(&format!("ssh_keys[{index}]")));
        }
        Ok(Deploy {
            node_id: id(d.node_id, "node_id")?,
            quote_token: id(d.quote_token, "quote_token")?,
            os: id(d.os, "os")?,
            ssh_keys: d.ssh_keys,
            bootstrap: Bootstrap(d.bootstrap),
        })
    }
}

impl From<Deploy> for pb::Deploy {
    fn from(d: Deploy) -> pb::Deploy {
        pb::Deploy {
            node_id: d.node_id.into(),
            quote_token: d.quote_token.into(),
            os: d.os.into(),
            ssh_keys: d.ssh_keys,
            bootstrap: d.bootstrap.0,
        }
    }
}

impl TryFrom<pb::ZoneMessage> for ZoneMessage {
    type Error = ConvertError;
    fn try_from(m: pb::ZoneMessage) -> Result<ZoneMessage> {
        use pb::zone_message::Body;
        let body = match m.body.ok_or_else(|| ConvertError::missing("body"))? {
            Body::Welcome(w) => ZoneBody::Welcome {
                role: wire_enum::<pb::Role, _>(w.role, "welcome.role")?,
            },
            Body::RoleChange(r) => ZoneBody::RoleChange {
                role: wire_enum::<pb::Role, _>(r.role, "role_change.role")?,
            },
            Body::Quote(q) => ZoneBody::Quote(Quote::try_from(q).map_err(|e| e.within("quote"))?),
            Body::Deploy(d) => {
                ZoneBody::Deploy(Deploy::try_from(d).map_err(|e| e.within("deploy"))?)
            }
            Body::Destroy(d) => ZoneBody::Destroy(Destroy {
                node_id: id(d.node_id, "destroy.node_id")?,
            }),
            Body::KeepAlive(pb::KeepAlive {}) => ZoneBody::KeepAlive,
        };
        Ok(ZoneMessage {
            request_id: RequestId(m.request_id),
            body,
        })
    }
}

impl From<ZoneMessage> for pb::ZoneMessage {
    fn from(m: ZoneMessage) -> pb::ZoneMessage {
        use pb::zone_message::Body;
        let body = match m.body {
            ZoneBody::Welcome { role } => Body::Welcome(pb::Welcome {
                role: pb::Role::from(role) as i32,
            }),
            ZoneBody::RoleChange { role } => Body::RoleChange(pb::RoleChange {
                role: pb::Role::from(role) as i32,
            }),
            ZoneBody::Quote(q) => Body::Quote(q.into()),
            ZoneBody::Deploy(d) => Body::Deploy(d.into()),
            ZoneBody::Destroy(d) => Body::Destroy(pb::Destroy {
                node_id: d.node_id.into(),
            }),
            ZoneBody::KeepAlive => Body::KeepAlive(pb::KeepAlive {}),
        };
        pb::ZoneMessage {
            request_id: m.request_id.0,
            body: Some(body),
        }
    }
}
