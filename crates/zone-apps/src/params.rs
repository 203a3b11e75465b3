//! How a pool's params reach its app process: pure planning, no I/O.
//!
//! The convention is the partner's (`docs/partner/params.md`), so any app can read its
//! params the same way:
//! - a plain param becomes the variable `ORC_PARAM_<NAME>` (name in upper case);
//! - a plain param whose value is JSON text (an object or an array) and every sensitive
//!   param are written to a file, and `ORC_PARAM_<NAME>_FILE` holds its path.
//!
//! Sensitive values therefore never appear in the environment (which other tools on the host
//! may read through `/proc` or print) and never in a `Debug` of the plan.

use std::collections::BTreeMap;
use std::fmt;

use orc_zone_model::AppSpec;

/// A param the zone cannot hand to an app. Never carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// The name is not made of `a-z`, `0-9` and `_` starting with a letter.
    #[error("param {name:?}: a param name is 1–64 of a-z, 0-9 and _, starting with a letter")]
    BadName { name: String },
    /// A name appears both as a plain and as a sensitive param.
    #[error("param {name}: it is set both as a plain and as a sensitive param")]
    Twice { name: String },
}

/// Text that may be secret: `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct FileText(pub String);

impl fmt::Debug for FileText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileText(<{} bytes>)", self.0.len())
    }
}

/// One param delivered as a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamFile {
    /// The param's name (`regions`).
    pub param: String,
    /// The variable that holds the file's path (`ORC_PARAM_REGIONS_FILE`).
    pub env: String,
    /// The file's name in the slot's runtime dir (`regions`).
    pub file_name: String,
    pub text: FileText,
    pub sensitive: bool,
}

/// Everything a slot needs from its pool's params.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParamPlan {
    /// Variables with inline values (plain, non-JSON params only).
    pub env: BTreeMap<String, String>,
    /// Params delivered as files, by param name.
    pub files: Vec<ParamFile>,
}

impl ParamPlan {
    /// The sensitive values, longest first, for redacting app output.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.sensitive)
            .map(|f| f.text.0.trim().to_string())
            .filter(|s| s.len() >= 4)
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        secrets
    }
}

fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether a plain value is JSON text that goes to a file: an object or array that parses.
pub fn is_json_value(value: &str) -> bool {
    let trimmed = value.trim_start();
    (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(value).is_ok()
}

/// The variable name of a param: `ORC_PARAM_` and the name in upper case.
pub fn env_name(param: &str) -> String {
    format!("ORC_PARAM_{}", param.to_ascii_uppercase())
}

/// Plans how `app`'s params reach the process. Reports every bad param, not only the first.
pub fn plan_params(app: &AppSpec) -> Result<ParamPlan, Vec<ParamError>> {
    let mut errors = Vec::new();
    let mut plan = ParamPlan::default();
    for (name, value) in &app.params {
        if !valid_name(name) {
            errors.push(ParamError::BadName { name: name.clone() });
            continue;
        }
        if app.sensitive.0.contains_key(name) {
            errors.push(ParamError::Twice { name: name.clone() });
            continue;
        }
        // A NUL byte cannot be carried by an environment variable; a file can hold it.
        if is_json_value(value) || value.contains('\0') {
            plan.files.push(ParamFile {
                param: name.clone(),
                env: format!("{}_FILE", env_name(name)),
                file_name: name.clone(),
                text: FileText(value.clone()),
                sensitive: false,
            });
        } else {
            plan.env.insert(env_name(name), value.clone());
        }
    }
    for (name, value) in &app.sensitive.0 {
        if !valid_name(name) {
            errors.push(ParamError::BadName { name: name.clone() });
            continue;
        }
        plan.files.push(ParamFile {
            param: name.clone(),
            env: format!("{}_FILE", env_name(name)),
            file_name: name.clone(),
            text: FileText(value.clone()),
            sensitive: true,
        });
    }
    plan.files.sort_by(|a, b| a.param.cmp(&b.param));
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_zone_model::SensitiveParams;

    fn app(params: &[(&str, &str)], sensitive: &[(&str, &str)]) -> AppSpec {
        let map = |items: &[(&str, &str)]| {
            items
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        AppSpec {
            package: "sys/orc-prov-partner:default".to_string(),
            digest: None,
            params: map(params),
            sensitive: SensitiveParams(map(sensitive)),
        }
    }

    #[test]
    fn plain_json_and_sensitive_params_go_where_the_convention_says() {
        let plan = plan_params(&app(
            &[
                ("partner_id", "zone-1"),
                ("regions", "{\"eu\": {}}"),
                ("note", "{not json"),
            ],
            &[("hetzner_api_token", "tok-123456")],
        ))
        .unwrap();
        assert_eq!(
            plan.env,
            BTreeMap::from([
                ("ORC_PARAM_NOTE".to_string(), "{not json".to_string()),
                ("ORC_PARAM_PARTNER_ID".to_string(), "zone-1".to_string()),
            ])
        );
        let files: Vec<_> = plan
            .files
            .iter()
            .map(|f| (f.env.as_str(), f.sensitive))
            .collect();
        assert_eq!(
            files,
            vec![
                ("ORC_PARAM_HETZNER_API_TOKEN_FILE", true),
                ("ORC_PARAM_REGIONS_FILE", false),
            ]
        );
        assert_eq!(plan.secrets(), vec!["tok-123456".to_string()]);
        let shown = format!("{plan:?}");
        assert!(!shown.contains("tok-123456"), "{shown}");
    }

    #[test]
    fn bad_names_and_doubles_are_all_reported() {
        let errors = plan_params(&app(
            &[("Bad-Name", "x"), ("key", "a")],
            &[("key", "b"), ("9lives", "c")],
        ))
        .unwrap_err();
        let words: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(words.len(), 3, "{words:?}");
        assert!(words[0].contains("\"Bad-Name\""));
        assert!(words[1].contains("param key: it is set both"));
        assert!(words[2].contains("\"9lives\""));
    }
}
