//! Params → typed [`Config`], purely.
//!
//! Param `name` arrives as the environment variable `ORC_PARAM_<NAME>` (upper case) or, for
//! values delivered as files (JSON params, and any param the zone chooses), as the path in
//! `ORC_PARAM_<NAME>_FILE`. Reading goes through [`ParamSource`], so tests feed a
//! [`MapSource`] and the process uses [`ProcessEnv`]; [`load_config`] itself does no I/O but
//! what the source does.
//!
//! Rules: surrounding whitespace is trimmed and an empty param takes its default. Every param
//! that cannot be read is reported, each error naming the param and what is wrong, so one
//! failed start shows the operator everything to fix. Sensitive params (the cloud keys) are
//! held in [`Secret`] and no error ever contains any of their characters.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use url::Url;

use crate::ids::{Cloud, LocationId, PlanId};
use crate::maps::{GatewayShape, MapError, OsMap, PtrDomain, RegionMap, excerpt};
use crate::secret::Secret;

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

/// An environment variable whose value is not valid UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUnicode;

/// Where params come from.
pub trait ParamSource {
    /// The value of environment variable `name`, if set.
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode>;
    /// The text of the file at `path`, or a short reason it cannot be read.
    fn read_file(&self, path: &str) -> Result<String, String>;
}

/// An in-memory source: variables and files in maps. For tests and tools.
#[derive(Debug, Clone, Default)]
pub struct MapSource {
    vars: BTreeMap<String, String>,
    files: BTreeMap<String, String>,
}

impl MapSource {
    /// An empty source.
    pub fn new() -> Self {
        MapSource::default()
    }

    /// Sets param `name` as `ORC_PARAM_<NAME>`.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(param_var(name), value.to_string());
        self
    }

    /// Sets any environment variable.
    pub fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    /// Delivers param `name` as a file at `path`.
    pub fn param_file(mut self, name: &str, path: &str, text: &str) -> Self {
        self.vars.insert(param_file_var(name), path.to_string());
        self.files.insert(path.to_string(), text.to_string());
        self
    }
}

impl ParamSource for MapSource {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        Ok(self.vars.get(name).cloned())
    }

    fn read_file(&self, path: &str) -> Result<String, String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
}

/// The process environment and file system: the thin adapter the binary uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl ParamSource for ProcessEnv {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        match std::env::var_os(name) {
            None => Ok(None),
            Some(v) => v.into_string().map(Some).map_err(|_| NotUnicode),
        }
    }

    fn read_file(&self, path: &str) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.kind().to_string())
    }
}

/// An owner tag, checked for its cloud.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct OwnerTag(String);

impl OwnerTag {
    /// The tag as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One cloud's part of the config.
#[derive(Debug, Clone)]
pub struct CloudConfig {
    pub cloud: Cloud,
    /// The account key; `None` leaves the cloud out.
    pub key: Option<Secret>,
    /// The API base URL (`ORC_<CLOUD>_ENDPOINT` or the public API).
    pub endpoint: Url,
    pub enabled: bool,
    pub owner_tag: Option<OwnerTag>,
    pub also_owned_tags: Vec<OwnerTag>,
    /// Allowed locations; `None` allows every location the region map names.
    pub regions: Option<BTreeSet<LocationId>>,
    /// Allowed plans; `None` allows every plan.
    pub plans: Option<BTreeSet<PlanId>>,
    /// Allowed image families or exact image ids; `None` allows every mapped family.
    pub images: Option<BTreeSet<String>>,
    pub max_nodes: Option<u32>,
    /// USD per month.
    pub max_monthly_spend: Option<Decimal>,
    /// USD per unit of the account currency, when set.
    pub exchange_rate: Option<Decimal>,
    pub gateway_plan: Option<PlanId>,
    pub pool_ipv4_limit: u32,
}

impl CloudConfig {
    /// Whether the cloud has a key (and so may be used at all).
    pub fn is_keyed(&self) -> bool {
        self.key.is_some()
    }

    /// Whether either cap is set (such a cloud must be counted before it places nodes).
    pub fn is_capped(&self) -> bool {
        self.max_nodes.is_some() || self.max_monthly_spend.is_some()
    }

