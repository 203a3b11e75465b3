//! Revisions: an app with every image resolved to a digest, immutable once made, and what
//! changed from one to the next.
//!
//! A revision's digest is the SHA-256 of its canonical JSON, so the same resolved app sent
//! twice is recognised and makes no new revision.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::spec::AppSpec;

/// A workload's image as written and the digest it resolved to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResolvedImage {
    /// The reference in the app file.
    pub reference: String,
    /// The manifest digest it named when the revision was made.
    pub digest: String,
}

/// An app with its images resolved: what a revision holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedApp {
    /// The checked app.
    pub spec: AppSpec,
    /// Each workload's image, by workload name.
    pub images: BTreeMap<String, ResolvedImage>,
}

impl ResolvedApp {
    /// The SHA-256 of the canonical JSON, `sha256:<hex>`.
    pub fn digest(&self) -> String {
        // serde_json's maps are sorted, so the text is canonical.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        let hash = Sha256::digest(&bytes);
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// The image of workload `name`.
    pub fn image(&self, name: &str) -> Option<&ResolvedImage> {
        self.images.get(name)
    }

    /// How workload `name` runs, apart from how many of it: its definition and its image's
    /// digest. Two revisions with the same answer run the same containers, so instances of
    /// one serve as the other's without a restart.
    pub fn definition_of(&self, name: &str) -> Option<Value> {
        let definition = match self.spec.services.iter().find(|(n, _)| n.as_str() == name) {
            Some((_, service)) => serde_json::to_value(service),
            None => serde_json::to_value(
                self.spec
                    .workers
                    .iter()
                    .find(|(n, _)| n.as_str() == name)?
                    .1,
            ),
        };
        let mut definition = definition.ok()?;
        if let Some(fields) = definition.as_object_mut() {
            fields.remove("replicas");
        }
        Some(serde_json::json!({
            "definition": definition,
            "image": self.image(name).map(|i| i.digest.clone()),
        }))
    }
}

/// One difference between two revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The field, e.g. `services["web"].replicas`.
    pub field: String,
    /// What it was; `None` when it is new.
    pub from: Option<String>,
    /// What it becomes; `None` when it goes.
    pub to: Option<String>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.from, &self.to) {
            (None, Some(to)) => write!(f, "+ {}: {to}", self.field),
            (Some(from), None) => write!(f, "- {}: {from}", self.field),
            (Some(from), Some(to)) => write!(f, "~ {}: {from} -> {to}", self.field),
            (None, None) => write!(f, "  {}", self.field),
        }
    }
}

/// What changes from `old` (nothing deployed when `None`) to `new`: every leaf that differs,
/// in field order. Images show their reference and short digest.
pub fn diff(old: Option<&ResolvedApp>, new: &ResolvedApp) -> Vec<Change> {
    let mut before = BTreeMap::new();
    if let Some(old) = old {
        flatten(&view(old), String::new(), &mut before);
    }
    let mut after = BTreeMap::new();
    flatten(&view(new), String::new(), &mut after);
    let mut fields: Vec<&String> = before.keys().chain(after.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (from, to) = (before.get(field), after.get(field));
            (from != to).then(|| Change {
                field: field.clone(),
                from: from.cloned(),
                to: to.cloned(),
            })
        })
        .collect()
}

/// The app as JSON, each workload's `image` replaced by `reference (sha256:123456789abc)`.
fn view(app: &ResolvedApp) -> Value {
    let mut value = serde_json::to_value(&app.spec).unwrap_or(Value::Null);
    for kind in ["services", "workers"] {
        if let Some(Value::Object(workloads)) = value.get_mut(kind) {
            for (name, workload) in workloads.iter_mut() {
                if let (Some(image), Value::Object(fields)) = (app.images.get(name), workload) {
                    let short = image.digest.get(..19).unwrap_or(&image.digest);
                    fields.insert(
                        "image".into(),
                        Value::String(format!("{} ({short})", image.reference)),
                    );
                }
            }
        }
    }
    value
}

