//! Which nodes accept public ingress: a person's choice per node, or the zone's for the
//! first node of a project to join (see migration 0026).

use orc_zone_model::{NodeId, ProjectId, Timestamp};

use super::error::OperationExt;
use super::rows::{flag, parsed};
use super::{Store, StoreResult};

impl Store {
    /// Sets whether `node` of `project` accepts ingress, as `by` chose; whether that changed
    /// anything.
    pub async fn set_node_ingress(
        &self,
        node: &NodeId,
        project: &ProjectId,
        enabled: bool,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let was = self.node_ingress(node).await?;
        sqlx::query(
            "INSERT INTO node_ingress (node_id, project_id, enabled, set_by, set_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (node_id) DO UPDATE SET enabled = excluded.enabled, \
             set_by = excluded.set_by, set_at = excluded.set_at",
        )
        .bind(node.as_str())
        .bind(project.as_str())
        .bind(i64::from(enabled))
        .bind(by)
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("set a node's ingress")?;
        Ok(was != enabled)
    }

    /// Makes `node` of `project` accept ingress when no live node of the project does and
    /// no person ever chose for the project; whether it did.
    pub async fn take_first_ingress(
        &self,
        node: &NodeId,
        project: &ProjectId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT INTO node_ingress (node_id, project_id, enabled, set_by, set_at) \
             SELECT $1, $2, 1, NULL, $3 WHERE NOT EXISTS ( \
                 SELECT 1 FROM node_ingress i WHERE i.project_id = $2 AND ( \
                     i.set_by IS NOT NULL OR (i.enabled = 1 AND EXISTS ( \
                         SELECT 1 FROM nodes n WHERE n.id = i.node_id AND n.state <> 'ended')))) \
             ON CONFLICT (node_id) DO NOTHING",
        )
        .bind(node.as_str())
        .bind(project.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("give a project its first ingress node")?;
        Ok(done.rows_affected() > 0)
    }

    /// Whether `node` accepts ingress.
    pub async fn node_ingress(&self, node: &NodeId) -> StoreResult<bool> {
        let row = sqlx::query("SELECT enabled FROM node_ingress WHERE node_id = $1")
            .bind(node.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read a node's ingress")?;
        Ok(row
            .as_ref()
            .map(|row| flag(row, "node_ingress.enabled"))
            .transpose()?
            .unwrap_or(false))
    }

    /// The nodes of `project` that accept ingress and have not ended, sorted.
    pub async fn ingress_nodes(&self, project: &ProjectId) -> StoreResult<Vec<NodeId>> {
        let rows = sqlx::query(
            "SELECT i.node_id FROM node_ingress i JOIN nodes n ON n.id = i.node_id \
             WHERE i.project_id = $1 AND i.enabled = 1 AND n.state <> 'ended' \
             ORDER BY i.node_id",
        )
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("list a project's ingress nodes")?;
        rows.iter()
            .map(|row| parsed(row, "node_ingress.node_id"))
            .collect()
    }
}
