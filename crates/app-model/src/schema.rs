//! The schema of `orch.pkl`, written once as data.
//!
//! Three things come from this one table, so they cannot drift apart:
//! - the typed Pkl module `modulepath:/orc/App.pkl` that app files amend ([`typed_module`]);
//!   it is what editors and Apple's `pkl` read, and what `orc app schema` prints;
//! - the untyped module of the same shape that orc evaluates app files against
//!   ([`loose_module`]), so a wrong value reaches orc's own checker, which names the file,
//!   line and field, instead of stopping the evaluator with a message that names neither;
//! - that checker ([`crate::check`]): types, defaults and constraints.

use std::fmt::Write as _;
use std::sync::OnceLock;

/// The module URI an app file amends.
pub const MODULE_URI: &str = "modulepath:/orc/App.pkl";

/// A check on a piece of text: a Pkl type alias with its constraint, and the same rule in
/// Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Any text at all.
    Any,
    /// Any text that is not empty.
    NotEmpty,
    /// A DNS label: names of apps, services, workers and volumes.
    Label,
    /// An environment variable's name.
    EnvName,
    /// A stored secret's name.
    SecretName,
    /// A node label's key; the `orc.` prefix is the zone's.
    LabelKey,
    /// A node label's value.
    LabelValue,
    /// CPU: millicores (`250m`) or cores (`0.5`, `2`), more than zero.
    Cpu,
    /// Memory: bytes, or with a unit (`Ki`, `Mi`, `Gi`, `Ti`, `k`, `M`, `G`, `T`), at least 4 MiB.
    Memory,
    /// A rollout deadline: a whole number of seconds, minutes or hours (`90s`, `10m`, `1h`).
    Deadline,
    /// An absolute path inside the container.
    AbsPath,
    /// An HTTP path starting with `/`.
    HttpPath,
    /// A registry host, with an optional port.
    Host,
    /// A public domain name, fully qualified, in lower case.
    Domain,
}

