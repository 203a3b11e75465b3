//! Test databases: a SQLite file in a temp dir, or a fresh PostgreSQL database per test on
//! the server named by `ORC_TEST_POSTGRES_URL` (dropped again when the test ends, pass or
//! fail), so tests run in parallel without seeing each other.

use std::sync::atomic::{AtomicU64, Ordering};

use orc_zone_store::{SealingKey, Store, sqlite_url};
use sqlx::{AnyConnection, Connection, Executor};

/// Environment variable naming the PostgreSQL server the tests use.
pub const POSTGRES_ENV: &str = "ORC_TEST_POSTGRES_URL";

/// A database for one test.
pub struct TestDb {
    pub url: String,
    /// The sealing key every store opened on this database is given.
    pub key: SealingKey,
    _dir: Option<tempfile::TempDir>,
    postgres: Option<PostgresDb>,
}

struct PostgresDb {
    admin_url: String,
    name: String,
}

impl TestDb {
    /// A store on this database, migrated and bootstrapped.
    pub async fn store(&self) -> Store {
        let store = Store::open(&self.url).await.expect("open store");
        store
            .set_sealing_key(self.key.clone())
            .await
            .expect("sealing key");
        store
    }

    /// A store on this database, not migrated.
    pub async fn bare(&self) -> Store {
        Store::connect(&self.url).await.expect("connect store")
    }

    /// A raw connection, to look at what is stored.
    pub async fn raw(&self) -> AnyConnection {
        sqlx::any::install_default_drivers();
        AnyConnection::connect(&self.url)
            .await
            .expect("raw connection")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(pg) = self.postgres.take() else {
            return;
        };
        // Runs on its own thread and runtime: works during a panic and inside the test's
        // runtime alike.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                sqlx::any::install_default_drivers();
                let mut conn = AnyConnection::connect(&pg.admin_url).await?;
                let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", pg.name);
                conn.execute(sqlx::AssertSqlSafe(sql)).await?;
                conn.close().await
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop test database: {e}");
        }
    }
}

/// A SQLite database in a fresh temp dir.
pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = sqlite_url(&dir.path().join("zone.db"));
    TestDb {
        key: SealingKey::generate(),
        url,
        _dir: Some(dir),
        postgres: None,
    }
}

/// A fresh database on the PostgreSQL server of `ORC_TEST_POSTGRES_URL`. Fails the test
/// (never skips it) when the variable is not set.
pub async fn postgres() -> TestDb {
    let admin_url = match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "{POSTGRES_ENV} is not set. The store tests run on PostgreSQL too; start a \
             throwaway server and point the tests at it with:\n    \
             eval \"$(crates/zone/scripts/start-test-postgres.sh)\"\n\
             (or set {POSTGRES_ENV}=postgres://USER:PASSWORD@127.0.0.1:PORT/DB for a role \
             with CREATEDB)"
        ),
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "orc_t_{}_{}_{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    );
    sqlx::any::install_default_drivers();
    let mut conn = AnyConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {POSTGRES_ENV}: {e}"));
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
    conn.close().await.expect("close admin connection");
    let url = replace_database(&admin_url, &name);
    TestDb {
        key: SealingKey::generate(),
        url,
        _dir: None,
        postgres: Some(PostgresDb { admin_url, name }),
    }
}

/// `url` with its database path replaced by `name` (query string kept).
fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{name}{query}", &base[..host_end])
}

#[test]
fn database_names_replace_the_path() {
    assert_eq!(
        replace_database(
            "postgres://u:p@127.0.0.1:5432/orc_test?sslmode=disable",
            "x"
        ),
        "postgres://u:p@127.0.0.1:5432/x?sslmode=disable"
    );
    assert_eq!(replace_database("postgres://u@h", "x"), "postgres://u@h/x");
}
