//! Why a provider's config was refused: the errors every provider that validates a JSON
//! config (an account, a host list) reports, so that each names its fields the same way.
//!
//! Validation reports every problem at once, each naming its field as spelled in the JSON;
//! a config whose text does not even parse gets serde's complaint instead. Neither carries a
//! secret: configs hold secret references ([`SecretRef`](crate::secret::SecretRef)), never
//! their targets.

use std::fmt;

/// One problem of a config, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as spelled in the JSON (`rescue_key`, `products.AX52.vcpus`,
    /// `hosts[1].host_key`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// Why a config was refused. `config` names the config for its reader ("the Robot account
/// config").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not a JSON object of the expected shape.
    #[error("{config} is not valid JSON of the expected shape: {message}")]
    Syntax {
        config: &'static str,
        /// serde's complaint, which names a field or a position.
        message: String,
    },
    /// One or more fields are wrong.
    #[error("{config} is invalid: {}", join(.errors))]
    Fields {
        config: &'static str,
        errors: Vec<FieldError>,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ConfigError {
    /// The fields named by this error.
    pub fn fields(&self) -> Vec<&str> {
        match self {
            ConfigError::Syntax { .. } => Vec::new(),
            ConfigError::Fields { errors, .. } => errors.iter().map(|e| e.field.as_str()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_config_and_every_field() {
        let error = ConfigError::Fields {
            config: "the test config",
            errors: vec![
                FieldError {
                    field: "user".into(),
                    problem: "is missing".into(),
                },
                FieldError {
                    field: "hosts[0].port".into(),
                    problem: "must be 1 to 65535".into(),
                },
            ],
        };
        assert_eq!(
            error.to_string(),
            "the test config is invalid: user: is missing; hosts[0].port: must be 1 to 65535"
        );
        assert_eq!(error.fields(), ["user", "hosts[0].port"]);
        let syntax = ConfigError::Syntax {
            config: "the test config",
            message: "expected value at line 1 column 1".into(),
        };
        assert_eq!(
            syntax.to_string(),
            "the test config is not valid JSON of the expected shape: expected value at line 1 column 1"
        );
        assert!(syntax.fields().is_empty());
    }
}
