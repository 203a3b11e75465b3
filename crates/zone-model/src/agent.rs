//! A node's agent as the zone knows it: the certificate it joined with, the facts it last
//! reported, and the config generations the zone wants and the agent has applied.
//!
//! The config an agent applies is computed from the node, its pool and its provider
//! ([`AgentConfig::for_node`]) and the zone's mesh plan ([`AgentConfig::with_mesh`]); its
//! digest decides when the zone bumps the generation, so an
//! agent reapplies only what changed, and a zone restarted on the same store sends the same
//! generation again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use orc_mesh::MeshConfig;

use crate::model::{AgentState, Name, Node, NodeId, Timestamp};

/// One address of a node's interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceAddress {
    pub interface: String,
    /// `10.0.0.2/24`.
    pub cidr: String,
}

/// What an agent reports about its machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub hostname: String,
    pub addresses: Vec<InterfaceAddress>,
    pub kernel: String,
    pub architecture: String,
    pub cpus: u32,
    pub memory_total_bytes: u64,
    pub memory_available_bytes: u64,
    /// The one-minute load average, times 100.
    pub load_centi: u32,
    /// The agent's WireGuard public key (base64): its project mesh key on a node, its
    /// backbone key on a gateway; empty before it made one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wireguard_public_key: String,
    /// Which WireGuard it runs: `kernel` or `userspace`; empty when it runs none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wireguard: String,
}

/// The node's place in the zone, as its agent is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentIdentity {
    pub node_id: NodeId,
    pub pool: Name,
    pub slot: u32,
    /// Neutral site name; empty when the provider named none.
    pub site: String,
    pub provider: Name,
}

/// What the zone wants a node's agent to apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentConfig {
    pub identity: AgentIdentity,
    pub labels: BTreeMap<String, String>,
    /// Its mesh (interfaces, peers, routes, a gateway's NAT); empty when it has none.
    #[serde(skip_serializing_if = "MeshConfig::is_unset")]
    pub mesh: MeshConfig,
}

impl AgentConfig {
    /// The config of `node` in the pool named `pool`, placed by `provider`.
    pub fn for_node(node: &Node, pool: &Name, provider: &Name) -> AgentConfig {
        let site = node.status.site.clone().unwrap_or_default();
        let mut labels = BTreeMap::new();
        labels.insert("orc.pool".to_string(), pool.to_string());
        labels.insert("orc.slot".to_string(), node.slot.to_string());
        labels.insert("orc.provider".to_string(), provider.to_string());
        if !site.is_empty() {
            labels.insert("orc.site".to_string(), site.clone());
        }
        AgentConfig {
            identity: AgentIdentity {
                node_id: node.id.clone(),
                pool: pool.clone(),
                slot: node.slot,
                site,
                provider: provider.clone(),
            },
            labels,
            mesh: MeshConfig::default(),
        }
    }

    /// The same config with `mesh`.
    pub fn with_mesh(mut self, mesh: MeshConfig) -> AgentConfig {
        self.mesh = mesh;
        self
    }

    /// `sha256:<hex>` of the config's canonical JSON, its mesh by the mesh's own digest
    /// ([`MeshConfig::digest`], which costs the same whatever the size of the mesh): equal
    /// configs, equal digests.
    pub fn digest(&self) -> String {
        self.digest_with(|| self.mesh.digest())
    }

    /// [`AgentConfig::digest`] with the mesh's digest from `mesh_digest` (one computed
    /// before, for the same mesh), asked for only when the config has a mesh.
    pub fn digest_with(&self, mesh_digest: impl FnOnce() -> String) -> String {
        #[derive(Serialize)]
        struct Form<'a> {
            identity: &'a AgentIdentity,
            labels: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            mesh: Option<String>,
        }
        let form = Form {
            identity: &self.identity,
            labels: &self.labels,
            mesh: (!self.mesh.is_unset()).then(mesh_digest),
        };
        let json = serde_json::to_vec(&form).unwrap_or_default();
        format!("sha256:{}", hex(&Sha256::digest(json)))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A node's agent, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAgent {
    pub node_id: NodeId,
    pub state: AgentState,
    pub joined_at: Timestamp,
    /// The machine's `product_uuid` at join.
    pub product_uuid: String,
    /// `sha256:<hex>` of the node's current certificate.
    pub cert_fingerprint: String,
    /// The certificate it had before the last renewal, still accepted until the agent
    /// attaches with the new one.
    pub previous_fingerprint: Option<String>,
    pub cert_not_after: Timestamp,
    /// The agent's software version.
    pub version: String,
    pub facts: NodeFacts,
    /// The generation the zone wants applied, and the digest of its config.
    pub desired_generation: u64,
    pub config_digest: String,
    /// The last generation the agent reported applied, with its error if it failed.
    pub applied_generation: u64,
    pub apply_error: Option<String>,
    pub last_contact_at: Timestamp,
}

