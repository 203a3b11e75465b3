//! The checker: an evaluated app file (JSON) against the schema, into a typed
//! [`AppSpec`](crate::AppSpec).
//!
//! It fills defaults, enforces every type and constraint of [`crate::schema`] and the rules
//! that span several fields, and names each problem by its [`FieldPath`]. The zone runs it
//! again on what a client sends, so a client that skipped it gains nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::schema::{Fallback, MODULE_CLASS, Ty, schema};
use crate::spec::{AppSpec, ImageRef, Protocol, RESERVED_TCP_PORTS};

/// One step into a value: a property, a mapping's key, or a listing's index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment {
    /// `.name`
    Property(String),
    /// `["key"]`
    Key(String),
    /// `[3]`
    Index(usize),
}

/// Where a value is in an app file, like `services["web"].resources.cpu`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    /// The module itself.
    pub fn root() -> Self {
        Self::default()
    }

    /// This path, one property further.
    pub fn property(&self, name: &str) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Property(name.to_string()));
        next
    }

    /// This path, one mapping key further.
    pub fn key(&self, key: &str) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Key(key.to_string()));
        next
    }

    /// This path, one listing element further.
    pub fn index(&self, index: usize) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Index(index));
        next
    }

    /// Parses the text [`fmt::Display`] writes.
    pub fn parse(text: &str) -> Option<Self> {
        let mut segments = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("[\"") {
                let end = after.find("\"]")?;
                segments.push(Segment::Key(after[..end].to_string()));
                rest = &after[end + 2..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after.find(']')?;
                segments.push(Segment::Index(after[..end].parse().ok()?));
                rest = &after[end + 1..];
            } else {
                let after = rest.strip_prefix('.').unwrap_or(rest);
                let end = after.find(['.', '[']).unwrap_or(after.len());
                if end == 0 {
                    return None;
                }
                segments.push(Segment::Property(after[..end].to_string()));
                rest = &after[end..];
            }
        }
        Some(Self(segments))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Property(name) if i == 0 => write!(f, "{name}")?,
                Segment::Property(name) => write!(f, ".{name}")?,
                Segment::Key(key) => write!(f, "[{key:?}]")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// One thing wrong with an app, at a field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    /// The field, e.g. `services["web"].replicas`; empty for the file as a whole.
    pub field: String,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// An app that did not pass: every problem found, in the order of the fields.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct Invalid {
    /// What is wrong.
    pub problems: Vec<Problem>,
}

/// Checks an evaluated app file and returns it typed, with every default filled in.
pub fn check(value: &Value) -> Result<AppSpec, Invalid> {
    let (normalized, mut problems) = normalize(value);
    if problems.is_empty() {
        match serde_json::from_value::<AppSpec>(normalized) {
            Ok(spec) => {
                cross_field(&spec, &mut problems);
                if problems.is_empty() {
                    return Ok(spec);
                }
            }
            Err(error) => problems.push(Problem {
                field: String::new(),
                message: format!("the checked app does not read back: {error}"),
            }),
        }
    }
    problems.sort();
    problems.dedup();
    Err(Invalid { problems })
}

/// The app with every default filled in and every null left out, as `pkl eval -f json`
/// renders it, and the problems found on the way. Used to compare orc with Apple's `pkl`.
pub fn normalize(value: &Value) -> (Value, Vec<Problem>) {
    let mut problems = Vec::new();
    let normalized =
        check_class(MODULE_CLASS, value, &FieldPath::root(), &mut problems).unwrap_or(Value::Null);
    (normalized, problems)
}

fn problem(problems: &mut Vec<Problem>, path: &FieldPath, message: impl Into<String>) {
    problems.push(Problem {
        field: path.to_string(),
        message: message.into(),
    });
}

fn shown(value: &Value) -> String {
    let text = match value {
        Value::Null => return "null".into(),
        Value::Bool(b) => return b.to_string(),
        Value::Number(n) => return n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => return "a listing".into(),
        Value::Object(_) => return "an object".into(),
    };
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...\"")
    } else {
        text
    }
}

fn check_class(
    class: &str,
    value: &Value,
    path: &FieldPath,
    problems: &mut Vec<Problem>,
) -> Option<Value> {
    let schema = schema();
    let Value::Object(object) = value else {
        problem(
            problems,
            path,
            format!("expected a {class} object, got {}", shown(value)),
        );
        return None;
    };
    let fields = schema.fields(class);
    let mut out = Map::new();
    for (name, _) in object {
        if !fields.iter().any(|f| f.name == name) {
            let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
            let hint = closest(name, &known)
                .map(|k| format!(" (did you mean {k}?)"))
                .unwrap_or_default();
            problem(
                problems,
                &path.property(name),
                format!("{class} has no property {name}{hint}"),
            );
        }
    }
    for field in fields {
        let here = path.property(field.name);
        match object.get(field.name) {
            Some(value) if !value.is_null() => {
                if let Some(checked) = check_value(&field.ty, value, &here, problems) {
                    out.insert(field.name.to_string(), checked);
                }
            }
            _ => match &field.default {
                Fallback::Required => problem(problems, &here, "is required"),
                Fallback::Null => {}
                Fallback::Value(value) => {
                    out.insert(field.name.to_string(), value.clone());
                }
                Fallback::Empty => {
                    let empty = match &field.ty {
                        Ty::Listing(_) => Some(Value::Array(vec![])),
                        Ty::Mapping(..) => Some(Value::Object(Map::new())),
                        Ty::Class(name) => {
                            check_class(name, &Value::Object(Map::new()), &here, problems)
                        }
                        _ => None,
                    };
                    if let Some(empty) = empty {
                        out.insert(field.name.to_string(), empty);
                    }
                }
            },
        }
    }
    Some(Value::Object(out))
}