    /// The rate that turns `currency` into USD: the configured rate, or 1 for a USD account,
    /// or `None` for another currency with no rate set (its nodes are unpriced).
    pub fn usd_rate(&self, currency: orc_common::Currency) -> Option<Decimal> {
        match self.exchange_rate {
            Some(rate) => Some(rate),
            None if currency == orc_common::Currency::USD => Some(Decimal::ONE),
            None => None,
        }
    }
}

/// The partner's whole typed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub partner_id: String,
    pub regions: RegionMap,
    pub os_map: OsMap,
    pub gateway: GatewayShape,
    pub ptr_domain: Option<PtrDomain>,
    pub access_keys_url: Option<Url>,
    pub ssh_keys: Vec<ssh_key::PublicKey>,
    pub clouds: BTreeMap<Cloud, CloudConfig>,
}

impl Config {
    /// The shared resource every replica offers.
    pub fn resource_uri(&self) -> String {
        format!("urn:orc:partner:{}", self.partner_id)
    }

    /// One cloud's config; `load_config` always builds one per [`Cloud::ALL`].
    pub fn cloud(&self, cloud: Cloud) -> Option<&CloudConfig> {
        self.clouds.get(&cloud)
    }
}

/// One cloud's effective params as the admin page's Config view shows them: whether a key is
/// set, never any character of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CloudView {
    pub key_set: bool,
    pub endpoint: String,
    pub enabled: bool,
    pub owner_tag: Option<OwnerTag>,
    pub also_owned_tags: Vec<OwnerTag>,
    pub regions: Option<BTreeSet<LocationId>>,
    pub plans: Option<BTreeSet<PlanId>>,
    pub images: Option<BTreeSet<String>>,
    pub max_nodes: Option<u32>,
    pub max_monthly_spend_usd: Option<Decimal>,
    pub exchange_rate: Option<Decimal>,
    pub gateway_plan: Option<PlanId>,
    pub pool_ipv4_limit: u32,
}

/// The effective config without secrets, for the Config view and start-up logs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigView {
    pub partner_id: String,
    pub resource_uri: String,
    pub ptr_domain: Option<String>,
    pub access_keys_url: Option<String>,
    /// `<algorithm> <SHA256 fingerprint>` of each break-glass key.
    pub ssh_keys: Vec<String>,
    pub gateway: GatewayShape,
    pub clouds: BTreeMap<Cloud, CloudView>,
}

