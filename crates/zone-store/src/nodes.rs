//! Nodes: the reconcilers' working set.
//!
//! A node's status is written only by compare-and-set: the write names the version (or
//! state) it expects, and a node that moved on in between is left untouched and reported as
//! [`StoreError::Conflict`]. Batches of writes run in one transaction as multi-row
//! `UPDATE … FROM (VALUES …)` statements of up to [`BATCH_ROWS`] rows, so a pass over
//! 10,000 nodes costs a few dozen statements. Each write in a batch succeeds or is refused
//! on its own; refusals never stop the others.
//!
//! Due nodes are read through the partial index on `(next_attempt_at, id)`.

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Money, Period, RefusalKind};
use sqlx::AnyConnection;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, AssertSqlSafe};

use super::error::OperationExt;
use super::rows::{big, decimal, int, json, opt_parsed, opt_text, opt_time, parsed, text, time};
use super::rows::{to_json, uint32, uint64};
use super::usage::record_usage_on;
use super::{BATCH_ROWS, Engine, Kind, Store, StoreError, StoreResult};
use orc_zone_model::{
    Expected, NewUsage, Node, NodeId, NodeState, NodeStatus, PoolId, Timestamp, Whereabouts,
};

pub(crate) const NODE_COLUMNS: &str = "id, pool_id, slot, state, state_words, refusal, site, \
     instance_ref, addresses, price_amount, price_currency, price_period, markup, attempts, \
     next_attempt_at, quote_token, version, created_at, updated_at, ended_at, lost_at, \
     placed_cloud, placed_location, placed_plan";

/// Number of status columns bound by [`bind_status`].
const STATUS_COLUMNS: usize = 18;
/// The status columns, in [`bind_status`] order.
const STATUS_NAMES: [&str; STATUS_COLUMNS] = [
    "state",
    "state_words",
    "refusal",
    "site",
    "instance_ref",
    "addresses",
    "price_amount",
    "price_currency",
    "price_period",
    "markup",
    "attempts",
    "next_attempt_at",
    "quote_token",
    "ended_at",
    "lost_at",
    "placed_cloud",
    "placed_location",
    "placed_plan",
];

/// One compare-and-set write of a node's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusWrite {
    pub id: NodeId,
    pub expected: Expected,
    pub status: NodeStatus,
}

/// What a batch of status writes did.
#[derive(Debug)]
pub struct BatchOutcome {
    /// Nodes written, with their new versions, by id.
    pub updated: Vec<Node>,
    /// Writes refused, in input order: [`StoreError::Conflict`] for a node that moved on,
    /// [`StoreError::NotFound`] for one that does not exist.
    pub refused: Vec<StoreError>,
}

pub(crate) fn period_word(period: Period) -> &'static str {
    match period {
        Period::Hour => "hour",
        Period::Month => "month",
        Period::Once => "once",
    }
}

pub(crate) fn period_from(column: &str, word: &str) -> StoreResult<Period> {
    match word {
        "hour" => Ok(Period::Hour),
        "month" => Ok(Period::Month),
        "once" => Ok(Period::Once),
        other => Err(StoreError::Corrupt {
            column: column.to_string(),
            reason: format!("{other:?} is not a period"),
        }),
    }
}

pub(crate) fn node_from(row: &AnyRow) -> StoreResult<Node> {
    let price = match (
        opt_text(row, "nodes.price_amount")?,
        opt_text(row, "nodes.price_currency")?,
        opt_text(row, "nodes.price_period")?,
    ) {
        (Some(_), Some(currency), Some(period)) => Some(Money::new(
            decimal(row, "nodes.price_amount")?,
            currency.parse().map_err(|e| StoreError::Corrupt {
                column: "nodes.price_currency".to_string(),
                reason: format!("{e}"),
            })?,
            period_from("nodes.price_period", &period)?,
        )),
        (None, None, None) => None,
        _ => {
            return Err(StoreError::Corrupt {
                column: "nodes.price_amount".to_string(),
                reason: "price amount, currency and period are not all set or all NULL".to_string(),
            });
        }
    };
    let markup = match opt_text(row, "nodes.markup")? {
        Some(_) => Some(decimal(row, "nodes.markup")?),
        None => None,
    };
    Ok(Node {
        id: parsed(row, "nodes.id")?,
        pool_id: parsed(row, "nodes.pool_id")?,
        slot: uint32(row, "nodes.slot")?,
        status: NodeStatus {
            state: parsed(row, "nodes.state")?,
            state_words: opt_text(row, "nodes.state_words")?,
            refusal: opt_parsed(row, "nodes.refusal")?,
            site: opt_text(row, "nodes.site")?,
            instance_ref: opt_text(row, "nodes.instance_ref")?,
            addresses: json(row, "nodes.addresses")?,
            price,
            markup,
            attempts: uint32(row, "nodes.attempts")?,
            next_attempt_at: opt_time(row, "nodes.next_attempt_at")?,
            quote_token: opt_text(row, "nodes.quote_token")?,
            ended_at: opt_time(row, "nodes.ended_at")?,
            lost_at: opt_time(row, "nodes.lost_at")?,
            placed: match (
                opt_text(row, "nodes.placed_cloud")?,
                opt_text(row, "nodes.placed_location")?,
                opt_text(row, "nodes.placed_plan")?,
            ) {
                (Some(cloud), location, plan) => Some(Whereabouts {
                    cloud,
                    location: location.unwrap_or_default(),
                    plan: plan.unwrap_or_default(),
                }),
                (None, _, _) => None,
            },
        },
        version: uint64(row, "nodes.version")?,
        created_at: time(row, "nodes.created_at")?,
        updated_at: time(row, "nodes.updated_at")?,
    })
}

