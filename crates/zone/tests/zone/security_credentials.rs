//! Credentials under attack (`docs/security.md`): an app pool's service credential opens
//! only its own provider stream, only a resource's own credential joins its group, revoking
//! a token or a role closes the streams it opened, tokens expire, and the API authorizes a
//! caller before it judges the body.

use crate::api_support::{
    API_WAIT, TestZone, auth_connector, pool_body, start_replica, tenancy_without_provider,
};
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::transport::{Connector as _, ProviderStream};
use orc_testkit::eventually;
use reqwest::StatusCode;
use serde_json::json;

const WEB: &str = "/api/orgs/acme/projects/web";

/// How many replicas of provider `fake` the hub has connected.
fn replicas(z: &TestZone) -> usize {
    z.zone
        .hub()
        .replicas()
        .iter()
        .filter(|r| r.provider.as_str() == "fake")
        .count()
}

/// Opens a stream with `token` for `project` and returns the status it was refused with.
async fn refused(z: &TestZone, token: &str, project: &str) -> String {
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    match auth_connector(&z.zone, token, project)
        .connect(ProviderStream::new(rx))
        .await
    {
        Ok(_) => panic!("the stream with {project} opened"),
        Err(e) => e.to_string(),
    }
}

/// A service credential of a new pool `acme/web/<name>`, as the apps supervisor makes one.
async fn service_credential(z: &TestZone, t: &orc_testkit::zone::Tenancy, name: &str) -> String {
    z.provider("acme", "web", "placeholder").await;
    let mut body = pool_body(name, 0);
    body["provider"] = json!("placeholder");
    let created = z.post(&format!("{WEB}/pools"), &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    service_credential_again(z, name).await
}

/// Attack: use an app slot's token to reconfigure pools, read logs and mint tokens that
/// outlive it. A service credential opens only its pool's stream, in its own project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_credential_opens_only_its_own_stream_and_nothing_on_the_api() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let credential = service_credential(&z, &t, "svc").await;

    for (path, body) in [
        ("/api/whoami", None),
        (&format!("{WEB}/pools") as &str, None),
        (
            "/api/users/admin/tokens",
            Some(json!({ "label": "mine forever" })),
        ),
    ] {
        let answer = match body {
            None => z.get(path, &credential).await,
            Some(body) => z.post(path, &credential, body).await,
        };
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            answer.body
        );
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("service credential"),
            "{}",
            answer.body
        );
    }

    let other_project = refused(&z, &credential, "acme/data").await;
    assert!(
        other_project.contains("opens streams only in its own project"),
        "{other_project}"
    );

    let stop = start_replica(&z, &credential, "acme/web", &FakeCloud::new());
    eventually("the pool's own stream registers", API_WAIT, || async {
        replicas(&z) == 1
    })
    .await;

    // Rotation: a new credential of the pool revokes the old, whose stream then closes.
    let _rotated = service_credential_again(&z, "svc").await;
    eventually("the old credential's stream closes", API_WAIT, || async {
        replicas(&z) == 0
    })
    .await;
    let revoked = refused(&z, &credential, "acme/web").await;
    assert!(revoked.contains("unknown, revoked or expired"), "{revoked}");
    drop(stop);
}

/// A new service credential of the existing pool `acme/web/<name>`, revoking its earlier
/// ones, as a zone start does.
async fn service_credential_again(z: &TestZone, name: &str) -> String {
    let store = z.zone.store();
    let pool = store
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &name.parse().unwrap(),
        )
        .await
        .unwrap();
    let user = store.user_by_name(&"admin".parse().unwrap()).await.unwrap();
    let now = orc_zone::model::Timestamp::now();
    let (_, secret) = store
        .create_service_token(&user.id, &pool.id, "app pool", None, now)
        .await
        .unwrap();
    secret.expose().to_string()
}

/// Attack: another member of the project attaches as a replica of a provider it does not
/// run, to receive its deploys and answer its quotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_resources_own_credential_joins_its_group() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let stop = start_replica(&z, &t.mia, "acme/web", &FakeCloud::new());
    eventually("mia's provider registers", API_WAIT, || async {
        replicas(&z) == 1
    })
    .await;

    // olivia owns acme, so her token admits a stream to acme/web, but not into mia's group.
    let (outbound, rx) = tokio::sync::mpsc::channel(4);
    let mut inbound = auth_connector(&z.zone, &t.olivia, "acme/web")
        .connect(ProviderStream::new(rx))
        .await
        .expect("olivia's token admits a stream");
    let fake = FakeProvider::new(FakeCloud::new());
    let info = orc_provider_sdk::Provider::hello(&fake);
    let hello = orc_proto::ProviderMessage {
        request_id: orc_proto::RequestId::UNSOLICITED,
        body: orc_proto::ProviderBody::Hello(orc_proto::Hello {
            provider: info.provider,
            resource_uri: info.resource_uri,
            replica: info.replica,
            version: info.version,
            protocol_version: orc_proto::PROTOCOL_VERSION,
        }),
    };
    outbound.send(hello.into()).await.unwrap();
    use tokio_stream::StreamExt as _;
    let answer = tokio::time::timeout(API_WAIT, inbound.next())
        .await
        .expect("the zone answers the hello");
    let status = match answer {
        Some(Err(status)) => status,
        other => panic!("olivia's replica was not refused: {other:?}"),
    };
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    assert!(
        status.message().contains("served with another credential"),
        "{}",
        status.message()
    );
    assert_eq!(replicas(&z), 1);
    drop(stop);
}

