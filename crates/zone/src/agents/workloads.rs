//! Each node's workloads: what the zone assigns it (the replicas placed on it, from their
//! apps' revisions) and what it reports back.
//!
//! A session looks at its node's assignment every [`WORKLOAD_POLL`] and sends it whole when
//! it changed, with a generation taken from the zone's clock (so it only grows, also
//! across zone restarts) and a fresh registry pull grant. The node reports each replica's
//! phase, readiness and restarts; the rollouts ([`crate::rollouts`]) take it from there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use orc_app_model::revision::{DeploymentState, ResolvedApp};
use orc_app_model::spec::Restart;
use orc_proto::agent_pb;
use sha2::Digest as _;

use super::AgentHub;
use crate::model::{Name, NodeId, ProjectId};
use crate::store::{AppRevisionRow, ReadyReplica, StoreError};

/// How often a session checks its node's assignment when nothing says it changed.
pub(super) const WORKLOAD_POLL: Duration = Duration::from_secs(2);

/// Says that nodes' assignments may have changed (a rollout step, a replica's readiness and
/// so a service name's addresses): every session looks at its node's at once.
#[derive(Debug, Clone)]
pub struct AssignmentSignal(std::sync::Arc<tokio::sync::watch::Sender<u64>>);

impl Default for AssignmentSignal {
    fn default() -> Self {
        AssignmentSignal(std::sync::Arc::new(tokio::sync::watch::channel(0).0))
    }
}

impl AssignmentSignal {
    /// Tells every session.
    pub fn changed(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// How long a pull grant lasts; it is sent again with every assignment and refreshed well
/// before it ends.
const GRANT_LIFETIME_MS: i64 = 3_600_000;

/// Which replica of which app an id on the node stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReplicaKey {
    project: ProjectId,
    app: Name,
    workload: String,
    slot: u32,
}

/// What a node's assignment says of the network.
struct NodeNetwork {
    subnet: ipnet::Ipv4Net,
    nameserver: std::net::Ipv4Addr,
    /// `<project>.<org>.internal`.
    domain: String,
    services: Vec<agent_pb::ServiceName>,
}

/// A node's assignment as last computed.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeWorkloads {
    /// The message, without its generation and grant.
    pub message: agent_pb::Workloads,
    /// What identifies its content.
    pub digest: String,
    /// Replica ids on the node and what they stand for.
    pub keys: BTreeMap<String, ReplicaKey>,
    /// The org whose images the node pulls.
    pub org: Option<crate::model::OrgId>,
}

fn restart_word(restart: Restart) -> &'static str {
    match restart {
        Restart::Always => "always",
        Restart::OnFailure => "on-failure",
        Restart::Never => "never",
    }
}

