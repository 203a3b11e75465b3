//! The operator's maps: region classes and sites, the OS map, the gateway shape and the
//! reverse-DNS domain.
//!
//! Each map is parsed from the JSON text of its param into a typed value, checked against
//! every rule of the partner's operator guide, and can be written back in a normalised form
//! (pretty JSON, keys in sorted order) for the admin page's Validate view. Parsers collect
//! every problem they find rather than stopping at the first, and never panic, whatever the
//! input (a property test feeds them arbitrary text).
//!
//! The built-in maps are JSON text parsed by the same parsers, so they obey the same rules.

mod gateway;
mod os;
mod ptr;
mod region;

pub use gateway::GatewayShape;
pub use os::{
    BUILTIN_OS_MAP, GATEWAY_OS_TITLE, ImagePick, ImageSelector, OsEntry, OsMap,
    gateway_image_selector,
};
pub use ptr::PtrDomain;
pub use region::{BUILTIN_REGIONS, RegionClass, RegionMap, Site};

use std::fmt;

use serde_json::Value;

/// One problem in a map, with where it is (`eu-central.sites[1]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct MapError {
    /// A path into the JSON (`$` for the whole value).
    pub at: String,
    pub problem: MapProblem,
}

/// What is wrong at one place of a map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapProblem {
    #[error("is not valid JSON ({0})")]
    NotJson(String),
    #[error("must be a JSON {expected}")]
    WrongType { expected: &'static str },
    #[error("is not a known field (known: {known})")]
    UnknownField { known: &'static str },
    #[error("is missing")]
    Missing,
    #[error("is empty")]
    Empty,
    #[error("has the key {0:?} twice")]
    DuplicateKey(String),
    #[error("{value:?} {problem}")]
    BadName { value: String, problem: NameProblem },
    #[error("site name {0:?} is also a class id")]
    SiteIsClass(String),
    #[error("site name {site:?} is used twice (first in class {first_class:?})")]
    DuplicateSite { site: String, first_class: String },
    #[error("{target} is already mapped by site {first_site:?}")]
    DuplicateLocation { target: String, first_site: String },
    #[error("must be <cloud>:<location> with cloud vultr or hetzner, not {0:?}")]
    BadTarget(String),
    #[error("must be an object with exactly one site name mapped to <cloud>:<location>")]
    SiteEntryShape,
    #[error("must have exactly one of `id` or `version`")]
    SelectorNeedsOne,
    #[error("must be one word without spaces, not {0:?}")]
    NotOneWord(String),
    #[error("has no selector for any cloud, so it would route nowhere")]
    NoSelector,
    #[error("must be a whole number from {min} to {max}")]
    OutOfRange { min: u64, max: u64 },
    #[error("{0}")]
    BadDomain(String),
    #[error("is longer than {max} characters")]
    TooLong { max: usize },
    #[error("contains a control character")]
    ControlChar,
}

/// Why a class id, site name, OS id or location is not admissible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameProblem {
    #[error("is empty")]
    Empty,
    #[error("is longer than {max} characters")]
    TooLong { max: usize },
    #[error("contains {0:?}; only {1} are allowed")]
    BadChar(char, &'static str),
    #[error("must start and end with a lowercase letter or digit")]
    BadEdge,
}

/// The longest class id, site name or OS id.
pub const MAX_NAME_LEN: usize = 40;

/// Checks a class id or site name: lowercase letters, digits and dashes, alphanumeric at both
/// ends, at most 40 characters. `allow_dot` also admits dots (OS ids such as `ubuntu-24.04`).
pub fn check_name(s: &str, allow_dot: bool) -> Result<(), NameProblem> {
    if s.is_empty() {
        return Err(NameProblem::Empty);
    }
    let allowed = if allow_dot {
        "lowercase letters, digits, dots and dashes"
    } else {
        "lowercase letters, digits and dashes"
    };
    if let Some(ch) = s.chars().find(|&c| {
        !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (allow_dot && c == '.'))
    }) {
        return Err(NameProblem::BadChar(ch, allowed));
    }
    if s.len() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong { max: MAX_NAME_LEN });
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !edge_ok(s.chars().next()) || !edge_ok(s.chars().last()) {
        return Err(NameProblem::BadEdge);
    }
    Ok(())
}

/// Collects problems while a map is parsed.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<MapError>);

