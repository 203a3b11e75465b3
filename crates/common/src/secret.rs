//! The one secret type of orc: a credential, API key or generated password that must never
//! reach a log line, an error, a page or a `Debug` dump.
//!
//! Invariant: the only way to read the value is [`Secret::expose`], so every place that
//! sends or writes a credential is easy to find. It is not `Serialize`: writing a secret
//! out is always an explicit `expose`.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A secret string (API token, webservice password, root password). `Debug` and `Display`
/// print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that has to send or show it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_string())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_its_value() {
        let secret = Secret::new("hunter2-token");
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(secret.to_string(), "<redacted>");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(<redacted>)");
        assert_eq!(secret.expose(), "hunter2-token");
    }

    #[test]
    fn deserializes_from_a_json_string() {
        let secret: Secret = serde_json::from_str("\"pw\"").unwrap();
        assert_eq!(secret.expose(), "pw");
        assert!(serde_json::from_str::<Secret>("12").is_err());
    }
}
