//! Another registry for apps to pull from: Debian's `docker-registry` on a loopback port,
//! with a login (an htpasswd file made by `htpasswd -B`), stopped and removed on drop.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;

/// A running `docker-registry`.
pub struct OtherRegistry {
    /// `127.0.0.1:PORT`, as image references name it.
    pub host: String,
    pub username: String,
    pub password: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for OtherRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(name: &str) {
    assert!(
        Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "{name} is needed (Debian packages docker-registry and apache2-utils; CI installs them)"
    );
}

impl OtherRegistry {
    /// Starts one and waits until it answers.
    pub async fn start() -> OtherRegistry {
        tool("docker-registry");
        tool("htpasswd");
        let dir = tempfile::tempdir().expect("a dir");
        let (username, password) = ("ci".to_string(), "registry-Pass-42".to_string());
        let htpasswd = Command::new("htpasswd")
            .args(["-Bbn", &username, &password])
            .output()
            .expect("htpasswd");
        assert!(htpasswd.status.success());
        std::fs::write(dir.path().join("htpasswd"), &htpasswd.stdout).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let host = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {data}\n\
             http:\n  addr: {host}\nauth:\n  htpasswd:\n    realm: orc-test\n    path: {auth}\n",
            data = dir.path().join("data").display(),
            auth = dir.path().join("htpasswd").display(),
        );
        let file = dir.path().join("config.yml");
        std::fs::write(&file, config).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", &file.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        let registry = OtherRegistry {
            host,
            username,
            password,
            child,
            _dir: dir,
        };
        let http = reqwest::Client::new();
        orc_testkit::eventually(
            "the other registry answers",
            Duration::from_secs(20),
            || {
                let http = http.clone();
                let url = format!("http://{}/v2/", registry.host);
                async move {
                    http.get(url)
                        .send()
                        .await
                        .is_ok_and(|r| r.status() == reqwest::StatusCode::UNAUTHORIZED)
                }
            },
        )
        .await;
        registry
    }

    /// Pushes an OCI layout as `repository:tag` with the login; returns its digest.
    pub async fn push(&self, layout: &Path, manifest_digest: &str, repository: &str, tag: &str) {
        let http = reqwest::Client::new();
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", self.username, self.password))
        );
        let blobs = layout.join("blobs/sha256");
        for entry in std::fs::read_dir(&blobs).expect("the layout's blobs") {
            let path = entry.expect("a blob").path();
            let digest = format!("sha256:{}", path.file_name().unwrap().to_string_lossy());
            if digest == manifest_digest {
                continue;
            }
            // docker-registry takes a monolithic upload as a POST, then a PUT with the digest.
            let started = http
                .post(format!(
                    "http://{}/v2/{repository}/blobs/uploads/",
                    self.host
                ))
                .header("authorization", &auth)
                .send()
                .await
                .expect("an upload");
            assert_eq!(started.status(), reqwest::StatusCode::ACCEPTED);
            let location = started.headers()["location"].to_str().unwrap().to_string();
            let location = if location.starts_with("http") {
                location
            } else {
                format!("http://{}{location}", self.host)
            };
            let separator = if location.contains('?') { '&' } else { '?' };
            let put = http
                .put(format!("{location}{separator}digest={digest}"))
                .header("authorization", &auth)
                .header("content-type", "application/octet-stream")
                .body(std::fs::read(&path).unwrap())
                .send()
                .await
                .expect("a blob");
            assert_eq!(put.status(), reqwest::StatusCode::CREATED, "{digest}");
        }
        let manifest = std::fs::read(blobs.join(&manifest_digest["sha256:".len()..])).unwrap();
        let put = http
            .put(format!(
                "http://{}/v2/{repository}/manifests/{tag}",
                self.host
            ))
            .header("authorization", &auth)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(manifest)
            .send()
            .await
            .expect("a manifest");
        assert_eq!(put.status(), reqwest::StatusCode::CREATED);
    }
}
