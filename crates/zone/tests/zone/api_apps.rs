//! Apps over the API: plan, deploy, no-op, history, rollback, remove; images resolved from
//! the zone's registry; placement refused with its reason and nothing applied; who may.

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::api_support::{TestZone, tenancy};

fn digest_of(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Pushes a one-layer image as `repository:tag` through the OCI API; returns its digest.
async fn push_image(
    z: &TestZone,
    token: &str,
    repository: &str,
    tag: &str,
    layer: &[u8],
) -> String {
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("x:{token}"))
    );
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    for blob in [&config[..], layer] {
        let r = z
            .http
            .post(format!(
                "{}/v2/{repository}/blobs/uploads/?digest={}",
                z.zone.url(),
                digest_of(blob)
            ))
            .header("authorization", &auth)
            .body(blob.to_vec())
            .send()
            .await
            .expect("an upload");
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest_of(config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest_of(layer), "size": layer.len()}],
    }))
    .expect("a manifest");
    let r = z
        .http
        .put(format!("{}/v2/{repository}/manifests/{tag}", z.zone.url()))
        .header("authorization", &auth)
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest.clone())
        .send()
        .await
        .expect("a manifest put");
    assert_eq!(r.status(), StatusCode::CREATED);
    digest_of(&manifest)
}

fn app(image: &str, replicas: Value) -> Value {
    json!({ "app": {
        "name": "shop",
        "services": { "web": { "image": image, "replicas": replicas, "http": { "port": 8080, "healthPath": "/healthz" } } },
    }})
}

const APPS: &str = "/api/orgs/acme/projects/web/apps";

