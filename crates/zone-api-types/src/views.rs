//! The JSON shapes of the API: request bodies (`deny_unknown_fields`, so a misspelt field is
//! named in a 400) and the views answers are made of. Ids are the store's typed ids as text;
//! times are UTC milliseconds since the Unix epoch; money is decimal text, never a float.
//! What the zone has already parsed reaches a client typed (a pool's class and OS, a node's
//! and an agent's state), so nothing downstream compares strings. A refusal's kind stays text
//! with a typed reader ([`NodeView::refusal_kind`]): a client built before a new kind reads
//! it as unknown instead of failing the whole answer.

use std::collections::BTreeMap;

use orc_common::{ClassId, Money, OsId, RefusalKind};
use orc_zone_model::{
    AgentState, ApiToken, Event, Membership, Node, NodeState, Org, Pool, PricingStrategy, Project,
    Provider, SshPublicKey, UsageLine, User,
};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// An org.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OrgView {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

impl From<&Org> for OrgView {
    fn from(o: &Org) -> Self {
        OrgView {
            id: o.id.to_string(),
            name: o.name.to_string(),
            created_at: o.created_at.millis(),
        }
    }
}

/// A project of an org.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProjectView {
    pub id: String,
    pub org: String,
    pub name: String,
    pub created_at: i64,
}

impl ProjectView {
    pub fn new(org: &Org, p: &Project) -> Self {
        ProjectView {
            id: p.id.to_string(),
            org: org.name.to_string(),
            name: p.name.to_string(),
            created_at: p.created_at.millis(),
        }
    }
}

/// A user.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UserView {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

impl From<&User> for UserView {
    fn from(u: &User) -> Self {
        UserView {
            id: u.id.to_string(),
            name: u.name.to_string(),
            created_at: u.created_at.millis(),
        }
    }
}

/// An API token's record (never its value).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    pub id: String,
    pub user: String,
    pub label: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// The project (`org/project`) commands made with it mean when they name none.
    #[serde(default)]
    pub project: Option<String>,
}

impl TokenView {
    /// The view of `t`, whose default project is at `project` (`org/project`).
    pub fn new(user: &User, t: &ApiToken, project: Option<String>) -> Self {
        TokenView {
            id: t.id.to_string(),
            user: user.name.to_string(),
            label: t.label.clone(),
            created_at: t.created_at.millis(),
            expires_at: t.expires_at.map(|t| t.millis()),
            revoked_at: t.revoked_at.map(|t| t.millis()),
            project,
        }
    }
}

/// A freshly created token: the only answer that carries its value.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewTokenView {
    pub token: TokenView,
    /// The token's value. Shown once; the zone keeps only its hash.
    pub value: String,
}

/// The caller and their roles.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhoAmIView {
    pub user: UserView,
    pub token_id: String,
    /// The project (`org/project`) the caller's token names as its default, while the
    /// caller still has a role in it.
    #[serde(default)]
    pub default_project: Option<String>,
    pub memberships: Vec<MembershipView>,
    /// The caller's org-wide role in org `sys` (`owner`, `member`, `viewer`), which reaches
    /// every project of the zone.
    #[serde(default)]
    pub zone_role: Option<String>,
    /// Every project the caller may open, by path, with their role there.
    #[serde(default)]
    pub projects: Vec<ProjectAccessView>,
}

/// A project a caller may open, and how (`GET /api/whoami`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProjectAccessView {
    /// `org/project`.
    pub project: String,
    /// The caller's effective role in the project: from the project, its org or the zone.
    pub role: String,
    /// The caller's org-wide role in the project's org, if they have one.
    #[serde(default)]
    pub org_role: Option<String>,
}

/// A role of a user in an org (`project` null) or one of its projects.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MembershipView {
    pub id: String,
    pub user: String,
    pub org: String,
    pub project: Option<String>,
    /// `owner`, `member` or `viewer`.
    pub role: String,
    pub created_at: i64,
}

impl MembershipView {
    pub fn new(m: &Membership, user: &str, org: &str, project: Option<&str>) -> Self {
        MembershipView {
            id: m.id.to_string(),
            user: user.to_string(),
            org: org.to_string(),
            project: project.map(str::to_string),
            role: m.role.to_string(),
            created_at: m.created_at.millis(),
        }
    }
}

/// Decimal places of every amount of money in an answer. Amounts are kept exactly in the
/// store and rounded only here, half to even: at 8 places, a sum of up to a million shown
/// amounts is within half a cent of the exact sum, so totals agree to the currency's minor
/// unit.
pub const MONEY_DECIMALS: u32 = 8;

/// An amount of money as the API writes it: at most [`MONEY_DECIMALS`] places, no trailing
/// zeros (`"0.0115"`, `"12"`, `"0.00003733"`).
pub fn money_text(amount: Decimal) -> String {
    amount
        .round_dp_with_strategy(MONEY_DECIMALS, RoundingStrategy::MidpointNearestEven)
        .normalize()
        .to_string()
}

/// Money: a decimal amount in a currency per period.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MoneyView {
    /// Decimal text with at most 8 places, e.g. `"0.0123"` (see [`MONEY_DECIMALS`]).
    pub amount: String,
    /// ISO 4217 code.
    pub currency: String,
    /// `hour`, `month` or `once`.
    pub period: String,
}

impl From<&Money> for MoneyView {
    fn from(m: &Money) -> Self {
        MoneyView {
            amount: money_text(m.amount),
            currency: m.currency.as_str().to_string(),
            period: m.period.to_string(),
        }
    }
}

/// A provider's pricing, by one rule everywhere (providers, quotes, nodes): every project
/// sees whether its nodes are `priced`; only the provider's own project and the zone's
/// operators see the `markup`, since a tenant's prices already include it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PricingView {
    /// Whether new nodes of the provider carry a price (false: unpriced, not free).
    #[serde(default)]
    pub priced: bool,
    /// Decimal text (`"0.15"` = 15 %); null when there is none, or for a project that
    /// only uses the provider.
    pub markup: Option<String>,
}

