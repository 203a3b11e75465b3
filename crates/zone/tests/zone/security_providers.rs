//! Provider identity: whatever a tenant's provider names itself, its sites or its gateways,
//! and whatever it reports, it changes nothing outside its own project. Each test repeats an
//! attack a tenant could make with a provider process of its own and asserts it fails.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use orc_common::time::ManualClock;
use orc_proto::{Inventory, InventorySite, PoolAddress, PoolPath, SiteName};
use orc_provider_sdk::fake::{FakeCloud, FakeConfig};
use orc_zone::backend::Backends;
use orc_zone::mesh::{MeshOptions, mesh_pass};
use orc_zone::model::{
    AgentState, EventScope, NewPool, NewProvider, NodeState, PricingStrategy, Provider,
    ProviderScope, sys_project_id,
};
use orc_zone::reconcile::apply_inventory;
use orc_zone::store::Store;
use orc_zone_model::gateway::gateway_pool_name;
use orc_zone_model::{InterfaceAddress, NodeAgent, NodeFacts};
use reqwest::StatusCode;
use serde_json::json;

use crate::api_support::{TestZone, pool_body, tenancy};

/// A pool body on `provider` (as a bare name, a full name or an id).
fn pool_on(name: &str, provider: &str) -> serde_json::Value {
    let mut body = pool_body(name, 1);
    body["provider"] = json!(provider);
    body
}
use crate::hub_support::*;

const GRACE: Duration = Duration::from_secs(120);

/// A tenant's provider, as a project member registers it: in `acme/web`, project scope.
async fn tenant_provider(t: &Tenant, provider: &str) -> Provider {
    t.store
        .create_provider(
            &NewProvider {
                project_id: t.project.id.clone(),
                name: name(provider),
                resource_uri: format!("urn:orc:tenant:{provider}"),
                scope: ProviderScope::Project,
                pricing: PricingStrategy::None,
            },
            START,
        )
        .await
        .unwrap()
}

async fn events_of(store: &Store, provider: &Provider, kind: &str) -> Vec<String> {
    let scope = EventScope {
        provider_id: Some(provider.id.clone()),
        ..EventScope::default()
    };
    store
        .list_events(&scope, None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.words)
        .collect()
}

/// Attack: a project member runs a provider process named `partner` whose catalog says its
/// sites need gateways, and deploys a pool on it. Before, the zone made
/// `sys/sys/gw-partner-<site>` on the tenant's provider (deploying a `sys/sys` node with a
/// live join token to it) and the zone partner's own site of that name then got no gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_provider_declaring_site_gateways_gets_no_gateway_and_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);

    // Over the hub: its catalog is refused, with an event naming it.
    let server = HubServer::start(&t.store, &clock, None).await;
    let config = FakeConfig {
        provider: orc_proto::ProviderName::new("partner").unwrap(),
        site_gateways: true,
        ..FakeConfig::default()
    };
    let _replica =
        Replica::start_with_config(&FakeCloud::new(), config, &server.endpoint(), &t.token);
    let imposter = registered(&server.hub, &t.store, 1).await;
    assert_eq!(imposter.name.as_str(), "partner");
    let refused = orc_testkit::eventually_some("the refusal's event", HUB_WAIT, || async {
        events_of(&t.store, &imposter, "provider.catalog_refused")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(
        refused.contains("provider partner") && refused.contains("site gateways"),
        "{refused}"
    );
    assert!(
        server.hub.catalog(&imposter).is_none(),
        "nothing is offered from a refused catalog"
    );
    server.stop().await;

    // Even a backend that says the tenant's sites need gateways (as a catalog would) gets
    // none for them; the operator's provider of the same name gets its own, by id.
    let cloud = FakeCloud::new();
    let backend = Direct::new(&cloud);
    backend.site_gateways.store(true, Ordering::SeqCst);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    let partner = operator_provider(&t, "partner").await;
    let theirs = create_pool(&t, &imposter, "evil", 1).await;
    let ours = create_pool(&t, &partner, "web", 1).await;
    for pool in [&theirs, &ours] {
        let nodes = drive(
            &reconciler,
            &t.store,
            &pool.id,
            4,
            all_in(NodeState::Running),
        )
        .await;
        assert_eq!(nodes[0].status.site.as_deref(), Some("eu-central-a"));
    }
    reconciler.pool_pass().await.unwrap();
    let gateways: Vec<(String, orc_zone::model::ProviderId)> = t
        .store
        .list_pools(&sys_project_id())
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name.to_string(), p.spec.provider_id))
        .collect();
    assert_eq!(
        gateways,
        [(
            gateway_pool_name(&partner.id, "eu-central-a")
                .unwrap()
                .to_string(),
            partner.id.clone()
        )],
        "one gateway pool, the operator's, on the operator's provider"
    );
    let deployed = cloud.instances();
    assert_eq!(
        deployed.len(),
        2,
        "the two tenant nodes, no gateway on the tenant's provider: {deployed:?}"
    );
}

