//! The reverse-DNS domain (`ptr_domain`): the zone's domain under which gateway and pool
//! addresses are named (`gw-<site>.<ptr_domain>`).
//!
//! Invariant: a parsed [`PtrDomain`] is lower case, has no trailing dot, at least two labels,
//! each 1–63 of letters, digits and dashes not starting or ending with a dash, and leaves room
//! (at most 200 characters) for the `pool-<pool id>-<site>.` label in front of it.

use super::{MapError, MapProblem, excerpt};

const MAX_LEN: usize = 200;

/// A validated reverse-DNS domain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct PtrDomain(String);

impl PtrDomain {
    /// Parses a domain such as `cloud.example.com` (a trailing dot and upper case are
    /// normalised away).
    pub fn parse(text: &str) -> Result<PtrDomain, Vec<MapError>> {
        let bad = |why: String| {
            vec![MapError {
                at: "$".to_string(),
                problem: MapProblem::BadDomain(why),
            }]
        };
        let trimmed = text.trim();
        let domain = trimmed
            .strip_suffix('.')
            .unwrap_or(trimmed)
            .to_ascii_lowercase();
        if domain.is_empty() {
            return Err(bad("is empty".to_string()));
        }
        if domain.len() > MAX_LEN {
            return Err(bad(format!("is longer than {MAX_LEN} characters")));
        }
        let labels: Vec<&str> = domain.split('.').collect();
        if labels.len() < 2 {
            return Err(bad(format!(
                "{:?} must have at least two labels, such as cloud.example.com",
                excerpt(trimmed)
            )));
        }
        for label in &labels {
            let ok_chars = label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if label.is_empty()
                || label.len() > 63
                || !ok_chars
                || label.starts_with('-')
                || label.ends_with('-')
            {
                return Err(bad(format!(
                    "label {:?} must be 1 to 63 letters, digits or dashes, not starting or ending with a dash",
                    excerpt(label)
                )));
            }
        }
        Ok(PtrDomain(domain))
    }

    /// The domain as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_rejects() {
        assert_eq!(
            PtrDomain::parse("Cloud.Example.com.").unwrap().as_str(),
            "cloud.example.com"
        );
        assert!(PtrDomain::parse("localhost").is_err());
        assert!(PtrDomain::parse("a..b").is_err());
        assert!(PtrDomain::parse("-a.example.com").is_err());
        assert!(PtrDomain::parse("a_b.example.com").is_err());
        assert!(PtrDomain::parse(&format!("{}.com", "a".repeat(64))).is_err());
    }
}
