//! OCI images built by tests, with no registry and no network: files in, an OCI image layout
//! (`oci-layout`, `index.json`, `blobs/sha256/…`) out, the way `skopeo copy oci:DIR:TAG …`
//! reads it.
//!
//! [`busybox_files`] makes the usual test image: Debian's static busybox with the applets a
//! workload needs, and an `httpd` document root whose `/healthz` answers.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// One entry of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir(String),
    /// A file with its mode.
    File(String, Vec<u8>, u32),
    /// A symbolic link to a target.
    Symlink(String, String),
}

/// How the image runs by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    pub cmd: Vec<String>,
    /// `Env`, as `NAME=value`.
    pub env: Vec<String>,
    /// `WorkingDir`.
    pub working_dir: String,
}

/// What [`write_layout`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The layout's directory.
    pub dir: PathBuf,
    /// The image manifest's digest, `sha256:…`.
    pub manifest_digest: String,
    /// Each layer's compressed digest.
    pub layer_digests: Vec<String>,
    /// Total bytes of the blobs.
    pub bytes: u64,
}

fn sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn put_blob(dir: &Path, bytes: &[u8]) -> String {
    let digest = sha256(bytes);
    let path = dir.join("blobs/sha256").join(&digest["sha256:".len()..]);
    std::fs::create_dir_all(path.parent().expect("a blob dir")).expect("creating blobs/sha256");
    std::fs::write(&path, bytes).expect("writing a blob");
    digest
}

/// A layer's uncompressed tar.
pub fn tar(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mtime(1_700_000_000);
        header.set_uid(0);
        header.set_gid(0);
        match entry {
            Entry::Dir(path) => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder
                    .append_data(
                        &mut header,
                        format!("{}/", path.trim_end_matches('/')),
                        &[][..],
                    )
                    .expect("a tar directory");
            }
            Entry::File(path, contents, mode) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_size(contents.len() as u64);
                builder
                    .append_data(&mut header, path, &contents[..])
                    .expect("a tar file");
            }
            Entry::Symlink(path, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                builder
                    .append_link(&mut header, path, target)
                    .expect("a tar symlink");
            }
        }
    }
    builder.into_inner().expect("finishing a tar")
}

/// Writes an OCI image layout at `dir` holding one image, tagged `tag`, whose layers are
/// `layers` (each a list of entries, gzip-compressed) for the machine's architecture.
pub fn write_layout(dir: &Path, tag: &str, layers: &[Vec<Entry>], run: &RunConfig) -> Layout {
    std::fs::create_dir_all(dir).expect("creating the layout dir");
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("writing oci-layout");
    let mut descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    let mut layer_digests = Vec::new();
    let mut bytes = 0u64;
    for entries in layers {
        let plain = tar(entries);
        diff_ids.push(sha256(&plain));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).expect("compressing a layer");
        let compressed = gz.finish().expect("compressing a layer");
        let digest = put_blob(dir, &compressed);
        bytes += compressed.len() as u64;
        descriptors.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": digest,
            "size": compressed.len(),
        }));
        layer_digests.push(digest);
    }
    let architecture = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let config = serde_json::json!({
        "architecture": architecture,
        "os": "linux",
        "config": {
            "Entrypoint": run.entrypoint,
            "Cmd": run.cmd,
            "Env": run.env,
            "WorkingDir": run.working_dir,
        },
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    let config_bytes = serde_json::to_vec(&config).expect("a config");
    let config_digest = put_blob(dir, &config_bytes);
    bytes += config_bytes.len() as u64;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_bytes.len(),
        },
        "layers": descriptors,
    });
    let manifest_bytes = serde_json::to_vec(&manifest).expect("a manifest");
    let manifest_digest = put_blob(dir, &manifest_bytes);
    bytes += manifest_bytes.len() as u64;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_bytes.len(),
            "annotations": { "org.opencontainers.image.ref.name": tag },
        }],
    });
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&index).expect("an index"),
    )
    .expect("writing index.json");
    Layout {
        dir: dir.to_path_buf(),
        manifest_digest,
        layer_digests,
        bytes,
    }
}

/// Debian's static busybox (`/usr/bin/busybox`, package `busybox-static`) with the applets
/// tests use, and `/www/healthz` reading `ok` plus `/www/index.html` reading `page`.
/// Panics naming the package when busybox is missing.
pub fn busybox_files(page: &str) -> Vec<Entry> {
    let busybox = std::fs::read("/usr/bin/busybox").unwrap_or_else(|e| {
        panic!("/usr/bin/busybox cannot be read ({e}): install Debian's busybox-static")
    });
    let mut entries = vec![
        Entry::Dir("bin".into()),
        Entry::Dir("etc".into()),
        Entry::Dir("tmp".into()),
        Entry::Dir("www".into()),
        Entry::Dir("proc".into()),
        Entry::Dir("sys".into()),
        Entry::Dir("dev".into()),
        Entry::Dir("run".into()),
        Entry::File("bin/busybox".into(), busybox, 0o755),
        Entry::File("www/healthz".into(), b"ok\n".to_vec(), 0o644),
        Entry::File("www/index.html".into(), page.as_bytes().to_vec(), 0o644),
        Entry::File(
            "etc/passwd".into(),
            b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n".to_vec(),
            0o644,
        ),
    ];
    for applet in [
        "sh", "echo", "cat", "ls", "sleep", "httpd", "wget", "nslookup", "ip", "env", "id",
        "hostname", "kill", "ps", "true", "false", "nc", "grep", "printf", "date",
    ] {
        entries.push(Entry::Symlink(format!("bin/{applet}"), "busybox".into()));
    }
    entries
}

/// The run config of a busybox image that serves `/www` on `port`.
pub fn busybox_httpd(port: u16) -> RunConfig {
    RunConfig {
        entrypoint: vec![],
        cmd: vec![
            "/bin/httpd".into(),
            "-f".into(),
            "-p".into(),
            port.to_string(),
            "-h".into(),
            "/www".into(),
        ],
        env: vec!["PATH=/bin".into()],
        working_dir: "/".into(),
    }
}