impl ProviderView {
    /// Its replicas as people read them: `1 serving, 1 standing by`, or `built into the
    /// zone` for `core`.
    pub fn replicas_words(&self) -> String {
        if self.builtin {
            return "built into the zone (its app slots run on the zone's host)".to_string();
        }
        let serving = self.replicas.iter().filter(|r| r.role == "serving").count();
        format!(
            "{serving} serving, {} standing by",
            self.replicas.len() - serving
        )
    }
}

impl PricingView {
    /// How people read it: `markup 0.15`, `priced` (the markup is not theirs to see) or
    /// `unpriced`.
    pub fn words(&self) -> String {
        match (&self.markup, self.priced) {
            (Some(markup), _) => format!("markup {markup}"),
            (None, true) => "priced".to_string(),
            (None, false) => "unpriced".to_string(),
        }
    }
}

impl From<PricingStrategy> for PricingView {
    fn from(p: PricingStrategy) -> Self {
        match p {
            PricingStrategy::None => PricingView {
                priced: false,
                markup: None,
            },
            PricingStrategy::Markup(m) => PricingView {
                priced: true,
                markup: Some(m.value().to_string()),
            },
        }
    }
}

/// One connected replica of a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplicaView {
    pub host: String,
    pub pid: u32,
    pub slot: u32,
    /// `serving` or `standby`.
    pub role: String,
    pub connected_since: i64,
}

/// A region class a provider offers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClassView {
    pub id: String,
    pub title: String,
    /// Whether it can place a node now.
    pub can_place: bool,
    /// What a tenant may ask for in the class, stock aside; empty when the provider does
    /// not list it.
    #[serde(default)]
    pub offerings: Vec<OfferingView>,
}

/// One thing a tenant may ask for in a class.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OfferingView {
    pub cpu: u32,
    /// Memory in GiB.
    pub mem: u32,
    /// `x86_64` or `arm64`.
    pub arch: String,
    /// The provider's own name for it (a one-cloud provider's plan); null when the
    /// provider picks the plan itself.
    pub plan: Option<String>,
}

/// An operating system a provider offers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OsView {
    pub id: String,
    pub title: String,
}

/// What a provider offers, as its serving replica last reported.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CatalogView {
    pub classes: Vec<ClassView>,
    pub os: Vec<OsView>,
    pub public_ipv4_offered: u32,
}

/// A provider as a project sees it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProviderView {
    pub id: String,
    pub name: String,
    /// The project it registered in, `org/project`.
    pub project: String,
    pub resource_uri: String,
    /// `project` or `zone`.
    pub scope: String,
    pub pricing: PricingView,
    /// The zone's own `core` provider: it has no replicas to connect, and runs app slots on
    /// the zone's host at its one site, `local`, which is always open.
    #[serde(default)]
    pub builtin: bool,
    /// Connected replicas: serving first, then standbys, each by slot.
    pub replicas: Vec<ReplicaView>,
    /// Null until a replica has reported one.
    pub catalog: Option<CatalogView>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl ProviderView {
    pub fn new(
        p: &Provider,
        project_path: String,
        replicas: Vec<ReplicaView>,
        catalog: Option<CatalogView>,
    ) -> Self {
        ProviderView {
            id: p.id.to_string(),
            name: p.name.to_string(),
            project: project_path,
            resource_uri: p.resource_uri.clone(),
            scope: p.scope.to_string(),
            pricing: p.pricing.into(),
            builtin: p.is_core(),
            replicas,
            catalog,
            created_at: p.created_at.millis(),
            updated_at: p.updated_at.millis(),
        }
    }
}

/// A node's shape as a request or view gives it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShapeView {
    /// vCPUs.
    pub cpu: u32,
    /// Memory, GiB.
    pub mem: u32,
    /// `x86_64` (default) or `arm64`.
    #[serde(default)]
    pub arch: Option<String>,
    /// Extra disks, GiB each.
    #[serde(default)]
    pub disks: Vec<u32>,
}

/// A public endpoint of a pool.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointView {
    pub name: String,
    /// `http` or `tcp`.
    pub protocol: String,
    pub port: u16,
}

/// Where a pool's endpoints are reached (`GET …/pools/{pool}/endpoints`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolEndpointsView {
    /// `org/project/name`.
    pub pool: String,
    pub endpoints: Vec<EndpointAccessView>,
}

/// One endpoint of a pool and where it is reached.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EndpointAccessView {
    pub name: String,
    /// `http` or `tcp`.
    pub protocol: String,
    pub port: u16,
    /// Through the access edge (http endpoints, when the zone runs an edge): any slot.
    pub url: Option<String>,
    pub slots: Vec<SlotEndpointView>,
}

/// One slot's way to an endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotEndpointView {
    pub slot: u32,
    /// Through the access edge, this slot only.
    pub url: Option<String>,
    /// Where the slot listens, for zone operators only (absent for everyone else).
    pub address: Option<String>,
}

/// The app a pool runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppView {
    /// Package `org/name:tag`.
    pub package: String,
    /// The package its slots run (`sha256:…`): what the tag named when the pool was created
    /// or last reconfigured. `None` for an app the operator configured outside the registry.
    #[serde(default)]
    pub digest: Option<String>,
    pub params: BTreeMap<String, String>,
    /// Names of the sensitive params (their values are never shown).
    pub sensitive_params: Vec<String>,
}

/// Live nodes of a pool per state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct NodeCounts {
    pub running: u32,
    /// Pending, quoting or deploying.
    pub starting: u32,
    pub parked: u32,
    pub destroying: u32,
    pub lost: u32,
}

