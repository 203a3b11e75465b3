//! The zone's store: one schema on two engines, SQLite (embedded default) and PostgreSQL.
//!
//! Both engines go through sqlx's `Any` driver with one set of portable SQL: every statement
//! uses `$n` placeholders, TEXT/BIGINT columns only, and features both engines share
//! (`RETURNING`, `ON CONFLICT`, partial and expression indexes, `UPDATE … FROM (VALUES …)`).
//! So there is one implementation, and the one store test suite exercises all of it on each
//! engine. `docs/store.md` explains the choice and the schema.
//!
//! Invariants the store keeps:
//! - ids come from one counter row per zone and are never reused (rolled-back writes leave
//!   gaps, which is harmless);
//! - every write of a node's status is a compare-and-set on its version (or expected state):
//!   a stale writer gets [`StoreError::Conflict`] and changes nothing;
//! - writes that change several rows (pool create/resize, ending a node with its usage) run in
//!   one transaction: they happen whole or not at all;
//! - decimals are stored as canonical decimal TEXT and read back with the same scale, so
//!   money round-trips exactly; an unpriced node stores NULL, never zero.
//!
//! Lists are returned in a deterministic order (by id, which is creation order, unless a
//! method says otherwise).
//!
//! This is the only zone crate that talks to a database. It depends on the pure model
//! (`orc-zone-model`, and `orc-app-model` for the rule a secret's name follows) only and must
//! never import the API, the hub, the app supervisor or the controller; they all reach the
//! database through [`Store`], which takes and returns model types only: no row, query or
//! connection leaves this crate (a driver error appears only as the source of a
//! [`StoreError`]).

mod access;
mod agents;
mod apps;
mod billed_usage;
mod certificates;
mod error;
mod events;
mod images;
mod ingress;
mod joins;
mod mesh;
mod nodes;
mod nodes_by_state;
mod pools;
mod providers;
mod registry;
mod rows;
pub mod seal;
mod secrets;
mod sessions;
mod sites;
mod tenancy;
mod usage;

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::AnyConnection;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Any, AnyPool, Executor, SqlSafeStr, Transaction};

use orc_zone_model::{Timestamp, sys_org_id, sys_project_id};