impl Config {
    /// The effective config without any secret.
    pub fn view(&self) -> ConfigView {
        ConfigView {
            partner_id: self.partner_id.clone(),
            resource_uri: self.resource_uri(),
            ptr_domain: self.ptr_domain.as_ref().map(|d| d.as_str().to_string()),
            access_keys_url: self.access_keys_url.as_ref().map(ToString::to_string),
            ssh_keys: self
                .ssh_keys
                .iter()
                .map(|k| format!("{} {}", k.algorithm(), k.fingerprint(Default::default())))
                .collect(),
            gateway: self.gateway,
            clouds: self
                .clouds
                .iter()
                .map(|(cloud, c)| {
                    (
                        *cloud,
                        CloudView {
                            key_set: c.is_keyed(),
                            endpoint: c.endpoint.to_string(),
                            enabled: c.enabled,
                            owner_tag: c.owner_tag.clone(),
                            also_owned_tags: c.also_owned_tags.clone(),
                            regions: c.regions.clone(),
                            plans: c.plans.clone(),
                            images: c.images.clone(),
                            max_nodes: c.max_nodes,
                            max_monthly_spend_usd: c.max_monthly_spend,
                            exchange_rate: c.exchange_rate,
                            gateway_plan: c.gateway_plan.clone(),
                            pool_ipv4_limit: c.pool_ipv4_limit,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// What is wrong with one param.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("param {param}: {problem}")]
pub struct ParamError {
    /// The param name (or, for endpoints, the environment variable).
    pub param: String,
    pub problem: ParamProblem,
}

/// The kinds of problems a param can have. None carries a sensitive value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamProblem {
    #[error("is required")]
    Required,
    #[error("is required when {key} is set")]
    RequiredWithKey { key: &'static str },
    #[error("at least one cloud needs a key: set hetzner_api_token or vultr_api_key")]
    NoCloudKey,
    #[error("is set both in {var} and as a file in {file_var}; set one")]
    ValueAndFile { var: String, file_var: String },
    #[error("file {path:?} named by {file_var} cannot be read: {reason}")]
    FileUnreadable {
        file_var: String,
        path: String,
        reason: String,
    },
    #[error("is not valid UTF-8")]
    NotUnicode,
    #[error("contains a space or a character that is not printable ASCII (the value is not shown)")]
    SecretNotPrintable,
    #[error("{value:?} must be printable ASCII with no colon and no space")]
    BadPartnerId { value: String },
    #[error("is longer than {max} characters")]
    TooLong { max: usize },
    #[error("{value:?} must be true or false")]
    NotABool { value: String },
    #[error("{value:?} must be a whole number from 0 to {max}")]
    NotAWholeNumber { value: String, max: u32 },
    #[error("{value:?} must be a decimal number of at least 0, such as 250 or 99.50")]
    NotAnAmount { value: String },
    #[error("{value:?} must be a decimal number greater than 0, such as 1.08")]
    NotARate { value: String },
    #[error("tag {value:?} {rule}")]
    BadTag { value: String, rule: &'static str },
    #[error("item {value:?} {rule}")]
    BadItem { value: String, rule: &'static str },
    #[error("lists {value:?} twice")]
    DuplicateItem { value: String },
    #[error("has an empty item between commas")]
    EmptyItem,
    #[error("{value:?} is not a URL: {reason}")]
    BadUrl { value: String, reason: String },
    #[error("{value:?} must be an https URL")]
    NotHttps { value: String },
    #[error("{value:?} must be an http or https URL")]
    NotHttp { value: String },
    #[error("line {line} is not an OpenSSH public key: {reason}")]
    BadSshKey { line: usize, reason: String },
    #[error("{}", join_map_errors(.0))]
    Map(Vec<MapError>),
}

fn join_map_errors(errors: &[MapError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every param that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ParamError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} param{} cannot be read:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

struct Reader<'a> {
    source: &'a dyn ParamSource,
    errors: Vec<ParamError>,
}

impl Reader<'_> {
    fn fail(&mut self, param: &str, problem: ParamProblem) {
        self.errors.push(ParamError {
            param: param.to_string(),
            problem,
        });
    }

    /// The raw text of `name`, trimmed; `None` when unset or empty.
    fn raw(&mut self, name: &str) -> Option<String> {
        let var = param_var(name);
        let file_var = param_file_var(name);
        let value = match self.source.var(&var) {
            Ok(v) => v,
            Err(NotUnicode) => {
                self.fail(name, ParamProblem::NotUnicode);
                return None;
            }
        };
        let path = match self.source.var(&file_var) {
            Ok(p) => p.filter(|p| !p.trim().is_empty()),
            Err(NotUnicode) => {
                self.fail(name, ParamProblem::NotUnicode);
                return None;
            }
        };
        let value = value.filter(|v| !v.trim().is_empty());
        let text = match (value, path) {
            (Some(_), Some(_)) => {
                self.fail(name, ParamProblem::ValueAndFile { var, file_var });
                return None;
            }
            (Some(v), None) => v,
            (None, Some(path)) => match self.source.read_file(path.trim()) {
                Ok(text) => text,
                Err(reason) => {
                    self.fail(
                        name,
                        ParamProblem::FileUnreadable {
                            file_var,
                            path,
                            reason,
                        },
                    );
                    return None;
                }
            },
            (None, None) => return None,
        };
        let trimmed = text.trim();
        (!trimmed.is_empty()).then(|| trimmed.to_string())
    }

    fn map<T>(
        &mut self,
        name: &str,
        parse: impl Fn(&str) -> Result<T, Vec<MapError>>,
    ) -> Option<T> {
        let text = self.raw(name)?;
        match parse(&text) {
            Ok(v) => Some(v),
            Err(errors) => {
                self.fail(name, ParamProblem::Map(errors));
                None
            }
        }
    }

    fn bool(&mut self, name: &str, default: bool) -> bool {
        match self.raw(name).as_deref() {
            None => default,
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                let value = excerpt(other);
                self.fail(name, ParamProblem::NotABool { value });
                default
            }
        }
    }

    fn whole(&mut self, name: &str) -> Option<u32> {
        const MAX: u32 = 1_000_000;
        let text = self.raw(name)?;
        match text.parse::<u32>() {
            Ok(n) if n <= MAX => Some(n),
            _ => {
                let value = excerpt(&text);
                self.fail(name, ParamProblem::NotAWholeNumber { value, max: MAX });
                None
            }
        }
    }

    fn decimal(&mut self, name: &str, positive: bool) -> Option<Decimal> {
        let text = self.raw(name)?;
        let parsed = if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            Decimal::from_str(&text).ok()
        } else {
            None
        };
        let max = Decimal::from(1_000_000_000u64);
        match parsed {
            Some(d) if d <= max && (!positive || d > Decimal::ZERO) => Some(d),
            _ => {
                let value = excerpt(&text);
                let problem = if positive {
                    ParamProblem::NotARate { value }
                } else {
                    ParamProblem::NotAnAmount { value }
                };
                self.fail(name, problem);
                None
            }
        }
    }

    fn list(
        &mut self,
        name: &str,
        item_ok: fn(&str) -> Option<&'static str>,
    ) -> Option<BTreeSet<String>> {
        let text = self.raw(name)?;
        let mut items = BTreeSet::new();
        let mut bad = false;
        for item in text.split(',').map(str::trim) {
            if item.is_empty() {
                self.fail(name, ParamProblem::EmptyItem);
                bad = true;
            } else if let Some(rule) = item_ok(item) {
                let value = excerpt(item);
                self.fail(name, ParamProblem::BadItem { value, rule });
                bad = true;
            } else if !items.insert(item.to_string()) {
                let value = excerpt(item);
                self.fail(name, ParamProblem::DuplicateItem { value });
                bad = true;
            }
        }
        (!bad).then_some(items)
    }

    fn secret(&mut self, name: &str) -> Option<Secret> {
        let text = self.raw(name)?;
        if text.bytes().all(|b| b.is_ascii_graphic()) {
            Some(Secret::new(text))
        } else {
            self.fail(name, ParamProblem::SecretNotPrintable);
            None
        }
    }
}

fn location_rule(item: &str) -> Option<&'static str> {
    crate::maps::check_name(item, false)
        .err()
        .map(|_| "must be a cloud location id: lowercase letters, digits and dashes")
}

fn plan_rule(item: &str) -> Option<&'static str> {
    let ok = item.len() <= 64
        && item.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_')
        });
    (!ok).then_some(
        "must be a plan id: up to 64 lowercase letters, digits, dots, dashes, underscores",
    )
}

fn image_rule(item: &str) -> Option<&'static str> {
    plan_rule(item).map(|_| {
        "must be an OS family or image id: up to 64 lowercase letters, digits, dots, dashes, underscores"
    })
}

const HETZNER_TAG_RULE: &str = "must be at most 63 letters, digits, '-', '_' and '.', beginning and ending with a letter or digit";
const VULTR_TAG_RULE: &str =
    "must be 1 to 255 printable characters without a comma, beginning and ending with a non-space";

fn tag_rule(cloud: Cloud, tag: &str) -> Option<&'static str> {
    match cloud {
        Cloud::Hetzner => {
            let chars_ok = tag
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            let edges_ok = tag
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
                && tag
                    .bytes()
                    .last()
                    .is_some_and(|b| b.is_ascii_alphanumeric());
            (!(chars_ok && edges_ok && tag.len() <= 63)).then_some(HETZNER_TAG_RULE)
        }
        Cloud::Vultr => {
            let ok = !tag.is_empty()
                && tag.len() <= 255
                && tag
                    .bytes()
                    .all(|b| (b.is_ascii_graphic() || b == b' ') && b != b',')
                && !tag.starts_with(' ')
                && !tag.ends_with(' ');
            (!ok).then_some(VULTR_TAG_RULE)
        }
    }
}