/// A pool.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolView {
    pub id: String,
    /// `org/project/name`.
    pub path: String,
    pub name: String,
    pub provider: String,
    pub provider_id: String,
    pub size: u32,
    pub shape: ShapeView,
    /// The region class id (`eu-central`).
    #[schema(value_type = String)]
    pub class: ClassId,
    /// The OS id (`debian-12`).
    #[schema(value_type = String)]
    pub os: OsId,
    pub public: bool,
    pub endpoints: Vec<EndpointView>,
    pub app: Option<AppView>,
    /// Provider-specific placement (`{"plan": "cx23"}`); empty when the provider chooses.
    pub placement: BTreeMap<String, String>,
    /// The SSH keys its nodes install, by type, fingerprint and comment.
    #[serde(default)]
    pub ssh_keys: Vec<SshKeyView>,
    /// A public pool's address, once its provider has reported one.
    pub address: Option<PoolAddressView>,
    pub generation: u64,
    pub deleting: bool,
    pub nodes: NodeCounts,
    /// Why nodes are parked: the refusal of the pool's first parked node, when any is.
    #[serde(default)]
    pub parked: Option<ParkedView>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// An SSH key a pool's nodes install (never more of it than `ssh-keygen -l` shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SshKeyView {
    /// `ssh-ed25519`, `ssh-rsa`, …
    pub kind: String,
    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
    pub comment: String,
}

/// Why a pool's node is parked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ParkedView {
    /// The refusal's kind (`no_capacity`, `operator_fix`, `unplaceable`, …).
    pub refusal: Option<String>,
    /// The provider's words.
    pub words: Option<String>,
}

/// A site of a provider: what its last inventory reported, and what the zone keeps there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SiteView {
    pub site: String,
    /// The site's stable public IPv4, as reported.
    pub public_ipv4: Option<String>,
    /// The site's private prefix, as reported.
    pub private_prefix: Option<String>,
    /// Whether the provider's last complete inventory listed the site as open.
    pub reported: bool,
    /// `open` (reported open, or the zone's own `local` site) or `not reported yet`: what
    /// `orc sites` shows.
    pub status: String,
    /// Tenant nodes at the site (deploying to destroying).
    pub tenant_nodes: u64,
    /// The state of the site's gateway node, or `None` when it has none.
    pub gateway: Option<String>,
}

/// A public pool's IPv4 and the site it is at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolAddressView {
    pub ipv4: String,
    pub site: String,
}

impl PoolView {
    pub fn new(path: String, p: &Pool, provider: &str, live: &BTreeMap<NodeState, u32>) -> Self {
        let mut counts = NodeCounts::default();
        for (state, n) in live {
            match state {
                NodeState::Running => counts.running += n,
                NodeState::Pending | NodeState::Quoting | NodeState::Deploying => {
                    counts.starting += n
                }
                NodeState::Parked => counts.parked += n,
                NodeState::Destroying => counts.destroying += n,
                NodeState::Lost => counts.lost += n,
                NodeState::Ended => {}
            }
        }
        let shape = &p.spec.shape;
        PoolView {
            id: p.id.to_string(),
            path,
            name: p.name.to_string(),
            provider: provider.to_string(),
            provider_id: p.spec.provider_id.to_string(),
            size: p.size,
            shape: ShapeView {
                cpu: shape.vcpus,
                mem: shape.memory_gib,
                arch: Some(shape.arch.to_string()),
                disks: shape.disks_gib.clone(),
            },
            class: p.spec.region_class.clone(),
            os: p.spec.os.clone(),
            public: p.spec.public,
            placement: p.spec.placement.clone(),
            ssh_keys: p
                .spec
                .ssh_keys
                .iter()
                .filter_map(|line| SshPublicKey::parse(line).ok())
                .map(|k| SshKeyView {
                    kind: k.kind().to_string(),
                    fingerprint: k.fingerprint(),
                    comment: k.comment().to_string(),
                })
                .collect(),
            address: None,
            endpoints: p
                .spec
                .endpoints
                .iter()
                .map(|e| EndpointView {
                    name: e.name.clone(),
                    protocol: e.protocol.clone(),
                    port: e.port,
                })
                .collect(),
            app: p.spec.app.as_ref().map(|a| AppView {
                digest: a.digest.as_ref().map(ToString::to_string),
                package: a.package.clone(),
                params: a.params.clone(),
                sensitive_params: a.sensitive.0.keys().cloned().collect(),
            }),
            generation: p.generation,
            deleting: p.deleting,
            nodes: counts,
            parked: None,
            created_at: p.created_at.millis(),
            updated_at: p.updated_at.millis(),
        }
    }
}

/// A node of a pool.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeView {
    pub id: String,
    pub slot: u32,
    /// `pending`, `quoting`, `deploying`, `running`, `destroying`, `ended`, `parked` or `lost`.
    #[schema(value_type = String)]
    pub state: NodeState,
    /// The provider's generic words about the state.
    pub words: Option<String>,
    /// The kind of the last refusal, if any.
    pub refusal: Option<String>,
    pub site: Option<String>,
    pub addresses: Vec<String>,
    /// The node's address on its site's private network, when it has one.
    pub private_address: Option<String>,
    /// The private address of the node's site gateway, where the site has one.
    pub gateway: Option<String>,
    /// Null: unpriced (not zero).
    pub price: Option<MoneyView>,
    /// The markup recorded at admission; null when there was none, or for a project that
    /// only uses the provider (the price includes it).
    pub markup: Option<String>,
    pub attempts: u32,
    /// Where the provider put the node; only zone operators (`sys` members) see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<PlacedView>,
    pub created_at: i64,
    pub updated_at: i64,
    pub ended_at: Option<i64>,
    /// The node's agent, once it joined.
    #[serde(default)]
    pub agent: Option<AgentView>,
    /// Whether it accepts public ingress: its proxy serves the project's domains, HTTP
    /// catch-all and public TCP ports.
    #[serde(default)]
    pub ingress: bool,
}