pub use agents::AgentUpdate;
pub use apps::{AppReplicaRow, AppRevisionRow, MESSAGE_CHARS, ReadyReplica, ReplicaChange};
pub use certificates::{AcmeChallenge, CertificateRow, IssuedCertificate};
use error::OperationExt;
pub use error::{Kind, StoreError};
pub use images::ImageManifestRow;
pub use joins::NewJoinToken;
pub use mesh::{
    MeshMember, MeshMemberKind, MeshNode, MeshPoolAddress, MeshProject, MeshSite, NewMeshMember,
};
pub use nodes::{BatchOutcome, StatusWrite};
pub use pools::PoolChange;
pub use seal::{SealError, SealingKey};
pub use secrets::{InvalidSecretName, SecretName, SecretRecord};
pub use sites::{PoolAddress, ProviderSite, SiteInUse};

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// The database engine behind a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Every migration, in order. Each file is portable SQL that runs on both engines; a future
/// migration that needs dialect-specific SQL gets one entry per engine here.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "tenancy", include_str!("../migrations/0001_tenancy.sql")),
    (
        2,
        "providers pools nodes",
        include_str!("../migrations/0002_providers_pools_nodes.sql"),
    ),
    (
        3,
        "events usage",
        include_str!("../migrations/0003_events_usage.sql"),
    ),
    (
        4,
        "lost nodes placement addresses sites",
        include_str!("../migrations/0004_lost_nodes_placement.sql"),
    ),
    (
        5,
        "gateway pool names carry their provider",
        include_str!("../migrations/0005_gateway_pool_names.sql"),
    ),
    (
        6,
        "zone meta",
        include_str!("../migrations/0006_zone_meta.sql"),
    ),
    (
        7,
        "service credentials and provider principals",
        include_str!("../migrations/0007_service_credentials.sql"),
    ),
    (
        8,
        "repeated events count their repeats",
        include_str!("../migrations/0008_event_repeats.sql"),
    ),
    (
        9,
        "refusals may be unplaceable",
        include_str!("../migrations/0009_unplaceable_refusals.sql"),
    ),
    (
        10,
        "token default projects and where nodes went",
        include_str!("../migrations/0010_token_projects_node_whereabouts.sql"),
    ),
    (
        11,
        "join tokens",
        include_str!("../migrations/0011_join_tokens.sql"),
    ),
    (
        12,
        "node agents",
        include_str!("../migrations/0012_node_agents.sql"),
    ),
    (13, "mesh", include_str!("../migrations/0013_mesh.sql")),
    (
        14,
        "access keys",
        include_str!("../migrations/0014_access_keys.sql"),
    ),
    (
        15,
        "passwords and web sessions",
        include_str!("../migrations/0015_web_sessions.sql"),
    ),
    (
        16,
        "app registry",
        include_str!("../migrations/0016_app_registry.sql"),
    ),
    (
        17,
        "providers known by id, bare names the operator's",
        include_str!("../migrations/0017_provider_identity.sql"),
    ),
    (
        18,
        "app blob uploads belong to their org",
        include_str!("../migrations/0018_app_blob_uploads.sql"),
    ),
    (
        19,
        "images: manifests, their references and tags",
        include_str!("../migrations/0019_images.sql"),
    ),
    (
        20,
        "project secrets, sealed",
        include_str!("../migrations/0020_secrets.sql"),
    ),
    (
        21,
        "apps: revisions, deployments' states, replicas' placement",
        include_str!("../migrations/0021_apps.sql"),
    ),
    (
        22,
        "node labels and cordons",
        include_str!("../migrations/0022_node_placement.sql"),
    ),
    (
        23,
        "rollouts: when a revision began and was healthy, draining cordons",
        include_str!("../migrations/0023_rollouts.sql"),
    ),
    (
        24,
        "replicas' addresses in their nodes' workload subnets",
        include_str!("../migrations/0024_replica_addresses.sql"),
    ),
    (
        25,
        "replicas' messages from their nodes, and draining before they stop",
        include_str!("../migrations/0025_replica_messages.sql"),
    ),
    (
        26,
        "which nodes accept public ingress",
        include_str!("../migrations/0026_node_ingress.sql"),
    ),
    (
        27,
        "certificates obtained by ACME, the zone's ACME accounts and challenges",
        include_str!("../migrations/0027_certificates.sql"),
    ),
];

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 27;

fn migrator(up_to: i64) -> Migrator {
    Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .filter(|(version, _, _)| *version <= up_to)
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// Rows per statement in batched writes: well under SQLite's and PostgreSQL's limits on bound
/// parameters (32766 and 65535) at the widest row.
pub(crate) const BATCH_ROWS: usize = 500;

/// A handle on the zone's store. Cheap to clone (a connection pool inside).
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    engine: Engine,
    /// The key sensitive values are sealed with, once [`Store::set_sealing_key`] gave it.
    sealing: Arc<OnceLock<SealingKey>>,
}

impl Store {
    /// Opens the store at `url`, migrates it to the newest schema and makes sure org `sys`
    /// and project `sys/sys` exist. URLs: `sqlite://PATH` (created if missing) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DB`.
    pub async fn open(url: &str) -> StoreResult<Store> {
        let store = Store::connect(url).await?;
        store.migrate().await?;
        store.bootstrap(Timestamp::now()).await?;
        Ok(store)
    }

    /// Opens (creating if needed) a SQLite store in the file at `path`.
    pub async fn open_sqlite_file(path: &Path) -> StoreResult<Store> {
        Store::open(&sqlite_url(path)).await
    }