fn read_endpoint(r: &mut Reader, cloud: Cloud) -> Url {
    let var = cloud.endpoint_var();
    let value = match r.source.var(var) {
        Ok(v) => v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty()),
        Err(NotUnicode) => {
            r.fail(var, ParamProblem::NotUnicode);
            None
        }
    };
    let parsed = value.and_then(|text| match Url::parse(&text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
        Ok(_) => {
            let value = excerpt(&text);
            r.fail(var, ParamProblem::NotHttp { value });
            None
        }
        Err(e) => {
            let value = excerpt(&text);
            r.fail(
                var,
                ParamProblem::BadUrl {
                    value,
                    reason: e.to_string(),
                },
            );
            None
        }
    });
    parsed.unwrap_or_else(|| default_endpoint(cloud))
}

/// The cloud's public API URL. The built-in constants are valid URLs (a test parses both).
fn default_endpoint(cloud: Cloud) -> Url {
    Url::parse(cloud.default_endpoint()).expect("built-in endpoint URLs are valid")
}

fn read_cloud(r: &mut Reader, cloud: Cloud) -> CloudConfig {
    let p = |suffix: &str| format!("{cloud}_{suffix}");
    let key = r.secret(cloud.key_param());
    let endpoint = read_endpoint(r, cloud);
    let enabled = r.bool(&p("enabled"), true);
    let owner_tag_text = r.raw(&p("owner_tag"));
    let owner_tag = match owner_tag_text {
        None => {
            if key.is_some() {
                r.fail(
                    &p("owner_tag"),
                    ParamProblem::RequiredWithKey {
                        key: cloud.key_param(),
                    },
                );
            }
            None
        }
        Some(tag) => match tag_rule(cloud, &tag) {
            None => Some(OwnerTag(tag)),
            Some(rule) => {
                let value = excerpt(&tag);
                r.fail(&p("owner_tag"), ParamProblem::BadTag { value, rule });
                None
            }
        },
    };
    let mut also_owned_tags = Vec::new();
    if let Some(text) = r.raw(&p("also_owned_tags")) {
        for tag in text.split(',').map(str::trim) {
            if tag.is_empty() {
                r.fail(&p("also_owned_tags"), ParamProblem::EmptyItem);
            } else if let Some(rule) = tag_rule(cloud, tag) {
                let value = excerpt(tag);
                r.fail(&p("also_owned_tags"), ParamProblem::BadTag { value, rule });
            } else {
                also_owned_tags.push(OwnerTag(tag.to_string()));
            }
        }
    }
    let regions = r
        .list(&p("regions"), location_rule)
        .map(|s| s.into_iter().map(LocationId::new).collect());
    let plans = r
        .list(&p("plans"), plan_rule)
        .map(|s| s.into_iter().map(PlanId::new).collect());
    let images = r.list(&p("images"), image_rule);
    let max_nodes = r.whole(&p("max_nodes"));
    let max_monthly_spend = r.decimal(&p("max_monthly_spend"), false);
    let exchange_rate = r.decimal(&p("exchange_rate"), true);
    let gateway_plan = r
        .raw(&p("gateway_plan"))
        .and_then(|plan| match plan_rule(&plan) {
            None => Some(PlanId::new(plan)),
            Some(rule) => {
                let value = excerpt(&plan);
                r.fail(&p("gateway_plan"), ParamProblem::BadItem { value, rule });
                None
            }
        });
    let pool_ipv4_limit = r
        .whole(&p("pool_ipv4_limit"))
        .unwrap_or(DEFAULT_POOL_IPV4_LIMIT);
    CloudConfig {
        cloud,
        key,
        endpoint,
        enabled,
        owner_tag,
        also_owned_tags,
        regions,
        plans,
        images,
        max_nodes,
        max_monthly_spend,
        exchange_rate,
        gateway_plan,
        pool_ipv4_limit,
    }
}

