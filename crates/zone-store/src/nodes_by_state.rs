//! Live nodes by state: a pool's counted per state, so listing pools does not read every
//! node, and a provider's in given states, which inventory reports are checked against.
//!
//! Read-only, over the existing schema (no migration).

use std::collections::BTreeMap;

use super::error::OperationExt;
use super::rows::{parsed, uint32};
use super::{Store, StoreResult};
use orc_zone_model::{Node, NodeState, PoolId, ProviderId};

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

    /// Live nodes (not ended) of every pool of `provider_id` whose state is one of `states`,
    /// by pool then slot.
    pub async fn nodes_of_provider_in(
        &self,
        provider_id: &ProviderId,
        states: &[NodeState],
    ) -> StoreResult<Vec<Node>> {
        let mut out = Vec::new();
        for pool in self.list_all_pools().await? {
            if &pool.spec.provider_id != provider_id {
                continue;
            }
            out.extend(
                self.list_nodes_by_pool(&pool.id, false)
                    .await?
                    .into_iter()
                    .filter(|n| states.contains(&n.status.state)),
            );
        }
        Ok(out)
    }
}
