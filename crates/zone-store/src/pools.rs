//! Pools: desired state a tenant sets (size and spec), and the slots that follow from it.
//!
//! Creating or resizing a pool changes its nodes in the same transaction: every free slot
//! below the size gets a `pending` node due at once, and live nodes in slots at or above a
//! smaller size are turned to `destroying` (due at once). Reconfiguring the spec is a
//! compare-and-set on the pool's generation and bumps it.

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Architecture, Shape};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::error::classify_write;
use super::nodes::insert_nodes;
use super::rows::{
    big, flag, json, opt_parsed, opt_text, parsed, text, time, to_json, uint32, uint64,
};
use super::seal::{SealingKey, is_sealed};
use super::{Engine, Kind, Store, StoreError, StoreResult, allocate_ids_on};
use orc_zone_model::{
    AppSpec, Name, NewPool, Node, NodeId, NodeStatus, Pool, PoolId, PoolSpec, ProjectId,
    SensitiveParams, Timestamp,
};

const POOL_COLUMNS: &str = "id, project_id, name, provider_id, size, vcpus, memory_gib, arch, \
     disks_gib, region_class, os, public, endpoints, app, app_params, app_sensitive_params, \
     generation, deleting, created_at, updated_at, placement, ssh_keys, app_digest";

/// What a resize did to the pool's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolChange {
    pub pool: Pool,
    /// New `pending` nodes, one per free slot below the size, by slot.
    pub created: Vec<Node>,
    /// Live nodes at or above the new size, now `destroying`, by id.
    pub released: Vec<NodeId>,
}

fn arch_word(arch: Architecture) -> &'static str {
    match arch {
        Architecture::X86_64 => "x86_64",
        Architecture::Arm64 => "arm64",
    }
}

