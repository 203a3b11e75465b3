//! The typed app: what [`crate::check`] returns. Its JSON is the evaluated file with every
//! default filled in (Pkl's camelCase names), which is what a client sends the zone.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use orc_zone_model::Name;
use serde::{Deserialize, Serialize};

use crate::check::FieldPath;
use crate::schema::{parse_cpu, parse_deadline, parse_memory};

/// An application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppSpec {
    /// Its name in the project.
    pub name: Name,
    /// Workloads that answer on a port.
    pub services: BTreeMap<Name, Service>,
    /// Workloads that answer on no port.
    pub workers: BTreeMap<Name, Workload>,
    /// Credentials for private registries, by host.
    pub registries: BTreeMap<String, Registry>,
    /// How a revision replaces the running one.
    pub deploy: Deploy,
}

/// Whether a workload is a service or a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Answers on a port.
    Service,
    /// Answers on no port.
    Worker,
}

impl WorkloadKind {
    /// `services` or `workers`, the app file's property.
    pub fn property(self) -> &'static str {
        match self {
            WorkloadKind::Service => "services",
            WorkloadKind::Worker => "workers",
        }
    }
}

impl AppSpec {
    /// Every workload, services first, each with its kind and name.
    pub fn workloads(&self) -> impl Iterator<Item = (WorkloadKind, &Name, &Workload)> {
        self.services
            .iter()
            .map(|(name, s)| (WorkloadKind::Service, name, &s.workload))
            .chain(
                self.workers
                    .iter()
                    .map(|(name, w)| (WorkloadKind::Worker, name, w)),
            )
    }

    /// The workload called `name`.
    pub fn workload(&self, name: &str) -> Option<(WorkloadKind, &Workload)> {
        self.workloads()
            .find(|(_, n, _)| n.as_str() == name)
            .map(|(kind, _, w)| (kind, w))
    }

    pub(crate) fn workloads_with_paths(
        &self,
    ) -> impl Iterator<Item = (WorkloadKind, &str, &Workload, FieldPath)> {
        self.workloads().map(|(kind, name, w)| {
            (
                kind,
                name.as_str(),
                w,
                FieldPath::root()
                    .property(kind.property())
                    .key(name.as_str()),
            )
        })
    }

    pub(crate) fn path_of(&self, name: &str) -> FieldPath {
        let kind = self
            .workload(name)
            .map_or(WorkloadKind::Service, |(kind, _)| kind);
        FieldPath::root().property(kind.property()).key(name)
    }

    /// A circle in `dependsOn`, as the names along it back to the first, if there is one.
    pub fn dependency_cycle(&self) -> Option<Vec<String>> {
        let edges: BTreeMap<&str, Vec<&str>> = self
            .workloads()
            .map(|(_, name, w)| {
                (
                    name.as_str(),
                    w.depends_on.iter().map(Name::as_str).collect(),
                )
            })
            .collect();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for start in edges.keys() {
            let mut stack: Vec<&str> = Vec::new();
            if let Some(cycle) = visit(start, &edges, &mut stack, &mut done) {
                return Some(cycle);
            }
        }
        None
    }

    /// The order workloads start in: each after what it depends on, by name otherwise.
    /// Requires a checked app (no circles).
    pub fn start_order(&self) -> Vec<Name> {
        let mut order: Vec<Name> = Vec::new();
        let mut placed: BTreeSet<&str> = BTreeSet::new();
        let all: Vec<(&Name, &Workload)> = self.workloads().map(|(_, n, w)| (n, w)).collect();
        while order.len() < all.len() {
            let before = order.len();
            for (name, workload) in &all {
                if !placed.contains(name.as_str())
                    && workload
                        .depends_on
                        .iter()
                        .all(|d| placed.contains(d.as_str()) || self.workload(d.as_str()).is_none())
                {
                    placed.insert(name.as_str());
                    order.push((*name).clone());
                }
            }
            if order.len() == before {
                break;
            }
        }
        order
    }
}

fn visit<'a>(
    node: &'a str,
    edges: &BTreeMap<&'a str, Vec<&'a str>>,
    stack: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if let Some(at) = stack.iter().position(|n| *n == node) {
        let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    stack.push(node);
    for next in edges.get(node).into_iter().flatten() {
        if let Some(cycle) = visit(next, edges, stack, done) {
            return Some(cycle);
        }
    }
    stack.pop();
    done.insert(node);
    None
}

