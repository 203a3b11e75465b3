//! Authentication and roles: who may read and write what.

use crate::api_support::{TestZone, pool_body, tenancy};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn requests_without_a_valid_token_get_401() {
    let z = TestZone::start().await;
    let none = z.call(Method::GET, "/api/orgs", None, None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.code(), Some("unauthenticated"));
    assert!(
        none.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization")
    );

    let bad = z.get("/api/orgs", "orc_not-a-real-token").await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        bad.body["error"]["message"],
        "the token is unknown, revoked or expired"
    );

    let resp = z
        .http
        .get(format!("{}/api/orgs", z.zone.url()))
        .header("Authorization", format!("Basic {}", z.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    let health = z.call(Method::GET, "/api/health", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
}

#[tokio::test]
async fn viewers_read_but_cannot_write_pools() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let list = z.get("/api/orgs/acme/projects/web/pools", &t.vic).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);

    let create = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.vic,
            pool_body("db", 1),
        )
        .await;
    assert_eq!(create.status, StatusCode::FORBIDDEN, "{}", create.body);
    assert_eq!(create.code(), Some("forbidden"));
    assert_eq!(
        create.body["error"]["message"],
        "this needs the member role in project acme/web; you are viewer"
    );

    let by_member = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool_body("db", 1),
        )
        .await;
    assert_eq!(by_member.status, StatusCode::CREATED, "{}", by_member.body);
    let resize = z
        .post(
            "/api/orgs/acme/projects/web/pools/db/resize",
            &t.vic,
            json!({ "size": 3 }),
        )
        .await;
    assert_eq!(resize.status, StatusCode::FORBIDDEN);
    let delete = z
        .delete("/api/orgs/acme/projects/web/pools/db", &t.vic)
        .await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn members_cannot_manage_providers_or_memberships() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let scope = z
        .post(
            "/api/orgs/acme/projects/web/providers/fake/change-scope",
            &t.mia,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(scope.status, StatusCode::FORBIDDEN, "{}", scope.body);
    let grant = z
        .post(
            "/api/orgs/acme/memberships",
            &t.mia,
            json!({ "user": "stan", "role": "viewer", "project": "web" }),
        )
        .await;
    assert_eq!(grant.status, StatusCode::FORBIDDEN, "{}", grant.body);
    let by_owner = z
        .post(
            "/api/orgs/acme/memberships",
            &t.olivia,
            json!({ "user": "mia", "role": "viewer", "project": "data" }),
        )
        .await;
    assert_eq!(by_owner.status, StatusCode::CREATED, "{}", by_owner.body);
}

#[tokio::test]
async fn strangers_do_not_learn_that_a_project_exists() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let a = z.get("/api/orgs/acme/projects/web/pools", &t.stan).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.field(), Some("org"));
    let orgs = z.get("/api/orgs", &t.stan).await;
    assert_eq!(orgs.body, json!([]));
    // mia sees acme but only project web.
    let projects = z.get("/api/orgs/acme/projects", &t.mia).await;
    let names: Vec<&str> = projects
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web"]);
    let data = z.get("/api/orgs/acme/projects/data/pools", &t.mia).await;
    assert_eq!(data.status, StatusCode::NOT_FOUND);
    assert_eq!(data.field(), Some("project"));
}

#[tokio::test]
async fn tokens_show_their_value_once_and_revoked_tokens_stop_working() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let created = z
        .post(
            "/api/users/mia/tokens",
            &t.mia,
            json!({ "label": "laptop" }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let value = created.body["value"].as_str().unwrap().to_string();
    assert!(value.starts_with("orc_"));
    let id = created.body["token"]["id"].as_str().unwrap().to_string();

    let list = z.get("/api/users/mia/tokens", &t.mia).await;
    let text = list.body.to_string();
    assert!(!text.contains(&value), "a listing shows a token value");
    assert_eq!(list.body.as_array().unwrap().len(), 2);

    let me = z.get("/api/whoami", &value).await;
    assert_eq!(me.body["user"]["name"], "mia");
    assert_eq!(me.body["memberships"][0]["role"], "member");
    assert_eq!(me.body["memberships"][0]["project"], "web");

    let other = z.get("/api/users/olivia/tokens", &t.mia).await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);

    let revoked = z
        .delete(&format!("/api/users/mia/tokens/{id}"), &t.mia)
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    assert!(revoked.body["revoked_at"].is_i64());
    let after = z.get("/api/whoami", &value).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);

    let empty_label = z
        .post("/api/users/mia/tokens", &t.mia, json!({ "label": " " }))
        .await;
    assert_eq!(empty_label.status, StatusCode::BAD_REQUEST);
    assert_eq!(empty_label.field(), Some("label"));
    let past = z
        .post(
            "/api/users/mia/tokens",
            &t.mia,
            json!({ "label": "old", "expires_at": 1000 }),
        )
        .await;
    assert_eq!(past.field(), Some("expires_at"));
}

#[tokio::test]
async fn the_admin_token_file_is_private_and_reused_on_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let config = orc_zone::zone::ZoneConfig::ephemeral(&dir);
    let zone = orc_zone::zone::Zone::start(config.clone()).await.unwrap();
    assert!(zone.admin_token_is_new());
    let first = zone.admin_token().expose().to_string();
    let path = dir.join("admin-token");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.trim(), first);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let url = std::fs::read_to_string(dir.join("zone-url")).unwrap();
    assert_eq!(url.trim(), zone.url());
    zone.shutdown().await;

    let again = orc_zone::zone::Zone::start(config).await.unwrap();
    assert!(!again.admin_token_is_new());
    assert_eq!(again.admin_token().expose(), first);
    let resp = orc_testkit::zone::client_of(&again)
        .get(format!("{}/api/whoami", again.url()))
        .bearer_auth(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let me: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(me["user"]["name"], "admin");
    assert_eq!(me["memberships"][0]["org"], "sys");
    assert_eq!(me["memberships"][0]["role"], "owner");
    again.shutdown().await;
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json_errors() {
    let z = TestZone::start().await;
    let a = z.get("/api/nothing-here", &z.admin).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.code(), Some("not_found"));
    let b = z.put("/api/orgs", &z.admin, json!({})).await;
    assert_eq!(b.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(b.code(), Some("method_not_allowed"));
}
