//! References to credentials that a provider resolves each time it needs them.
//!
//! A provider's config never holds a cloud token itself: it holds a [`SecretRef`] such as
//! `env://HCLOUD_TOKEN`, `file:///run/secrets/hcloud` or `param://hcloud_token` (a
//! sensitive param the zone keeps sealed and hands the app slot as a file in its runtime
//! dir, named by `ORC_PARAM_HCLOUD_TOKEN_FILE`), and the provider calls
//! [`SecretRef::resolve`] before every request. Rotating a token is then a matter of
//! changing the variable or the file; no restart is needed.
//!
//! Invariants: a resolved [`Secret`] never prints its content (`Debug` and `Display`
//! write `<redacted>`), and no error of this module carries the value either; errors name
//! the variable or the path, never what they hold.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use orc_common::Secret;

/// The schemes a [`SecretRef`] accepts, in the words of error messages.
pub const ACCEPTED_SCHEMES: &str = "env://NAME, file:///absolute/path, param://name";

/// Where a secret lives. Parsed from `env://NAME`, `file:///absolute/path` or
/// `param://name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretRef {
    /// An environment variable of the provider process.
    Env(String),
    /// A file on the provider's host; one trailing line break is not part of the secret.
    File(PathBuf),
    /// A sensitive param of the provider's app pool: the file the zone's app runner names in
    /// `ORC_PARAM_<NAME>_FILE`.
    Param(String),
}

/// A secret reference that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    /// The reference has no `scheme://` prefix.
    #[error("secret reference has no scheme; accepted: {ACCEPTED_SCHEMES}")]
    MissingScheme,
    /// The scheme is not one this module knows.
    #[error("secret reference scheme `{scheme}` is not supported; accepted: {ACCEPTED_SCHEMES}")]
    UnknownScheme { scheme: String },
    /// `env://` without a usable variable name.
    #[error("secret reference env://{name} does not name an environment variable")]
    BadEnvName { name: String },
    /// `param://` without a usable param name.
    #[error("secret reference param://{name} does not name a param (lowercase letters, digits, _)")]
    BadParamName { name: String },
    /// `file://` with a path that is not absolute.
    #[error("secret reference file://{path} must be an absolute path (file:///...)")]
    RelativePath { path: String },
}

/// A secret that could not be read when it was needed.
#[derive(Debug, thiserror::Error)]
pub enum SecretResolveError {
    /// The environment variable is unset or not UTF-8.
    #[error("environment variable {name} holding a secret is not set")]
    EnvMissing { name: String },
    /// The file could not be read.
    #[error("secret file {} could not be read", path.display())]
    FileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("secret file {} is not UTF-8 text", path.display())]
    FileNotText { path: PathBuf },
    /// The secret resolved to nothing.
    #[error("secret from {reference} is empty")]
    Empty { reference: String },
}

impl SecretRef {
    /// Parses `env://NAME` or `file:///absolute/path`.
    pub fn parse(reference: &str) -> Result<Self, SecretRefError> {
        let reference = reference.trim();
        let Some((scheme, rest)) = reference.split_once("://") else {
            return Err(SecretRefError::MissingScheme);
        };
        match scheme {
            "env" => {
                let valid = !rest.is_empty()
                    && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !rest.starts_with(|c: char| c.is_ascii_digit());
                if valid {
                    Ok(SecretRef::Env(rest.to_string()))
                } else {
                    Err(SecretRefError::BadEnvName {
                        name: rest.to_string(),
                    })
                }
            }
            "file" => {
                let path = PathBuf::from(rest);
                if path.is_absolute() {
                    Ok(SecretRef::File(path))
                } else {
                    Err(SecretRefError::RelativePath {
                        path: rest.to_string(),
                    })
                }
            }
            "param" => {
                let valid = !rest.is_empty()
                    && rest
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if valid {
                    Ok(SecretRef::Param(rest.to_string()))
                } else {
                    Err(SecretRefError::BadParamName {
                        name: rest.to_string(),
                    })
                }
            }
            other => Err(SecretRefError::UnknownScheme {
                scheme: other.to_string(),
            }),
        }
    }

