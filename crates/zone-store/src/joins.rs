//! Join tokens. A node has at most one live token: minting one revokes the node's earlier
//! live tokens in the same transaction. Redeeming is a compare-and-set on `used_at`, so two
//! agents racing with one token admit one node.

use sqlx::any::AnyRow;

use sqlx::AnyConnection;

use super::error::{OperationExt, not_found};
use super::rows::{opt_text, opt_time, parsed, text, time, token_hash};
use super::{Kind, Store, StoreResult};
use orc_zone_model::{
    JoinRefusal, JoinToken, JoinTokenId, JoinTokenSecret, JoinTtl, NodeId, Timestamp,
};

const COLUMNS: &str = "id, node_id, secret_sha256, ca_fingerprint, created_by, created_at, \
     expires_at, used_at, revoked_at, product_uuid";

fn join_token_from(row: &AnyRow) -> StoreResult<JoinToken> {
    Ok(JoinToken {
        id: parsed(row, "join_tokens.id")?,
        node_id: parsed(row, "join_tokens.node_id")?,
        hash: token_hash(row, "join_tokens.secret_sha256")?,
        ca_fingerprint: text(row, "join_tokens.ca_fingerprint")?,
        created_by: text(row, "join_tokens.created_by")?,
        created_at: time(row, "join_tokens.created_at")?,
        expires_at: time(row, "join_tokens.expires_at")?,
        used_at: opt_time(row, "join_tokens.used_at")?,
        revoked_at: opt_time(row, "join_tokens.revoked_at")?,
        product_uuid: opt_text(row, "join_tokens.product_uuid")?,
    })
}

/// What minting a join token needs besides its node.
#[derive(Debug, Clone)]
pub struct NewJoinToken<'a> {
    /// The fingerprint of the CA the token pins (`sha256:<hex>`).
    pub ca_fingerprint: &'a str,
    /// `zone`, or `user:<id>` for a token minted by hand.
    pub created_by: &'a str,
    pub ttl: JoinTtl,
    /// Binds the token to one machine.
    pub product_uuid: Option<&'a str>,
}

impl Store {
    /// Mints the join token of `node` and returns its secret: the only time the secret is
    /// available. Every earlier live token of the node is revoked in the same transaction.
    pub async fn create_join_token(
        &self,
        node: &NodeId,
        new: &NewJoinToken<'_>,
        now: Timestamp,
    ) -> StoreResult<(JoinToken, JoinTokenSecret)> {
        let id = JoinTokenId::from_counter(self.allocate_ids(1).await?);
        let secret = JoinTokenSecret::generate(new.ca_fingerprint);
        let mut tx = self.begin("create join token").await?;
        let exists = sqlx::query("SELECT id FROM nodes WHERE id = $1")
            .bind(node.as_str())
            .fetch_optional(&mut *tx)
            .await
            .op("create join token")?;
        if exists.is_none() {
            return Err(not_found(Kind::Node, node));
        }
        revoke_live_of_node(&mut tx, node, now, "create join token").await?;
        let expires_at = now.plus(new.ttl.get());
        sqlx::query(
            "INSERT INTO join_tokens (id, node_id, secret_sha256, ca_fingerprint, created_by, \
             created_at, expires_at, used_at, revoked_at, product_uuid) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL, $8)",
        )
        .bind(id.as_str())
        .bind(node.as_str())
        .bind(secret.hash().to_hex())
        .bind(new.ca_fingerprint)
        .bind(new.created_by)
        .bind(now.millis())
        .bind(expires_at.millis())
        .bind(new.product_uuid)
        .execute(&mut *tx)
        .await
        .op("create join token")?;
        tx.commit().await.op("create join token")?;
        let token = JoinToken {
            id,
            node_id: node.clone(),
            hash: secret.hash(),
            ca_fingerprint: new.ca_fingerprint.to_string(),
            created_by: new.created_by.to_string(),
            created_at: now,
            expires_at,
            used_at: None,
            revoked_at: None,
            product_uuid: new.product_uuid.map(str::to_string),
        };
        Ok((token, secret))
    }

