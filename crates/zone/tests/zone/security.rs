//! The zone's security controls, each tested by repeating the attack it stops
//! (`docs/security.md` lists them): here, secrets at rest and the data dir's modes.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::api_support::{TestZone, pool_body, tenancy};
use orc_zone::store::{SealingKey, sqlite_url};
use orc_zone::zone::{Zone, ZoneConfig, ZoneError};
use reqwest::StatusCode;
use serde_json::json;

const SECRET: &str = "hunter2-zone-secret-value";
const POOLS: &str = "/api/orgs/acme/projects/web/pools";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Every byte of every file under `dir`, so a test can look for a secret anywhere in them.
fn all_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else if path.is_file() {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Attack: read a pool's sensitive param out of the store's files (or a backup of them).
#[tokio::test]
async fn no_store_file_holds_a_sensitive_value_in_clear() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["sensitive_params"] = json!({ "api_key": SECRET });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let changed = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({
                "params": {},
                "sensitive_params": { "api_key": format!("{SECRET}-2") },
                "generation": 1
            }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    // The zone itself reads the value back for the app's slots.
    let pool = z
        .zone
        .store()
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &"svc".parse().unwrap(),
        )
        .await
        .unwrap();
    let app = pool.spec.app.as_ref().unwrap();
    assert_eq!(app.sensitive.0["api_key"], format!("{SECRET}-2"));

    let files = all_bytes(&z.dir());
    assert!(files.iter().any(|(name, _)| name.ends_with("zone.db")));
    for (name, bytes) in &files {
        assert!(!contains(bytes, SECRET), "{name} holds the secret in clear");
    }
}

/// Attack: a store written before sealing existed keeps its secrets in clear; a zone that
/// starts on it seals them, and none is left in the file, its log or its free pages.
#[tokio::test]
async fn values_stored_in_clear_are_sealed_at_start_and_leave_no_trace() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["sensitive_params"] = json!({ "api_key": "to-be-replaced" });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    // Put a value in clear, as a zone before sealing kept it (SQLite takes a second writer).
    let db = z.dir().join("zone.db");
    write_in_clear(&db).await;
    assert!(all_bytes(&z.dir()).iter().any(|(_, b)| contains(b, SECRET)));

    let z = z.restart().await;
    let pool = z
        .zone
        .store()
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &"svc".parse().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(pool.spec.app.unwrap().sensitive.0["api_key"], SECRET);
    for (name, bytes) in all_bytes(&z.dir()) {
        assert!(!contains(&bytes, SECRET), "{name} still holds the secret");
    }
}

/// Writes pool `svc`'s sensitive param in clear, bypassing the store's sealing.
async fn write_in_clear(db: &Path) {
    use sqlx::{Connection as _, Executor as _};
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&sqlite_url(db)).await.unwrap();
    conn.execute("PRAGMA busy_timeout = 10000").await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!(
        "UPDATE pools SET app_sensitive_params = '{{\"api_key\":\"{SECRET}\"}}' \
         WHERE name = 'svc'"
    )))
    .await
    .unwrap();
    conn.close().await.unwrap();
}

/// The error and its sources, one after another.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Attack: start the zone with another sealing key than the one that sealed its store.
#[tokio::test]
async fn a_zone_with_the_wrong_sealing_key_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    zone.shutdown().await;
    let other = tmp.path().join("other-key");
    let (key, _) = SealingKey::load_or_create(&other).unwrap();
    let mut config = ZoneConfig::ephemeral(&dir);
    config.sealing_key_file = Some(other);
    let err = Zone::start(config).await.unwrap_err();
    let text = chain(&err);
    assert!(
        text.contains(&format!("the sealing key given is {}", key.id())),
        "{text}"
    );
    assert!(
        text.contains("start the zone with the key file that sealed them"),
        "{text}"
    );
}

/// Attack: another local user reads the store, the key or the token from the data dir.
#[tokio::test]
async fn a_fresh_data_dir_is_private_and_so_is_every_file_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    assert_eq!(mode(&dir), 0o700);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for wanted in ["zone.db", "sealing-key", "admin-token", "zone-url"] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    zone.shutdown().await;
}

/// Attack: a data dir made by hand (or by an older `orc up`) with 0755 and 0644 files.
#[tokio::test]
async fn an_open_data_dir_is_refused_and_open_files_are_tightened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap_err();
    assert!(matches!(err, ZoneError::DataDirOpen { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "the data dir {0} can be entered or read by other users (mode 0755); make it \
             private with: chmod 700 {0}",
            dir.display()
        )
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "nothing was written into the open dir"
    );

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    zone.shutdown().await;
    for file in ["zone.db", "admin-token"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    for file in ["zone.db", "admin-token", "zone-url", "sealing-key"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    zone.shutdown().await;
}
