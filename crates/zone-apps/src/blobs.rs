//! The registry's binaries on disk, each a file named by its SHA-256.
//!
//! `<data dir>/registry/blobs/sha256/<hex>`, mode 0500 in a dir of mode 0700: a blob is
//! written once, to a temporary file in the same dir while its SHA-256 is computed, and
//! renamed into place only when that digest is the one the writer promised, so a blob's name
//! always says its content. Before a slot runs a binary the supervisor hashes the file it
//! will start again ([`Blobs::runnable`]); a binary that changed on disk does not run.
//!
//! Slots that run as a user of their own cannot enter the data dir, so for them a copy is
//! installed under the runtime root, `<runtime root>/bin/<hex>` (dir 0711, file 0555), and
//! that copy is what is hashed and started.

use std::collections::BTreeSet;
use std::fs::DirBuilder;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use orc_zone_model::registry::Digest;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// Why a blob cannot be kept or run. Names the digest, never content.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// What was sent is not what its digest says.
    #[error(
        "the binary sent as {expected} has digest {actual}: it changed on the way or the digest is wrong"
    )]
    Mismatch { expected: Digest, actual: Digest },
    /// What was sent is larger than the registry takes.
    #[error("the binary sent as {digest} is larger than {max} bytes")]
    TooLarge { digest: Digest, max: u64 },
    /// The registry holds no such blob.
    #[error("the registry holds no binary {digest}")]
    Missing { digest: Digest },
    /// The file on disk no longer has the digest it is named by.
    #[error(
        "the binary {digest} on disk has changed (its digest is now {actual}); it will not run"
    )]
    Changed { digest: Digest, actual: Digest },
    #[error("{what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Blobs under one dir. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
}

/// The largest binary the registry takes: 512 MiB.
pub const MAX_BLOB_BYTES: u64 = 512 * 1024 * 1024;

/// A temporary file younger than this may be an upload in progress.
const UPLOAD_GRACE: Duration = Duration::from_secs(3600);

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BlobError + 'a {
    move |source| BlobError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl Blobs {
    /// The blobs of the zone whose data dir is `data_dir`; creates their dir.
    pub fn open(data_dir: &Path) -> Result<Blobs, BlobError> {
        let dir = data_dir.join("registry").join("blobs").join("sha256");
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io("cannot create the registry's blob dir", &dir))?;
        Ok(Blobs { dir })
    }

    /// Where blob `digest` is (whether or not it exists).
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    /// Whether the registry holds blob `digest`, and its size.
    pub fn size(&self, digest: &Digest) -> Option<u64> {
        std::fs::metadata(self.path(digest))
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len())
    }

    /// Keeps what `reader` yields as blob `expected`, refusing it (and keeping nothing) when
    /// its SHA-256 differs or it passes `max` bytes. A blob the registry holds already is
    /// read to the end and checked all the same. Returns the size.
    pub async fn put(
        &self,
        expected: &Digest,
        mut reader: impl AsyncRead + Unpin,
        max: u64,
    ) -> Result<u64, BlobError> {
        let temp = self.dir.join(format!(
            ".upload-{}-{:016x}",
            expected.short(),
            rand_suffix()
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(io("cannot create", &temp))?;
        let result = async {
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let n = reader
                    .read(&mut buf)
                    .await
                    .map_err(io("cannot read the upload for", &temp))?;
                if n == 0 {
                    break;
                }
                size += n as u64;
                if size > max {
                    return Err(BlobError::TooLarge {
                        digest: expected.clone(),
                        max,
                    });
                }
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])
                    .map_err(io("cannot write", &temp))?;
            }
            let actual = Digest::from_sha256(hasher.finalize().into());
            if &actual != expected {
                return Err(BlobError::Mismatch {
                    expected: expected.clone(),
                    actual,
                });
            }
            file.sync_all().map_err(io("cannot sync", &temp))?;
            std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o500))
                .map_err(io("cannot set the mode of", &temp))?;
            let path = self.path(expected);
            std::fs::rename(&temp, &path).map_err(io("cannot move a blob to", &path))?;
            Ok(size)
        }
        .await;
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }

    /// The file to start for blob `digest`, hashed just now: the blob itself, or, when
    /// `install_under` names a runtime root (the slot runs as a user of its own), the copy
    /// installed there.
    pub fn runnable(
        &self,
        digest: &Digest,
        install_under: Option<&Path>,
    ) -> Result<PathBuf, BlobError> {
        let blob = self.path(digest);
        if !blob.is_file() {
            return Err(BlobError::Missing {
                digest: digest.clone(),
            });
        }
        let path = match install_under {
            None => blob,
            Some(root) => install(&blob, digest, root)?,
        };
        let actual = hash_file(&path)?;
        if &actual != digest {
            return Err(BlobError::Changed {
                digest: digest.clone(),
                actual,
            });
        }
        Ok(path)
    }

    /// Removes every blob not in `keep` (and temporary files older than an hour); returns
    /// how many blobs went.
    pub fn remove_except(&self, keep: &BTreeSet<Digest>) -> Result<usize, BlobError> {
        let mut removed = 0;
        let entries =
            std::fs::read_dir(&self.dir).map_err(io("cannot list the blob dir", &self.dir))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".upload-") {
                let old = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > UPLOAD_GRACE);
                if old {
                    let _ = std::fs::remove_file(entry.path());
                }
                continue;
            }
            let Ok(digest) = name.parse::<Digest>() else {
                continue;
            };
            if !keep.contains(&digest) {
                std::fs::remove_file(entry.path())
                    .map_err(io("cannot remove the blob", &entry.path()))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Copies `blob` to `<root>/bin/<hex>` (0555) unless a copy with the right digest is there.
fn install(blob: &Path, digest: &Digest, root: &Path) -> Result<PathBuf, BlobError> {
    crate::run_as::prepare_root(root).map_err(io("cannot prepare the runtime root", root))?;
    let bin = root.join("bin");
    DirBuilder::new()
        .mode(0o711)
        .create(&bin)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(io("cannot create", &bin))?;
    let path = bin.join(digest.hex());
    if path.is_file() && hash_file(&path).is_ok_and(|d| &d == digest) {
        return Ok(path);
    }
    let temp = bin.join(format!(
        ".install-{}-{:016x}",
        digest.short(),
        rand_suffix()
    ));
    let copied = std::fs::copy(blob, &temp)
        .and_then(|_| std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o555)))
        .and_then(|()| std::fs::rename(&temp, &path));
    if let Err(source) = copied {
        let _ = std::fs::remove_file(&temp);
        return Err(BlobError::Io {
            what: "cannot install the binary at",
            path,
            source,
        });
    }
    Ok(path)
}

