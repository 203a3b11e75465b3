//! The typed config the params become, its secret-free view for the admin page, and the
//! errors that name each param that could not be read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rust_decimal::Decimal;
use url::Url;

use crate::ids::{Cloud, LocationId, PlanId};
use crate::maps::{GatewayShape, MapError, OsMap, PtrDomain, RegionMap};
use crate::secret::Secret;

/// An owner tag, checked for its cloud.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct OwnerTag(pub(super) String);

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
    #[error("{value:?} names no host (or carries a user name or a space)")]
    NoHost { value: String },
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
