//! The access edge's signing keys: one current key and the keys a rotation replaced, each
//! published until its time. Private keys are sealed, bound to their kid.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use orc_zone_model::Timestamp;
use orc_zone_model::session::StoredAccessKey;
use zeroize::Zeroizing;

use super::error::OperationExt;
use super::rows::{opt_time, text, time};
use super::{Store, StoreError, StoreResult};

fn context(kid: &str) -> String {
    format!("access key {kid}")
}

impl Store {
    /// Every key still published at `now` (retired ones are left out), the current one
    /// first, then by creation.
    pub async fn access_keys(&self, now: Timestamp) -> StoreResult<Vec<StoredAccessKey>> {
        const OP: &str = "read the access keys";
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: OP })?;
        let rows = sqlx::query(
            "SELECT kid, private_key, created_at, retire_at FROM access_keys \
             WHERE retire_at IS NULL OR retire_at > $1 \
             ORDER BY CASE WHEN retire_at IS NULL THEN 0 ELSE 1 END, created_at DESC, kid",
        )
        .bind(now.millis())
        .fetch_all(self.pool())
        .await
        .op(OP)?;
        rows.iter()
            .map(|row| {
                let kid = text(row, "kid")?;
                let opened = Zeroizing::new(key.open(&context(&kid), &text(row, "private_key")?)?);
                let pkcs8 =
                    URL_SAFE_NO_PAD
                        .decode(opened.as_bytes())
                        .map_err(|e| StoreError::Corrupt {
                            column: "access_keys.private_key".to_string(),
                            reason: e.to_string(),
                        })?;
                Ok(StoredAccessKey {
                    kid,
                    pkcs8: Zeroizing::new(pkcs8),
                    created_at: time(row, "created_at")?,
                    retire_at: opt_time(row, "retire_at")?,
                })
            })
            .collect()
    }

    /// Makes `kid` (`pkcs8`) the current key, in one transaction: the key that was current
    /// is published until `retire_others_at`, and keys whose time has come at `now` are
    /// deleted.
    pub async fn add_access_key(
        &self,
        kid: &str,
        pkcs8: &[u8],
        now: Timestamp,
        retire_others_at: Timestamp,
    ) -> StoreResult<()> {
        const OP: &str = "add an access key";
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: OP })?;
        let sealed = key.seal(
            &context(kid),
            &Zeroizing::new(URL_SAFE_NO_PAD.encode(pkcs8)),
        );
        let mut tx = self.begin(OP).await?;
        sqlx::query("DELETE FROM access_keys WHERE retire_at IS NOT NULL AND retire_at <= $1")
            .bind(now.millis())
            .execute(&mut *tx)
            .await
            .op(OP)?;
        sqlx::query("UPDATE access_keys SET retire_at = $1 WHERE retire_at IS NULL")
            .bind(retire_others_at.millis())
            .execute(&mut *tx)
            .await
            .op(OP)?;
        sqlx::query(
            "INSERT INTO access_keys (kid, private_key, created_at, retire_at) \
             VALUES ($1, $2, $3, NULL)",
        )
        .bind(kid)
        .bind(sealed)
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op(OP)?;
        tx.commit().await.op(OP)?;
        Ok(())
    }
}
