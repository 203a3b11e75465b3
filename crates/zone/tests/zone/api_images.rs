//! Images in the zone's registry over the OCI distribution API: the spec's push and pull
//! flows with raw HTTP (monolithic and chunked uploads, mounts, manifests by tag and digest,
//! tag lists, deletes, who may), and Debian's `skopeo`, a client orc did not write, copying an
//! OCI layout in and out, inspecting it and listing tags.

use std::process::Command;

use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::api_support::{TestZone, tenancy};

fn digest_of(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn basic(token: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("someone:{token}"));
    format!("Basic {encoded}")
}

struct Reply {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn error_code(&self) -> String {
        self.json()["errors"][0]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

async fn call(
    z: &TestZone,
    method: Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Reply {
    let url = if path.starts_with("http") {
        path.to_string()
    } else {
        format!("{}{path}", z.zone.url())
    };
    let mut request = z.http.request(method, url).body(body);
    if let Some(token) = token {
        request = request.header("authorization", basic(token));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the registry answers");
    Reply {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.bytes().await.expect("a body").to_vec(),
    }
}

fn manifest_for(config: &[u8], layers: &[&[u8]]) -> Vec<u8> {
    let layers: Vec<Value> = layers
        .iter()
        .map(|l| {
            json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": digest_of(l),
                "size": l.len(),
            })
        })
        .collect();
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": digest_of(config),
            "size": config.len(),
        },
        "layers": layers,
    }))
    .expect("a manifest")
}

