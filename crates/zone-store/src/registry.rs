//! The app registry's records: packages (by org, name and digest), the tags that point at
//! them, and which org sent which binary. The binaries themselves are files the zone keeps
//! outside the store, once per digest.
//!
//! A package is written once and never changed (its digest is its content). Moving a tag is
//! one upsert. A package stays while a tag points at it or a pool records its digest;
//! [`Store::prune_app_packages`] removes the others.
//!
//! A binary belongs to the orgs that hold it, never to the zone: an org holds a binary that
//! one of its packages names, or that it sent ([`Store::put_app_blob_upload`]) and no package
//! of it names yet. [`Store::app_blob_of`] answers for one org only, so no org learns what
//! another sent, and a package can name only binaries its org holds. Keeping a package ends
//! the uploads it names; an upload no package took up is forgotten by
//! [`Store::expire_app_blob_uploads`].

use std::collections::BTreeSet;

use orc_zone_model::registry::{AppPackage, AppTag, Digest, PackageDocument};
use orc_zone_model::{Name, OrgId, Timestamp};
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::rows::{int, parsed, text, time};
use super::{Store, StoreError, StoreResult};

fn tag_from(row: &AnyRow) -> StoreResult<AppTag> {
    Ok(AppTag {
        org_id: parsed(row, "app_tags.org_id")?,
        name: parsed(row, "app_tags.name")?,
        tag: text(row, "app_tags.tag")?,
        digest: parsed(row, "app_tags.digest")?,
        updated_at: time(row, "app_tags.updated_at")?,
    })
}

fn package_from(row: &AnyRow) -> StoreResult<AppPackage> {
    let document = text(row, "app_packages.document")?;
    Ok(AppPackage {
        org_id: parsed(row, "app_packages.org_id")?,
        name: parsed(row, "app_packages.name")?,
        digest: parsed(row, "app_packages.digest")?,
        document: PackageDocument::from_bytes(document.as_bytes()).map_err(|e| {
            StoreError::Corrupt {
                column: "app_packages.document".to_string(),
                reason: e.to_string(),
            }
        })?,
        created_at: time(row, "app_packages.created_at")?,
    })
}

impl Store {
    /// Keeps a package; one the registry holds already (same org, name and digest) is left
    /// as it is. The digest must be the document's. The org's uploads of the binaries it
    /// names end: from now on the package is what holds them.
    pub async fn put_app_package(&self, package: &AppPackage) -> StoreResult<()> {
        let bytes = package.document.to_bytes();
        if Digest::of(&bytes) != package.digest {
            return Err(StoreError::Corrupt {
                column: "app_packages.digest".to_string(),
                reason: format!("{} is not the digest of its document", package.digest),
            });
        }
        let document = String::from_utf8(bytes).map_err(|e| StoreError::Corrupt {
            column: "app_packages.document".to_string(),
            reason: e.to_string(),
        })?;
        let mut tx = self.begin("keep an app package").await?;
        sqlx::query(
            "INSERT INTO app_packages (org_id, name, digest, document, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, name, digest) DO NOTHING",
        )
        .bind(package.org_id.as_str())
        .bind(package.name.as_str())
        .bind(package.digest.as_str())
        .bind(document)
        .bind(package.created_at.millis())
        .execute(&mut *tx)
        .await
        .op("keep an app package")?;
        for binary in package.document.binaries.values() {
            sqlx::query("DELETE FROM app_blob_uploads WHERE org_id = $1 AND digest = $2")
                .bind(package.org_id.as_str())
                .bind(binary.digest.as_str())
                .execute(&mut *tx)
                .await
                .op("end an app binary's upload")?;
        }
        tx.commit().await.op("keep an app package")?;
        Ok(())
    }

    /// Records that `org` sent binary `digest` of `size` bytes at `now`, so that it may name
    /// it in a package. Sending it again renews the record.
    pub async fn put_app_blob_upload(
        &self,
        org: &OrgId,
        digest: &Digest,
        size: u64,
        now: Timestamp,
    ) -> StoreResult<()> {
        let size = i64::try_from(size).map_err(|_| StoreError::Corrupt {
            column: "app_blob_uploads.size".to_string(),
            reason: format!("{size} bytes does not fit a BIGINT"),
        })?;
        sqlx::query(
            "INSERT INTO app_blob_uploads (org_id, digest, size, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, digest) \
             DO UPDATE SET size = excluded.size, created_at = excluded.created_at",
        )
        .bind(org.as_str())
        .bind(digest.as_str())
        .bind(size)
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("record an app binary's upload")?;
        Ok(())
    }

