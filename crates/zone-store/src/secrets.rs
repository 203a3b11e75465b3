//! A project's secrets: the values its apps read by name (`secretEnv` and `secretFiles` in
//! `orch.pkl`).
//!
//! A value is sealed with the zone's sealing key before it is written (see [`crate::seal`]),
//! bound to its project id and its name, so a sealed value copied to another project or name
//! does not open. What the store hands out about secrets is [`SecretRecord`]: names, versions,
//! times and who set them, never a value. The one way to a value is
//! [`Store::secret_value`], for the zone's own use when it delivers secrets to nodes.
//!
//! Setting a name again replaces its value and adds one to its version; deleting it removes
//! the row, and a later set starts again at version 1.

use std::fmt;
use std::str::FromStr;

use orc_app_model::schema::Check;
use orc_common::text::quoted;
use orc_zone_model::{Name, ProjectId, Timestamp, UserId};
use zeroize::Zeroizing;

use super::error::{Kind, OperationExt, classify_write};
use super::rows::{opt_parsed, parsed, time, uint64};
use super::{Store, StoreError, StoreResult};

/// The name of a project's secret: 1 to 63 of `a-z`, `0-9`, `.`, `_` and `-`, starting with a
/// letter or digit. The rule is the app file's (`SecretName` in `orch.pkl`'s schema), so every
/// name an app can reference can be stored and no other.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretName(String);

/// Why a text is not a [`SecretName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a secret name: it {reason}", quoted(value))]
pub struct InvalidSecretName {
    /// The text refused.
    pub value: String,
    /// What is wrong with it, in words.
    pub reason: String,
}

impl SecretName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SecretName {
    type Err = InvalidSecretName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match Check::SecretName.test(text) {
            Ok(()) => Ok(SecretName(text.to_string())),
            Err(reason) => Err(InvalidSecretName {
                value: text.to_string(),
                reason,
            }),
        }
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// What the store tells about a secret: everything but its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRecord {
    pub name: SecretName,
    /// 1 when first set, one more at each set since.
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The user who set it last.
    pub updated_by: UserId,
    /// That user's name; `None` once the user is deleted.
    pub updated_by_name: Option<Name>,
}

/// The associated data a secret's value is sealed with: where it belongs.
fn secret_context(project: &ProjectId, name: &SecretName) -> String {
    format!("project {project}/secret {name}")
}

impl Store {
    /// Sets secret `name` of `project` to `value` (sealed before it is written), as user `by`:
    /// a new name starts at version 1, a name set before gets the next version and keeps its
    /// creation time. Returns the version it has now. A project that does not exist is
    /// [`StoreError::Reference`].
    pub async fn set_secret(
        &self,
        project: &ProjectId,
        name: &SecretName,
        value: &str,
        by: &UserId,
        now: Timestamp,
    ) -> StoreResult<u64> {
        const OP: &str = "set a secret";
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "write" })?;
        let sealed = key.seal(&secret_context(project, name), value);
        let version: i64 = sqlx::query_scalar(
            "INSERT INTO secrets \
             (project_id, name, sealed_value, version, created_at, updated_at, updated_by) \
             VALUES ($1, $2, $3, 1, $4, $4, $5) \
             ON CONFLICT (project_id, name) DO UPDATE SET \
             sealed_value = excluded.sealed_value, version = secrets.version + 1, \
             updated_at = excluded.updated_at, updated_by = excluded.updated_by \
             RETURNING version",
        )
        .bind(project.as_str())
        .bind(name.as_str())
        .bind(sealed)
        .bind(now.millis())
        .bind(by.as_str())
        .fetch_one(self.pool())
        .await
        .map_err(|e| {
            classify_write(
                e,
                OP,
                Kind::Secret,
                |_| (name.to_string(), format!(" in project {project}")),
                || format!("project {project}"),
            )
        })?;
        u64::try_from(version).map_err(|_| StoreError::Corrupt {
            column: "secrets.version".to_string(),
            reason: format!("{version} is negative"),
        })
    }

    /// The secrets of `project` by name: names, versions, times and who set them, never a
    /// value.
    pub async fn list_secrets(&self, project: &ProjectId) -> StoreResult<Vec<SecretRecord>> {
        let rows = sqlx::query(
            "SELECT s.name, s.version, s.created_at, s.updated_at, s.updated_by, \
             u.name AS updated_by_name \
             FROM secrets s LEFT JOIN users u ON u.id = s.updated_by \
             WHERE s.project_id = $1 ORDER BY s.name",
        )
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("list secrets")?;
        rows.iter()
            .map(|row| {
                Ok(SecretRecord {
                    name: parsed(row, "secrets.name")?,
                    version: uint64(row, "secrets.version")?,
                    created_at: time(row, "secrets.created_at")?,
                    updated_at: time(row, "secrets.updated_at")?,
                    updated_by: parsed(row, "secrets.updated_by")?,
                    updated_by_name: opt_parsed(row, "updated_by_name")?,
                })
            })
            .collect()
    }

    /// The value of secret `name` of `project`, opened, or `None` when the project has no
    /// such secret. For the zone's own use (delivering secrets to the nodes that run a
    /// workload naming them); the value is wiped from memory when dropped.
    pub async fn secret_value(
        &self,
        project: &ProjectId,
        name: &SecretName,
    ) -> StoreResult<Option<Zeroizing<String>>> {
        let key = self
            .sealing_key()
            .ok_or(StoreError::NoSealingKey { operation: "read" })?;
        let sealed: Option<String> = sqlx::query_scalar(
            "SELECT sealed_value FROM secrets WHERE project_id = $1 AND name = $2",
        )
        .bind(project.as_str())
        .bind(name.as_str())
        .fetch_optional(self.pool())
        .await
        .op("read a secret")?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let opened = key.open(&secret_context(project, name), &sealed)?;
        Ok(Some(Zeroizing::new(opened)))
    }

    /// Deletes secret `name` of `project`; whether it existed.
    pub async fn delete_secret(&self, project: &ProjectId, name: &SecretName) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM secrets WHERE project_id = $1 AND name = $2")
            .bind(project.as_str())
            .bind(name.as_str())
            .execute(self.pool())
            .await
            .op("delete a secret")?;
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_follow_the_app_files_rule() {
        for good in ["db-password", "0", "tls.key", "a_b", &"x".repeat(63)] {
            assert_eq!(good.parse::<SecretName>().unwrap().as_str(), good);
        }
        for bad in ["", "-x", ".x", "Upper", "has space", "a/b", &"x".repeat(64)] {
            let err = bad.parse::<SecretName>().unwrap_err();
            assert_eq!(err.value, bad);
            assert!(
                err.to_string()
                    .contains("is not a secret name: it must be 1 to 63"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_sealed_secret_opens_only_in_its_project_under_its_name() {
        let key = crate::SealingKey::generate();
        let web = ProjectId::from_counter(7);
        let data = ProjectId::from_counter(8);
        let name: SecretName = "db-password".parse().unwrap();
        let other: SecretName = "api-key".parse().unwrap();
        let sealed = key.seal(&secret_context(&web, &name), "hunter2");
        assert_eq!(
            key.open(&secret_context(&web, &name), &sealed).unwrap(),
            "hunter2"
        );
        assert!(key.open(&secret_context(&data, &name), &sealed).is_err());
        assert!(key.open(&secret_context(&web, &other), &sealed).is_err());
    }
}
