//! The registry's binaries on disk, each a file named by its SHA-256.
//!
//! `<data dir>/registry/blobs/sha256/<hex>`, mode 0500 in a dir of mode 0700: a blob is
//! written once, to a temporary file in the same dir while its SHA-256 is computed, and
//! renamed into place only when that digest is the one the writer promised, so a blob's name
//! always says its content. Before a slot runs a binary the supervisor hashes the file it
//! will start again ([`Blobs::runnable`]); a binary that changed on disk does not run.
//!
//! Slots that run as a user of their own cannot enter the data dir, so for them a copy is
//! installed under the runtime root, in a dir of their pool's own, and that copy is what is
//! hashed and started: `<runtime root>/bin/<pool>-<zone>/<hex>` ([`InstallFor`]). The dir is
//! the zone's user's with the pool's gid as its group, mode 0750; each copy likewise, mode
//! 0550. So the pool's slots (which run with that gid and no other group) read and run their
//! binaries and can neither change them nor rename them; another pool's slots and other
//! local users cannot even list the dir, let alone read a binary. `<runtime root>/bin`
//! itself is 0711 and holds nothing but these dirs (a copy an older zone left there, mode
//! 0555, is removed at the next install).

use std::collections::BTreeSet;
use std::fs::DirBuilder;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
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

