//! The account config an operator gives the Robot provider, and its validation.
//!
//! The config is JSON data:
//!
//! ```json
//! {"user": "#ws+abc", "password": "env://ROBOT_PASSWORD",
//!  "rescue_key_fingerprint": "aa:bb:…", "rescue_key": "file:///run/secrets/rescue-key",
//!  "image": "Ubuntu-2404-noble-amd64-base.tar.gz",
//!  "products": {"SB-X": {"vcpus": 8, "memory_gib": 32}}, "install": "deploy"}
//! ```
//!
//! Secrets are references ([`SecretRef`]), resolved each time they are used; the config
//! itself holds no secret and may be printed. Validation reports every problem at once, each
//! naming its field.

use std::collections::BTreeMap;

use orc_cloud::RobotKeyFingerprint;
use orc_provider_sdk::config::{ConfigError, FieldError};
use orc_provider_sdk::secret::SecretRef;
use serde::Deserialize;

use crate::products::{ProductSpec, ProductTable};

/// The image installed when the config names none.
pub const DEFAULT_IMAGE: &str = "Ubuntu-2404-noble-amd64-base.tar.gz";

/// Who installs a server once the zone has it claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstallMode {
    /// The provider, during the deploy: rescue, identify, installimage with the node's join
    /// token, reboot (`"install": "deploy"`, the default).
    #[default]
    Deploy,
    /// The operator, later, with `orc-prov-robot bootstrap`; the deploy only claims the
    /// server, which stays as it is until then (`"install": "operator"`).
    Operator,
}

/// A validated account config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotAccount {
    /// The Robot webservice user.
    pub user: String,
    /// Where the webservice password lives.
    pub password: SecretRef,
    /// The fingerprint of the SSH key stored in Robot that the rescue system authorizes.
    pub rescue_key_fingerprint: RobotKeyFingerprint,
    /// Where the private half of that key lives (OpenSSH format).
    pub rescue_key: SecretRef,
    /// The installimage image file name.
    pub image: String,
    /// Product specs laid over the built-in table.
    pub products: BTreeMap<String, ProductSpec>,
    /// Who installs a claimed server.
    pub install: InstallMode,
}

