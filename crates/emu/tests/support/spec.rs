//! The published API descriptions as validators.
//!
//! Loads the subsets in `tests/openapi/` (extracted from the official descriptions by
//! `tests/openapi/extract.py`; Robot's is hand-written), applies the documented overrides of
//! `tests/openapi/overrides.json`, makes every object schema closed, and compiles the
//! response schema of an operation and status into a JSON Schema 2020-12 validator.
//!
//! Invariants:
//! - A response is checked against the entry of its operation for its exact status, else
//!   the status range (`4XX`), else `default`, else the API's common responses from
//!   `overrides.json`. A status none of these covers is a finding.
//! - Object schemas that declare `properties` and say nothing about other members get
//!   `unevaluatedProperties: false`: a key the description does not know is a finding (the
//!   emulator must not invent fields, and must not keep fields the API removed).
//! - `format` is asserted (`date-time`, plus Hetzner's `decimal` for price strings).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jsonschema::{Draft, Validator};
use serde_json::{Map, Value, json};

/// Which API a description belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flavor {
    Hetzner,
    Vultr,
    Robot,
}

impl Flavor {
    fn key(self) -> &'static str {
        match self {
            Flavor::Hetzner => "hetzner",
            Flavor::Vultr => "vultr",
            Flavor::Robot => "robot",
        }
    }

    fn file(self) -> &'static str {
        match self {
            Flavor::Hetzner => "hetzner-cloud.json",
            Flavor::Vultr => "vultr-v2.json",
            Flavor::Robot => "robot.json",
        }
    }

    fn subset(self) -> &'static str {
        match self {
            Flavor::Hetzner => include_str!("../openapi/hetzner-cloud.json"),
            Flavor::Vultr => include_str!("../openapi/vultr-v2.json"),
            Flavor::Robot => include_str!("../openapi/robot.json"),
        }
    }
}

const OVERRIDES: &str = include_str!("../openapi/overrides.json");

/// One operation of a description: `(method, path template)`, e.g. `("post", "/servers")`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Operation {
    pub method: String,
    pub template: String,
}

/// What the description says a response with a given status carries.
#[derive(Debug, Clone)]
pub enum Expected {
    /// A JSON body matching this schema (a pointer into the document).
    Json(String),
    /// No body.
    Empty,
}

/// A loaded, patched description with a cache of compiled validators.
pub struct Spec {
    pub flavor: Flavor,
    doc: Value,
    error_envelope: Option<Value>,
    common_responses: BTreeMap<String, String>,
    validators: Mutex<BTreeMap<String, Arc<Validator>>>,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec")
            .field("flavor", &self.flavor)
            .finish()
    }
}

/// Why loading a description failed (the committed data is broken).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}: not JSON: {source}")]
    Json {
        file: &'static str,
        source: serde_json::Error,
    },
    #[error("override {index} ({op} {path}) of {api}: {problem}")]
    Override {
        api: &'static str,
        index: usize,
        op: String,
        path: String,
        problem: String,
    },
    #[error("overrides.json: {0}")]
    Overrides(String),
}

impl Spec {
    /// Loads the subset of `flavor`, applies its overrides and closes its object schemas.
    pub fn load(flavor: Flavor) -> Result<Spec, SpecError> {
        let mut doc: Value =
            serde_json::from_str(flavor.subset()).map_err(|source| SpecError::Json {
                file: "subset",
                source,
            })?;
        let overrides: Value =
            serde_json::from_str(OVERRIDES).map_err(|source| SpecError::Json {
                file: "overrides.json",
                source,
            })?;
        let mine = overrides.get(flavor.key());
        let mut error_envelope = None;
        let mut common_responses = BTreeMap::new();
        if let Some(mine) = mine {
            let patches = mine
                .get("patches")
                .and_then(Value::as_array)
                .ok_or_else(|| SpecError::Overrides(format!("{}.patches missing", flavor.key())))?;
            for (index, patch) in patches.iter().enumerate() {
                apply_patch(&mut doc, patch).map_err(|(op, path, problem)| {
                    SpecError::Override {
                        api: flavor.key(),
                        index,
                        op,
                        path,
                        problem,
                    }
                })?;
            }
            error_envelope = mine.get("error_envelope").filter(|v| !v.is_null()).cloned();
            if let Some(map) = mine.get("common_responses").and_then(Value::as_object) {
                for (status, why) in map {
                    common_responses.insert(status.clone(), why.as_str().unwrap_or("").into());
                }
            }
        }
        close_objects(&mut doc, false);
        Ok(Spec {
            flavor,
            doc,
            error_envelope,
            common_responses,
            validators: Mutex::new(BTreeMap::new()),
        })
    }

