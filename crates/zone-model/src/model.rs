//! The zone's domain model: pure data types for everything the store keeps.
//!
//! Nothing here does I/O. Every identifier is a typed newtype whose text is a valid DNS label
//! (`<prefix><12 base32 chars>`, e.g. `n-0000000000ab`), minted from the zone's single
//! monotonic counter, so ids sort in creation order and never repeat within a zone. Names
//! (org, project, pool, provider, user) are DNS labels too, so they can appear in host names.
//!
//! Money is [`orc_common::Money`]; time is [`Timestamp`], UTC milliseconds since the Unix
//! epoch. Ids are declared with the vocabulary's one id macro; a node id is the vocabulary's
//! [`NodeId`], which the zone mints with [`NodeId::from_counter`]. Secrets (API token values,
//! sensitive app params) have a `Debug` that shows no character of the secret.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use orc_common::{ClassId, Money, OsId, RefusalKind, Shape, string_id};
pub use orc_common::{MalformedId, NodeId, Timestamp, Whereabouts};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why a piece of text is not a valid id, name or enum word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// An id without its kind's prefix or with a malformed counter part.
    #[error(transparent)]
    InvalidId(#[from] MalformedId),
    /// A name that is not a DNS label.
    #[error("{} is not a valid name: {reason}", orc_common::text::quoted(.value))]
    InvalidName { value: String, reason: &'static str },
    /// A word that is not one of an enum's spellings.
    #[error("{} is not a valid {kind}", orc_common::text::quoted(.value))]
    InvalidWord { kind: &'static str, value: String },
    /// A month that is not `YYYY-MM`.
    #[error("{} is not a month of the form YYYY-MM", orc_common::text::quoted(.value))]
    InvalidMonth { value: String },
    /// A markup below zero.
    #[error("markup {value} is negative; a markup must be 0 or more")]
    NegativeMarkup { value: Decimal },
}

string_id!(
    /// Identifies an org (`o-…`).
    OrgId,
    "org",
    prefix "o-"
);
string_id!(
    /// Identifies a project (`p-…`).
    ProjectId,
    "project",
    prefix "p-"
);
string_id!(
    /// Identifies a user (`u-…`).
    UserId,
    "user",
    prefix "u-"
);
string_id!(
    /// Identifies an API token (`t-…`); not the secret itself.
    TokenId,
    "token",
    prefix "t-"
);
string_id!(
    /// Identifies a join token (`j-…`); not the secret itself.
    JoinTokenId,
    "join token",
    prefix "j-"
);
string_id!(
    /// Identifies a membership (`m-…`).
    MembershipId,
    "membership",
    prefix "m-"
);
string_id!(
    /// Identifies a provider (`pv-…`).
    ProviderId,
    "provider",
    prefix "pv-"
);
string_id!(
    /// Identifies a pool (`pl-…`).
    PoolId,
    "pool",
    prefix "pl-"
);
string_id!(
    /// Identifies an event (`e-…`).
    EventId,
    "event",
    prefix "e-"
);
string_id!(
    /// Identifies a usage (invoice) line (`ul-…`).
    UsageLineId,
    "usage line",
    prefix "ul-"
);

/// Id of the `sys` org every zone has.
pub fn sys_org_id() -> OrgId {
    OrgId::from_counter(1)
}

/// Id of the `sys/sys` project every zone has.
pub fn sys_project_id() -> ProjectId {
    ProjectId::from_counter(2)
}

/// The first counter value handed out after the bootstrap ids.
pub const FIRST_FREE_COUNTER: u64 = 3;

/// A name of an org, project, pool, provider or user: a DNS label (1–63 characters of
/// `a-z`, `0-9` and `-`, starting with a letter, not ending with `-`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Name {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| {
            Err(ModelError::InvalidName {
                value: s.to_string(),
                reason,
            })
        };
        let bytes = s.as_bytes();
        match bytes.first() {
            None => return invalid("it is empty"),
            Some(b) if !b.is_ascii_lowercase() => {
                return invalid("it must start with a lower-case letter");
            }
            Some(_) => {}
        }
        if bytes.len() > 63 {
            return invalid("it is longer than 63 characters");
        }
        if !bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        {
            return invalid("only a-z, 0-9 and - are allowed");
        }
        if bytes.last() == Some(&b'-') {
            return invalid("it must not end with -");
        }
        Ok(Name(s.to_string()))
    }
}

