//! Providers: visibility, scope change, pricing strategy.

use crate::api_support::{TestZone, pool_body, tenancy};
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
    assert_eq!(names(&web.body), ["core", "acme/web/fake"]);
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
            &z.admin,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["scope"], "zone");

    let after = z
        .get("/api/orgs/acme/projects/data/providers", &t.mia)
        .await;
    assert_eq!(names(&after.body), ["core", "acme/web/fake"]);
    // Another project gives it by its full name: a bare `fake` is no provider of its own,
    // nor the operator's.
    let bare = z
        .post(
            "/api/orgs/acme/projects/data/pools",
            &t.mia,
            pool_body("db", 1),
        )
        .await;
    assert_eq!(bare.status, StatusCode::BAD_REQUEST, "{}", bare.body);
    let mut full = pool_body("db", 1);
    full["provider"] = json!("acme/web/fake");
    let placed = z
        .post("/api/orgs/acme/projects/data/pools", &t.mia, full)
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    assert_eq!(placed.body["provider"], "acme/web/fake");

    // Only the project the provider registered in changes it.
    let elsewhere = z
        .post(
            "/api/orgs/acme/projects/data/providers/acme%2Fweb%2Ffake/change-scope",
            &t.olivia,
            json!({ "scope": "project" }),
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::FORBIDDEN);
    assert_eq!(
        elsewhere.body["error"]["message"],
        "provider acme/web/fake belongs to project acme/web; change it there"
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

#[tokio::test]
async fn sites_show_what_the_provider_reported_to_projects_that_see_it() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let store = z.zone.store();
    let provider = store
        .list_providers()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_str() == "fake")
        .unwrap();
    let report = orc_proto::Inventory {
        nodes: vec![],
        sites: vec![orc_proto::InventorySite {
            site: orc_proto::SiteName::new("eu-central-a").unwrap(),
            public_ipv4: Some(std::net::Ipv4Addr::new(192, 0, 2, 1)),
            private_prefix: Some("10.64.0.0/16".into()),
        }],
        pool_addresses: vec![],
    };
    let now = orc_zone::model::Timestamp(1_772_323_200_000);
    orc_zone::reconcile::apply_inventory(
        store,
        &provider,
        &report,
        now,
        std::time::Duration::from_secs(120),
    )
    .await
    .unwrap();

    const SITES: &str = "/api/orgs/acme/projects/web/providers/fake/sites";
    let sites = z.get(SITES, &t.mia).await;
    assert_eq!(sites.status, StatusCode::OK, "{}", sites.body);
    assert_eq!(
        sites.body,
        json!([{
            "site": "eu-central-a", "public_ipv4": "192.0.2.1",
            "private_prefix": "10.64.0.0/16", "reported": true, "status": "open", "tenant_nodes": 0,
            "gateway": null
        }])
    );
    // A viewer reads them too; another project sees them once the provider is zone-scoped
    // (counting its own nodes only), and not before.
    assert_eq!(z.get(SITES, &t.vic).await.status, StatusCode::OK);
    z.grant("acme", Some("data"), "stan", "member").await;
    const OTHER: &str = "/api/orgs/acme/projects/data/providers/acme%2Fweb%2Ffake/sites";
    let hidden = z.get(OTHER, &t.stan).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.body);
    z.post(
        "/api/orgs/acme/projects/web/providers/fake/change-scope",
        &z.admin,
        json!({ "scope": "zone" }),
    )
    .await;
    let other = z.get(OTHER, &t.stan).await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.body);
    assert_eq!(other.body, sites.body);

    // A later report without the site closes it.
    let empty = orc_proto::Inventory {
        nodes: vec![],
        sites: vec![],
        pool_addresses: vec![],
    };
    orc_zone::reconcile::apply_inventory(
        store,
        &provider,
        &empty,
        now,
        std::time::Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert_eq!(z.get(SITES, &t.mia).await.body, json!([]));
}

/// A project that only uses a zone-scoped provider sees its prices, not the markup its
/// operator set on them; the provider's own project sees the markup.
#[tokio::test]
async fn users_of_a_provider_do_not_see_its_markup() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let web = "/api/orgs/acme/projects/web/providers";
    let widened = z
        .post(
            &format!("{web}/fake/change-scope"),
            &z.admin,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(widened.status, StatusCode::OK, "{}", widened.body);
    let priced = z
        .put(
            &format!("{web}/fake/pricing"),
            &t.olivia,
            json!({ "markup": "0.15" }),
        )
        .await;
    assert_eq!(priced.status, StatusCode::OK, "{}", priced.body);

    let home = z.get(&format!("{web}/fake"), &t.vic).await;
    assert_eq!(home.body["pricing"]["markup"], "0.15");

    // stan gets a role only in globex/shop, which uses fake as a zone-scoped provider.
    assert_eq!(
        z.post("/api/orgs", &z.admin, json!({ "name": "globex" }))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        z.post(
            "/api/orgs/globex/projects",
            &z.admin,
            json!({ "name": "shop" })
        )
        .await
        .status,
        StatusCode::CREATED
    );
    let role = z
        .post(
            "/api/orgs/globex/memberships",
            &z.admin,
            json!({ "user": "stan", "role": "member", "project": "shop" }),
        )
        .await;
    assert_eq!(role.status, StatusCode::CREATED, "{}", role.body);
    let list = z
        .get("/api/orgs/globex/projects/shop/providers", &t.stan)
        .await;
    let fake = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "acme/web/fake")
        .expect("fake is visible to the zone")
        .clone();
    assert!(fake["pricing"]["markup"].is_null(), "{fake}");
    let one = z
        .get(
            "/api/orgs/globex/projects/shop/providers/acme%2Fweb%2Ffake",
            &t.stan,
        )
        .await;
    assert!(one.body["pricing"]["markup"].is_null(), "{}", one.body);
}