impl Check {
    /// The Pkl type alias that carries this check.
    pub fn alias(self) -> &'static str {
        match self {
            Check::Any => "String",
            Check::NotEmpty => "Text",
            Check::Label => "Label",
            Check::EnvName => "EnvName",
            Check::SecretName => "SecretName",
            Check::LabelKey => "LabelKey",
            Check::LabelValue => "LabelValue",
            Check::Cpu => "Cpu",
            Check::Memory => "Memory",
            Check::Deadline => "Deadline",
            Check::AbsPath => "AbsolutePath",
            Check::HttpPath => "HttpPath",
            Check::Host => "RegistryHost",
            Check::Domain => "Domain",
        }
    }

    /// The alias's definition in Pkl.
    fn pkl(self) -> &'static str {
        match self {
            Check::Any => "String",
            Check::NotEmpty => "String(!isEmpty)",
            Check::Label => r##"String(matches(Regex(#"[a-z]([a-z0-9-]{0,61}[a-z0-9])?"#)))"##,
            Check::EnvName => r##"String(matches(Regex(#"[A-Za-z_][A-Za-z0-9_]*"#)))"##,
            Check::SecretName => r##"String(matches(Regex(#"[a-z0-9][a-z0-9._-]{0,62}"#)))"##,
            Check::LabelKey => {
                r##"String(matches(Regex(#"[a-z0-9][a-z0-9._/-]{0,62}"#)), !startsWith("orc.") || this == "orc.pool" || this == "orc.site" || this == "orc.class")"##
            }
            Check::LabelValue => r##"String(matches(Regex(#"[A-Za-z0-9._-]{0,63}"#)))"##,
            Check::Cpu => {
                r##"String(matches(Regex(#"[1-9][0-9]*m|[0-9]+(\.[0-9]{1,3})?"#)), !matches(Regex(#"0+(\.0*)?"#)))"##
            }
            Check::Memory => r##"String(matches(Regex(#"[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?"#)))"##,
            Check::Deadline => r##"String(matches(Regex(#"[1-9][0-9]*(s|m|h)"#)))"##,
            Check::AbsPath => r##"String(startsWith("/"), !contains(".."))"##,
            Check::HttpPath => r##"String(startsWith("/"), !contains(" "))"##,
            Check::Host => {
                r##"String(matches(Regex(#"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?"#)))"##
            }
            Check::Domain => {
                r##"String(length <= 253, matches(Regex(#"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?"#)), !endsWith(".internal"), !endsWith(".localhost"))"##
            }
        }
    }

    /// Whether `text` passes, and if not, why, in words.
    pub fn test(self, text: &str) -> Result<(), String> {
        let fail = |why: &str| Err(why.to_string());
        match self {
            Check::Any => Ok(()),
            Check::NotEmpty if text.is_empty() => fail("must not be empty"),
            Check::NotEmpty => Ok(()),
            Check::Label => label_rule(text),
            Check::EnvName => {
                let mut chars = text.chars();
                let first_ok = chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
                if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    Ok(())
                } else {
                    fail("must be letters, digits and _, not starting with a digit")
                }
            }
            Check::SecretName => {
                let ok = text.len() <= 63
                    && text
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && text.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                    });
                if ok {
                    Ok(())
                } else {
                    fail(
                        "must be 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
                    )
                }
            }
            Check::LabelKey => {
                if text.starts_with("orc.") && !crate::planner::ZONE_LABELS.contains(&text) {
                    return fail(
                        "the orc. prefix is reserved for the labels the zone sets: orc.pool, orc.site and orc.class",
                    );
                }
                let ok = text.len() <= 63
                    && text
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && text.chars().all(|c| {
                        c.is_ascii_lowercase()
                            || c.is_ascii_digit()
                            || matches!(c, '.' | '_' | '-' | '/')
                    });
                if ok {
                    Ok(())
                } else {
                    fail(
                        "must be 1 to 63 of a-z, 0-9, '.', '_', '-' and '/', starting with a letter or digit",
                    )
                }
            }
            Check::LabelValue => {
                if text.len() <= 63
                    && text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                {
                    Ok(())
                } else {
                    fail("must be at most 63 of A-Z, a-z, 0-9, '.', '_' and '-'")
                }
            }
            Check::Cpu => match parse_cpu(text) {
                Some(0) | None => {
                    fail("must be millicores like \"250m\" or cores like \"0.5\", more than zero")
                }
                Some(_) => Ok(()),
            },
            Check::Memory => match parse_memory(text) {
                None => fail("must be bytes or a size like \"128Mi\" or \"1Gi\""),
                Some(bytes) if bytes < 4 << 20 => fail("must be at least 4Mi"),
                Some(_) => Ok(()),
            },
            Check::Deadline => match parse_deadline(text) {
                Some(_) => Ok(()),
                None => fail(
                    "must be a whole number of seconds, minutes or hours, like \"90s\" or \"10m\"",
                ),
            },
            Check::AbsPath if !text.starts_with('/') => fail("must be an absolute path"),
            Check::AbsPath if text.contains("..") => fail("must not contain \"..\""),
            Check::AbsPath => Ok(()),
            Check::HttpPath if !text.starts_with('/') || text.contains(' ') => {
                fail("must start with / and contain no spaces")
            }
            Check::HttpPath => Ok(()),
            Check::Host => {
                let (host, port) = match text.rsplit_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (text, None),
                };
                let host_ok = !host.is_empty()
                    && !host.starts_with(['.', '-'])
                    && !host.ends_with(['.', '-'])
                    && host.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-')
                    });
                let port_ok = port.is_none_or(|p| {
                    (1..=5).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit())
                });
                if host_ok && port_ok {
                    Ok(())
                } else {
                    fail("must be a registry host in lower case, with an optional :port")
                }
            }
            Check::Domain => domain_rule(text),
        }
    }
}