impl AgentHub {
    /// The assignment of `node` now.
    pub(super) async fn node_workloads(&self, node: &NodeId) -> Result<NodeWorkloads, StoreError> {
        let store = &self.inner.store;
        let rows = store.app_replicas_of_node(node).await?;
        let mut documents: BTreeMap<(ProjectId, Name, u64), Option<ResolvedApp>> = BTreeMap::new();
        let mut out = NodeWorkloads::default();
        // An ingress node serves its project's routes, with or without replicas of its own.
        let ingress = store.node_ingress(node).await?;
        let project = match rows.first() {
            Some((project, ..)) => Some(project.clone()),
            None if ingress => self.project_of(node).await?,
            None => None,
        };
        // The project's apps and ready replicas, read once for its names and its routes.
        let apps = match &project {
            Some(project) => Some(ProjectApps::read(store, project).await?),
            None => None,
        };
        if let Some(apps) = apps.as_ref().filter(|_| ingress) {
            out.message.ingress = Some(apps.ingress(store, self.now()).await?);
        }
        // The node's subnet, its replicas' addresses, and the project's names.
        let network = match (&project, &apps) {
            (Some(project), Some(apps)) => self.network(node, project, apps).await?,
            _ => None,
        };
        let addresses = match &network {
            Some(net) => store.assign_replica_addresses(node, net.subnet).await?,
            None => BTreeMap::new(),
        };
        if let Some(net) = &network {
            out.message.subnet = net.subnet.to_string();
            out.message.nameserver = net.nameserver.to_string();
            out.message.services = net.services.clone();
        }
        for (project, app, workload, slot, revision) in rows {
            let key = (project.clone(), app.clone(), revision);
            if !documents.contains_key(&key) {
                let row = store.app_revision(&project, &app, revision).await?;
                let document = row.and_then(|r| serde_json::from_str(&r.document).ok());
                documents.insert(key.clone(), document);
            }
            let Some(Some(document)) = documents.get(&key) else {
                continue;
            };
            let Some((_, spec)) = document.spec.workload(&workload) else {
                continue;
            };
            let Some(image) = document.image(&workload) else {
                continue;
            };
            if out.org.is_none() {
                out.org = Some(store.get_project(&project).await?.org_id);
            }
            let reference = orc_app_model::ImageRef::parse(&image.reference).ok();
            let repository = reference
                .as_ref()
                .map(|r| r.repository.clone())
                .unwrap_or_default();
            // An image of another registry: its URL, and the login the app gives for it.
            let (mut registry_url, mut registry_username, mut registry_password) =
                (String::new(), String::new(), String::new());
            if let Some(host) = reference.as_ref().and_then(|r| r.host.as_deref()) {
                registry_url = orc_runtime::registry::base_url(host);
                if let Some(login) = document.spec.registries.get(host)
                    && let Some(password) = self.secret(&project, &login.password_secret).await?
                {
                    registry_username = login.username.clone();
                    registry_password = password;
                }
            }
            let mut secret_env = BTreeMap::new();
            let mut secret_files = BTreeMap::new();
            for (variable, secret) in &spec.secret_env {
                if let Some(value) = self.secret(&project, secret).await? {
                    secret_env.insert(variable.clone(), value);
                }
            }
            for secret in &spec.secret_files {
                if let Some(value) = self.secret(&project, secret).await? {
                    secret_files.insert(secret.clone(), value);
                }
            }
            let service = document
                .spec
                .services
                .iter()
                .find(|(name, _)| name.as_str() == workload)
                .map(|(_, service)| service);
            let probe = match service.map(|s| (&s.http, &s.tcp)) {
                Some((Some(http), _)) => agent_pb::Probe {
                    kind: if http.health_path.is_some() {
                        "http"
                    } else {
                        "tcp"
                    }
                    .into(),
                    port: u32::from(http.port),
                    path: http.health_path.clone().unwrap_or_default(),
                },
                Some((None, Some(tcp))) => agent_pb::Probe {
                    kind: "tcp".into(),
                    port: u32::from(tcp.port),
                    path: String::new(),
                },
                // A worker, or a service with no endpoint: ready while it runs.
                _ => agent_pb::Probe {
                    kind: "none".into(),
                    ..Default::default()
                },
            };
            let id = format!("{app}-{workload}-{slot}");
            let address = addresses
                .get(&(project.clone(), app.clone(), workload.clone(), slot))
                .map(ToString::to_string)
                .unwrap_or_default();
            if address.is_empty() && network.is_some() {
                tracing::warn!(%node, %app, workload, slot, "the node's workload subnet is full: the replica runs without an address");
            }
            let dns_search = network
                .as_ref()
                .map(|n| format!("{app}.{}", n.domain))
                .unwrap_or_default();
            let node_ports = service
                .map(|s| s.node_ports())
                .unwrap_or_default()
                .into_iter()
                .map(|(protocol, port, container_port)| agent_pb::NodePort {
                    protocol: protocol.as_str().into(),
                    port: u32::from(port),
                    container_port: u32::from(container_port),
                })
                .collect();
            out.message.replicas.push(agent_pb::Replica {
                id: id.clone(),
                app: app.to_string(),
                workload: workload.clone(),
                revision,
                digest: image.digest.clone(),
                repository,
                command: spec.command.clone().unwrap_or_default(),
                has_command: spec.command.is_some(),
                args: spec.args.clone().unwrap_or_default(),
                has_args: spec.args.is_some(),
                env: spec.env.clone().into_iter().collect(),
                secret_env,
                secret_files,
                volumes: spec
                    .volumes
                    .iter()
                    .map(|(name, volume)| (name.to_string(), volume.path.clone()))
                    .collect(),
                restart: restart_word(spec.restart).into(),
                cpu_millis: spec.resources.cpu_millis(),
                memory_bytes: spec.resources.memory_bytes(),
                address,
                probe: Some(probe),
                dns_search,
                registry_url,
                registry_username,
                registry_password,
                node_ports,
            });
            out.keys.insert(
                id,
                ReplicaKey {
                    project,
                    app,
                    workload,
                    slot,
                },
            );
        }
        out.message.registry_url = self.inner.options.registry_url.clone().unwrap_or_default();
        let bytes = prost::Message::encode_to_vec(&out.message);
        let hash = sha2::Sha256::digest(&bytes);
        out.digest = hash.iter().map(|b| format!("{b:02x}")).collect();
        Ok(out)
    }

