//! The account a Vultr provider serves: `{"api_key": "<secret ref>", "region": "fra"}`.
//!
//! The JSON is parsed raw (unknown fields refused) and then validated into an [`Account`];
//! every error names the field and what is wrong with it, and none carries a secret: the
//! key field holds a reference (`env://…`, `file://…`), resolved on each request.

use std::path::PathBuf;

use orc_provider_sdk::secret::SecretRef;
use serde::Deserialize;

/// The variable holding the account JSON.
pub const ACCOUNT_VAR: &str = "ORC_PARAM_ACCOUNT";
/// The variable holding the path of a file with the account JSON.
pub const ACCOUNT_FILE_VAR: &str = "ORC_PARAM_ACCOUNT_FILE";

/// Vultr's regions (id, title), sorted by id.
pub const REGIONS: [(&str, &str); 32] = [
    ("ams", "Amsterdam, Netherlands"),
    ("atl", "Atlanta, USA"),
    ("blr", "Bangalore, India"),
    ("bom", "Mumbai, India"),
    ("cdg", "Paris, France"),
    ("del", "Delhi NCR, India"),
    ("dfw", "Dallas, USA"),
    ("ewr", "New Jersey, USA"),
    ("fra", "Frankfurt, Germany"),
    ("hnl", "Honolulu, USA"),
    ("icn", "Seoul, South Korea"),
    ("itm", "Osaka, Japan"),
    ("jnb", "Johannesburg, South Africa"),
    ("lax", "Los Angeles, USA"),
    ("lhr", "London, United Kingdom"),
    ("mad", "Madrid, Spain"),
    ("man", "Manchester, United Kingdom"),
    ("mel", "Melbourne, Australia"),
    ("mex", "Mexico City, Mexico"),
    ("mia", "Miami, USA"),
    ("nrt", "Tokyo, Japan"),
    ("ord", "Chicago, USA"),
    ("sao", "São Paulo, Brazil"),
    ("scl", "Santiago, Chile"),
    ("sea", "Seattle, USA"),
    ("sgp", "Singapore"),
    ("sjc", "Silicon Valley, USA"),
    ("sto", "Stockholm, Sweden"),
    ("syd", "Sydney, Australia"),
    ("tlv", "Tel Aviv, Israel"),
    ("waw", "Warsaw, Poland"),
    ("yto", "Toronto, Canada"),
];

/// A validated account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Where the API key lives; resolved before every request.
    pub api_key: SecretRef,
    /// The account's home region (one of [`REGIONS`]); `orc-prov-vultr offers` lists it by
    /// default.
    pub region: String,
}

/// An account that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The JSON does not parse or has fields this provider does not know.
    #[error(
        "the Vultr account is not JSON of the form {{\"api_key\": \"env://NAME\", \"region\": \"fra\"}}: {message}"
    )]
    Json { message: String },
    /// A field is missing or wrong.
    #[error("the Vultr account's field `{field}` is invalid: {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
    /// Neither variable is set.
    #[error("no Vultr account: set {ACCOUNT_VAR} (JSON) or {ACCOUNT_FILE_VAR} (a JSON file)")]
    Missing,
    /// The account file could not be read.
    #[error("the Vultr account file {} could not be read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccount {
    api_key: Option<String>,
    region: Option<String>,
}

/// True when `region` is one of [`REGIONS`].
pub fn is_region(region: &str) -> bool {
    REGIONS.iter().any(|(id, _)| *id == region)
}

impl Account {
    /// Parses and validates the account JSON.
    pub fn from_json(text: &str) -> Result<Account, AccountError> {
        // serde_json's messages name fields and types, never a string value.
        let raw: RawAccount = serde_json::from_str(text).map_err(|e| AccountError::Json {
            message: e.to_string(),
        })?;
        let api_key = raw.api_key.ok_or(AccountError::Field {
            field: "api_key",
            problem: "missing; give a secret reference such as env://VULTR_API_KEY".into(),
        })?;
        let api_key = SecretRef::parse(&api_key).map_err(|e| AccountError::Field {
            field: "api_key",
            problem: e.to_string(),
        })?;
        let region = raw.region.ok_or(AccountError::Field {
            field: "region",
            problem: "missing; give a Vultr region id such as fra or ewr".into(),
        })?;
        if !is_region(&region) {
            return Err(AccountError::Field {
                field: "region",
                problem: format!("{region:?} is not a Vultr region id (ams, ewr, fra, …)"),
            });
        }
        Ok(Account { api_key, region })
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
            Account::from_json(r#"{"api_key": "file:///run/secrets/vultr", "region": "ewr"}"#)
                .unwrap();
        assert_eq!(
            account.api_key,
            SecretRef::File("/run/secrets/vultr".into())
        );
        assert_eq!(account.region, "ewr");
    }

    #[test]
    fn regions_are_sorted_and_unique() {
        assert!(REGIONS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn bad_fields_are_named() {
        let bad = Account::from_json(r#"{"api_key": "env://K", "region": "fsn1"}"#).unwrap_err();
        assert!(bad.to_string().contains("`region`"), "{bad}");
        let raw = Account::from_json(r#"{"api_key": "ABCDEF123", "region": "fra"}"#).unwrap_err();
        assert!(raw.to_string().contains("`api_key`"), "{raw}");
        assert!(!raw.to_string().contains("ABCDEF123"), "{raw}");
        let missing = Account::from_json(r#"{"region": "fra"}"#).unwrap_err();
        assert!(missing.to_string().contains("`api_key`"), "{missing}");
        let unknown = Account::from_json(r#"{"api_key": "env://K", "region": "fra", "key": "x"}"#)
            .unwrap_err();
        assert!(unknown.to_string().contains("`key`"), "{unknown}");
    }
}
