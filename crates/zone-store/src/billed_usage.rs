//! What a node has been billed so far, read from its usage lines.
//!
//! Read-only, over the existing schema (no migration). The usage lines themselves are the
//! billing mark, so accrual is idempotent across restarts.

use super::error::OperationExt;
use super::rows::{decimal, time};
use super::{Store, StoreResult};
use orc_zone_model::{NodeId, Timestamp};
use rust_decimal::Decimal;

/// What a node has been billed so far: when its first usage line was opened and the hours
/// recorded on all of its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BilledUsage {
    pub since: Timestamp,
    pub hours: Decimal,
}

impl Store {
    /// What `node_id` has been billed on its lines described `description`: `None` before
    /// the first such line.
    pub async fn billed_usage(
        &self,
        node_id: &NodeId,
        description: &str,
    ) -> StoreResult<Option<BilledUsage>> {
        let rows = sqlx::query(
            "SELECT hours, created_at FROM usage_lines WHERE node_id = $1 AND description = $2",
        )
        .bind(node_id.as_str())
        .bind(description)
        .fetch_all(self.pool())
        .await
        .op("read billed usage")?;
        let mut billed: Option<BilledUsage> = None;
        for row in &rows {
            let hours = decimal(row, "usage_lines.hours")?;
            let created = time(row, "usage_lines.created_at")?;
            billed = Some(match billed {
                None => BilledUsage {
                    since: created,
                    hours,
                },
                Some(b) => BilledUsage {
                    since: b.since.min(created),
                    hours: b.hours + hours,
                },
            });
        }
        Ok(billed)
    }
}
