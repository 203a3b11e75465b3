//! Images on a node: pulled by digest, every blob checked against its digest, each layer
//! unpacked once and shared by every replica that uses it.
//!
//! `<root>/layers/<hex>/` holds a layer's files, named by its compressed digest, unpacked
//! as overlayfs reads a lower layer (whiteouts as 0/0 character devices, opaque
//! directories marked with `trusted.overlay.opaque`); its uncompressed digest must be the
//! one the image's config lists. `<root>/images/<hex>.json` records a pulled image: its
//! layers and how it runs. A layer is unpacked in a temporary directory and renamed into
//! place, so a half-unpacked layer is never used.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

/// Why an image could not be pulled.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A blob could not be fetched.
    #[error("cannot fetch {digest} of {image}: {reason}")]
    Fetch {
        /// The image.
        image: String,
        /// The blob.
        digest: String,
        /// Why.
        reason: String,
    },
    /// A blob's content is not its digest.
    #[error("{what} {expected} of {image} arrived as {actual}: refused")]
    Digest {
        /// The image.
        image: String,
        /// What it is (manifest, config, layer).
        what: &'static str,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// A manifest or config does not read.
    #[error("the {what} of {image} does not read: {reason}")]
    Format {
        /// The image.
        image: String,
        /// What.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// Disk.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, ImageError>;

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ImageError + 'a {
    move |source| ImageError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Where blobs come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A registry speaking the OCI distribution API.
    Registry {
        /// The client (with the registry's CA).
        client: reqwest::Client,
        /// `https://host:port`.
        base: String,
        /// `org/name`.
        repository: String,
        /// What it shows the registry.
        auth: crate::registry::RegistryAuth,
    },
    /// An OCI image layout on disk (`blobs/sha256/…`).
    Layout(PathBuf),
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Registry {
                base, repository, ..
            } => format!("{base}/{repository}"),
            Source::Layout(dir) => dir.display().to_string(),
        }
    }
}

/// How an image runs by default: its config's `config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunDefaults {
    /// `Entrypoint`.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    #[serde(default)]
    pub cmd: Vec<String>,
    /// `Env`, `NAME=value`.
    #[serde(default)]
    pub env: Vec<String>,
    /// `WorkingDir`.
    #[serde(default)]
    pub working_dir: String,
    /// `User`.
    #[serde(default)]
    pub user: String,
}

/// An image on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The manifest's digest.
    pub digest: String,
    /// Each layer's directory, bottom first.
    pub layers: Vec<PathBuf>,
    /// How it runs.
    pub run: RunDefaults,
    /// Bytes fetched to pull it (0 when every layer was there).
    pub fetched_bytes: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

