//! Store queries the HTTP API needs that the core store does not have.
//!
//! Read-only, over the existing schema (no migration): counting a pool's live nodes per
//! state, so listing pools does not read every node.

use std::collections::BTreeMap;

use super::error::OperationExt;
use super::rows::{parsed, uint32};
use super::{Store, StoreResult};
use orc_zone_model::{NodeState, PoolId};

impl Store {
    /// A pool's live (not ended) nodes counted per state; states with no node are absent.
    pub async fn count_live_nodes_by_state(
        &self,
        pool_id: &PoolId,
    ) -> StoreResult<BTreeMap<NodeState, u32>> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS node_count FROM nodes \
             WHERE pool_id = $1 AND state <> 'ended' GROUP BY state ORDER BY state",
        )
        .bind(pool_id.as_str())
        .fetch_all(self.pool())
        .await
        .op("count live nodes by state")?;
        let mut counts = BTreeMap::new();
        for row in &rows {
            let state: NodeState = parsed(row, "nodes.state")?;
            counts.insert(state, uint32(row, "nodes.node_count")?);
        }
        Ok(counts)
    }
}
