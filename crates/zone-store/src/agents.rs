//! Node agents: written when an agent joins (a node that joins again replaces its row), read
//! by the certificate an attaching agent presents, and updated as the agent reports.

use std::collections::BTreeSet;

use sqlx::AssertSqlSafe;
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::nodes::{NODE_COLUMNS, node_from, placeholders};
use super::rows::{big, json, opt_text, parsed, text, time, to_json, uint64};
use super::{BATCH_ROWS, Kind, Store, StoreError, StoreResult};
use orc_zone_model::{Node, NodeAgent, NodeId, PoolId, Timestamp};

const COLUMNS: &str = "node_agents.node_id, node_agents.state, node_agents.joined_at, \
     node_agents.product_uuid, node_agents.cert_fingerprint, node_agents.previous_fingerprint, \
     node_agents.cert_not_after, node_agents.agent_version, node_agents.facts, \
     node_agents.desired_generation, node_agents.config_digest, node_agents.applied_generation, \
     node_agents.apply_error, node_agents.last_contact_at";

fn agent_from(row: &AnyRow) -> StoreResult<NodeAgent> {
    Ok(NodeAgent {
        node_id: parsed(row, "node_agents.node_id")?,
        state: parsed(row, "node_agents.state")?,
        joined_at: time(row, "node_agents.joined_at")?,
        product_uuid: text(row, "node_agents.product_uuid")?,
        cert_fingerprint: text(row, "node_agents.cert_fingerprint")?,
        previous_fingerprint: opt_text(row, "node_agents.previous_fingerprint")?,
        cert_not_after: time(row, "node_agents.cert_not_after")?,
        version: text(row, "node_agents.agent_version")?,
        facts: json(row, "node_agents.facts")?,
        desired_generation: uint64(row, "node_agents.desired_generation")?,
        config_digest: text(row, "node_agents.config_digest")?,
        applied_generation: uint64(row, "node_agents.applied_generation")?,
        apply_error: opt_text(row, "node_agents.apply_error")?,
        last_contact_at: time(row, "node_agents.last_contact_at")?,
    })
}

/// One row of [`Store::update_node_agents`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUpdate {
    pub agent: NodeAgent,
    /// Write the agent's facts too (false: they did not change since they were written).
    pub facts: bool,
}

