//! Orgs, projects, users and memberships: success and 4xx naming the field.

use crate::api_support::{TestZone, tenancy};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn orgs_and_projects_are_created_and_listed_by_name() {
    let z = TestZone::start().await;
    for name in ["zeta", "acme"] {
        let a = z.post("/api/orgs", &z.admin, json!({ "name": name })).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        assert_eq!(a.body["name"], name);
    }
    let orgs = z.get("/api/orgs", &z.admin).await;
    let names: Vec<&str> = orgs
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["acme", "sys", "zeta"]);

    let p = z
        .post(
            "/api/orgs/acme/projects",
            &z.admin,
            json!({ "name": "web" }),
        )
        .await;
    assert_eq!(p.status, StatusCode::CREATED);
    assert_eq!(p.body["org"], "acme");
    let one = z.get("/api/orgs/acme/projects/web", &z.admin).await;
    assert_eq!(one.body["id"], p.body["id"]);
}

#[tokio::test]
async fn bad_tenancy_requests_name_the_field() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;

    let bad_name = z
        .post("/api/orgs", &z.admin, json!({ "name": "Acme!" }))
        .await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_name.field(), Some("name"));

    let taken = z
        .post("/api/orgs", &z.admin, json!({ "name": "acme" }))
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(taken.field(), Some("name"));

    let missing = z.post("/api/orgs", &z.admin, json!({})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.field(), Some("name"));
    assert_eq!(missing.body["error"]["message"], "missing field `name`");

    let unknown = z
        .post(
            "/api/orgs",
            &z.admin,
            json!({ "name": "x", "colour": "red" }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.field(), Some("colour"));

    let wrong_type = z.post("/api/users", &z.admin, json!({ "name": 7 })).await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong_type.field(), Some("name"));

    let not_json = z
        .http
        .post(format!("{}/api/orgs", z.zone.url()))
        .bearer_auth(&z.admin)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = not_json.json().await.unwrap();
    assert_eq!(body["error"]["field"], "body");

    let no_type = z
        .http
        .post(format!("{}/api/orgs", z.zone.url()))
        .bearer_auth(&z.admin)
        .body("{\"name\": \"x\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(no_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let not_operator = z
        .post("/api/orgs", &t.olivia, json!({ "name": "mine" }))
        .await;
    assert_eq!(not_operator.status, StatusCode::FORBIDDEN);

    let bad_role = z
        .post(
            "/api/orgs/acme/memberships",
            &t.olivia,
            json!({ "user": "stan", "role": "boss" }),
        )
        .await;
    assert_eq!(bad_role.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_role.field(), Some("role"));

    let no_user = z
        .post(
            "/api/orgs/acme/memberships",
            &t.olivia,
            json!({ "user": "nobody", "role": "viewer" }),
        )
        .await;
    assert_eq!(no_user.status, StatusCode::NOT_FOUND);
    assert_eq!(no_user.field(), Some("user"));

    let twice = z
        .post(
            "/api/orgs/acme/memberships",
            &t.olivia,
            json!({ "user": "mia", "role": "viewer", "project": "web" }),
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    assert_eq!(twice.field(), Some("user"));

    let dup_project = z
        .post(
            "/api/orgs/acme/projects",
            &t.olivia,
            json!({ "name": "web" }),
        )
        .await;
    assert_eq!(dup_project.status, StatusCode::CONFLICT);
    assert_eq!(dup_project.field(), Some("name"));
}

#[tokio::test]
async fn memberships_are_listed_and_removed() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let list = z.get("/api/orgs/acme/memberships", &t.olivia).await;
    assert_eq!(list.status, StatusCode::OK);
    let rows: Vec<(String, String, Option<String>)> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["user"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap().to_string(),
                m["project"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("olivia".to_string(), "owner".to_string(), None),
            (
                "mia".to_string(),
                "member".to_string(),
                Some("web".to_string())
            ),
            (
                "vic".to_string(),
                "viewer".to_string(),
                Some("web".to_string())
            ),
        ]
    );
    let vic = list.body[2]["id"].as_str().unwrap().to_string();
    let gone = z
        .delete(&format!("/api/orgs/acme/memberships/{vic}"), &t.olivia)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let after = z.get("/api/orgs/acme/projects/web/pools", &t.vic).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    let bad_id = z.delete("/api/orgs/acme/memberships/x-1", &t.olivia).await;
    assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_id.field(), Some("membership"));
}