impl TryFrom<String> for Name {
    type Error = ModelError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident, $kind:literal { $($(#[$vdoc:meta])* $variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word stored and shown for this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }
        }

        impl FromStr for $name {
            type Err = ModelError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err(ModelError::InvalidWord { kind: $kind, value: s.to_string() }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = ModelError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.as_str().to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// A user's role in an org or project.
    Role, "role" {
        Owner => "owner",
        Member => "member",
        Viewer => "viewer",
    }
);

word_enum!(
    /// Who may place pools on a provider: its own project, or every project of the zone.
    ProviderScope, "provider scope" {
        Project => "project",
        Zone => "zone",
    }
);

word_enum!(
    /// Where a node is in its life.
    NodeState, "node state" {
        /// Admitted, waiting for its first quote.
        Pending => "pending",
        /// A quote request is out at the provider.
        Quoting => "quoting",
        /// A deploy request is out at the provider.
        Deploying => "deploying",
        /// The provider reported the node deployed.
        Running => "running",
        /// A destroy request is out (or about to be sent).
        Destroying => "destroying",
        /// Gone for good; kept for history and billing.
        Ended => "ended",
        /// Cannot be placed now; waits with the provider's generic reason.
        Parked => "parked",
        /// Believed running but absent from the provider's complete inventory.
        Lost => "lost",
    }
);

impl NodeState {
    /// Whether the node still occupies its slot (every state but `ended`).
    pub fn is_live(self) -> bool {
        match self {
            NodeState::Pending
            | NodeState::Quoting
            | NodeState::Deploying
            | NodeState::Running
            | NodeState::Destroying
            | NodeState::Parked
            | NodeState::Lost => true,
            NodeState::Ended => false,
        }
    }
}

word_enum!(
    /// How far a running node's agent has come: it holds a certificate (`joined`), or it is
    /// attached and has applied the zone's current config (`ready`).
    AgentState, "agent state" {
        /// Joined with its token and holds a node certificate; not (yet) attached with the
        /// current config applied.
        Joined => "joined",
        /// Attached, and has applied the config generation the zone wants.
        Ready => "ready",
    }
);

/// How a provider's nodes are priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PricingStrategy {
    /// No strategy: the provider's nodes are unpriced (no price at all, not zero).
    None,
    /// The provider's price times `1 + markup` (0 allowed).
    Markup(Markup),
}

/// A markup factor, 0 or more (`0.15` = 15 %).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Decimal", into = "Decimal")]
pub struct Markup(Decimal);

impl Markup {
    /// A markup; refuses values below zero.
    pub fn new(value: Decimal) -> Result<Self, ModelError> {
        if value.is_sign_negative() && !value.is_zero() {
            Err(ModelError::NegativeMarkup { value })
        } else {
            Ok(Markup(value))
        }
    }

    /// The factor as a decimal.
    pub fn value(self) -> Decimal {
        self.0
    }
}

impl TryFrom<Decimal> for Markup {
    type Error = ModelError;
    fn try_from(value: Decimal) -> Result<Self, Self::Error> {
        Markup::new(value)
    }
}

impl From<Markup> for Decimal {
    fn from(m: Markup) -> Decimal {
        m.0
    }
}

/// A billing month, `YYYY-MM`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Month(String);

impl Month {
    /// The month as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Month {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
        let ok = b.len() == 7
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && matches!(
                &s[5..7],
                "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "12"
            );
        if ok {
            Ok(Month(s.to_string()))
        } else {
            Err(ModelError::InvalidMonth {
                value: s.to_string(),
            })
        }
    }
}

impl TryFrom<String> for Month {
    type Error = ModelError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Month> for String {
    fn from(m: Month) -> String {
        m.0
    }
}

impl fmt::Display for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// An org: the top of tenancy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Org {
    pub id: OrgId,
    pub name: Name,
    pub created_at: Timestamp,
}

/// A project inside an org; its name is unique within the org.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: ProjectId,
    pub org_id: OrgId,
    pub name: Name,
    pub created_at: Timestamp,
}

/// A user; its name is unique in the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub name: Name,
    pub created_at: Timestamp,
}

/// The value of an API token. Shown to its user once, at creation; the store keeps only its
/// SHA-256. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

/// Digits of a token value: Crockford base32 in lower case, like the zone's ids.
const TOKEN_ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

impl TokenSecret {
    /// Prefix of every token value, so leaked tokens are easy to recognise.
    pub const PREFIX: &'static str = "orc_";