fn check_value(
    ty: &Ty,
    value: &Value,
    path: &FieldPath,
    problems: &mut Vec<Problem>,
) -> Option<Value> {
    let wrong = |problems: &mut Vec<Problem>| {
        problem(
            problems,
            path,
            format!("expected {}, got {}", ty.words(), shown(value)),
        );
        None
    };
    match ty {
        Ty::Optional(inner) => {
            if value.is_null() {
                None
            } else {
                check_value(inner, value, path, problems)
            }
        }
        Ty::Text(check) => {
            let Value::String(text) = value else {
                return wrong(problems);
            };
            match check.test(text) {
                Ok(()) => Some(value.clone()),
                Err(why) => {
                    problem(problems, path, format!("{} {why}", shown(value)));
                    None
                }
            }
        }
        Ty::Int { min, max } => {
            let Some(number) = value.as_i64() else {
                return wrong(problems);
            };
            if number < *min || number > *max {
                problem(
                    problems,
                    path,
                    format!("{number} is out of range: from {min} to {max}"),
                );
                return None;
            }
            Some(value.clone())
        }
        Ty::Bool => value
            .is_boolean()
            .then(|| value.clone())
            .or_else(|| wrong(problems)),
        Ty::OneOf(words) => match value {
            Value::String(word) if words.contains(&word.as_str()) => Some(value.clone()),
            _ => wrong(problems),
        },
        Ty::Listing(item) => {
            let Value::Array(items) = value else {
                return wrong(problems);
            };
            let checked: Vec<Value> = items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| check_value(item, v, &path.index(i), problems))
                .collect();
            Some(Value::Array(checked))
        }
        Ty::Mapping(key_check, item) => {
            let Value::Object(entries) = value else {
                return wrong(problems);
            };
            let mut out = Map::new();
            for (key, v) in entries {
                let here = path.key(key);
                if let Err(why) = key_check.test(key) {
                    problem(
                        problems,
                        &here,
                        format!("the key {key:?} is refused: {why}"),
                    );
                    continue;
                }
                if let Some(checked) = check_value(item, v, &here, problems) {
                    out.insert(key.clone(), checked);
                }
            }
            Some(Value::Object(out))
        }
        Ty::Class(name) => check_class(name, value, path, problems),
    }
}

