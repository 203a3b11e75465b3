//! Reading every param from a [`ParamSource`] and checking it: [`load_config`]. Every
//! problem is collected, each naming its param, so one failed start shows everything to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use rust_decimal::Decimal;
use url::Url;

use super::config::{CloudConfig, Config, ConfigErrors, OwnerTag, ParamError, ParamProblem};
use super::names::*;
use super::source::{NotUnicode, ParamSource};
use crate::ids::{Cloud, LocationId, PlanId};
use crate::maps::{GatewayShape, MapError, OsMap, PtrDomain, RegionMap, excerpt};
use crate::secret::Secret;

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
    let regions = r.list(&p("regions"), location_rule).map(|s| {
        s.into_iter()
            .filter_map(|l| LocationId::new(l).ok())
            .collect()
    });
    let plans = r
        .list(&p("plans"), plan_rule)
        .map(|s| s.into_iter().filter_map(|p| PlanId::new(p).ok()).collect());
    let images = r.list(&p("images"), image_rule);
    let max_nodes = r.whole(&p("max_nodes"));
    let max_monthly_spend = r.decimal(&p("max_monthly_spend"), false);
    let exchange_rate = r.decimal(&p("exchange_rate"), true);
    let gateway_plan = r
        .raw(&p("gateway_plan"))
        .and_then(|plan| match plan_rule(&plan) {
            None => PlanId::new(plan).ok(),
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

/// The JWKS URL of the admin page's gate. The https rule is `orc_access::KeysUrl`'s, the
/// one the page's key source applies too; the URL crate then reads the origin from it.
fn read_access_keys_url(r: &mut Reader) -> Option<Url> {
    let text = r.raw(ACCESS_KEYS_URL)?;
    let value = excerpt(&text);
    match orc_access::KeysUrl::parse(&text) {
        Ok(_) => {}
        Err(orc_access::verify::KeysUrlError::NotHttps { .. }) => {
            r.fail(ACCESS_KEYS_URL, ParamProblem::NotHttps { value });
            return None;
        }
        Err(orc_access::verify::KeysUrlError::NoHost { .. }) => {
            r.fail(ACCESS_KEYS_URL, ParamProblem::NoHost { value });
            return None;
        }
    }
    match Url::parse(&text) {
        Ok(url) if url.scheme() == "https" && url.has_host() => Some(url),
        Ok(_) => {
            r.fail(ACCESS_KEYS_URL, ParamProblem::NoHost { value });
            None
        }
        Err(e) => {
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