    /// A fresh random token value (256 bits from the thread's CSPRNG).
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        let mut text = String::from(Self::PREFIX);
        for chunk in bytes.chunks(5) {
            let mut acc = 0u64;
            for b in chunk {
                acc = (acc << 8) | u64::from(*b);
            }
            let bits = chunk.len() * 8;
            let digits = bits.div_ceil(5);
            acc <<= digits * 5 - bits;
            for i in (0..digits).rev() {
                text.push(char::from(TOKEN_ALPHABET[((acc >> (i * 5)) & 31) as usize]));
            }
        }
        TokenSecret(text)
    }

    /// Wraps a value presented by a client (for lookup).
    pub fn from_presented(value: String) -> Self {
        TokenSecret(value)
    }

    /// The value, to show once or to send.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash the store keeps.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

/// SHA-256 of a token value; stored as 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// The hash as lower-case hex.
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for b in self.0 {
            out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        out
    }

    /// Parses 64 hex digits.
    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let mut out = [0u8; 32];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks(2)) {
            *slot = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(TokenHash(out))
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({}…)", &self.to_hex()[..8])
    }
}

/// An API token's record. Carries the hash, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: TokenId,
    pub user_id: UserId,
    /// What the user called it ("laptop", "ci").
    pub label: String,
    pub hash: TokenHash,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// The app pool whose slots this credential belongs to: it then opens only that pool's
    /// provider stream and nothing on the HTTP API. `None` for a user's own token.
    pub service_pool: Option<PoolId>,
    /// The project a command made with this token means when it names none.
    pub default_project: Option<ProjectId>,
}

impl ApiToken {
    /// The principal this token acts as on a provider stream: `pool:<id>` for a service
    /// credential, `user:<id>` for a user's token.
    pub fn principal(&self) -> String {
        match &self.service_pool {
            Some(pool) => format!("pool:{pool}"),
            None => format!("user:{}", self.user_id),
        }
    }
}

/// A user's role in an org (project `None`) or in one project of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub id: MembershipId,
    pub user_id: UserId,
    pub org_id: OrgId,
    pub project_id: Option<ProjectId>,
    pub role: Role,
    pub created_at: Timestamp,
}

/// A registered source of nodes.
///
/// Records join a provider by its id, never by its name: any project may register a provider
/// under any name, so a name says nothing about whose it is. Bare names are the zone
/// operator's: a provider of org `sys` is read and addressed by its name (unique across the
/// org); any other by its full name `<org>/<project>/<name>` ([`Provider::full_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub id: ProviderId,
    /// The project it registered in.
    pub project_id: ProjectId,
    /// The org of that project.
    pub org_id: OrgId,
    pub name: Name,
    /// The resource it offers (`urn:orc:partner:<id>` for a shared one); unique in the zone.
    pub resource_uri: String,
    pub scope: ProviderScope,
    pub pricing: PricingStrategy,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Provider {
    /// Whether the zone's operator registered it (its project is in org `sys`).
    pub fn is_operators(&self) -> bool {
        self.org_id == sys_org_id()
    }

    /// Whether it may declare site gateways: only a zone-scoped provider of org `sys` does
    /// (the zone runs its gateways in `sys/sys`, with join tokens of the zone's own).
    pub fn may_run_site_gateways(&self) -> bool {
        self.is_operators() && self.scope == ProviderScope::Zone
    }

    /// Whether it is the zone's own `core` provider, which runs apps on the zone's hosts:
    /// the one registered in `sys/sys` under [`CORE_PROVIDER_NAME`], never a namesake.
    pub fn is_core(&self) -> bool {
        self.project_id == sys_project_id() && self.name.as_str() == CORE_PROVIDER_NAME
    }

    /// The name people read and give for it: its bare name when it is the operator's, else
    /// `<org>/<project>/<name>` with the names of its org and project.
    pub fn full_name(&self, org: &Name, project: &Name) -> String {
        if self.is_operators() {
            self.name.to_string()
        } else {
            format!("{org}/{project}/{}", self.name)
        }
    }
}

/// Name of the first operator the zone creates.
pub const ADMIN_USER: &str = "admin";

/// The name of the zone's own provider of app pools, registered in `sys/sys`.
pub const CORE_PROVIDER_NAME: &str = "core";

/// The site, and the only class, of every node of the `core` provider: the zone's hosts.
pub const CORE_LOCAL_SITE: &str = "local";

/// What a new provider record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProvider {
    pub project_id: ProjectId,
    pub name: Name,
    pub resource_uri: String,
    pub scope: ProviderScope,
    pub pricing: PricingStrategy,
}

/// A public endpoint of a pool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    /// `http` or `tcp`.
    pub protocol: String,
    pub port: u16,
}

/// Sensitive app params (keys, passwords). `Debug` shows their names only, never a value.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SensitiveParams(pub BTreeMap<String, String>);