    /// Connects without migrating (for tools and tests that drive migrations themselves).
    pub async fn connect(url: &str) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let connect_error = |source| StoreError::Connect {
            url: error::redact_url(url),
            source,
        };
        let engine = if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Engine::Postgres
        } else {
            return Err(connect_error(sqlx::Error::Configuration(
                "the store URL must start with sqlite: or postgres:".into(),
            )));
        };
        let options = AnyPoolOptions::new()
            .max_connections(match engine {
                Engine::Sqlite => 4,
                Engine::Postgres => 8,
            })
            .acquire_timeout(Duration::from_secs(30));
        let options = match engine {
            Engine::Sqlite => options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    // WAL lets readers run beside the one writer; NORMAL sync is durable
                    // across process crashes in WAL mode and much faster than FULL.
                    conn.execute("PRAGMA journal_mode = WAL").await?;
                    conn.execute("PRAGMA synchronous = NORMAL").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    // Deleted and overwritten content is zeroed, so a value replaced (a
                    // param resealed, a token revoked) does not linger in free pages.
                    conn.execute("PRAGMA secure_delete = ON").await?;
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                    // 64 MiB of page cache per connection (the default is 2 MiB): a zone's
                    // working set of nodes and their indexes stays in memory.
                    conn.execute("PRAGMA cache_size = -65536").await?;
                    Ok(())
                })
            }),
            Engine::Postgres => options,
        };
        let pool = options.connect(url).await.map_err(connect_error)?;
        Ok(Store {
            pool,
            engine,
            sealing: Arc::new(OnceLock::new()),
        })
    }

    /// The engine behind this store.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Migrates to the newest schema. Applying it again is a no-op.
    pub async fn migrate(&self) -> StoreResult<()> {
        self.migrate_to(SCHEMA_VERSION).await
    }

    /// Migrates up to (and including) `version`.
    pub async fn migrate_to(&self, version: i64) -> StoreResult<()> {
        migrator(version)
            .run_to(version, &self.pool)
            .await
            .map_err(StoreError::Migrate)
    }

    /// The newest applied migration, or `None` on a database never migrated.
    pub async fn schema_version(&self) -> StoreResult<Option<i64>> {
        let exists: i64 = match self.engine {
            Engine::Sqlite => sqlx::query_scalar(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' \
                 AND name = '_sqlx_migrations'",
            ),
            Engine::Postgres => sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'",
            ),
        }
        .fetch_one(&self.pool)
        .await
        .op("read schema version")?;
        if exists == 0 {
            return Ok(None);
        }
        let version: Option<i64> =
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await
                .op("read schema version")?;
        Ok(version)
    }

    /// Makes sure org `sys` and project `sys/sys` exist (with their fixed ids). Idempotent.
    pub async fn bootstrap(&self, now: Timestamp) -> StoreResult<()> {
        let mut tx = self.begin("bootstrap sys org and project").await?;
        sqlx::query(
            "INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(sys_org_id().as_str())
        .bind("sys")
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("bootstrap sys org and project")?;
        sqlx::query(
            "INSERT INTO projects (id, org_id, name, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(sys_project_id().as_str())
        .bind(sys_org_id().as_str())
        .bind("sys")
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("bootstrap sys org and project")?;
        tx.commit().await.op("bootstrap sys org and project")?;
        Ok(())
    }

    /// Closes every connection (waits for those in use).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Starts a write transaction. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so a transaction that reads before it writes cannot fail half way
    /// on a lock upgrade.
    /// `operation` names the write in the error if the transaction cannot start.
    pub(crate) async fn begin(
        &self,
        operation: &'static str,
    ) -> StoreResult<Transaction<'static, Any>> {
        match self.engine {
            Engine::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Engine::Postgres => self.pool.begin().await,
        }
        .op(operation)
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Reserves `count` consecutive counter values on the pool (outside any transaction, so
    /// the counter row is never held locked by a long transaction); returns the first.
    pub async fn allocate_ids(&self, count: u64) -> StoreResult<u64> {
        let mut conn = self.pool.acquire().await.op("allocate ids")?;
        allocate_ids_on(&mut conn, count).await
    }
}

/// Reserves `count` counter values using `conn` (inside its transaction, if any).
pub(crate) async fn allocate_ids_on(conn: &mut AnyConnection, count: u64) -> StoreResult<u64> {
    let count_i = i64::try_from(count).map_err(|_| StoreError::Invalid {
        kind: Kind::Node,
        id: String::new(),
        reason: format!("cannot allocate {count} ids at once"),
    })?;
    let next: i64 = sqlx::query_scalar(
        "UPDATE id_counter SET next_value = next_value + $1 WHERE singleton = 1 \
         RETURNING next_value",
    )
    .bind(count_i)
    .fetch_one(&mut *conn)
    .await
    .op("allocate ids")?;
    let first = next - count_i;
    u64::try_from(first).map_err(|_| StoreError::Corrupt {
        column: "id_counter.next_value".to_string(),
        reason: format!("{next} is below the allocation of {count}"),
    })
}

/// The `sqlite://` URL of a database file (created if missing).
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}