#[tokio::test]
async fn apps_are_planned_deployed_rolled_back_and_removed() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let v1 = push_image(&z, &t.olivia, "acme/shop", "1", b"layer one").await;
    let v2 = push_image(&z, &t.olivia, "acme/shop", "2", b"layer two").await;

    // A plan resolves the tag and shows every change; with no ready node, nothing can be
    // placed, and it says so.
    let plan = z
        .post(
            &format!("{APPS}/plan"),
            &t.vic,
            app("acme/shop:1", json!(2)),
        )
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    assert_eq!(plan.body["noop"], false);
    assert_eq!(plan.body["images"][0]["digest"], v1);
    assert!(
        plan.body["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .any(|c| c["field"] == "services[\"web\"].replicas" && c["to"] == "2"),
        "{}",
        plan.body
    );
    assert_eq!(plan.body["blocked"][0]["code"], "no_nodes");

    // A viewer may plan but not deploy.
    let denied = z.post(APPS, &t.vic, app("acme/shop:1", json!(2))).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);

    // Bad input names the field.
    let bad = z
        .post(APPS, &t.mia, app("acme/shop:1", json!("three")))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad.field(),
        Some("app.services[\"web\"].replicas"),
        "{}",
        bad.body
    );
    let missing = z.post(APPS, &t.mia, app("acme/shop:9", json!(2))).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        missing.field(),
        Some("app.services[\"web\"].image"),
        "{}",
        missing.body
    );
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .expect("a message")
            .contains("tag 9 of acme/shop does not exist"),
        "{}",
        missing.body
    );
    let foreign = z.post(APPS, &t.mia, app("beta/shop:1", json!(2))).await;
    assert_eq!(foreign.status, StatusCode::BAD_REQUEST, "{}", foreign.body);

    // Deployed: blocked with its reason, nothing placed.
    let first = z.post(APPS, &t.mia, app("acme/shop:1", json!(2))).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.body["number"], 1);
    assert_eq!(first.body["state"], "BLOCKED");
    assert!(
        first.body["reason"]
            .as_str()
            .expect("a reason")
            .contains("no_nodes"),
        "{}",
        first.body
    );
    // The same resolved app again changes nothing.
    let again = z.post(APPS, &t.mia, app("acme/shop:1", json!(2))).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["number"], 1);

    let second = z.post(APPS, &t.mia, app("acme/shop:2", json!(3))).await;
    assert_eq!(second.body["number"], 2);
    assert_eq!(second.body["images"][0]["digest"], v2);

    let status = z.get(&format!("{APPS}/shop"), &t.vic).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    assert_eq!(status.body["app"]["revision"], 2);
    assert_eq!(status.body["app"]["replicas"], 3);
    assert_eq!(
        status.body["replicas"],
        json!([]),
        "a blocked revision places nothing"
    );
    let list = z.get(APPS, &t.vic).await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(1));

    let history = z.get(&format!("{APPS}/shop/revisions"), &t.vic).await;
    let states: Vec<(u64, String)> = history
        .body
        .as_array()
        .expect("revisions")
        .iter()
        .map(|r| {
            (
                r["number"].as_u64().unwrap_or(0),
                r["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [(2, "BLOCKED".to_string()), (1, "SUPERSEDED".to_string())]
    );

    // A rollback is a new revision with the old one's app and digests.
    let back = z
        .post(
            &format!("{APPS}/shop/rollback"),
            &t.mia,
            json!({ "revision": 1 }),
        )
        .await;
    assert_eq!(back.status, StatusCode::CREATED, "{}", back.body);
    assert_eq!(back.body["number"], 3);
    assert_eq!(back.body["origin"], "rollback:1");
    assert_eq!(back.body["digest"], first.body["digest"]);
    assert_eq!(back.body["images"][0]["digest"], v1);
    let nowhere = z
        .post(
            &format!("{APPS}/shop/rollback"),
            &t.mia,
            json!({ "revision": 9 }),
        )
        .await;
    assert_eq!(nowhere.field(), Some("revision"), "{}", nowhere.body);

    let gone = z.delete(&format!("{APPS}/shop"), &t.mia).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let after = z.get(&format!("{APPS}/shop"), &t.vic).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    let stranger = z.get(APPS, &t.stan).await;
    assert_eq!(stranger.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_of_another_registry_resolves_with_the_login_the_app_gives() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let other = crate::other_registry::OtherRegistry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = orc_testkit::oci::write_layout(
        &dir.path().join("layout"),
        "7",
        &[vec![orc_testkit::oci::Entry::File(
            "tool".into(),
            b"v7".to_vec(),
            0o644,
        )]],
        &orc_testkit::oci::RunConfig::default(),
    );
    other
        .push(&layout.dir, &layout.manifest_digest, "team/tool", "7")
        .await;
    let host = other.host.clone();
    let with = |image: String, login: bool| {
        let mut app = json!({ "app": {
            "name": "tool",
            "workers": { "tool": { "image": image } },
        }});
        if login {
            app["app"]["registries"] = json!({ host.clone(): {
                "username": other.username, "passwordSecret": "tool-registry",
            } });
        }
        app
    };
    let image = format!("{host}/team/tool:7");

    // Without a login, the registry refuses, and the answer says where a login goes.
    let refused = z
        .post(&format!("{APPS}/plan"), &t.vic, with(image.clone(), false))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.field(), Some("app.workers[\"tool\"].image"));
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("refused to show {image}")),
        "{}",
        refused.body
    );
    // A login whose secret is not set names the secret.
    let unset = z
        .post(&format!("{APPS}/plan"), &t.vic, with(image.clone(), true))
        .await;
    assert_eq!(unset.status, StatusCode::BAD_REQUEST, "{}", unset.body);
    assert_eq!(
        unset.field().map(str::to_string),
        Some(format!("app.registries[\"{host}\"].passwordSecret"))
    );
    let set = z
        .put(
            "/api/orgs/acme/projects/web/secrets/tool-registry",
            &t.mia,
            json!({ "value": other.password }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);

    // With it, the tag resolves to the manifest's digest; a missing tag is named.
    let plan = z
        .post(&format!("{APPS}/plan"), &t.vic, with(image.clone(), true))
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    assert_eq!(plan.body["images"][0]["digest"], layout.manifest_digest);
    assert_eq!(plan.body["images"][0]["reference"], image);
    let missing = z
        .post(
            &format!("{APPS}/plan"),
            &t.vic,
            with(format!("{host}/team/tool:8"), true),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no image"),
        "{}",
        missing.body
    );
    // A wrong password is refused too.
    z.put(
        "/api/orgs/acme/projects/web/secrets/tool-registry",
        &t.mia,
        json!({ "value": "not-the-password" }),
    )
    .await;
    let wrong = z
        .post(&format!("{APPS}/plan"), &t.vic, with(image.clone(), true))
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST, "{}", wrong.body);
    assert!(
        !wrong.body.to_string().contains("not-the-password"),
        "no password in an answer: {}",
        wrong.body
    );
}