fn pool_from(row: &AnyRow, key: Option<&SealingKey>) -> StoreResult<Pool> {
    let arch = match text(row, "pools.arch")?.as_str() {
        "x86_64" => Architecture::X86_64,
        "arm64" => Architecture::Arm64,
        other => {
            return Err(StoreError::Corrupt {
                column: "pools.arch".to_string(),
                reason: format!("{other:?} is not an architecture"),
            });
        }
    };
    let disks_raw = text(row, "pools.disks_gib")?;
    let disks_gib = if disks_raw.is_empty() {
        Vec::new()
    } else {
        disks_raw
            .split(',')
            .map(|d| {
                d.parse::<u32>().map_err(|e| StoreError::Corrupt {
                    column: "pools.disks_gib".to_string(),
                    reason: format!("{d:?}: {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let id: PoolId = parsed(row, "pools.id")?;
    let app = match opt_text(row, "pools.app")? {
        None => None,
        Some(package) => Some(AppSpec {
            package,
            digest: opt_parsed(row, "pools.app_digest")?,
            params: json(row, "pools.app_params")?,
            sensitive: SensitiveParams(open_params(
                &id,
                json(row, "pools.app_sensitive_params")?,
                key,
            )?),
        }),
    };
    Ok(Pool {
        id,
        project_id: parsed(row, "pools.project_id")?,
        name: parsed(row, "pools.name")?,
        size: uint32(row, "pools.size")?,
        spec: PoolSpec {
            provider_id: parsed(row, "pools.provider_id")?,
            shape: Shape {
                vcpus: uint32(row, "pools.vcpus")?,
                memory_gib: uint32(row, "pools.memory_gib")?,
                arch,
                disks_gib,
            },
            region_class: parsed(row, "pools.region_class")?,
            os: parsed(row, "pools.os")?,
            public: flag(row, "pools.public")?,
            endpoints: json(row, "pools.endpoints")?,
            app,
            placement: json(row, "pools.placement")?,
            ssh_keys: json(row, "pools.ssh_keys")?,
        },
        generation: uint64(row, "pools.generation")?,
        deleting: flag(row, "pools.deleting")?,
        created_at: time(row, "pools.created_at")?,
        updated_at: time(row, "pools.updated_at")?,
    })
}

/// The digest a pool's app runs, as the store keeps it.
fn app_digest(spec: &PoolSpec) -> Option<&str> {
    spec.app
        .as_ref()
        .and_then(|app| app.digest.as_ref())
        .map(|d| d.as_str())
}

fn disks_text(disks: &[u32]) -> String {
    disks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn not_found(id: &PoolId) -> StoreError {
    StoreError::NotFound {
        kind: Kind::Pool,
        id: id.to_string(),
    }
}

/// Where a sealed param belongs: the associated data that binds its sealed text to it.
pub(crate) fn param_context(pool: &PoolId, name: &str) -> String {
    format!("pool {pool}/param {name}")
}

/// Seals each sensitive param of pool `id` for the store.
fn seal_params(
    id: &PoolId,
    params: &BTreeMap<String, String>,
    key: Option<&SealingKey>,
) -> StoreResult<String> {
    if params.is_empty() {
        return Ok("{}".to_string());
    }
    let key = key.ok_or(StoreError::NoSealingKey { operation: "write" })?;
    let sealed: BTreeMap<&str, String> = params
        .iter()
        .map(|(name, value)| (name.as_str(), key.seal(&param_context(id, name), value)))
        .collect();
    Ok(to_json(&sealed))
}

/// Opens the sealed params of pool `id`; a value stored before sealing existed is taken as it
/// is (the zone reseals those at start, see [`Store::set_sealing_key`]).
fn open_params(
    id: &PoolId,
    stored: BTreeMap<String, String>,
    key: Option<&SealingKey>,
) -> StoreResult<BTreeMap<String, String>> {
    stored
        .into_iter()
        .map(|(name, text)| {
            if !is_sealed(&text) {
                return Ok((name, text));
            }
            let key = key.ok_or(StoreError::NoSealingKey { operation: "read" })?;
            let plain = key.open(&param_context(id, &name), &text)?;
            Ok((name, plain))
        })
        .collect()
}

async fn pool_on(
    conn: &mut AnyConnection,
    id: &PoolId,
    key: Option<&SealingKey>,
) -> StoreResult<Pool> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {POOL_COLUMNS} FROM pools WHERE id = $1"));
    let row = sqlx::query(sql)
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await
        .op("read pool")?;
    row.as_ref()
        .map(|row| pool_from(row, key))
        .transpose()?
        .ok_or_else(|| not_found(id))
}

/// Brings a pool's nodes in line with `size` (see the module doc), using `conn`'s
/// transaction.
async fn apply_size(
    conn: &mut AnyConnection,
    engine: Engine,
    pool_id: &PoolId,
    size: u32,
    now: Timestamp,
) -> StoreResult<(Vec<Node>, Vec<NodeId>)> {
    let live: Vec<(String, i64)> = sqlx::query_as(
        "SELECT id, slot FROM nodes WHERE pool_id = $1 AND state <> 'ended' ORDER BY slot",
    )
    .bind(pool_id.as_str())
    .fetch_all(&mut *conn)
    .await
    .op("apply pool size")?;
    let occupied: BTreeSet<i64> = live.iter().map(|(_, slot)| *slot).collect();
    let free: Vec<u32> = (0..size)
        .filter(|slot| !occupied.contains(&i64::from(*slot)))
        .collect();

    let created = if free.is_empty() {
        Vec::new()
    } else {
        let first = allocate_ids_on(conn, free.len() as u64).await?;
        let nodes: Vec<Node> = free
            .iter()
            .zip(first..)
            .map(|(slot, counter)| Node {
                id: NodeId::from_counter(counter),
                pool_id: pool_id.clone(),
                slot: *slot,
                status: NodeStatus::pending(now),
                version: 1,
                created_at: now,
                updated_at: now,
            })
            .collect();
        insert_nodes(conn, engine, &nodes).await?;
        nodes
    };

    let released: Vec<NodeId> = sqlx::query_scalar::<_, String>(
        "UPDATE nodes SET state = 'destroying', next_attempt_at = $3, version = version + 1, \
         updated_at = $3 WHERE pool_id = $1 AND slot >= $2 \
         AND state NOT IN ('destroying', 'ended') RETURNING id",
    )
    .bind(pool_id.as_str())
    .bind(i64::from(size))
    .bind(now.millis())
    .fetch_all(&mut *conn)
    .await
    .op("apply pool size")?
    .into_iter()
    .map(|raw| {
        raw.parse::<NodeId>().map_err(|e| StoreError::Corrupt {
            column: "nodes.id".to_string(),
            reason: e.to_string(),
        })
    })
    .collect::<Result<BTreeSet<_>, _>>()?
    .into_iter()
    .collect();
    Ok((created, released))
}

impl Store {
    /// Creates a pool and one `pending` node per slot, in one transaction. Its name is
    /// unique within the project.
    pub async fn create_pool(&self, new: &NewPool, now: Timestamp) -> StoreResult<PoolChange> {
        let mut tx = self.begin("create pool").await?;
        let id = PoolId::from_counter(allocate_ids_on(&mut tx, 1).await?);
        let spec = &new.spec;
        let (app, params, sensitive) = match &spec.app {
            Some(app) => (
                Some(app.package.as_str()),
                to_json(&app.params),
                seal_params(&id, &app.sensitive.0, self.sealing_key())?,
            ),
            None => (None, "{}".to_string(), "{}".to_string()),
        };
        let digest = app_digest(spec);
        sqlx::query(
            "INSERT INTO pools (id, project_id, name, provider_id, size, vcpus, memory_gib, \
             arch, disks_gib, region_class, os, public, endpoints, app, app_params, \
             app_sensitive_params, generation, deleting, created_at, updated_at, placement, \
             ssh_keys, app_digest) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
             $13, $14, $15, $16, 1, 0, $17, $17, $18, $19, $20)",
        )
        .bind(id.as_str())
        .bind(new.project_id.as_str())
        .bind(new.name.as_str())
        .bind(spec.provider_id.as_str())
        .bind(i64::from(new.size))
        .bind(i64::from(spec.shape.vcpus))
        .bind(i64::from(spec.shape.memory_gib))
        .bind(arch_word(spec.shape.arch))
        .bind(disks_text(&spec.shape.disks_gib))
        .bind(spec.region_class.as_str())
        .bind(spec.os.as_str())
        .bind(i64::from(spec.public))
        .bind(to_json(&spec.endpoints))
        .bind(app)
        .bind(params)
        .bind(sensitive)
        .bind(now.millis())
        .bind(to_json(&spec.placement))
        .bind(to_json(&spec.ssh_keys))
        .bind(digest)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            classify_write(
                e,
                "create pool",
                Kind::Pool,
                |_| {
                    (
                        new.name.to_string(),
                        format!(" in project {}", new.project_id),
                    )
                },
                || {
                    format!(
                        "project {} or provider {}",
                        new.project_id, spec.provider_id
                    )
                },
            )
        })?;
        let (created, released) = apply_size(&mut tx, self.engine(), &id, new.size, now).await?;
        tx.commit().await.op("create pool")?;
        Ok(PoolChange {
            pool: Pool {
                id,
                project_id: new.project_id.clone(),
                name: new.name.clone(),
                size: new.size,
                spec: new.spec.clone(),
                generation: 1,
                deleting: false,
                created_at: now,
                updated_at: now,
            },
            created,
            released,
        })
    }

    /// The pool with this id.
    pub async fn get_pool(&self, id: &PoolId) -> StoreResult<Pool> {
        let mut conn = self.pool().acquire().await.op("read pool")?;
        pool_on(&mut conn, id, self.sealing_key()).await
    }

    /// The pool `<org>/<project>/<name>` by names.
    pub async fn pool_by_path(&self, org: &Name, project: &Name, pool: &Name) -> StoreResult<Pool> {
        let columns = POOL_COLUMNS
            .split(", ")
            .map(|c| format!("pl.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {columns} FROM pools pl JOIN projects p ON p.id = pl.project_id \
             JOIN orgs o ON o.id = p.org_id WHERE o.name = $1 AND p.name = $2 AND pl.name = $3"
        ));
        let row = sqlx::query(sql)
            .bind(org.as_str())
            .bind(project.as_str())
            .bind(pool.as_str())
            .fetch_optional(self.pool())
            .await
            .op("find pool by path")?;
        row.as_ref()
            .map(|row| pool_from(row, self.sealing_key()))
            .transpose()?
            .ok_or_else(|| StoreError::NotFound {
                kind: Kind::Pool,
                id: format!("{org}/{project}/{pool}"),
            })
    }

    /// The pools of a project, by name.
    pub async fn list_pools(&self, project_id: &ProjectId) -> StoreResult<Vec<Pool>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {POOL_COLUMNS} FROM pools WHERE project_id = $1 ORDER BY name"
        ));
        sqlx::query(sql)
            .bind(project_id.as_str())
            .fetch_all(self.pool())
            .await
            .op("list pools")?
            .iter()
            .map(|row| pool_from(row, self.sealing_key()))
            .collect()
    }

    /// Every pool of the zone, by id (for the pool reconciler).
    pub async fn list_all_pools(&self) -> StoreResult<Vec<Pool>> {
        let sql = sqlx::AssertSqlSafe(format!("SELECT {POOL_COLUMNS} FROM pools ORDER BY id"));
        sqlx::query(sql)
            .fetch_all(self.pool())
            .await
            .op("list all pools")?
            .iter()
            .map(|row| pool_from(row, self.sealing_key()))
            .collect()
    }

    /// Sets a pool's size and, in the same transaction, creates `pending` nodes for free
    /// slots below it and marks live nodes at or above it `destroying`.
    pub async fn resize_pool(
        &self,
        id: &PoolId,
        size: u32,
        now: Timestamp,
    ) -> StoreResult<PoolChange> {
        let mut tx = self.begin("resize pool").await?;
        // Updating the row first takes its lock (on PostgreSQL), so concurrent resizes of one
        // pool run one after the other and each sees the nodes the other made.
        let resized = sqlx::query(
            "UPDATE pools SET size = $2, updated_at = $3 WHERE id = $1 AND deleting = 0",
        )
        .bind(id.as_str())
        .bind(i64::from(size))
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("resize pool")?;
        let pool = pool_on(&mut tx, id, self.sealing_key()).await?;
        if resized.rows_affected() == 0 {
            return Err(StoreError::Invalid {
                kind: Kind::Pool,
                id: id.to_string(),
                reason: "the pool is being deleted and cannot be resized".to_string(),
            });
        }
        let (created, released) = apply_size(&mut tx, self.engine(), id, size, now).await?;
        tx.commit().await.op("resize pool")?;
        Ok(PoolChange {
            pool,
            created,
            released,
        })
    }

    /// Pools (not being deleted) that have a slot below their size with no live node: a
    /// node there ended without a resize (a lost node that was replaced).
    pub async fn pools_with_free_slots(&self) -> StoreResult<Vec<PoolId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT p.id FROM pools p WHERE p.deleting = 0 AND p.size > (SELECT COUNT(*) \
             FROM nodes n WHERE n.pool_id = p.id AND n.state <> 'ended' AND n.slot < p.size) \
             ORDER BY p.id",
        )
        .fetch_all(self.pool())
        .await
        .op("find pools with free slots")?;
        ids.into_iter()
            .map(|raw| {
                raw.parse::<PoolId>().map_err(|e| StoreError::Corrupt {
                    column: "pools.id".to_string(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Gives every free slot of a pool below its size a new `pending` node, in one
    /// transaction that first takes the pool's row (so it cannot race a resize). A pool
    /// being deleted gets none.
    pub async fn refill_pool(&self, id: &PoolId, now: Timestamp) -> StoreResult<Vec<Node>> {
        let mut tx = self.begin("refill pool").await?;
        let touched = sqlx::query("UPDATE pools SET size = size WHERE id = $1 AND deleting = 0")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .op("refill pool")?;
        if touched.rows_affected() == 0 {
            return Ok(Vec::new());
        }
        let pool = pool_on(&mut tx, id, self.sealing_key()).await?;
        let (created, _) = apply_size(&mut tx, self.engine(), id, pool.size, now).await?;
        tx.commit().await.op("refill pool")?;
        Ok(created)
    }

    /// Replaces a pool's spec if its generation is still `expected_generation`, and bumps
    /// the generation. A stale writer gets [`StoreError::Conflict`].
    pub async fn reconfigure_pool(
        &self,
        id: &PoolId,
        expected_generation: u64,
        spec: &PoolSpec,
        now: Timestamp,
    ) -> StoreResult<Pool> {
        let (app, params, sensitive) = match &spec.app {
            Some(app) => (
                Some(app.package.as_str()),
                to_json(&app.params),
                seal_params(id, &app.sensitive.0, self.sealing_key())?,
            ),
            None => (None, "{}".to_string(), "{}".to_string()),
        };
        let digest = app_digest(spec);
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE pools SET provider_id = $3, vcpus = $4, memory_gib = $5, arch = $6, \
             disks_gib = $7, region_class = $8, os = $9, public = $10, endpoints = $11, \
             app = $12, app_params = $13, app_sensitive_params = $14, \
             generation = generation + 1, updated_at = $15, placement = $16, ssh_keys = $17, \
             app_digest = $18 WHERE id = $1 AND generation = $2 RETURNING {POOL_COLUMNS}"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .bind(big(expected_generation))
            .bind(spec.provider_id.as_str())
            .bind(i64::from(spec.shape.vcpus))
            .bind(i64::from(spec.shape.memory_gib))
            .bind(arch_word(spec.shape.arch))
            .bind(disks_text(&spec.shape.disks_gib))
            .bind(spec.region_class.as_str())
            .bind(spec.os.as_str())
            .bind(i64::from(spec.public))
            .bind(to_json(&spec.endpoints))
            .bind(app)
            .bind(params)
            .bind(sensitive)
            .bind(now.millis())
            .bind(to_json(&spec.placement))
            .bind(to_json(&spec.ssh_keys))
            .bind(digest)
            .fetch_optional(self.pool())
            .await
            .map_err(|e| {
                classify_write(
                    e,
                    "reconfigure pool",
                    Kind::Pool,
                    |_| (id.to_string(), String::new()),
                    || format!("provider {}", spec.provider_id),
                )
            })?;
        match row {
            Some(row) => pool_from(&row, self.sealing_key()),
            None => {
                let current = self.get_pool(id).await?;
                Err(StoreError::Conflict {
                    kind: Kind::Pool,
                    id: id.to_string(),
                    expected: format!("generation {expected_generation}"),
                    found: format!("generation {}", current.generation),
                })
            }
        }
    }

    /// Marks a pool for deletion: its size becomes 0 and, in the same transaction, its live
    /// nodes turn `destroying`. The pool row stays until [`Store::delete_pool`].
    pub async fn mark_pool_deleting(&self, id: &PoolId, now: Timestamp) -> StoreResult<PoolChange> {
        let mut tx = self.begin("mark pool deleting").await?;
        sqlx::query("UPDATE pools SET size = 0, deleting = 1, updated_at = $2 WHERE id = $1")
            .bind(id.as_str())
            .bind(now.millis())
            .execute(&mut *tx)
            .await
            .op("mark pool deleting")?;
        let pool = pool_on(&mut tx, id, self.sealing_key()).await?;
        let (created, released) = apply_size(&mut tx, self.engine(), id, 0, now).await?;
        tx.commit().await.op("mark pool deleting")?;
        Ok(PoolChange {
            pool,
            created,
            released,
        })
    }

    /// Deletes a pool marked deleting whose nodes have all ended, with those nodes (usage
    /// lines and events keep their ids). Refused while any node is live.
    pub async fn delete_pool(&self, id: &PoolId) -> StoreResult<()> {
        let mut tx = self.begin("delete pool").await?;
        if !pool_on(&mut tx, id, self.sealing_key()).await?.deleting {
            return Err(StoreError::Invalid {
                kind: Kind::Pool,
                id: id.to_string(),
                reason: "mark the pool deleting before deleting it".to_string(),
            });
        }
        let live: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM nodes WHERE pool_id = $1 AND state <> 'ended'",
        )
        .bind(id.as_str())
        .fetch_one(&mut *tx)
        .await
        .op("delete pool")?;
        if live > 0 {
            return Err(StoreError::Invalid {
                kind: Kind::Pool,
                id: id.to_string(),
                reason: format!("{live} node(s) are not ended yet"),
            });
        }
        // What refers to the pool's nodes goes with them.
        for table in ["node_agents", "join_tokens"] {
            let sql = sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE node_id IN (SELECT id FROM nodes WHERE pool_id = $1)"
            ));
            sqlx::query(sql)
                .bind(id.as_str())
                .execute(&mut *tx)
                .await
                .op("delete pool")?;
        }
        sqlx::query("DELETE FROM nodes WHERE pool_id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .op("delete pool")?;
        sqlx::query("DELETE FROM pool_addresses WHERE pool_id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .op("delete pool")?;
        sqlx::query("DELETE FROM pools WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .op("delete pool")?;
        tx.commit().await.op("delete pool")?;
        Ok(())
    }
}
