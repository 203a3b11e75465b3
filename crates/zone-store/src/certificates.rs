//! Certificates obtained by ACME for the domains apps route, the zone's ACME accounts, and
//! the HTTP-01 challenges ingress nodes answer (see migration 0027). Keys and account
//! credentials are sealed before they are written and opened only for the zone's own use.

use orc_zone_model::{ProjectId, Timestamp};
use zeroize::Zeroizing;

use super::error::{Kind, OperationExt, not_found};
use super::rows::{int, opt_text, opt_time, parsed, text, time};
use super::{Store, StoreError, StoreResult};

/// What the store knows of a domain's certificate, without its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateRow {
    pub domain: String,
    pub project: ProjectId,
    /// The chain, leaf first; `None` until one was issued.
    pub chain_pem: Option<String>,
    pub not_after: Option<Timestamp>,
    pub issued_at: Option<Timestamp>,
    /// The last attempt's failure, until one succeeds.
    pub error: Option<String>,
    /// Attempts that failed since the last success.
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub wanted_at: Timestamp,
}

/// An issued certificate with its key, opened: for the nodes that serve its domain.
pub struct IssuedCertificate {
    pub domain: String,
    pub chain_pem: String,
    pub key_pem: Zeroizing<String>,
}

impl std::fmt::Debug for IssuedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCertificate")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

/// An HTTP-01 challenge being answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcmeChallenge {
    pub token: String,
    pub domain: String,
    pub key_authorization: String,
}

fn key_context(domain: &str) -> String {
    format!("certificate {domain}/key")
}

fn account_context(directory: &str) -> String {
    format!("acme account {directory}")
}

const CERTIFICATE_COLUMNS: &str = "domain, project_id, chain_pem, not_after, issued_at, error, \
     attempts, next_attempt_at, wanted_at";

fn certificate_row(row: &sqlx::any::AnyRow) -> StoreResult<CertificateRow> {
    Ok(CertificateRow {
        domain: text(row, "certificates.domain")?,
        project: parsed(row, "certificates.project_id")?,
        chain_pem: opt_text(row, "chain_pem")?,
        not_after: opt_time(row, "not_after")?,
        issued_at: opt_time(row, "issued_at")?,
        error: opt_text(row, "error")?,
        attempts: u32::try_from(int(row, "attempts")?).unwrap_or(u32::MAX),
        next_attempt_at: time(row, "next_attempt_at")?,
        wanted_at: time(row, "wanted_at")?,
    })
}

