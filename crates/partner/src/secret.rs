//! A sensitive value (a cloud API key) that never shows itself.
//!
//! Invariant: no `Debug`, log line, error or serialisation of a [`Secret`] contains any
//! character of the value. It has no `Display` and no `Serialize`; the only way to read it is
//! [`Secret::expose`], which the HTTP client calls when it signs a request.

use std::fmt;

/// A sensitive string. `Debug` prints a fixed placeholder.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a sensitive value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("hunter2-token-XYZ");
        let shown = format!("{secret:?} {secret:#?}");
        assert!(!shown.contains("hunter2"));
        assert!(!shown.contains("XYZ"));
        assert_eq!(secret.expose(), "hunter2-token-XYZ");
    }
}