/// Attack: keep serving with a token after it was revoked, or after the role it relied on
/// was taken away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_or_a_role_closes_its_streams_within_seconds() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let stop = start_replica(&z, &t.mia, "acme/web", &FakeCloud::new());
    eventually("mia's provider registers", API_WAIT, || async {
        replicas(&z) == 1
    })
    .await;
    let me = z.get("/api/whoami", &t.mia).await;
    let token_id = me.body["token_id"].as_str().unwrap().to_string();
    let revoked = z
        .delete(&format!("/api/users/mia/tokens/{token_id}"), &t.mia)
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    eventually("the revoked token's stream closes", API_WAIT, || async {
        replicas(&z) == 0
    })
    .await;
    drop(stop);

    // A fresh token of a user whose membership is then removed.
    let fresh = z
        .post(
            "/api/users/mia/tokens",
            &z.admin,
            json!({ "label": "second" }),
        )
        .await;
    let fresh = fresh.body["value"].as_str().unwrap().to_string();
    let stop = start_replica(&z, &fresh, "acme/web", &FakeCloud::new());
    eventually("mia's provider registers again", API_WAIT, || async {
        replicas(&z) == 1
    })
    .await;
    z.ungrant("acme", "mia", &t.olivia).await;
    eventually(
        "the stream of a user without a role closes",
        API_WAIT,
        || async { replicas(&z) == 0 },
    )
    .await;
    drop(stop);
}

/// Attack: mint a token that never expires. Tokens get a default lifetime and a maximum.
#[tokio::test]
async fn tokens_expire_by_default_and_not_later_than_the_maximum() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let _ = &t;
    let now = orc_zone::model::Timestamp::now().millis();
    let made = z
        .post(
            "/api/users/mia/tokens",
            &z.admin,
            json!({ "label": "default" }),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let expires = made.body["token"]["expires_at"]
        .as_i64()
        .expect("an expiry");
    let day = 24 * 3600 * 1000;
    assert!((expires - now - 90 * day).abs() < day, "{expires}");

    let too_long = z
        .post(
            "/api/users/mia/tokens",
            &z.admin,
            json!({ "label": "forever", "expires_at": now + 400 * day }),
        )
        .await;
    assert_eq!(too_long.status, StatusCode::BAD_REQUEST);
    assert_eq!(too_long.field(), Some("expires_at"));
    assert!(
        too_long.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("365 days"),
        "{}",
        too_long.body
    );
}

/// Probe: learn what a body must look like from an endpoint one may not use. The API
/// answers 403 before it judges the body.
#[tokio::test]
async fn callers_without_the_role_get_403_whatever_the_body() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let cases = [
        (&t.mia, "/api/orgs", json!({ "name": 7 })),
        (&t.mia, "/api/orgs/acme/projects", json!({ "name": 7 })),
        (
            &t.vic,
            &format!("{WEB}/pools") as &str,
            json!({ "size": "many" }),
        ),
        (&t.stan, "/api/users", json!([])),
        (
            &t.vic,
            "/api/orgs/acme/memberships",
            json!({ "role": "king" }),
        ),
    ];
    for (token, path, body) in cases {
        let answer = z.post(path, token, body).await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            answer.body
        );
    }
    let pricing = z
        .put(
            &format!("{WEB}/providers/none/pricing"),
            &t.mia,
            json!({ "markup": "lots" }),
        )
        .await;
    assert_eq!(pricing.status, StatusCode::FORBIDDEN, "{}", pricing.body);
    let secret = z
        .put(
            &format!("{WEB}/secrets/Not-A-Name"),
            &t.vic,
            json!({ "value": 7 }),
        )
        .await;
    assert_eq!(secret.status, StatusCode::FORBIDDEN, "{}", secret.body);

    // With the role, the same bodies are judged and named.
    let judged = z
        .post("/api/orgs/acme/projects", &t.olivia, json!({ "name": 7 }))
        .await;
    assert_eq!(judged.status, StatusCode::BAD_REQUEST);
    assert_eq!(judged.field(), Some("name"));
}

