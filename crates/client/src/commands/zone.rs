//! `orc zone rotate-admin-token`: replaces the token in the zone's `admin-token` file with a
//! new one and revokes the old, through the API, so a zone that is running never stops
//! accepting its operator. The token itself is never printed. `orc zone access-keys` and
//! `orc zone rotate-access-key`: the access edge's signing keys. `orc zone ca`: the zone's
//! CA certificate, read from its data dir on the zone's machine.

use std::path::PathBuf;
use std::time::Duration;

use orc_zone_api_types::data_dir::{
    ADMIN_TOKEN_FILE, CA_CERT_FILE, ZONE_URL_FILE, default_data_dir, write_private_file,
};
use orc_zone_api_types::views::{
    AccessKeyView, CreateToken, NewTokenView, RotateAccessKey, RotatedAccessKeyView, WhoAmIView,
};

use anyhow::Context as _;

use super::{client, read_secret_file, segment};
use crate::ConnArgs;
use crate::table::Table;

/// How long the new admin token lives: the API's maximum.
const ADMIN_TOKEN_DAYS: i64 = 365;

/// `orc zone ca`: the CA certificate on stdout, so `orc zone ca > zone-ca.pem` copies it.
pub fn print_ca(data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = data_dir.unwrap_or_else(default_data_dir);
    let path = dir.join(CA_CERT_FILE);
    let ca = orc_tls::PinnedCa::from_file(&path).with_context(|| {
        format!(
            "no zone CA in {}: a zone makes it on its first start (unless it runs with --plain)",
            dir.display()
        )
    })?;
    out!("{}", ca.pem());
    eprintln!("fingerprint {}", ca.fingerprint());
    Ok(())
}

/// Rotates the admin token kept in `<data_dir>/admin-token` (the default data dir when
/// `None`).
pub async fn rotate_admin_token(conn: &ConnArgs, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let data_dir = data_dir.unwrap_or_else(default_data_dir);
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    // Fail early, naming the file, when there is no token to rotate.
    read_secret_file(&path)
        .with_context(|| format!("cannot read the admin token from {}", path.display()))?;
    // The token in the file is the one rotated, whatever ORC_TOKEN says.
    let mut conn = conn.clone();
    conn.token_file = Some(path.clone());
    // The zone of this data dir, unless the caller named another way to reach it.
    if conn.url.is_none() {
        conn.url = super::read_trimmed(&data_dir.join(ZONE_URL_FILE));
    }
    let ca = data_dir.join(CA_CERT_FILE);
    if conn.ca_file.is_none() && ca.exists() {
        conn.ca_file = Some(ca);
    }
    let zone = client(&conn)?;
    let me: WhoAmIView = zone.get("/api/whoami").await?;
    let user = me.user.name;
    let old = me.token_id;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_millis() as i64;
    let expires_at = now + ADMIN_TOKEN_DAYS * 24 * 3600 * 1000;
    let made: NewTokenView = zone
        .post(
            &format!("/api/users/{}/tokens", segment(&user)),
            &CreateToken {
                label: "admin (rotated)".to_string(),
                expires_at: Some(expires_at),
                project: None,
            },
        )
        .await?;
    write_private_file(&path, &made.value)
        .with_context(|| format!("cannot write the new admin token to {}", path.display()))?;
    let _: serde_json::Value = zone
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

fn access_keys_table(keys: &[AccessKeyView]) -> String {
    let mut t = Table::new(&["KID", "STATE", "CREATED", "PUBLISHED UNTIL"]);
    for k in keys {
        t.row(vec![
            k.kid.clone(),
            if k.current { "signing" } else { "retiring" }.to_string(),
            when(k.created_at),
            k.retire_at.map_or_else(|| "-".to_string(), when),
        ]);
    }
    t.render()
}

fn when(millis: i64) -> String {
    orc_common::time::format_time(orc_common::Timestamp(millis))
}

/// `orc zone access-keys`: the access edge's keys still published.
pub async fn access_keys(conn: &ConnArgs) -> anyhow::Result<()> {
    let keys: Vec<AccessKeyView> = client(conn)?.get("/api/zone/access-keys").await?;
    if conn.json {
        return super::print_json(&keys);
    }
    out!("{}", access_keys_table(&keys));
    Ok(())
}

/// `orc zone rotate-access-key`: a new key signs access assertions; the one it replaces
/// stays published for `overlap`.
pub async fn rotate_access_key(conn: &ConnArgs, overlap: Duration) -> anyhow::Result<()> {
    let rotated: RotatedAccessKeyView = client(conn)?
        .post(
            "/api/zone/access-keys/rotate",
            &RotateAccessKey {
                overlap_seconds: Some(overlap.as_secs()),
            },
        )
        .await?;
    if conn.json {
        return super::print_json(&rotated);
    }
    match (&rotated.replaced, rotated.replaced_until) {
        (Some(old), Some(until)) => outln!(
            "access key {} signs assertions now; {old} stays published until {}",
            rotated.kid,
            when(until)
        ),
        _ => outln!("access key {} signs assertions now", rotated.kid),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_keys_golden() {
        let keys = [
            AccessKeyView {
                kid: "orc-Qm9vdHN0cmFwa2V5".into(),
                current: true,
                created_at: 1_767_225_600_000,
                retire_at: None,
            },
            AccessKeyView {
                kid: "orc-T2xkZXJrZXkwMDAx".into(),
                current: false,
                created_at: 1_767_139_200_000,
                retire_at: Some(1_767_229_200_000),
            },
        ];
        super::super::check_golden("zone_access_keys", &access_keys_table(&keys));
    }
}
