//! The zone's security controls, each tested by repeating the attack it stops
//! (`docs/security.md` lists them): secrets at rest, the data dir's modes, and answers from
//! a provider group's replicas.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::api_support::{TestZone, pool_body, tenancy};
use crate::hub_support::{HUB_WAIT, HubServer, START, registered, tenant};
use orc_proto::{ProviderBody, RequestId, ZoneBody};
use orc_zone::backend::NodeBackend as _;
use orc_zone::store::{SealingKey, sqlite_url};
use orc_zone::zone::{Zone, ZoneConfig, ZoneError};
use reqwest::StatusCode;
use serde_json::json;

const SECRET: &str = "hunter2-zone-secret-value";
const POOLS: &str = "/api/orgs/acme/projects/web/pools";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Every byte of every file under `dir`, so a test can look for a secret anywhere in them.
fn all_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else if path.is_file() {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Pool `acme/web/svc` as the store keeps it.
async fn svc_pool(z: &TestZone) -> orc_zone::model::Pool {
    let name = |text: &str| text.parse().unwrap();
    z.zone
        .store()
        .pool_by_path(&name("acme"), &name("web"), &name("svc"))
        .await
        .unwrap()
}

/// Attack: read a pool's sensitive param out of the store's files (or a backup of them).
#[tokio::test]
async fn no_store_file_holds_a_sensitive_value_in_clear() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["sensitive_params"] = json!({ "api_key": SECRET });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let changed = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({
                "params": {},
                "sensitive_params": { "api_key": format!("{SECRET}-2") },
                "generation": 1
            }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    // The zone itself reads the value back for the app's slots.
    let pool = svc_pool(&z).await;
    let app = pool.spec.app.as_ref().unwrap();
    assert_eq!(app.sensitive.0["api_key"], format!("{SECRET}-2"));

    let files = all_bytes(&z.dir());
    assert!(files.iter().any(|(name, _)| name.ends_with("zone.db")));
    for (name, bytes) in &files {
        assert!(!contains(bytes, SECRET), "{name} holds the secret in clear");
    }
}

/// Attack: a store written before sealing existed keeps its secrets in clear; a zone that
/// starts on it seals them, and none is left in the file, its log or its free pages.
#[tokio::test]
async fn values_stored_in_clear_are_sealed_at_start_and_leave_no_trace() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["sensitive_params"] = json!({ "api_key": "to-be-replaced" });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    // Put a value in clear, as a zone before sealing kept it (SQLite takes a second writer).
    let db = z.dir().join("zone.db");
    write_in_clear(&db).await;
    assert!(all_bytes(&z.dir()).iter().any(|(_, b)| contains(b, SECRET)));

    let z = z.restart().await;
    let pool = svc_pool(&z).await;
    assert_eq!(pool.spec.app.unwrap().sensitive.0["api_key"], SECRET);
    for (name, bytes) in all_bytes(&z.dir()) {
        assert!(!contains(&bytes, SECRET), "{name} still holds the secret");
    }
}

/// Writes pool `svc`'s sensitive param in clear, bypassing the store's sealing.
async fn write_in_clear(db: &Path) {
    use sqlx::{Connection as _, Executor as _};
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&sqlite_url(db)).await.unwrap();
    conn.execute("PRAGMA busy_timeout = 10000").await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!(
        "UPDATE pools SET app_sensitive_params = '{{\"api_key\":\"{SECRET}\"}}' \
         WHERE name = 'svc'"
    )))
    .await
    .unwrap();
    conn.close().await.unwrap();
}

/// The error and its sources, one after another.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Attack: start the zone with another sealing key than the one that sealed its store.
#[tokio::test]
async fn a_zone_with_the_wrong_sealing_key_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    zone.shutdown().await;
    let other = tmp.path().join("other-key");
    let (key, _) = SealingKey::load_or_create(&other).unwrap();
    let mut config = ZoneConfig::ephemeral(&dir);
    config.sealing_key_file = Some(other);
    let err = Zone::start(config).await.unwrap_err();
    let text = chain(&err);
    assert!(
        text.contains(&format!("the sealing key given is {}", key.id())),
        "{text}"
    );
    assert!(
        text.contains("start the zone with the key file that sealed them"),
        "{text}"
    );
}

/// Attack: another local user reads the store, the key or the token from the data dir.
#[tokio::test]
async fn a_fresh_data_dir_is_private_and_so_is_every_file_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    assert_eq!(mode(&dir), 0o700);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for wanted in ["zone.db", "sealing-key", "admin-token", "zone-url"] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    zone.shutdown().await;
}

