//! The host list an operator gives the static provider, and its validation.
//!
//! The config is JSON data:
//!
//! ```json
//! {"ssh_key": "file:///etc/orc/static-ssh-key",
//!  "hosts": [
//!    {"name": "lab-1", "address": "192.0.2.10", "user": "root",
//!     "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAWQq8X849Y6oTou0gYCXChOwpCFtuBWmQPJXt57r968",
//!     "location": "lab", "vcpus": 4, "memory_gib": 16}
//!  ]}
//! ```
//!
//! The SSH key is a secret reference ([`SecretRef`]), resolved each time it is used; the
//! config itself holds no secret and may be printed. Every host is pinned by its host key.
//! Hosts that share a plan at a location are one offer, so they must agree on shape and
//! price. Validation reports every problem at once, each naming its field.

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Architecture, Currency};
use orc_provider_sdk::config::{ConfigError, FieldError};
use orc_provider_sdk::secret::SecretRef;
use rust_decimal::Decimal;
use serde::Deserialize;

/// The image id of a host's own system: static hosts are never reinstalled.
pub const DEFAULT_OS: &str = "installed";

/// A validated host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticAccount {
    /// Where the private SSH key that every host accepts lives (OpenSSH format).
    pub ssh_key: SecretRef,
    /// The currency of the hosts' prices.
    pub currency: Currency,
    /// Titles of the locations, by id (a location without one is titled by its id).
    pub location_titles: BTreeMap<String, String>,
    /// The hosts, in the order given.
    pub hosts: Vec<Host>,
}

/// One host the operator lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Unique in the list: the machine's name at the zone.
    pub name: String,
    /// IP address or DNS name SSH connects to.
    pub address: String,
    pub port: u16,
    /// The SSH user; anyone but root runs the provider's commands through `sudo -n`.
    pub user: String,
    /// The host key's SHA-256 fingerprint (`SHA256:…`).
    pub host_key_sha256: String,
    /// The location (the zone's class).
    pub location: String,
    /// The plan the host is offered under (its name unless given).
    pub plan: String,
    pub vcpus: u32,
    pub memory_gib: u32,
    pub arch: Architecture,
    pub disk_gib: u32,
    /// The image id of what the host runs.
    pub os: String,
    /// What an hour of the host costs, in the account's currency.
    pub hourly: Decimal,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccount {
    ssh_key: Option<String>,
    currency: Option<String>,
    #[serde(default)]
    locations: BTreeMap<String, String>,
    #[serde(default)]
    hosts: Vec<RawHost>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Option<String>,
    address: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    host_key: Option<String>,
    location: Option<String>,
    plan: Option<String>,
    vcpus: Option<u32>,
    memory_gib: Option<u32>,
    arch: Option<Architecture>,
    disk_gib: Option<u32>,
    os: Option<String>,
    hourly: Option<Decimal>,
}

/// What this config is called in its errors.
const CONFIG: &str = "the static host list";

