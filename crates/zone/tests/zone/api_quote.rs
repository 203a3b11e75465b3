//! Quotes through a backend: the provider's offer with the provider's pricing strategy
//! applied, refusals with their kind, and the catalog checks on class and OS.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use orc_common::{Currency, Money, Period};
use orc_zone::api::views::ReplicaView;
use orc_zone::api::{ApiState, ProviderDirectory};
use orc_zone::backend::{BackendError, Backends, NodeBackend};
use orc_zone::model::{
    Markup, NewProvider, PricingStrategy, Provider, ProviderScope, Role, Timestamp, sys_org_id,
    sys_project_id,
};
use orc_zone::store::Store;
use reqwest::StatusCode;
use rust_decimal::Decimal;
use serde_json::{Value, json};

/// Offers 0.10 USD/hour at `eu-central-a`, refuses class `ap-south` with `no_capacity` and
/// 3 vCPUs with `unplaceable`, and does not answer for 5 vCPUs. Keeps each quote's pool and
/// whether it was a preview.
#[derive(Default)]
struct FixedBackend {
    asked: Mutex<Vec<(String, bool)>>,
}

impl NodeBackend for FixedBackend {
    async fn quote(
        &self,
        provider: &Provider,
        quote: orc_proto::Quote,
    ) -> Result<orc_proto::QuoteReply, BackendError> {
        self.asked
            .lock()
            .unwrap()
            .push((quote.pool.to_string(), quote.preview));
        if quote.shape.vcpus == 3 {
            return Ok(orc_proto::QuoteReply::Refused(orc_proto::Refusal::new(
                orc_proto::RefusalKind::Unplaceable,
                "no site in Europe Central offers 3 vCPU · 4 GiB; nearest offered: 2 vCPU · 4 GiB",
            )));
        }
        if quote.shape.vcpus == 5 {
            return Err(BackendError::Timeout {
                provider: provider.name.to_string(),
                request: "quote",
                timeout_ms: 1,
            });
        }
        if quote.class.as_str() == "ap-south" {
            return Ok(orc_proto::QuoteReply::Refused(orc_proto::Refusal::new(
                orc_proto::RefusalKind::NoCapacity,
                "no capacity in Asia South right now",
            )));
        }
        Ok(orc_proto::QuoteReply::Offer(orc_proto::Offer {
            site: orc_proto::SiteName::new("eu-central-a").unwrap(),
            price: Some(Money::new(Decimal::new(10, 2), Currency::USD, Period::Hour)),
            words: format!("{} · {}", quote.shape, quote.class),
            quote_token: orc_proto::QuoteToken::new("q-1").unwrap(),
            expires: SystemTime::now() + Duration::from_secs(60),
        }))
    }

    async fn deploy(
        &self,
        provider: &Provider,
        _deploy: orc_proto::Deploy,
    ) -> Result<orc_proto::DeployResult, BackendError> {
        Err(BackendError::NoReplica {
            provider: provider.name.to_string(),
        })
    }

    async fn destroy(
        &self,
        provider: &Provider,
        _node: orc_zone::model::NodeId,
    ) -> Result<orc_proto::DestroyResult, BackendError> {
        Err(BackendError::NoReplica {
            provider: provider.name.to_string(),
        })
    }
}

/// Reports one serving replica and a catalog with classes eu-central and ap-south.
struct FixedDirectory;

impl ProviderDirectory for FixedDirectory {
    fn replicas(&self, _provider: &Provider) -> Vec<ReplicaView> {
        vec![ReplicaView {
            host: "h1".into(),
            pid: 7,
            slot: 0,
            role: "serving".into(),
            connected_since: 1,
        }]
    }

    fn catalog(&self, _provider: &Provider) -> Option<orc_proto::Catalog> {
        Some(orc_proto::Catalog {
            classes: ["eu-central", "ap-south"]
                .iter()
                .map(|c| orc_proto::ClassInfo {
                    id: orc_proto::ClassId::new(*c).unwrap(),
                    title: c.to_string(),
                    offerings: Vec::new(),
                })
                .collect(),
            os: vec![orc_proto::OsInfo {
                id: orc_proto::OsId::new("debian-12").unwrap(),
                title: "Debian 12".into(),
            }],
            availability: orc_proto::Availability::default(),
            site_gateways: false,
        })
    }
}

