//! `orc zone rotate-admin-token`: replaces the token in the zone's `admin-token` file with a
//! new one and revokes the old, through the API, so a zone that is running never stops
//! accepting its operator. The token itself is never printed.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{client, read_secret_file, segment};
use crate::ConnArgs;

/// How long the new admin token lives: the API's maximum.
const ADMIN_TOKEN_DAYS: i64 = 365;

/// Rotates the admin token kept in `<data_dir>/admin-token`.
pub async fn rotate_admin_token(conn: &ConnArgs, data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join(orc_zone::zone::ADMIN_TOKEN_FILE);
    // Fail early, naming the file, when there is no token to rotate.
    read_secret_file(&path)
        .with_context(|| format!("cannot read the admin token from {}", path.display()))?;
    // The token in the file is the one rotated, whatever ORC_TOKEN says.
    let mut conn = conn.clone();
    conn.token_file = Some(path.clone());
    // The zone of this data dir, unless the caller named another way to reach it.
    if conn.url.is_none() {
        conn.url = super::read_trimmed(&data_dir.join(orc_zone::zone::ZONE_URL_FILE));
    }
    let ca = data_dir.join(orc_zone::zone::CA_CERT_FILE);
    if conn.ca_file.is_none() && ca.exists() {
        conn.ca_file = Some(ca);
    }
    let zone = client(&conn)?;
    let me: Value = zone.get("/api/whoami").await?;
    let user = me["user"]["name"]
        .as_str()
        .context("the zone's whoami answer names no user")?
        .to_string();
    let old = me["token_id"]
        .as_str()
        .context("the zone's whoami answer names no token")?
        .to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_millis() as i64;
    let expires_at = now + ADMIN_TOKEN_DAYS * 24 * 3600 * 1000;
    let made: Value = zone
        .post(
            &format!("/api/users/{}/tokens", segment(&user)),
            &json!({ "label": "admin (rotated)", "expires_at": expires_at }),
        )
        .await?;
    let value = made["value"]
        .as_str()
        .context("the zone's answer carries no token value")?;
    orc_zone::zone::write_private_file(&path, value)
        .with_context(|| format!("cannot write the new admin token to {}", path.display()))?;
    let _: Value = zone
        .delete(&format!(
            "/api/users/{}/tokens/{}",
            segment(&user),
            segment(&old)
        ))
        .await
        .context(
            "the new token is in place, but revoking the old one failed; revoke it with the API",
        )?;
    outln!(
        "rotated the admin token of {user}: the new one is in {} (valid {ADMIN_TOKEN_DAYS} days), \
         token {old} is revoked",
        path.display()
    );
    Ok(())
}