/// The known name closest to `name`, if it is a near miss.
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (distance(&name.to_lowercase(), &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// Rules that span several fields.
fn cross_field(spec: &AppSpec, problems: &mut Vec<Problem>) {
    let root = FieldPath::root();
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for name in spec.services.keys() {
        names.insert(name.as_str());
    }
    for name in spec.workers.keys() {
        if !names.insert(name.as_str()) {
            problem(
                problems,
                &root.property("workers").key(name.as_str()),
                "a service has the same name; services and workers share one namespace",
            );
        }
    }
    if spec.services.is_empty() && spec.workers.is_empty() {
        problem(
            problems,
            &root.property("services"),
            "the app has no services and no workers",
        );
    }
    for (kind, name, workload, path) in spec.workloads_with_paths() {
        let _ = kind;
        if let Err(why) = ImageRef::parse(&workload.image) {
            problem(problems, &path.property("image"), why.to_string());
        }
        if !workload.volumes.is_empty() && workload.replicas != 1 {
            problem(
                problems,
                &path.property("replicas"),
                format!(
                    "{} mounts a local volume, so it runs exactly 1 replica, not {}",
                    name, workload.replicas
                ),
            );
        }
        for (i, dependency) in workload.depends_on.iter().enumerate() {
            let here = path.property("dependsOn").index(i);
            if dependency.as_str() == name {
                problem(problems, &here, format!("{name} cannot depend on itself"));
            } else if !names.contains(dependency.as_str()) {
                problem(
                    problems,
                    &here,
                    format!("the app has no service or worker called {dependency}"),
                );
            }
        }
        for key in workload.secret_env.keys() {
            if workload.env.contains_key(key) {
                problem(
                    problems,
                    &path.property("secretEnv").key(key),
                    format!("{key} is also in env; set it in one place"),
                );
            }
        }
        let mut mounts: BTreeMap<&str, &str> = BTreeMap::new();
        for (volume, mount) in &workload.volumes {
            if let Some(other) = mounts.insert(mount.path.as_str(), volume.as_str()) {
                problem(
                    problems,
                    &path
                        .property("volumes")
                        .key(volume.as_str())
                        .property("path"),
                    format!("volume {other} is already mounted at {}", mount.path),
                );
            }
        }
    }
    for (name, service) in &spec.services {
        if service.http.is_some() && service.tcp.is_some() {
            problem(
                problems,
                &root.property("services").key(name.as_str()).property("tcp"),
                "a service has http or tcp, not both",
            );
        }
    }
    ingress_rules(spec, problems);
    if spec.deploy.max_surge == 0 && spec.deploy.max_unavailable == 0 {
        problem(
            problems,
            &root.property("deploy").property("maxUnavailable"),
            "maxSurge and maxUnavailable cannot both be 0: the rollout could never replace an instance",
        );
    }
    if let Some(cycle) = spec.dependency_cycle() {
        let first = cycle[0].clone();
        let path = spec.path_of(&first).property("dependsOn");
        problem(
            problems,
            &path,
            format!("dependsOn goes in a circle: {}", cycle.join(" -> ")),
        );
    }
}

/// Rules of what a service opens to the world: names, the catch-all and ports, each taken
/// once in the app; reserved ports; node ports and the rollout budget.
fn ingress_rules(spec: &AppSpec, problems: &mut Vec<Problem>) {
    let services = FieldPath::root().property("services");
    let mut domains: BTreeMap<&str, &str> = BTreeMap::new();
    let mut public: Option<&str> = None;
    let mut public_ports: BTreeMap<u16, &str> = BTreeMap::new();
    let mut node_ports: BTreeMap<(Protocol, u16), &str> = BTreeMap::new();
    for (name, service) in &spec.services {
        let name = name.as_str();
        let here = services.key(name);
        if let Some(http) = &service.http {
            let http_path = here.property("http");
            for (i, domain) in http.domains.iter().enumerate() {
                if let Some(other) = domains.insert(domain.as_str(), name) {
                    let whose = if other == name {
                        "this service".to_string()
                    } else {
                        format!("service {other}")
                    };
                    problem(
                        problems,
                        &http_path.property("domains").index(i),
                        format!("{domain} is already a domain of {whose}"),
                    );
                }
            }
            if http.public {
                match public {
                    Some(other) => problem(
                        problems,
                        &http_path.property("public"),
                        format!(
                            "service {other} is already the catch-all; an app has one public service"
                        ),
                    ),
                    None => public = Some(name),
                }
            }
            if http.private && (http.public || !http.domains.is_empty()) {
                problem(
                    problems,
                    &http_path.property("private"),
                    "a private service is reached through the access edge only: no domains, not public",
                );
            }
        }
        if service.udp.is_some() && service.http.is_none() && service.tcp.is_none() {
            problem(
                problems,
                &here.property("udp"),
                "udp needs http or tcp on the same service: that endpoint tells when an instance is ready",
            );
        }
        if let Some(port) = service.public_port() {
            let path = here.property("tcp").property("publicPort");
            if RESERVED_TCP_PORTS.contains(&port) {
                problem(problems, &path, reserved(Protocol::Tcp, port));
            } else if let Some(other) = public_ports.insert(port, name) {
                problem(
                    problems,
                    &path,
                    format!("service {other} already opens public port {port}"),
                );
            }
        }
        for (protocol, port, _) in service.node_ports() {
            let path = here.property(protocol.as_str()).property("nodePort");
            if protocol.reserved_ports().contains(&port) {
                problem(problems, &path, reserved(protocol, port));
                continue;
            }
            if let Some(other) = node_ports.insert((protocol, port), name) {
                problem(
                    problems,
                    &path,
                    format!(
                        "service {other} already publishes {protocol} port {port} on its nodes"
                    ),
                );
            }
            if protocol == Protocol::Tcp && service.public_port() == Some(port) {
                problem(
                    problems,
                    &path,
                    format!("{port} is also the service's publicPort; a port is one or the other"),
                );
            }
        }
    }
    for ((protocol, port), name) in &node_ports {
        if public_ports.contains_key(port) && *protocol == Protocol::Tcp {
            let owner = public_ports[port];
            if owner != *name {
                problem(
                    problems,
                    &services.key(name).property("tcp").property("nodePort"),
                    format!("service {owner} opens {port} as its publicPort"),
                );
            }
        }
    }
    if !node_ports.is_empty() && spec.deploy.max_surge != 0 {
        let (_, first) = node_ports.iter().next().expect("not empty");
        problem(
            problems,
            &FieldPath::root().property("deploy").property("maxSurge"),
            format!(
                "must be 0: service {first} publishes a node port, and an old instance must stop before its replacement can take the port"
            ),
        );
    }
}

fn reserved(protocol: Protocol, port: u16) -> String {
    let why = match (protocol, port) {
        (_, 53) => "the node's name server",
        (Protocol::Tcp, _) => "the ingress proxy",
        (Protocol::Udp, _) => "WireGuard",
    };
    format!("{protocol} port {port} is reserved for {why}")
}