impl NodeView {
    /// The node's state as people read it: a running node is `joined` once its agent holds
    /// a certificate, `ready` while the agent is attached with the zone's config applied;
    /// any other node is its state.
    pub fn shown_state(&self) -> &'static str {
        match &self.agent {
            Some(agent) if self.state == NodeState::Running => {
                if agent.state == AgentState::Ready && agent.connected {
                    "ready"
                } else {
                    "joined"
                }
            }
            _ => self.state.as_str(),
        }
    }

    /// The kind of the node's last refusal, when the zone named one this build knows.
    pub fn refusal_kind(&self) -> Option<RefusalKind> {
        refusal_kind(self.refusal.as_deref())
    }
}

/// The kind a view's `refusal` names, when it names one of [`RefusalKind::ALL`].
fn refusal_kind(name: Option<&str>) -> Option<RefusalKind> {
    name?.parse().ok()
}

/// Where a provider put a node, in the cloud's own terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlacedView {
    /// `hetzner`, `vultr`, `robot`.
    pub cloud: String,
    /// The cloud's location (`fsn1`).
    pub location: String,
    /// The cloud's plan or product; empty when it has none.
    pub plan: String,
    /// The provider's reference to the instance (`hetzner:42`).
    pub instance: String,
}

impl PlacedView {
    /// The node's whereabouts, if its provider reported them.
    pub fn of(n: &Node) -> Option<PlacedView> {
        let placed = n.status.placed.as_ref()?;
        Some(PlacedView {
            cloud: placed.cloud.clone(),
            location: placed.location.clone(),
            plan: placed.plan.clone(),
            instance: n.status.instance_ref.clone().unwrap_or_default(),
        })
    }
}

/// The first address of `addresses` on a private network: IPv4 private (RFC 1918) or
/// shared (100.64.0.0/10) space, or an IPv6 unique local address.
pub fn private_address(addresses: &[String]) -> Option<String> {
    addresses
        .iter()
        .find(|a| match a.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(v4)) => {
                v4.is_private() || (v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64)
            }
            Ok(std::net::IpAddr::V6(v6)) => v6.segments()[0] & 0xfe00 == 0xfc00,
            Err(_) => false,
        })
        .cloned()
}

impl From<&Node> for NodeView {
    fn from(n: &Node) -> Self {
        let s = &n.status;
        NodeView {
            id: n.id.to_string(),
            slot: n.slot,
            state: s.state,
            words: s.state_words.clone(),
            refusal: s.refusal.map(|r| r.to_string()),
            site: s.site.clone(),
            addresses: s.addresses.clone(),
            private_address: private_address(&s.addresses),
            gateway: None,
            price: s.price.as_ref().map(MoneyView::from),
            markup: s.markup.map(|m| m.to_string()),
            attempts: s.attempts,
            placed: None,
            created_at: n.created_at.millis(),
            updated_at: n.updated_at.millis(),
            ended_at: s.ended_at.map(|t| t.millis()),
            agent: None,
            ingress: false,
        }
    }
}

/// Something that happened.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    pub id: String,
    pub at: i64,
    pub kind: String,
    pub words: String,
    pub provider_id: Option<String>,
    pub pool_id: Option<String>,
    /// The pool's name, when the event is about a pool of the project.
    #[serde(default)]
    pub pool: Option<String>,
    pub node_id: Option<String>,
    /// How many times it happened (a node refused again in the same words).
    #[serde(default = "one")]
    pub repeats: u32,
    /// When it last happened, UTC milliseconds, when it happened more than once.
    #[serde(default)]
    pub last_at: Option<i64>,
}

fn one() -> u32 {
    1
}

impl From<&Event> for EventView {
    fn from(e: &Event) -> Self {
        EventView {
            id: e.id.to_string(),
            at: e.at.millis(),
            kind: e.kind.clone(),
            words: e.words.clone(),
            provider_id: e.scope.provider_id.as_ref().map(ToString::to_string),
            pool_id: e.scope.pool_id.as_ref().map(ToString::to_string),
            pool: None,
            node_id: e.scope.node_id.as_ref().map(ToString::to_string),
            repeats: e.repeats,
            last_at: e.last_at.map(|t| t.millis()),
        }
    }
}

/// One invoice line of a project's month.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UsageLineView {
    pub id: String,
    pub month: String,
    pub pool_id: Option<String>,
    /// The pool's name while the pool exists; null once it is deleted.
    pub pool: Option<String>,
    pub node_id: Option<String>,
    /// Reads like `2 vCPU · 4 GiB · eu-central`.
    pub description: String,
    /// Decimal hours.
    pub hours: String,
    pub rate: MoneyView,
    /// Decimal total in the rate's currency, at most 8 places.
    pub amount: String,
    /// The node still runs: `hours` and `amount` include its time up to this answer, beyond
    /// what the zone has written so far (it writes once an hour).
    #[serde(default)]
    pub accruing: bool,
}

impl From<&UsageLine> for UsageLineView {
    fn from(u: &UsageLine) -> Self {
        UsageLineView {
            id: u.id.to_string(),
            month: u.month.to_string(),
            pool_id: u.pool_id.as_ref().map(ToString::to_string),
            pool: None,
            node_id: u.node_id.as_ref().map(ToString::to_string),
            description: u.description.clone(),
            hours: u.hours.to_string(),
            rate: MoneyView::from(&u.rate),
            amount: money_text(u.amount),
            accruing: false,
        }
    }
}

/// A project's usage for one month.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    pub month: String,
    pub lines: Vec<UsageLineView>,
    /// Totals per currency (decimal text, at most 8 places), by currency code: the exact
    /// sum of the lines, rounded once.
    pub totals: BTreeMap<String, String>,
}

/// The answer to a quote.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QuoteView {
    pub provider: String,
    /// `offer` or `refused`.
    pub outcome: String,
    /// The provider's words: the price line of an offer or the reason of a refusal.
    pub words: String,
    pub site: Option<String>,
    /// What the tenant would pay (the provider's price with the markup); null when the
    /// provider has no pricing strategy or gave no price (unpriced, not zero).
    pub price: Option<MoneyView>,
    /// The markup that would be recorded; null when there is none, or for a project that
    /// only uses the provider (the price includes it).
    pub markup: Option<String>,
    /// The refusal's kind (`no_capacity`, `counting`, `transient`, `operator_fix`, `failed`,
    /// `unplaceable`).
    pub refusal: Option<String>,
}