impl fmt::Debug for SensitiveParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "<redacted>")))
            .finish()
    }
}

/// The app a pool runs, with its params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSpec {
    /// Package reference `org/name:tag`.
    pub package: String,
    /// The package the tag named when the pool was created or last reconfigured: what its
    /// slots run. `None` for an app the zone's operator configured by name, outside the
    /// registry.
    pub digest: Option<crate::registry::Digest>,
    pub params: BTreeMap<String, String>,
    pub sensitive: SensitiveParams,
}

/// What a tenant asks of a pool; changing it bumps the pool's generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub provider_id: ProviderId,
    pub shape: Shape,
    /// Region class id (`eu-central`).
    pub region_class: ClassId,
    /// OS id (`debian-12`).
    pub os: OsId,
    pub public: bool,
    pub endpoints: Vec<Endpoint>,
    pub app: Option<AppSpec>,
    /// Provider-specific placement of a pool placed directly on one cloud
    /// (`plan` → `cx23`); empty when the provider chooses.
    pub placement: BTreeMap<String, String>,
    /// OpenSSH public keys (`authorized_keys` lines) every node installs for its OS's
    /// default user.
    pub ssh_keys: Vec<String>,
}

impl PoolSpec {
    /// The names of the pool's `http` endpoints (the ones the access edge serves), sorted.
    pub fn http_endpoints(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .endpoints
            .iter()
            .filter(|e| e.protocol == "http")
            .map(|e| e.name.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// A pool `<org>/<project>/<name>` of identical nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub id: PoolId,
    pub project_id: ProjectId,
    pub name: Name,
    pub size: u32,
    pub spec: PoolSpec,
    /// Starts at 1; bumped by every reconfigure.
    pub generation: u64,
    pub deleting: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What a new pool holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPool {
    pub project_id: ProjectId,
    pub name: Name,
    pub size: u32,
    pub spec: PoolSpec,
}

/// The mutable part of a node: what reconcilers change, always as a whole, under
/// compare-and-set on the node's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub state: NodeState,
    /// The provider's generic words about the current state or refusal.
    pub state_words: Option<String>,
    pub refusal: Option<RefusalKind>,
    /// Neutral site name (`eu-central-a`).
    pub site: Option<String>,
    /// The provider's reference for the instance.
    pub instance_ref: Option<String>,
    /// Where the provider put the node (cloud, location, plan), for zone operators only.
    pub placed: Option<Whereabouts>,
    pub addresses: Vec<String>,
    /// `None` = unpriced (not zero).
    pub price: Option<Money>,
    /// Markup recorded at admission; `None` when the provider had no strategy.
    pub markup: Option<Decimal>,
    pub attempts: u32,
    /// When a reconciler should look at the node next; `None` = nothing due.
    pub next_attempt_at: Option<Timestamp>,
    pub quote_token: Option<String>,
    /// Set exactly when the state is `ended`.
    pub ended_at: Option<Timestamp>,
    /// When the node was found missing from its provider's complete inventory: billing
    /// stops there and the zone replaces the node a while later. Cleared when a later
    /// report lists it again.
    pub lost_at: Option<Timestamp>,
}

impl NodeStatus {
    /// The status of a freshly admitted node, due at `due`.
    pub fn pending(due: Timestamp) -> Self {
        NodeStatus {
            state: NodeState::Pending,
            state_words: None,
            refusal: None,
            site: None,
            instance_ref: None,
            placed: None,
            addresses: Vec::new(),
            price: None,
            markup: None,
            attempts: 0,
            next_attempt_at: Some(due),
            quote_token: None,
            ended_at: None,
            lost_at: None,
        }
    }
}

/// A node of a pool, in one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    pub pool_id: PoolId,
    /// Slot (ordinal) in the pool, `0..size`; a live node's slot is unique in its pool.
    pub slot: u32,
    pub status: NodeStatus,
    /// Bumped by every write; the compare-and-set token.
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What a status write expects to find, so a stale writer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// The node still has this version.
    Version(u64),
    /// The node is still in this state.
    State(NodeState),
}

/// Which objects an event is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventScope {
    pub org_id: Option<OrgId>,
    pub project_id: Option<ProjectId>,
    pub provider_id: Option<ProviderId>,
    pub pool_id: Option<PoolId>,
    pub node_id: Option<NodeId>,
}