    /// The network of `node`, a node of `project`: its workload subnet (from its mesh
    /// address), its mesh address (where it answers names), its project's domain and
    /// service names. `None` without a workload range or a mesh address.
    async fn network(
        &self,
        node: &NodeId,
        project: &ProjectId,
        apps: &ProjectApps,
    ) -> Result<Option<NodeNetwork>, StoreError> {
        let Some(range) = self.inner.options.workloads else {
            return Ok(None);
        };
        let store = &self.inner.store;
        let Some(prefix) = store.mesh_prefixes().await?.get(project).copied() else {
            return Ok(None);
        };
        let members = store.mesh_members_of(project).await?;
        let Some(member) = members.iter().find(|m| m.id == node.as_str()) else {
            return Ok(None);
        };
        let Some(subnet) = range.node_subnet(prefix, member.address) else {
            return Ok(None);
        };
        let row = store.get_project(project).await?;
        let org = store.get_org(&row.org_id).await?;
        let domain = format!("{}.{}.internal", row.name, org.name);
        // Every service of the project's apps, with its ready replicas' addresses.
        let mut services: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (app, document) in &apps.apps {
            for name in document.spec.services.keys() {
                services.insert(format!("{name}.{}.{domain}", app.app), Vec::new());
            }
        }
        for ready in &apps.ready {
            let name = format!("{}.{}.{domain}", ready.workload, ready.app);
            if let Some(list) = services.get_mut(&name) {
                list.push(ready.address.to_string());
            }
        }
        Ok(Some(NodeNetwork {
            subnet,
            nameserver: member.address,
            domain,
            services: services
                .into_iter()
                .map(|(name, addresses)| agent_pb::ServiceName { name, addresses })
                .collect(),
        }))
    }

    /// The project of `node`, through its pool.
    async fn project_of(&self, node: &NodeId) -> Result<Option<ProjectId>, StoreError> {
        let store = &self.inner.store;
        let record = match store.get_node(node).await {
            Ok(record) => record,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(store.get_pool(&record.pool_id).await?.project_id))
    }

    async fn secret(&self, project: &ProjectId, name: &str) -> Result<Option<String>, StoreError> {
        let Ok(name) = name.parse() else {
            return Ok(None);
        };
        Ok(self
            .inner
            .store
            .secret_value(project, &name)
            .await?
            .map(|value| value.to_string()))
    }

    /// The message to send `node`: `workloads` with a generation and a fresh pull grant.
    pub(super) fn workloads_message(
        &self,
        node: &NodeId,
        workloads: &NodeWorkloads,
        generation: u64,
    ) -> agent_pb::Workloads {
        let mut message = workloads.message.clone();
        message.generation = generation;
        if let Some(org) = &workloads.org {
            let expires = self.now().plus_millis(GRANT_LIFETIME_MS);
            message.registry_token = self.inner.options.pull_key.grant(org, node, expires);
        }
        message
    }

    /// Records what `node` reports of its replicas (a report of another revision than the
    /// slot now runs is ignored) and wakes the rollouts when anything changed.
    pub(super) async fn record_workload_status(
        &self,
        node: &NodeId,
        status: agent_pb::WorkloadStatus,
        keys: &BTreeMap<String, ReplicaKey>,
    ) {
        let now = self.now();
        let mut touched = false;
        for replica in status.replicas {
            let Some(key) = keys.get(&replica.id) else {
                continue;
            };
            let changed = self
                .inner
                .store
                .report_app_replica(
                    node,
                    &key.project,
                    &key.app,
                    &key.workload,
                    key.slot,
                    replica.revision,
                    &replica.phase,
                    replica.ready,
                    replica.restarts,
                    Some(replica.message.as_str()),
                    now,
                )
                .await;
            match changed {
                Ok(true) => touched = true,
                Ok(false) => {}
                Err(error) => tracing::warn!(%node, %error, "a replica's report was not recorded"),
            }
        }
        if touched {
            self.inner.options.rollouts.wake();
            // Readiness moves service names' addresses, which every node of the project
            // answers.
            self.inner.options.assignments.changed();
        }
    }
}