fn flatten(value: &Value, path: String, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let keyed = path.ends_with("services")
                || path.ends_with("workers")
                || path.ends_with("env")
                || path.ends_with("secretEnv")
                || path.ends_with("constraints")
                || path.ends_with("volumes")
                || path.ends_with("registries");
            for (key, child) in map {
                let next = if path.is_empty() {
                    key.clone()
                } else if keyed {
                    format!("{path}[{key:?}]")
                } else {
                    format!("{path}.{key}")
                };
                flatten(child, next, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let text: Vec<String> = items
                .iter()
                .map(|i| match i {
                    Value::String(s) => format!("{s:?}"),
                    other => other.to_string(),
                })
                .collect();
            out.insert(path, format!("[{}]", text.join(", ")));
        }
        Value::Object(_) | Value::Array(_) | Value::Null => {}
        Value::String(s) => {
            out.insert(path, s.clone());
        }
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// A deployment's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeploymentState {
    /// Accepted, not started.
    Pending,
    /// Replicas are being created or checked.
    Deploying,
    /// Every replica runs and is ready.
    Healthy,
    /// Placement or something the app needs is missing (the reason says what).
    Blocked,
    /// The rollout could not complete.
    Failed,
    /// A newer revision replaced it.
    Superseded,
}

impl DeploymentState {
    /// The state as the API and the CLI write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Pending => "PENDING",
            DeploymentState::Deploying => "DEPLOYING",
            DeploymentState::Healthy => "HEALTHY",
            DeploymentState::Blocked => "BLOCKED",
            DeploymentState::Failed => "FAILED",
            DeploymentState::Superseded => "SUPERSEDED",
        }
    }
}

impl fmt::Display for DeploymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DeploymentState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "PENDING" => DeploymentState::Pending,
            "DEPLOYING" => DeploymentState::Deploying,
            "HEALTHY" => DeploymentState::Healthy,
            "BLOCKED" => DeploymentState::Blocked,
            "FAILED" => DeploymentState::Failed,
            "SUPERSEDED" => DeploymentState::Superseded,
            other => return Err(format!("{other:?} is not a deployment state")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(replicas: u32, image: &str, digest: &str) -> ResolvedApp {
        let spec = crate::check(&serde_json::json!({
            "name": "shop",
            "services": { "web": { "image": image, "replicas": replicas, "http": { "port": 8080 } } },
        }))
        .expect("a valid app");
        ResolvedApp {
            spec,
            images: BTreeMap::from([(
                "web".to_string(),
                ResolvedImage {
                    reference: image.into(),
                    digest: digest.into(),
                },
            )]),
        }
    }

    #[test]
    fn the_same_resolved_app_has_the_same_digest() {
        let a = app(2, "acme/web:1", &format!("sha256:{}", "a".repeat(64)));
        let b = app(2, "acme/web:1", &format!("sha256:{}", "a".repeat(64)));
        assert_eq!(a.digest(), b.digest());
        let moved = app(2, "acme/web:1", &format!("sha256:{}", "b".repeat(64)));
        assert_ne!(
            a.digest(),
            moved.digest(),
            "a tag that moved is a new revision"
        );
    }

    #[test]
    fn a_diff_names_each_changed_field() {
        let a = app(2, "acme/web:1", &format!("sha256:{}", "a".repeat(64)));
        let b = app(3, "acme/web:2", &format!("sha256:{}", "b".repeat(64)));
        let lines: Vec<String> = diff(Some(&a), &b).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "~ services[\"web\"].image: acme/web:1 (sha256:aaaaaaaaaaaa) -> acme/web:2 (sha256:bbbbbbbbbbbb)",
                "~ services[\"web\"].replicas: 2 -> 3",
            ]
        );
        let first: Vec<String> = diff(None, &a).iter().map(ToString::to_string).collect();
        assert!(
            first.contains(&"+ services[\"web\"].replicas: 2".to_string()),
            "{first:?}"
        );
        assert!(diff(Some(&a), &a).is_empty());
    }

    #[test]
    fn a_workload_is_defined_alike_whatever_its_replicas() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let a = app(2, "acme/web:1", &digest);
        let more = app(5, "acme/web:1", &digest);
        assert_eq!(a.definition_of("web"), more.definition_of("web"));
        let moved = app(2, "acme/web:1", &format!("sha256:{}", "b".repeat(64)));
        assert_ne!(a.definition_of("web"), moved.definition_of("web"));
        assert_eq!(a.definition_of("db"), None);
    }
}