impl EventScope {
    /// The scope of an event about `provider` itself: its org, project and id.
    pub fn of_provider(provider: &Provider) -> EventScope {
        EventScope {
            org_id: Some(provider.org_id.clone()),
            project_id: Some(provider.project_id.clone()),
            provider_id: Some(provider.id.clone()),
            ..EventScope::default()
        }
    }
}

/// Something that happened, in words a tenant or operator may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: EventId,
    pub at: Timestamp,
    pub scope: EventScope,
    /// Machine-readable kind (`node.parked`).
    pub kind: String,
    pub words: String,
    /// How many times it happened: a node refused again in the same words is counted here
    /// rather than recorded anew. At least 1.
    pub repeats: u32,
    /// When it last happened, when it happened more than once.
    pub last_at: Option<Timestamp>,
}

/// One line of a project's monthly usage (invoice line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLine {
    pub id: UsageLineId,
    pub project_id: ProjectId,
    pub month: Month,
    pub pool_id: Option<PoolId>,
    pub node_id: Option<NodeId>,
    /// Reads like `2 vCPU · 4 GiB · eu-central`.
    pub description: String,
    pub hours: Decimal,
    /// Price per period (normally per hour).
    pub rate: Money,
    /// Total of the line, in the rate's currency.
    pub amount: Decimal,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Usage to add to a line: lines are keyed by (project, month, pool, node, description);
/// recording usage for an existing key adds hours and amount to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUsage {
    pub project_id: ProjectId,
    pub month: Month,
    pub pool_id: Option<PoolId>,
    pub node_id: Option<NodeId>,
    pub description: String,
    pub hours: Decimal,
    pub rate: Money,
    pub amount: Decimal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fixed_width_dns_labels_that_sort_by_counter() {
        let a = NodeId::from_counter(31);
        let b = NodeId::from_counter(32);
        assert_eq!(a.as_str(), "n-00000000000z");
        assert_eq!(b.as_str(), "n-000000000010");
        assert!(a < b);
        assert_eq!(
            PoolId::from_counter(u64::MAX >> 4).as_str().len(),
            3 + orc_common::ids::COUNTER_DIGITS
        );
        assert_eq!(NodeId::parse_minted("n-000000000010").unwrap(), b);
        let err = NodeId::parse_minted("pl-000000000010").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"pl-000000000010\" is not a valid node id (expected n- followed by 12 base32 digits)"
        );
        assert!(NodeId::parse_minted("n-00000000001i").is_err());
        let err = ModelError::from("n-000000000010".parse::<PoolId>().unwrap_err());
        assert_eq!(
            err.to_string(),
            "\"n-000000000010\" is not a valid pool id (expected pl- followed by 12 base32 digits)"
        );
    }

    #[test]
    fn names_are_dns_labels() {
        assert!("web-1".parse::<Name>().is_ok());
        for (bad, reason) in [
            ("", "it is empty"),
            ("1web", "it must start with a lower-case letter"),
            ("Web", "it must start with a lower-case letter"),
            ("web_1", "only a-z, 0-9 and - are allowed"),
            ("web-", "it must not end with -"),
        ] {
            match bad.parse::<Name>() {
                Err(ModelError::InvalidName { reason: r, .. }) => assert_eq!(r, reason, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!("a".repeat(64).parse::<Name>().is_err());
        assert!("a".repeat(63).parse::<Name>().is_ok());
    }

    #[test]
    fn words_round_trip() {
        for state in NodeState::ALL {
            assert_eq!(state.as_str().parse::<NodeState>().unwrap(), *state);
        }
        assert_eq!(
            "sleeping".parse::<NodeState>().unwrap_err().to_string(),
            "\"sleeping\" is not a valid node state"
        );
    }

    #[test]
    fn months_and_markups_validate() {
        assert!("2026-11".parse::<Month>().is_ok());
        assert!("2026-13".parse::<Month>().is_err());
        assert!("2026-1".parse::<Month>().is_err());
        assert!(Markup::new(Decimal::ZERO).is_ok());
        assert!(Markup::new(Decimal::new(-1, 2)).is_err());
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let secret = TokenSecret::generate();
        assert!(secret.expose().starts_with("orc_"));
        assert_eq!(secret.expose().len(), 4 + 52);
        let shown = format!("{secret:?} {:?}", secret.hash());
        assert!(!shown.contains(&secret.expose()[4..12]), "{shown}");
        let hash = secret.hash();
        assert_eq!(TokenHash::from_hex(&hash.to_hex()), Some(hash));

        let mut params = BTreeMap::new();
        params.insert("api_key".to_string(), "hunter2-very-secret".to_string());
        let shown = format!("{:?}", SensitiveParams(params));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("api_key"), "{shown}");
    }
}
