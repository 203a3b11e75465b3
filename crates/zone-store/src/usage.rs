//! Usage (invoice) lines: per project and month, one line per (pool, node, description).
//!
//! Hours, rates and amounts are decimals stored as TEXT and added in Rust with exact
//! decimal arithmetic; recording usage for an existing line adds to it.

use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::nodes::{period_from, period_word};
use super::rows::{decimal, opt_parsed, parsed, text, time};
use super::{Kind, Store, StoreError, StoreResult, allocate_ids_on};
use orc_common::Money;
use orc_zone_model::{Month, NewUsage, ProjectId, Timestamp, UsageLine, UsageLineId};

const USAGE_COLUMNS: &str = "id, project_id, month, pool_id, node_id, description, hours, \
     rate_amount, rate_currency, rate_period, amount, created_at, updated_at";

fn usage_from(row: &AnyRow) -> StoreResult<UsageLine> {
    Ok(UsageLine {
        id: parsed(row, "usage_lines.id")?,
        project_id: parsed(row, "usage_lines.project_id")?,
        month: parsed(row, "usage_lines.month")?,
        pool_id: opt_parsed(row, "usage_lines.pool_id")?,
        node_id: opt_parsed(row, "usage_lines.node_id")?,
        description: text(row, "usage_lines.description")?,
        hours: decimal(row, "usage_lines.hours")?,
        rate: Money::new(
            decimal(row, "usage_lines.rate_amount")?,
            parsed(row, "usage_lines.rate_currency")?,
            period_from(
                "usage_lines.rate_period",
                &text(row, "usage_lines.rate_period")?,
            )?,
        ),
        amount: decimal(row, "usage_lines.amount")?,
        created_at: time(row, "usage_lines.created_at")?,
        updated_at: time(row, "usage_lines.updated_at")?,
    })
}

/// Adds usage to its line (creating the line on first use), using `conn`'s transaction.
pub(crate) async fn record_usage_on(
    conn: &mut AnyConnection,
    usage: &NewUsage,
    now: Timestamp,
) -> StoreResult<UsageLine> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {USAGE_COLUMNS} FROM usage_lines WHERE project_id = $1 AND month = $2 \
         AND COALESCE(pool_id, '') = $3 AND COALESCE(node_id, '') = $4 AND description = $5"
    ));
    let existing = sqlx::query(sql)
        .bind(usage.project_id.as_str())
        .bind(usage.month.as_str())
        .bind(usage.pool_id.as_ref().map_or("", |p| p.as_str()))
        .bind(usage.node_id.as_ref().map_or("", |n| n.as_str()))
        .bind(usage.description.as_str())
        .fetch_optional(&mut *conn)
        .await
        .op("record usage")?;
    match existing {
        Some(row) => {
            let mut line = usage_from(&row)?;
            if line.rate != usage.rate {
                return Err(StoreError::Invalid {
                    kind: Kind::UsageLine,
                    id: line.id.to_string(),
                    reason: format!(
                        "the line is at rate {} and cannot take usage at rate {}",
                        line.rate, usage.rate
                    ),
                });
            }
            let overflow = || StoreError::Invalid {
                kind: Kind::UsageLine,
                id: line.id.to_string(),
                reason: "hours or amount overflow".to_string(),
            };
            let hours = line.hours.checked_add(usage.hours).ok_or_else(overflow)?;
            let amount = line.amount.checked_add(usage.amount).ok_or_else(overflow)?;
            sqlx::query(
                "UPDATE usage_lines SET hours = $2, amount = $3, updated_at = $4 WHERE id = $1",
            )
            .bind(line.id.as_str())
            .bind(hours.to_string())
            .bind(amount.to_string())
            .bind(now.millis())
            .execute(&mut *conn)
            .await
            .op("record usage")?;
            line.hours = hours;
            line.amount = amount;
            line.updated_at = now;
            Ok(line)
        }
        None => {
            let id = UsageLineId::from_counter(allocate_ids_on(conn, 1).await?);
            sqlx::query(
                "INSERT INTO usage_lines (id, project_id, month, pool_id, node_id, description, \
                 hours, rate_amount, rate_currency, rate_period, amount, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
            )
            .bind(id.as_str())
            .bind(usage.project_id.as_str())
            .bind(usage.month.as_str())
            .bind(usage.pool_id.as_ref().map(|p| p.as_str()))
            .bind(usage.node_id.as_ref().map(|n| n.as_str()))
            .bind(usage.description.as_str())
            .bind(usage.hours.to_string())
            .bind(usage.rate.amount.to_string())
            .bind(usage.rate.currency.to_string())
            .bind(period_word(usage.rate.period))
            .bind(usage.amount.to_string())
            .bind(now.millis())
            .execute(&mut *conn)
            .await
            .op("record usage")?;
            Ok(UsageLine {
                id,
                project_id: usage.project_id.clone(),
                month: usage.month.clone(),
                pool_id: usage.pool_id.clone(),
                node_id: usage.node_id.clone(),
                description: usage.description.clone(),
                hours: usage.hours,
                rate: usage.rate,
                amount: usage.amount,
                created_at: now,
                updated_at: now,
            })
        }
    }
}

impl Store {
    /// Adds usage to its line, creating the line on first use. A line keeps one rate:
    /// usage at another rate is refused (it belongs on another line).
    pub async fn record_usage(&self, usage: &NewUsage, now: Timestamp) -> StoreResult<UsageLine> {
        let mut tx = self.begin("record usage").await?;
        let line = record_usage_on(&mut tx, usage, now).await?;
        tx.commit().await.op("record usage")?;
        Ok(line)
    }

    /// A project's usage lines for a month, by id.
    pub async fn list_usage(
        &self,
        project_id: &ProjectId,
        month: &Month,
    ) -> StoreResult<Vec<UsageLine>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {USAGE_COLUMNS} FROM usage_lines WHERE project_id = $1 AND month = $2 \
             ORDER BY id"
        ));
        sqlx::query(sql)
            .bind(project_id.as_str())
            .bind(month.as_str())
            .fetch_all(self.pool())
            .await
            .op("list usage")?
            .iter()
            .map(usage_from)
            .collect()
    }
}