/// The facts of an agent at `address` with key byte `key`.
fn agent(node: &orc_zone::model::NodeId, address: &str, key: u8) -> NodeAgent {
    NodeAgent {
        node_id: node.clone(),
        state: AgentState::Ready,
        joined_at: START,
        product_uuid: String::new(),
        cert_fingerprint: format!("sha256:{key:02x}"),
        previous_fingerprint: None,
        cert_not_after: START.plus_days(30),
        version: "test".into(),
        facts: NodeFacts {
            addresses: vec![InterfaceAddress {
                interface: "eth1".into(),
                cidr: format!("{address}/24"),
            }],
            wireguard_public_key: orc_mesh::PublicKey([key; 32]).to_string(),
            wireguard: "userspace".into(),
            ..NodeFacts::default()
        },
        desired_generation: 1,
        config_digest: String::new(),
        applied_generation: 1,
        apply_error: None,
        last_contact_at: START,
    }
}

fn site(name: &str, prefix: &str, stable: [u8; 4]) -> InventorySite {
    InventorySite {
        site: SiteName::new(name).unwrap(),
        public_ipv4: Some(stable.into()),
        private_prefix: Some(prefix.to_string()),
    }
}

fn report(sites: Vec<InventorySite>, addresses: Vec<PoolAddress>) -> Inventory {
    Inventory {
        nodes: Vec::new(),
        sites,
        pool_addresses: addresses,
    }
}

/// Every agent's mesh config, as bytes of its JSON form.
async fn plan_bytes(store: &Store) -> BTreeMap<String, Vec<u8>> {
    let pass = mesh_pass(store, &MeshOptions::default(), START)
        .await
        .unwrap();
    pass.plan
        .into_iter()
        .map(|(node, config)| (node.to_string(), format!("{config:?}").into_bytes()))
        .collect()
}

