//! What the console's pages show: plain data, filled by the server layer from the API's
//! answers and read by the pure views. Nothing here does I/O, reads a clock or holds a
//! secret that may not be shown (a new token's value is here only on the one page that
//! shows it once).

use std::collections::BTreeMap;

use orc_zone_api_types::views::{
    ConnectedWorkstation, CreatedJoinToken, EventView, JoinTokenView, MembershipView, MeshView,
    NodeView, OrgView, PoolEndpointsView, PoolView, ProjectView, ProviderView, QuoteView,
    TokenView, UsageView,
};

/// The navigation sections of a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Pools,
    Mesh,
    Request,
    Providers,
    Usage,
    Members,
    Tokens,
    Projects,
}

/// Who looks, and at which project: what every page's frame shows.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The signed-in person's user name.
    pub user: String,
    /// Whether they are a member of org `sys` (its pages may name clouds and places).
    pub zone_member: bool,
    /// Every project the person may open, `org/project`, by name (the switcher).
    pub projects: Vec<String>,
    /// The project the page is about, if any.
    pub current: Option<Current>,
    /// The page's section in the navigation.
    pub section: Section,
}

/// The project a page is about and the person's role there.
#[derive(Debug, Clone)]
pub struct Current {
    pub org: String,
    pub project: String,
    /// `owner`, `member` or `viewer`.
    pub role: String,
    /// Whether the person holds a role in the whole org (its members page is theirs to
    /// read), not only in projects of it.
    pub org_wide: bool,
}

impl Current {
    /// `org/project`.
    pub fn path(&self) -> String {
        format!("{}/{}", self.org, self.project)
    }

    /// The console URL of the project, `/orgs/<org>/projects/<project>`.
    pub fn url(&self) -> String {
        format!(
            "/orgs/{}/projects/{}",
            super::seg(&self.org),
            super::seg(&self.project)
        )
    }

    /// Whether the role writes pools (member or owner).
    pub fn writes(&self) -> bool {
        matches!(self.role.as_str(), "member" | "owner")
    }

    /// Whether the role manages the project (owner).
    pub fn owns(&self) -> bool {
        self.role == "owner"
    }
}

/// A form field's problem, in words, under the field's name.
pub type FieldErrors = BTreeMap<String, String>;

/// The orgs and projects a person may open.
#[derive(Debug, Clone)]
pub struct ProjectsPage {
    pub orgs: Vec<(OrgView, Vec<ProjectView>)>,
}

/// A project's pools.
#[derive(Debug, Clone)]
pub struct PoolsPage {
    pub pools: Vec<PoolView>,
}

/// One pool: its nodes, events and endpoints, and the forms that change it.
#[derive(Debug, Clone)]
pub struct PoolPage {
    pub pool: PoolView,
    pub nodes: Vec<NodeView>,
    /// Newest first.
    pub events: Vec<EventView>,
    pub endpoints: Option<PoolEndpointsView>,
    /// The size the resize form shows (what was typed, after a refusal).
    pub resize_to: String,
    pub errors: FieldErrors,
    /// A sentence about what just happened (a resize taken).
    pub notice: Option<String>,
    /// An app pool's kept log lines at `log_level` or more severe, newest last, when the
    /// person may read them (owners and members).
    pub logs: Option<Vec<orc_zone_api_types::views::LogLineView>>,
    pub log_level: String,
}

/// An app param as the pool form shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamField {
    pub name: String,
    /// The value shown (plain params only; a sensitive param's value is never here).
    pub value: String,
    /// A JSON document: a text area, and it must parse.
    pub json: bool,
    /// Sensitive: write-only, shown as set or not set.
    pub sensitive: bool,
    /// Whether a sensitive param has a value now.
    pub set: bool,
    /// What the app says the param does (its manifest), if it says.
    pub help: String,
    /// What an empty param means, in the app's words.
    pub default: Option<String>,
    /// The app does not start without it.
    pub required: bool,
}

impl ParamField {
    /// A param the app's manifest does not describe.
    pub fn undescribed(name: &str, value: &str, sensitive: bool, set: bool) -> ParamField {
        ParamField {
            name: name.to_string(),
            value: if sensitive {
                String::new()
            } else {
                value.to_string()
            },
            json: !sensitive && is_json(value),
            sensitive,
            set,
            help: String::new(),
            default: None,
            required: false,
        }
    }
}

/// The form that runs an app in a pool on `core`: the packages the person may run, the one
/// chosen with its params as its manifest declares them.
#[derive(Debug, Clone)]
pub struct AppPoolPage {
    /// `org/name:tag` of every tagged package the person can see, by name.
    pub packages: Vec<String>,
    /// The package chosen, if one is.
    pub package: String,
    /// The chosen package's one-line description.
    pub description: String,
    pub params: Vec<ParamField>,
    pub name: String,
    pub size: String,
    pub errors: FieldErrors,
}

/// The pool form of an app pool (reconfigure).
#[derive(Debug, Clone)]
pub struct ReconfigurePage {
    pub pool: PoolView,
    pub params: Vec<ParamField>,
    pub errors: FieldErrors,
}