/// Attack: a data dir made by hand (or by an older `orc up`) with 0755 and 0644 files.
#[tokio::test]
async fn an_open_data_dir_is_refused_and_open_files_are_tightened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap_err();
    assert!(matches!(err, ZoneError::DataDirOpen { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "the data dir {0} can be entered or read by other users (mode 0755); make it \
             private with: chmod 700 {0}",
            dir.display()
        )
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "nothing was written into the open dir"
    );

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    zone.shutdown().await;
    for file in ["zone.db", "admin-token"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    for file in ["zone.db", "admin-token", "zone-url", "sealing-key"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    zone.shutdown().await;
}

/// A provider replica driven message by message, to act as a misbehaving group member.
struct RawReplica {
    outbound: tokio::sync::mpsc::Sender<orc_proto::pb::ProviderMessage>,
    inbound: orc_provider_sdk::transport::ZoneStream,
}

impl RawReplica {
    /// Dials the hub as replica `slot` of the fake provider and says hello.
    async fn connect(endpoint: &str, token: &str, slot: u32) -> RawReplica {
        use orc_provider_sdk::Provider as _;
        use orc_provider_sdk::transport::{Connector as _, ProviderStream};
        let mut config = orc_provider_sdk::fake::FakeConfig::default();
        config.replica.slot = slot;
        let fake = orc_provider_sdk::fake::FakeProvider::with_config(
            orc_provider_sdk::fake::FakeCloud::new(),
            config,
        );
        let info = fake.hello();
        let hello = orc_proto::Hello {
            provider: info.provider,
            resource_uri: info.resource_uri,
            replica: info.replica,
            version: info.version,
            protocol_version: orc_proto::PROTOCOL_VERSION,
        };
        let (outbound, rx) = tokio::sync::mpsc::channel(16);
        let replica_side = crate::hub_support::auth_connector(endpoint, token, "acme/web");
        let inbound = replica_side
            .connect(ProviderStream::new(rx))
            .await
            .expect("stream opens");
        let replica = RawReplica { outbound, inbound };
        replica
            .send(RequestId::UNSOLICITED, ProviderBody::Hello(hello))
            .await;
        replica
            .send(
                RequestId::UNSOLICITED,
                ProviderBody::Catalog(fake.catalog().await),
            )
            .await;
        replica
    }

    async fn send(&self, request_id: RequestId, body: ProviderBody) {
        let message = orc_proto::ProviderMessage { request_id, body };
        self.outbound
            .send(message.into())
            .await
            .expect("stream open");
    }

    /// The next message from the zone other than a keep-alive.
    async fn next(&mut self) -> orc_proto::ZoneMessage {
        loop {
            let message = self.recv().await;
            if !matches!(message.body, ZoneBody::KeepAlive) {
                return message;
            }
        }
    }

    /// The next message from the zone.
    async fn recv(&mut self) -> orc_proto::ZoneMessage {
        use tokio_stream::StreamExt as _;
        let raw = tokio::time::timeout(HUB_WAIT, self.inbound.next())
            .await
            .expect("the zone answers in time")
            .expect("stream open")
            .expect("a message");
        orc_proto::ZoneMessage::try_from(raw).expect("valid message")
    }

    /// Waits until the zone has handled everything this replica sent so far: it answers a
    /// keep-alive in order.
    async fn settle(&mut self) {
        self.send(RequestId::UNSOLICITED, ProviderBody::KeepAlive)
            .await;
        while !matches!(self.recv().await.body, ZoneBody::KeepAlive) {}
    }
}

fn offer(node: &orc_proto::NodeId, usd: &str) -> ProviderBody {
    ProviderBody::QuoteReply {
        node_id: node.clone(),
        reply: orc_proto::QuoteReply::Offer(orc_proto::Offer {
            site: orc_proto::SiteName::new("eu-central-a").unwrap(),
            price: Some(orc_common::Money::usd_per_month(usd.parse().unwrap())),
            words: "2 vCPU · 4 GiB · eu-central".into(),
            quote_token: orc_proto::QuoteToken::new("t").unwrap(),
            expires: std::time::SystemTime::now() + std::time::Duration::from_secs(60),
        }),
    }
}

/// Attack: a standby of a provider group answers the quote that went to the serving
/// replica, to set the node's price (or a deploy, to report it). Its answer is dropped; the
/// serving replica's answer is the one taken, and request ids cannot be guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_replica_a_request_went_to_can_answer_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = orc_common::time::ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let mut serving = RawReplica::connect(&server.endpoint(), &t.token, 0).await;
    assert!(matches!(
        serving.next().await.body,
        ZoneBody::Welcome {
            role: orc_proto::ReplicaRole::Serving
        }
    ));
    let mut standby = RawReplica::connect(&server.endpoint(), &t.token, 1).await;
    assert!(matches!(
        standby.next().await.body,
        ZoneBody::Welcome {
            role: orc_proto::ReplicaRole::Standby
        }
    ));
    let provider = registered(&server.hub, &t.store, 2).await;

    let hub = server.hub.clone();
    let asked = orc_testkit::proto::quote("n-000000000042", "eu-central", 2, 4);
    let node = asked.node_id.clone();
    let quoting = tokio::spawn(async move { hub.quote(&provider, asked).await });
    let request = serving.next().await;
    assert!(matches!(request.body, ZoneBody::Quote(_)), "{request:?}");
    assert!(
        request.request_id.0 > u64::from(u32::MAX),
        "a request id is random, not a counter: {}",
        request.request_id
    );

    standby.send(request.request_id, offer(&node, "0.01")).await;
    standby.settle().await;
    assert!(!quoting.is_finished(), "the standby's answer was taken");

    serving.send(request.request_id, offer(&node, "9.99")).await;
    let reply = tokio::time::timeout(HUB_WAIT, quoting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match reply {
        orc_proto::QuoteReply::Offer(o) => {
            assert_eq!(o.price.unwrap().amount, "9.99".parse().unwrap());
        }
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

async fn node_events(
    t: &crate::hub_support::Tenant,
    node: &orc_zone::model::NodeId,
) -> Vec<String> {
    let scope = orc_zone::model::EventScope {
        node_id: Some(node.clone()),
        ..Default::default()
    };
    t.store
        .list_events(&scope, None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "node.progress")
        .map(|e| e.words)
        .collect()
}

/// Attack: a provider writes progress notes into a node that is not its own (another
/// provider's pool), and floods its own node's events with a 200,000-character line full of
/// terminal escape sequences and bidirectional overrides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_progress_goes_only_to_the_providers_own_nodes_as_one_clean_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = orc_common::time::ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let mut replica = RawReplica::connect(&server.endpoint(), &t.token, 0).await;
    replica.next().await;
    let provider = registered(&server.hub, &t.store, 1).await;
    let other = t
        .store
        .create_provider(
            &orc_zone::model::NewProvider {
                project_id: t.project.id.clone(),
                name: "other".parse().unwrap(),
                resource_uri: "urn:orc:test:other".into(),
                scope: orc_zone::model::ProviderScope::Project,
                pricing: orc_zone::model::PricingStrategy::None,
            },
            START,
        )
        .await
        .unwrap();
    let own = crate::hub_support::create_pool(&t, &provider, "mine", 1).await;
    let foreign = crate::hub_support::create_pool(&t, &other, "theirs", 1).await;
    let node_of = |pool: &orc_zone::model::Pool| {
        let store = t.store.clone();
        let id = pool.id.clone();
        async move {
            store.list_nodes_by_pool(&id, false).await.unwrap()[0]
                .id
                .clone()
        }
    };
    let (own_node, foreign_node) = (node_of(&own).await, node_of(&foreign).await);

    let progress = |node: &orc_zone::model::NodeId, words: String| {
        ProviderBody::DeployProgress(orc_proto::DeployProgress {
            node_id: node.clone(),
            words,
            product_uuid: None,
        })
    };
    replica
        .send(
            RequestId::UNSOLICITED,
            progress(&foreign_node, "written into another provider's node".into()),
        )
        .await;
    let flood = format!(
        "\x1b[2J\x1b]0;owned\x07{}\u{202E}gnp.exe\n{}",
        "A".repeat(100_000),
        "B".repeat(100_000)
    );
    replica
        .send(RequestId::UNSOLICITED, progress(&own_node, flood))
        .await;
    replica
        .send(
            RequestId::UNSOLICITED,
            progress(&own_node, "second note".into()),
        )
        .await;
    replica.settle().await;
    let own_events =
        orc_testkit::eventually_some("both notes on the own node", HUB_WAIT, || async {
            let events = node_events(&t, &own_node).await;
            (events.len() == 2).then_some(events)
        })
        .await;
    let flooded = own_events
        .iter()
        .find(|w| w.starts_with("[2J"))
        .expect("the flood, cleaned");
    assert!(flooded.len() <= 1024, "{} bytes", flooded.len());
    assert!(flooded.ends_with('…'));
    assert!(
        !flooded.chars().any(orc_common::text::is_unsafe),
        "{flooded:?}"
    );
    // Notes of a stream are recorded in the order sent: the foreign one was handled first.
    assert!(
        node_events(&t, &foreign_node).await.is_empty(),
        "a note reached another provider's node"
    );
    server.stop().await;
}

/// Attack: a tenant project owner publishes a provider to the whole zone, so every tenant's
/// pools may land on it, with their keys and bootstrap.
#[tokio::test]
async fn only_an_operator_widens_a_provider_to_the_zone() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let path = "/api/orgs/acme/projects/web/providers/fake/change-scope";
    let by_owner = z.post(path, &t.olivia, json!({ "scope": "zone" })).await;
    assert_eq!(by_owner.status, StatusCode::FORBIDDEN, "{}", by_owner.body);
    assert_eq!(
        by_owner.body["error"]["message"],
        "making a provider visible to the whole zone needs the owner role in org sys (zone \
         operator)"
    );
    let seen = z
        .get("/api/orgs/acme/projects/data/providers", &z.admin)
        .await;
    assert!(
        !seen.body.to_string().contains("fake"),
        "still private: {}",
        seen.body
    );

    // An operator may widen it; other projects then read it by its full name, and a second
    // `fake` of another project widened beside it is another name.
    let store = z.zone.store();
    let data = store
        .project_by_path(&"acme".parse().unwrap(), &"data".parse().unwrap())
        .await
        .unwrap();
    store
        .create_provider(
            &orc_zone::model::NewProvider {
                project_id: data.id,
                name: "fake".parse().unwrap(),
                resource_uri: "urn:orc:test:lookalike".into(),
                scope: orc_zone::model::ProviderScope::Project,
                pricing: orc_zone::model::PricingStrategy::None,
            },
            orc_zone::model::Timestamp::now(),
        )
        .await
        .unwrap();
    let first = z.post(path, &z.admin, json!({ "scope": "zone" })).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["name"], "acme/web/fake");
    let twin = z
        .post(
            "/api/orgs/acme/projects/data/providers/fake/change-scope",
            &z.admin,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(twin.status, StatusCode::OK, "{}", twin.body);
    assert_eq!(twin.body["name"], "acme/data/fake");

    // Narrowing back is the project owner's to do.
    let narrowed = z.post(path, &t.olivia, json!({ "scope": "project" })).await;
    assert_eq!(narrowed.status, StatusCode::OK, "{}", narrowed.body);
}

/// Attack: send a body far larger than any request needs, to tie up the zone's memory; and
/// hide terminal escapes or a bidirectional override in a token's label.
#[tokio::test]
async fn oversized_bodies_get_413_and_labels_refuse_control_characters() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let huge = json!({ "name": "x".repeat(1024 * 1024) });
    let answer = z.post("/api/orgs", &z.admin, huge).await;
    assert_eq!(
        answer.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        answer.body
    );
    assert_eq!(answer.code(), Some("payload_too_large"));
    for label in ["ci\x1b[2J", "ci\u{202E}kat"] {
        let refused = z
            .post("/api/users/mia/tokens", &t.mia, json!({ "label": label }))
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
        assert_eq!(refused.field(), Some("label"));
    }
}

/// Attack: a token label that reads as another (`ci` and `c<ZWSP>i` look the same), or hides
/// text in invisible characters. Labels refuse zero-width and other invisible characters as
/// they refuse control and bidirectional ones.
#[tokio::test]
async fn token_labels_refuse_zero_width_and_invisible_characters() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    for label in [
        "c\u{200B}i",
        "c\u{200C}i",
        "c\u{200D}i",
        "c\u{2060}i",
        "\u{FEFF}ci",
        "ci\u{E0041}\u{E0042}",
    ] {
        let refused = z
            .post("/api/users/mia/tokens", &t.mia, json!({ "label": label }))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{label:?}: {}",
            refused.body
        );
        assert_eq!(refused.field(), Some("label"));
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invisible"),
            "{}",
            refused.body
        );
    }
    let listed = z.get("/api/users/mia/tokens", &t.mia).await;
    assert_eq!(
        listed.body.as_array().unwrap().len(),
        1,
        "only the tenancy's token: {}",
        listed.body
    );
    let kept = z
        .post(
            "/api/users/mia/tokens",
            &t.mia,
            json!({ "label": "café laptop ❤️" }),
        )
        .await;
    assert_eq!(kept.status, StatusCode::CREATED, "{}", kept.body);
}

/// Attack: send a long bad value (with escapes in it) so that the error message repeats it
/// into the caller's terminal and the zone's log. The message quotes a short, escaped prefix.
#[tokio::test]
async fn errors_quote_only_a_short_escaped_prefix_of_bad_input() {
    let z = TestZone::start().await;
    let bad = format!("\x1b[2J{}", "x".repeat(200_000));
    let answer = z.post("/api/orgs", &z.admin, json!({ "name": bad })).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.field(), Some("name"));
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.len() < 200, "{} bytes: {message}", message.len());
    assert!(message.contains("\"\\u{1b}[2Jxxx"), "{message}");
    assert!(!message.contains('\x1b'), "{message:?}");
    let scope = z
        .post(
            "/api/orgs/sys/projects/sys/providers/core/change-scope",
            &z.admin,
            json!({ "scope": "y".repeat(100_000) }),
        )
        .await;
    assert_eq!(scope.field(), Some("scope"));
    let message = scope.body["error"]["message"].as_str().unwrap();
    assert!(message.len() < 200, "{} bytes", message.len());
}