fn read_partner_id(r: &mut Reader) -> String {
    const MAX: usize = 128;
    let Some(id) = r.raw(PARTNER_ID) else {
        r.fail(PARTNER_ID, ParamProblem::Required);
        return String::new();
    };
    if !id.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        let value = excerpt(&id);
        r.fail(PARTNER_ID, ParamProblem::BadPartnerId { value });
    } else if id.len() > MAX {
        r.fail(PARTNER_ID, ParamProblem::TooLong { max: MAX });
    }
    id
}

fn read_access_keys_url(r: &mut Reader) -> Option<Url> {
    let text = r.raw(ACCESS_KEYS_URL)?;
    match Url::parse(&text) {
        Ok(url) if url.scheme() == "https" && url.has_host() => Some(url),
        Ok(_) => {
            let value = excerpt(&text);
            r.fail(ACCESS_KEYS_URL, ParamProblem::NotHttps { value });
            None
        }
        Err(e) => {
            let value = excerpt(&text);
            r.fail(
                ACCESS_KEYS_URL,
                ParamProblem::BadUrl {
                    value,
                    reason: e.to_string(),
                },
            );
            None
        }
    }
}

fn read_ssh_keys(r: &mut Reader) -> Vec<ssh_key::PublicKey> {
    let Some(text) = r.raw(SSH_KEYS) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match ssh_key::PublicKey::from_openssh(line) {
            Ok(key) => keys.push(key),
            Err(e) => r.fail(
                SSH_KEYS,
                ParamProblem::BadSshKey {
                    line: i + 1,
                    reason: e.to_string(),
                },
            ),
        }
    }
    keys
}