/// Serves `state` on a loopback port; the API's URL.
async fn serve(state: ApiState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(orc_zone::api::serve(
        listener,
        state,
        orc_tls::ServeOptions::default(),
        orc_zone::api::ApiLimits::default(),
        std::future::pending(),
    ));
    url
}

struct Setup {
    backend: Arc<FixedBackend>,
    url: String,
    token: String,
    store: Store,
    provider: Provider,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite_file(&dir.path().join("zone.db"))
        .await
        .unwrap();
    let now = Timestamp::now();
    let admin = store
        .create_user(&"admin".parse().unwrap(), now)
        .await
        .unwrap();
    store
        .add_membership(&admin.id, &sys_org_id(), None, Role::Owner, now)
        .await
        .unwrap();
    let (_, secret) = store
        .create_token(&admin.id, "t", None, None, now)
        .await
        .unwrap();
    let provider = store
        .create_provider(
            &NewProvider {
                project_id: sys_project_id(),
                name: "partner".parse().unwrap(),
                resource_uri: "urn:orc:partner:test".into(),
                scope: ProviderScope::Zone,
                pricing: PricingStrategy::None,
            },
            now,
        )
        .await
        .unwrap();
    let backend = Arc::new(FixedBackend::default());
    let state = ApiState::new(store.clone())
        .with_backends(Backends::single(backend.clone()))
        .with_directory(Arc::new(FixedDirectory));
    let url = serve(state).await;
    Setup {
        backend,
        url,
        token: secret.expose().to_string(),
        store,
        provider,
        _dir: dir,
    }
}

async fn quote(s: &Setup, body: Value) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/api/orgs/sys/projects/sys/quote", s.url))
        .bearer_auth(&s.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

fn request(class: &str, os: &str) -> Value {
    json!({ "provider": "partner", "shape": { "cpu": 2, "mem": 4 }, "class": class, "os": os })
}

#[tokio::test]
async fn offers_are_unpriced_without_a_strategy_and_marked_up_with_one() {
    let s = setup().await;
    let (status, body) = quote(&s, request("eu-central", "debian-12")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "offer");
    assert_eq!(body["site"], "eu-central-a");
    assert_eq!(body["words"], "2 vCPU · 4 GiB · eu-central");
    assert_eq!(body["price"], Value::Null);
    assert_eq!(body["markup"], Value::Null);

    let markup = Markup::new(Decimal::new(15, 2)).unwrap();
    s.store
        .set_provider_pricing(
            &s.provider.id,
            PricingStrategy::Markup(markup),
            Timestamp::now(),
        )
        .await
        .unwrap();
    let (_, body) = quote(&s, request("eu-central", "debian-12")).await;
    assert_eq!(body["markup"], "0.15");
    assert_eq!(
        body["price"],
        json!({ "amount": "0.115", "currency": "USD", "period": "hour" })
    );

    s.store
        .set_provider_pricing(
            &s.provider.id,
            PricingStrategy::Markup(Markup::new(Decimal::ZERO).unwrap()),
            Timestamp::now(),
        )
        .await
        .unwrap();
    let (_, body) = quote(&s, request("eu-central", "debian-12")).await;
    assert_eq!(body["price"]["amount"], "0.1");
}

#[tokio::test]
async fn refusals_carry_their_kind_and_words() {
    let s = setup().await;
    let (status, body) = quote(&s, request("ap-south", "debian-12")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["outcome"], "refused");
    assert_eq!(body["refusal"], "no_capacity");
    assert_eq!(body["words"], "no capacity in Asia South right now");
}

#[tokio::test]
async fn class_and_os_are_checked_against_the_catalog() {
    let s = setup().await;
    let (status, body) = quote(&s, request("mars-north", "debian-12")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["field"], "class");
    assert_eq!(
        body["error"]["message"],
        "provider partner offers no class \"mars-north\" (it offers: ap-south, eu-central)"
    );
    let (_, body) = quote(&s, request("eu-central", "templeos")).await;
    assert_eq!(body["error"]["field"], "os");

    let resp = reqwest::Client::new()
        .get(format!(
            "{}/api/orgs/sys/projects/sys/providers/partner",
            s.url
        ))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap();
    let view: Value = resp.json().await.unwrap();
    assert_eq!(view["replicas"][0]["role"], "serving");
    assert_eq!(view["catalog"]["classes"][0]["id"], "ap-south");
    assert_eq!(view["catalog"]["os"][0]["title"], "Debian 12");
}

async fn create_pool(s: &Setup, name: &str, cpu: u32) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/api/orgs/sys/projects/sys/pools", s.url))
        .bearer_auth(&s.token)
        .json(&json!({
            "name": name, "provider": "partner", "size": 2,
            "shape": { "cpu": cpu, "mem": 4 }, "class": "eu-central", "os": "debian-12"
        }))
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

#[tokio::test]
async fn a_pool_nothing_can_ever_place_is_refused_when_it_is_created() {
    let s = setup().await;
    let (status, body) = create_pool(&s, "never", 3).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "unplaceable");
    assert_eq!(
        body["error"]["message"],
        "provider partner can never place this pool: no site in Europe Central offers \
         3 vCPU · 4 GiB; nearest offered: 2 vCPU · 4 GiB"
    );
    let pools = s.store.list_pools(&sys_project_id()).await.unwrap();
    assert!(pools.is_empty(), "nothing was created: {pools:?}");

    let (status, body) = create_pool(&s, "fits", 2).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = create_pool(&s, "unanswered", 5).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "a provider that does not answer lets the pool through: {body}"
    );
    let asked = s.backend.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            ("sys/sys/never".to_string(), true),
            ("sys/sys/fits".to_string(), true),
            ("sys/sys/unanswered".to_string(), true),
        ],
        "every check is a preview, which holds nothing at the provider"
    );

    let (status, _) = quote(&s, request("eu-central", "debian-12")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        s.backend.asked.lock().unwrap().last(),
        Some(&("sys/sys/quote-preview".to_string(), true)),
        "orc quote asks a preview too"
    );
}

