//! Each node's workloads: what the zone assigns it (the replicas placed on it, from their
//! apps' revisions) and what it reports back.
//!
//! A session looks at its node's assignment every [`WORKLOAD_POLL`] and sends it whole when
//! it changed, with a generation taken from the zone's clock (so it only grows, also
//! across zone restarts) and a fresh registry pull grant. The node reports each replica's
//! phase, readiness and restarts; the rollouts ([`crate::rollouts`]) take it from there.

use std::collections::BTreeMap;
use std::time::Duration;

use orc_app_model::revision::ResolvedApp;
use orc_app_model::spec::Restart;
use orc_proto::agent_pb;
use sha2::Digest as _;

use super::AgentHub;
use crate::model::{Name, NodeId, ProjectId};
use crate::store::StoreError;

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

    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
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
        // The node's subnet, its replicas' addresses, and the project's names.
        let network = match rows.first() {
            Some((project, ..)) => self.network(node, project).await?,
            None => None,
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
        for app in store.list_apps(project).await? {
            let Ok(document) = serde_json::from_str::<ResolvedApp>(&app.document) else {
                continue;
            };
            for name in document.spec.services.keys() {
                services.insert(format!("{name}.{}.{domain}", app.app), Vec::new());
            }
        }
        for (app, workload, address) in store.ready_replica_addresses(project).await? {
            if let Some(list) = services.get_mut(&format!("{workload}.{app}.{domain}")) {
                list.push(address.to_string());
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