impl RobotAccount {
    /// The built-in product table with this account's entries.
    pub fn product_table(&self) -> ProductTable {
        ProductTable::with_overrides(&self.products)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccount {
    user: Option<String>,
    password: Option<String>,
    rescue_key_fingerprint: Option<String>,
    rescue_key: Option<String>,
    image: Option<String>,
    #[serde(default)]
    products: BTreeMap<String, ProductSpec>,
    install: Option<String>,
}

/// What this config is called in its errors.
const CONFIG: &str = "the Robot account config";

fn is_fingerprint(text: &str) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    parts.len() == 16
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_image_name(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('.')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Parses and validates an account config from JSON text.
pub fn parse_account(text: &str) -> Result<RobotAccount, ConfigError> {
    let raw: RawAccount = serde_json::from_str(text).map_err(|e| {
        // serde_json's message names the field or position, never a value of a secret
        // reference's target: the config holds references only.
        ConfigError::Syntax {
            config: CONFIG,
            message: e.to_string(),
        }
    })?;
    validate(raw)
}

fn validate(raw: RawAccount) -> Result<RobotAccount, ConfigError> {
    let mut errors = Vec::new();
    let mut problem = |field: &str, problem: String| {
        errors.push(FieldError {
            field: field.to_string(),
            problem,
        });
    };

    let user = match raw.user.as_deref().map(str::trim) {
        Some(user) if !user.is_empty() && !user.chars().any(char::is_control) => {
            Some(user.to_string())
        }
        Some(_) => {
            problem("user", "must be a non-empty webservice user name".into());
            None
        }
        None => {
            problem("user", "is missing".into());
            None
        }
    };
    let mut secret = |field: &str, value: Option<String>| match value {
        Some(text) => match SecretRef::parse(&text) {
            Ok(reference) => Some(reference),
            Err(e) => {
                problem(field, e.to_string());
                None
            }
        },
        None => {
            problem(
                field,
                "is missing (a secret reference such as env://NAME)".into(),
            );
            None
        }
    };
    let password = secret("password", raw.password);
    let rescue_key = secret("rescue_key", raw.rescue_key);
    let fingerprint = match raw.rescue_key_fingerprint.as_deref().map(str::trim) {
        Some(text) if is_fingerprint(text) => Some(RobotKeyFingerprint(text.to_ascii_lowercase())),
        Some(_) => {
            problem(
                "rescue_key_fingerprint",
                "must be the MD5 fingerprint Robot shows (16 colon-separated hex pairs)".into(),
            );
            None
        }
        None => {
            problem("rescue_key_fingerprint", "is missing".into());
            None
        }
    };
    let image = match raw.image {
        Some(image) if is_image_name(image.trim()) => Some(image.trim().to_string()),
        Some(_) => {
            problem(
                "image",
                "must be an installimage image file name (letters, digits, '.', '-', '_')".into(),
            );
            None
        }
        None => Some(DEFAULT_IMAGE.to_string()),
    };
    let install = match raw.install.as_deref().map(str::trim) {
        None | Some("deploy") => Some(InstallMode::Deploy),
        Some("operator") => Some(InstallMode::Operator),
        Some(other) => {
            problem(
                "install",
                format!("must be \"deploy\" or \"operator\", not {other:?}"),
            );
            None
        }
    };
    for (name, spec) in &raw.products {
        if name.trim().is_empty() {
            problem("products", "a product name is empty".into());
        }
        if spec.vcpus == 0 {
            problem(
                &format!("products.{name}.vcpus"),
                "must be at least 1".into(),
            );
        }
        if spec.memory_gib == 0 {
            problem(
                &format!("products.{name}.memory_gib"),
                "must be at least 1".into(),
            );
        }
    }

    match (user, password, fingerprint, rescue_key, image, install) {
        (
            Some(user),
            Some(password),
            Some(rescue_key_fingerprint),
            Some(rescue_key),
            Some(image),
            Some(install),
        ) if errors.is_empty() => Ok(RobotAccount {
            user,
            password,
            rescue_key_fingerprint,
            rescue_key,
            image,
            products: raw.products,
            install,
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

    const GOOD: &str = r##"{"user":"#ws+demo","password":"env://ROBOT_PW",
        "rescue_key_fingerprint":"56:29:99:a4:5d:ed:ac:95:c1:f5:88:82:90:5d:dd:10",
        "rescue_key":"file:///run/secrets/rescue"}"##;

    #[test]
    fn a_good_config_gets_the_default_image() {
        let account = parse_account(GOOD).unwrap();
        assert_eq!(account.user, "#ws+demo");
        assert_eq!(account.image, DEFAULT_IMAGE);
        assert_eq!(account.password, SecretRef::Env("ROBOT_PW".into()));
        assert_eq!(account.product_table().spec("AX52").vcpus, 16);
        assert_eq!(account.install, InstallMode::Deploy);
    }

    #[test]
    fn the_install_mode_is_deploy_or_operator() {
        let with = |mode: &str| GOOD.replace('}', &format!(",\"install\":\"{mode}\"}}"));
        assert_eq!(
            parse_account(&with("operator")).unwrap().install,
            InstallMode::Operator
        );
        assert_eq!(
            parse_account(&with("deploy")).unwrap().install,
            InstallMode::Deploy
        );
        let err = parse_account(&with("later")).unwrap_err();
        assert_eq!(err.fields(), ["install"]);
        assert!(err.to_string().contains("\"later\""), "{err}");
    }

    #[test]
    fn every_bad_field_is_named() {
        let text = r#"{"user":"","password":"plain","rescue_key_fingerprint":"zz",
            "rescue_key":"vault://x","image":"../etc/passwd",
            "products":{"SB":{"vcpus":0,"memory_gib":4}}}"#;
        let err = parse_account(text).unwrap_err();
        assert_eq!(
            err.fields(),
            [
                "user",
                "password",
                "rescue_key",
                "rescue_key_fingerprint",
                "image",
                "products.SB.vcpus"
            ]
        );
        let words = err.to_string();
        assert!(words.contains("`vault`"), "{words}");
        assert!(
            !words.contains("plain"),
            "a bad reference is not echoed: {words}"
        );
    }

    #[test]
    fn missing_fields_and_unknown_fields_are_refused() {
        let err = parse_account(r#"{"user":"u"}"#).unwrap_err();
        assert_eq!(
            err.fields(),
            ["password", "rescue_key", "rescue_key_fingerprint"]
        );
        let err = parse_account(r#"{"user":"u","token":"x"}"#).unwrap_err();
        assert!(
            matches!(err, ConfigError::Syntax { ref message, .. } if message.contains("token")),
            "{err}"
        );
    }

    #[test]
    fn the_documented_example_config_is_valid() {
        let doc = include_str!("../../../docs/providers/robot.md");
        let start = doc.find("```json\n").expect("an example") + "```json\n".len();
        let end = start + doc[start..].find("```").expect("its end");
        let account = parse_account(&doc[start..end]).unwrap();
        assert_eq!(account.user, "#ws+AbCdEf");
        assert_eq!(account.product_table().spec("SB-LEGACY").vcpus, 8);
    }

    #[test]
    fn product_overrides_are_read() {
        let text = GOOD.replace(
            "\"rescue_key\":",
            r#""products":{"SB-X":{"vcpus":8,"memory_gib":32,"arch":"arm64"}},"rescue_key":"#,
        );
        let account = parse_account(&text).unwrap();
        let spec = account.product_table().spec("SB-X");
        assert_eq!((spec.vcpus, spec.memory_gib), (8, 32));
        assert_eq!(spec.arch, orc_common::Architecture::Arm64);
    }
}