/// A project's apps, each with its newest revision's document, and its ready replicas:
/// what both its service names and its ingress routes come from.
struct ProjectApps {
    project: ProjectId,
    apps: Vec<(AppRevisionRow, ResolvedApp)>,
    ready: Vec<ReadyReplica>,
}

impl ProjectApps {
    async fn read(store: &crate::store::Store, project: &ProjectId) -> Result<Self, StoreError> {
        let apps = store
            .list_apps(project)
            .await?
            .into_iter()
            .filter_map(|row| {
                let document = serde_json::from_str::<ResolvedApp>(&row.document).ok()?;
                Some((row, document))
            })
            .collect();
        Ok(ProjectApps {
            project: project.clone(),
            apps,
            ready: store.ready_replica_addresses(project).await?,
        })
    }

    /// What an ingress node of the project serves: each route an app declares (in its
    /// newest revision that is not blocked, or in the revision a ready replica runs), with
    /// the ready replicas whose own revision declares it as backends. A route whose
    /// replicas are all unready stays, with no backend, so it answers 503 rather than 404.
    ///
    /// With them go the certificates the zone holds for the routed domains and the ACME
    /// challenges being answered for the project.
    async fn ingress(
        &self,
        store: &crate::store::Store,
        now: crate::model::Timestamp,
    ) -> Result<agent_pb::Ingress, StoreError> {
        let mut documents: BTreeMap<(&Name, u64), Option<ResolvedApp>> = BTreeMap::new();
        let mut table = RouteTable::default();
        for (row, document) in &self.apps {
            if row.state != DeploymentState::Blocked.as_str() {
                table.declare(&row.app, document, None);
            }
        }
        for ready in &self.ready {
            let newest = self
                .apps
                .iter()
                .find(|(row, _)| row.app == ready.app && row.number == ready.revision)
                .map(|(_, document)| document);
            let document = match newest {
                Some(document) => Some(document),
                None => {
                    let key = (&ready.app, ready.revision);
                    if let std::collections::btree_map::Entry::Vacant(slot) = documents.entry(key) {
                        let row = store
                            .app_revision(&self.project, &ready.app, ready.revision)
                            .await?;
                        slot.insert(row.and_then(|r| serde_json::from_str(&r.document).ok()));
                    }
                    documents.get(&key).and_then(Option::as_ref)
                }
            };
            if let Some(document) = document {
                table.declare(&ready.app, document, Some((&ready.workload, ready.address)));
            }
        }
        let mut message = table.into_message();
        message.certificates = store
            .issued_certificates(&self.project, now)
            .await?
            .into_iter()
            .filter(|c| message.routes.iter().any(|r| r.domain == c.domain))
            .map(|c| agent_pb::Certificate {
                domain: c.domain,
                chain_pem: c.chain_pem,
                key_pem: c.key_pem.to_string(),
            })
            .collect();
        message.challenges = store
            .acme_challenges(&self.project, now)
            .await?
            .into_iter()
            .map(|c| agent_pb::Challenge {
                token: c.token,
                key_authorization: c.key_authorization,
            })
            .collect();
        Ok(message)
    }
}

/// A project's ingress routes as they are gathered: each key (a domain, the catch-all, a
/// TCP port) belongs to the first app that declares it, by name; later claims of another
/// app are left out (a deploy that makes one is blocked, so this only settles a race).
#[derive(Debug, Default)]
struct RouteTable {
    domains: BTreeMap<String, (String, BTreeSet<String>)>,
    catch_all: Option<(String, BTreeSet<String>)>,
    tcp: BTreeMap<u16, (String, BTreeSet<String>)>,
}

impl RouteTable {
    /// Adds the routes `document` of `app` declares; with a replica (its workload and
    /// address), adds it as a backend of the routes of its workload.
    fn declare(
        &mut self,
        app: &Name,
        document: &ResolvedApp,
        replica: Option<(&str, std::net::Ipv4Addr)>,
    ) {
        for (name, service) in &document.spec.services {
            let backend = match replica {
                Some((workload, address)) if workload == name.as_str() => {
                    let Some(port) = service.port() else { continue };
                    Some(format!("{address}:{port}"))
                }
                Some(_) => continue,
                None => None,
            };
            let owner = format!("{app}/{name}");
            let add = |entry: &mut (String, BTreeSet<String>)| {
                if entry.0 == owner
                    && let Some(backend) = &backend
                {
                    entry.1.insert(backend.clone());
                }
            };
            for domain in service.domains() {
                add(self
                    .domains
                    .entry(domain.clone())
                    .or_insert_with(|| (owner.clone(), BTreeSet::new())));
            }
            if service.is_public() {
                add(self
                    .catch_all
                    .get_or_insert_with(|| (owner.clone(), BTreeSet::new())));
            }
            if let Some(port) = service.public_port() {
                add(self
                    .tcp
                    .entry(port)
                    .or_insert_with(|| (owner.clone(), BTreeSet::new())));
            }
        }
    }