/// Attack: a tenant's provider reports, in its inventory, the zone partner's sites under
/// their names with a prefix and stable address of its own choosing, and a second provider
/// of the operator's reports every site, prefix and address the first one has. Before, sites
/// were keyed by provider name, so every project's peers at the partner's site moved to the
/// tenant's address and the partner's gateway was sent the tenant's prefix.
#[tokio::test]
async fn a_providers_reports_change_no_other_projects_or_providers_agent_config() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let cloud = FakeCloud::new();
    let backend = Direct::new(&cloud);
    backend.site_gateways.store(true, Ordering::SeqCst);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);

    // The operator's partner, with nodes of two orgs and the gateway at eu-central-a.
    let partner = operator_provider(&t, "partner").await;
    let beta = t.store.create_org(&name("beta"), START).await.unwrap();
    let app = t
        .store
        .create_project(&beta.id, &name("app"), START)
        .await
        .unwrap();
    let web = create_pool(&t, &partner, "web", 2).await;
    let mut public = spec(&partner);
    public.public = true;
    let shop = t
        .store
        .create_pool(
            &NewPool {
                project_id: app.id.clone(),
                name: name("shop"),
                size: 1,
                spec: public,
            },
            START,
        )
        .await
        .unwrap()
        .pool;
    let mut nodes = Vec::new();
    for pool in [&web, &shop] {
        nodes.extend(
            drive(
                &reconciler,
                &t.store,
                &pool.id,
                4,
                all_in(NodeState::Running),
            )
            .await,
        );
    }
    reconciler.pool_pass().await.unwrap();
    let gateway_pool = t.store.list_pools(&sys_project_id()).await.unwrap();
    assert_eq!(gateway_pool.len(), 1, "{gateway_pool:?}");
    nodes.extend(
        drive(
            &reconciler,
            &t.store,
            &gateway_pool[0].id,
            4,
            all_in(NodeState::Running),
        )
        .await,
    );
    for (i, node) in nodes.iter().enumerate() {
        let n = u8::try_from(i).unwrap() + 10;
        t.store
            .record_node_join(&agent(&node.id, &format!("10.90.1.{n}"), n))
            .await
            .unwrap();
    }
    let partner_sites = vec![
        site("eu-central-a", "10.90.1.0/24", [198, 18, 0, 10]),
        site("eu-central-b", "10.90.2.0/24", [198, 18, 0, 11]),
    ];
    let shop_address = PoolAddress {
        pool: PoolPath::new("beta/app/shop").unwrap(),
        site: SiteName::new("eu-central-a").unwrap(),
        ipv4: [198, 18, 0, 20].into(),
    };
    apply_inventory(
        &t.store,
        &partner,
        &report(partner_sites.clone(), vec![shop_address.clone()]),
        START,
        GRACE,
    )
    .await
    .unwrap();
    let before = plan_bytes(&t.store).await;
    assert_eq!(
        before.len(),
        4,
        "three tenant nodes and the gateway: {before:?}"
    );
    let gateway = &nodes[3].id.to_string();
    assert!(
        String::from_utf8_lossy(&before[gateway]).contains("198.18.0.20"),
        "the gateway forwards the shop's address: {}",
        String::from_utf8_lossy(&before[gateway])
    );

    // The tenant's provider, named like the partner, reports the partner's sites with its
    // own prefixes and addresses, and the shop's address.
    let imposter = tenant_provider(&t, "partner").await;
    let hijack = vec![
        site("eu-central-a", "10.66.0.0/24", [203, 0, 113, 66]),
        site("eu-central-b", "10.66.1.0/24", [203, 0, 113, 67]),
    ];
    let stolen = PoolAddress {
        ipv4: [203, 0, 113, 99].into(),
        ..shop_address.clone()
    };
    apply_inventory(
        &t.store,
        &imposter,
        &report(hijack, vec![stolen]),
        START,
        GRACE,
    )
    .await
    .unwrap();
    // A second provider of the operator reports exactly the partner's sites and addresses.
    let twin = operator_provider(&t, "partner-two").await;
    apply_inventory(
        &t.store,
        &twin,
        &report(partner_sites, vec![shop_address]),
        START,
        GRACE,
    )
    .await
    .unwrap();

    let after = plan_bytes(&t.store).await;
    for (node, config) in &before {
        assert!(
            after.get(node) == Some(config),
            "the config of {node} changed:\n{}\n→\n{}",
            String::from_utf8_lossy(config),
            after
                .get(node)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .unwrap_or_default()
        );
    }
    assert_eq!(after.len(), before.len());
    assert!(
        t.store.provider_sites(&twin.id).await.unwrap().is_empty(),
        "overlapping sites are not recorded"
    );
    let words = events_of(&t.store, &twin, "provider.sites_refused").await;
    assert_eq!(words.len(), 1, "{words:?}");
    assert!(
        words[0].contains("eu-central-a (10.90.1.0/24)")
            && words[0].contains("eu-central-b (10.90.2.0/24)"),
        "{}",
        words[0]
    );
}