impl Store {
    /// Records that an app of `project` routes `domain` now. A domain new to the store is
    /// due at once; one another project held before starts over (its key is not handed to
    /// the new owner). Returns the row as it is now.
    pub async fn want_certificate(
        &self,
        domain: &str,
        project: &ProjectId,
        now: Timestamp,
    ) -> StoreResult<CertificateRow> {
        sqlx::query(
            "INSERT INTO certificates (domain, project_id, attempts, next_attempt_at, wanted_at, \
             updated_at) VALUES ($1, $2, 0, $3, $3, $3) \
             ON CONFLICT (domain) DO UPDATE SET wanted_at = excluded.wanted_at, \
             chain_pem = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.chain_pem END, \
             sealed_key = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.sealed_key END, \
             not_after = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.not_after END, \
             issued_at = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.issued_at END, \
             error = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.error END, \
             attempts = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.attempts ELSE 0 END, \
             next_attempt_at = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.next_attempt_at ELSE excluded.next_attempt_at END, \
             updated_at = CASE WHEN certificates.project_id = excluded.project_id \
                 THEN certificates.updated_at ELSE excluded.updated_at END, \
             project_id = excluded.project_id",
        )
        .bind(domain)
        .bind(project.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("want a certificate")?;
        self.certificate(domain)
            .await?
            .ok_or_else(|| not_found(Kind::Certificate, domain))
    }

    /// The row of `domain`, if any.
    pub async fn certificate(&self, domain: &str) -> StoreResult<Option<CertificateRow>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {CERTIFICATE_COLUMNS} FROM certificates WHERE domain = $1"
        )))
        .bind(domain)
        .fetch_optional(self.pool())
        .await
        .op("read a certificate")?;
        row.as_ref().map(certificate_row).transpose()
    }

    /// Every certificate row, by domain.
    pub async fn certificates(&self) -> StoreResult<Vec<CertificateRow>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {CERTIFICATE_COLUMNS} FROM certificates ORDER BY domain"
        )))
        .fetch_all(self.pool())
        .await
        .op("list certificates")?;
        rows.iter().map(certificate_row).collect()
    }

    /// The certificate rows of `project`, by domain.
    pub async fn project_certificates(
        &self,
        project: &ProjectId,
    ) -> StoreResult<Vec<CertificateRow>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {CERTIFICATE_COLUMNS} FROM certificates WHERE project_id = $1 ORDER BY domain"
        )))
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("list a project's certificates")?;
        rows.iter().map(certificate_row).collect()
    }

    /// Keeps the certificate issued for `domain` of `project` (its key sealed), due again at
    /// `renew_at`. Does nothing when the domain went to another project meanwhile; whether
    /// it was kept.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_certificate_issued(
        &self,
        domain: &str,
        project: &ProjectId,
        chain_pem: &str,
        key_pem: &str,
        not_after: Timestamp,
        renew_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "write" })?;
        let sealed = key.seal(&key_context(domain), key_pem);
        let done = sqlx::query(
            "UPDATE certificates SET chain_pem = $3, sealed_key = $4, not_after = $5, \
             issued_at = $6, error = NULL, attempts = 0, next_attempt_at = $7, updated_at = $6 \
             WHERE domain = $1 AND project_id = $2",
        )
        .bind(domain)
        .bind(project.as_str())
        .bind(chain_pem)
        .bind(sealed)
        .bind(not_after.millis())
        .bind(now.millis())
        .bind(renew_at.millis())
        .execute(self.pool())
        .await
        .op("keep an issued certificate")?;
        Ok(done.rows_affected() > 0)
    }

    /// Records that obtaining a certificate for `domain` failed with `error`; the zone tries
    /// again at `retry_at`. A certificate issued before stays (and is served) until it ends.
    pub async fn record_certificate_failed(
        &self,
        domain: &str,
        project: &ProjectId,
        error: &str,
        retry_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE certificates SET error = $3, attempts = attempts + 1, next_attempt_at = $4, \
             updated_at = $5 WHERE domain = $1 AND project_id = $2",
        )
        .bind(domain)
        .bind(project.as_str())
        .bind(error)
        .bind(retry_at.millis())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("record a failed certificate order")?;
        Ok(())
    }

    /// Removes the certificates no app routed since `before` (with their keys); the domains.
    pub async fn forget_certificates(&self, before: Timestamp) -> StoreResult<Vec<String>> {
        let gone: Vec<String> =
            sqlx::query_scalar("DELETE FROM certificates WHERE wanted_at < $1 RETURNING domain")
                .bind(before.millis())
                .fetch_all(self.pool())
                .await
                .op("forget unwanted certificates")?;
        Ok(gone)
    }

    /// The issued certificates of `project` that have not ended at `now`, with their keys
    /// opened: what its ingress nodes serve.
    pub async fn issued_certificates(
        &self,
        project: &ProjectId,
        now: Timestamp,
    ) -> StoreResult<Vec<IssuedCertificate>> {
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "read" })?;
        let rows = sqlx::query(
            "SELECT domain, chain_pem, sealed_key FROM certificates \
             WHERE project_id = $1 AND chain_pem IS NOT NULL AND sealed_key IS NOT NULL \
             AND not_after > $2 ORDER BY domain",
        )
        .bind(project.as_str())
        .bind(now.millis())
        .fetch_all(self.pool())
        .await
        .op("read a project's certificates")?;
        rows.iter()
            .map(|row| {
                let domain = text(row, "certificates.domain")?;
                let sealed = Zeroizing::new(text(row, "sealed_key")?);
                let key_pem = Zeroizing::new(key.open(&key_context(&domain), &sealed)?);
                Ok(IssuedCertificate {
                    chain_pem: text(row, "chain_pem")?,
                    domain,
                    key_pem,
                })
            })
            .collect()
    }

    /// The zone's ACME account at `directory` (its credentials, opened), if it has one.
    pub async fn acme_account(&self, directory: &str) -> StoreResult<Option<Zeroizing<String>>> {
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "read" })?;
        let sealed: Option<String> =
            sqlx::query_scalar("SELECT sealed_credentials FROM acme_accounts WHERE directory = $1")
                .bind(directory)
                .fetch_optional(self.pool())
                .await
                .op("read the ACME account")?;
        let Some(sealed) = sealed.map(Zeroizing::new) else {
            return Ok(None);
        };
        Ok(Some(Zeroizing::new(
            key.open(&account_context(directory), &sealed)?,
        )))
    }

    /// Keeps the zone's ACME account at `directory` (sealed); the first one kept wins, so
    /// two controllers making one at once agree on it. Returns the credentials kept.
    pub async fn keep_acme_account(
        &self,
        directory: &str,
        credentials: &str,
        now: Timestamp,
    ) -> StoreResult<Zeroizing<String>> {
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "write" })?;
        sqlx::query(
            "INSERT INTO acme_accounts (directory, sealed_credentials, created_at) \
             VALUES ($1, $2, $3) ON CONFLICT (directory) DO NOTHING",
        )
        .bind(directory)
        .bind(key.seal(&account_context(directory), credentials))
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("keep the ACME account")?;
        self.acme_account(directory)
            .await?
            .ok_or_else(|| not_found(Kind::AcmeAccount, directory))
    }

    /// Starts answering a challenge for `domain` of `project` until `expires_at`.
    pub async fn put_acme_challenge(
        &self,
        challenge: &AcmeChallenge,
        project: &ProjectId,
        expires_at: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO acme_challenges (token, domain, project_id, key_authorization, \
             expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (token) DO UPDATE SET \
             key_authorization = excluded.key_authorization, expires_at = excluded.expires_at",
        )
        .bind(&challenge.token)
        .bind(&challenge.domain)
        .bind(project.as_str())
        .bind(&challenge.key_authorization)
        .bind(expires_at.millis())
        .execute(self.pool())
        .await
        .op("keep an ACME challenge")?;
        Ok(())
    }

    /// Stops answering challenge `token`.
    pub async fn delete_acme_challenge(&self, token: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM acme_challenges WHERE token = $1")
            .bind(token)
            .execute(self.pool())
            .await
            .op("remove an ACME challenge")?;
        Ok(())
    }

    /// The challenges of `project` to answer at `now`, by token.
    pub async fn acme_challenges(
        &self,
        project: &ProjectId,
        now: Timestamp,
    ) -> StoreResult<Vec<AcmeChallenge>> {
        let rows = sqlx::query(
            "SELECT token, domain, key_authorization FROM acme_challenges \
             WHERE project_id = $1 AND expires_at > $2 ORDER BY token",
        )
        .bind(project.as_str())
        .bind(now.millis())
        .fetch_all(self.pool())
        .await
        .op("list a project's ACME challenges")?;
        rows.iter()
            .map(|row| {
                Ok(AcmeChallenge {
                    token: text(row, "acme_challenges.token")?,
                    domain: text(row, "acme_challenges.domain")?,
                    key_authorization: text(row, "key_authorization")?,
                })
            })
            .collect()
    }

    /// Removes the challenges that ended before `now`; how many.
    pub async fn expire_acme_challenges(&self, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM acme_challenges WHERE expires_at <= $1")
            .bind(now.millis())
            .execute(self.pool())
            .await
            .op("remove ended ACME challenges")?;
        Ok(done.rows_affected())
    }
}