/// `POST /api/orgs`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrg {
    pub name: String,
}

/// `POST /api/orgs/{org}/projects`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProject {
    pub name: String,
}

/// `POST /api/users`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub name: String,
}

/// `POST /api/users/{user}/tokens`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// What the token is for (`laptop`, `ci`); 1–100 characters.
    pub label: String,
    /// Expiry, UTC milliseconds since the epoch: at most 365 days ahead; null or absent
    /// for 90 days from now.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// The project (`org/project`) the token's commands mean when they name none; the
    /// token's user must hold a role in it.
    #[serde(default)]
    pub project: Option<String>,
}

/// `PUT /api/users/{user}/password`.
#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPassword {
    /// The new password: at least 12 characters. Signs the user in at the access edge.
    pub password: String,
}

impl std::fmt::Debug for SetPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SetPassword(<redacted>)")
    }
}

/// `POST /api/orgs/{org}/memberships`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMembership {
    /// User name.
    pub user: String,
    /// `owner`, `member` or `viewer`.
    pub role: String,
    /// Project name; absent for an org-wide role.
    #[serde(default)]
    pub project: Option<String>,
}

/// `POST …/providers/{provider}/change-scope`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeScope {
    /// `zone` (every project may use it) or `project` (only its own).
    pub scope: String,
}

/// `PUT …/providers/{provider}/pricing`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPricing {
    /// Decimal text, 0 or more (`"0.15"` = 15 %); null removes the strategy.
    pub markup: Option<String>,
}

/// `POST /api/orgs/{org}/projects/{project}/pools`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePool {
    pub name: String,
    /// Provider name (or id) visible to the project.
    pub provider: String,
    /// Number of nodes, 0–10000.
    pub size: u32,
    pub shape: ShapeView,
    /// Region class id (`eu-central`).
    pub class: String,
    /// OS id (`debian-12`).
    pub os: String,
    #[serde(default)]
    pub public: bool,
    #[serde(default)]
    pub endpoints: Vec<EndpointView>,
    /// App package `org/name:tag` the nodes run (pools on provider `core`).
    #[serde(default)]
    pub app: Option<String>,
    /// Plain app params.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Sensitive app params (never shown back, never logged).
    #[serde(default)]
    pub sensitive_params: BTreeMap<String, String>,
    /// Provider-specific placement for a pool placed directly on one cloud, e.g.
    /// `{"plan": "cx23"}` (the class is then the cloud location, `fsn1`).
    #[serde(default)]
    pub placement: BTreeMap<String, String>,
    /// OpenSSH public keys (`authorized_keys` lines) every node installs for its OS's
    /// default user; at most 20.
    #[serde(default)]
    pub ssh_keys: Vec<String>,
}

/// `POST …/pools/{pool}/resize`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizePool {
    /// New number of nodes, 0–10000.
    pub size: u32,
}

/// `POST …/pools/{pool}/reconfigure`: replaces the app's params.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReconfigurePool {
    /// The full set of plain params.
    pub params: BTreeMap<String, String>,
    /// The full set of sensitive params; absent keeps the current ones.
    #[serde(default)]
    pub sensitive_params: Option<BTreeMap<String, String>>,
    /// Sensitive params to set, each replacing the current one of its name while the others
    /// stay as they are (what a form that never shows them sends). Not with
    /// `sensitive_params`.
    #[serde(default)]
    pub sensitive_params_update: Option<BTreeMap<String, String>>,
    /// The generation the change is based on; refused with 409 if the pool moved on.
    #[serde(default)]
    pub generation: Option<u64>,
}

/// `POST /api/orgs/{org}/projects/{project}/quote`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuoteRequest {
    pub provider: String,
    pub shape: ShapeView,
    pub class: String,
    pub os: String,
    #[serde(default)]
    pub public: bool,
    /// Provider-specific placement, as on pool creation.
    #[serde(default)]
    pub placement: BTreeMap<String, String>,
}

/// Query of `GET …/pools/{pool}/nodes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct NodesQuery {
    /// `true` to include ended nodes.
    pub include_ended: Option<String>,
}

/// Query of `GET …/events`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events of this pool (name).
    pub pool: Option<String>,
    /// Only events after this event id (oldest first from there).
    pub after: Option<String>,
    /// At most this many (1–1000, default 100).
    pub limit: Option<String>,
    /// `true`: the newest `limit` events (still oldest first), not the oldest; not with
    /// `after`.
    pub newest: Option<String>,
}

/// Query of `GET …/usage`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// `YYYY-MM`; default the current month (UTC).
    pub month: Option<String>,
}

/// One kept log line of an app slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LogLineView {
    pub at: i64,
    pub slot: u32,
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub level: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use orc_common::RefusalKind;

    use super::{private_address, refusal_kind};

    #[test]
    fn money_is_written_with_at_most_eight_places_and_no_trailing_zeros() {
        use super::money_text;
        let text = |s: &str| money_text(s.parse().unwrap());
        assert_eq!(text("0.0000373326392465753424657534"), "0.00003733");
        assert_eq!(text("0.0115000"), "0.0115");
        assert_eq!(text("12.000"), "12");
        assert_eq!(text("0"), "0");
        // Half to even, so rounding does not drift one way over many lines.
        assert_eq!(text("0.000000125"), "0.00000012");
        assert_eq!(text("0.000000135"), "0.00000014");
    }

    #[test]
    fn a_refusal_is_read_as_its_kind_and_an_unknown_one_as_none() {
        for kind in RefusalKind::ALL {
            assert_eq!(refusal_kind(Some(kind.as_str())), Some(kind));
        }
        assert_eq!(refusal_kind(Some("out_of_coffee")), None);
        assert_eq!(refusal_kind(None), None);
    }

    #[test]
    fn private_addresses_are_told_from_public_ones() {
        let list = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            private_address(&list(&["198.18.0.7", "2001:db8::1", "10.0.1.5"])),
            Some("10.0.1.5".into())
        );
        assert_eq!(
            private_address(&list(&["100.72.0.9"])),
            Some("100.72.0.9".into())
        );
        assert_eq!(
            private_address(&list(&["fd00:1::2"])),
            Some("fd00:1::2".into())
        );
        assert_eq!(
            private_address(&list(&["100.128.0.1", "192.0.2.1", "x"])),
            None
        );
    }
}