    /// Redeems `secret` for `node` on the machine with `product_uuid`: marks the token used
    /// and returns it, or says why it admits nothing. Of two redeems of one token, one wins.
    pub async fn redeem_join_token(
        &self,
        secret: &JoinTokenSecret,
        node: &NodeId,
        product_uuid: &str,
        now: Timestamp,
    ) -> StoreResult<Result<JoinToken, JoinRefusal>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM join_tokens WHERE secret_sha256 = $1"
        ));
        let row = sqlx::query(sql)
            .bind(secret.hash().to_hex())
            .fetch_optional(self.pool())
            .await
            .op("redeem join token")?;
        let Some(token) = row.as_ref().map(join_token_from).transpose()? else {
            return Ok(Err(JoinRefusal::Unknown));
        };
        if let Err(refusal) = token.check(node, product_uuid, now) {
            return Ok(Err(refusal));
        }
        let done = sqlx::query(
            "UPDATE join_tokens SET used_at = $2 WHERE id = $1 \
             AND used_at IS NULL AND revoked_at IS NULL",
        )
        .bind(token.id.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("redeem join token")?;
        if done.rows_affected() == 0 {
            return Ok(Err(JoinRefusal::Used));
        }
        Ok(Ok(JoinToken {
            used_at: Some(now),
            ..token
        }))
    }

    /// Revokes a join token (a second revoke keeps the first time).
    pub async fn revoke_join_token(
        &self,
        id: &JoinTokenId,
        now: Timestamp,
    ) -> StoreResult<JoinToken> {
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
             RETURNING {COLUMNS}"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .bind(now.millis())
            .fetch_optional(self.pool())
            .await
            .op("revoke join token")?;
        row.as_ref()
            .map(join_token_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::JoinToken, id))
    }

    /// Binds every live, unbound join token of `node` to the machine with `product_uuid`
    /// (its provider identified it before delivering the token); returns how many.
    pub async fn bind_join_tokens(&self, node: &NodeId, product_uuid: &str) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE join_tokens SET product_uuid = $2 WHERE node_id = $1 \
             AND used_at IS NULL AND revoked_at IS NULL AND product_uuid IS NULL",
        )
        .bind(node.as_str())
        .bind(product_uuid)
        .execute(self.pool())
        .await
        .op("bind join tokens")?;
        Ok(done.rows_affected())
    }

    /// Revokes every live join token of `node` (when it ends); returns how many were live.
    pub async fn revoke_join_tokens_of_node(
        &self,
        node: &NodeId,
        now: Timestamp,
    ) -> StoreResult<u64> {
        const OPERATION: &str = "revoke join tokens of node";
        let mut conn = self.pool().acquire().await.op(OPERATION)?;
        revoke_live_of_node(&mut conn, node, now, OPERATION).await
    }

    /// The join tokens of `node`, oldest first.
    pub async fn list_join_tokens(&self, node: &NodeId) -> StoreResult<Vec<JoinToken>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM join_tokens WHERE node_id = $1 ORDER BY id"
        ));
        let rows = sqlx::query(sql)
            .bind(node.as_str())
            .fetch_all(self.pool())
            .await
            .op("list join tokens")?;
        rows.iter().map(join_token_from).collect()
    }
}

/// Revokes the live tokens of `node` on `conn` (inside a transaction or not); returns how
/// many were live.
async fn revoke_live_of_node(
    conn: &mut AnyConnection,
    node: &NodeId,
    now: Timestamp,
    operation: &'static str,
) -> StoreResult<u64> {
    let done = sqlx::query(
        "UPDATE join_tokens SET revoked_at = $2 WHERE node_id = $1 \
         AND used_at IS NULL AND revoked_at IS NULL",
    )
    .bind(node.as_str())
    .bind(now.millis())
    .execute(conn)
    .await
    .op(operation)?;
    Ok(done.rows_affected())
}