    fn into_message(self) -> agent_pb::Ingress {
        agent_pb::Ingress {
            routes: self
                .domains
                .into_iter()
                .map(|(domain, (service, backends))| agent_pb::HttpRoute {
                    domain,
                    service,
                    backends: backends.into_iter().collect(),
                })
                .collect(),
            catch_all: self
                .catch_all
                .map(|(service, backends)| agent_pb::HttpRoute {
                    domain: String::new(),
                    service,
                    backends: backends.into_iter().collect(),
                }),
            tcp: self
                .tcp
                .into_iter()
                .map(|(port, (service, backends))| agent_pb::TcpRoute {
                    port: u32::from(port),
                    service,
                    backends: backends.into_iter().collect(),
                })
                .collect(),
            certificates: Vec::new(),
            challenges: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(value: serde_json::Value) -> ResolvedApp {
        ResolvedApp {
            spec: orc_app_model::check::check(&value).expect("a good app"),
            images: BTreeMap::new(),
        }
    }

    fn shop(domains: &[&str]) -> ResolvedApp {
        app(serde_json::json!({
            "name": "shop",
            "services": {
                "web": { "image": "acme/web:1", "http": { "port": 8080, "domains": domains, "public": true } },
                "db": { "image": "acme/db:1", "tcp": { "port": 5432, "publicPort": 15432 } },
            },
        }))
    }

    #[test]
    fn routes_lead_to_the_ready_replicas_of_the_revision_that_declares_them() {
        let name: Name = "shop".parse().unwrap();
        let v1 = shop(&["shop.example.com"]);
        let v2 = shop(&["shop.example.com", "www.example.com"]);
        let mut table = RouteTable::default();
        table.declare(&name, &v2, None);
        // One replica of each revision is ready; the old one leads only to the old name.
        table.declare(&name, &v1, Some(("web", "10.96.1.2".parse().unwrap())));
        table.declare(&name, &v2, Some(("web", "10.96.2.2".parse().unwrap())));
        table.declare(&name, &v2, Some(("db", "10.96.2.3".parse().unwrap())));
        let message = table.into_message();
        let routes: Vec<(String, String, Vec<String>)> = message
            .routes
            .iter()
            .map(|r| (r.domain.clone(), r.service.clone(), r.backends.clone()))
            .collect();
        assert_eq!(
            routes,
            [
                (
                    "shop.example.com".to_string(),
                    "shop/web".to_string(),
                    vec!["10.96.1.2:8080".to_string(), "10.96.2.2:8080".to_string()]
                ),
                (
                    "www.example.com".to_string(),
                    "shop/web".to_string(),
                    vec!["10.96.2.2:8080".to_string()]
                ),
            ]
        );
        let catch_all = message.catch_all.expect("web is public");
        assert_eq!(catch_all.service, "shop/web");
        assert_eq!(catch_all.backends.len(), 2);
        assert_eq!(message.tcp.len(), 1);
        assert_eq!(message.tcp[0].port, 15432);
        assert_eq!(message.tcp[0].backends, ["10.96.2.3:5432"]);
    }

    #[test]
    fn a_declared_route_without_ready_replicas_stays_and_a_later_claim_is_left_out() {
        let mut table = RouteTable::default();
        table.declare(
            &"alpha".parse().unwrap(),
            &shop(&["shop.example.com"]),
            None,
        );
        let beta = shop(&["shop.example.com"]);
        let beta_name: Name = "beta".parse().unwrap();
        table.declare(&beta_name, &beta, None);
        table.declare(
            &beta_name,
            &beta,
            Some(("web", "10.96.9.9".parse().unwrap())),
        );
        let message = table.into_message();
        assert_eq!(message.routes.len(), 1);
        assert_eq!(message.routes[0].service, "alpha/web");
        assert!(
            message.routes[0].backends.is_empty(),
            "beta's replica is no backend of alpha's route"
        );
        assert_eq!(message.catch_all.unwrap().service, "alpha/web");
        assert_eq!(message.tcp[0].service, "alpha/db");
    }
}
