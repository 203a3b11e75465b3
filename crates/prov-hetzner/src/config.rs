//! The account a Hetzner provider serves: `{"token": "<secret ref>", "location": "fsn1"}`.
//!
//! The JSON is parsed raw (unknown fields refused) and then validated into an [`Account`];
//! every error names the field and what is wrong with it, and none carries a secret: the
//! token field holds a reference (`env://…`, `file://…`), resolved on each request.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use orc_provider_sdk::secret::SecretRef;
use serde::Deserialize;

/// The variable holding the account JSON.
pub const ACCOUNT_VAR: &str = "ORC_PARAM_ACCOUNT";
/// The variable holding the path of a file with the account JSON.
pub const ACCOUNT_FILE_VAR: &str = "ORC_PARAM_ACCOUNT_FILE";

/// A Hetzner Cloud location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HetznerLocation {
    Fsn1,
    Nbg1,
    Hel1,
    Ash,
    Hil,
    Sin,
}

impl HetznerLocation {
    /// Every location, in the order Hetzner lists them.
    pub const ALL: [HetznerLocation; 6] = [
        HetznerLocation::Fsn1,
        HetznerLocation::Nbg1,
        HetznerLocation::Hel1,
        HetznerLocation::Ash,
        HetznerLocation::Hil,
        HetznerLocation::Sin,
    ];

    /// The API's name (`fsn1`).
    pub fn as_str(self) -> &'static str {
        match self {
            HetznerLocation::Fsn1 => "fsn1",
            HetznerLocation::Nbg1 => "nbg1",
            HetznerLocation::Hel1 => "hel1",
            HetznerLocation::Ash => "ash",
            HetznerLocation::Hil => "hil",
            HetznerLocation::Sin => "sin",
        }
    }

    /// A title for people.
    pub fn title(self) -> &'static str {
        match self {
            HetznerLocation::Fsn1 => "Falkenstein, Germany",
            HetznerLocation::Nbg1 => "Nuremberg, Germany",
            HetznerLocation::Hel1 => "Helsinki, Finland",
            HetznerLocation::Ash => "Ashburn, Virginia, USA",
            HetznerLocation::Hil => "Hillsboro, Oregon, USA",
            HetznerLocation::Sin => "Singapore",
        }
    }
}

impl fmt::Display for HetznerLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HetznerLocation {
    type Err = AccountError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HetznerLocation::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| AccountError::Field {
                field: "location",
                problem: format!(
                    "{s:?} is not a Hetzner Cloud location; use one of fsn1, nbg1, hel1, ash, hil, sin"
                ),
            })
    }
}

/// A validated account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Where the API token lives; resolved before every request.
    pub token: SecretRef,
    /// The location machines go to when a request names none, and whose offers
    /// `orc-prov-hetzner offers` lists by default.
    pub location: HetznerLocation,
}

/// An account that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The JSON does not parse or has fields this provider does not know.
    #[error(
        "the Hetzner account is not valid JSON of the form {{\"token\": \"env://NAME\", \"location\": \"fsn1\"}}: {message}"
    )]
    Json { message: String },
    /// A field is missing or wrong.
    #[error("the Hetzner account's field `{field}` is invalid: {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
    /// Neither variable is set.
    #[error("no Hetzner account: set {ACCOUNT_VAR} (JSON) or {ACCOUNT_FILE_VAR} (a JSON file)")]
    Missing,
    /// The account file could not be read.
    #[error("the Hetzner account file {} could not be read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccount {
    token: Option<String>,
    location: Option<String>,
}

impl Account {
    /// Parses and validates the account JSON.
    pub fn from_json(text: &str) -> Result<Account, AccountError> {
        // serde_json's messages name fields and types, never a string value.
        let raw: RawAccount = serde_json::from_str(text).map_err(|e| AccountError::Json {
            message: e.to_string(),
        })?;
        let token = raw.token.ok_or(AccountError::Field {
            field: "token",
            problem: "missing; give a secret reference such as env://HCLOUD_TOKEN".into(),
        })?;
        let token = SecretRef::parse(&token).map_err(|e| AccountError::Field {
            field: "token",
            problem: e.to_string(),
        })?;
        let location = raw.location.ok_or(AccountError::Field {
            field: "location",
            problem: "missing; use one of fsn1, nbg1, hel1, ash, hil, sin".into(),
        })?;
        Ok(Account {
            token,
            location: location.parse()?,
        })
    }

    /// Reads the account from `ORC_PARAM_ACCOUNT` or the file named by
    /// `ORC_PARAM_ACCOUNT_FILE` (the inline value wins).
    pub fn from_env() -> Result<Account, AccountError> {
        if let Ok(text) = std::env::var(ACCOUNT_VAR) {
            return Account::from_json(&text);
        }
        let Some(path) = std::env::var_os(ACCOUNT_FILE_VAR) else {
            return Err(AccountError::Missing);
        };
        let path = PathBuf::from(path);
        let text =
            std::fs::read_to_string(&path).map_err(|source| AccountError::Read { path, source })?;
        Account::from_json(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_valid_account() {
        let account =
            Account::from_json(r#"{"token": "env://HCLOUD_TOKEN", "location": "nbg1"}"#).unwrap();
        assert_eq!(account.token, SecretRef::Env("HCLOUD_TOKEN".into()));
        assert_eq!(account.location, HetznerLocation::Nbg1);
    }

    #[test]
    fn bad_fields_are_named() {
        let bad_location =
            Account::from_json(r#"{"token": "env://T", "location": "fra1"}"#).unwrap_err();
        let words = bad_location.to_string();
        assert!(
            words.contains("`location`") && words.contains("fra1"),
            "{words}"
        );

        let raw_token =
            Account::from_json(r#"{"token": "s3cr3t-value", "location": "fsn1"}"#).unwrap_err();
        let words = raw_token.to_string();
        assert!(words.contains("`token`"), "{words}");
        assert!(!words.contains("s3cr3t-value"), "{words}");

        let vault =
            Account::from_json(r#"{"token": "vault://kv/x", "location": "fsn1"}"#).unwrap_err();
        assert!(vault.to_string().contains("`vault`"), "{vault}");

        let missing = Account::from_json(r#"{"location": "fsn1"}"#).unwrap_err();
        assert!(missing.to_string().contains("`token`"), "{missing}");

        let unknown = Account::from_json(r#"{"token": "env://T", "location": "fsn1", "tokn": 1}"#)
            .unwrap_err();
        assert!(unknown.to_string().contains("tokn"), "{unknown}");
    }
}