/// Registers provider `name` in `project` (the store does it as the hub would on a hello).
async fn register(
    z: &TestZone,
    project: &orc_zone::model::ProjectId,
    name: &str,
    scope: ProviderScope,
) -> Result<Provider, orc_zone::store::StoreError> {
    let now = orc_zone::model::Timestamp::now();
    z.zone
        .store()
        .create_provider(
            &NewProvider {
                project_id: project.clone(),
                name: name.parse().unwrap(),
                resource_uri: format!("urn:orc:test:{name}:{project}"),
                scope,
                pricing: PricingStrategy::None,
            },
            now,
        )
        .await
}

async fn project(z: &TestZone, org: &str, name: &str) -> orc_zone::model::Project {
    z.zone
        .store()
        .project_by_path(&org.parse().unwrap(), &name.parse().unwrap())
        .await
        .unwrap()
}

/// A second project of org `sys`, for the operator's own providers.
async fn tools(z: &TestZone) -> orc_zone::model::Project {
    z.zone
        .store()
        .create_project(
            &orc_zone::model::sys_org_id(),
            &"tools".parse().unwrap(),
            orc_zone::model::Timestamp::now(),
        )
        .await
        .unwrap()
}

/// Attack: a tenant registers a provider under the name of the operator's zone-scoped one,
/// to catch pools meant for it. Names: bare names are the operator's; a tenant's provider
/// reads `<org>/<project>/<name>` everywhere, and a bare name in a request means the
/// operator's first.
#[tokio::test]
async fn a_tenant_cannot_take_a_name_the_operator_uses() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let sys = project(&z, "sys", "sys").await;
    let web = project(&z, "acme", "web").await;
    let operators = register(&z, &sys.id, "cloud", ProviderScope::Zone)
        .await
        .unwrap();
    let tenants = register(&z, &web.id, "cloud", ProviderScope::Project)
        .await
        .unwrap();
    let listed = z.get("/api/orgs/acme/projects/web/providers", &t.mia).await;
    let names: Vec<(String, String)> = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(id, _)| *id == operators.id.to_string() || *id == tenants.id.to_string())
        .collect();
    assert_eq!(
        names,
        [
            (operators.id.to_string(), "cloud".to_string()),
            (tenants.id.to_string(), "acme/web/cloud".to_string()),
        ],
        "one name, one provider"
    );
    let created = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool_on("api", "cloud"),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["provider_id"], operators.id.to_string());
    assert_eq!(created.body["provider"], "cloud");
    let own = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool_on("own", "acme/web/cloud"),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.body);
    assert_eq!(own.body["provider_id"], tenants.id.to_string());
    assert_eq!(own.body["provider"], "acme/web/cloud");
    // Its own project's owner reaches it by its full name; the bare one is the operator's.
    let pricing = z
        .put(
            "/api/orgs/acme/projects/web/providers/cloud/pricing",
            &t.olivia,
            json!({ "markup": "0.5" }),
        )
        .await;
    assert_eq!(pricing.status, StatusCode::FORBIDDEN, "{}", pricing.body);
    assert_eq!(
        pricing.body["error"]["message"],
        "provider cloud belongs to project sys/sys; change it there; this project's own is \
         acme/web/cloud"
    );
    let own_pricing = z
        .put(
            "/api/orgs/acme/projects/web/providers/acme%2Fweb%2Fcloud/pricing",
            &t.olivia,
            json!({ "markup": "0.5" }),
        )
        .await;
    assert_eq!(own_pricing.status, StatusCode::OK, "{}", own_pricing.body);
}