#[tokio::test]
async fn the_distribution_api_takes_and_serves_images() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let o = Some(t.olivia.as_str());

    // No credentials: 401 with the challenge that makes clients log in.
    let r = call(&z, Method::GET, "/v2/", None, &[], vec![]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(
        r.header("www-authenticate").starts_with("Basic realm="),
        "{:?}",
        r.headers
    );
    assert_eq!(r.error_code(), "UNAUTHORIZED");
    let r = call(&z, Method::GET, "/v2/", Some("not-a-token"), &[], vec![]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = call(&z, Method::GET, "/v2/", o, &[], vec![]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("docker-distribution-api-version"), "registry/2.0");

    // A monolithic upload: one POST with the digest.
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let r = call(
        &z,
        Method::POST,
        &format!("/v2/acme/web/blobs/uploads/?digest={}", digest_of(config)),
        o,
        &[],
        config.to_vec(),
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.header("docker-content-digest"), digest_of(config));

    // A chunked upload: POST, two PATCHes, PUT with the digest.
    let layer: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let r = call(
        &z,
        Method::POST,
        "/v2/acme/web/blobs/uploads/",
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let upload = r.header("location");
    assert!(
        upload.starts_with("/v2/acme/web/blobs/uploads/"),
        "{upload}"
    );
    let (first, second) = layer.split_at(120_000);
    let r = call(
        &z,
        Method::PATCH,
        &upload,
        o,
        &[("content-range", "0-119999")],
        first.to_vec(),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert_eq!(r.header("range"), "0-119999");
    // A chunk that does not start where the upload ends is refused.
    let r = call(
        &z,
        Method::PATCH,
        &upload,
        o,
        &[("content-range", "5-9")],
        vec![0; 5],
    )
    .await;
    assert_eq!(r.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(r.error_code(), "BLOB_UPLOAD_INVALID");
    let r = call(&z, Method::PATCH, &upload, o, &[], second.to_vec()).await;
    assert_eq!(r.header("range"), "0-199999");
    let status = call(&z, Method::GET, &upload, o, &[], vec![]).await;
    assert_eq!(status.status, StatusCode::NO_CONTENT);
    let r = call(
        &z,
        Method::PUT,
        &format!("{upload}?digest={}", digest_of(&layer)),
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    let r = call(&z, Method::GET, &upload, o, &[], vec![]).await;
    assert_eq!(r.error_code(), "BLOB_UPLOAD_UNKNOWN");

    // Content that is not its digest is not kept.
    let r = call(
        &z,
        Method::POST,
        "/v2/acme/web/blobs/uploads/",
        o,
        &[],
        vec![],
    )
    .await;
    let wrong = call(
        &z,
        Method::PUT,
        &format!("{}?digest={}", r.header("location"), digest_of(b"other")),
        o,
        &[],
        b"this".to_vec(),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong.error_code(), "DIGEST_INVALID");

    let blob = format!("/v2/acme/web/blobs/{}", digest_of(&layer));
    let r = call(&z, Method::HEAD, &blob, o, &[], vec![]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-length"), "200000");
    let r = call(&z, Method::GET, &blob, o, &[], vec![]).await;
    assert_eq!(r.body, layer);

    // A manifest naming a blob never sent is refused, naming it.
    let missing = manifest_for(config, &[b"never sent"]);
    let r = call(
        &z,
        Method::PUT,
        "/v2/acme/web/manifests/1",
        o,
        &[("content-type", "application/vnd.oci.image.manifest.v1+json")],
        missing,
    )
    .await;
    assert_eq!(r.error_code(), "MANIFEST_BLOB_UNKNOWN");
    assert!(
        String::from_utf8_lossy(&r.body).contains(&digest_of(b"never sent")),
        "{}",
        String::from_utf8_lossy(&r.body)
    );

    let manifest = manifest_for(config, &[&layer]);
    let manifest_digest = digest_of(&manifest);
    for tag in ["1", "2", "latest"] {
        let r = call(
            &z,
            Method::PUT,
            &format!("/v2/acme/web/manifests/{tag}"),
            o,
            &[("content-type", "application/vnd.oci.image.manifest.v1+json")],
            manifest.clone(),
        )
        .await;
        assert_eq!(
            r.status,
            StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.header("docker-content-digest"), manifest_digest);
    }
    for reference in ["1", manifest_digest.as_str()] {
        let r = call(
            &z,
            Method::GET,
            &format!("/v2/acme/web/manifests/{reference}"),
            o,
            &[],
            vec![],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body, manifest);
        assert_eq!(
            r.header("content-type"),
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert_eq!(r.header("docker-content-digest"), manifest_digest);
    }

    // Tags, a page at a time.
    let r = call(
        &z,
        Method::GET,
        "/v2/acme/web/tags/list?n=2",
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.json(), json!({ "name": "acme/web", "tags": ["1", "2"] }));
    assert!(r.header("link").contains("last=2"), "{}", r.header("link"));
    let r = call(
        &z,
        Method::GET,
        "/v2/acme/web/tags/list?n=2&last=2",
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.json()["tags"], json!(["latest"]));

    // A mount within the org is taken; from another org it starts an upload instead.
    let r = call(
        &z,
        Method::POST,
        &format!(
            "/v2/acme/api/blobs/uploads/?mount={}&from=acme/web",
            digest_of(&layer)
        ),
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let beta = z
        .post("/api/orgs", &z.admin, json!({ "name": "beta" }))
        .await;
    assert_eq!(beta.status, StatusCode::CREATED, "{}", beta.body);
    let r = call(
        &z,
        Method::POST,
        &format!(
            "/v2/beta/web/blobs/uploads/?mount={}&from=acme/web",
            digest_of(&layer)
        ),
        Some(&z.admin),
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let r = call(
        &z,
        Method::HEAD,
        &blob.replace("acme/web", "beta/web"),
        Some(&z.admin),
        &[],
        vec![],
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "beta holds nothing of acme's"
    );

    // Who may: a project member cannot push to the org's registry, a viewer reads, a
    // stranger sees no repository.
    let r = call(
        &z,
        Method::POST,
        "/v2/acme/web/blobs/uploads/",
        Some(&t.mia),
        &[],
        vec![],
    )
    .await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (StatusCode::FORBIDDEN, "DENIED")
    );
    let r = call(
        &z,
        Method::GET,
        "/v2/acme/web/manifests/1",
        Some(&t.vic),
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = call(
        &z,
        Method::GET,
        "/v2/acme/web/manifests/1",
        Some(&t.stan),
        &[],
        vec![],
    )
    .await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (StatusCode::NOT_FOUND, "NAME_UNKNOWN")
    );
    let r = call(
        &z,
        Method::GET,
        "/v2/acme/team/web/manifests/1",
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.error_code(), "NAME_INVALID");

    // Deleting a tag leaves the manifest; deleting the manifest takes its tags and, at the
    // sweep, its blobs.
    let r = call(
        &z,
        Method::DELETE,
        "/v2/acme/web/manifests/2",
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let r = call(&z, Method::GET, "/v2/acme/web/manifests/2", o, &[], vec![]).await;
    assert_eq!(r.error_code(), "MANIFEST_UNKNOWN");
    let r = call(
        &z,
        Method::DELETE,
        &format!("/v2/acme/web/manifests/{manifest_digest}"),
        o,
        &[],
        vec![],
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let r = call(&z, Method::GET, "/v2/acme/web/manifests/1", o, &[], vec![]).await;
    assert_eq!(r.error_code(), "MANIFEST_UNKNOWN");
    let layer_file = z
        .dir()
        .join("registry/blobs/sha256")
        .join(&digest_of(&layer)["sha256:".len()..]);
    assert!(
        !layer_file.exists(),
        "the layer no manifest names is removed from disk"
    );
}

fn skopeo(args: &[&str]) -> (bool, String) {
    let output = Command::new("skopeo")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("skopeo cannot run ({e}): install Debian's skopeo"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

// skopeo runs as a blocking child process; the zone keeps serving on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pushes_inspects_lists_and_pulls_an_image() {
    use orc_testkit::oci::{busybox_files, busybox_httpd, write_layout};

    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let work = tempfile::tempdir().expect("a temporary dir");
    let layout = write_layout(
        &work.path().join("layout"),
        "1",
        &[busybox_files("version one\n")],
        &busybox_httpd(8080),
    );
    let host = z
        .zone
        .url()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let creds = format!("olivia:{}", t.olivia);
    // Trust the zone's CA when it speaks TLS; a plain zone is reached without TLS.
    let certs = work.path().join("certs");
    std::fs::create_dir_all(&certs).expect("a cert dir");
    let (tls_src, tls_dest): (Vec<String>, Vec<String>) = match z.zone.ca_pem() {
        Some(pem) => {
            std::fs::write(certs.join("ca.crt"), pem).expect("writing the CA");
            let dir = certs.display().to_string();
            (
                vec!["--src-cert-dir".into(), dir.clone()],
                vec!["--dest-cert-dir".into(), dir],
            )
        }
        None => (
            vec!["--src-tls-verify=false".into()],
            vec!["--dest-tls-verify=false".into()],
        ),
    };
    let oci_src = format!("oci:{}:1", layout.dir.display());
    for tag in ["1", "2"] {
        let dest = format!("docker://{host}/acme/shop:{tag}");
        let mut args: Vec<&str> = vec!["copy", "--dest-creds", &creds];
        args.extend(tls_dest.iter().map(String::as_str));
        args.extend([oci_src.as_str(), dest.as_str()]);
        let (ok, out) = skopeo(&args);
        assert!(ok, "skopeo copy into the zone: {out}");
    }

    let image = format!("docker://{host}/acme/shop:1");
    let tls_plain: Vec<String> = tls_src.iter().map(|a| a.replace("--src-", "--")).collect();
    let mut args: Vec<&str> = vec!["inspect", "--creds", &creds];
    args.extend(tls_plain.iter().map(String::as_str));
    args.push(&image);
    let (ok, out) = skopeo(&args);
    assert!(ok, "skopeo inspect: {out}");
    let inspected: Value = serde_json::from_str(&out).expect("skopeo inspect prints JSON");
    assert_eq!(inspected["Digest"], layout.manifest_digest);
    assert_eq!(inspected["Layers"], json!(layout.layer_digests));

    let repo = format!("docker://{host}/acme/shop");
    let mut args: Vec<&str> = vec!["list-tags", "--creds", &creds];
    args.extend(tls_plain.iter().map(String::as_str));
    args.push(&repo);
    let (ok, out) = skopeo(&args);
    assert!(ok, "skopeo list-tags: {out}");
    let listed: Value = serde_json::from_str(&out).expect("skopeo list-tags prints JSON");
    assert_eq!(listed["Tags"], json!(["1", "2"]));

    let pulled = work.path().join("pulled");
    let oci_dest = format!("oci:{}:1", pulled.display());
    let mut args: Vec<&str> = vec!["copy", "--src-creds", &creds];
    args.extend(tls_src.iter().map(String::as_str));
    args.extend([image.as_str(), oci_dest.as_str()]);
    let (ok, out) = skopeo(&args);
    assert!(ok, "skopeo copy out of the zone: {out}");
    for digest in layout.layer_digests.iter().chain([&layout.manifest_digest]) {
        let name = &digest["sha256:".len()..];
        let ours = std::fs::read(layout.dir.join("blobs/sha256").join(name)).expect("ours");
        let theirs = std::fs::read(pulled.join("blobs/sha256").join(name))
            .unwrap_or_else(|e| panic!("the pulled layout lacks {digest}: {e}"));
        assert_eq!(ours, theirs, "{digest} came back changed");
    }

    let doomed = format!("docker://{host}/acme/shop:2");
    let mut args: Vec<&str> = vec!["delete", "--creds", &creds];
    args.extend(tls_plain.iter().map(String::as_str));
    args.push(&doomed);
    let (ok, out) = skopeo(&args);
    assert!(ok, "skopeo delete: {out}");
    let mut args: Vec<&str> = vec!["list-tags", "--creds", &creds];
    args.extend(tls_plain.iter().map(String::as_str));
    args.push(&repo);
    // skopeo deletes by digest: the manifest goes with both its tags, and the repository
    // holds no image any more.
    let (ok, out) = skopeo(&args);
    assert!(!ok && out.contains("404"), "{out}");
}