/// The DNS label rule: 1–63 of `a-z`, `0-9` and `-`, starting with a letter, not ending
/// with `-`.
fn label_rule(text: &str) -> Result<(), String> {
    let ok = (1..=63).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && !text.ends_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(
            "must be 1 to 63 of a-z, 0-9 and -, starting with a letter and not ending with -"
                .into(),
        )
    }
}

/// A public domain: at most 253 characters, two or more dot-separated labels of `a-z`,
/// `0-9` and `-` (none starting or ending with `-`, the last starting with a letter), and
/// not under `internal` or `localhost`, which never reach an ingress node.
fn domain_rule(text: &str) -> Result<(), String> {
    let labels: Vec<&str> = text.split('.').collect();
    let label_ok = |label: &&str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let ok = text.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(label_ok)
        && labels
            .last()
            .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_lowercase()));
    if !ok {
        return Err(
            "must be a fully qualified domain in lower case, like \"shop.example.com\"".into(),
        );
    }
    if matches!(labels.last(), Some(&"internal" | &"localhost")) {
        return Err(
            "is not a public name: internal and localhost never reach an ingress node".into(),
        );
    }
    Ok(())
}

/// Millicores of a CPU amount: `250m` or `0.5` (at most three decimals) or `2`.
pub fn parse_cpu(text: &str) -> Option<u64> {
    if let Some(millis) = text.strip_suffix('m') {
        if millis.is_empty() || !millis.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        return millis.parse().ok();
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || fraction.len() > 3
        || !fraction.chars().all(|c| c.is_ascii_digit())
        || (text.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<3}").parse().ok()?;
    whole.checked_mul(1000)?.checked_add(fraction)
}

/// Bytes of a memory amount: `134217728`, `128Mi`, `1Gi`, `500M`.
pub fn parse_memory(text: &str) -> Option<u64> {
    let units: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((text, 1));
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// Seconds of a deadline: `90s`, `10m`, `1h`.
pub fn parse_deadline(text: &str) -> Option<u64> {
    let (number, scale) = if let Some(n) = text.strip_suffix('s') {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600)
    } else {
        return None;
    };
    if number.is_empty() || number.starts_with('0') || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// A field's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Text with a check.
    Text(Check),
    /// A whole number in a range.
    Int { min: i64, max: i64 },
    /// `true` or `false`.
    Bool,
    /// One of a few words.
    OneOf(&'static [&'static str]),
    /// A list.
    Listing(Box<Ty>),
    /// A mapping from checked text to values.
    Mapping(Check, Box<Ty>),
    /// An object of a class of this schema.
    Class(&'static str),
    /// A value or nothing.
    Optional(Box<Ty>),
}

impl Ty {
    fn pkl(&self) -> String {
        match self {
            Ty::Text(check) => check.alias().to_string(),
            Ty::Int { min, max } => format!("Int(isBetween({min}, {max}))"),
            Ty::Bool => "Boolean".into(),
            Ty::OneOf(words) => words
                .iter()
                .map(|w| format!("{w:?}"))
                .collect::<Vec<_>>()
                .join("|"),
            Ty::Listing(item) => format!("Listing<{}>", item.pkl()),
            Ty::Mapping(key, value) => format!("Mapping<{}, {}>", key.alias(), value.pkl()),
            Ty::Class(name) => (*name).to_string(),
            Ty::Optional(inner) => match **inner {
                Ty::OneOf(_) => format!("({})?", inner.pkl()),
                _ => format!("{}?", inner.pkl()),
            },
        }
    }

    /// Words for the type in an error: "an integer", "a list", ….
    pub fn words(&self) -> String {
        match self {
            Ty::Text(_) => "a string".into(),
            Ty::Int { .. } => "an integer".into(),
            Ty::Bool => "true or false".into(),
            Ty::OneOf(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
                format!("one of {}", quoted.join(", "))
            }
            Ty::Listing(_) => "a listing".into(),
            Ty::Mapping(..) => "a mapping".into(),
            Ty::Class(name) => format!("a {name} object"),
            Ty::Optional(inner) => format!("{} or null", inner.words()),
        }
    }
}

/// What a field is when the file does not set it.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    /// The file must set it.
    Required,
    /// Nothing (null, left out of the evaluated JSON).
    Null,
    /// An empty listing or mapping, or an object with its own defaults.
    Empty,
    /// A value.
    Value(serde_json::Value),
}