/// The usage of the current month counts a running node's hours up to the answer, beyond
/// the hourly writes, and names each line's pool; a node that no longer runs shows what
/// was written.
#[tokio::test]
async fn usage_counts_running_nodes_to_date() {
    use orc_zone::model::Expected;
    use orc_zone::model::{NewPool, NodeState, PoolSpec};

    let s = setup().await;
    // 2026-11-10T00:00:00Z, and a quarter of an hour later.
    let opened = Timestamp(1_794_268_800_000);
    let asked = opened.plus_millis(15 * 60 * 1000);
    let change = s
        .store
        .create_pool(
            &NewPool {
                project_id: sys_project_id(),
                name: "web".parse().unwrap(),
                size: 2,
                spec: PoolSpec {
                    provider_id: s.provider.id.clone(),
                    shape: orc_common::Shape {
                        vcpus: 2,
                        memory_gib: 4,
                        arch: Default::default(),
                        disks_gib: vec![],
                    },
                    region_class: "eu-central".parse().unwrap(),
                    os: "debian-12".parse().unwrap(),
                    public: false,
                    endpoints: vec![],
                    app: None,
                    placement: Default::default(),
                    ssh_keys: Vec::new(),
                },
            },
            opened,
        )
        .await
        .unwrap();
    let rate = Money::new(Decimal::new(8, 2), Currency::USD, Period::Hour);
    for (node, state) in change
        .created
        .iter()
        .zip([NodeState::Running, NodeState::Destroying])
    {
        let mut status = node.status.clone();
        status.state = state;
        status.price = Some(rate);
        s.store
            .update_node_state(&node.id, Expected::Version(node.version), &status, opened)
            .await
            .unwrap();
        let subject = orc_zone::pricing::BillingSubject {
            project_id: sys_project_id(),
            pool_id: change.pool.id.clone(),
            node_id: node.id.clone(),
            description: "2 vCPU · 4 GiB · eu-central".into(),
            rate,
            public_ipv4: false,
        };
        for usage in orc_zone::pricing::opening_usage(&subject, opened) {
            s.store.record_usage(&usage, opened).await.unwrap();
        }
    }
    let state = ApiState::new(s.store.clone()).with_clock(move || asked);
    let url = serve(state).await;
    let usage: Value = reqwest::Client::new()
        .get(format!("{url}/api/orgs/sys/projects/sys/usage"))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(usage["month"], "2026-11", "{usage}");
    let lines = usage["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{usage}");
    let running = &lines[0];
    assert_eq!(running["node_id"], change.created[0].id.as_str());
    assert_eq!(running["pool"], "web");
    assert_eq!(running["hours"], "0.25");
    assert_eq!(running["amount"], "0.02");
    assert_eq!(running["accruing"], true);
    let stopped = &lines[1];
    assert_eq!(stopped["hours"], "0");
    assert_eq!(stopped["accruing"], false);
    assert_eq!(usage["totals"]["USD"], "0.02");
}