/// A service: a workload with an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// What every workload has.
    #[serde(flatten)]
    pub workload: Workload,
    /// An HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// A TCP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// A UDP port published on the nodes that run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<Udp>,
}

impl Service {
    /// The port the service answers on.
    pub fn port(&self) -> Option<u16> {
        self.http
            .as_ref()
            .map(|h| h.port)
            .or(self.tcp.as_ref().map(|t| t.port))
    }

    /// Its public names (HTTPS on ingress nodes).
    pub fn domains(&self) -> &[String] {
        self.http.as_ref().map_or(&[], |h| h.domains.as_slice())
    }

    /// Whether it is the catch-all of plain HTTP on ingress nodes.
    pub fn is_public(&self) -> bool {
        self.http.as_ref().is_some_and(|h| h.public)
    }

    /// Whether it is reached only through the zone's access edge.
    pub fn is_private(&self) -> bool {
        self.http.as_ref().is_some_and(|h| h.private)
    }

    /// The TCP port it opens on ingress nodes.
    pub fn public_port(&self) -> Option<u16> {
        self.tcp.as_ref().and_then(|t| t.public_port)
    }

    /// The ports it publishes on the nodes that run it: (protocol, node port, container
    /// port), TCP first.
    pub fn node_ports(&self) -> Vec<(Protocol, u16, u16)> {
        let tcp = self
            .tcp
            .as_ref()
            .and_then(|t| t.node_port.map(|n| (Protocol::Tcp, n, t.port)));
        let udp = self
            .udp
            .as_ref()
            .map(|u| (Protocol::Udp, u.node_port, u.port));
        tcp.into_iter().chain(udp).collect()
    }
}

/// A transport protocol of a published port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    /// `tcp` or `udp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    /// The ports no app may publish on a node with this protocol: the node's name server
    /// (53), the ingress proxy (TCP 80 and 443) and WireGuard (UDP 51820).
    pub fn reserved_ports(self) -> &'static [u16] {
        match self {
            Protocol::Tcp => &RESERVED_TCP_PORTS,
            Protocol::Udp => &RESERVED_UDP_PORTS,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// TCP ports kept for the node's name server and the ingress proxy.
pub const RESERVED_TCP_PORTS: [u16; 3] = [53, 80, 443];
/// UDP ports kept for the node's name server and WireGuard.
pub const RESERVED_UDP_PORTS: [u16; 2] = [53, 51820];

/// What services and workers share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// The image reference as written.
    pub image: String,
    /// How many instances run.
    pub replicas: u32,
    /// Replaces the image's entry point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Replaces the image's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// When a stopped instance starts again.
    pub restart: Restart,
    /// Reservation and limit.
    pub resources: Resources,
    /// Plain environment.
    pub env: BTreeMap<String, String>,
    /// Environment from stored secrets: variable → secret name.
    pub secret_env: BTreeMap<String, String>,
    /// Secrets projected as files under `/run/secrets`.
    pub secret_files: Vec<String>,
    /// What must be ready first.
    pub depends_on: Vec<Name>,
    /// Node labels required.
    pub constraints: BTreeMap<String, String>,
    /// Local volumes.
    pub volumes: BTreeMap<Name, Volume>,
}

impl Workload {
    /// Every secret the workload reads, sorted.
    pub fn secrets(&self) -> BTreeSet<&str> {
        self.secret_env
            .values()
            .map(String::as_str)
            .chain(self.secret_files.iter().map(String::as_str))
            .collect()
    }
}

/// A restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// Whenever it stops.
    Always,
    /// When it exits with a non-zero status or is killed.
    OnFailure,
    /// Never.
    Never,
}

impl fmt::Display for Restart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Restart::Always => "always",
            Restart::OnFailure => "on-failure",
            Restart::Never => "never",
        })
    }
}

/// An instance's reservation and limit, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU, e.g. `100m` or `0.5`.
    pub cpu: String,
    /// Memory, e.g. `128Mi`.
    pub memory: String,
}

impl Resources {
    /// CPU in millicores.
    pub fn cpu_millis(&self) -> u64 {
        parse_cpu(&self.cpu).unwrap_or(0)
    }

    /// Memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        parse_memory(&self.memory).unwrap_or(0)
    }
}