/// Lowercase letters, digits and `-`, starting with a letter or digit: host names, plans
/// and locations, which show in the zone and in host names.
fn is_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && !text.starts_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An IP address or a DNS name.
fn is_address(text: &str) -> bool {
    text.parse::<std::net::IpAddr>().is_ok()
        || (!text.is_empty()
            && text.len() <= 253
            && text
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')))
}

/// A POSIX user name.
fn is_user(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && text.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// An image id: letters, digits, `.`, `-`, `_`.
fn is_os(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Parses and validates a host list from JSON text.
pub fn parse_account(text: &str) -> Result<StaticAccount, ConfigError> {
    let raw: RawAccount = serde_json::from_str(text).map_err(|e| {
        // serde_json's message names the field or position; the config holds no secret.
        ConfigError::Syntax {
            config: CONFIG,
            message: e.to_string(),
        }
    })?;
    validate(raw)
}

fn validate(raw: RawAccount) -> Result<StaticAccount, ConfigError> {
    let mut errors = Vec::new();
    let mut problem = |field: &str, problem: &str| {
        errors.push(FieldError {
            field: field.to_string(),
            problem: problem.to_string(),
        });
    };
    let ssh_key = match raw.ssh_key.as_deref().map(SecretRef::parse) {
        Some(Ok(reference)) => Some(reference),
        Some(Err(e)) => {
            problem("ssh_key", &e.to_string());
            None
        }
        None => {
            problem(
                "ssh_key",
                "is missing (a secret reference such as file:///etc/orc/static-ssh-key)",
            );
            None
        }
    };
    let currency = match raw.currency.as_deref() {
        None => Some(Currency::EUR),
        Some(text) => match text.parse::<Currency>() {
            Ok(currency) if [Currency::EUR, Currency::USD].contains(&currency) => Some(currency),
            _ => {
                problem("currency", "must be EUR or USD");
                None
            }
        },
    };
    for (id, title) in &raw.locations {
        if !is_label(id) {
            problem(
                &format!("locations.{id}"),
                "a location id is lowercase letters, digits and '-'",
            );
        } else if title.trim().is_empty() || title.chars().any(char::is_control) {
            problem(&format!("locations.{id}"), "a title is one line of text");
        }
    }
    if raw.hosts.is_empty() {
        problem("hosts", "list at least one host");
    }

    let mut hosts = Vec::new();
    let mut names = BTreeSet::new();
    let mut endpoints = BTreeSet::new();
    for (i, h) in raw.hosts.into_iter().enumerate() {
        let at = |field: &str| format!("hosts[{i}].{field}");
        let before = errors.len();
        let mut problem = |field: &str, words: &str| {
            errors.push(FieldError {
                field: at(field),
                problem: words.to_string(),
            });
        };
        let name = h.name.unwrap_or_default();
        if !is_label(&name) {
            problem(
                "name",
                "is missing or not a host name (lowercase letters, digits, '-', at most 63)",
            );
        } else if !names.insert(name.clone()) {
            problem("name", "is taken by an earlier host");
        }
        let address = h.address.unwrap_or_default();
        if !is_address(&address) {
            problem("address", "is missing or not an IP address or DNS name");
        }
        let port = h.port.unwrap_or(22);
        if port == 0 {
            problem("port", "must be 1 to 65535");
        }
        if !endpoints.insert((address.clone(), port)) && is_address(&address) {
            problem("address", "another host has this address and port");
        }
        let user = h.user.unwrap_or_else(|| "root".to_string());
        if !is_user(&user) {
            problem("user", "is not a user name");
        }
        let host_key_sha256 = match h.host_key.as_deref() {
            Some(text) => match orc_ssh::fingerprint_of(text) {
                Ok(fingerprint) => fingerprint,
                Err(words) => {
                    problem("host_key", &words);
                    String::new()
                }
            },
            None => {
                problem(
                    "host_key",
                    "is missing: every host is pinned by its host key (a public key line, or its SHA256: fingerprint)",
                );
                String::new()
            }
        };
        let location = h.location.unwrap_or_default();
        if !is_label(&location) {
            problem(
                "location",
                "is missing or not a location id (lowercase letters, digits, '-')",
            );
        }
        let given_plan = h.plan.is_some();
        let plan = h.plan.unwrap_or_else(|| name.clone());
        if given_plan && !is_label(&plan) {
            problem("plan", "is not a plan id (lowercase letters, digits, '-')");
        }
        let vcpus = h.vcpus.unwrap_or(0);
        if vcpus == 0 {
            problem("vcpus", "is missing or 0");
        }
        let memory_gib = h.memory_gib.unwrap_or(0);
        if memory_gib == 0 {
            problem("memory_gib", "is missing or 0");
        }
        let os = h.os.unwrap_or_else(|| DEFAULT_OS.to_string());
        if !is_os(&os) {
            problem("os", "is not an image id (letters, digits, '.', '-', '_')");
        }
        let hourly = h.hourly.unwrap_or(Decimal::ZERO);
        if hourly.is_sign_negative() {
            problem("hourly", "must not be negative");
        }
        if errors.len() == before {
            hosts.push((
                i,
                Host {
                    name,
                    address,
                    port,
                    user,
                    host_key_sha256,
                    location,
                    plan,
                    vcpus,
                    memory_gib,
                    arch: h.arch.unwrap_or_default(),
                    disk_gib: h.disk_gib.unwrap_or(0),
                    os,
                    hourly,
                },
            ));
        }
    }
    // Hosts under one plan at one location are one offer.
    let mut offers: BTreeMap<(&str, &str), &Host> = BTreeMap::new();
    for (i, host) in &hosts {
        let first = *offers
            .entry((host.plan.as_str(), host.location.as_str()))
            .or_insert(host);
        let same = (first.vcpus, first.memory_gib, first.arch, first.disk_gib)
            == (host.vcpus, host.memory_gib, host.arch, host.disk_gib)
            && first.hourly == host.hourly
            && first.os == host.os;
        if !same {
            errors.push(FieldError {
                field: format!("hosts[{i}].plan"),
                problem: format!(
                    "host {} shares plan {} at {} with host {}, but not its shape, price or os",
                    host.name, host.plan, host.location, first.name
                ),
            });
        }
    }
    match (ssh_key, currency) {
        (Some(ssh_key), Some(currency)) if errors.is_empty() => Ok(StaticAccount {
            ssh_key,
            currency,
            location_titles: raw.locations,
            hosts: hosts.into_iter().map(|(_, h)| h).collect(),
        }),
        _ => Err(ConfigError::Fields {
            config: CONFIG,
            errors,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAWQq8X849Y6oTou0gYCXChOwpCFtuBWmQPJXt57r968";

    fn one(host: &str) -> String {
        format!(r#"{{"ssh_key":"env://STATIC_KEY","hosts":[{host}]}}"#)
    }

    #[test]
    fn a_host_gets_its_defaults_and_is_pinned_by_fingerprint() {
        let text = one(&format!(
            r#"{{"name":"lab-1","address":"192.0.2.10","host_key":"{KEY}","location":"lab","vcpus":4,"memory_gib":16}}"#
        ));
        let account = parse_account(&text).unwrap();
        assert_eq!(account.ssh_key, SecretRef::Env("STATIC_KEY".into()));
        assert_eq!(account.currency, Currency::EUR);
        let host = &account.hosts[0];
        assert_eq!((host.port, host.user.as_str()), (22, "root"));
        assert_eq!(host.plan, "lab-1");
        assert_eq!(host.os, DEFAULT_OS);
        assert_eq!(host.hourly, Decimal::ZERO);
        assert_eq!(
            host.host_key_sha256,
            "SHA256:w1aOEg/Gsn1GTuHGqg01inLQf4Ivhbq2VnmVWqldy1w"
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let text = r#"{"ssh_key":"plain-key-text","currency":"GBP","hosts":[
            {"name":"Lab 1","address":"not an address","port":0,"user":"Root!",
             "host_key":"ssh-rsa nope","location":"","vcpus":0,"memory_gib":0,
             "os":"a/b","hourly":"-1"}]}"#;
        let err = parse_account(text).unwrap_err();
        assert_eq!(
            err.fields(),
            [
                "ssh_key",
                "currency",
                "hosts[0].name",
                "hosts[0].address",
                "hosts[0].port",
                "hosts[0].user",
                "hosts[0].host_key",
                "hosts[0].location",
                "hosts[0].vcpus",
                "hosts[0].memory_gib",
                "hosts[0].os",
                "hosts[0].hourly",
            ]
        );
        assert!(
            !err.to_string().contains("plain-key-text"),
            "a bad reference is not echoed: {err}"
        );
    }

    #[test]
    fn a_host_without_a_host_key_or_a_list_without_hosts_is_refused() {
        let err = parse_account(&one(
            r#"{"name":"a","address":"10.0.0.1","location":"lab","vcpus":1,"memory_gib":1}"#,
        ))
        .unwrap_err();
        assert_eq!(err.fields(), ["hosts[0].host_key"]);
        assert!(err.to_string().contains("pinned"), "{err}");
        let err = parse_account(r#"{"ssh_key":"env://K"}"#).unwrap_err();
        assert_eq!(err.fields(), ["hosts"]);
        let err = parse_account(r#"{"ssh_key":"env://K","hosts":[],"extra":1}"#).unwrap_err();
        assert!(
            matches!(err, ConfigError::Syntax { ref message, .. } if message.contains("extra")),
            "{err}"
        );
    }

    #[test]
    fn hosts_must_not_share_a_name_or_an_endpoint_and_one_plan_is_one_shape() {
        let host = |name: &str, address: &str, vcpus: u32| {
            format!(
                r#"{{"name":"{name}","address":"{address}","host_key":"{KEY}","location":"lab","plan":"nuc","vcpus":{vcpus},"memory_gib":8}}"#
            )
        };
        let text = format!(
            r#"{{"ssh_key":"env://K","hosts":[{},{},{},{}]}}"#,
            host("a", "10.0.0.1", 4),
            host("a", "10.0.0.2", 4),
            host("b", "10.0.0.1", 4),
            host("c", "10.0.0.3", 8),
        );
        let err = parse_account(&text).unwrap_err();
        assert_eq!(
            err.fields(),
            ["hosts[1].name", "hosts[2].address", "hosts[3].plan"]
        );
        assert!(err.to_string().contains("shares plan nuc"), "{err}");
    }

    #[test]
    fn the_documented_example_config_is_valid() {
        let doc = include_str!("../../../docs/providers/static.md");
        let start = doc.find("```json\n").expect("an example") + "```json\n".len();
        let end = start + doc[start..].find("```").expect("its end");
        let account = parse_account(&doc[start..end]).unwrap();
        assert!(account.hosts.len() >= 2);
    }
}