/// What the request wizard has been told so far, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct WizardInput {
    pub provider: String,
    pub class: String,
    pub cpu: String,
    pub mem: String,
    pub disks: String,
    pub os: String,
    pub size: String,
    pub public: String,
    pub name: String,
    /// A one-cloud provider's plan (its own name for a shape); empty when the provider
    /// picks the plan itself.
    pub plan: String,
    /// Set by the wizard's "Get a quote" button.
    pub quote: String,
}

impl WizardInput {
    /// Whether the public box is ticked.
    pub fn is_public(&self) -> bool {
        matches!(self.public.as_str(), "on" | "true" | "1" | "yes")
    }
}

/// The request wizard: the providers a project sees, the one chosen with its catalog, what
/// was typed, its problems and the provider's quote.
#[derive(Debug, Clone)]
pub struct WizardPage {
    pub providers: Vec<ProviderView>,
    pub input: WizardInput,
    pub errors: FieldErrors,
    pub quote: Option<QuoteView>,
    /// Why no quote could be had (the provider could not be asked), in words.
    pub quote_problem: Option<String>,
}

impl WizardPage {
    /// The provider chosen, if it is one the project sees: by its name as listed (bare for
    /// the operator's, `org/project/name` for any other) or its id; a bare name the operator
    /// does not use means the project's own provider of that name, as in the API.
    pub fn chosen(&self) -> Option<&ProviderView> {
        let given = self.input.provider.as_str();
        self.providers
            .iter()
            .find(|p| p.name == given || p.id == given)
            .or_else(|| {
                self.providers.iter().find(|p| {
                    p.name
                        .strip_prefix(p.project.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                        == Some(given)
                })
            })
    }
}

/// One provider's card on the Resource Providers page.
#[derive(Debug, Clone)]
pub struct ProviderCard {
    pub provider: ProviderView,
    /// The provider's sites as the project sees them (`orc sites`).
    pub sites: Vec<orc_zone_api_types::views::SiteView>,
    /// Registered in this project (scope and pricing are changed here).
    pub home: bool,
    pub errors: FieldErrors,
}

/// The project's providers.
#[derive(Debug, Clone)]
pub struct ProvidersPage {
    pub cards: Vec<ProviderCard>,
    pub notice: Option<String>,
    /// The person operates the zone (owner of org `sys`): only they make a provider Global.
    pub operator: bool,
}

/// A node that ran unpriced in a month: its hours, never a zero price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpricedNode {
    pub pool: String,
    pub node: String,
    pub line: String,
    /// Node-hours in the month, two decimals.
    pub hours: String,
    pub running: bool,
}

/// A project's usage in a month.
#[derive(Debug, Clone)]
pub struct UsagePage {
    pub usage: UsageView,
    pub unpriced: Vec<UnpricedNode>,
    /// Node-hours of every line, priced or not, two decimals.
    pub node_hours: String,
    /// The month before and after, for the links.
    pub previous: String,
    pub next: String,
}

/// An org's memberships.
#[derive(Debug, Clone)]
pub struct MembersPage {
    pub org: String,
    pub memberships: Vec<MembershipView>,
    /// The org's projects, for the form.
    pub projects: Vec<String>,
    /// Whether the person may grant and take roles here (an owner).
    pub manages: bool,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

/// The person's API tokens.
#[derive(Debug, Clone)]
pub struct TokensPage {
    pub user: String,
    pub tokens: Vec<TokenView>,
    /// A token just made: its value, shown this once.
    pub created: Option<(TokenView, String)>,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

/// One node: what it is, its join tokens, and the forms that mint a token and run a
/// command on its agent.
#[derive(Debug, Clone)]
pub struct NodePage {
    /// The pool's name.
    pub pool: String,
    pub node: NodeView,
    /// Oldest first; empty when the person may not list them.
    pub tokens: Vec<JoinTokenView>,
    /// A token just minted: its secret is shown this once.
    pub created: Option<CreatedJoinToken>,
    /// What the command form holds.
    pub command: String,
    pub timeout: String,
    pub ttl: String,
    /// What the last command did.
    pub exec: Option<ExecResult>,
    pub errors: FieldErrors,
}

/// What a command run on a node's agent printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub argv: Vec<String>,
    pub stdout: String,
    pub stderr: String,
    /// The exit code; `None` when the command was killed or never ran.
    pub code: Option<i32>,
    /// Why it did not run to its end.
    pub error: Option<String>,
    /// Whether output past the page's limit was left out.
    pub truncated: bool,
}

/// A project's mesh: its members as the zone plans them and their agents report them, and
/// the form that puts a workstation on it.
#[derive(Debug, Clone)]
pub struct MeshPage {
    pub mesh: MeshView,
    /// A workstation just connected: its wg-quick file (all but the private key).
    pub connected: Option<ConnectedWorkstation>,
    pub name: String,
    pub public_key: String,
    pub errors: FieldErrors,
}

/// Whether a param's value is a JSON document (an object or a list): shown as a text area
/// and checked before it is sent.
pub fn is_json(value: &str) -> bool {
    let t = value.trim_start();
    t.starts_with('{') || t.starts_with('[')
}