impl Problems {
    pub(crate) fn push(&mut self, at: impl fmt::Display, problem: MapProblem) {
        self.0.push(MapError {
            at: at.to_string(),
            problem,
        });
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, Vec<MapError>> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(self.0)
        }
    }
}

/// Parses JSON text, reporting a syntax error as a map problem at `$` and every key that
/// appears twice in one object (JSON parsers keep only the last, which would silently lose
/// a class, a site or an OS).
pub(crate) fn parse_json(text: &str) -> Result<Value, Vec<MapError>> {
    let value = serde_json::from_str::<Value>(text).map_err(|e| {
        vec![MapError {
            at: "$".to_string(),
            problem: MapProblem::NotJson(e.to_string()),
        }]
    })?;
    let mut duplicates = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let scan = DuplicateScan {
        path: String::new(),
        duplicates: &mut duplicates,
    };
    if let Err(e) = serde::de::DeserializeSeed::deserialize(scan, &mut deserializer) {
        return Err(vec![MapError {
            at: "$".to_string(),
            problem: MapProblem::NotJson(e.to_string()),
        }]);
    }
    if duplicates.is_empty() {
        Ok(value)
    } else {
        Err(duplicates
            .into_iter()
            .map(|(at, key)| MapError {
                at,
                problem: MapProblem::DuplicateKey(key),
            })
            .collect())
    }
}

/// Walks JSON text and records `(object path, key)` for every repeated key.
struct DuplicateScan<'a> {
    path: String,
    duplicates: &'a mut Vec<(String, String)>,
}

impl DuplicateScan<'_> {
    fn at(&self) -> String {
        if self.path.is_empty() {
            "$".to_string()
        } else {
            self.path.clone()
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for DuplicateScan<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DuplicateScan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let child = DuplicateScan {
                path: format!("{}[{i}]", self.at()),
                duplicates: &mut *self.duplicates,
            };
            if seq.next_element_seed(child)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let child_path = if self.path.is_empty() {
                excerpt(&key)
            } else {
                format!("{}.{}", self.path, excerpt(&key))
            };
            if !seen.insert(key.clone()) {
                self.duplicates.push((self.at(), excerpt(&key)));
            }
            map.next_value_seed(DuplicateScan {
                path: child_path,
                duplicates: &mut *self.duplicates,
            })?;
        }
        Ok(())
    }
}

/// Shortens a value echoed in an error so a pasted megabyte does not flood a log.
pub(crate) fn excerpt(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

/// Checks a tenant-visible title: not empty, at most 80 characters, no control characters.
pub(crate) fn check_title(problems: &mut Problems, at: &str, value: Option<&Value>) -> String {
    const MAX: usize = 80;
    match value {
        None => {
            problems.push(at, MapProblem::Missing);
            String::new()
        }
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                problems.push(at, MapProblem::Empty);
            } else if t.chars().count() > MAX {
                problems.push(at, MapProblem::TooLong { max: MAX });
            } else if t.chars().any(char::is_control) {
                problems.push(at, MapProblem::ControlChar);
            }
            t.to_string()
        }
        Some(_) => {
            problems.push(at, MapProblem::WrongType { expected: "string" });
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        assert_eq!(check_name("eu-central-a", false), Ok(()));
        assert_eq!(check_name("", false), Err(NameProblem::Empty));
        assert_eq!(check_name("-a", false), Err(NameProblem::BadEdge));
        assert_eq!(check_name("a-", false), Err(NameProblem::BadEdge));
        assert!(matches!(
            check_name("Eu", false),
            Err(NameProblem::BadChar('E', _))
        ));
        assert!(matches!(
            check_name("a.b", false),
            Err(NameProblem::BadChar('.', _))
        ));
        assert_eq!(check_name("ubuntu-24.04", true), Ok(()));
        assert_eq!(check_name(&"a".repeat(40), false), Ok(()));
        assert_eq!(
            check_name(&"a".repeat(41), false),
            Err(NameProblem::TooLong { max: 40 })
        );
    }

    #[test]
    fn a_key_given_twice_is_an_error_not_a_silent_loss() {
        let errors =
            parse_json(r#"{"a": {"sites": [{"s": 1, "s": 2}], "title": "x"}, "b": 1, "a": {}}"#)
                .unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                r#"a.sites[0]: has the key "s" twice"#,
                r#"$: has the key "a" twice"#
            ]
        );
        assert!(parse_json(r#"{"a": [{"x": 1}, {"x": 2}]}"#).is_ok());
    }
}
