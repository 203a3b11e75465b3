//! `AgentHub.Join`: a join token and the node's public key in, a node certificate out.

use orc_proto::agent_pb;
use tonic::Status;

use super::{AgentHub, facts_from};
use crate::model::{AgentState, EventScope, NodeId, NodeState};
use crate::store::StoreError;
use orc_zone_model::{JoinRefusal, JoinTokenSecret, NodeAgent};

/// Why a join fails before the token is looked at, or how a refusal reaches the agent.
fn refused(refusal: &JoinRefusal) -> Status {
    Status::permission_denied(refusal.to_string())
}

fn unavailable(error: &StoreError) -> Status {
    tracing::warn!(%error, "store error during a join");
    Status::unavailable("the zone's store is not available; try again")
}

impl AgentHub {
    /// The event scope of `node`: its pool, project and org, when they can be read.
    pub(super) async fn node_scope(&self, node: &NodeId) -> EventScope {
        let store = &self.inner.store;
        let mut scope = EventScope {
            node_id: Some(node.clone()),
            ..EventScope::default()
        };
        let Ok(record) = store.get_node(node).await else {
            return scope;
        };
        scope.pool_id = Some(record.pool_id.clone());
        if let Ok(pool) = store.get_pool(&record.pool_id).await {
            scope.provider_id = Some(pool.spec.provider_id.clone());
            if let Ok(project) = store.get_project(&pool.project_id).await {
                scope.org_id = Some(project.org_id);
            }
            scope.project_id = Some(pool.project_id);
        }
        scope
    }

    /// Records `kind` with `words` about `node` (never fails the caller).
    pub(super) async fn node_event(&self, node: &NodeId, kind: &str, words: &str) {
        let scope = self.node_scope(node).await;
        if let Err(error) = self
            .inner
            .store
            .record_node_event(&scope, kind, words, self.now())
            .await
        {
            tracing::warn!(%node, %error, kind, "event not recorded");
        }
    }

    /// Makes `node` accept public ingress when it is the first of its project to join (no
    /// live node of the project accepts it, and no person chose for the project). A site's
    /// gateway never does.
    async fn take_first_ingress(&self, node: &NodeId, record: &crate::model::Node) {
        let store = &self.inner.store;
        let Ok(pool) = store.get_pool(&record.pool_id).await else {
            return;
        };
        if orc_zone_model::gateway::gateway_pool_site(&pool).is_some() {
            return;
        }
        match store
            .take_first_ingress(node, &pool.project_id, self.now())
            .await
        {
            Ok(true) => {
                self.node_event(
                    node,
                    "node.ingress_enabled",
                    "accepts public ingress: the first node of its project to join",
                )
                .await;
            }
            Ok(false) => {}
            Err(error) => tracing::warn!(%node, %error, "a node's ingress was not set"),
        }
    }

    async fn refuse(&self, node: &NodeId, refusal: JoinRefusal) -> Status {
        tracing::info!(%node, reason = refusal.reason(), "a join was refused");
        let words = format!("a join was refused: {refusal}");
        self.node_event(node, "node.join_refused", &words).await;
        refused(&refusal)
    }

    pub(super) async fn join(
        &self,
        request: agent_pb::JoinRequest,
    ) -> Result<agent_pb::JoinReply, Status> {
        let Some(ca) = self.inner.ca.clone() else {
            return Err(Status::failed_precondition(
                "this zone serves plain text and has no CA, so nodes cannot join it; \
                 start the zone with TLS",
            ));
        };
        let node: NodeId = request
            .node_id
            .parse()
            .map_err(|e| Status::invalid_argument(format!("node_id {:?}: {e}", request.node_id)))?;
        let secret = JoinTokenSecret::parse(request.token.trim())
            .map_err(|e| Status::invalid_argument(format!("the join token: {e}")))?;
        // Checked before the token is spent, so a broken agent can try again.
        if request.public_key.len() != 65 || request.public_key[0] != 0x04 {
            return Err(Status::invalid_argument(
                "public_key must be an uncompressed P-256 point (65 bytes)",
            ));
        }
        let ours = ca.fingerprint();
        if secret.ca_fingerprint() != ours {
            let refusal = JoinRefusal::WrongCa {
                pinned: secret.ca_fingerprint(),
                ours,
            };
            return Err(self.refuse(&node, refusal).await);
        }
        let store = &self.inner.store;
        let record = match store.get_node(&node).await {
            Ok(record) => record,
            Err(StoreError::NotFound { .. }) => {
                return Err(refused(&JoinRefusal::Unknown));
            }
            Err(e) => return Err(unavailable(&e)),
        };
        if record.status.state == NodeState::Ended {
            return Err(self
                .refuse(&node, JoinRefusal::NodeEnded(node.clone()))
                .await);
        }
        let (facts, product_uuid) = facts_from(request.facts);
        let now = self.now();
        match store
            .redeem_join_token(&secret, &node, &product_uuid, now)
            .await
        {
            Ok(Ok(_token)) => {}
            Ok(Err(refusal)) => return Err(self.refuse(&node, refusal).await),
            Err(e) => return Err(unavailable(&e)),
        }
        let cert = ca
            .issue_node(
                node.as_str(),
                &request.public_key,
                self.inner.options.cert_lifetime,
            )
            .map_err(|e| Status::invalid_argument(format!("no certificate was signed: {e}")))?;
        let not_after = timestamp_of(cert.not_after);
        let agent = NodeAgent {
            node_id: node.clone(),
            state: AgentState::Joined,
            joined_at: now,
            product_uuid,
            cert_fingerprint: cert.fingerprint.clone(),
            previous_fingerprint: None,
            cert_not_after: not_after,
            version: request.version.clone(),
            facts,
            desired_generation: 0,
            config_digest: String::new(),
            applied_generation: 0,
            apply_error: None,
            last_contact_at: now,
        };
        store
            .record_node_join(&agent)
            .await
            .map_err(|e| unavailable(&e))?;
        tracing::info!(%node, version = %request.version, "a node's agent joined");
        let words = format!(
            "its agent joined (version {}) and holds a certificate until {}",
            request.version,
            utc_minute(not_after)
        );
        self.node_event(&node, "node.joined", &words).await;
        self.take_first_ingress(&node, &record).await;
        Ok(agent_pb::JoinReply {
            node_id: node.to_string(),
            certificate_chain_pem: cert.chain_pem,
            not_after: not_after.millis(),
        })
    }
}

/// A certificate's expiry as a stored time.
pub(super) fn timestamp_of(at: std::time::SystemTime) -> crate::model::Timestamp {
    let millis = at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    crate::model::Timestamp::from_unix_millis(millis)
}

/// `2026-12-03 06:40 UTC`.
pub(super) fn utc_minute(at: crate::model::Timestamp) -> String {
    chrono::DateTime::from_timestamp_millis(at.millis())
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| at.to_string())
}