/// One property of a class.
#[derive(Debug, Clone)]
pub struct Field {
    /// The property's name in Pkl and JSON (camelCase).
    pub name: &'static str,
    /// One or two sentences for the schema module.
    pub doc: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Its default.
    pub default: Fallback,
    /// A Pkl constraint that involves other properties, e.g. `(this == null || http == null)`;
    /// the checker enforces the same rule in Rust.
    pub pkl_constraint: Option<&'static str>,
}

/// A class of the schema; the module itself is the class [`MODULE_CLASS`].
#[derive(Debug, Clone)]
pub struct Class {
    /// Its name.
    pub name: &'static str,
    /// What it is.
    pub doc: &'static str,
    /// The class it extends.
    pub parent: Option<&'static str>,
    /// Whether files cannot make one directly.
    pub is_abstract: bool,
    /// Its own properties (not the parent's).
    pub fields: Vec<Field>,
}

/// The class whose properties are the module's own.
pub const MODULE_CLASS: &str = "App";

/// The whole schema.
#[derive(Debug)]
pub struct Schema {
    /// Every class, the module's first.
    pub classes: Vec<Class>,
}

impl Schema {
    /// The class called `name`.
    pub fn class(&self, name: &str) -> &Class {
        self.classes
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("the schema has no class {name}"))
    }

    /// Every property of `name`, its parents' first.
    pub fn fields(&self, name: &str) -> Vec<&Field> {
        let class = self.class(name);
        let mut fields = class
            .parent
            .map(|parent| self.fields(parent))
            .unwrap_or_default();
        fields.extend(class.fields.iter());
        fields
    }
}

fn field(name: &'static str, ty: Ty, default: Fallback, doc: &'static str) -> Field {
    Field {
        name,
        doc,
        ty,
        default,
        pkl_constraint: None,
    }
}

fn text(check: Check) -> Ty {
    Ty::Text(check)
}

fn listing(item: Ty) -> Ty {
    Ty::Listing(Box::new(item))
}

fn mapping(key: Check, value: Ty) -> Ty {
    Ty::Mapping(key, Box::new(value))
}

fn optional(inner: Ty) -> Ty {
    Ty::Optional(Box::new(inner))
}

fn string(value: &str) -> Fallback {
    Fallback::Value(serde_json::Value::String(value.into()))
}

/// The restart policies.
pub const RESTART_POLICIES: &[&str] = &["always", "on-failure", "never"];

/// The schema of `orch.pkl`.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(build)
}