    /// Every operation of the subset, sorted.
    pub fn operations(&self) -> Vec<Operation> {
        let mut out = Vec::new();
        if let Some(paths) = self.doc.get("paths").and_then(Value::as_object) {
            for (template, item) in paths {
                if let Some(item) = item.as_object() {
                    for method in item.keys() {
                        out.push(Operation {
                            method: method.clone(),
                            template: template.clone(),
                        });
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// What a response of `method template` with `status` must look like.
    pub fn expected(&self, method: &str, template: &str, status: u16) -> Result<Expected, String> {
        let method = method.to_ascii_lowercase();
        let op_ptr = format!("/paths/{}/{}", escape(template), method);
        let responses = self
            .doc
            .pointer(&format!("{op_ptr}/responses"))
            .and_then(Value::as_object)
            .ok_or_else(|| {
                format!(
                    "{} {template} is not in the description",
                    method.to_uppercase()
                )
            })?;
        let exact = status.to_string();
        let range = format!("{}xx", status / 100);
        let range_upper = format!("{}XX", status / 100);
        let key = [
            exact.as_str(),
            range.as_str(),
            range_upper.as_str(),
            "default",
        ]
        .into_iter()
        .find(|k| responses.contains_key(*k));
        let Some(key) = key else {
            if self.common_responses.contains_key(&exact) {
                return self.error_body(status);
            }
            let documented: Vec<&String> = responses.keys().collect();
            return Err(format!(
                "status {status} is not documented for {} {template} (documented: {documented:?})",
                method.to_uppercase()
            ));
        };
        let entry = &responses[key];
        if entry.get("schema").is_some() {
            return Ok(Expected::Json(format!(
                "{op_ptr}/responses/{}/schema",
                escape(key)
            )));
        }
        if status >= 400 {
            return self.error_body(status);
        }
        Ok(Expected::Empty)
    }

    fn error_body(&self, status: u16) -> Result<Expected, String> {
        if self.error_envelope.is_some() {
            Ok(Expected::Json("#error_envelope".into()))
        } else {
            Err(format!(
                "status {status}: the description documents no error body for this API"
            ))
        }
    }

    /// The schema of this API's error responses (used for unknown routes, where no
    /// operation applies). Hetzner's description repeats one error schema under every
    /// operation's `4xx`; the first operation's stands for all.
    pub fn error_schema_pointer(&self) -> String {
        match self.flavor {
            Flavor::Hetzner => {
                let ops = self.operations();
                let first = ops.first().map(|o| (o.method.clone(), o.template.clone()));
                match first {
                    Some((m, t)) => format!("/paths/{}/{}/responses/4xx/schema", escape(&t), m),
                    None => "#error_envelope".into(),
                }
            }
            Flavor::Vultr => "#error_envelope".into(),
            Flavor::Robot => "/components/schemas/error".into(),
        }
    }

    /// Validates `body` against the schema at `pointer` (from [`Spec::expected`]); returns
    /// one line per violation, naming the location in the body.
    pub fn validate(&self, pointer: &str, body: &Value) -> Vec<String> {
        let validator = match self.validator(pointer) {
            Ok(v) => v,
            Err(e) => return vec![format!("schema at {pointer} does not compile: {e}")],
        };
        validator
            .iter_errors(body)
            .take(12)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                let mut msg = e.to_string();
                if msg.len() > 300 {
                    let cut = (0..=300)
                        .rev()
                        .find(|i| msg.is_char_boundary(*i))
                        .unwrap_or(0);
                    msg.truncate(cut);
                    msg.push('…');
                }
                format!("{at}: {msg}")
            })
            .collect()
    }

    fn validator(&self, pointer: &str) -> Result<Arc<Validator>, String> {
        let mut cache = self
            .validators
            .lock()
            .map_err(|_| "validator cache poisoned".to_string())?;
        if let Some(v) = cache.get(pointer) {
            return Ok(v.clone());
        }
        let schema = if pointer == "#error_envelope" {
            let mut env = self
                .error_envelope
                .clone()
                .ok_or_else(|| "no error envelope for this API".to_string())?;
            close_objects(&mut env, false);
            env
        } else {
            self.doc
                .pointer(pointer)
                .cloned()
                .ok_or_else(|| format!("no schema at {pointer}"))?
        };
        let root = rooted(schema, self.doc.get("components"));
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .should_validate_formats(true)
            .with_format("decimal", is_decimal)
            .build(&root)
            .map_err(|e| e.to_string())?;
        let validator = Arc::new(validator);
        cache.insert(pointer.to_string(), validator.clone());
        Ok(validator)
    }
}

/// Makes `schema` a standalone root in which `#/components/schemas/...` resolves.
fn rooted(schema: Value, components: Option<&Value>) -> Value {
    let mut root = match schema {
        Value::Object(map) => map,
        Value::Bool(b) => {
            let mut m = Map::new();
            if !b {
                m.insert("not".into(), json!({}));
            }
            m
        }
        _ => Map::new(),
    };
    if let Some(components) = components {
        root.insert("components".into(), components.clone());
    }
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    Value::Object(root)
}

/// A decimal number written as a string, as Hetzner writes prices (`"5.4900000000"`).
fn is_decimal(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

/// JSON-pointer escaping of one path segment.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

type PatchError = (String, String, String);

fn apply_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let op = patch
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let path = patch
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let fail = |problem: &str| (op.clone(), path.clone(), problem.to_string());
    if patch
        .get("why")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        || patch
            .get("source")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        return Err(fail("every override needs a non-empty `why` and `source`"));
    }
    let (parent_ptr, last) = path
        .rsplit_once('/')
        .ok_or_else(|| fail("not a JSON pointer"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = doc
        .pointer_mut(parent_ptr)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| fail("the parent of the target does not exist"))?;
    match op.as_str() {
        "add" => {
            let value = patch
                .get("value")
                .cloned()
                .ok_or_else(|| fail("no value"))?;
            parent.insert(last, value);
        }
        "replace" => {
            let value = patch
                .get("value")
                .cloned()
                .ok_or_else(|| fail("no value"))?;
            let slot = parent
                .get_mut(&last)
                .ok_or_else(|| fail("the target does not exist"))?;
            *slot = value;
        }
        "remove" => {
            parent
                .remove(&last)
                .ok_or_else(|| fail("the target does not exist"))?;
        }
        _ => return Err(fail("unknown op (add, replace, remove)")),
    }
    Ok(())
}

/// Adds `unevaluatedProperties: false` to every object schema that lists `properties` and
/// does not already say what other members may be. Members of an `allOf` are left open
/// (each sees only its own properties); the `allOf` parent is closed instead.
fn close_objects(node: &mut Value, in_all_of: bool) {
    match node {
        Value::Object(map) => {
            let composes = map.contains_key("allOf");
            let open_ended = map.contains_key("additionalProperties")
                || map.contains_key("unevaluatedProperties")
                || map.contains_key("patternProperties");
            if !in_all_of && !open_ended && (map.contains_key("properties") || composes) {
                map.insert("unevaluatedProperties".into(), Value::Bool(false));
            }
            for (key, child) in map.iter_mut() {
                match key.as_str() {
                    "properties" | "patternProperties" | "$defs" | "schemas" | "paths"
                    | "responses" => {
                        if let Value::Object(members) = child {
                            for member in members.values_mut() {
                                close_objects(member, false);
                            }
                        }
                    }
                    "allOf" => {
                        if let Value::Array(items) = child {
                            for item in items {
                                close_objects(item, true);
                            }
                        }
                    }
                    "enum" | "const" | "default" | "required" | "x-source" => {}
                    _ => close_objects(child, false),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                close_objects(item, false);
            }
        }
        _ => {}
    }
}