/// Reads and checks every param; on failure, returns every problem found.
pub fn load_config(source: &dyn ParamSource) -> Result<Config, ConfigErrors> {
    let mut r = Reader {
        source,
        errors: Vec::new(),
    };
    let partner_id = read_partner_id(&mut r);
    let regions = r
        .map(REGIONS, RegionMap::parse)
        .unwrap_or_else(RegionMap::builtin);
    let os_map = r.map(OS_MAP, OsMap::parse).unwrap_or_else(OsMap::builtin);
    let gateway = r.map(GATEWAY, GatewayShape::parse).unwrap_or_default();
    let ptr_domain = r.map(PTR_DOMAIN, PtrDomain::parse);
    let access_keys_url = read_access_keys_url(&mut r);
    let ssh_keys = read_ssh_keys(&mut r);
    let clouds: BTreeMap<Cloud, CloudConfig> = Cloud::ALL
        .iter()
        .map(|&cloud| (cloud, read_cloud(&mut r, cloud)))
        .collect();
    let key_read_failed = r
        .errors
        .iter()
        .any(|e| Cloud::ALL.iter().any(|c| e.param == c.key_param()));
    if !key_read_failed && !clouds.values().any(CloudConfig::is_keyed) {
        r.fail("hetzner_api_token, vultr_api_key", ParamProblem::NoCloudKey);
    }
    if r.errors.is_empty() {
        Ok(Config {
            partner_id,
            regions,
            os_map,
            gateway,
            ptr_domain,
            access_keys_url,
            ssh_keys,
            clouds,
        })
    } else {
        Err(ConfigErrors(r.errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "hZ9secretKEYvalue0123456789";
    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDnNVNSexvf0oW7ZTYi4F+xpqN8ZHXgrpOJJS1X6H2dF ops@example";

    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDHpJQ8vWS6ebM1Kq/kn6plpZjbxBOg15VsfOn4qKCAQ/0AnBXDGyOCdLKo0gZJkk9Gng0Ml2QBjajMZfPSgd8k91Hd8RtHugodvjUcyhnwHAUsLoE0UNpyOCEbTuoxhLQxSCCEdaJzusGLHbvxDWDjoKc7FQMJehWtYiUiXvsBdqzFXrXGC6oph2JUaGDtzSG4RHa7qpC1Cus7o2MYIKgr6zAuZGCAqC6hjwvnmFC9PHttn6mbKOEhr05WHR6y6FaT18EhdogbDfGYToh0PHESoEZsILKHFpAzBmy0fOXrVQ5dJNmnqpjkwp4ZpyIUJlHMUPM29wOYMuRxbpAZ7me1 rsa@x";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAbv9qs85+wdsvY6K1PPX7Ec9Zidi/NJBXpJCRynWrg5TxiBVsjHWooHNinrXRB+wcfScH5wmlLio4AVzS9gmPs= ec@x";

    fn minimal() -> MapSource {
        MapSource::new()
            .param(PARTNER_ID, "zone-1")
            .param("hetzner_api_token", KEY)
            .param("hetzner_owner_tag", "orc-partner-hetzner")
    }

    fn errors(source: &MapSource) -> Vec<ParamError> {
        load_config(source).unwrap_err().0
    }

    #[test]
    fn minimal_params_take_every_default() {
        let config = load_config(&minimal()).unwrap();
        assert_eq!(config.resource_uri(), "urn:orc:partner:zone-1");
        assert_eq!(config.regions, RegionMap::builtin());
        assert_eq!(config.os_map, OsMap::builtin());
        assert_eq!(config.gateway, GatewayShape { cpu: 1, mem_gib: 2 });
        assert!(config.ptr_domain.is_none() && config.access_keys_url.is_none());
        let h = config.cloud(Cloud::Hetzner).unwrap();
        assert_eq!(h.key.as_ref().map(Secret::expose), Some(KEY));
        assert!(h.enabled && h.regions.is_none() && h.plans.is_none() && h.images.is_none());
        assert_eq!(h.pool_ipv4_limit, 10);
        assert_eq!(h.exchange_rate, None);
        assert_eq!(h.usd_rate(orc_common::Currency::EUR), None);
        assert_eq!(h.usd_rate(orc_common::Currency::USD), Some(Decimal::ONE));
        assert_eq!(h.endpoint.as_str(), "https://api.hetzner.cloud/v1");
        let v = config.cloud(Cloud::Vultr).unwrap();
        assert!(!v.is_keyed());
        assert_eq!(v.endpoint.as_str(), "https://api.vultr.com/");
    }

    #[test]
    fn every_param_reads_its_value() {
        let source = minimal()
            .param(GATEWAY, r#"{"cpu": 2, "mem": 4}"#)
            .param(PTR_DOMAIN, "cloud.example.com")
            .param(
                ACCESS_KEYS_URL,
                "https://zone.example.com/.well-known/orc-access/jwks.json",
            )
            .param(SSH_KEYS, &format!("{ED25519}\n\n{RSA}\r\n  {ECDSA}\n"))
            .param("vultr_api_key", "V1")
            .param("vultr_owner_tag", "orc partner vultr")
            .param("vultr_enabled", "false")
            .param("vultr_also_owned_tags", "old-1, old-2")
            .param("vultr_regions", "ewr,sea")
            .param("vultr_plans", "vc2-2c-4gb, vhf-2c-4gb")
            .param("vultr_images", "ubuntu,2284")
            .param("vultr_max_nodes", "25")
            .param("vultr_max_monthly_spend", "999.50")
            .param("vultr_exchange_rate", "1")
            .param("vultr_gateway_plan", "vc2-1c-2gb")
            .param("vultr_pool_ipv4_limit", "3")
            .var("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9000")
            .param_file(REGIONS, "/params/regions", crate::maps::BUILTIN_REGIONS);
        let config = load_config(&source).unwrap();
        let algorithms: Vec<String> = config
            .ssh_keys
            .iter()
            .map(|k| k.algorithm().to_string())
            .collect();
        assert_eq!(
            algorithms,
            ["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256"]
        );
        assert_eq!(config.gateway.cpu, 2);
        assert_eq!(config.ptr_domain.unwrap().as_str(), "cloud.example.com");
        let v = config.clouds[&Cloud::Vultr].clone();
        assert!(!v.enabled);
        assert_eq!(v.owner_tag.unwrap().as_str(), "orc partner vultr");
        assert_eq!(v.also_owned_tags.len(), 2);
        assert_eq!(v.regions.unwrap().len(), 2);
        assert!(v.plans.unwrap().contains(&PlanId::new("vhf-2c-4gb")));
        assert!(v.images.unwrap().contains("2284"));
        assert_eq!(v.max_nodes, Some(25));
        assert_eq!(v.max_monthly_spend, Some(Decimal::new(99950, 2)));
        assert_eq!(v.exchange_rate, Some(Decimal::ONE));
        assert_eq!(v.gateway_plan, Some(PlanId::new("vc2-1c-2gb")));
        assert_eq!(v.pool_ipv4_limit, 3);
        assert_eq!(v.endpoint.as_str(), "http://127.0.0.1:9000/");
    }

    #[test]
    fn an_empty_param_takes_its_default() {
        let config = load_config(
            &minimal()
                .param("hetzner_pool_ipv4_limit", "  ")
                .param(GATEWAY, ""),
        )
        .unwrap();
        assert_eq!(
            config.cloud(Cloud::Hetzner).unwrap().pool_ipv4_limit,
            DEFAULT_POOL_IPV4_LIMIT
        );
        assert_eq!(config.gateway, GatewayShape::default());
    }

    /// Every param gets at least one bad value, and the error names it.
    #[test]
    fn every_bad_param_is_named() {
        let cases: &[(&str, &str)] = &[
            (PARTNER_ID, "zone:1"),
            (PARTNER_ID, "zone 1"),
            (
                REGIONS,
                r#"{"eu": {"title": "E", "sites": [{"eu": "vultr:fra"}]}}"#,
            ),
            (OS_MAP, r#"{"x": {"title": "X"}}"#),
            (GATEWAY, r#"{"cpu": 0, "mem": 2}"#),
            (PTR_DOMAIN, "not a domain"),
            (ACCESS_KEYS_URL, "http://zone.example.com/jwks.json"),
            (ACCESS_KEYS_URL, "::nonsense"),
            (SSH_KEYS, "ssh-rsa not-base64!"),
            (SSH_KEYS, "# a comment is not a key"),
            ("hetzner_api_token", "has space"),
            ("vultr_api_key", "tab\tinside"),
            ("hetzner_enabled", "yes"),
            ("vultr_enabled", "0"),
            ("hetzner_owner_tag", "-starts-with-dash"),
            ("hetzner_owner_tag", &"a".repeat(64)),
            ("vultr_owner_tag", "a,b"),
            ("hetzner_also_owned_tags", "ok,,ok2"),
            ("vultr_also_owned_tags", " ,x"),
            ("hetzner_regions", "FSN1"),
            ("vultr_regions", "ewr,ewr"),
            ("hetzner_plans", "CX23"),
            ("vultr_plans", "vc2 2c"),
            ("hetzner_images", "Ubuntu"),
            ("vultr_images", "a b"),
            ("hetzner_max_nodes", "-1"),
            ("vultr_max_nodes", "ten"),
            ("hetzner_max_monthly_spend", "$100"),
            ("vultr_max_monthly_spend", "-5"),
            ("hetzner_exchange_rate", "0"),
            ("vultr_exchange_rate", "1,08"),
            ("hetzner_gateway_plan", "CX23!"),
            ("vultr_gateway_plan", "bad plan"),
            ("hetzner_pool_ipv4_limit", "many"),
            ("vultr_pool_ipv4_limit", "1.5"),
        ];
        for (param, bad) in cases {
            let source = minimal()
                .param("vultr_api_key", "V1")
                .param("vultr_owner_tag", "orc-vultr")
                .param(param, bad);
            let errs = errors(&source);
            assert!(
                errs.iter().any(|e| e.param == *param),
                "{param}={bad:?} gave {errs:?}"
            );
            let text = ConfigErrors(errs).to_string();
            assert!(text.contains(&format!("param {param}:")), "{text}");
        }
    }

    #[test]
    fn structural_errors_name_their_params() {
        let errs = errors(&MapSource::new());
        let params: Vec<&str> = errs.iter().map(|e| e.param.as_str()).collect();
        assert_eq!(params, [PARTNER_ID, "hetzner_api_token, vultr_api_key"]);

        let errs = errors(
            &MapSource::new()
                .param(PARTNER_ID, "z")
                .param("vultr_api_key", "k"),
        );
        assert_eq!(errs[0].param, "vultr_owner_tag");
        assert_eq!(
            errs[0].problem,
            ParamProblem::RequiredWithKey {
                key: "vultr_api_key"
            }
        );

        let errs = errors(&minimal().var("ORC_HETZNER_ENDPOINT", "ftp://x"));
        assert_eq!(errs[0].param, "ORC_HETZNER_ENDPOINT");

        let errs = errors(
            &minimal()
                .param(GATEWAY, "{}")
                .param_file(GATEWAY, "/p/gateway", "{}"),
        );
        assert!(matches!(errs[0].problem, ParamProblem::ValueAndFile { .. }));

        let source = minimal().var(&param_file_var(OS_MAP), "/missing");
        let errs = errors(&source);
        assert_eq!(errs[0].param, OS_MAP);
        assert!(errs[0].to_string().contains("/missing"), "{}", errs[0]);
    }

    #[test]
    fn all_errors_are_collected() {
        let source = MapSource::new()
            .param(PARTNER_ID, "a:b")
            .param("hetzner_api_token", KEY)
            .param("hetzner_max_nodes", "x")
            .param(GATEWAY, "[]");
        let errs = errors(&source);
        let params: Vec<&str> = errs.iter().map(|e| e.param.as_str()).collect();
        assert_eq!(
            params,
            [
                PARTNER_ID,
                GATEWAY,
                "hetzner_owner_tag",
                "hetzner_max_nodes"
            ]
        );
    }

    #[test]
    fn keys_never_appear_in_debug_or_errors() {
        let config = load_config(&minimal().param(SSH_KEYS, ED25519)).unwrap();
        let view = serde_json::to_string(&config.view()).unwrap();
        assert!(!view.contains(KEY) && !view.contains("hZ9"), "{view}");
        assert!(view.contains(r#""key_set":true"#), "{view}");
        assert!(view.contains("ssh-ed25519 SHA256:"), "{view}");
        assert!(!format!("{config:?}").contains(KEY));
        assert!(!format!("{config:#?}").contains("hZ9"));
        let bad_key = "hZ9 secret with space";
        let errs = load_config(&minimal().param("hetzner_api_token", bad_key)).unwrap_err();
        let shown = format!("{errs} {errs:?}");
        assert!(!shown.contains("hZ9"), "{shown}");
        assert!(!shown.contains("secret with"), "{shown}");
        assert!(shown.contains("hetzner_api_token"));
    }

    #[test]
    fn built_in_endpoints_parse() {
        for cloud in Cloud::ALL {
            assert!(Url::parse(cloud.default_endpoint()).is_ok());
        }
    }

    #[test]
    fn param_names_cover_both_clouds() {
        let names = all_param_names();
        assert_eq!(names.len(), 7 + 2 * 12);
        assert!(names.contains(&"hetzner_api_token".to_string()));
        assert!(names.contains(&"vultr_pool_ipv4_limit".to_string()));
        assert_eq!(param_var("vultr_api_key"), "ORC_PARAM_VULTR_API_KEY");
        assert_eq!(param_file_var("os_map"), "ORC_PARAM_OS_MAP_FILE");
    }
}
