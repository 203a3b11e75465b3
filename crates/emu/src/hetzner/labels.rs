//! Labels: the rules a label key and value must follow, and the `label_selector` query
//! language of the Hetzner Cloud API.
//!
//! Grammar of a selector: terms separated by commas, all of which must hold (AND).
//! A term is `k=v` or `k==v` (equal), `k!=v` (not equal, also true when `k` is absent),
//! `k` (present), `!k` (absent), `k in (v1,v2)` or `k notin (v1,v2)` (`notin` is also true
//! when `k` is absent). Whitespace around tokens is allowed. An empty selector matches
//! everything.
//!
//! Invariant: parsing never panics, and `parse_selector(&s.to_string()) == Ok(s)` for every
//! selector `s` the parser produced.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Longest label name (the part after an optional prefix) and longest value.
const MAX_NAME: usize = 63;
/// Longest key prefix (a DNS subdomain).
const MAX_PREFIX: usize = 253;
/// Key prefix only the platform may use.
const RESERVED_PREFIX: &str = "hetzner.cloud";

/// A parsed label selector: every term must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    pub terms: Vec<Term>,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// `k=v` / `k==v`.
    Equals(String, String),
    /// `k!=v`: true when the value differs or the key is absent.
    NotEquals(String, String),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
    /// `k in (a,b)`.
    In(String, BTreeSet<String>),
    /// `k notin (a,b)`: true when the value is none of these or the key is absent.
    NotIn(String, BTreeSet<String>),
}

/// Why a label selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("label selector has an empty term at position {0}")]
    EmptyTerm(usize),
    #[error("label selector has an invalid key '{0}'")]
    InvalidKey(String),
    #[error("label selector has an invalid value '{value}' for key '{key}'")]
    InvalidValue { key: String, value: String },
    #[error("label selector term '{0}' is not understood")]
    Syntax(String),
    #[error("label selector has unbalanced parentheses")]
    Parentheses,
}

impl Selector {
    /// Whether a resource with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|t| t.matches(labels))
    }
}

impl Term {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Term::Equals(k, v) => labels.get(k) == Some(v),
            Term::NotEquals(k, v) => labels.get(k) != Some(v),
            Term::Exists(k) => labels.contains_key(k),
            Term::NotExists(k) => !labels.contains_key(k),
            Term::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Term::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Term::Equals(k, v) => write!(f, "{k}={v}"),
            Term::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Term::Exists(k) => write!(f, "{k}"),
            Term::NotExists(k) => write!(f, "!{k}"),
            Term::In(k, vs) => write!(f, "{k} in ({})", set(vs)),
            Term::NotIn(k, vs) => write!(f, "{k} notin ({})", set(vs)),
        }
    }
}

/// Parses a `label_selector` query value.
pub fn parse_selector(input: &str) -> Result<Selector, SelectorError> {
    if input.trim().is_empty() {
        return Ok(Selector::default());
    }
    let mut terms = Vec::new();
    for (i, raw) in split_terms(input)?.into_iter().enumerate() {
        terms.push(parse_term(raw.trim(), i)?);
    }
    Ok(Selector { terms })
}

/// Splits at commas outside parentheses.
fn split_terms(input: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => {
                depth += 1;
                if depth > 1 {
                    return Err(SelectorError::Parentheses);
                }
            }
            ')' => depth = depth.checked_sub(1).ok_or(SelectorError::Parentheses)?,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Parentheses);
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_term(term: &str, position: usize) -> Result<Term, SelectorError> {
    if term.is_empty() {
        return Err(SelectorError::EmptyTerm(position));
    }
    if let Some(rest) = term.strip_prefix('!')
        && !rest.contains('=')
    {
        return Ok(Term::NotExists(key(rest.trim())?));
    }
    for (op, ctor) in [
        ("!=", Term::NotEquals as fn(String, String) -> Term),
        ("==", Term::Equals as fn(String, String) -> Term),
        ("=", Term::Equals as fn(String, String) -> Term),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            let k = key(k.trim())?;
            let v = value(&k, v.trim())?;
            return Ok(ctor(k, v));
        }
    }
    let key_end = term
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(term.len());
    let (k, rest) = term.split_at(key_end);
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Ok(Term::Exists(key(k)?));
    }
    let (notin, list) = if let Some(l) = rest.strip_prefix("notin") {
        (true, l)
    } else if let Some(l) = rest.strip_prefix("in") {
        (false, l)
    } else {
        return Err(SelectorError::Syntax(term.to_string()));
    };
    let list = list.trim();
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Syntax(term.to_string()))?;
    let k = key(k)?;
    let mut values = BTreeSet::new();
    for v in inner.split(',') {
        values.insert(value(&k, v.trim())?);
    }
    Ok(if notin {
        Term::NotIn(k, values)
    } else {
        Term::In(k, values)
    })
}

fn key(k: &str) -> Result<String, SelectorError> {
    if key_problem(k).is_some() {
        return Err(SelectorError::InvalidKey(k.to_string()));
    }
    Ok(k.to_string())
}

fn value(k: &str, v: &str) -> Result<String, SelectorError> {
    if value_problem(v).is_some() {
        return Err(SelectorError::InvalidValue {
            key: k.to_string(),
            value: v.to_string(),
        });
    }
    Ok(v.to_string())
}