    /// The size of binary `digest` if `org` holds it: one of its packages names it, or it
    /// sent it and no package of it names it yet. `None` for a binary only other orgs hold.
    pub async fn app_blob_of(&self, org: &OrgId, digest: &Digest) -> StoreResult<Option<u64>> {
        let uploaded =
            sqlx::query("SELECT size FROM app_blob_uploads WHERE org_id = $1 AND digest = $2")
                .bind(org.as_str())
                .bind(digest.as_str())
                .fetch_optional(self.pool())
                .await
                .op("read an app binary's upload")?;
        if let Some(row) = uploaded {
            let size = int(&row, "app_blob_uploads.size")?;
            return u64::try_from(size)
                .map(Some)
                .map_err(|e| StoreError::Corrupt {
                    column: "app_blob_uploads.size".to_string(),
                    reason: e.to_string(),
                });
        }
        let rows = sqlx::query(
            "SELECT org_id, name, digest, document, created_at FROM app_packages \
             WHERE org_id = $1",
        )
        .bind(org.as_str())
        .fetch_all(self.pool())
        .await
        .op("read an org's app packages")?;
        for row in &rows {
            let package = package_from(row)?;
            if let Some(binary) = package
                .document
                .binaries
                .values()
                .find(|b| &b.digest == digest)
            {
                return Ok(Some(binary.size));
            }
        }
        Ok(None)
    }

    /// Forgets `org`'s upload of binary `digest` (a package or manifest may still hold it).
    pub async fn forget_app_blob_upload(&self, org: &OrgId, digest: &Digest) -> StoreResult<()> {
        sqlx::query("DELETE FROM app_blob_uploads WHERE org_id = $1 AND digest = $2")
            .bind(org.as_str())
            .bind(digest.as_str())
            .execute(self.pool())
            .await
            .op("forget an app binary upload")?;
        Ok(())
    }

    /// Forgets the uploads made before `before` that no package took up; returns how many.
    pub async fn expire_app_blob_uploads(&self, before: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM app_blob_uploads WHERE created_at < $1")
            .bind(before.millis())
            .execute(self.pool())
            .await
            .op("forget old app binary uploads")?;
        Ok(done.rows_affected())
    }

    /// Points `tag` of app `name` in `org` at `digest` (a package the registry holds);
    /// returns the digest it pointed at before, if any.
    pub async fn set_app_tag(
        &self,
        org: &OrgId,
        name: &Name,
        tag: &str,
        digest: &Digest,
        now: Timestamp,
    ) -> StoreResult<Option<Digest>> {
        let mut tx = self.begin("move an app tag").await?;
        let before = sqlx::query(
            "SELECT org_id, name, tag, digest, updated_at FROM app_tags \
             WHERE org_id = $1 AND name = $2 AND tag = $3",
        )
        .bind(org.as_str())
        .bind(name.as_str())
        .bind(tag)
        .fetch_optional(&mut *tx)
        .await
        .op("read an app tag")?
        .map(|row| tag_from(&row))
        .transpose()?;
        sqlx::query(
            "INSERT INTO app_tags (org_id, name, tag, digest, updated_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (org_id, name, tag) DO UPDATE SET digest = excluded.digest, \
             updated_at = excluded.updated_at",
        )
        .bind(org.as_str())
        .bind(name.as_str())
        .bind(tag)
        .bind(digest.as_str())
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("move an app tag")?;
        tx.commit().await.op("move an app tag")?;
        Ok(before.map(|t| t.digest))
    }

    /// The tag `tag` of app `name` in `org`, if there is one.
    pub async fn app_tag(
        &self,
        org: &OrgId,
        name: &Name,
        tag: &str,
    ) -> StoreResult<Option<AppTag>> {
        sqlx::query(
            "SELECT org_id, name, tag, digest, updated_at FROM app_tags \
             WHERE org_id = $1 AND name = $2 AND tag = $3",
        )
        .bind(org.as_str())
        .bind(name.as_str())
        .bind(tag)
        .fetch_optional(self.pool())
        .await
        .op("read an app tag")?
        .map(|row| tag_from(&row))
        .transpose()
    }