fn build() -> Schema {
    use Fallback::{Empty, Null, Required};
    let workload_fields = vec![
        field(
            "image",
            text(Check::NotEmpty),
            Required,
            "The OCI image: `org/name:tag` in the zone's registry, a full reference to another registry, or either pinned by `@sha256:` digest. Tags resolve to digests when a deployment is planned.",
        ),
        Field {
            pkl_constraint: Some("(volumes.isEmpty || this == 1)"),
            ..field(
                "replicas",
                Ty::Int { min: 0, max: 100 },
                Fallback::Value(1.into()),
                "How many instances run. A workload that mounts a volume runs exactly one.",
            )
        },
        field(
            "command",
            optional(listing(text(Check::NotEmpty))),
            Null,
            "Replaces the image's entry point.",
        ),
        field(
            "args",
            optional(listing(Ty::Text(Check::NotEmpty))),
            Null,
            "Replaces the image's arguments.",
        ),
        field(
            "restart",
            Ty::OneOf(RESTART_POLICIES),
            string("always"),
            "When a stopped instance starts again: always, only after a failure (a non-zero exit), or never. Restarts back off from 1 s to 5 min.",
        ),
        field(
            "resources",
            Ty::Class("Resources"),
            Empty,
            "What each instance reserves on its node and may not exceed.",
        ),
        field(
            "env",
            mapping(Check::EnvName, text(Check::NotEmpty).or_empty()),
            Empty,
            "Plain environment variables.",
        ),
        field(
            "secretEnv",
            mapping(Check::EnvName, text(Check::SecretName)),
            Empty,
            "Environment variables whose values are stored secrets, by secret name (`orc secret set NAME`).",
        ),
        field(
            "secretFiles",
            listing(text(Check::SecretName)),
            Empty,
            "Stored secrets projected as files: `/run/secrets/<name>`, on a tmpfs.",
        ),
        field(
            "dependsOn",
            listing(text(Check::Label)),
            Empty,
            "Services and workers of this app that must be ready before this one starts.",
        ),
        field(
            "constraints",
            mapping(Check::LabelKey, text(Check::LabelValue)),
            Empty,
            "Node labels a node must have, all of them, to run this workload. Nothing runs elsewhere when none has them.",
        ),
        field(
            "volumes",
            mapping(Check::Label, Ty::Class("Volume")),
            Empty,
            "Local volumes, by name: they stay on the node that first ran the workload.",
        ),
    ];
    Schema {
        classes: vec![
            Class {
                name: MODULE_CLASS,
                doc: "An orc application: services, workers and how they roll out.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "name",
                        text(Check::Label),
                        Required,
                        "The application's name, unique in its project; part of its service names (`<service>.<name>.<project>.<org>.internal`).",
                    ),
                    field(
                        "services",
                        mapping(Check::Label, Ty::Class("Service")),
                        Empty,
                        "Workloads that answer on a port, by name.",
                    ),
                    field(
                        "workers",
                        mapping(Check::Label, Ty::Class("Worker")),
                        Empty,
                        "Workloads that answer on no port, by name.",
                    ),
                    field(
                        "registries",
                        mapping(Check::Host, Ty::Class("Registry")),
                        Empty,
                        "Credentials for private registries other than the zone's, by host.",
                    ),
                    field(
                        "deploy",
                        Ty::Class("Deploy"),
                        Empty,
                        "How a new revision replaces the running one.",
                    ),
                ],
            },
            Class {
                name: "Workload",
                doc: "What services and workers share.",
                parent: None,
                is_abstract: true,
                fields: workload_fields,
            },
            Class {
                name: "Service",
                doc: "A workload that answers on a port: HTTP or TCP, not both.",
                parent: Some("Workload"),
                is_abstract: false,
                fields: vec![
                    field(
                        "http",
                        optional(Ty::Class("Http")),
                        Null,
                        "The service speaks HTTP on this port.",
                    ),
                    Field {
                        pkl_constraint: Some("(this == null || http == null)"),
                        ..field(
                            "tcp",
                            optional(Ty::Class("Tcp")),
                            Null,
                            "The service speaks TCP on this port. A service has `http` or `tcp`, not both.",
                        )
                    },
                    Field {
                        pkl_constraint: Some("(this == null || http != null || tcp != null)"),
                        ..field(
                            "udp",
                            optional(Ty::Class("Udp")),
                            Null,
                            "A UDP port published on each node that runs an instance. The service also needs `http` or `tcp`: an instance is published once that endpoint is ready (UDP itself is not probed).",
                        )
                    },
                ],
            },
            Class {
                name: "Worker",
                doc: "A workload that answers on no port.",
                parent: Some("Workload"),
                is_abstract: false,
                fields: vec![],
            },
            Class {
                name: "Resources",
                doc: "An instance's reservation and limit.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "cpu",
                        text(Check::Cpu),
                        string("100m"),
                        "CPU: millicores (`250m`) or cores (`0.5`, `2`).",
                    ),
                    field(
                        "memory",
                        text(Check::Memory),
                        string("128Mi"),
                        "Memory: `128Mi`, `1Gi`, or bytes. The instance is stopped if it uses more.",
                    ),
                ],
            },
            Class {
                name: "Http",
                doc: "An HTTP endpoint.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "port",
                        Ty::Int { min: 1, max: 65535 },
                        Required,
                        "The port the container listens on.",
                    ),
                    field(
                        "healthPath",
                        optional(text(Check::HttpPath)),
                        Null,
                        "A path that answers 2xx or 3xx when the instance is ready; asked every 2 s. Without it, readiness is a TCP connection.",
                    ),
                    field(
                        "domains",
                        listing(text(Check::Domain)),
                        Empty,
                        "Public names served on the project's ingress nodes once the service is ready: over HTTPS when the zone holds a certificate for the name, and over plain HTTP on port 80 until it does. Point each name's DNS where `orc app status` says.",
                    ),
                    field(
                        "public",
                        Ty::Bool,
                        Fallback::Value(false.into()),
                        "Makes the service the catch-all of plain HTTP on port 80 of the project's ingress nodes: every request whose name has no route of its own. One service of a project may be it.",
                    ),
                    Field {
                        pkl_constraint: Some("(!this || (domains.isEmpty && !public))"),
                        ..field(
                            "private",
                            Ty::Bool,
                            Fallback::Value(false.into()),
                            "Reached only through the zone's access edge, at `<project>--<app>-<service>` under the org's edge domain, by the project's members signed in; each request carries the edge's signed access assertion. Not with `domains` or `public`.",
                        )
                    },
                ],
            },
            Class {
                name: "Tcp",
                doc: "A TCP endpoint.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "port",
                        Ty::Int { min: 1, max: 65535 },
                        Required,
                        "The port the container listens on; readiness is a TCP connection.",
                    ),
                    Field {
                        pkl_constraint: Some("(this == null || !List(53, 80, 443).contains(this))"),
                        ..field(
                            "publicPort",
                            optional(Ty::Int { min: 1, max: 65535 }),
                            Null,
                            "A port opened on the project's ingress nodes that forwards bytes to the service's ready instances, with no HTTP or TLS. Not 53, 80 or 443.",
                        )
                    },
                    Field {
                        pkl_constraint: Some("(this == null || !List(53, 80, 443).contains(this))"),
                        ..field(
                            "nodePort",
                            optional(Ty::Int { min: 1, max: 65535 }),
                            Null,
                            "A port published on each node that runs an instance, straight to the container, which sees the client's own address. One instance per node; the app needs `maxSurge = 0`. Not 53, 80 or 443.",
                        )
                    },
                ],
            },
            Class {
                name: "Udp",
                doc: "A UDP port published on the nodes that run the service.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "port",
                        Ty::Int { min: 1, max: 65535 },
                        Required,
                        "The port the container listens on.",
                    ),
                    Field {
                        pkl_constraint: Some("(!List(53, 51820).contains(this))"),
                        ..field(
                            "nodePort",
                            Ty::Int { min: 1, max: 65535 },
                            Required,
                            "The port published on each node that runs an instance; the container sees the client's own address. One instance per node; the app needs `maxSurge = 0`. Not 53 or 51820.",
                        )
                    },
                ],
            },
            Class {
                name: "Volume",
                doc: "A local volume, kept on its node across restarts and revisions.",
                parent: None,
                is_abstract: false,
                fields: vec![field(
                    "path",
                    text(Check::AbsPath),
                    Required,
                    "Where the volume is mounted in the container.",
                )],
            },
            Class {
                name: "Registry",
                doc: "Credentials for a private registry.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "username",
                        text(Check::NotEmpty),
                        Required,
                        "The user name.",
                    ),
                    field(
                        "passwordSecret",
                        text(Check::SecretName),
                        Required,
                        "The stored secret that holds the password or token.",
                    ),
                ],
            },
            Class {
                name: "Deploy",
                doc: "How a new revision replaces the running one.",
                parent: None,
                is_abstract: false,
                fields: vec![
                    field(
                        "maxSurge",
                        Ty::Int { min: 0, max: 100 },
                        Fallback::Value(1.into()),
                        "Instances a workload may run above its replicas while it rolls.",
                    ),
                    Field {
                        pkl_constraint: Some("(this > 0 || maxSurge > 0)"),
                        ..field(
                            "maxUnavailable",
                            Ty::Int { min: 0, max: 100 },
                            Fallback::Value(0.into()),
                            "Instances a workload may run below its replicas while it rolls. Not zero when maxSurge is.",
                        )
                    },
                    field(
                        "deadline",
                        text(Check::Deadline),
                        string("10m"),
                        "How long a rollout may take before it fails.",
                    ),
                    field(
                        "autoRollback",
                        Ty::Bool,
                        Fallback::Value(false.into()),
                        "Whether a failed rollout restores the last healthy revision by itself.",
                    ),
                ],
            },
        ],
    }
}

