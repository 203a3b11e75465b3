//! The app registry over the API: sending binaries, publishing and moving tags, who may, what
//! a pool on `core` resolves, and the zone's own downloads.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::api_support::{TestZone, tenancy};

fn digest_of(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `PUT` of `bytes` as a binary of `org`'s registry, as `token`.
async fn put_blob(
    z: &TestZone,
    org: &str,
    digest: &str,
    bytes: &[u8],
    token: &str,
) -> (StatusCode, Value) {
    let resp = z
        .http
        .put(format!(
            "{}/api/orgs/{org}/registry/blobs/{digest}",
            z.zone.url()
        ))
        .bearer_auth(token)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn host() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "linux/arm64"
    } else {
        "linux/amd64"
    }
}

fn manifest(name: &str, version: &str) -> Value {
    json!({
        "name": name,
        "version": version,
        "params": [
            { "name": "mode", "required": true, "help": "How it runs." },
            { "name": "layout", "json": true },
            { "name": "api_key", "sensitive": true },
        ],
        "endpoints": [{ "name": "web", "protocol": "http", "port": 8080 }],
    })
}

#[tokio::test]
async fn binaries_and_tags_are_published_checked_and_moved() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let v1 = b"#!/bin/sh\nexec sleep 30\n".to_vec();
    let d1 = digest_of(&v1);

    // A body whose digest is not the one named is not kept.
    let (status, body) = put_blob(&z, "acme", &digest_of(b"other"), &v1, &t.olivia).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "body");
    // Only org-wide members and owners publish; a project member may not, a stranger sees
    // no org.
    let (status, _) = put_blob(&z, "acme", &d1, &v1, &t.mia).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = put_blob(&z, "acme", &d1, &v1, &t.stan).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = put_blob(&z, "acme", &d1, &v1, &t.olivia).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["size"], v1.len());
    let held = z
        .get(&format!("/api/orgs/acme/registry/blobs/{d1}"), &t.mia)
        .await;
    assert_eq!(held.status, StatusCode::OK, "{}", held.body);

    let tag = "/api/orgs/acme/apps/api/tags/default";
    for (body, field) in [
        (
            json!({ "manifest": manifest("web", "1"), "binaries": { host(): d1 } }),
            "manifest.name",
        ),
        (
            json!({ "manifest": manifest("api", "1"), "binaries": { host(): digest_of(b"never sent") } }),
            &*format!("binaries.{}", host()),
        ),
        (
            json!({ "manifest": manifest("api", "1"), "binaries": { "linux/riscv": d1 } }),
            "binaries.linux/riscv",
        ),
        (
            json!({ "manifest": { "name": "api", "version": "1", "colour": "red" }, "binaries": { host(): d1 } }),
            "manifest",
        ),
    ] {
        let refused = z.put(tag, &t.olivia, body).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
        assert!(
            refused.field().is_some_and(|f| f.starts_with(field)),
            "{field}: {}",
            refused.body
        );
    }
    let other = if host() == "linux/amd64" {
        "linux/arm64"
    } else {
        "linux/amd64"
    };
    let no_host = z
        .put(
            tag,
            &t.olivia,
            json!({ "manifest": manifest("api", "1"), "binaries": { other: d1 } }),
        )
        .await;
    assert_eq!(no_host.status, StatusCode::BAD_REQUEST);
    assert!(
        no_host.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("no binary for {}", host())),
        "{}",
        no_host.body
    );

    let first = z
        .put(
            tag,
            &t.olivia,
            json!({ "manifest": manifest("api", "1"), "binaries": { host(): d1 } }),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["package"], "acme/api:default");
    assert_eq!(first.body["moved_from"], Value::Null);
    let p1 = first.body["digest"].as_str().unwrap().to_string();
    // The same package again moves nothing.
    let again = z
        .put(
            tag,
            &t.olivia,
            json!({ "manifest": manifest("api", "1"), "binaries": { host(): d1 } }),
        )
        .await;
    assert_eq!(again.body["digest"], p1.as_str());
    assert_eq!(again.body["moved_from"], Value::Null);
    let second = z
        .put(
            tag,
            &t.olivia,
            json!({ "manifest": manifest("api", "2"), "binaries": { host(): d1 } }),
        )
        .await;
    assert_eq!(second.body["moved_from"], p1.as_str(), "{}", second.body);
    let p2 = second.body["digest"].as_str().unwrap().to_string();
    assert_ne!(p1, p2);

    // Anyone with a role in the org reads the registry.
    let list = z.get("/api/orgs/acme/apps", &t.vic).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(list.body[0]["repository"], "acme/api");
    assert_eq!(list.body[0]["tags"][0]["version"], "2");
    assert_eq!(list.body[0]["tags"][0]["platforms"], json!([host()]));
    // The moved-from package went: no tag names it and no pool runs it.
    let shown = z.get("/api/orgs/acme/apps/api", &t.vic).await;
    let digests: Vec<&str> = shown.body["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests, [p2.as_str()]);
    assert_eq!(shown.body["packages"][0]["tags"], json!(["default"]));

    let forbidden = z.delete(tag, &t.mia).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let deleted = z.delete(tag, &t.olivia).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let gone = z.get("/api/orgs/acme/apps/api", &t.olivia).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    // Its binary went with it.
    let blob = z
        .get(&format!("/api/orgs/acme/registry/blobs/{d1}"), &t.olivia)
        .await;
    assert_eq!(blob.status, StatusCode::NOT_FOUND);
    let again = z.delete(tag, &t.olivia).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_pool_on_core_runs_the_digest_its_tag_named_and_its_params_follow_the_manifest() {
    let z = TestZone::start().await;
    let admin = z.admin.clone();
    let binary = b"#!/bin/sh\nexec sleep 30\n".to_vec();
    let d = digest_of(&binary);
    let (status, body) = put_blob(&z, "sys", &d, &binary, &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let tag = "/api/orgs/sys/apps/echo/tags/default";
    let v1 = z
        .put(
            tag,
            &admin,
            json!({ "manifest": manifest("echo", "1"), "binaries": { host(): d } }),
        )
        .await;
    assert_eq!(v1.status, StatusCode::OK, "{}", v1.body);

    let pools = "/api/orgs/sys/projects/sys/pools";
    let pool = |params: Value| {
        json!({
            "name": "echo", "provider": "core", "size": 1,
            "shape": { "cpu": 1, "mem": 1 }, "class": "local", "os": "none",
            "app": "sys/echo:default", "params": params,
            "sensitive_params": { "api_key": "k-secret-1234" },
        })
    };
    for (params, field) in [
        (json!({}), "params.mode"),
        (json!({ "mode": "a", "colour": "red" }), "params.colour"),
        (
            json!({ "mode": "a", "layout": "{not json" }),
            "params.layout",
        ),
        (json!({ "mode": "a", "api_key": "plain" }), "params"),
    ] {
        let refused = z.post(pools, &admin, pool(params)).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
        assert_eq!(refused.field(), Some(field), "{}", refused.body);
    }
    let mut unpublished = pool(json!({ "mode": "a" }));
    unpublished["app"] = json!("sys/nothing:default");
    let refused = z.post(pools, &admin, unpublished).await;
    assert_eq!(refused.field(), Some("app"));
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("orc registry push sys/nothing:default"),
        "{}",
        refused.body
    );
    let nothing = z.get("/api/orgs/sys/projects/sys/pools", &admin).await;
    assert!(
        nothing
            .body
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["name"] != "echo"),
        "a refused request creates nothing: {}",
        nothing.body
    );

    let created = z.post(pools, &admin, pool(json!({ "mode": "a" }))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["app"]["digest"], v1.body["digest"]);
    // The manifest's endpoints are the pool's when the request names none.
    assert_eq!(created.body["endpoints"][0]["name"], "web");

    // Pushing the tag again does not change what the pool runs until it is reconfigured.
    let v2 = z
        .put(
            tag,
            &admin,
            json!({ "manifest": manifest("echo", "2"), "binaries": { host(): d } }),
        )
        .await;
    let still = z.get(&format!("{pools}/echo"), &admin).await;
    assert_eq!(still.body["app"]["digest"], v1.body["digest"]);
    // A package a pool runs stays after its tag moved.
    let shown = z.get("/api/orgs/sys/apps/echo", &admin).await;
    let packages = shown.body["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 2, "{}", shown.body);
    assert_eq!(packages[0]["pools"], json!(["sys/sys/echo"]));
    let moved = z
        .post(
            &format!("{pools}/echo/reconfigure"),
            &admin,
            json!({ "params": { "mode": "b" } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(moved.body["app"]["digest"], v2.body["digest"]);
    assert!(!moved.body.to_string().contains("k-secret-1234"));
}

/// Attack: an org asks whether another org sent a binary, names another org's binary in a
/// package without sending it, and runs another org's package in a pool on `core`. Each org
/// sees and uses only what it sent itself; sending the same content makes it its own.
#[tokio::test]
async fn an_org_sees_and_uses_only_its_own_binaries_and_packages() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let secret = b"#!/bin/sh\n# acme's own app\nexec sleep 30\n".to_vec();
    let d = digest_of(&secret);
    let (status, body) = put_blob(&z, "acme", &d, &secret, &t.olivia).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let pushed = z
        .put(
            "/api/orgs/acme/apps/secret/tags/default",
            &t.olivia,
            json!({ "manifest": { "name": "secret", "version": "1" }, "binaries": { host(): d } }),
        )
        .await;
    assert_eq!(pushed.status, StatusCode::OK, "{}", pushed.body);

    let org = z
        .post("/api/orgs", &z.admin, json!({ "name": "globex" }))
        .await;
    assert_eq!(org.status, StatusCode::CREATED, "{}", org.body);
    let project = z
        .post(
            "/api/orgs/globex/projects",
            &z.admin,
            json!({ "name": "shop" }),
        )
        .await;
    assert_eq!(project.status, StatusCode::CREATED, "{}", project.body);
    let gail = z.user("gail").await;
    z.grant("globex", None, "gail", "owner").await;

    // Whether acme sent it is acme's business.
    let probe = z
        .get(&format!("/api/orgs/globex/registry/blobs/{d}"), &gail)
        .await;
    assert_eq!(probe.status, StatusCode::NOT_FOUND, "{}", probe.body);
    let unknown = z
        .get(
            &format!(
                "/api/orgs/globex/registry/blobs/{}",
                digest_of(b"nobody sent this")
            ),
            &gail,
        )
        .await;
    assert_eq!(
        probe.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace(&d, "D"),
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace(&digest_of(b"nobody sent this"), "D"),
        "a binary another org sent reads as one nobody sent"
    );
    // Naming it in a package without sending it is refused.
    let tag = "/api/orgs/globex/apps/copy/tags/default";
    let package =
        json!({ "manifest": { "name": "copy", "version": "1" }, "binaries": { host(): d } });
    let borrowed = z.put(tag, &gail, package.clone()).await;
    assert_eq!(
        borrowed.status,
        StatusCode::BAD_REQUEST,
        "{}",
        borrowed.body
    );
    assert_eq!(
        borrowed.field(),
        Some(&*format!("binaries.{}", host())),
        "{}",
        borrowed.body
    );
    // A pool on core of globex cannot run acme's package: it reads as unpublished.
    let pool = |app: &str| {
        json!({
            "name": "runs", "provider": "core", "size": 1,
            "shape": { "cpu": 1, "mem": 1 }, "class": "local", "os": "none",
            "app": app,
        })
    };
    let pools = "/api/orgs/globex/projects/shop/pools";
    let foreign = z.post(pools, &gail, pool("acme/secret:default")).await;
    assert_eq!(foreign.status, StatusCode::BAD_REQUEST, "{}", foreign.body);
    assert_eq!(foreign.field(), Some("app"));
    let nowhere = z.post(pools, &gail, pool("nosuch/secret:default")).await;
    assert_eq!(
        foreign.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("acme", "ORG"),
        nowhere.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("nosuch", "ORG"),
        "another org's package reads as one of an org that does not exist"
    );
    assert!(
        z.get(pools, &gail)
            .await
            .body
            .as_array()
            .unwrap()
            .is_empty(),
        "a refused request creates nothing"
    );

    // globex sends the same content itself: from then on it is globex's too.
    let (status, body) = put_blob(&z, "globex", &d, &secret, &gail).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let own = z
        .get(&format!("/api/orgs/globex/registry/blobs/{d}"), &gail)
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    let copied = z.put(tag, &gail, package).await;
    assert_eq!(copied.status, StatusCode::OK, "{}", copied.body);
    let runs = z.post(pools, &gail, pool("globex/copy:default")).await;
    assert_eq!(runs.status, StatusCode::CREATED, "{}", runs.body);
    // acme's member runs acme's package in acme.
    let acme_pool = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool("acme/secret:default"),
        )
        .await;
    assert_eq!(acme_pool.status, StatusCode::CREATED, "{}", acme_pool.body);

    // acme deleting its tag leaves globex's binary in place.
    let deleted = z
        .delete("/api/orgs/acme/apps/secret/tags/default", &t.olivia)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let still = z
        .get(&format!("/api/orgs/globex/registry/blobs/{d}"), &gail)
        .await;
    assert_eq!(still.status, StatusCode::OK, "{}", still.body);
}

#[tokio::test]
async fn the_zone_serves_its_orc_binary_with_sha256sums() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("orc");
    std::fs::write(&binary, b"\x7fELF pretend orc").unwrap();
    let z = TestZone::start_with(|c| c.agent_binary = Some(binary.clone())).await;
    let name = if host() == "linux/arm64" {
        "orc-linux-arm64"
    } else {
        "orc-linux-amd64"
    };
    let base = z.zone.url();
    let sums = z
        .http
        .get(format!("{base}/downloads/orc/SHA256SUMS"))
        .send()
        .await
        .unwrap();
    assert_eq!(sums.status(), StatusCode::OK);
    let hex = digest_of(b"\x7fELF pretend orc")["sha256:".len()..].to_string();
    assert_eq!(sums.text().await.unwrap(), format!("{hex}  {name}\n"));
    let file = z
        .http
        .get(format!("{base}/downloads/orc/{name}"))
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), StatusCode::OK);
    assert_eq!(&file.bytes().await.unwrap()[..], b"\x7fELF pretend orc");
    let other = z
        .http
        .get(format!("{base}/downloads/orc/orc-windows.exe"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
}