    /// The package `digest` of app `name` in `org`, if the registry holds it.
    pub async fn app_package(
        &self,
        org: &OrgId,
        name: &Name,
        digest: &Digest,
    ) -> StoreResult<Option<AppPackage>> {
        sqlx::query(
            "SELECT org_id, name, digest, document, created_at FROM app_packages \
             WHERE org_id = $1 AND name = $2 AND digest = $3",
        )
        .bind(org.as_str())
        .bind(name.as_str())
        .bind(digest.as_str())
        .fetch_optional(self.pool())
        .await
        .op("read an app package")?
        .map(|row| package_from(&row))
        .transpose()
    }

    /// Every tag of `org`, by app name then tag.
    pub async fn list_app_tags(&self, org: &OrgId) -> StoreResult<Vec<AppTag>> {
        sqlx::query(
            "SELECT org_id, name, tag, digest, updated_at FROM app_tags \
             WHERE org_id = $1 ORDER BY name, tag",
        )
        .bind(org.as_str())
        .fetch_all(self.pool())
        .await
        .op("list app tags")?
        .iter()
        .map(tag_from)
        .collect()
    }

    /// Every package of app `name` in `org`, oldest first.
    pub async fn list_app_packages(
        &self,
        org: &OrgId,
        name: &Name,
    ) -> StoreResult<Vec<AppPackage>> {
        sqlx::query(
            "SELECT org_id, name, digest, document, created_at FROM app_packages \
             WHERE org_id = $1 AND name = $2 ORDER BY created_at, digest",
        )
        .bind(org.as_str())
        .bind(name.as_str())
        .fetch_all(self.pool())
        .await
        .op("list app packages")?
        .iter()
        .map(package_from)
        .collect()
    }

    /// Removes tag `tag` of app `name` in `org`; `false` when there was none.
    pub async fn delete_app_tag(&self, org: &OrgId, name: &Name, tag: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM app_tags WHERE org_id = $1 AND name = $2 AND tag = $3")
            .bind(org.as_str())
            .bind(name.as_str())
            .bind(tag)
            .execute(self.pool())
            .await
            .op("delete an app tag")?;
        Ok(done.rows_affected() > 0)
    }

    /// Removes the packages no tag points at and no pool records (a deleting pool's too), and
    /// returns them.
    pub async fn prune_app_packages(&self) -> StoreResult<Vec<AppPackage>> {
        let mut tx = self.begin("prune app packages").await?;
        let unused: Vec<AppPackage> = sqlx::query(
            "SELECT p.org_id, p.name, p.digest, p.document, p.created_at FROM app_packages p \
             WHERE NOT EXISTS (SELECT 1 FROM app_tags t WHERE t.org_id = p.org_id \
                 AND t.name = p.name AND t.digest = p.digest) \
             AND NOT EXISTS (SELECT 1 FROM pools l WHERE l.app_digest = p.digest) \
             ORDER BY p.created_at",
        )
        .fetch_all(&mut *tx)
        .await
        .op("find unused app packages")?
        .iter()
        .map(package_from)
        .collect::<StoreResult<_>>()?;
        for package in &unused {
            sqlx::query("DELETE FROM app_packages WHERE org_id = $1 AND name = $2 AND digest = $3")
                .bind(package.org_id.as_str())
                .bind(package.name.as_str())
                .bind(package.digest.as_str())
                .execute(&mut *tx)
                .await
                .op("delete an unused app package")?;
        }
        tx.commit().await.op("prune app packages")?;
        Ok(unused)
    }

    /// The digests of every binary the registry keeps: named by a package, or sent by an org
    /// whose upload is not yet taken up or forgotten.
    pub async fn app_binary_digests(&self) -> StoreResult<BTreeSet<Digest>> {
        let rows =
            sqlx::query("SELECT org_id, name, digest, document, created_at FROM app_packages")
                .fetch_all(self.pool())
                .await
                .op("list app binaries")?;
        let mut digests = BTreeSet::new();
        for row in &rows {
            let package = package_from(row)?;
            digests.extend(package.document.binaries.into_values().map(|b| b.digest));
        }
        let uploads = sqlx::query("SELECT digest FROM app_blob_uploads")
            .fetch_all(self.pool())
            .await
            .op("list app binary uploads")?;
        for row in &uploads {
            digests.insert(parsed(row, "app_blob_uploads.digest")?);
        }
        Ok(digests)
    }
}