#[derive(Deserialize)]
struct ManifestDoc {
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

#[derive(Deserialize)]
struct ConfigDoc {
    #[serde(default)]
    config: Option<ConfigRun>,
    rootfs: RootFs,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ConfigRun {
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
struct RootFs {
    diff_ids: Vec<String>,
}

const ACCEPT: &str = crate::registry::MANIFEST_ACCEPT;

fn hex_of(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn sha256_text(hash: &[u8]) -> String {
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The images of one node, under `root`.
#[derive(Debug, Clone)]
pub struct ImageStore {
    root: PathBuf,
}

impl ImageStore {
    /// The store under `root` (created as needed).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn layer_dir(&self, digest: &str) -> PathBuf {
        self.root
            .join("layers")
            .join(hex_of(digest).unwrap_or("invalid"))
    }

    fn record(&self, digest: &str) -> PathBuf {
        self.root
            .join("images")
            .join(format!("{}.json", hex_of(digest).unwrap_or("invalid")))
    }

    /// The image `digest` if it is on the node.
    pub fn get(&self, digest: &str) -> Option<Image> {
        let bytes = std::fs::read(self.record(digest)).ok()?;
        let image: Image = serde_json::from_slice(&bytes).ok()?;
        image.layers.iter().all(|l| l.is_dir()).then_some(image)
    }

    /// Pulls image `digest` (a manifest or an index; for an index, this machine's platform)
    /// from `source`, unless it is on the node already.
    pub async fn pull(&self, source: &Source, digest: &str) -> Result<Image> {
        if let Some(mut image) = self.get(digest) {
            image.fetched_bytes = 0;
            return Ok(image);
        }
        let name = format!("{}@{digest}", source.describe());
        let format = |what: &'static str, reason: String| ImageError::Format {
            image: name.clone(),
            what,
            reason,
        };
        let mut fetched = 0u64;
        let bytes = self.fetch_small(source, &name, digest, "manifest").await?;
        fetched += bytes.len() as u64;
        let mut manifest: ManifestDoc =
            serde_json::from_slice(&bytes).map_err(|e| format("manifest", e.to_string()))?;
        if let Some(list) = &manifest.manifests {
            let (os, arch) = ("linux", platform_arch());
            let chosen = list
                .iter()
                .find(|m| {
                    m.platform
                        .as_ref()
                        .is_some_and(|p| p.os == os && p.architecture == arch)
                })
                .or_else(|| list.iter().find(|m| m.platform.is_none()))
                .ok_or_else(|| format("index", format!("it lists no image for {os}/{arch}")))?;
            let child = chosen.digest.clone();
            let _ = &chosen.media_type;
            let bytes = self.fetch_small(source, &name, &child, "manifest").await?;
            fetched += bytes.len() as u64;
            manifest =
                serde_json::from_slice(&bytes).map_err(|e| format("manifest", e.to_string()))?;
        }
        let config_ref = manifest
            .config
            .as_ref()
            .ok_or_else(|| format("manifest", "it names no config".into()))?;
        let bytes = self
            .fetch_small(source, &name, &config_ref.digest, "config")
            .await?;
        fetched += bytes.len() as u64;
        let config: ConfigDoc =
            serde_json::from_slice(&bytes).map_err(|e| format("config", e.to_string()))?;
        if config.rootfs.diff_ids.len() != manifest.layers.len() {
            return Err(format(
                "config",
                format!(
                    "it lists {} layers, the manifest {}",
                    config.rootfs.diff_ids.len(),
                    manifest.layers.len()
                ),
            ));
        }
        let mut layers = Vec::new();
        for (layer, diff_id) in manifest.layers.iter().zip(&config.rootfs.diff_ids) {
            let dir = self.layer_dir(&layer.digest);
            if !dir.is_dir() {
                fetched += self
                    .pull_layer(source, &name, &layer.digest, &layer.media_type, diff_id)
                    .await?;
            }
            layers.push(dir);
        }
        let run = config.config.map(|c| RunDefaults {
            entrypoint: c.entrypoint.unwrap_or_default(),
            cmd: c.cmd.unwrap_or_default(),
            env: c.env.unwrap_or_default(),
            working_dir: c.working_dir.unwrap_or_default(),
            user: c.user.unwrap_or_default(),
        });
        let image = Image {
            digest: digest.to_string(),
            layers,
            run: run.unwrap_or_default(),
            fetched_bytes: fetched,
        };
        let record = self.record(digest);
        std::fs::create_dir_all(record.parent().unwrap_or(&self.root))
            .map_err(io("cannot create", &self.root))?;
        let temp = record.with_extension("json.tmp");
        std::fs::write(&temp, serde_json::to_vec(&image).unwrap_or_default())
            .map_err(io("cannot write", &temp))?;
        std::fs::rename(&temp, &record).map_err(io("cannot write", &record))?;
        Ok(image)
    }

    /// Fetches a small blob (a manifest or a config) into memory, checked.
    async fn fetch_small(
        &self,
        source: &Source,
        name: &str,
        digest: &str,
        what: &'static str,
    ) -> Result<Vec<u8>> {
        let path = self.fetch(source, name, digest, what).await?;
        let bytes = std::fs::read(&path).map_err(io("cannot read", &path))?;
        let _ = std::fs::remove_file(&path);
        Ok(bytes)
    }

    /// Fetches blob `digest` to a temporary file, checked against its digest.
    async fn fetch(
        &self,
        source: &Source,
        name: &str,
        digest: &str,
        what: &'static str,
    ) -> Result<PathBuf> {
        let fail = |reason: String| ImageError::Fetch {
            image: name.to_string(),
            digest: digest.to_string(),
            reason,
        };
        let hex = hex_of(digest).ok_or_else(|| fail("not a sha256 digest".into()))?;
        let incoming = self.root.join("incoming");
        tokio::fs::create_dir_all(&incoming)
            .await
            .map_err(io("cannot create", &incoming))?;
        let temp = incoming.join(format!("{hex}.{}", std::process::id()));
        let mut file = tokio::fs::File::create(&temp)
            .await
            .map_err(io("cannot create", &temp))?;
        let mut hasher = Sha256::new();
        match source {
            Source::Layout(dir) => {
                let path = dir.join("blobs/sha256").join(hex);
                let mut input = tokio::fs::File::open(&path)
                    .await
                    .map_err(|e| fail(format!("{}: {e}", path.display())))?;
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    let n = tokio::io::AsyncReadExt::read(&mut input, &mut buf)
                        .await
                        .map_err(io("cannot read", &path))?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                    file.write_all(&buf[..n])
                        .await
                        .map_err(io("cannot write", &temp))?;
                }
            }
            Source::Registry {
                client,
                base,
                repository,
                auth,
            } => {
                let kind = if what == "manifest" {
                    "manifests"
                } else {
                    "blobs"
                };
                let url = format!("{base}/v2/{repository}/{kind}/{digest}");
                let response = crate::registry::get(client, &url, ACCEPT, auth)
                    .await
                    .map_err(fail)?;
                if !response.status().is_success() {
                    let status = response.status();
                    let body = response.text().await.unwrap_or_default();
                    return Err(fail(format!("{status}: {}", body.trim())));
                }
                let mut response = response;
                while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
                    hasher.update(&chunk);
                    file.write_all(&chunk)
                        .await
                        .map_err(io("cannot write", &temp))?;
                }
            }
        }
        file.flush().await.map_err(io("cannot write", &temp))?;
        let actual = sha256_text(&hasher.finalize());
        if actual != digest {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(ImageError::Digest {
                image: name.to_string(),
                what,
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(temp)
    }

    async fn pull_layer(
        &self,
        source: &Source,
        name: &str,
        digest: &str,
        media_type: &str,
        diff_id: &str,
    ) -> Result<u64> {
        let blob = self.fetch(source, name, digest, "layer").await?;
        let size = std::fs::metadata(&blob).map(|m| m.len()).unwrap_or(0);
        let dir = self.layer_dir(digest);
        let temp = dir.with_extension("unpacking");
        let _ = std::fs::remove_dir_all(&temp);
        std::fs::create_dir_all(&temp).map_err(io("cannot create", &temp))?;
        let gzip = !media_type.ends_with(".tar") && !media_type.ends_with("tar");
        let (blob2, temp2) = (blob.clone(), temp.clone());
        let unpacked = tokio::task::spawn_blocking(move || unpack(&blob2, gzip, &temp2))
            .await
            .map_err(|e| ImageError::Io {
                what: "cannot unpack",
                path: blob.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let _ = std::fs::remove_file(&blob);
        let actual = match unpacked {
            Ok(actual) => actual,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(e);
            }
        };
        if actual != diff_id {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(ImageError::Digest {
                image: name.to_string(),
                what: "uncompressed layer",
                expected: diff_id.to_string(),
                actual,
            });
        }
        std::fs::rename(&temp, &dir).map_err(io("cannot move a layer to", &dir))?;
        Ok(size)
    }
}

fn platform_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    }
}

/// Reads through, hashing what it reads.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Unpacks a layer into `dest` as an overlayfs lower layer; returns the digest of the
/// uncompressed tar.
fn unpack(blob: &Path, gzip: bool, dest: &Path) -> Result<String> {
    let file = std::fs::File::open(blob).map_err(io("cannot open", blob))?;
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let hashing = Hashing {
        inner: reader,
        hasher: Sha256::new(),
    };
    let mut archive = tar::Archive::new(hashing);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    let bad = |e: std::io::Error| ImageError::Io {
        what: "cannot unpack a layer into",
        path: dest.to_path_buf(),
        source: e,
    };
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let path = entry.path().map_err(bad)?.into_owned();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parent = dest.join(path.parent().unwrap_or(Path::new("")));
        if file_name == ".wh..wh..opq" {
            std::fs::create_dir_all(&parent).map_err(bad)?;
            rustix::fs::setxattr(
                &parent,
                "trusted.overlay.opaque",
                b"y",
                rustix::fs::XattrFlags::empty(),
            )
            .map_err(|e| bad(e.into()))?;
        } else if let Some(hidden) = file_name.strip_prefix(".wh.") {
            if hidden.contains('/') || hidden == ".." || hidden.is_empty() {
                continue;
            }
            std::fs::create_dir_all(&parent).map_err(bad)?;
            let target = parent.join(hidden);
            let _ = std::fs::remove_file(&target);
            let _ = std::fs::remove_dir_all(&target);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &target,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::empty(),
                rustix::fs::makedev(0, 0),
            )
            .map_err(|e| bad(e.into()))?;
        } else {
            // `unpack_in` refuses paths that leave `dest`.
            entry.unpack_in(dest).map_err(bad)?;
        }
    }
    let mut hashing = archive.into_inner();
    std::io::copy(&mut hashing, &mut std::io::sink()).map_err(bad)?;
    let _ = std::io::sink().flush();
    Ok(sha256_text(&hashing.hasher.finalize()))
}
