//! A zone for tests that talk to it over its API: [`TestZone`] starts one in-process on
//! loopback (SQLite in a temporary directory) and [`tenancy`] gives it the standard tenancy:
//! org `acme` with projects `web` and `data`, users `olivia` (owner of acme), `mia` (member of
//! acme/web), `vic` (viewer of acme/web) and `stan` (no role), and provider `fake` registered
//! in acme/web. Enabled by the `zone` feature.

use orc_zone::model::{Name, NewProvider, PricingStrategy, ProviderScope, Timestamp};
use orc_zone::zone::{Zone, ZoneConfig};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A zone started in-process on loopback, with its store in a temporary directory that
/// lives as long as the value.
pub struct TestZone {
    pub zone: Zone,
    /// The zone's admin token.
    pub admin: String,
    pub http: reqwest::Client,
    config: ZoneConfig,
    dir: tempfile::TempDir,
}

/// A JSON answer of the zone's API.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The `field` of an error answer.
    pub fn field(&self) -> Option<&str> {
        self.body["error"]["field"].as_str()
    }
    /// The `code` of an error answer.
    pub fn code(&self) -> Option<&str> {
        self.body["error"]["code"].as_str()
    }
}

impl std::fmt::Debug for TestZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestZone")
            .field("url", &self.zone.url())
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// An HTTP client of `zone`'s API that trusts only the zone's CA (any client, when the
/// zone is plain).
pub fn client_of(zone: &Zone) -> reqwest::Client {
    pinned_client(zone.ca_pem())
}

/// An HTTP client that trusts only the CA in `ca_pem` (no CA: a client for plain zones).
pub fn pinned_client(ca_pem: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().tls_built_in_root_certs(false);
    if let Some(pem) = ca_pem {
        builder = builder
            .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).expect("CA PEM"));
    }
    builder.build().expect("HTTP client")
}

impl TestZone {
    /// A zone on the embedded defaults.
    pub async fn start() -> TestZone {
        TestZone::start_with(|_| {}).await
    }

    /// A zone whose config `adjust` changes first.
    pub async fn start_with(adjust: impl FnOnce(&mut ZoneConfig)) -> TestZone {
        let dir = tempfile::tempdir().expect("temp dir");
        // A fresh temporary dir is 0755; the zone's data dir inside it is made private.
        let mut config = ZoneConfig::ephemeral(dir.path().join("zone"));
        adjust(&mut config);
        let zone = Zone::start(config.clone()).await.expect("zone starts");
        let admin = zone.admin_token().expose().to_string();
        let http = client_of(&zone);
        TestZone {
            zone,
            admin,
            http,
            config,
            dir,
        }
    }

    /// Stops the zone and starts it again on the same data dir and config, as an operator's
    /// restart does.
    pub async fn restart(self) -> TestZone {
        let TestZone {
            zone,
            admin,
            http,
            config,
            dir,
        } = self;
        zone.shutdown().await;
        let zone = Zone::start(config.clone())
            .await
            .expect("zone starts again");
        TestZone {
            zone,
            admin,
            http,
            config,
            dir,
        }
    }

    /// The zone's data directory.
    pub fn dir(&self) -> std::path::PathBuf {
        self.config.data_dir.clone()
    }