/// Where a binary's copy goes for slots that cannot enter the data dir, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallFor {
    /// The runtime root (created mode 0711 if missing, refused when not the zone's user's).
    pub runtime_root: PathBuf,
    /// The pool's own dir under it: `<runtime root>/bin/<pool>-<zone>`.
    pub dir: PathBuf,
    /// The pool's gid: the one group that may enter the dir and read and run the copies.
    pub gid: u32,
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

    fn uploads_dir(&self) -> PathBuf {
        self.dir.parent().and_then(Path::parent).map_or_else(
            || self.dir.join("uploads"),
            |registry| registry.join("uploads"),
        )
    }

    fn upload_path(&self, id: &str) -> PathBuf {
        self.uploads_dir().join(id)
    }

    /// Opens an upload that takes its bytes over several requests (the OCI distribution
    /// API's chunked upload) for `owner` (who may add to it); returns its id, 32 hex digits.
    pub fn start_upload(&self, owner: &str) -> Result<String, BlobError> {
        let dir = self.uploads_dir();
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io("cannot create the registry's upload dir", &dir))?;
        let id = format!(
            "{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        let path = self.upload_path(&id);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io("cannot create", &path))?;
        let owner_path = path.with_extension("owner");
        std::fs::write(&owner_path, owner).map_err(io("cannot write", &owner_path))?;
        Ok(id)
    }

    /// Who may add to upload `id`, and how many bytes it holds; `None` for no such upload.
    /// `id` must already be checked to be 32 hex digits.
    pub fn upload(&self, id: &str) -> Option<(String, u64)> {
        let path = self.upload_path(id);
        let size = std::fs::metadata(&path).ok()?.len();
        let owner = std::fs::read_to_string(path.with_extension("owner")).ok()?;
        Some((owner, size))
    }

    /// Adds what `reader` yields to upload `id`, refusing to grow it past `max` bytes;
    /// returns its size.
    pub async fn append_upload(
        &self,
        id: &str,
        mut reader: impl AsyncRead + Unpin,
        max: u64,
    ) -> Result<u64, BlobError> {
        let path = self.upload_path(id);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io("cannot open", &path))?;
        let mut size = file.metadata().map_err(io("cannot read", &path))?.len();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = reader
                .read(&mut buf)
                .await
                .map_err(io("cannot read the upload for", &path))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            if size > max {
                return Err(BlobError::TooLarge {
                    digest: Digest::of(b""),
                    max,
                });
            }
            file.write_all(&buf[..n])
                .map_err(io("cannot write", &path))?;
        }
        Ok(size)
    }

    /// Ends upload `id` as blob `expected`: kept if its SHA-256 is `expected`, dropped
    /// either way. Returns the size.
    pub fn finish_upload(&self, id: &str, expected: &Digest) -> Result<u64, BlobError> {
        let path = self.upload_path(id);
        let result = (|| {
            let actual = hash_file(&path)?;
            if &actual != expected {
                return Err(BlobError::Mismatch {
                    expected: expected.clone(),
                    actual,
                });
            }
            let size = std::fs::metadata(&path)
                .map_err(io("cannot read", &path))?
                .len();
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(io("cannot sync", &path))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o500))
                .map_err(io("cannot set the mode of", &path))?;
            let blob = self.path(expected);
            std::fs::rename(&path, &blob).map_err(io("cannot move a blob to", &blob))?;
            Ok(size)
        })();
        self.cancel_upload(id);
        result
    }

    /// Drops upload `id` and what it holds.
    pub fn cancel_upload(&self, id: &str) {
        let path = self.upload_path(id);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(path.with_extension("owner"));
    }

    /// Drops uploads untouched for longer than `kept`.
    pub fn expire_uploads(&self, kept: Duration) {
        let Ok(entries) = std::fs::read_dir(self.uploads_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".owner") {
                continue;
            }
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > kept);
            if stale {
                self.cancel_upload(&name);
            }
        }
    }

    /// The file to start for blob `digest`, hashed just now: the blob itself, or, when
    /// `install` says where (the slot runs as a user of its own), the copy installed there.
    pub fn runnable(
        &self,
        digest: &Digest,
        install: Option<&InstallFor>,
    ) -> Result<PathBuf, BlobError> {
        let blob = self.path(digest);
        if !blob.is_file() {
            return Err(BlobError::Missing {
                digest: digest.clone(),
            });
        }
        let path = match install {
            None => blob,
            Some(to) => install_copy(&blob, digest, to)?,
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

/// Copies `blob` into the pool's dir (see the module doc) unless a copy with the right
/// digest, owner, group and mode is there; returns the copy's path.
fn install_copy(blob: &Path, digest: &Digest, to: &InstallFor) -> Result<PathBuf, BlobError> {
    let root = &to.runtime_root;
    crate::run_as::prepare_root(root).map_err(io("cannot prepare the runtime root", root))?;
    let bin = root.join("bin");
    create_dir(&bin, 0o711)?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o711))
        .map_err(io("cannot set the mode of", &bin))?;
    remove_shared_copies(&bin)?;
    let dir = &to.dir;
    create_dir(dir, 0o750)?;
    let zone_uid = rustix::process::geteuid().as_raw();
    let meta = std::fs::symlink_metadata(dir).map_err(io("cannot inspect", dir))?;
    if !meta.is_dir() || meta.uid() != zone_uid {
        return Err(BlobError::Io {
            what: "a pool's binaries must be in a dir the zone's user owns, not",
            path: dir.clone(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    if meta.gid() != to.gid {
        std::os::unix::fs::chown(dir, None, Some(to.gid))
            .map_err(io("cannot give the pool's group", dir))?;
    }
    if meta.mode() & 0o7777 != 0o750 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
            .map_err(io("cannot set the mode of", dir))?;
    }
    let path = dir.join(digest.hex());
    let in_place = std::fs::symlink_metadata(&path).is_ok_and(|m| {
        m.is_file() && m.uid() == zone_uid && m.gid() == to.gid && m.mode() & 0o7777 == 0o550
    });
    if in_place && hash_file(&path).is_ok_and(|d| &d == digest) {
        return Ok(path);
    }
    let temp = dir.join(format!(
        ".install-{}-{:016x}",
        digest.short(),
        rand_suffix()
    ));
    let copied = (|| {
        let mut from = std::fs::File::open(blob)?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        std::io::copy(&mut from, &mut out)?;
        out.sync_all()?;
        std::os::unix::fs::fchown(&out, None, Some(to.gid))?;
        out.set_permissions(std::fs::Permissions::from_mode(0o550))?;
        std::fs::rename(&temp, &path)
    })();
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

/// Creates `dir` with `mode` unless it exists.
fn create_dir(dir: &Path, mode: u32) -> Result<(), BlobError> {
    match DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(BlobError::Io {
            what: "cannot create",
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Removes every file directly in `bin`: copies an older zone shared between pools, readable
/// by everyone. Pools' dirs stay.
fn remove_shared_copies(bin: &Path) -> Result<(), BlobError> {
    let entries = std::fs::read_dir(bin).map_err(io("cannot list", bin))?;
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir {
            let path = entry.path();
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(BlobError::Io {
                        what: "cannot remove a shared binary copy",
                        path,
                        source,
                    });
                }
            }
        }
    }
    Ok(())
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
        let to = InstallFor {
            runtime_root: root.clone(),
            dir: root.join("bin").join("pl-1-0000abcd"),
            gid: rustix::process::getegid().as_raw(),
        };
        let installed = blobs.runnable(&digest, Some(&to)).unwrap();
        assert_eq!(installed, to.dir.join(digest.hex()));
        let meta = std::fs::metadata(&installed).unwrap();
        assert_eq!((meta.mode() & 0o7777, meta.gid()), (0o550, to.gid));
        let pool_dir = std::fs::metadata(&to.dir).unwrap();
        assert_eq!((pool_dir.mode() & 0o7777, pool_dir.gid()), (0o750, to.gid));
        // A copy an older zone shared between pools goes at the next install.
        let shared = root.join("bin").join(digest.hex());
        std::fs::write(&shared, &bytes).unwrap();
        blobs.runnable(&digest, Some(&to)).unwrap();
        assert!(!shared.exists(), "the shared copy stayed");

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
