//! Images in the zone's registry: manifests by org, repository and digest, what each refers
//! to, and tags. The bytes (manifests and layers alike) are blobs the zone keeps on disk.
//!
//! A manifest is written once (its digest is its content); a tag is one upsert. Deleting a
//! manifest deletes its references and the tags that point at it; the blobs go at the next
//! sweep if nothing else names them ([`Store::image_blob_digests`]).

use std::collections::BTreeSet;

use orc_zone_model::registry::Digest;
use orc_zone_model::{Name, OrgId, Timestamp};

use super::error::OperationExt;
use super::rows::{int, parsed, text};
use super::{Store, StoreError, StoreResult};

/// A manifest the registry keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageManifestRow {
    /// Its digest.
    pub digest: Digest,
    /// Its media type.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
}

fn size_of(value: u64, column: &str) -> StoreResult<i64> {
    i64::try_from(value).map_err(|_| StoreError::Corrupt {
        column: column.to_string(),
        reason: format!("{value} bytes does not fit a BIGINT"),
    })
}

fn unsigned(value: i64, column: &str) -> StoreResult<u64> {
    u64::try_from(value).map_err(|e| StoreError::Corrupt {
        column: column.to_string(),
        reason: e.to_string(),
    })
}

impl Store {
    /// Keeps a manifest of `repository` in `org` with what it refers to; one kept already is
    /// left as it is. The org's uploads of the blobs it names end: the manifest holds them now.
    pub async fn put_image_manifest(
        &self,
        org: &OrgId,
        repository: &Name,
        manifest: &ImageManifestRow,
        references: &[(Digest, u64)],
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut tx = self.begin("keep an image manifest").await?;
        let done = sqlx::query(
            "INSERT INTO image_manifests (org_id, repository, digest, media_type, size, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org_id, repository, digest) DO NOTHING",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(manifest.digest.as_str())
        .bind(&manifest.media_type)
        .bind(size_of(manifest.size, "image_manifests.size")?)
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("keep an image manifest")?;
        if done.rows_affected() > 0 {
            let mut seen = BTreeSet::new();
            for (digest, size) in references {
                if !seen.insert(digest) {
                    continue;
                }
                sqlx::query(
                    "INSERT INTO image_references (org_id, repository, digest, referenced, size) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(org.as_str())
                .bind(repository.as_str())
                .bind(manifest.digest.as_str())
                .bind(digest.as_str())
                .bind(size_of(*size, "image_references.size")?)
                .execute(&mut *tx)
                .await
                .op("record what an image manifest refers to")?;
            }
        }
        for digest in references
            .iter()
            .map(|(d, _)| d)
            .chain(std::iter::once(&manifest.digest))
        {
            sqlx::query("DELETE FROM app_blob_uploads WHERE org_id = $1 AND digest = $2")
                .bind(org.as_str())
                .bind(digest.as_str())
                .execute(&mut *tx)
                .await
                .op("end the uploads an image manifest took up")?;
        }
        tx.commit().await.op("keep an image manifest")?;
        Ok(())
    }

    /// The manifest `digest` of `repository` in `org`, if the registry keeps it.
    pub async fn image_manifest(
        &self,
        org: &OrgId,
        repository: &Name,
        digest: &Digest,
    ) -> StoreResult<Option<ImageManifestRow>> {
        let row = sqlx::query(
            "SELECT digest, media_type, size FROM image_manifests \
             WHERE org_id = $1 AND repository = $2 AND digest = $3",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(digest.as_str())
        .fetch_optional(self.pool())
        .await
        .op("read an image manifest")?;
        row.map(|row| {
            Ok(ImageManifestRow {
                digest: parsed(&row, "image_manifests.digest")?,
                media_type: text(&row, "image_manifests.media_type")?,
                size: unsigned(int(&row, "image_manifests.size")?, "image_manifests.size")?,
            })
        })
        .transpose()
    }

    /// Points `tag` of `repository` in `org` at manifest `digest` (which it must keep).
    pub async fn set_image_tag(
        &self,
        org: &OrgId,
        repository: &Name,
        tag: &str,
        digest: &Digest,
        now: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO image_tags (org_id, repository, tag, digest, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, repository, tag) \
             DO UPDATE SET digest = excluded.digest, updated_at = excluded.updated_at",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(tag)
        .bind(digest.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("tag an image")?;
        Ok(())
    }

    /// The manifest `tag` of `repository` in `org` points at.
    pub async fn image_tag(
        &self,
        org: &OrgId,
        repository: &Name,
        tag: &str,
    ) -> StoreResult<Option<Digest>> {
        let row = sqlx::query(
            "SELECT digest FROM image_tags WHERE org_id = $1 AND repository = $2 AND tag = $3",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(tag)
        .fetch_optional(self.pool())
        .await
        .op("read an image tag")?;
        row.map(|row| parsed(&row, "image_tags.digest")).transpose()
    }

    /// The tags of `repository` in `org`, sorted.
    pub async fn list_image_tags(
        &self,
        org: &OrgId,
        repository: &Name,
    ) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(
            "SELECT tag FROM image_tags WHERE org_id = $1 AND repository = $2 ORDER BY tag",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .fetch_all(self.pool())
        .await
        .op("list image tags")?;
        rows.iter().map(|row| text(row, "image_tags.tag")).collect()
    }

    /// Whether `org` keeps any manifest in `repository`.
    pub async fn image_repository_exists(
        &self,
        org: &OrgId,
        repository: &Name,
    ) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT 1 AS one FROM image_manifests WHERE org_id = $1 AND repository = $2 LIMIT 1",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .fetch_optional(self.pool())
        .await
        .op("find an image repository")?;
        Ok(row.is_some())
    }

    /// The repositories of `org` that keep a manifest, sorted.
    pub async fn list_image_repositories(&self, org: &OrgId) -> StoreResult<Vec<Name>> {
        let rows = sqlx::query(
            "SELECT DISTINCT repository FROM image_manifests WHERE org_id = $1 ORDER BY repository",
        )
        .bind(org.as_str())
        .fetch_all(self.pool())
        .await
        .op("list image repositories")?;
        rows.iter()
            .map(|row| parsed(row, "image_manifests.repository"))
            .collect()
    }

    /// Removes tag `tag` of `repository`; whether it existed.
    pub async fn delete_image_tag(
        &self,
        org: &OrgId,
        repository: &Name,
        tag: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "DELETE FROM image_tags WHERE org_id = $1 AND repository = $2 AND tag = $3",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(tag)
        .execute(self.pool())
        .await
        .op("delete an image tag")?;
        Ok(done.rows_affected() > 0)
    }

    /// Removes manifest `digest` of `repository`, its references and the tags that point
    /// at it; whether it existed.
    pub async fn delete_image_manifest(
        &self,
        org: &OrgId,
        repository: &Name,
        digest: &Digest,
    ) -> StoreResult<bool> {
        let mut tx = self.begin("delete an image manifest").await?;
        for sql in [
            "DELETE FROM image_tags WHERE org_id = $1 AND repository = $2 AND digest = $3",
            "DELETE FROM image_references WHERE org_id = $1 AND repository = $2 AND digest = $3",
        ] {
            sqlx::query(sql)
                .bind(org.as_str())
                .bind(repository.as_str())
                .bind(digest.as_str())
                .execute(&mut *tx)
                .await
                .op("delete an image manifest's tags and references")?;
        }
        let done = sqlx::query(
            "DELETE FROM image_manifests WHERE org_id = $1 AND repository = $2 AND digest = $3",
        )
        .bind(org.as_str())
        .bind(repository.as_str())
        .bind(digest.as_str())
        .execute(&mut *tx)
        .await
        .op("delete an image manifest")?;
        tx.commit().await.op("delete an image manifest")?;
        Ok(done.rows_affected() > 0)
    }

    /// The size of blob `digest` if one of `org`'s manifests is it or refers to it.
    pub async fn image_blob_of(&self, org: &OrgId, digest: &Digest) -> StoreResult<Option<u64>> {
        let row = sqlx::query(
            "SELECT size FROM image_references WHERE org_id = $1 AND referenced = $2 \
             UNION ALL SELECT size FROM image_manifests WHERE org_id = $1 AND digest = $2 LIMIT 1",
        )
        .bind(org.as_str())
        .bind(digest.as_str())
        .fetch_optional(self.pool())
        .await
        .op("find an org's image blob")?;
        row.map(|row| unsigned(int(&row, "size")?, "image_references.size"))
            .transpose()
    }

    /// Every blob an image manifest is or refers to, in any org.
    pub async fn image_blob_digests(&self) -> StoreResult<BTreeSet<Digest>> {
        let rows = sqlx::query(
            "SELECT referenced AS digest FROM image_references UNION SELECT digest FROM image_manifests",
        )
        .fetch_all(self.pool())
        .await
        .op("list image blobs")?;
        rows.iter().map(|row| parsed(row, "digest")).collect()
    }
}
