//! Providers: visibility, scope change, pricing strategy.

mod api_support;

use api_support::{TestZone, pool_body, tenancy};
use reqwest::StatusCode;
use serde_json::json;

fn names(body: &serde_json::Value) -> Vec<String> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn change_scope_makes_a_provider_visible_to_another_project() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    z.grant("acme", Some("data"), "mia", "member").await;

    // `core` (the zone's app runner, in sys/sys with scope zone) is visible everywhere.
    let web = z.get("/api/orgs/acme/projects/web/providers", &t.mia).await;
    assert_eq!(names(&web.body), ["core", "fake"]);
    assert_eq!(web.body[0]["scope"], "zone");
    assert_eq!(web.body[0]["project"], "sys/sys");
    assert_eq!(web.body[1]["scope"], "project");
    assert_eq!(web.body[1]["project"], "acme/web");
    assert_eq!(web.body[1]["pricing"]["markup"], serde_json::Value::Null);
    let before = z
        .get("/api/orgs/acme/projects/data/providers", &t.mia)
        .await;
    assert_eq!(names(&before.body), ["core"]);
    let refused = z
        .post(
            "/api/orgs/acme/projects/data/pools",
            &t.mia,
            pool_body("db", 1),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.field(), Some("provider"));

    let changed = z
        .post(
            "/api/orgs/acme/projects/web/providers/fake/change-scope",
            &t.olivia,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["scope"], "zone");

    let after = z
        .get("/api/orgs/acme/projects/data/providers", &t.mia)
        .await;
    assert_eq!(names(&after.body), ["core", "fake"]);
    let placed = z
        .post(
            "/api/orgs/acme/projects/data/pools",
            &t.mia,
            pool_body("db", 1),
        )
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);

    // Only the project the provider registered in changes it.
    let elsewhere = z
        .post(
            "/api/orgs/acme/projects/data/providers/fake/change-scope",
            &t.olivia,
            json!({ "scope": "project" }),
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::FORBIDDEN);
    assert_eq!(
        elsewhere.body["error"]["message"],
        "provider fake belongs to project acme/web; change it there"
    );

    let back = z
        .post(
            "/api/orgs/acme/projects/web/providers/fake/change-scope",
            &t.olivia,
            json!({ "scope": "project" }),
        )
        .await;
    assert_eq!(back.body["scope"], "project");
    let gone = z
        .get("/api/orgs/acme/projects/data/providers", &t.mia)
        .await;
    assert_eq!(names(&gone.body), ["core"]);
}

#[tokio::test]
async fn bad_scope_requests_name_the_field() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let path = "/api/orgs/acme/projects/web/providers/fake/change-scope";
    let bad = z.post(path, &t.olivia, json!({ "scope": "global" })).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.field(), Some("scope"));
    let missing = z.post(path, &t.olivia, json!({})).await;
    assert_eq!(missing.field(), Some("scope"));
    let extra = z
        .post(path, &t.olivia, json!({ "scope": "zone", "why": "x" }))
        .await;
    assert_eq!(extra.field(), Some("why"));
    let unknown = z
        .post(
            "/api/orgs/acme/projects/web/providers/nope/change-scope",
            &t.olivia,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.field(), Some("provider"));
}

#[tokio::test]
async fn pricing_strategy_is_set_and_removed() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let path = "/api/orgs/acme/projects/web/providers/fake/pricing";
    let set = z.put(path, &t.olivia, json!({ "markup": "0.15" })).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    assert_eq!(set.body["pricing"]["markup"], "0.15");
    let zero = z.put(path, &t.olivia, json!({ "markup": "0" })).await;
    assert_eq!(zero.body["pricing"]["markup"], "0");
    let one = z
        .get("/api/orgs/acme/projects/web/providers/fake", &t.vic)
        .await;
    assert_eq!(one.body["pricing"]["markup"], "0");

    let none = z.put(path, &t.olivia, json!({ "markup": null })).await;
    assert_eq!(none.status, StatusCode::OK);
    assert_eq!(none.body["pricing"]["markup"], serde_json::Value::Null);
    z.put(path, &t.olivia, json!({ "markup": "0.2" })).await;
    let removed = z.delete(path, &t.olivia).await;
    assert_eq!(removed.body["pricing"]["markup"], serde_json::Value::Null);

    let negative = z.put(path, &t.olivia, json!({ "markup": "-0.1" })).await;
    assert_eq!(negative.status, StatusCode::BAD_REQUEST);
    assert_eq!(negative.field(), Some("markup"));
    let words = z
        .put(path, &t.olivia, json!({ "markup": "ten percent" }))
        .await;
    assert_eq!(words.field(), Some("markup"));
    let float = z.put(path, &t.olivia, json!({ "markup": 0.15 })).await;
    assert_eq!(float.status, StatusCode::BAD_REQUEST);
    assert_eq!(float.field(), Some("markup"));
    let member = z.put(path, &t.mia, json!({ "markup": "0.1" })).await;
    assert_eq!(member.status, StatusCode::FORBIDDEN);
}