    /// Reads the secret now. Called before every use, so a rotated secret takes effect on
    /// the next request.
    pub fn resolve(&self) -> Result<Secret, SecretResolveError> {
        let value = match self {
            SecretRef::Env(name) => std::env::var(name)
                .map_err(|_| SecretResolveError::EnvMissing { name: name.clone() })?,
            SecretRef::Param(name) => {
                let var = format!("ORC_PARAM_{}_FILE", name.to_ascii_uppercase());
                let path =
                    std::env::var_os(&var).ok_or(SecretResolveError::EnvMissing { name: var })?;
                return SecretRef::File(PathBuf::from(path)).resolve();
            }
            SecretRef::File(path) => {
                let bytes =
                    std::fs::read(path).map_err(|source| SecretResolveError::FileUnreadable {
                        path: path.clone(),
                        source,
                    })?;
                let mut text = String::from_utf8(bytes)
                    .map_err(|_| SecretResolveError::FileNotText { path: path.clone() })?;
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                text
            }
        };
        if value.is_empty() {
            return Err(SecretResolveError::Empty {
                reference: self.to_string(),
            });
        }
        Ok(Secret::new(value))
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Env(name) => write!(f, "env://{name}"),
            SecretRef::File(path) => write!(f, "file://{}", path.display()),
            SecretRef::Param(name) => write!(f, "param://{name}"),
        }
    }
}

impl FromStr for SecretRef {
    type Err = SecretRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SecretRef::parse(s)
    }
}

impl TryFrom<String> for SecretRef {
    type Error = SecretRefError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        SecretRef::parse(&value)
    }
}

impl From<SecretRef> for String {
    fn from(value: SecretRef) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_schemes_and_prints_them_back() {
        let env = SecretRef::parse("env://HCLOUD_TOKEN").unwrap();
        assert_eq!(env, SecretRef::Env("HCLOUD_TOKEN".into()));
        assert_eq!(env.to_string(), "env://HCLOUD_TOKEN");
        let file = SecretRef::parse("file:///run/secrets/token").unwrap();
        assert_eq!(file, SecretRef::File(PathBuf::from("/run/secrets/token")));
        assert_eq!(file.to_string(), "file:///run/secrets/token");
    }

    #[test]
    fn unknown_scheme_is_named_with_the_accepted_ones() {
        let err = SecretRef::parse("vault://kv/hcloud").unwrap_err();
        assert_eq!(
            err,
            SecretRefError::UnknownScheme {
                scheme: "vault".into()
            }
        );
        let words = err.to_string();
        assert!(words.contains("`vault`"), "{words}");
        assert!(
            words.contains("env://") && words.contains("file://"),
            "{words}"
        );
        assert_eq!(
            SecretRef::parse("plain-token").unwrap_err(),
            SecretRefError::MissingScheme
        );
    }

    #[test]
    fn a_param_reference_reads_the_file_the_app_runner_names() {
        let reference = SecretRef::parse("param://orc_secret_test_param").unwrap();
        assert_eq!(reference.to_string(), "param://orc_secret_test_param");
        let err = reference.resolve().unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable ORC_PARAM_ORC_SECRET_TEST_PARAM_FILE holding a secret is not set"
        );
        assert!(matches!(
            SecretRef::parse("param://Bad-Name"),
            Err(SecretRefError::BadParamName { .. })
        ));
    }

    #[test]
    fn rejects_relative_paths_and_bad_variable_names() {
        assert!(matches!(
            SecretRef::parse("file://relative/token"),
            Err(SecretRefError::RelativePath { .. })
        ));
        assert!(matches!(
            SecretRef::parse("env://"),
            Err(SecretRefError::BadEnvName { .. })
        ));
        assert!(matches!(
            SecretRef::parse("env://BAD-NAME"),
            Err(SecretRefError::BadEnvName { .. })
        ));
    }

    #[test]
    fn file_secret_is_read_on_each_use_without_its_trailing_newline() {
        let dir = std::env::temp_dir().join(format!("orc-secret-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first-token\n").unwrap();
        let reference = SecretRef::parse(&format!("file://{}", path.display())).unwrap();
        assert_eq!(reference.resolve().unwrap().expose(), "first-token");
        std::fs::write(&path, "second-token\r\n").unwrap();
        assert_eq!(reference.resolve().unwrap().expose(), "second-token");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(
            reference.resolve(),
            Err(SecretResolveError::Empty { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        let err = reference.resolve().unwrap_err();
        assert!(matches!(err, SecretResolveError::FileUnreadable { .. }));
        assert!(err.to_string().contains("token"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_variable_names_the_variable() {
        let reference = SecretRef::parse("env://ORC_SECRET_TEST_SURELY_UNSET_VARIABLE").unwrap();
        let err = reference.resolve().unwrap_err();
        assert!(
            err.to_string()
                .contains("ORC_SECRET_TEST_SURELY_UNSET_VARIABLE"),
            "{err}"
        );
    }

    #[test]
    fn value_never_prints_its_content() {
        let value = Secret::new("hunter2-token");
        assert_eq!(format!("{value:?}"), "<redacted>");
        assert_eq!(value.to_string(), "<redacted>");
        assert_eq!(format!("{:?}", Some(value.clone())), "Some(<redacted>)");
        assert_eq!(value.expose(), "hunter2-token");
    }
}
