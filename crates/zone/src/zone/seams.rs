//! How the API reaches the zone's other parts: the hub's replicas and catalogs, app slots'
//! registrations and logs, nodes' agents.

use std::time::Duration;

use crate::agents::{AgentHub, ExecError, ExecEvent};
use crate::api::views::{LogLineView, ReplicaView};
use crate::api::{AgentAccess, LogSource, LogsFuture, ProviderDirectory};
use crate::apps::Apps;
use crate::hub::Hub;
use crate::model::{Pool, Provider};

/// The API's view of the hub's replicas and catalogs.
pub(super) struct HubDirectory(pub(super) Hub);

impl ProviderDirectory for HubDirectory {
    fn replicas(&self, provider: &Provider) -> Vec<ReplicaView> {
        self.0
            .replicas_of(provider)
            .into_iter()
            .map(|r| ReplicaView {
                host: r.host,
                pid: r.pid,
                slot: r.slot,
                role: r.role.to_string(),
                connected_since: r.connected_since.millis(),
            })
            .collect()
    }

    fn catalog(&self, provider: &Provider) -> Option<orc_proto::Catalog> {
        self.0.catalog(provider).map(|c| c.catalog)
    }
}

/// Which app slots are attached to the hub as provider replicas, for rolling replacements.
pub(super) struct HubRegistrations(pub(super) Hub);

impl crate::apps::Registrations for HubRegistrations {
    fn attached(&self, pool: &crate::model::PoolId) -> Vec<(u32, bool)> {
        self.0.attached_of(&format!("pool:{pool}"))
    }
}

/// The API's way to nodes' agents.
pub(super) struct AgentDirectory {
    pub(super) hub: AgentHub,
    pub(super) endpoint: String,
}

impl AgentAccess for AgentDirectory {
    fn live(&self, node: &crate::model::NodeId) -> Option<crate::model::Timestamp> {
        self.hub.live(node).map(|l| l.last_contact)
    }

    fn exec(
        &self,
        node: &crate::model::NodeId,
        what: crate::agents::ExecWhat,
        timeout: Duration,
    ) -> Result<tokio::sync::mpsc::Receiver<ExecEvent>, ExecError> {
        self.hub.exec(node, what, timeout)
    }

    fn ca_fingerprint(&self) -> Option<String> {
        self.hub.ca_fingerprint()
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn mesh_of(&self, node: &crate::model::NodeId) -> orc_mesh::MeshConfig {
        self.hub.mesh_of(node)
    }

    fn mesh_status(&self, node: &crate::model::NodeId) -> Option<crate::agents::MeshStatusReport> {
        self.hub.mesh_status(node)
    }

    fn assignments_changed(&self) {
        self.hub.assignment_signal().changed();
    }
}

/// The API's view of the app slots' logs.
pub(super) struct AppsLogs(pub(super) Apps);

impl LogSource for AppsLogs {
    fn logs<'a>(&'a self, pool: &'a Pool, slot: Option<u32>, level: &'a str) -> LogsFuture<'a> {
        Box::pin(async move {
            let min_level = level.parse().map_err(|e| format!("{e}"))?;
            Ok(self
                .0
                .logs(&pool.id, slot, min_level)
                .into_iter()
                .map(|line| LogLineView {
                    at: line.at.millis(),
                    slot: line.slot,
                    level: line.level.as_str().to_string(),
                    message: line.text,
                })
                .collect())
        })
    }
}

/// The edge's view of apps' private services: what the store says of them, and a stream to
/// a replica through its node's agent.
pub(super) struct ServicesThroughAgents {
    pub(super) store: crate::store::Store,
    pub(super) agents: AgentHub,
}

#[async_trait::async_trait]
impl orc_web::edge::PrivateServices for ServicesThroughAgents {
    async fn private_services(
        &self,
        project: &crate::model::ProjectId,
    ) -> Result<Vec<(String, String)>, String> {
        let apps = self
            .store
            .list_apps(project)
            .await
            .map_err(|e| e.to_string())?;
        Ok(apps
            .iter()
            .filter_map(|row| Some((row, crate::rollouts::document(row).ok()?)))
            .flat_map(|(row, document)| {
                document
                    .spec
                    .services
                    .iter()
                    .filter(|(_, service)| service.is_private())
                    .map(|(name, _)| (row.app.to_string(), name.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect())
    }

    async fn replicas(
        &self,
        project: &crate::model::ProjectId,
        app: &str,
        service: &str,
    ) -> Result<Vec<orc_web::edge::PrivateReplica>, String> {
        let store = &self.store;
        let Ok(app) = app.parse::<crate::model::Name>() else {
            return Ok(Vec::new());
        };
        let rows = store
            .list_app_replicas(project, &app)
            .await
            .map_err(|e| e.to_string())?;
        let mut ports: std::collections::BTreeMap<u64, Option<u16>> = Default::default();
        let mut out = Vec::new();
        for row in rows.iter().filter(|r| {
            r.workload == service && r.ready && r.draining_at.is_none() && r.node_id.is_some()
        }) {
            let (Some(node), Some(address)) = (&row.node_id, row.address) else {
                continue;
            };
            // The port the replica's own revision gives the service.
            if let std::collections::btree_map::Entry::Vacant(slot) = ports.entry(row.revision) {
                let port = store
                    .app_revision(project, &app, row.revision)
                    .await
                    .map_err(|e| e.to_string())?
                    .and_then(|r| crate::rollouts::document(&r).ok())
                    .and_then(|document| {
                        document
                            .spec
                            .services
                            .iter()
                            .find(|(name, s)| name.as_str() == service && s.is_private())
                            .and_then(|(_, s)| s.port())
                    });
                slot.insert(port);
            }
            let Some(Some(port)) = ports.get(&row.revision) else {
                continue;
            };
            out.push(orc_web::edge::PrivateReplica {
                slot: row.slot,
                node: node.to_string(),
                address: format!("{address}:{port}"),
            });
        }
        Ok(out)
    }

    async fn connect(&self, node: &str, address: &str) -> Result<tokio::io::DuplexStream, String> {
        let node: crate::model::NodeId = node.parse().map_err(|_| format!("no node {node}"))?;
        self.agents
            .tunnel(&node, address)
            .await
            .map_err(|e| e.to_string())
    }
}