impl Ty {
    /// Plain environment values may be empty.
    fn or_empty(self) -> Ty {
        match self {
            Ty::Text(Check::NotEmpty) => Ty::Text(Check::Any),
            other => other,
        }
    }
}

/// The typed module app files amend, as Pkl text.
pub fn typed_module() -> String {
    let schema = schema();
    let mut out = String::new();
    out.push_str("/// The schema of an orc application file (`orch.pkl`).\n///\n");
    out.push_str(
        "/// An app file starts with `amends \"modulepath:/orc/App.pkl\"`. `orc app check` and\n",
    );
    out.push_str(
        "/// `orc app deploy` evaluate it with this module; `orc app schema` prints it.\n",
    );
    out.push_str("module orc.App\n\n");
    let checks = [
        Check::NotEmpty,
        Check::Label,
        Check::EnvName,
        Check::SecretName,
        Check::LabelKey,
        Check::LabelValue,
        Check::Cpu,
        Check::Memory,
        Check::Deadline,
        Check::AbsPath,
        Check::HttpPath,
        Check::Host,
        Check::Domain,
    ];
    for check in checks {
        let _ = writeln!(out, "typealias {} = {}", check.alias(), check.pkl());
    }
    let module = schema.class(MODULE_CLASS);
    out.push('\n');
    write_fields(&mut out, &module.fields, "");
    for class in schema.classes.iter().filter(|c| c.name != MODULE_CLASS) {
        out.push('\n');
        let _ = writeln!(out, "/// {}", class.doc);
        let modifier = if class.is_abstract { "abstract " } else { "" };
        let parent = class
            .parent
            .map(|p| format!(" extends {p}"))
            .unwrap_or_default();
        let _ = writeln!(out, "{modifier}class {}{parent} {{", class.name);
        write_fields(&mut out, &class.fields, "  ");
        out.push_str("}\n");
    }
    out
}

fn write_fields(out: &mut String, fields: &[Field], indent: &str) {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for line in wrap(field.doc, 88 - indent.len() - 4) {
            let _ = writeln!(out, "{indent}/// {line}");
        }
        let constraint = field.pkl_constraint.unwrap_or("");
        let default = match &field.default {
            Fallback::Value(value) => format!(" = {value}"),
            Fallback::Required | Fallback::Null | Fallback::Empty => String::new(),
        };
        let _ = writeln!(
            out,
            "{indent}{}: {}{constraint}{default}",
            field.name,
            field.ty.pkl()
        );
    }
}

/// `text` in lines of at most `width` characters, split at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// The untyped module of the same shape that orc evaluates app files against: each property
/// is declared without its type or default, so whatever the file sets reaches the checker.
pub fn loose_module() -> String {
    let schema = schema();
    let mut out = String::from("module orc.App\n\n");
    for field in &schema.class(MODULE_CLASS).fields {
        let declared = match field.ty {
            Ty::Mapping(..) => "Mapping",
            Ty::Class(_) => "Dynamic",
            _ => "Any",
        };
        let _ = writeln!(out, "{}: {declared}", field.name);
    }
    out
}