/// Attack: a tenant registers a name first, hoping to keep the operator from it. The
/// operator registers it anyway, and the bare name is the operator's from then on; within
/// org `sys`, bare names stay unique.
#[tokio::test]
async fn a_tenant_cannot_squat_a_name_before_the_operator_registers_it() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let web = project(&z, "acme", "web").await;
    let squat = register(&z, &web.id, "later", ProviderScope::Project)
        .await
        .unwrap();
    let before = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool_on("early", "later"),
        )
        .await;
    assert_eq!(before.status, StatusCode::CREATED, "{}", before.body);
    assert_eq!(before.body["provider_id"], squat.id.to_string());

    let tools = tools(&z).await;
    let late = register(&z, &tools.id, "later", ProviderScope::Zone)
        .await
        .expect("the operator registers a name a tenant holds");
    let sys = project(&z, "sys", "sys").await;
    let again = register(&z, &sys.id, "later", ProviderScope::Project).await;
    assert!(
        matches!(again, Err(orc_zone::store::StoreError::Unique { .. })),
        "bare names are unique across org sys: {again:?}"
    );
    let after = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            pool_on("late", "later"),
        )
        .await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.body);
    assert_eq!(after.body["provider_id"], late.id.to_string());
    assert_eq!(after.body["provider"], "later");
    // The tenant's pool keeps the provider it was created on.
    let early = z
        .get("/api/orgs/acme/projects/web/pools/early", &t.mia)
        .await;
    assert_eq!(early.body["provider_id"], squat.id.to_string());
    assert_eq!(early.body["provider"], "acme/web/later");
}

/// Attack: a tenant registers the name of an operator's project-scoped provider, so that
/// widening it to the zone would clash. Nothing a tenant registers blocks it.
#[tokio::test]
async fn a_tenants_provider_cannot_block_the_operators_change_of_scope() {
    let z = TestZone::start().await;
    let _t = tenancy(&z).await;
    let tools = tools(&z).await;
    let operators = register(&z, &tools.id, "edge", ProviderScope::Project)
        .await
        .unwrap();
    for (org, name) in [("acme", "web"), ("acme", "data")] {
        let p = project(&z, org, name).await;
        let tenants = register(&z, &p.id, "edge", ProviderScope::Project)
            .await
            .unwrap();
        // Even one an operator widened before.
        if name == "data" {
            let widened = z
                .post(
                    "/api/orgs/acme/projects/data/providers/edge/change-scope",
                    &z.admin,
                    json!({ "scope": "zone" }),
                )
                .await;
            assert_eq!(widened.status, StatusCode::OK, "{}", widened.body);
            assert_eq!(widened.body["id"], tenants.id.to_string());
        }
    }
    let widened = z
        .post(
            "/api/orgs/sys/projects/tools/providers/edge/change-scope",
            &z.admin,
            json!({ "scope": "zone" }),
        )
        .await;
    assert_eq!(widened.status, StatusCode::OK, "{}", widened.body);
    assert_eq!(widened.body["id"], operators.id.to_string());
    assert_eq!(widened.body["name"], "edge");
    let listed = z
        .get("/api/orgs/acme/projects/web/providers", &z.admin)
        .await;
    let mut names: Vec<&str> = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .filter(|n| n.ends_with("edge"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["acme/data/edge", "acme/web/edge", "edge"]);
}

/// Attack: a tenant's provider named `core` would have its pools run as app slots on the
/// zone's own hosts, since the zone routed provider `core` to its app supervisor by name.
#[tokio::test]
async fn a_tenant_provider_named_core_is_not_the_zones_core() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let imposter = tenant_provider(&t, "core").await;
    assert!(!imposter.is_core());
    let core = t
        .store
        .create_provider(
            &NewProvider {
                project_id: sys_project_id(),
                name: name("core"),
                resource_uri: "urn:orc:core".into(),
                scope: ProviderScope::Zone,
                pricing: PricingStrategy::None,
            },
            START,
        )
        .await
        .unwrap();
    assert!(core.is_core());

    // Routed to the remote backend (a fake cloud), never to the app supervisor.
    let remote = FakeCloud::new();
    let apps = FakeCloud::new();
    let backends = Backends::new(
        Arc::try_unwrap(Direct::new(&remote)).ok().unwrap(),
        Arc::try_unwrap(Direct::new(&apps)).ok().unwrap(),
    );
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, backends, &clock);
    let pool = create_pool(&t, &imposter, "slots", 1).await;
    drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(remote.instances().len(), 1);
    assert!(
        apps.instances().is_empty(),
        "nothing ran on the zone's hosts"
    );
}