/// The SHA-256 of a file's content.
pub fn hash_file(path: &Path) -> Result<Digest, BlobError> {
    let mut file = std::fs::File::open(path).map_err(io("cannot open", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(io("cannot read", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(Digest::from_sha256(hasher.finalize().into()))
}

fn rand_suffix() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_blob_is_kept_only_under_its_own_digest() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::open(dir.path()).unwrap();
        let bytes = b"#!/bin/sh\necho hi\n".to_vec();
        let digest = Digest::of(&bytes);
        assert_eq!(blobs.put(&digest, &bytes[..], 1024).await.unwrap(), 18);
        assert_eq!(blobs.size(&digest), Some(18));

        let wrong = Digest::of(b"something else");
        let e = blobs.put(&wrong, &bytes[..], 1024).await.unwrap_err();
        assert!(matches!(e, BlobError::Mismatch { .. }), "{e}");
        assert_eq!(blobs.size(&wrong), None);
        let e = blobs.put(&digest, &bytes[..], 4).await.unwrap_err();
        assert!(matches!(e, BlobError::TooLarge { .. }), "{e}");
        // Nothing half-written stays behind.
        let left: Vec<_> = std::fs::read_dir(blobs.path(&digest).parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from(digest.hex())]);

        assert_eq!(blobs.runnable(&digest, None).unwrap(), blobs.path(&digest));
        let root = dir.path().join("run");
        let installed = blobs.runnable(&digest, Some(&root)).unwrap();
        assert_eq!(installed, root.join("bin").join(digest.hex()));
        let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o555);

        // A binary that changed on disk does not run.
        std::fs::set_permissions(blobs.path(&digest), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::write(blobs.path(&digest), b"tampered").unwrap();
        let e = blobs.runnable(&digest, None).unwrap_err();
        assert!(matches!(e, BlobError::Changed { .. }), "{e}");
        assert!(matches!(
            blobs.runnable(&wrong, None),
            Err(BlobError::Missing { .. })
        ));

        assert_eq!(blobs.remove_except(&BTreeSet::new()).unwrap(), 1);
        assert_eq!(blobs.size(&digest), None);
    }
}