impl Store {
    /// Records that `agent.node_id` joined: its row is created, or replaced when the node
    /// joins again (a rebuilt machine with a new token), forgetting the old certificate.
    pub async fn record_node_join(&self, agent: &NodeAgent) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO node_agents (node_id, state, joined_at, product_uuid, cert_fingerprint, \
             previous_fingerprint, cert_not_after, agent_version, facts, desired_generation, \
             config_digest, applied_generation, apply_error, last_contact_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             ON CONFLICT (node_id) DO UPDATE SET state = excluded.state, \
             joined_at = excluded.joined_at, product_uuid = excluded.product_uuid, \
             cert_fingerprint = excluded.cert_fingerprint, \
             previous_fingerprint = excluded.previous_fingerprint, \
             cert_not_after = excluded.cert_not_after, agent_version = excluded.agent_version, \
             facts = excluded.facts, desired_generation = excluded.desired_generation, \
             config_digest = excluded.config_digest, \
             applied_generation = excluded.applied_generation, \
             apply_error = excluded.apply_error, last_contact_at = excluded.last_contact_at",
        )
        .bind(agent.node_id.as_str())
        .bind(agent.state.as_str())
        .bind(agent.joined_at.millis())
        .bind(agent.product_uuid.as_str())
        .bind(agent.cert_fingerprint.as_str())
        .bind(agent.previous_fingerprint.as_deref())
        .bind(agent.cert_not_after.millis())
        .bind(agent.version.as_str())
        .bind(to_json(&agent.facts))
        .bind(big(agent.desired_generation))
        .bind(agent.config_digest.as_str())
        .bind(big(agent.applied_generation))
        .bind(agent.apply_error.as_deref())
        .bind(agent.last_contact_at.millis())
        .execute(self.pool())
        .await
        .op("record node join")?;
        Ok(())
    }

    /// Writes what an attached agent reported and what the zone decided (state, version,
    /// facts, generations, certificate after a renewal, last contact). `false` when the node
    /// has no agent row (it joined again elsewhere in the meantime, or never joined).
    pub async fn update_node_agent(&self, agent: &NodeAgent) -> StoreResult<bool> {
        let update = AgentUpdate {
            agent: agent.clone(),
            facts: true,
        };
        let written = self
            .update_node_agents(std::slice::from_ref(&update))
            .await?;
        Ok(written == [true])
    }

    /// Writes many agents as [`Store::update_node_agent`] writes one, in one transaction of
    /// multi-row statements (a mesh change acknowledged by 200 agents is one write, not
    /// 200); an update whose `facts` is false leaves the stored facts as they are. For each
    /// agent, in order: whether its row was there. An agent given twice is refused.
    pub async fn update_node_agents(&self, updates: &[AgentUpdate]) -> StoreResult<Vec<bool>> {
        const OP: &str = "update node agents";
        const WIDTH: usize = 13;
        let mut seen = BTreeSet::new();
        for AgentUpdate { agent, .. } in updates {
            if !seen.insert(agent.node_id.as_str()) {
                return Err(StoreError::Invalid {
                    kind: Kind::Node,
                    id: agent.node_id.to_string(),
                    reason: "its agent is written twice in one batch".to_string(),
                });
            }
        }
        let mut written = BTreeSet::new();
        let mut tx = self.begin(OP).await?;
        for chunk in updates.chunks(BATCH_ROWS) {
            let sql = format!(
                "UPDATE node_agents SET state = v.column2, cert_fingerprint = v.column3, \
                 previous_fingerprint = v.column4, cert_not_after = v.column5, \
                 agent_version = v.column6, facts = COALESCE(v.column7, node_agents.facts), \
                 desired_generation = v.column8, \
                 config_digest = v.column9, applied_generation = v.column10, \
                 apply_error = v.column11, last_contact_at = v.column12 \
                 FROM (VALUES {}) AS v \
                 WHERE node_agents.node_id = v.column1 AND node_agents.joined_at = v.column13 \
                 RETURNING node_agents.node_id",
                placeholders(self.engine, chunk.len(), WIDTH, 1)
            );
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for AgentUpdate { agent, facts } in chunk {
                query = query
                    .bind(agent.node_id.as_str())
                    .bind(agent.state.as_str())
                    .bind(agent.cert_fingerprint.as_str())
                    .bind(agent.previous_fingerprint.as_deref())
                    .bind(agent.cert_not_after.millis())
                    .bind(agent.version.as_str())
                    .bind(facts.then(|| to_json(&agent.facts)))
                    .bind(big(agent.desired_generation))
                    .bind(agent.config_digest.as_str())
                    .bind(big(agent.applied_generation))
                    .bind(agent.apply_error.as_deref())
                    .bind(agent.last_contact_at.millis())
                    .bind(agent.joined_at.millis());
            }
            for row in query.fetch_all(&mut *tx).await.op(OP)? {
                written.insert(text(&row, "node_agents.node_id")?);
            }
        }
        tx.commit().await.op(OP)?;
        Ok(updates
            .iter()
            .map(|u| written.contains(u.agent.node_id.as_str()))
            .collect())
    }

    /// The agent of `node`, if it ever joined.
    pub async fn node_agent(&self, node: &NodeId) -> StoreResult<Option<NodeAgent>> {
        let sql = AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM node_agents WHERE node_id = $1"
        ));
        let row = sqlx::query(sql)
            .bind(node.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read node agent")?;
        row.as_ref().map(agent_from).transpose()
    }

    /// The agent whose current or previous certificate has `fingerprint`.
    pub async fn node_agent_by_certificate(
        &self,
        fingerprint: &str,
    ) -> StoreResult<Option<NodeAgent>> {
        let sql = AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM node_agents WHERE cert_fingerprint = $1 \
             OR previous_fingerprint = $1"
        ));
        let row = sqlx::query(sql)
            .bind(fingerprint)
            .fetch_optional(self.pool())
            .await
            .op("read node agent by certificate")?;
        row.as_ref().map(agent_from).transpose()
    }

    /// Running nodes that were deployed with a join token, have run since `before` or
    /// longer, and whose agent never joined; nodes of `sys/sys`'s provider named `except` (the
    /// zone's own app slots) are left out. Nodes deployed before the zone minted tokens have none, so they
    /// are never taken for nodes whose agent failed.
    pub async fn running_nodes_without_agent(
        &self,
        before: Timestamp,
        except: &str,
    ) -> StoreResult<Vec<Node>> {
        let sql = AssertSqlSafe(format!(
            "SELECT {NODE_COLUMNS} FROM nodes WHERE state = 'running' AND updated_at <= $1 \
             AND id NOT IN (SELECT node_id FROM node_agents) \
             AND id IN (SELECT node_id FROM join_tokens) \
             AND pool_id IN (SELECT pools.id FROM pools JOIN providers \
                 ON providers.id = pools.provider_id \
                 WHERE NOT (providers.project_id = $3 AND providers.name = $2)) \
             ORDER BY id"
        ));
        let rows = sqlx::query(sql)
            .bind(before.millis())
            .bind(except)
            .bind(orc_zone_model::sys_project_id().as_str())
            .fetch_all(self.pool())
            .await
            .op("list running nodes without agent")?;
        rows.iter().map(node_from).collect()
    }

    /// The agents of `pool`'s nodes (live or ended), by node id.
    pub async fn node_agents_of_pool(&self, pool: &PoolId) -> StoreResult<Vec<NodeAgent>> {
        let sql = AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM node_agents JOIN nodes ON nodes.id = node_agents.node_id \
             WHERE nodes.pool_id = $1 ORDER BY node_agents.node_id"
        ));
        let rows = sqlx::query(sql)
            .bind(pool.as_str())
            .fetch_all(self.pool())
            .await
            .op("list node agents of pool")?;
        rows.iter().map(agent_from).collect()
    }
}