/// A node's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentView {
    /// `joined` (holds a certificate) or `ready` (attached, config applied).
    #[schema(value_type = String)]
    pub state: AgentState,
    /// Whether the agent's stream is open to this zone now.
    pub connected: bool,
    /// The agent's software version.
    pub version: String,
    /// When the zone last heard from it, UTC milliseconds.
    pub last_contact: i64,
    pub joined_at: i64,
    pub hostname: String,
    /// The config generation the zone wants, and the one the agent applied.
    pub desired_generation: u64,
    pub applied_generation: u64,
    /// Why the last config did not apply, if it did not.
    pub apply_error: Option<String>,
    /// When the node's certificate expires (the agent renews it well before).
    pub cert_not_after: i64,
}

impl AgentView {
    /// The view of `agent`; `live` is the last contact of its open stream, if it has one.
    pub fn of(agent: &orc_zone_model::NodeAgent, live: Option<i64>) -> AgentView {
        AgentView {
            state: agent.state,
            connected: live.is_some(),
            version: agent.version.clone(),
            last_contact: live.unwrap_or(agent.last_contact_at.millis()),
            joined_at: agent.joined_at.millis(),
            hostname: agent.facts.hostname.clone(),
            desired_generation: agent.desired_generation,
            applied_generation: agent.applied_generation,
            apply_error: agent.apply_error.clone(),
            cert_not_after: agent.cert_not_after.millis(),
        }
    }
}

/// `POST …/nodes/{node}/exec`: a command to run on the node, without a shell.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// The program and its arguments; the program is looked up in the agent's `PATH`.
    pub argv: Vec<String>,
    /// The command is killed after this long: 1 to 3600 s, 600 by default.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
}

/// One line of an exec's answer (`application/x-ndjson`): output, then one exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecLine {
    /// A chunk of output, base64 (standard alphabet, padded).
    Output {
        /// `stdout` or `stderr`.
        stream: String,
        data: String,
    },
    /// The last line: the exit code (null when the command was killed or never ran), and
    /// why it did not run to its end.
    Exit {
        code: Option<i32>,
        error: Option<String>,
    },
}

/// `POST …/apps/{app}/exec`: a command to run inside one replica of a workload, without a
/// shell.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppExecRequest {
    /// The service or worker.
    pub workload: String,
    /// Its replica by slot; by default the first ready one.
    #[serde(default)]
    pub slot: Option<u32>,
    /// The program and its arguments, looked up in the container's `PATH`.
    pub argv: Vec<String>,
    /// The command is killed after this long: 1 to 3600 s, 600 by default.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
}

/// Query of `GET …/apps/{app}/logs`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AppLogsQuery {
    /// Only this service or worker; every workload by default.
    pub workload: Option<String>,
    /// At most this many bytes of the end of each replica's stdout and stderr (default
    /// 16384; `0` for all the node keeps).
    pub tail: Option<String>,
    /// `true`: go on with what the replicas write, for up to an hour.
    pub follow: Option<String>,
}

/// One line of `GET …/apps/{app}/logs` (`application/x-ndjson`): each replica's output as
/// it comes, and one `end` per replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AppLogLine {
    /// A chunk of a replica's output, base64 (standard alphabet, padded).
    Output {
        /// `web[0]`: the workload and slot.
        replica: String,
        /// `stdout` or `stderr`.
        stream: String,
        data: String,
    },
    /// A replica's output ends here; `error` says why it could not be read.
    End {
        replica: String,
        error: Option<String>,
    },
}

/// `POST …/nodes/{node}/join-tokens`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJoinToken {
    /// How long the token admits its node: 60 to 86,400 s, 3,600 by default.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
    /// Binds the token to the machine with this `product_uuid` (from its DMI data).
    #[serde(default)]
    pub product_uuid: Option<String>,
}

/// A node's join token (never its secret, except once in [`CreatedJoinToken`]).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JoinTokenView {
    pub id: String,
    pub node_id: String,
    /// `live`, `used`, `revoked` or `expired`.
    pub state: String,
    /// `zone` (minted at deploy) or the user who minted it.
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// The CA it pins (`sha256:<hex>`).
    pub ca_fingerprint: String,
    pub product_uuid: Option<String>,
}

impl JoinTokenView {
    /// The view of `token` as of `now`.
    pub fn of(token: &orc_zone_model::JoinToken, now: orc_zone_model::Timestamp) -> Self {
        let state = if token.revoked_at.is_some() {
            "revoked"
        } else if token.used_at.is_some() {
            "used"
        } else if token.is_live(now) {
            "live"
        } else {
            "expired"
        };
        JoinTokenView {
            id: token.id.to_string(),
            node_id: token.node_id.to_string(),
            state: state.to_string(),
            created_by: token.created_by.clone(),
            created_at: token.created_at.millis(),
            expires_at: token.expires_at.millis(),
            used_at: token.used_at.map(|t| t.millis()),
            revoked_at: token.revoked_at.map(|t| t.millis()),
            ca_fingerprint: token.ca_fingerprint.clone(),
            product_uuid: token.product_uuid.clone(),
        }
    }
}

/// A join token just minted: the only answer that carries its secret.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedJoinToken {
    #[serde(flatten)]
    pub token: JoinTokenView,
    /// The token to hand to the node's agent (`orc agent --join-token-file`); shown once.
    pub secret: String,
    /// The zone's agent endpoint the node dials.
    pub endpoint: String,
}