#[tokio::test]
async fn empty_orgs_and_projects_and_users_are_deleted() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;

    // A project holding a provider is not empty; its org holds projects.
    let busy = z.delete("/api/orgs/acme/projects/web", &t.olivia).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{}", busy.body);
    assert_eq!(
        busy.body["error"]["message"],
        "project acme/web is not empty: it still holds 1 provider(s); delete its pools first \
         (`orc pool delete`)"
    );
    let org = z.delete("/api/orgs/acme", &z.admin).await;
    assert_eq!(org.status, StatusCode::CONFLICT, "{}", org.body);
    assert!(
        org.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("org acme is not empty: it still holds 2 project(s)"),
        "{}",
        org.body
    );

    // Only org owners delete projects; the zone's own cannot be deleted.
    let member = z.delete("/api/orgs/acme/projects/data", &t.mia).await;
    assert_eq!(member.status, StatusCode::NOT_FOUND, "{}", member.body);
    let viewer = z.delete("/api/orgs/acme/projects/web", &t.vic).await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN, "{}", viewer.body);
    let sys = z.delete("/api/orgs/sys/projects/sys", &z.admin).await;
    assert_eq!(sys.status, StatusCode::CONFLICT, "{}", sys.body);
    assert_eq!(
        sys.body["error"]["message"],
        "project sys/sys is the zone's own and cannot be deleted"
    );

    let gone = z.delete("/api/orgs/acme/projects/data", &t.olivia).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    let again = z.get("/api/orgs/acme/projects/data", &t.olivia).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    // An org of no project goes; only zone operators delete orgs.
    z.post("/api/orgs", &z.admin, json!({ "name": "solo" }))
        .await;
    z.grant("solo", None, "olivia", "owner").await;
    let owner = z.delete("/api/orgs/solo", &t.olivia).await;
    assert_eq!(owner.status, StatusCode::FORBIDDEN, "{}", owner.body);
    let deleted = z.delete("/api/orgs/solo", &z.admin).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    assert_eq!(
        z.get("/api/orgs/solo", &z.admin).await.status,
        StatusCode::NOT_FOUND
    );

    // A deleted user's token stops working at once; no one deletes themselves or the
    // zone's own users.
    assert_eq!(z.get("/api/whoami", &t.vic).await.status, StatusCode::OK);
    let by_tenant = z.delete("/api/users/vic", &t.olivia).await;
    assert_eq!(
        by_tenant.status,
        StatusCode::FORBIDDEN,
        "{}",
        by_tenant.body
    );
    let user = z.delete("/api/users/vic", &z.admin).await;
    assert_eq!(user.status, StatusCode::NO_CONTENT, "{}", user.body);
    assert_eq!(
        z.get("/api/whoami", &t.vic).await.status,
        StatusCode::UNAUTHORIZED
    );
    let members = z.get("/api/orgs/acme/memberships", &t.olivia).await;
    assert!(
        members
            .body
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["user"] != "vic"),
        "{}",
        members.body
    );
    let own = z.delete("/api/users/admin", &z.admin).await;
    assert_eq!(own.status, StatusCode::CONFLICT, "{}", own.body);
    assert_eq!(
        own.body["error"]["message"],
        "you cannot delete yourself; another zone operator can"
    );
    let apps = z.delete("/api/users/sys-apps", &z.admin).await;
    assert_eq!(apps.status, StatusCode::CONFLICT, "{}", apps.body);
    let missing = z.delete("/api/users/nobody", &z.admin).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
}

#[tokio::test]
async fn a_token_names_its_default_project() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let made = z
        .post(
            "/api/users/mia/tokens",
            &t.mia,
            json!({ "label": "laptop", "project": "acme/web" }),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert_eq!(made.body["token"]["project"], "acme/web");
    let token = made.body["value"].as_str().unwrap().to_string();
    let me = z.get("/api/whoami", &token).await;
    assert_eq!(me.body["default_project"], "acme/web", "{}", me.body);
    // Tokens without one say so.
    let plain = z.get("/api/whoami", &t.mia).await;
    assert_eq!(plain.body["default_project"], serde_json::Value::Null);

    // A project the user holds no role in, or that does not exist, is refused alike.
    for project in ["acme/data", "acme/nowhere"] {
        let refused = z
            .post(
                "/api/users/mia/tokens",
                &t.mia,
                json!({ "label": "x", "project": project }),
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
        assert_eq!(refused.field(), Some("project"));
        assert_eq!(
            refused.body["error"]["message"],
            format!(
                "project \"{project}\" does not exist or mia holds no role in it; give them \
                 one first (`orc member add`)"
            )
        );
    }
    let bad = z
        .post(
            "/api/users/mia/tokens",
            &t.mia,
            json!({ "label": "x", "project": "web" }),
        )
        .await;
    assert_eq!(bad.field(), Some("project"), "{}", bad.body);

    // Once the role is gone, whoami names no default project.
    z.ungrant("acme", "mia", &t.olivia).await;
    let me = z.get("/api/whoami", &token).await;
    assert_eq!(me.body["default_project"], serde_json::Value::Null);
}

#[tokio::test]
async fn whoami_lists_the_projects_a_caller_may_open_with_their_roles() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    z.post("/api/orgs", &z.admin, json!({ "name": "zeta" }))
        .await;
    z.post(
        "/api/orgs/zeta/projects",
        &z.admin,
        json!({ "name": "lab" }),
    )
    .await;
    let projects = |body: &serde_json::Value| -> Vec<(String, String, Option<String>)> {
        body["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["project"].as_str().unwrap().to_string(),
                    p["role"].as_str().unwrap().to_string(),
                    p["org_role"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    let owned = |p: &str, role: &str, org: Option<&str>| {
        (p.to_string(), role.to_string(), org.map(str::to_string))
    };

    // An org owner: every project of the org, and nothing of another org.
    let olivia = z.get("/api/whoami", &t.olivia).await;
    assert_eq!(olivia.status, StatusCode::OK, "{}", olivia.body);
    assert_eq!(olivia.body["zone_role"], serde_json::Value::Null);
    assert_eq!(
        projects(&olivia.body),
        [
            owned("acme/data", "owner", Some("owner")),
            owned("acme/web", "owner", Some("owner")),
        ]
    );
    // A project member: that project only, with no org-wide role.
    let mia = z.get("/api/whoami", &t.mia).await;
    assert_eq!(projects(&mia.body), [owned("acme/web", "member", None)]);
    // Someone with no role anywhere: nothing.
    let stan = z.get("/api/whoami", &t.stan).await;
    assert_eq!(projects(&stan.body), []);
    // The operator: every project of the zone, as owner, `sys` included.
    let admin = z.get("/api/whoami", &z.admin).await;
    assert_eq!(admin.body["zone_role"], "owner");
    let paths: Vec<String> = projects(&admin.body).into_iter().map(|p| p.0).collect();
    assert_eq!(paths, ["acme/data", "acme/web", "sys/sys", "zeta/lab"]);
    assert!(projects(&admin.body).iter().all(|p| p.1 == "owner"));
}