impl NodeAgent {
    /// Whether `fingerprint` is the node's certificate (current or the one just replaced).
    pub fn holds(&self, fingerprint: &str) -> bool {
        self.cert_fingerprint == fingerprint
            || self.previous_fingerprint.as_deref() == Some(fingerprint)
    }

    /// The state its generations make it: `ready` once the wanted generation applied
    /// without error.
    pub fn settled_state(&self) -> AgentState {
        if self.desired_generation > 0
            && self.applied_generation == self.desired_generation
            && self.apply_error.is_none()
        {
            AgentState::Ready
        } else {
            AgentState::Joined
        }
    }

    /// The generation to send for a config whose digest is `digest`: the stored one while the
    /// digest holds, the next one when the config changed. Returns the generation and whether
    /// it is new. `digest` is the config's ([`AgentConfig::digest`]): a config of many peers is costly to
    /// digest, so the caller digests it once and keeps the digest.
    pub fn generation_for(&self, digest: &str) -> (u64, bool) {
        if self.desired_generation > 0 && self.config_digest == digest {
            (self.desired_generation, false)
        } else {
            (self.desired_generation + 1, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentState, NodeStatus, PoolId};

    fn node(slot: u32, site: Option<&str>) -> Node {
        let mut status = NodeStatus::pending(Timestamp::from_unix_secs(0));
        status.site = site.map(str::to_string);
        Node {
            id: NodeId::from_counter(7),
            pool_id: PoolId::from_counter(5),
            slot,
            status,
            version: 1,
            created_at: Timestamp::from_unix_secs(0),
            updated_at: Timestamp::from_unix_secs(0),
        }
    }

    fn agent(desired: u64, applied: u64, digest: &str) -> NodeAgent {
        NodeAgent {
            node_id: NodeId::from_counter(7),
            state: AgentState::Joined,
            joined_at: Timestamp::from_unix_secs(1),
            product_uuid: "u".into(),
            cert_fingerprint: "sha256:new".into(),
            previous_fingerprint: Some("sha256:old".into()),
            cert_not_after: Timestamp::from_unix_secs(100),
            version: "0.1.0".into(),
            facts: NodeFacts::default(),
            desired_generation: desired,
            config_digest: digest.into(),
            applied_generation: applied,
            apply_error: None,
            last_contact_at: Timestamp::from_unix_secs(1),
        }
    }

    #[test]
    fn config_digest_follows_content() {
        let pool: Name = "web".parse().unwrap();
        let provider: Name = "partner".parse().unwrap();
        let a = AgentConfig::for_node(&node(0, Some("eu-central-a")), &pool, &provider);
        let b = AgentConfig::for_node(&node(0, Some("eu-central-a")), &pool, &provider);
        let c = AgentConfig::for_node(&node(1, Some("eu-central-a")), &pool, &provider);
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest());
        assert_eq!(a.labels["orc.site"], "eu-central-a");
        let none = AgentConfig::for_node(&node(0, None), &pool, &provider);
        assert!(!none.labels.contains_key("orc.site"));
    }

    #[test]
    fn generation_moves_only_when_the_config_changes() {
        let pool: Name = "web".parse().unwrap();
        let config = AgentConfig::for_node(&node(0, None), &pool, &"p".parse().unwrap());
        let fresh = agent(0, 0, "");
        assert_eq!(fresh.generation_for(&config.digest()), (1, true));
        let same = agent(1, 0, &config.digest());
        assert_eq!(same.generation_for(&config.digest()), (1, false));
        let changed = agent(3, 3, "sha256:other");
        assert_eq!(changed.generation_for(&config.digest()), (4, true));
    }

    #[test]
    fn ready_once_the_wanted_generation_applied_cleanly() {
        assert_eq!(agent(0, 0, "").settled_state(), AgentState::Joined);
        assert_eq!(agent(2, 1, "").settled_state(), AgentState::Joined);
        assert_eq!(agent(2, 2, "").settled_state(), AgentState::Ready);
        let mut failed = agent(2, 2, "");
        failed.apply_error = Some("disk full".into());
        assert_eq!(failed.settled_state(), AgentState::Joined);
        assert!(failed.holds("sha256:old") && failed.holds("sha256:new"));
        assert!(!failed.holds("sha256:other"));
    }
}