/// `GET …/mesh`: a project's mesh as the zone plans it and as its members' agents report it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MeshView {
    pub org: String,
    pub project: String,
    /// The project's prefix of the zone's mesh range; `None` before its first member.
    pub prefix: Option<String>,
    /// How recent a peer's handshake must be to count as up, seconds.
    pub handshake_window_seconds: u64,
    /// Nodes and workstations, by name.
    pub members: Vec<MeshMemberView>,
}

/// One member of a project's mesh.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MeshMemberView {
    /// The node's id, or the workstation's.
    pub id: String,
    /// `node` or `workstation`.
    pub kind: String,
    pub name: String,
    /// Its mesh address.
    pub address: String,
    /// A node's pool and site.
    pub pool: Option<String>,
    pub site: Option<String>,
    /// A node: `in step` (its agent applied the zone's latest config), `applying`, `failed`,
    /// `detached` (no open agent stream) or `not joined`. A workstation: `connected` (a node
    /// saw its handshake within the window) or `idle`.
    pub state: String,
    /// A node's config generations: the zone's latest, and the one its agent applied.
    pub desired_generation: Option<u64>,
    pub applied_generation: Option<u64>,
    /// Why its agent could not apply the latest config.
    pub apply_error: Option<String>,
    /// The peers the zone's plan gives it.
    pub peers: u32,
    /// Of them, those with a handshake within the window: as its agent last reported (a
    /// node), or as the nodes report it (a workstation). `None`: no report yet.
    pub peers_up: Option<u32>,
    /// Bytes over its mesh interface, as its agent last reported.
    pub rx_bytes: Option<u64>,
    pub tx_bytes: Option<u64>,
    /// When its agent last reported, unix ms.
    pub reported_at: Option<i64>,
}

/// `POST …/mesh/workstations`: put a workstation on the project's mesh.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectWorkstation {
    /// Its name on the mesh: 1 to 63 lowercase letters, digits and `-`.
    pub name: String,
    /// Its WireGuard public key (base64). The private half never leaves the workstation.
    pub public_key: String,
}

/// A workstation on a project's mesh.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkstationView {
    pub id: String,
    pub name: String,
    pub address: String,
    pub public_key: String,
    pub created_at: i64,
}

/// A workstation just connected, with its WireGuard config (all but its private key).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConnectedWorkstation {
    #[serde(flatten)]
    pub workstation: WorkstationView,
    /// Its interface address with the project's prefix length (`10.88.0.9/24`).
    pub interface_address: String,
    pub peers: Vec<MeshPeerView>,
}

/// One WireGuard peer of a workstation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MeshPeerView {
    /// The node it is.
    pub name: String,
    pub public_key: String,
    /// `ip:port`; `None` when the peer dials in.
    pub endpoint: Option<String>,
    pub allowed_ips: Vec<String>,
    pub keepalive_seconds: Option<u16>,
}

/// One of the access edge's signing keys (its public half is in the JWKS).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AccessKeyView {
    pub kid: String,
    /// The key that signs assertions now.
    pub current: bool,
    pub created_at: i64,
    /// For a key a rotation replaced: when it stops being published.
    pub retire_at: Option<i64>,
}

/// Body of `POST /api/zone/access-keys/rotate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateAccessKey {
    /// How long the replaced key stays published, in seconds (default 3600, at most 7 days).
    #[serde(default)]
    pub overlap_seconds: Option<u64>,
}

/// What a rotation did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RotatedAccessKeyView {
    /// The new signing key.
    pub kid: String,
    /// The key it replaced.
    pub replaced: Option<String>,
    /// When the replaced key stops being published.
    pub replaced_until: Option<i64>,
}

/// A binary the registry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BlobView {
    /// `sha256:<hex>`.
    pub digest: String,
    pub size: u64,
}

/// `PUT /api/orgs/{org}/apps/{app}/tags/{tag}`: the package to publish under the tag. Every
/// binary must have been sent first (`PUT …/registry/blobs/{digest}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushPackage {
    /// The app's manifest (see docs/zone/registry.md).
    #[schema(value_type = Object)]
    pub manifest: orc_zone_model::registry::AppManifest,
    /// The digest of each platform's binary: `{"linux/amd64": "sha256:…"}`.
    pub binaries: BTreeMap<String, String>,
}

/// One tag of an app and the package it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppTagView {
    /// `org/name:tag`.
    pub package: String,
    pub tag: String,
    /// The package's digest, `sha256:<hex>`.
    pub digest: String,
    /// The manifest's version words.
    pub version: String,
    /// The platforms it has a binary for (`linux/amd64`).
    pub platforms: Vec<String>,
    pub updated_at: i64,
}

/// What pushing a tag did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PushedView {
    #[serde(flatten)]
    pub tag: AppTagView,
    /// The digest the tag named before, when it moved.
    pub moved_from: Option<String>,
}

/// An app of an org's registry, with its tags by name.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegistryAppView {
    /// `org/name`.
    pub repository: String,
    pub name: String,
    pub tags: Vec<AppTagView>,
}

/// One package of an app: its manifest and binaries.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PackageView {
    /// `sha256:<hex>`.
    pub digest: String,
    /// The tags that name it.
    pub tags: Vec<String>,
    #[schema(value_type = Object)]
    pub manifest: orc_zone_model::registry::AppManifest,
    /// Each platform's binary.
    pub binaries: BTreeMap<String, BlobView>,
    /// Pools that run it (`org/project/pool`), for the caller's eyes: those in projects the
    /// caller can see.
    pub pools: Vec<String>,
    pub created_at: i64,
}

/// An app with every package the registry holds of it, newest last.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegistryAppDetail {
    /// `org/name`.
    pub repository: String,
    pub name: String,
    pub packages: Vec<PackageView>,
}