/// Checks every label of a create or update request; the messages name each bad key or
/// value.
pub fn validate_labels(labels: &BTreeMap<String, String>) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for (k, v) in labels {
        if let Some(p) = key_problem(k) {
            problems.push(format!("label key '{k}' {p}"));
        } else if k.split_once('/').is_some_and(|(p, _)| p == RESERVED_PREFIX) {
            problems.push(format!(
                "label key '{k}' uses the reserved prefix '{RESERVED_PREFIX}/'"
            ));
        }
        if let Some(p) = value_problem(v) {
            problems.push(format!("label value '{v}' of key '{k}' {p}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What is wrong with a label key, if anything.
fn key_problem(k: &str) -> Option<&'static str> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > MAX_PREFIX {
            return Some("has a prefix that is empty or longer than 253 characters");
        }
        if !is_dns_subdomain(p) {
            return Some("has a prefix that is not a DNS subdomain");
        }
    }
    if name.is_empty() {
        return Some("is empty");
    }
    name_problem(name)
}

fn value_problem(v: &str) -> Option<&'static str> {
    if v.is_empty() {
        return None;
    }
    name_problem(v)
}

/// Rule shared by names and values: at most 63 characters, alphanumerics at both ends,
/// `-`, `_`, `.` and alphanumerics in between.
fn name_problem(s: &str) -> Option<&'static str> {
    if s.len() > MAX_NAME {
        return Some("is longer than 63 characters");
    }
    let bytes = s.as_bytes();
    let ends_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    let middle_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ends_ok && middle_ok {
        None
    } else {
        Some(
            "must start and end with a letter or digit and contain only letters, digits, '-', '_' and '.'",
        )
    }
}

fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let b = part.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hetzner_selector_operators_match_like_kubernetes() {
        let l = labels(&[("env", "prod"), ("tier", "web"), ("orc.dev/node", "n1")]);
        let yes = [
            "env=prod",
            "env==prod",
            "env!=dev",
            "absent!=x",
            "env",
            "!absent",
            "env in (prod, dev)",
            "env in(prod)",
            "env notin (dev,test)",
            "absent notin (x)",
            "env=prod, tier = web",
            "orc.dev/node=n1",
            "",
        ];
        for s in yes {
            assert!(parse_selector(s).unwrap().matches(&l), "{s} should match");
        }
        let no = [
            "env=dev",
            "env!=prod",
            "absent",
            "!env",
            "env in (dev,test)",
            "env notin (prod)",
            "absent in (x)",
            "env=prod,tier=db",
        ];
        for s in no {
            assert!(
                !parse_selector(s).unwrap().matches(&l),
                "{s} should not match"
            );
        }
    }

    #[test]
    fn hetzner_selector_rejects_malformed_input() {
        for s in [
            "env=prod,,x",
            "env in (a",
            "env in a)",
            "env in ((a))",
            "-bad=1",
            "env=-x",
            "env foo (a)",
            ",",
            "k=v=w",
        ] {
            assert!(parse_selector(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn hetzner_label_validation_names_each_problem() {
        assert!(validate_labels(&labels(&[("env", ""), ("a.b/c-d", "x_y.z")])).is_ok());
        let long = "a".repeat(64);
        let problems = validate_labels(&labels(&[
            ("hetzner.cloud/x", "1"),
            (long.as_str(), "1"),
            ("ok", "-bad"),
            ("Bad_Prefix/x", "1"),
        ]))
        .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("reserved")));
        assert!(problems.iter().any(|p| p.contains("-bad")));
    }

    fn key_strategy() -> impl Strategy<Value = String> {
        "([a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?/)?[a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?"
    }

    fn value_strategy() -> impl Strategy<Value = String> {
        "([a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?)?"
    }

    fn term_strategy() -> impl Strategy<Value = Term> {
        let set = proptest::collection::btree_set("[a-z0-9]{1,5}", 1..4);
        prop_oneof![
            (key_strategy(), value_strategy()).prop_map(|(k, v)| Term::Equals(k, v)),
            (key_strategy(), value_strategy()).prop_map(|(k, v)| Term::NotEquals(k, v)),
            key_strategy().prop_map(Term::Exists),
            key_strategy().prop_map(Term::NotExists),
            (key_strategy(), set.clone()).prop_map(|(k, s)| Term::In(k, s)),
            (key_strategy(), set).prop_map(|(k, s)| Term::NotIn(k, s)),
        ]
    }

    proptest! {
        #[test]
        fn hetzner_selector_parser_never_panics(s in "\\PC{0,40}") {
            let _ = parse_selector(&s);
        }

        #[test]
        fn hetzner_selector_parser_never_panics_on_selector_alphabet(s in "[a-z!=(), in]{0,30}") {
            let _ = parse_selector(&s);
        }

        #[test]
        fn hetzner_selector_round_trips(terms in proptest::collection::vec(term_strategy(), 1..5)) {
            let selector = Selector { terms };
            let text = selector.to_string();
            prop_assert_eq!(parse_selector(&text), Ok(selector));
        }

        #[test]
        fn hetzner_generated_labels_are_valid(k in key_strategy(), v in value_strategy()) {
            let l: BTreeMap<String, String> = [(k, v)].into_iter().collect();
            prop_assert!(validate_labels(&l).is_ok());
        }
    }
}