    /// Calls the API at `path` (e.g. `/api/orgs`) and reads the answer as JSON.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.zone.url()));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request is answered");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
        };
        Answer { status, body }
    }

    /// `GET` of `path` as `token`.
    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.call(Method::GET, path, Some(token), None).await
    }

    /// `POST` of `path` as `token`.
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    /// `PUT` of `path` as `token`.
    pub async fn put(&self, path: &str, token: &str, body: Value) -> Answer {
        self.call(Method::PUT, path, Some(token), Some(body)).await
    }

    /// `DELETE` of `path` as `token`.
    pub async fn delete(&self, path: &str, token: &str) -> Answer {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// Creates a user with a token; returns the token's value.
    pub async fn user(&self, name: &str) -> String {
        let a = self
            .post("/api/users", &self.admin, json!({ "name": name }))
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        let t = self
            .post(
                &format!("/api/users/{name}/tokens"),
                &self.admin,
                json!({ "label": "test" }),
            )
            .await;
        assert_eq!(t.status, StatusCode::CREATED, "{}", t.body);
        t.body["value"].as_str().expect("token value").to_string()
    }

    /// Gives `user` `role` in `org` (or `org/project`).
    pub async fn grant(&self, org: &str, project: Option<&str>, user: &str, role: &str) {
        let mut body = json!({ "user": user, "role": role });
        if let Some(p) = project {
            body["project"] = json!(p);
        }
        let a = self
            .post(&format!("/api/orgs/{org}/memberships"), &self.admin, body)
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    }

    /// Takes `user`'s role in `org` (the first of theirs it lists) away, as `token` (an owner).
    pub async fn ungrant(&self, org: &str, user: &str, token: &str) {
        let list = self
            .get(&format!("/api/orgs/{org}/memberships"), token)
            .await;
        let id = list
            .body
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["user"] == user))
            .and_then(|m| m["id"].as_str())
            .unwrap_or_else(|| panic!("{user} holds no role in {org}: {}", list.body))
            .to_string();
        let removed = self
            .delete(&format!("/api/orgs/{org}/memberships/{id}"), token)
            .await;
        assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.body);
    }

    /// Registers a provider in `org/project` directly in the store (as the hub does when a
    /// provider says hello).
    pub async fn provider(&self, org: &str, project: &str, name: &str) {
        let store = self.zone.store();
        let project = store
            .project_by_path(
                &org.parse::<Name>().unwrap(),
                &project.parse::<Name>().unwrap(),
            )
            .await
            .unwrap();
        store
            .create_provider(
                &NewProvider {
                    project_id: project.id,
                    name: name.parse().unwrap(),
                    resource_uri: format!("urn:orc:test:{org}:{name}"),
                    scope: ProviderScope::Project,
                    pricing: PricingStrategy::None,
                },
                Timestamp::now(),
            )
            .await
            .unwrap();
    }
}

/// Tokens of the standard tenancy.
pub struct Tenancy {
    pub olivia: String,
    pub mia: String,
    pub vic: String,
    pub stan: String,
}

impl std::fmt::Debug for Tenancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tenancy { tokens of olivia, mia, vic and stan }")
    }
}

/// Builds the standard tenancy (see the module doc).
pub async fn tenancy(z: &TestZone) -> Tenancy {
    let t = tenancy_without_provider(z).await;
    z.provider("acme", "web", "fake").await;
    t
}

/// The standard tenancy without provider `fake` (a connecting provider registers itself).
pub async fn tenancy_without_provider(z: &TestZone) -> Tenancy {
    let a = z
        .post("/api/orgs", &z.admin, json!({ "name": "acme" }))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    for p in ["web", "data"] {
        let a = z
            .post("/api/orgs/acme/projects", &z.admin, json!({ "name": p }))
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    }
    let t = Tenancy {
        olivia: z.user("olivia").await,
        mia: z.user("mia").await,
        vic: z.user("vic").await,
        stan: z.user("stan").await,
    };
    z.grant("acme", None, "olivia", "owner").await;
    z.grant("acme", Some("web"), "mia", "member").await;
    z.grant("acme", Some("web"), "vic", "viewer").await;
    t
}

#[cfg(feature = "oci")]
impl TestZone {
    /// Pushes every blob of `layout` and its manifest as `repository:tag` through the zone's
    /// OCI API, with `token` as the registry password.
    pub async fn push_layout(
        &self,
        token: &str,
        layout: &crate::oci::Layout,
        repository: &str,
        tag: &str,
    ) {
        let blobs = layout.dir.join("blobs/sha256");
        for entry in std::fs::read_dir(&blobs).expect("the layout's blobs") {
            let path = entry.expect("a blob").path();
            let digest = format!("sha256:{}", path.file_name().unwrap().to_string_lossy());
            if digest == layout.manifest_digest {
                continue;
            }
            let r = self
                .http
                .post(format!(
                    "{}/v2/{repository}/blobs/uploads/?digest={digest}",
                    self.zone.url()
                ))
                .basic_auth("x", Some(token))
                .body(std::fs::read(&path).expect("a blob's bytes"))
                .send()
                .await
                .expect("an upload");
            assert_eq!(r.status(), StatusCode::CREATED, "{digest}");
        }
        let manifest = std::fs::read(blobs.join(&layout.manifest_digest["sha256:".len()..]))
            .expect("the manifest");
        let r = self
            .http
            .put(format!(
                "{}/v2/{repository}/manifests/{tag}",
                self.zone.url()
            ))
            .basic_auth("x", Some(token))
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(manifest)
            .send()
            .await
            .expect("a manifest put");
        assert_eq!(r.status(), StatusCode::CREATED);
    }
}