/// An HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Http {
    /// The container's port.
    pub port: u16,
    /// The readiness path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
    /// Public names served on the project's ingress nodes: over HTTPS with a certificate
    /// for the name, over plain HTTP until there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    /// The project's one catch-all of plain HTTP on port 80 of its ingress nodes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub public: bool,
    /// Reached only through the zone's access edge, by the project's members signed in.
    #[serde(default, skip_serializing_if = "is_false")]
    pub private: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

/// A TCP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tcp {
    /// The container's port.
    pub port: u16,
    /// A port opened on the project's ingress nodes that forwards bytes to the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_port: Option<u16>,
    /// A port published on each node that runs a replica, straight to the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<u16>,
}

/// A UDP port, published on each node that runs a replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Udp {
    /// The container's port.
    pub port: u16,
    /// The node's port.
    pub node_port: u16,
}

/// A local volume's mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    /// Where it is mounted.
    pub path: String,
}

/// Credentials for a private registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registry {
    /// The user name.
    pub username: String,
    /// The secret that holds the password.
    pub password_secret: String,
}

/// Rollout settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deploy {
    /// Extra instances allowed while rolling.
    pub max_surge: u32,
    /// Missing instances allowed while rolling.
    pub max_unavailable: u32,
    /// How long a rollout may take, as written.
    pub deadline: String,
    /// Restore the last healthy revision when a rollout fails.
    pub auto_rollback: bool,
}

impl Deploy {
    /// The deadline in seconds.
    pub fn deadline_seconds(&self) -> u64 {
        parse_deadline(&self.deadline).unwrap_or(600)
    }
}

/// An image reference: `[host[:port]/]path[:tag][@sha256:digest]`. A reference without a
/// host names the zone's own registry (`org/name:tag`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImageRef {
    /// Another registry's host, or none for the zone's.
    pub host: Option<String>,
    /// The repository, e.g. `acme/web`.
    pub repository: String,
    /// The tag; `latest` when neither a tag nor a digest is written.
    pub tag: Option<String>,
    /// The digest, `sha256:` and 64 hex digits.
    pub digest: Option<String>,
}

/// An image reference that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reference:?} is not an image reference: {reason}")]
pub struct BadImageRef {
    /// The text.
    pub reference: String,
    /// Why.
    pub reason: &'static str,
}

impl ImageRef {
    /// Parses a reference.
    pub fn parse(reference: &str) -> Result<Self, BadImageRef> {
        let bad = |reason| BadImageRef {
            reference: reference.to_string(),
            reason,
        };
        if reference.is_empty() {
            return Err(bad("it is empty"));
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                let hex = digest
                    .strip_prefix("sha256:")
                    .ok_or_else(|| bad("a digest starts with sha256:"))?;
                if hex.len() != 64 || !hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
                    return Err(bad("a sha256 digest has 64 lower-case hex digits"));
                }
                (rest, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        let (host, path) = match rest.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (Some(first.to_string()), path)
            }
            _ => (None, rest),
        };
        let (path, tag) = match path.rsplit_once(':') {
            Some((path, tag)) => {
                let ok = (1..=128).contains(&tag.len())
                    && tag
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    && tag
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
                if !ok {
                    return Err(bad("a tag is 1 to 128 of A-Z, a-z, 0-9, '_', '.' and '-'"));
                }
                (path, Some(tag.to_string()))
            }
            None => (path, None),
        };
        if path.is_empty() {
            return Err(bad("it names no repository"));
        }
        for component in path.split('/') {
            let ok = !component.is_empty()
                && component
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && component
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && component.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                });
            if !ok {
                return Err(bad(
                    "a repository is lower-case parts of a-z, 0-9, '.', '_' and '-', split by /",
                ));
            }
        }
        if host.is_none() && path.split('/').count() != 2 {
            return Err(bad(
                "an image in the zone's registry is org/name (or name a registry host first)",
            ));
        }
        let tag = if tag.is_none() && digest.is_none() {
            Some("latest".to_string())
        } else {
            tag
        };
        Ok(Self {
            host,
            repository: path.to_string(),
            tag,
            digest,
        })
    }

    /// Whether the image is in the zone's own registry.
    pub fn is_zone_registry(&self) -> bool {
        self.host.is_none()
    }

    /// The org of an image in the zone's registry.
    pub fn org(&self) -> Option<&str> {
        self.is_zone_registry()
            .then(|| self.repository.split('/').next())
            .flatten()
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(host) = &self.host {
            write!(f, "{host}/")?;
        }
        f.write_str(&self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}