/// Attack: a project owner gives the zone's apps user a role (so every app slot's user would
/// hold it), and uses the grant to learn which user names exist in the zone. The apps user
/// holds no role whoever asks; an owner grants only to people already in the org, and any
/// other name reads exactly as one that does not exist.
#[tokio::test]
async fn the_apps_user_holds_no_role_and_a_grant_tells_owners_no_names() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let grant = |token: &str, user: &str| {
        let body = json!({ "user": user, "role": "viewer", "project": "data" });
        let token = token.to_string();
        let z = &z;
        async move { z.post("/api/orgs/acme/memberships", &token, body).await }
    };
    let apps = orc_zone::apps::APPS_USER;
    let by_operator = grant(&z.admin, apps).await;
    assert_eq!(
        by_operator.status,
        StatusCode::BAD_REQUEST,
        "{}",
        by_operator.body
    );
    assert_eq!(by_operator.field(), Some("user"));
    assert!(
        by_operator.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("apps user"),
        "{}",
        by_operator.body
    );

    // olivia owns acme: stan exists but holds no role in acme, and so does the apps user.
    let unknown = grant(&t.olivia, "nobody").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    let shown = |answer: &orc_testkit::zone::Answer, name: &str| {
        answer.body.to_string().replace(name, "NAME")
    };
    for existing in ["stan", apps, "admin"] {
        let answer = grant(&t.olivia, existing).await;
        assert_eq!(answer.status, unknown.status, "{existing}: {}", answer.body);
        assert_eq!(
            shown(&answer, existing),
            shown(&unknown, "nobody"),
            "{existing} reads otherwise than a name nobody has"
        );
    }
    let memberships = z.get("/api/orgs/acme/memberships", &t.olivia).await;
    assert!(
        !memberships.body.to_string().contains("stan")
            && !memberships.body.to_string().contains(apps),
        "{}",
        memberships.body
    );
    // Someone of the org gets the role; an operator gives a newcomer their first.
    let vic = grant(&t.olivia, "vic").await;
    assert_eq!(vic.status, StatusCode::CREATED, "{}", vic.body);
    let stan = grant(&z.admin, "stan").await;
    assert_eq!(stan.status, StatusCode::CREATED, "{}", stan.body);
}

/// Opens a stream with `token` in `project` and says hello as provider `name` of resource
/// `uri`, as a fake replica would; returns the zone's first answer: the welcome (kept open
/// while the returned sender lives) or the refusal.
async fn hello_as(
    z: &TestZone,
    token: &str,
    project: &str,
    name: &str,
    uri: &str,
) -> Result<tokio::sync::mpsc::Sender<orc_proto::pb::ProviderMessage>, tonic::Status> {
    use tokio_stream::StreamExt as _;
    let (outbound, rx) = tokio::sync::mpsc::channel(4);
    let mut inbound = auth_connector(&z.zone, token, project)
        .connect(ProviderStream::new(rx))
        .await
        .map_err(|e| tonic::Status::unknown(e.to_string()))?;
    let info = orc_provider_sdk::Provider::hello(&FakeProvider::new(FakeCloud::new()));
    let hello = orc_proto::ProviderMessage {
        request_id: orc_proto::RequestId::UNSOLICITED,
        body: orc_proto::ProviderBody::Hello(orc_proto::Hello {
            provider: orc_proto::ProviderName::new(name).unwrap(),
            resource_uri: orc_proto::ResourceUri::new(uri).unwrap(),
            replica: info.replica,
            version: info.version,
            protocol_version: orc_proto::PROTOCOL_VERSION,
        }),
    };
    outbound.send(hello.into()).await.unwrap();
    match tokio::time::timeout(API_WAIT, inbound.next())
        .await
        .expect("the zone answers the hello")
    {
        Some(Ok(_welcome)) => Ok(outbound),
        Some(Err(status)) => Err(status),
        None => panic!("the stream ended without an answer"),
    }
}

/// Attack: an app slot uses its pool's service credential to register further providers in
/// its project (named as it likes), to be chosen for other pools and receive their deploys.
/// The credential serves the one resource its pool registered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_credential_serves_only_the_first_resource_its_pool_registered() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let credential = service_credential(&z, &t, "svc").await;
    let first = hello_as(&z, &credential, "acme/web", "partner", "urn:orc:test:first")
        .await
        .expect("the pool's first resource registers");

    for (name, uri) in [
        ("fake", "urn:orc:test:second"),
        ("partner", "urn:orc:test:first-too"),
    ] {
        let refused = hello_as(&z, &credential, "acme/web", name, uri)
            .await
            .expect_err("a second resource registered");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(
            refused
                .message()
                .contains("serves the one resource its pool registered first"),
            "{}",
            refused.message()
        );
    }
    let providers = z.get(&format!("{WEB}/providers"), &t.mia).await;
    let resources: Vec<&str> = providers
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["resource_uri"].as_str())
        .filter(|uri| uri.starts_with("urn:orc:test:first") || uri.ends_with(":second"))
        .collect();
    assert_eq!(
        resources,
        ["urn:orc:test:first"],
        "nothing but the first resource was registered: {}",
        providers.body
    );
    // A second replica of its own resource still joins its group, after a rotation too.
    let second = hello_as(&z, &credential, "acme/web", "partner", "urn:orc:test:first")
        .await
        .expect("a replica of the pool's own resource joins");
    drop((first, second));
    let rotated = service_credential_again(&z, "svc").await;
    hello_as(&z, &rotated, "acme/web", "partner", "urn:orc:test:first")
        .await
        .expect("the rotated credential serves the same resource");
    let refused = hello_as(&z, &rotated, "acme/web", "other", "urn:orc:test:other")
        .await
        .expect_err("the rotated credential registered a second resource");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
}