/// A plan or deploy request: the app file, evaluated and checked by the client (the zone
/// checks it again).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeployApp {
    /// The app as `orc app check --json` prints it.
    #[schema(value_type = Object)]
    pub app: serde_json::Value,
}

/// A rollback request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RollbackApp {
    /// The revision whose app and image digests to deploy again.
    pub revision: u64,
}

/// A workload's image and the digest it resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImageView {
    /// The service or worker.
    pub workload: String,
    /// The reference in the app file.
    pub reference: String,
    /// The manifest digest.
    pub digest: String,
}

/// One changed field between two revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChangeView {
    /// The field, e.g. `services["web"].replicas`.
    pub field: String,
    /// What it was; absent when new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// What it becomes; absent when it goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A workload that cannot be placed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BlockedView {
    /// The service or worker.
    pub workload: String,
    /// `no_nodes`, `label_mismatch`, `missing_capacity` or `volume_node_lost`.
    pub code: String,
    /// The reason in words.
    pub reason: String,
}

/// What a deploy would do.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppPlanView {
    /// The app.
    pub app: String,
    /// The revision running now, if any.
    pub current_revision: Option<u64>,
    /// Whether deploying changes nothing (the same resolved app runs).
    pub noop: bool,
    /// What changes.
    pub changes: Vec<ChangeView>,
    /// Each workload's image, resolved.
    pub images: Vec<ImageView>,
    /// Workloads that could not be placed now.
    pub blocked: Vec<BlockedView>,
}

/// An app of a project.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProjectAppView {
    /// Its name.
    pub name: String,
    /// Its newest revision.
    pub revision: u64,
    /// That revision's deployment state: PENDING, DEPLOYING, HEALTHY, BLOCKED or FAILED.
    pub state: String,
    /// Why it is blocked or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Replicas ready.
    pub ready: u32,
    /// Replicas asked for.
    pub replicas: u32,
    /// When its state last changed (ms since the epoch).
    pub updated_at: i64,
}

/// One replica of an app.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppReplicaView {
    /// The service or worker.
    pub workload: String,
    /// Its slot, from 0.
    pub slot: u32,
    /// The revision it runs.
    pub revision: u64,
    /// Its node; absent while it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its address in its node's workload subnet; absent until its node has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Its state as its node reports it (`pending` before any report), or `draining` once a
    /// rollout took it out of its service's names to stop it.
    pub state: String,
    /// Whether its readiness check passes.
    pub ready: bool,
    /// How often it was started again.
    pub restarts: u32,
    /// Why it failed or waits, as its node says (`cannot fetch …`); absent when all is well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The ports it publishes on its node (`tcp/25565`), reached at the node's address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ports: Vec<String>,
}

/// What an app opens on its project's ingress nodes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppRouteView {
    /// `https` (a domain), `http` (the catch-all) or `tcp` (a public port).
    pub kind: String,
    /// The domain, `*` for the catch-all, or the port.
    pub name: String,
    /// The service it leads to.
    pub service: String,
    /// For a domain: its certificate in words (`valid until 2027-03-07`, `being obtained`,
    /// or why the last attempt failed and when the zone tries again); `None` when the zone
    /// obtains none for it (no ACME, or no ingress node yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

/// An app with its replicas.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppStatusView {
    /// The app.
    pub app: ProjectAppView,
    /// Each workload's image.
    pub images: Vec<ImageView>,
    /// Each replica.
    pub replicas: Vec<AppReplicaView>,
    /// What its newest revision opens on the project's ingress nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<AppRouteView>,
    /// Where the project's ingress is reached (point DNS here): each ingress node's public
    /// address, or for a node without one its public pool's address, with the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress_addresses: Vec<String>,
}

/// A revision of an app.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppRevisionView {
    /// Its number.
    pub number: u64,
    /// `sha256:` of the resolved app.
    pub digest: String,
    /// `deploy`, or `rollback:N`.
    pub origin: String,
    /// Its deployment's state.
    pub state: String,
    /// Why it is blocked or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When (ms since the epoch).
    pub created_at: i64,
    /// Each workload's image.
    pub images: Vec<ImageView>,
    /// The resolved app, as deployed.
    #[schema(value_type = Object)]
    pub app: serde_json::Value,
}

/// `PUT /api/orgs/{org}/projects/{project}/secrets/{name}`.
#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetSecret {
    /// The secret's value: text of 1 to 65,536 bytes (UTF-8). The zone seals it at rest and
    /// never shows it again.
    pub value: String,
}

/// Shows no value, so a body printed by mistake leaks nothing.
impl std::fmt::Debug for SetSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SetSecret(<redacted>)")
    }
}

/// A project's secret: its name, version and who set it, never its value.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SecretView {
    pub name: String,
    /// 1 when first set, one more at each set since.
    pub version: u64,
    pub updated_at: i64,
    /// The name of the user who set it last (their id, `u-…`, once the user is deleted).
    pub updated_by: String,
}

/// A label's value (`PUT …/nodes/{node}/labels/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetNodeLabel {
    /// Up to 63 of A-Z, a-z, 0-9, '.', '_' and '-'.
    pub value: String,
}

/// What placement knows of a node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodePlacementView {
    /// The node.
    pub node: String,
    /// The labels the zone sets (`orc.pool`, `orc.site`, `orc.class`).
    pub zone_labels: BTreeMap<String, String>,
    /// The labels given to it.
    pub labels: BTreeMap<String, String>,
    /// Whether it takes no new replicas.
    pub cordoned: bool,
    /// Whether it accepts public ingress.
    #[serde(default)]
    pub ingress: bool,
    /// Whether it is drained: what runs there moves to other nodes, within each app's
    /// rollout budget.
    #[serde(default)]
    pub draining: bool,
    /// Replicas a drain moves off the node, `app/workload[slot]`: each is replaced elsewhere
    /// first when its app allows a surge, and stops once its replacement is ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moving: Vec<String>,
    /// Replicas a drain leaves, with why (a local volume lives on the node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}