type AnyQuery<'q> = Query<'q, Any, AnyArguments>;

/// Binds the [`STATUS_COLUMNS`] status values in [`STATUS_NAMES`] order.
fn bind_status<'q>(query: AnyQuery<'q>, status: &NodeStatus) -> AnyQuery<'q> {
    let (amount, currency, period) = match &status.price {
        Some(price) => (
            Some(price.amount.to_string()),
            Some(price.currency.to_string()),
            Some(period_word(price.period)),
        ),
        None => (None, None, None),
    };
    query
        .bind(status.state.as_str())
        .bind(status.state_words.clone())
        .bind(status.refusal.map(RefusalKind::as_str))
        .bind(status.site.clone())
        .bind(status.instance_ref.clone())
        .bind(to_json(&status.addresses))
        .bind(amount)
        .bind(currency)
        .bind(period)
        .bind(status.markup.map(|m| m.to_string()))
        .bind(i64::from(status.attempts))
        .bind(status.next_attempt_at.map(Timestamp::millis))
        .bind(status.quote_token.clone())
        .bind(status.ended_at.map(Timestamp::millis))
        .bind(status.lost_at.map(Timestamp::millis))
        .bind(status.placed.as_ref().map(|p| p.cloud.clone()))
        .bind(status.placed.as_ref().map(|p| p.location.clone()))
        .bind(status.placed.as_ref().map(|p| p.plan.clone()))
}

/// Parameter `n` (1-based) of a generated statement. Generated statements use their
/// parameters in textual order 1, 2, 3, …, so SQLite gets anonymous `?`s: sqlx looks up the
/// name of every numbered or named SQLite parameter (`?n`, `$n`), and SQLite finds a name by
/// a linear scan, which makes a statement with thousands of them quadratic.
pub(crate) fn param(engine: Engine, n: usize) -> String {
    match engine {
        Engine::Sqlite => "?".to_string(),
        Engine::Postgres => format!("${n}"),
    }
}

/// `($a, $a+1, …)` groups for `rows` rows of `width` parameters, numbered from `first`.
pub(crate) fn placeholders(engine: Engine, rows: usize, width: usize, first: usize) -> String {
    let mut sql = String::with_capacity(rows * width * 5);
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for col in 0..width {
            if col > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&param(engine, first + row * width + col));
        }
        sql.push(')');
    }
    sql
}

fn check_status(id: &NodeId, status: &NodeStatus) -> StoreResult<()> {
    let ended = status.state == NodeState::Ended;
    if ended != status.ended_at.is_some() {
        return Err(StoreError::Invalid {
            kind: Kind::Node,
            id: id.to_string(),
            reason: format!(
                "state {} with ended_at {}: ended_at must be set exactly when the state is ended",
                status.state,
                if status.ended_at.is_some() {
                    "set"
                } else {
                    "unset"
                }
            ),
        });
    }
    Ok(())
}

/// Inserts nodes in multi-row statements, using `conn`'s transaction.
pub(crate) async fn insert_nodes(
    conn: &mut AnyConnection,
    engine: Engine,
    nodes: &[Node],
) -> StoreResult<()> {
    const WIDTH: usize = 6 + STATUS_COLUMNS;
    for node in nodes {
        check_status(&node.id, &node.status)?;
    }
    for chunk in nodes.chunks(BATCH_ROWS) {
        let sql = format!(
            "INSERT INTO nodes (id, pool_id, slot, version, created_at, updated_at, {}) VALUES {}",
            STATUS_NAMES.join(", "),
            placeholders(engine, chunk.len(), WIDTH, 1)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for node in chunk {
            query = query
                .bind(node.id.as_str())
                .bind(node.pool_id.as_str())
                .bind(i64::from(node.slot))
                .bind(big(node.version))
                .bind(node.created_at.millis())
                .bind(node.updated_at.millis());
            query = bind_status(query, &node.status);
        }
        query.execute(&mut *conn).await.map_err(|e| {
            super::error::classify_write(
                e,
                "insert nodes",
                Kind::Node,
                |_| {
                    let slots: Vec<String> = chunk.iter().map(|n| n.slot.to_string()).collect();
                    (slots.join(","), format!(" in pool {}", chunk[0].pool_id))
                },
                || format!("pool {}", chunk[0].pool_id),
            )
        })?;
    }
    Ok(())
}

/// Applies status writes with compare-and-set, using `conn` (inside a transaction).
async fn write_statuses(
    conn: &mut AnyConnection,
    engine: Engine,
    writes: &[StatusWrite],
    now: Timestamp,
) -> StoreResult<BatchOutcome> {
    const WIDTH: usize = 3 + STATUS_COLUMNS;
    let mut seen = BTreeSet::new();
    for write in writes {
        check_status(&write.id, &write.status)?;
        if !seen.insert(&write.id) {
            return Err(StoreError::Invalid {
                kind: Kind::Node,
                id: write.id.to_string(),
                reason: "written twice in one batch".to_string(),
            });
        }
    }
    let set: Vec<String> = STATUS_NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| format!("{name} = v.column{}", i + 4))
        .collect();
    let mut updated = Vec::with_capacity(writes.len());
    for chunk in writes.chunks(BATCH_ROWS) {
        let sql = format!(
            "UPDATE nodes SET {}, version = version + 1, updated_at = {} \
             FROM (VALUES {}) AS v \
             WHERE nodes.id = v.column1 \
             AND (v.column2 IS NULL OR nodes.version = v.column2) \
             AND (v.column3 IS NULL OR nodes.state = v.column3) \
             RETURNING id, pool_id, slot, version, created_at",
            set.join(", "),
            param(engine, 1),
            placeholders(engine, chunk.len(), WIDTH, 2)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(now.millis());
        for write in chunk {
            let (version, state) = match write.expected {
                Expected::Version(v) => (Some(big(v)), None),
                Expected::State(s) => (None, Some(s.as_str())),
            };
            query = query.bind(write.id.as_str()).bind(version).bind(state);
            query = bind_status(query, &write.status);
        }
        // Only the columns the write did not set come back; the status is the one written.
        let by_id: BTreeMap<&str, &StatusWrite> =
            chunk.iter().map(|w| (w.id.as_str(), w)).collect();
        for row in query
            .fetch_all(&mut *conn)
            .await
            .op("write node statuses")?
        {
            let id: NodeId = parsed(&row, "nodes.id")?;
            let Some(write) = by_id.get(id.as_str()) else {
                return Err(StoreError::Corrupt {
                    column: "nodes.id".to_string(),
                    reason: format!("{id} came back from a batch that did not write it"),
                });
            };
            updated.push(Node {
                pool_id: parsed(&row, "nodes.pool_id")?,
                slot: uint32(&row, "nodes.slot")?,
                status: write.status.clone(),
                version: uint64(&row, "nodes.version")?,
                created_at: time(&row, "nodes.created_at")?,
                updated_at: now,
                id,
            });
        }
    }
    updated.sort_by(|a, b| a.id.cmp(&b.id));

    let done: BTreeSet<&NodeId> = updated.iter().map(|n| &n.id).collect();
    let missed: Vec<&StatusWrite> = writes.iter().filter(|w| !done.contains(&w.id)).collect();
    let mut found: BTreeMap<String, (i64, String)> = BTreeMap::new();
    for chunk in missed.chunks(BATCH_ROWS) {
        let sql = format!(
            "SELECT id, version, state FROM nodes WHERE id IN ({})",
            (1..=chunk.len())
                .map(|i| param(engine, i))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for write in chunk {
            query = query.bind(write.id.as_str());
        }
        for row in query
            .fetch_all(&mut *conn)
            .await
            .op("write node statuses")?
        {
            found.insert(
                text(&row, "nodes.id")?,
                (int(&row, "nodes.version")?, text(&row, "nodes.state")?),
            );
        }
    }
    let refused = missed
        .into_iter()
        .map(|write| match found.get(write.id.as_str()) {
            Some((version, state)) => {
                let (expected, found) = match write.expected {
                    Expected::Version(v) => (format!("version {v}"), format!("version {version}")),
                    Expected::State(s) => (format!("state {s}"), format!("state {state}")),
                };
                StoreError::Conflict {
                    kind: Kind::Node,
                    id: write.id.to_string(),
                    expected,
                    found,
                }
            }
            None => StoreError::NotFound {
                kind: Kind::Node,
                id: write.id.to_string(),
            },
        })
        .collect();
    Ok(BatchOutcome { updated, refused })
}

async fn write_one(
    conn: &mut AnyConnection,
    engine: Engine,
    id: &NodeId,
    expected: Expected,
    status: &NodeStatus,
    now: Timestamp,
) -> StoreResult<Node> {
    let write = StatusWrite {
        id: id.clone(),
        expected,
        status: status.clone(),
    };
    let mut outcome = write_statuses(conn, engine, std::slice::from_ref(&write), now).await?;
    match (outcome.updated.pop(), outcome.refused.pop()) {
        (Some(node), _) => Ok(node),
        (None, Some(refusal)) => Err(refusal),
        (None, None) => Err(StoreError::NotFound {
            kind: Kind::Node,
            id: id.to_string(),
        }),
    }
}

async fn node_on(conn: &mut AnyConnection, id: &NodeId) -> StoreResult<Node> {
    let sql = format!("SELECT {NODE_COLUMNS} FROM nodes WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await
        .op("read node")?;
    row.as_ref()
        .map(node_from)
        .transpose()?
        .ok_or_else(|| StoreError::NotFound {
            kind: Kind::Node,
            id: id.to_string(),
        })
}

impl Store {
    /// The node with this id.
    pub async fn get_node(&self, id: &NodeId) -> StoreResult<Node> {
        let mut conn = self.pool().acquire().await.op("read node")?;
        node_on(&mut conn, id).await
    }

    /// A pool's nodes by slot (then id); ended nodes only when `include_ended`.
    pub async fn list_nodes_by_pool(
        &self,
        pool_id: &PoolId,
        include_ended: bool,
    ) -> StoreResult<Vec<Node>> {
        let filter = if include_ended {
            ""
        } else {
            " AND state <> 'ended'"
        };
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes WHERE pool_id = $1{filter} ORDER BY slot, id"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(pool_id.as_str())
            .fetch_all(self.pool())
            .await
            .op("list nodes of pool")?
            .iter()
            .map(node_from)
            .collect()
    }

    /// Up to `limit` nodes whose next attempt is at or before `now`, earliest first (ties by
    /// id). Nodes with no next attempt are never due.
    pub async fn nodes_due(&self, now: Timestamp, limit: u32) -> StoreResult<Vec<Node>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes WHERE next_attempt_at IS NOT NULL \
             AND next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $2"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(now.millis())
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .op("read due nodes")?
            .iter()
            .map(node_from)
            .collect()
    }

    /// Replaces a node's status if it is still as `expected`; returns the node with its new
    /// version. A stale writer gets [`StoreError::Conflict`] and changes nothing.
    pub async fn update_node_state(
        &self,
        id: &NodeId,
        expected: Expected,
        status: &NodeStatus,
        now: Timestamp,
    ) -> StoreResult<Node> {
        let mut conn = self.pool().acquire().await.op("update node state")?;
        write_one(&mut conn, self.engine(), id, expected, status, now).await
    }

    /// Applies many compare-and-set status writes in one transaction, batched. Each write
    /// is applied or refused on its own (see [`BatchOutcome`]); an invalid write (a status
    /// that breaks an invariant, a node written twice) refuses the whole batch.
    pub async fn update_node_states(
        &self,
        writes: &[StatusWrite],
        now: Timestamp,
    ) -> StoreResult<BatchOutcome> {
        let mut tx = self.begin("update node states").await?;
        let outcome = write_statuses(&mut tx, self.engine(), writes, now).await?;
        tx.commit().await.op("update node states")?;
        Ok(outcome)
    }

    /// Ends a node (if it is still as `expected`) and records its final usage, in one
    /// transaction: either both happen or neither. The node keeps its other fields for
    /// history; it stops being due.
    pub async fn end_node(
        &self,
        id: &NodeId,
        expected: Expected,
        usage: Option<&NewUsage>,
        now: Timestamp,
    ) -> StoreResult<Node> {
        let mut tx = self.begin("end node").await?;
        let mut status = node_on(&mut tx, id).await?.status;
        status.state = NodeState::Ended;
        status.ended_at = Some(now);
        status.next_attempt_at = None;
        let node = write_one(&mut tx, self.engine(), id, expected, &status, now).await?;
        if let Some(usage) = usage {
            record_usage_on(&mut tx, usage, now).await?;
        }
        tx.commit().await.op("end node")?;
        Ok(node)
    }
}
