//! The cases of the store suite, each an async fn over a [`TestDb`], engine-agnostic.

use std::collections::BTreeMap;

use orc_common::{Architecture, Currency, Money, Period, RefusalKind, Shape};
use orc_zone_model::registry::{
    AppManifest, AppPackage, BinaryRef, Digest, PackageDocument, Platform,
};
use orc_zone_model::{
    AppSpec, Endpoint, EventScope, Expected, Markup, Month, Name, NewPool, NewProvider, NewUsage,
    Node, NodeId, NodeState, NodeStatus, PoolSpec, PricingStrategy, Project, ProviderId,
    ProviderScope, Role, SensitiveParams, Timestamp, TokenSecret, sys_org_id, sys_project_id,
};
use orc_zone_store::{
    Kind, SCHEMA_VERSION, SecretName, SecretRecord, StatusWrite, Store, StoreError,
};
use rust_decimal::Decimal;
use sqlx::Row;

use crate::harness::TestDb;

const T0: Timestamp = Timestamp(1_767_225_600_000);

fn name(s: &str) -> Name {
    s.parse().expect("valid name")
}

fn dec(s: &str) -> Decimal {
    s.parse().expect("decimal")
}

fn shape() -> Shape {
    Shape {
        vcpus: 2,
        memory_gib: 4,
        arch: Architecture::X86_64,
        disks_gib: vec![],
    }
}

fn spec(provider_id: &ProviderId) -> PoolSpec {
    PoolSpec {
        provider_id: provider_id.clone(),
        shape: shape(),
        region_class: "eu-central".parse().unwrap(),
        os: "debian-12".parse().unwrap(),
        public: false,
        endpoints: vec![],
        app: None,
        placement: Default::default(),
        ssh_keys: Vec::new(),
    }
}

/// An org `acme`, project `acme/web` and a provider `cloud` in it.
async fn tenant(store: &Store) -> (Project, ProviderId) {
    let org = store.create_org(&name("acme"), T0).await.unwrap();
    let project = store
        .create_project(&org.id, &name("web"), T0)
        .await
        .unwrap();
    let provider = store
        .create_provider(
            &NewProvider {
                project_id: project.id.clone(),
                name: name("cloud"),
                resource_uri: "urn:orc:test:cloud".to_string(),
                scope: ProviderScope::Project,
                pricing: PricingStrategy::None,
            },
            T0,
        )
        .await
        .unwrap();
    (project, provider.id)
}

async fn pool_of(
    store: &Store,
    project: &Project,
    provider: &ProviderId,
    n: &str,
    size: u32,
) -> Vec<Node> {
    store
        .create_pool(
            &NewPool {
                project_id: project.id.clone(),
                name: name(n),
                size,
                spec: spec(provider),
            },
            T0,
        )
        .await
        .unwrap()
        .created
}

/// Inserts an empty pool as the builds of schemas 4 to 9 wrote it: raw SQL, because this
/// build's pool and node rows have columns those schemas lack.
/// A provider row as the schema of an older build wrote it (before providers knew their org).
async fn old_provider(
    db: &TestDb,
    store: &Store,
    project: &orc_zone_model::ProjectId,
    provider_name: &str,
    scope: &str,
) -> ProviderId {
    let id = ProviderId::from_counter(store.allocate_ids(1).await.unwrap());
    let mut raw = db.raw().await;
    sqlx::query(
        "INSERT INTO providers (id, project_id, name, resource_uri, scope, markup, created_at, \
         updated_at) VALUES ($1, $2, $3, $4, $5, NULL, $6, $6)",
    )
    .bind(id.as_str())
    .bind(project.as_str())
    .bind(provider_name)
    .bind(format!("urn:orc:test:{id}"))
    .bind(scope)
    .bind(T0.millis())
    .execute(&mut raw)
    .await
    .unwrap();
    id
}

async fn old_pool(
    db: &TestDb,
    store: &Store,
    project: &orc_zone_model::ProjectId,
    provider: &ProviderId,
    pool_name: &str,
    os: &str,
) -> orc_zone_model::PoolId {
    let id = orc_zone_model::PoolId::from_counter(store.allocate_ids(1).await.unwrap());
    let mut raw = db.raw().await;
    sqlx::query(
        "INSERT INTO pools (id, project_id, name, provider_id, size, vcpus, memory_gib, arch, \
         disks_gib, region_class, os, public, endpoints, app, app_params, \
         app_sensitive_params, generation, deleting, created_at, updated_at) VALUES ($1, $2, \
         $3, $4, 0, 2, 4, 'x86_64', '', 'eu-central', $5, 0, '[]', NULL, '{}', '{}', 1, 0, \
         $6, $6)",
    )
    .bind(id.as_str())
    .bind(project.as_str())
    .bind(pool_name)
    .bind(provider.as_str())
    .bind(os)
    .bind(T0.millis())
    .execute(&mut raw)
    .await
    .unwrap();
    id
}

fn running(node: &Node) -> NodeStatus {
    NodeStatus {
        state: NodeState::Running,
        site: Some("eu-central-a".to_string()),
        instance_ref: Some("i-1".to_string()),
        placed: Some(orc_zone_model::Whereabouts {
            cloud: "hetzner".to_string(),
            location: "fsn1".to_string(),
            plan: "cx22".to_string(),
        }),
        addresses: vec!["10.0.0.2".to_string()],
        next_attempt_at: None,
        ..node.status.clone()
    }
}

pub async fn migrations_are_idempotent(db: &TestDb) {
    let store = db.bare().await;
    assert_eq!(store.schema_version().await.unwrap(), None);
    store.migrate().await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    store.migrate().await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    store.bootstrap(T0).await.unwrap();
    store.bootstrap(T0.plus_millis(5)).await.unwrap();
    store.close().await;

    // Opening again (migrate + bootstrap) changes nothing either.
    let store = db.store().await;
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    let orgs = store.list_orgs().await.unwrap();
    assert_eq!(orgs.len(), 1);
    assert_eq!(orgs[0].id, sys_org_id());
    assert_eq!(orgs[0].name.as_str(), "sys");
    assert_eq!(orgs[0].created_at, T0);
    let sys = store
        .project_by_path(&name("sys"), &name("sys"))
        .await
        .unwrap();
    assert_eq!(sys.id, sys_project_id());
    assert_eq!(sys.org_id, sys_org_id());
    // The counter starts after the bootstrap ids.
    let org = store.create_org(&name("acme"), T0).await.unwrap();
    assert_eq!(org.id.as_str(), "o-000000000003");
}

pub async fn migrations_move_an_older_database_forward(db: &TestDb) {
    let store = db.bare().await;
    store.migrate_to(1).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), Some(1));
    let org = store.create_org(&name("early"), T0).await.unwrap();
    let project = store
        .create_project(&org.id, &name("first"), T0)
        .await
        .unwrap();
    // Tables of later migrations do not exist yet.
    assert!(store.list_providers().await.is_err());
    store.close().await;

    let store = db.store().await;
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    assert_eq!(store.get_org(&org.id).await.unwrap(), org);
    assert_eq!(store.get_project(&project.id).await.unwrap(), project);
    let provider = store
        .create_provider(
            &NewProvider {
                project_id: project.id.clone(),
                name: name("cloud"),
                resource_uri: "urn:orc:test:later".to_string(),
                scope: ProviderScope::Zone,
                pricing: PricingStrategy::None,
            },
            T0,
        )
        .await
        .unwrap();
    assert!(provider.id > ProviderId::from_counter(0));
    assert_eq!(store.list_orgs().await.unwrap().len(), 2);
}

pub async fn migrations_name_gateway_pools_after_their_provider(db: &TestDb) {
    let store = db.bare().await;
    store.migrate_to(4).await.unwrap();
    store.bootstrap(T0).await.unwrap();
    assert_eq!(
        sys_project_id().as_str(),
        "p-000000000002",
        "the id 0005 names"
    );
    let sys = sys_project_id();
    let provider = old_provider(db, &store, &sys, "partner", "zone").await;
    let legacy = old_pool(db, &store, &sys, &provider, "gw-eu-central-a", "gateway").await;
    let long_site = format!("gw-{}", "s".repeat(54));
    let too_long = old_pool(db, &store, &sys, &provider, &long_site, "gateway").await;
    let operators = old_pool(db, &store, &sys, &provider, "gw-tools", "debian-12").await;
    store.close().await;

    let store = db.store().await;
    let renamed = store.get_pool(&legacy).await.unwrap();
    assert_eq!(
        renamed.name.as_str(),
        format!("gw-{provider}-eu-central-a"),
        "0005 names it after the provider's name, 0017 after its id"
    );
    assert_eq!(
        store.get_pool(&too_long).await.unwrap().name.as_str(),
        long_site,
        "a name that would be too long stays"
    );
    assert_eq!(
        store.get_pool(&operators).await.unwrap().name.as_str(),
        "gw-tools",
        "a sys pool that is no gateway keeps its name"
    );
}

pub async fn migrations_keep_refusals_and_take_unplaceable(db: &TestDb) {
    let store = db.bare().await;
    store.migrate_to(8).await.unwrap();
    store.bootstrap(T0).await.unwrap();
    let org = store.create_org(&name("acme"), T0).await.unwrap();
    let project = store
        .create_project(&org.id, &name("web"), T0)
        .await
        .unwrap();
    let provider = old_provider(db, &store, &project.id, "cloud", "project").await;
    let pool_id = old_pool(db, &store, &project.id, &provider, "web", "debian-12").await;
    let node = NodeId::from_counter(store.allocate_ids(1).await.unwrap());
    // Schema 8's node row, written as that schema's build wrote it.
    let mut raw = db.raw().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO nodes (id, pool_id, slot, state, state_words, refusal, addresses, \
         attempts, version, created_at, updated_at) VALUES ('{node}', '{pool_id}', 0, \
         'parked', 'needs the operator', 'operator_fix', '[]', 0, 2, {t}, {t})",
        t = T0.millis()
    )))
    .execute(&mut raw)
    .await
    .unwrap();
    let refused = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE nodes SET refusal = 'unplaceable' WHERE id = '{node}'"
    )))
    .execute(&mut raw)
    .await;
    assert!(refused.is_err(), "schema 8 has no unplaceable refusals");
    drop(raw);
    store.close().await;

    let store = db.store().await;
    let kept = store.get_node(&node).await.unwrap();
    assert_eq!(kept.status.state, NodeState::Parked);
    assert_eq!(
        kept.status.refusal,
        Some(RefusalKind::OperatorFix),
        "the refusal survives the column's replacement"
    );
    assert_eq!(
        kept.status.state_words.as_deref(),
        Some("needs the operator")
    );
    let unplaceable = NodeStatus {
        refusal: Some(RefusalKind::Unplaceable),
        ..kept.status.clone()
    };
    let written = store
        .update_node_state(&node, Expected::Version(2), &unplaceable, T0)
        .await
        .unwrap();
    assert_eq!(written.status.refusal, Some(RefusalKind::Unplaceable));
    assert_eq!(
        store.get_node(&node).await.unwrap().status.refusal,
        Some(RefusalKind::Unplaceable)
    );
}

pub async fn tenancy_crud(db: &TestDb) {
    let store = db.store().await;
    let zeta = store.create_org(&name("zeta"), T0).await.unwrap();
    let acme = store.create_org(&name("acme"), T0).await.unwrap();
    assert!(acme.id > zeta.id, "ids increase in creation order");
    let names: Vec<String> = store
        .list_orgs()
        .await
        .unwrap()
        .iter()
        .map(|o| o.name.to_string())
        .collect();
    assert_eq!(names, ["acme", "sys", "zeta"]);
    assert_eq!(store.get_org(&acme.id).await.unwrap(), acme);
    assert_eq!(store.org_by_name(&name("acme")).await.unwrap(), acme);

    let web = store
        .create_project(&acme.id, &name("web"), T0)
        .await
        .unwrap();
    let api = store
        .create_project(&acme.id, &name("api"), T0)
        .await
        .unwrap();
    let listed = store.list_projects(&acme.id).await.unwrap();
    assert_eq!(listed, vec![api.clone(), web.clone()]);
    assert_eq!(
        store
            .project_by_path(&name("acme"), &name("web"))
            .await
            .unwrap(),
        web
    );

    let ann = store.create_user(&name("ann"), T0).await.unwrap();
    let bob = store.create_user(&name("bob"), T0).await.unwrap();
    assert_eq!(store.get_user(&ann.id).await.unwrap(), ann);
    assert_eq!(store.user_by_name(&name("bob")).await.unwrap(), bob);
    assert_eq!(
        store.list_users().await.unwrap(),
        vec![ann.clone(), bob.clone()]
    );

    let owner = store
        .add_membership(&ann.id, &acme.id, None, Role::Owner, T0)
        .await
        .unwrap();
    let viewer = store
        .add_membership(&bob.id, &acme.id, Some(&web.id), Role::Viewer, T0)
        .await
        .unwrap();
    // A user may hold an org role and a project role at once.
    let member = store
        .add_membership(&ann.id, &acme.id, Some(&api.id), Role::Member, T0)
        .await
        .unwrap();
    assert_eq!(
        store.list_memberships_of_org(&acme.id).await.unwrap(),
        vec![owner.clone(), viewer.clone(), member.clone()]
    );
    assert_eq!(
        store.list_memberships_of_user(&ann.id).await.unwrap(),
        vec![owner.clone(), member.clone()]
    );
    store.remove_membership(&viewer.id).await.unwrap();
    assert!(
        store
            .list_memberships_of_user(&bob.id)
            .await
            .unwrap()
            .is_empty()
    );

    // A project of another org is refused as a membership scope.
    let other = store.create_org(&name("other"), T0).await.unwrap();
    let err = store
        .add_membership(&bob.id, &other.id, Some(&web.id), Role::Member, T0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Reference {
                kind: Kind::Membership,
                ..
            }
        ),
        "{err}"
    );

    let missing = orc_zone_model::OrgId::from_counter(999);
    let err = store.get_org(&missing).await.unwrap_err();
    assert_eq!(err.to_string(), "org o-0000000000z7 not found");
    let err = store
        .project_by_path(&name("acme"), &name("nope"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "project acme/nope not found");
    let err = store
        .create_project(&missing, &name("x"), T0)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "project refers to a missing org o-0000000000z7"
    );
}

pub async fn unique_violations_name_the_field(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;

    let err = store.create_org(&name("acme"), T0).await.unwrap_err();
    assert!(matches!(
        err,
        StoreError::Unique {
            kind: Kind::Org,
            field: "name",
            ..
        }
    ));
    assert_eq!(err.to_string(), "org name \"acme\" is already used");

    let err = store
        .create_project(&project.org_id, &name("web"), T0)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "project name \"web\" is already used in org {}",
            project.org_id
        )
    );
    // The same project name in another org is fine.
    let other = store.create_org(&name("other"), T0).await.unwrap();
    store
        .create_project(&other.id, &name("web"), T0)
        .await
        .unwrap();

    store.create_user(&name("ann"), T0).await.unwrap();
    let err = store.create_user(&name("ann"), T0).await.unwrap_err();
    assert_eq!(err.to_string(), "user name \"ann\" is already used");

    let twin = NewProvider {
        project_id: project.id.clone(),
        name: name("cloud"),
        resource_uri: "urn:orc:test:other".to_string(),
        scope: ProviderScope::Project,
        pricing: PricingStrategy::None,
    };
    let err = store.create_provider(&twin, T0).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "provider name \"cloud\" is already used in project {}",
            project.id
        )
    );
    let same_resource = NewProvider {
        name: name("cloud2"),
        resource_uri: "urn:orc:test:cloud".to_string(),
        ..twin
    };
    let err = store.create_provider(&same_resource, T0).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Unique {
                field: "resource URI",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "provider resource URI \"urn:orc:test:cloud\" is already used"
    );

    pool_of(&store, &project, &provider, "db", 1).await;
    let err = store
        .create_pool(
            &NewPool {
                project_id: project.id.clone(),
                name: name("db"),
                size: 2,
                spec: spec(&provider),
            },
            T0,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("pool name \"db\" is already used in project {}", project.id)
    );
    assert!(!err.is_retryable());
    // The failed create left no nodes behind.
    let pools = store.list_pools(&project.id).await.unwrap();
    assert_eq!(pools.len(), 1);
    assert_eq!(
        store
            .list_nodes_by_pool(&pools[0].id, true)
            .await
            .unwrap()
            .len(),
        1
    );

    let user = store.user_by_name(&name("ann")).await.unwrap();
    store
        .add_membership(&user.id, &project.org_id, None, Role::Member, T0)
        .await
        .unwrap();
    let err = store
        .add_membership(&user.id, &project.org_id, None, Role::Owner, T0)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "membership scope \"{}\" is already used in org {}",
            user.id, project.org_id
        )
    );
}

pub async fn database_errors_name_their_operation(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    store.close().await;

    let operation_of = |err: StoreError| {
        assert!(err.is_retryable(), "{err:?}");
        match err {
            StoreError::Database { operation, source } => {
                assert!(matches!(source, sqlx::Error::PoolClosed), "{source:?}");
                operation
            }
            other => panic!("expected a database error, got {other:?}"),
        }
    };
    let err = store.list_orgs().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "list orgs: the store's database call failed"
    );
    assert_eq!(operation_of(err), "list orgs");
    let err = store.nodes_due(T0, 10).await.unwrap_err();
    assert_eq!(operation_of(err), "read due nodes");
    let new_pool = NewPool {
        project_id: project.id.clone(),
        name: name("web"),
        size: 1,
        spec: spec(&provider),
    };
    let err = store.create_pool(&new_pool, T0).await.unwrap_err();
    assert_eq!(operation_of(err), "create pool");
}

pub async fn tokens_are_stored_as_hashes(db: &TestDb) {
    let store = db.store().await;
    let ann = store.create_user(&name("ann"), T0).await.unwrap();
    let (token, secret) = store
        .create_token(&ann.id, "laptop", None, None, T0)
        .await
        .unwrap();
    let (expiring, expiring_secret) = store
        .create_token(&ann.id, "ci", Some(T0.plus_millis(1_000)), None, T0)
        .await
        .unwrap();
    assert_eq!(token.hash, secret.hash());

    let found = store.authenticate_token(&secret, T0).await.unwrap();
    assert_eq!(found.as_ref(), Some(&token));
    let wrong = TokenSecret::from_presented("orc_not-a-token".to_string());
    assert_eq!(store.authenticate_token(&wrong, T0).await.unwrap(), None);
    assert!(
        store
            .authenticate_token(&expiring_secret, T0)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store
            .authenticate_token(&expiring_secret, T0.plus_millis(1_000))
            .await
            .unwrap(),
        None
    );

    // The database holds the hash, never the value.
    let mut raw = db.raw().await;
    let rows = sqlx::query("SELECT secret_sha256 FROM api_tokens ORDER BY id")
        .fetch_all(&mut raw)
        .await
        .unwrap();
    let stored: Vec<String> = rows.iter().map(|r| r.get::<String, _>(0)).collect();
    assert_eq!(
        stored,
        vec![secret.hash().to_hex(), expiring_secret.hash().to_hex()]
    );
    assert!(stored.iter().all(|s| !s.contains(&secret.expose()[4..])));

    let revoked = store
        .revoke_token(&token.id, T0.plus_millis(10))
        .await
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(T0.plus_millis(10)));
    let again = store
        .revoke_token(&token.id, T0.plus_millis(20))
        .await
        .unwrap();
    assert_eq!(again.revoked_at, Some(T0.plus_millis(10)));
    assert_eq!(store.authenticate_token(&secret, T0).await.unwrap(), None);
    let listed = store.list_tokens(&ann.id).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| &t.id).collect::<Vec<_>>(),
        [&token.id, &expiring.id]
    );
    let missing = orc_zone_model::TokenId::from_counter(4242);
    let err = store.revoke_token(&missing, T0).await.unwrap_err();
    assert_eq!(err.to_string(), format!("API token {missing} not found"));
}

pub async fn deletes_take_only_empty_tenancy(db: &TestDb) {
    let store = db.store().await;
    let (web, provider) = tenant(&store).await;
    let ann = store.create_user(&name("ann"), T0).await.unwrap();
    store
        .add_membership(&ann.id, &web.org_id, Some(&web.id), Role::Member, T0)
        .await
        .unwrap();
    let (token, secret) = store
        .create_token(&ann.id, "laptop", None, Some(&web.id), T0)
        .await
        .unwrap();
    assert_eq!(token.default_project.as_ref(), Some(&web.id));
    let found = store
        .authenticate_token(&secret, T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.default_project.as_ref(), Some(&web.id));

    // A project with a provider (and a pool) is not empty; an org with a project neither.
    pool_of(&store, &web, &provider, "db", 1).await;
    let err = store.delete_project(&web.id).await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with("it still holds 1 pool(s) and 1 provider(s)"),
        "{err}"
    );
    let err = store.delete_org(&web.org_id).await.unwrap_err();
    assert!(
        err.to_string().ends_with("it still holds 1 project(s)"),
        "{err}"
    );

    // An empty project goes with its memberships, and tokens that named it name nothing.
    let empty = store
        .create_project(&web.org_id, &name("spare"), T0)
        .await
        .unwrap();
    store
        .add_membership(&ann.id, &web.org_id, Some(&empty.id), Role::Viewer, T0)
        .await
        .unwrap();
    let (spare_token, _) = store
        .create_token(&ann.id, "spare", None, Some(&empty.id), T0)
        .await
        .unwrap();
    store.delete_project(&empty.id).await.unwrap();
    assert!(matches!(
        store.get_project(&empty.id).await,
        Err(StoreError::NotFound { .. })
    ));
    let left: Vec<_> = store
        .list_memberships_of_user(&ann.id)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.project_id)
        .collect();
    assert_eq!(left, [Some(web.id.clone())]);
    let spare_token = store.get_token(&spare_token.id).await.unwrap();
    assert_eq!(spare_token.default_project, None);
    assert!(matches!(
        store.delete_project(&empty.id).await,
        Err(StoreError::NotFound { .. })
    ));

    // An empty org goes with its org-wide memberships.
    let solo = store.create_org(&name("solo"), T0).await.unwrap();
    store
        .add_membership(&ann.id, &solo.id, None, Role::Owner, T0)
        .await
        .unwrap();
    store.delete_org(&solo.id).await.unwrap();
    assert!(matches!(
        store.org_by_name(&name("solo")).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        store.list_memberships_of_user(&ann.id).await.unwrap().len(),
        1
    );

    // A deleted user's tokens stop working at once, and their memberships are gone.
    store.delete_user(&ann.id).await.unwrap();
    assert_eq!(store.authenticate_token(&secret, T0).await.unwrap(), None);
    assert!(
        store
            .list_memberships_of_org(&web.org_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.delete_user(&ann.id).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn providers_crud(db: &TestDb) {
    let store = db.store().await;
    let (project, provider_id) = tenant(&store).await;
    let provider = store.get_provider(&provider_id).await.unwrap();
    assert_eq!(provider.pricing, PricingStrategy::None);
    assert_eq!(provider.scope, ProviderScope::Project);
    assert_eq!(
        store
            .provider_by_resource("urn:orc:test:cloud")
            .await
            .unwrap(),
        provider
    );

    let partner = store
        .create_provider(
            &NewProvider {
                project_id: sys_project_id(),
                name: name("partner"),
                resource_uri: "urn:orc:partner:p1".to_string(),
                scope: ProviderScope::Project,
                pricing: PricingStrategy::Markup(Markup::new(dec("0.15")).unwrap()),
            },
            T0,
        )
        .await
        .unwrap();
    // A project sees its own providers and zone-scoped ones.
    let visible = store.list_providers_for(&project.id).await.unwrap();
    assert_eq!(visible, vec![provider.clone()]);
    let zoned = store
        .set_provider_scope(&partner.id, ProviderScope::Zone, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(zoned.scope, ProviderScope::Zone);
    assert_eq!(zoned.updated_at, T0.plus_millis(1));
    let visible = store.list_providers_for(&project.id).await.unwrap();
    assert_eq!(visible, vec![provider.clone(), zoned.clone()]);

    let zero = PricingStrategy::Markup(Markup::new(Decimal::ZERO).unwrap());
    let priced = store
        .set_provider_pricing(&provider.id, zero, T0)
        .await
        .unwrap();
    assert_eq!(store.get_provider(&provider.id).await.unwrap(), priced);
    assert_eq!(priced.pricing, zero);
    let unpriced = store
        .set_provider_pricing(&provider.id, PricingStrategy::None, T0)
        .await
        .unwrap();
    assert_eq!(unpriced.pricing, PricingStrategy::None);
    assert_eq!(store.list_providers().await.unwrap().len(), 2);

    let missing = ProviderId::from_counter(777);
    let err = store
        .set_provider_scope(&missing, ProviderScope::Zone, T0)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), format!("provider {missing} not found"));
}

pub async fn pools_crud_and_resize(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let mut params = BTreeMap::new();
    params.insert("region".to_string(), "eu".to_string());
    let mut secrets = BTreeMap::new();
    secrets.insert("api_key".to_string(), "k-123".to_string());
    let spec = PoolSpec {
        shape: Shape {
            vcpus: 4,
            memory_gib: 8,
            arch: Architecture::Arm64,
            disks_gib: vec![50, 100],
        },
        public: true,
        endpoints: vec![Endpoint {
            name: "http".to_string(),
            protocol: "http".to_string(),
            port: 8080,
        }],
        app: Some(AppSpec {
            package: "sys/partner:1.0".to_string(),
            digest: Some(Digest::of(b"the partner's package")),
            params,
            sensitive: SensitiveParams(secrets),
        }),
        ssh_keys: vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop".to_string()],
        ..spec(&provider)
    };
    let change = store
        .create_pool(
            &NewPool {
                project_id: project.id.clone(),
                name: name("app"),
                size: 3,
                spec: spec.clone(),
            },
            T0,
        )
        .await
        .unwrap();
    let pool = change.pool;
    assert_eq!(pool.generation, 1);
    assert_eq!(
        change.created.iter().map(|n| n.slot).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(
        change
            .created
            .iter()
            .all(|n| n.status == NodeStatus::pending(T0) && n.version == 1)
    );
    assert!(change.released.is_empty());
    assert_eq!(store.get_pool(&pool.id).await.unwrap(), pool);
    assert_eq!(
        store
            .pool_by_path(&name("acme"), &name("web"), &name("app"))
            .await
            .unwrap(),
        pool
    );
    let stored = store.get_pool(&pool.id).await.unwrap();
    assert_eq!(stored.spec, spec);
    let shown = format!("{stored:?}");
    assert!(!shown.contains("k-123"), "sensitive param shown: {shown}");

    let nodes = store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    assert_eq!(nodes, change.created);
    assert_eq!(store.get_node(&nodes[1].id).await.unwrap(), nodes[1]);

    let grown = store
        .resize_pool(&pool.id, 5, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(grown.pool.size, 5);
    assert_eq!(
        grown.created.iter().map(|n| n.slot).collect::<Vec<_>>(),
        [3, 4]
    );
    let shrunk = store
        .resize_pool(&pool.id, 2, T0.plus_millis(2))
        .await
        .unwrap();
    assert!(shrunk.created.is_empty());
    assert_eq!(shrunk.released.len(), 3);
    let after = store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    let states: Vec<(u32, NodeState)> = after.iter().map(|n| (n.slot, n.status.state)).collect();
    assert_eq!(
        states,
        [
            (0, NodeState::Pending),
            (1, NodeState::Pending),
            (2, NodeState::Destroying),
            (3, NodeState::Destroying),
            (4, NodeState::Destroying),
        ]
    );

    // An ended node frees its slot for a replacement.
    let first = &after[0];
    store
        .end_node(
            &first.id,
            Expected::Version(first.version),
            None,
            T0.plus_millis(3),
        )
        .await
        .unwrap();
    let refilled = store
        .resize_pool(&pool.id, 2, T0.plus_millis(4))
        .await
        .unwrap();
    assert_eq!(refilled.created.len(), 1);
    assert_eq!(refilled.created[0].slot, 0);
    assert_ne!(refilled.created[0].id, first.id);
    assert_eq!(
        store
            .list_nodes_by_pool(&pool.id, true)
            .await
            .unwrap()
            .len(),
        6
    );

    let other = pool_of(&store, &project, &provider, "batch", 0).await;
    assert!(other.is_empty());
    let names: Vec<String> = store
        .list_pools(&project.id)
        .await
        .unwrap()
        .iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(names, ["app", "batch"]);
    assert_eq!(store.list_all_pools().await.unwrap().len(), 2);

    let err = store.delete_pool(&pool.id).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "pool {}: mark the pool deleting before deleting it",
            pool.id
        )
    );
    // Deleting: size 0, every live node destroying; the row goes once all nodes ended.
    let deleting = store
        .mark_pool_deleting(&pool.id, T0.plus_millis(5))
        .await
        .unwrap();
    assert!(deleting.pool.deleting);
    let err = store.resize_pool(&pool.id, 3, T0).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                kind: Kind::Pool,
                ..
            }
        ),
        "{err}"
    );
    let err = store.delete_pool(&pool.id).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("pool {}: 5 node(s) are not ended yet", pool.id)
    );
    for node in store.list_nodes_by_pool(&pool.id, false).await.unwrap() {
        assert_eq!(node.status.state, NodeState::Destroying);
        store
            .end_node(
                &node.id,
                Expected::State(NodeState::Destroying),
                None,
                T0.plus_millis(6),
            )
            .await
            .unwrap();
    }
    store.delete_pool(&pool.id).await.unwrap();
    let err = store.get_pool(&pool.id).await.unwrap_err();
    assert_eq!(err.to_string(), format!("pool {} not found", pool.id));
}

pub async fn pool_reconfigure_is_compare_and_set(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    pool_of(&store, &project, &provider, "web", 1).await;
    let pool = store.list_pools(&project.id).await.unwrap().remove(0);
    let mut new_spec = pool.spec.clone();
    new_spec.os = "ubuntu-24.04".parse().unwrap();
    let updated = store
        .reconfigure_pool(&pool.id, 1, &new_spec, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(updated.generation, 2);
    assert_eq!(updated.spec.os, "ubuntu-24.04");
    let err = store
        .reconfigure_pool(&pool.id, 1, &pool.spec, T0.plus_millis(2))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "pool {} was changed concurrently (expected generation 1, found generation 2)",
            pool.id
        )
    );
    assert_eq!(store.get_pool(&pool.id).await.unwrap(), updated);
}

pub async fn node_writes_are_compare_and_set(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);

    let quoting = NodeStatus {
        state: NodeState::Quoting,
        state_words: Some("No capacity in this region right now.".to_string()),
        refusal: Some(RefusalKind::NoCapacity),
        quote_token: Some("q-1".to_string()),
        attempts: 1,
        next_attempt_at: Some(T0.plus_millis(5_000)),
        ..node.status.clone()
    };
    let v2 = store
        .update_node_state(&node.id, Expected::Version(1), &quoting, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(v2.status, quoting);
    assert_eq!(v2.updated_at, T0.plus_millis(1));
    assert_eq!(v2.created_at, T0);

    // A writer that read version 1 is refused and changes nothing.
    let stale = running(&node);
    let err = store
        .update_node_state(&node.id, Expected::Version(1), &stale, T0.plus_millis(2))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "node {} was changed concurrently (expected version 1, found version 2)",
            node.id
        )
    );
    assert_eq!(store.get_node(&node.id).await.unwrap(), v2);

    let err = store
        .update_node_state(
            &node.id,
            Expected::State(NodeState::Pending),
            &stale,
            T0.plus_millis(2),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                kind: Kind::Node,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with("(expected state pending, found state quoting)"),
        "{err}"
    );

    let v3 = store
        .update_node_state(&node.id, Expected::State(NodeState::Quoting), &stale, T0)
        .await
        .unwrap();
    assert_eq!(v3.version, 3);
    assert_eq!(v3.status.state, NodeState::Running);

    let missing = NodeId::from_counter(9_999);
    let err = store
        .update_node_state(&missing, Expected::Version(1), &stale, T0)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), format!("node {missing} not found"));

    // A status that breaks an invariant is refused before anything is written.
    let bad = NodeStatus {
        state: NodeState::Ended,
        ended_at: None,
        ..stale.clone()
    };
    let err = store
        .update_node_state(&node.id, Expected::Version(3), &bad, T0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                kind: Kind::Node,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.get_node(&node.id).await.unwrap(), v3);
}

pub async fn due_nodes_come_in_order(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 6).await;
    // slot: due offset (None = nothing due)
    let plan = [Some(30), Some(10), None, Some(10), Some(99_000), Some(0)];
    for (node, offset) in nodes.iter().zip(plan) {
        let status = NodeStatus {
            next_attempt_at: offset.map(|ms| T0.plus_millis(ms)),
            ..node.status.clone()
        };
        store
            .update_node_state(&node.id, Expected::Version(1), &status, T0)
            .await
            .unwrap();
    }
    let due = store.nodes_due(T0.plus_millis(30), 100).await.unwrap();
    let slots: Vec<u32> = due.iter().map(|n| n.slot).collect();
    // By time, ties (slots 1 and 3 at +10) by id; slot 2 (none) and 4 (future) excluded.
    assert_eq!(slots, [5, 1, 3, 0]);
    let limited = store.nodes_due(T0.plus_millis(30), 2).await.unwrap();
    assert_eq!(limited.iter().map(|n| n.slot).collect::<Vec<_>>(), [5, 1]);
    assert!(
        store
            .nodes_due(T0.plus_millis(-1), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn batch_writes_apply_or_refuse_each_node(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    // More nodes than one statement takes, so several chunks run.
    let nodes = pool_of(&store, &project, &provider, "big", 1_203).await;
    let mut writes: Vec<StatusWrite> = nodes
        .iter()
        .map(|node| StatusWrite {
            id: node.id.clone(),
            expected: Expected::Version(node.version),
            status: NodeStatus {
                state: NodeState::Quoting,
                attempts: 1,
                next_attempt_at: Some(T0.plus_millis(i64::from(node.slot))),
                ..node.status.clone()
            },
        })
        .collect();
    writes[7].expected = Expected::Version(5);
    writes[900].expected = Expected::State(NodeState::Running);
    let ghost = NodeId::from_counter(1 << 40);
    writes.push(StatusWrite {
        id: ghost.clone(),
        expected: Expected::Version(1),
        status: NodeStatus::pending(T0),
    });
    let outcome = store
        .update_node_states(&writes, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(outcome.updated.len(), 1_201);
    assert!(outcome.updated.windows(2).all(|w| w[0].id < w[1].id));
    assert!(
        outcome
            .updated
            .iter()
            .all(|n| n.version == 2 && n.status.state == NodeState::Quoting)
    );
    let refused: Vec<String> = outcome.refused.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        refused,
        [
            format!(
                "node {} was changed concurrently (expected version 5, found version 1)",
                nodes[7].id
            ),
            format!(
                "node {} was changed concurrently (expected state running, found state pending)",
                nodes[900].id
            ),
            format!("node {ghost} not found"),
        ]
    );
    assert_eq!(store.get_node(&nodes[7].id).await.unwrap(), nodes[7]);
    let due = store.nodes_due(T0.plus_millis(2_000), 5_000).await.unwrap();
    assert_eq!(due.len(), 1_203);

    // A batch naming one node twice is refused whole.
    let twice = vec![writes[0].clone(), writes[0].clone()];
    let err = store.update_node_states(&twice, T0).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("node {}: written twice in one batch", nodes[0].id)
    );
    assert_eq!(store.get_node(&nodes[0].id).await.unwrap().version, 2);
}

pub async fn failed_transactions_leave_nothing_half_written(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);
    let node = store
        .update_node_state(&node.id, Expected::Version(1), &running(&node), T0)
        .await
        .unwrap();
    let month: Month = "2026-01".parse().unwrap();
    let usage = |rate: &str| NewUsage {
        project_id: project.id.clone(),
        month: month.clone(),
        pool_id: Some(node.pool_id.clone()),
        node_id: Some(node.id.clone()),
        description: "2 vCPU · 4 GiB · eu-central".to_string(),
        hours: dec("1"),
        rate: Money::new(dec(rate), Currency::USD, Period::Hour),
        amount: dec(rate),
    };
    store.record_usage(&usage("0.0088"), T0).await.unwrap();

    // Ending the node writes the node, then fails on the usage line (another rate): the
    // whole transaction rolls back and the node is still running.
    let err = store
        .end_node(
            &node.id,
            Expected::Version(node.version),
            Some(&usage("0.0100")),
            T0,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                kind: Kind::UsageLine,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.get_node(&node.id).await.unwrap(), node);
    let lines = store.list_usage(&project.id, &month).await.unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].hours, dec("1"));

    // With matching usage both happen.
    let ended = store
        .end_node(
            &node.id,
            Expected::Version(node.version),
            Some(&usage("0.0088")),
            T0.plus_millis(9),
        )
        .await
        .unwrap();
    assert_eq!(ended.status.state, NodeState::Ended);
    assert_eq!(ended.status.ended_at, Some(T0.plus_millis(9)));
    assert_eq!(ended.status.next_attempt_at, None);
    assert_eq!(ended.status.site.as_deref(), Some("eu-central-a"));
    let lines = store.list_usage(&project.id, &month).await.unwrap();
    assert_eq!(lines[0].hours.to_string(), "2");

    // A pool on a missing provider: nothing is written, not even the pool row.
    let err = store
        .create_pool(
            &NewPool {
                project_id: project.id.clone(),
                name: name("ghost"),
                size: 3,
                spec: spec(&ProviderId::from_counter(4_000)),
            },
            T0,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Reference {
                kind: Kind::Pool,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.list_pools(&project.id).await.unwrap().len(), 1);
    let mut raw = db.raw().await;
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nodes")
        .fetch_one(&mut raw)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

pub async fn money_round_trips_exactly(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 3).await;
    let hourly = Money::new(dec("0.0088"), Currency::USD, Period::Hour);
    let monthly = Money::new(dec("5.4900000000"), Currency::EUR, Period::Month);
    let prices = [Some(hourly), Some(monthly), None];
    let markups = [Some(dec("0.15")), Some(dec("0")), None];
    for ((node, price), markup) in nodes.iter().zip(prices).zip(markups) {
        let status = NodeStatus {
            price,
            markup,
            ..running(node)
        };
        store
            .update_node_state(&node.id, Expected::Version(1), &status, T0)
            .await
            .unwrap();
    }
    let stored = store
        .list_nodes_by_pool(&nodes[0].pool_id, false)
        .await
        .unwrap();
    let a = stored[0].status.price.expect("priced");
    assert_eq!(a, hourly);
    assert_eq!(a.amount.to_string(), "0.0088");
    let b = stored[1].status.price.expect("priced");
    assert_eq!(b.amount.to_string(), "5.4900000000", "scale is kept");
    assert_eq!((b.currency, b.period), (Currency::EUR, Period::Month));
    assert_eq!(
        stored[0].status.markup.map(|m| m.to_string()).as_deref(),
        Some("0.15")
    );
    assert_eq!(stored[1].status.markup, Some(Decimal::ZERO));
    // Unpriced stays unpriced: NULL in the database, not zero.
    assert_eq!(stored[2].status.price, None);
    assert_eq!(stored[2].status.markup, None);
    let mut raw = db.raw().await;
    let row = sqlx::query(
        "SELECT price_amount, price_currency, price_period, markup FROM nodes WHERE id = $1",
    )
    .bind(nodes[2].id.as_str())
    .fetch_one(&mut raw)
    .await
    .unwrap();
    for i in 0..4 {
        assert_eq!(row.get::<Option<String>, _>(i), None, "column {i}");
    }
    let row = sqlx::query("SELECT price_amount FROM nodes WHERE id = $1")
        .bind(nodes[1].id.as_str())
        .fetch_one(&mut raw)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>(0), "5.4900000000");

    let line = store
        .record_usage(
            &NewUsage {
                project_id: project.id.clone(),
                month: "2026-01".parse().unwrap(),
                pool_id: None,
                node_id: Some(nodes[0].id.clone()),
                description: "2 vCPU · 4 GiB · eu-central".to_string(),
                hours: dec("0.25"),
                rate: hourly,
                amount: dec("0.0022"),
            },
            T0,
        )
        .await
        .unwrap();
    let listed = store.list_usage(&project.id, &line.month).await.unwrap();
    assert_eq!(listed, vec![line]);
    assert_eq!(listed[0].amount.to_string(), "0.0022");
    assert_eq!(listed[0].rate.amount.to_string(), "0.0088");
}

pub async fn events_filter_and_page(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);
    let pool_scope = EventScope {
        project_id: Some(project.id.clone()),
        pool_id: Some(node.pool_id.clone()),
        ..EventScope::default()
    };
    let node_scope = EventScope {
        node_id: Some(node.id.clone()),
        ..pool_scope.clone()
    };
    let a = store
        .record_event(&pool_scope, "pool.created", "Pool created.", T0)
        .await
        .unwrap();
    let b = store
        .record_event(&node_scope, "node.parked", "No capacity in eu-central.", T0)
        .await
        .unwrap();
    let c = store
        .record_event(
            &EventScope::default(),
            "zone.started",
            "Zone started.",
            T0.plus_millis(1),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .list_events(&EventScope::default(), None, 10)
            .await
            .unwrap(),
        [a.clone(), b.clone(), c.clone()]
    );
    let for_pool = EventScope {
        pool_id: Some(node.pool_id.clone()),
        ..EventScope::default()
    };
    assert_eq!(
        store.list_events(&for_pool, None, 10).await.unwrap(),
        [a.clone(), b.clone()]
    );
    let for_node = EventScope {
        node_id: Some(node.id.clone()),
        ..EventScope::default()
    };
    assert_eq!(
        store.list_events(&for_node, None, 10).await.unwrap(),
        std::slice::from_ref(&b)
    );
    assert_eq!(
        store
            .list_events(&EventScope::default(), Some(&a.id), 1)
            .await
            .unwrap(),
        std::slice::from_ref(&b)
    );
    assert_eq!(b.scope, node_scope);
}

pub async fn repeated_node_events_are_counted_and_newest_come_last(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);
    let scope = EventScope {
        project_id: Some(project.id.clone()),
        pool_id: Some(node.pool_id.clone()),
        node_id: Some(node.id.clone()),
        ..EventScope::default()
    };
    let parked = "No capacity in eu-central right now.";
    let first = store
        .record_node_event(&scope, "node.parked", parked, T0)
        .await
        .unwrap();
    for minute in 1..=3 {
        store
            .record_node_event(
                &scope,
                "node.parked",
                parked,
                T0.plus_millis(minute * 60_000),
            )
            .await
            .unwrap();
    }
    let other = store
        .record_node_event(
            &scope,
            "node.parked",
            "No capacity in us-east right now.",
            T0,
        )
        .await
        .unwrap();
    let listed = store.list_events(&scope, None, 10).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0].id, first.id);
    assert_eq!(listed[0].repeats, 4);
    assert_eq!(listed[0].at, T0);
    assert_eq!(listed[0].last_at, Some(T0.plus_millis(180_000)));
    assert_eq!(listed[1], other);
    assert_eq!(other.repeats, 1);

    let newest = store.list_newest_events(&scope, 1).await.unwrap();
    assert_eq!(newest, std::slice::from_ref(&other));
}

pub async fn usage_accumulates_per_line(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 2).await;
    let rate = Money::new(dec("0.0100"), Currency::USD, Period::Hour);
    let jan: Month = "2026-01".parse().unwrap();
    let feb: Month = "2026-02".parse().unwrap();
    let usage = |node: &Node, month: &Month, hours: &str, amount: &str| NewUsage {
        project_id: project.id.clone(),
        month: month.clone(),
        pool_id: Some(node.pool_id.clone()),
        node_id: Some(node.id.clone()),
        description: "2 vCPU · 4 GiB · eu-central".to_string(),
        hours: dec(hours),
        rate,
        amount: dec(amount),
    };
    store
        .record_usage(&usage(&nodes[0], &jan, "1.5", "0.0150"), T0)
        .await
        .unwrap();
    store
        .record_usage(&usage(&nodes[1], &jan, "1", "0.0100"), T0)
        .await
        .unwrap();
    let line = store
        .record_usage(&usage(&nodes[0], &jan, "0.25", "0.0025"), T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(line.hours.to_string(), "1.75");
    assert_eq!(line.amount.to_string(), "0.0175");
    assert_eq!(line.updated_at, T0.plus_millis(1));
    store
        .record_usage(&usage(&nodes[0], &feb, "2", "0.0200"), T0)
        .await
        .unwrap();
    // The public pool address: one line at rate 0, without a node.
    let ipv4 = NewUsage {
        project_id: project.id.clone(),
        month: jan.clone(),
        pool_id: Some(nodes[0].pool_id.clone()),
        node_id: None,
        description: "IPv4 address · eu-central".to_string(),
        hours: dec("2"),
        rate: Money::zero(Currency::USD, Period::Hour),
        amount: Decimal::ZERO,
    };
    store.record_usage(&ipv4, T0).await.unwrap();
    store.record_usage(&ipv4, T0).await.unwrap();

    let lines = store.list_usage(&project.id, &jan).await.unwrap();
    let summary: Vec<(Option<NodeId>, String, String)> = lines
        .iter()
        .map(|l| (l.node_id.clone(), l.hours.to_string(), l.amount.to_string()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                Some(nodes[0].id.clone()),
                "1.75".to_string(),
                "0.0175".to_string()
            ),
            (
                Some(nodes[1].id.clone()),
                "1".to_string(),
                "0.0100".to_string()
            ),
            (None, "4".to_string(), "0".to_string()),
        ]
    );
    assert_eq!(store.list_usage(&project.id, &feb).await.unwrap().len(), 1);
}

pub async fn concurrent_writers_one_wins(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);
    let mut tasks = Vec::new();
    for attempt in 0..8u32 {
        let store = store.clone();
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let status = NodeStatus {
                attempts: attempt + 1,
                ..node.status.clone()
            };
            store
                .update_node_state(&node.id, Expected::Version(1), &status, T0)
                .await
        }));
    }
    let mut won = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(node) => won.push(node),
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one writer wins");
    assert_eq!(conflicts, 7);
    assert_eq!(store.get_node(&node.id).await.unwrap(), won[0]);
    assert_eq!(won[0].version, 2);
}

pub async fn concurrent_resizes_keep_one_node_per_slot(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    pool_of(&store, &project, &provider, "web", 1).await;
    let pool = store.list_pools(&project.id).await.unwrap().remove(0);
    let mut tasks = Vec::new();
    for size in [3u32, 6, 4, 5] {
        let store = store.clone();
        let id = pool.id.clone();
        tasks.push(tokio::spawn(async move {
            store.resize_pool(&id, size, T0).await
        }));
    }
    for task in tasks {
        task.await.expect("task").expect("resize");
    }
    let size = store.get_pool(&pool.id).await.unwrap().size;
    let nodes = store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    // Every slot below the size holds one live node (a slot whose node is still being
    // destroyed stays taken until it ends); nodes above it are all being destroyed.
    let slots: Vec<u32> = nodes.iter().map(|n| n.slot).collect();
    let mut unique = slots.clone();
    unique.dedup();
    assert!(
        slots.starts_with(&(0..size).collect::<Vec<_>>()),
        "{slots:?} for size {size}"
    );
    assert!(
        nodes
            .iter()
            .filter(|n| n.slot >= size)
            .all(|n| n.status.state == NodeState::Destroying)
    );
    assert_eq!(slots, unique, "one live node per slot");
}

pub async fn corrupt_rows_are_reported_not_panicked(db: &TestDb) {
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let node = pool_of(&store, &project, &provider, "web", 1)
        .await
        .remove(0);
    let mut raw = db.raw().await;
    sqlx::query("UPDATE providers SET markup = 'lots' WHERE id = $1")
        .bind(provider.as_str())
        .execute(&mut raw)
        .await
        .unwrap();
    let err = store.get_provider(&provider).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("stored value in providers.markup is invalid"),
        "{err}"
    );
    sqlx::query("UPDATE nodes SET addresses = 'not json', site = NULL WHERE id = $1")
        .bind(node.id.as_str())
        .execute(&mut raw)
        .await
        .unwrap();
    let err = store.get_node(&node.id).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("stored value in nodes.addresses is invalid"),
        "{err}"
    );
    assert!(!err.is_retryable());
}

pub async fn lost_nodes_and_free_slots(db: &TestDb) {
    let store = &db.store().await;
    let (project, provider) = tenant(store).await;
    let nodes = pool_of(store, &project, &provider, "db", 3).await;
    assert!(store.pools_with_free_slots().await.unwrap().is_empty());

    // A lost node keeps its slot and records when it went missing.
    let lost_at = T0.plus_millis(5);
    let lost = NodeStatus {
        state: NodeState::Lost,
        lost_at: Some(lost_at),
        ..running(&nodes[1])
    };
    let written = store
        .update_node_state(&nodes[1].id, Expected::Version(1), &lost, lost_at)
        .await
        .unwrap();
    assert_eq!(written.status.lost_at, Some(lost_at));
    assert_eq!(store.get_node(&nodes[1].id).await.unwrap().status, lost);
    assert!(store.pools_with_free_slots().await.unwrap().is_empty());

    // Once it ends, its slot is free and a refill gives it one new pending node.
    store
        .end_node(
            &nodes[1].id,
            Expected::State(NodeState::Lost),
            None,
            T0.plus_millis(6),
        )
        .await
        .unwrap();
    let pool = nodes[1].pool_id.clone();
    assert_eq!(
        store.pools_with_free_slots().await.unwrap(),
        std::slice::from_ref(&pool)
    );
    let created = store.refill_pool(&pool, T0.plus_millis(7)).await.unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].slot, 1);
    assert_eq!(created[0].status.state, NodeState::Pending);
    assert!(store.pools_with_free_slots().await.unwrap().is_empty());
    assert!(
        store
            .refill_pool(&pool, T0.plus_millis(8))
            .await
            .unwrap()
            .is_empty()
    );

    // A pool being deleted is never refilled.
    store
        .mark_pool_deleting(&pool, T0.plus_millis(9))
        .await
        .unwrap();
    assert!(store.pools_with_free_slots().await.unwrap().is_empty());
    assert!(
        store
            .refill_pool(&pool, T0.plus_millis(10))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn join_tokens_admit_one_node_once(db: &TestDb) {
    use orc_zone_model::{JoinRefusal, JoinTtl};
    use orc_zone_store::NewJoinToken;
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 2).await;
    let (a, b) = (&nodes[0].id, &nodes[1].id);
    let ca = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let new = NewJoinToken {
        ca_fingerprint: ca,
        created_by: "zone",
        ttl: JoinTtl::default(),
        product_uuid: None,
    };
    let (first, first_secret) = store.create_join_token(a, &new, T0).await.unwrap();
    assert_eq!(first_secret.ca_fingerprint(), ca);
    // A second token for the node revokes the first.
    let (second, secret) = store.create_join_token(a, &new, T0).await.unwrap();
    assert_eq!(
        store
            .redeem_join_token(&first_secret, a, "", T0)
            .await
            .unwrap(),
        Err(JoinRefusal::Revoked)
    );
    // Another node, or a wrong secret, admits nothing.
    assert!(matches!(
        store.redeem_join_token(&secret, b, "", T0).await.unwrap(),
        Err(JoinRefusal::WrongNode { .. })
    ));
    let stranger = orc_zone_model::JoinTokenSecret::generate(ca);
    assert_eq!(
        store.redeem_join_token(&stranger, a, "", T0).await.unwrap(),
        Err(JoinRefusal::Unknown)
    );
    // The right node, once.
    let used = store
        .redeem_join_token(&secret, a, "", T0.plus_millis(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(used.id, second.id);
    assert_eq!(used.used_at, Some(T0.plus_millis(5)));
    assert_eq!(
        store.redeem_join_token(&secret, a, "", T0).await.unwrap(),
        Err(JoinRefusal::Used)
    );
    // Expiry.
    let (_, late) = store.create_join_token(b, &new, T0).await.unwrap();
    let after = T0.plus(JoinTtl::default().get());
    assert_eq!(
        store.redeem_join_token(&late, b, "", after).await.unwrap(),
        Err(JoinRefusal::Expired(after))
    );
    // Revoking by id, and by node; the list is oldest first.
    let (third, third_secret) = store.create_join_token(b, &new, T0).await.unwrap();
    let revoked = store
        .revoke_join_token(&third.id, T0.plus_millis(9))
        .await
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(T0.plus_millis(9)));
    assert_eq!(
        store
            .redeem_join_token(&third_secret, b, "", T0)
            .await
            .unwrap(),
        Err(JoinRefusal::Revoked)
    );
    store.create_join_token(b, &new, T0).await.unwrap();
    assert_eq!(store.revoke_join_tokens_of_node(b, T0).await.unwrap(), 1);
    let listed = store.list_join_tokens(a).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| &t.id).collect::<Vec<_>>(),
        [&first.id, &second.id]
    );
    let missing = orc_zone_model::JoinTokenId::from_counter(4242);
    let err = store.revoke_join_token(&missing, T0).await.unwrap_err();
    assert_eq!(err.to_string(), format!("join token {missing} not found"));
    let ghost = NodeId::from_counter(4243);
    let err = store.create_join_token(&ghost, &new, T0).await.unwrap_err();
    assert_eq!(err.to_string(), format!("node {ghost} not found"));

    // A bound token admits only its machine; the database keeps hashes only.
    let bound = NewJoinToken {
        product_uuid: Some("4c4c4544-0042"),
        ..new.clone()
    };
    let (_, bound_secret) = store.create_join_token(b, &bound, T0).await.unwrap();
    assert!(matches!(
        store
            .redeem_join_token(&bound_secret, b, "ffff", T0)
            .await
            .unwrap(),
        Err(JoinRefusal::WrongMachine { .. })
    ));
    // A provider binds the live, unbound tokens of a node to the machine it identified;
    // one bound already, used or revoked stays as it is.
    let (_, late_bound) = store.create_join_token(a, &new, T0).await.unwrap();
    assert_eq!(store.bind_join_tokens(a, "4c4c4544-00aa").await.unwrap(), 1);
    assert_eq!(store.bind_join_tokens(a, "4c4c4544-00bb").await.unwrap(), 0);
    assert_eq!(store.bind_join_tokens(b, "4c4c4544-00bb").await.unwrap(), 0);
    assert!(matches!(
        store
            .redeem_join_token(&late_bound, a, "4c4c4544-00bb", T0)
            .await
            .unwrap(),
        Err(JoinRefusal::WrongMachine { .. })
    ));
    assert!(
        store
            .redeem_join_token(&late_bound, a, "4C4C4544-00AA", T0)
            .await
            .unwrap()
            .is_ok()
    );
    let mut raw = db.raw().await;
    let rows = sqlx::query("SELECT secret_sha256 FROM join_tokens")
        .fetch_all(&mut raw)
        .await
        .unwrap();
    let digits = bound_secret.expose().rsplit('.').next().unwrap();
    assert!(rows.iter().all(|r| !r.get::<String, _>(0).contains(digits)));
}

pub async fn node_agents_are_written_in_one_batch(db: &TestDb) {
    use orc_zone_model::{AgentState, NodeAgent, NodeFacts};
    use orc_zone_store::AgentUpdate;
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 3).await;
    let agent = |i: usize| NodeAgent {
        node_id: nodes[i].id.clone(),
        state: AgentState::Joined,
        joined_at: T0,
        product_uuid: String::new(),
        cert_fingerprint: format!("sha256:{i}"),
        previous_fingerprint: None,
        cert_not_after: T0.plus_days(30),
        version: "0.1.0".into(),
        facts: NodeFacts::default(),
        desired_generation: 1,
        config_digest: "sha256:one".into(),
        applied_generation: 0,
        apply_error: None,
        last_contact_at: T0,
    };
    for i in 0..2 {
        store.record_node_join(&agent(i)).await.unwrap();
    }
    // Two joined agents move on; the third never joined, so its row is not there.
    let moved: Vec<NodeAgent> = (0..3)
        .map(|i| NodeAgent {
            state: AgentState::Ready,
            applied_generation: 1,
            apply_error: (i == 1).then(|| "no tun device".to_string()),
            last_contact_at: T0.plus_millis(700),
            ..agent(i)
        })
        .collect();
    let updates: Vec<AgentUpdate> = moved
        .iter()
        .map(|agent| AgentUpdate {
            agent: agent.clone(),
            facts: true,
        })
        .collect();
    assert_eq!(
        store.update_node_agents(&updates).await.unwrap(),
        [true, true, false]
    );
    for written in &moved[..2] {
        assert_eq!(
            store.node_agent(&written.node_id).await.unwrap().as_ref(),
            Some(written)
        );
    }
    assert_eq!(store.node_agent(&nodes[2].id).await.unwrap(), None);
    // Facts left out stay as they were written.
    let mut later = moved[0].clone();
    later.facts.hostname = "not written".into();
    later.applied_generation = 2;
    let update = AgentUpdate {
        agent: later.clone(),
        facts: false,
    };
    assert_eq!(store.update_node_agents(&[update]).await.unwrap(), [true]);
    let stored = store.node_agent(&later.node_id).await.unwrap().unwrap();
    assert_eq!(stored.applied_generation, 2);
    assert_eq!(stored.facts, moved[0].facts);
    // The same agent twice is refused whole.
    let twice = [updates[0].clone(), updates[0].clone()];
    let refused = store.update_node_agents(&twice).await.unwrap_err();
    assert!(
        refused.to_string().contains("written twice in one batch"),
        "{refused}"
    );
    assert!(store.update_node_agents(&[]).await.unwrap().is_empty());
}

pub async fn node_agents_join_report_and_renew(db: &TestDb) {
    use orc_zone_model::{AgentState, InterfaceAddress, NodeAgent, NodeFacts};
    let store = db.store().await;
    let (project, provider) = tenant(&store).await;
    let nodes = pool_of(&store, &project, &provider, "web", 2).await;
    let node = &nodes[0];
    assert_eq!(store.node_agent(&node.id).await.unwrap(), None);
    let joined = NodeAgent {
        node_id: node.id.clone(),
        state: AgentState::Joined,
        joined_at: T0,
        product_uuid: "4c4c4544-0042".into(),
        cert_fingerprint: "sha256:aa".into(),
        previous_fingerprint: None,
        cert_not_after: T0.plus_days(30),
        version: "0.1.0".into(),
        facts: NodeFacts {
            hostname: "web-0".into(),
            addresses: vec![InterfaceAddress {
                interface: "eth0".into(),
                cidr: "10.0.0.2/24".into(),
            }],
            cpus: 2,
            memory_total_bytes: 4 << 30,
            ..NodeFacts::default()
        },
        desired_generation: 0,
        config_digest: String::new(),
        applied_generation: 0,
        apply_error: None,
        last_contact_at: T0,
    };
    store.record_node_join(&joined).await.unwrap();
    assert_eq!(
        store.node_agent(&node.id).await.unwrap().as_ref(),
        Some(&joined)
    );
    // Reports and a renewal: the old certificate still finds the agent.
    let renewed = NodeAgent {
        state: AgentState::Ready,
        cert_fingerprint: "sha256:bb".into(),
        previous_fingerprint: Some("sha256:aa".into()),
        desired_generation: 2,
        config_digest: "sha256:cfg".into(),
        applied_generation: 2,
        last_contact_at: T0.plus_millis(500),
        ..joined.clone()
    };
    assert!(store.update_node_agent(&renewed).await.unwrap());
    for fingerprint in ["sha256:aa", "sha256:bb"] {
        let found = store.node_agent_by_certificate(fingerprint).await.unwrap();
        assert_eq!(found.as_ref(), Some(&renewed), "{fingerprint}");
    }
    assert_eq!(
        store.node_agent_by_certificate("sha256:cc").await.unwrap(),
        None
    );
    // Joining again replaces the row; a writer holding the old join is refused.
    let rejoined = NodeAgent {
        joined_at: T0.plus_millis(900),
        cert_fingerprint: "sha256:dd".into(),
        previous_fingerprint: None,
        ..joined.clone()
    };
    store.record_node_join(&rejoined).await.unwrap();
    assert!(!store.update_node_agent(&renewed).await.unwrap());
    assert_eq!(
        store.node_agent_by_certificate("sha256:aa").await.unwrap(),
        None
    );
    let listed = store.node_agents_of_pool(&node.pool_id).await.unwrap();
    assert_eq!(listed, vec![rejoined.clone()]);
    // Two nodes cannot hold one certificate.
    let thief = NodeAgent {
        node_id: nodes[1].id.clone(),
        ..rejoined
    };
    store.record_node_join(&thief).await.unwrap_err();

    // Running nodes whose agent never joined: only those deployed with a token, running
    // since the cut-off or longer, and not of the excepted provider.
    let mut running = nodes[1].status.clone();
    running.state = NodeState::Running;
    for n in &nodes {
        store
            .update_node_state(&n.id, Expected::State(n.status.state), &running, T0)
            .await
            .unwrap();
    }
    let cut = T0.plus_millis(1);
    assert!(
        store
            .running_nodes_without_agent(cut, "core")
            .await
            .unwrap()
            .is_empty(),
        "no tokens yet"
    );
    let new = orc_zone_store::NewJoinToken {
        ca_fingerprint: "sha256:aa",
        created_by: "zone",
        ttl: orc_zone_model::JoinTtl::default(),
        product_uuid: None,
    };
    for n in &nodes {
        store.create_join_token(&n.id, &new, T0).await.unwrap();
    }
    let waiting = store
        .running_nodes_without_agent(cut, "core")
        .await
        .unwrap();
    assert_eq!(
        waiting.iter().map(|n| &n.id).collect::<Vec<_>>(),
        [&nodes[1].id]
    );
    assert!(
        store
            .running_nodes_without_agent(T0.plus_millis(-1), "core")
            .await
            .unwrap()
            .is_empty()
    );
    // Only the zone's own provider of that name (in sys/sys) is left out: a tenant's
    // provider named like it is not.
    let provider_name = store.get_provider(&provider).await.unwrap().name;
    let namesake = store
        .running_nodes_without_agent(cut, provider_name.as_str())
        .await
        .unwrap();
    assert_eq!(
        namesake.iter().map(|n| &n.id).collect::<Vec<_>>(),
        [&nodes[1].id]
    );

    // A pool whose nodes ended is deleted with their agents and join tokens.
    for n in &nodes {
        store
            .end_node(&n.id, Expected::State(NodeState::Running), None, T0)
            .await
            .unwrap();
    }
    store.mark_pool_deleting(&node.pool_id, T0).await.unwrap();
    store.delete_pool(&node.pool_id).await.unwrap();
    assert_eq!(store.node_agent(&node.id).await.unwrap(), None);
    assert!(store.list_join_tokens(&node.id).await.unwrap().is_empty());
}

pub async fn mesh_addresses_are_unique_and_quarantined_before_reuse(db: &TestDb) {
    use orc_zone_store::{MeshMemberKind, NewMeshMember};
    let store = db.store().await;
    let (web, _) = tenant(&store).await;
    let api = store
        .create_project(&web.org_id, &name("api"), T0)
        .await
        .unwrap();
    let range = orc_mesh::MeshRange::parse("10.88.0.0/16", 30).unwrap();
    let member = |id: &str, project: &Project| NewMeshMember {
        id: id.to_string(),
        kind: MeshMemberKind::Node,
        project_id: project.id.clone(),
        name: id.to_string(),
        public_key: None,
    };
    let add = |m: NewMeshMember, at: Timestamp| {
        let (store, range) = (&store, &range);
        async move { store.ensure_mesh_member(&m, range, at).await.unwrap() }
    };

    // A /30 holds one member: .2 (.1 stays for a router).
    let first = add(member("n-1", &web), T0).await.expect("an address");
    assert_eq!(first.address.to_string(), "10.88.0.2");
    assert_eq!(
        add(member("n-1", &web), T0).await,
        Some(first.clone()),
        "asking again changes nothing"
    );
    assert_eq!(
        add(member("n-2", &web), T0).await,
        None,
        "the prefix is full"
    );
    let other = add(member("n-3", &api), T0).await.unwrap();
    assert_eq!(
        other.address.to_string(),
        "10.88.0.6",
        "the next project's prefix"
    );
    let prefixes = store.mesh_prefixes().await.unwrap();
    assert_eq!(prefixes[&web.id].to_string(), "10.88.0.0/30");
    assert_eq!(prefixes[&api.id].to_string(), "10.88.0.4/30");

    // Released: quarantined until its time, then free again.
    let until = T0.plus_millis(60_000);
    assert_eq!(
        store
            .release_mesh_members(&["n-1".to_string(), "gone".to_string()], until)
            .await
            .unwrap(),
        1
    );
    assert_eq!(add(member("n-2", &web), T0.plus_millis(59_999)).await, None);
    let reused = add(member("n-2", &web), until).await.unwrap();
    assert_eq!(reused.address, first.address);

    // A project's prefix goes only once it has no members, and is quarantined too.
    assert!(!store.release_mesh_prefix(&api.id, until).await.unwrap());
    store
        .release_mesh_members(&["n-3".to_string()], T0)
        .await
        .unwrap();
    assert!(store.release_mesh_prefix(&api.id, until).await.unwrap());
    let spare = store
        .create_project(&web.org_id, &name("spare"), T0)
        .await
        .unwrap();
    let next = add(member("n-4", &spare), T0).await.unwrap();
    assert_eq!(
        next.address.to_string(),
        "10.88.0.10",
        "10.88.0.4/30 is in quarantine"
    );

    // Workstations carry their key; members list by id.
    let ws = store
        .ensure_mesh_member(
            &NewMeshMember {
                id: "ws-ann".to_string(),
                kind: MeshMemberKind::Workstation,
                project_id: spare.id.clone(),
                name: "ann-laptop".to_string(),
                public_key: None,
            },
            &orc_mesh::MeshRange::parse("10.88.0.0/16", 24).unwrap(),
            T0,
        )
        .await
        .unwrap();
    assert_eq!(ws, None, "the project's /30 is full");
    assert!(store.set_mesh_member_key("n-4", "KEY=").await.unwrap());
    let members = store.mesh_members().await.unwrap();
    let ids: Vec<&str> = members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["n-2", "n-4"]);
    assert_eq!(members[1].public_key.as_deref(), Some("KEY="));
    // A project's own members, and no other's.
    for (project, want) in [
        (&web.id, vec!["n-2"]),
        (&spare.id, vec!["n-4"]),
        (&api.id, vec![]),
    ] {
        let members = store.mesh_members_of(project).await.unwrap();
        let ids: Vec<&str> = members.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, want, "the members of {project}");
    }
}

pub async fn access_keys_rotate_sealed_and_retire_on_time(db: &TestDb) {
    let store = db.store().await;
    assert!(store.access_keys(T0).await.unwrap().is_empty());
    store
        .add_access_key("k-1", b"first private", T0, T0)
        .await
        .unwrap();
    let current = store.access_keys(T0).await.unwrap();
    assert_eq!(current.len(), 1);
    assert_eq!(
        (current[0].kid.as_str(), current[0].retire_at),
        ("k-1", None)
    );
    assert_eq!(current[0].pkcs8.as_slice(), b"first private");

    // Rotated: the first is published for a minute more, the second signs.
    let t1 = T0.plus_millis(1000);
    let until = t1.plus_millis(60_000);
    store
        .add_access_key("k-2", b"second private", t1, until)
        .await
        .unwrap();
    let both = store.access_keys(t1).await.unwrap();
    let kids: Vec<(&str, Option<Timestamp>)> =
        both.iter().map(|k| (k.kid.as_str(), k.retire_at)).collect();
    assert_eq!(kids, [("k-2", None), ("k-1", Some(until))]);
    // At its time the first is no longer published, and the next rotation deletes it.
    let later = store.access_keys(until).await.unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].kid, "k-2");
    store
        .add_access_key("k-3", b"third private", until, until.plus_millis(5))
        .await
        .unwrap();
    let mut connection = db.raw().await;
    let raw: Vec<(String, String)> =
        sqlx::query_as("SELECT kid, private_key FROM access_keys ORDER BY kid")
            .fetch_all(&mut connection)
            .await
            .unwrap();
    let kids: Vec<&str> = raw.iter().map(|(kid, _)| kid.as_str()).collect();
    assert_eq!(kids, ["k-2", "k-3"], "the retired key is deleted");
    for (kid, sealed) in &raw {
        assert!(sealed.starts_with("sealed:v1:"), "{kid} is sealed");
        assert!(!sealed.contains("private"), "{kid} is not in clear");
    }
    // Sealed bound to the kid: a key moved to another kid does not open.
    sqlx::query("UPDATE access_keys SET private_key = $1 WHERE kid = 'k-3'")
        .bind(&raw[0].1)
        .execute(&mut connection)
        .await
        .unwrap();
    assert!(store.access_keys(until).await.is_err());
}

pub async fn sessions_hold_until_signed_out_idle_expired_or_their_token_ends(db: &TestDb) {
    use orc_zone_model::{SessionPolicy, SessionSecret, SignedInWith};
    let store = db.store().await;
    let policy = SessionPolicy {
        lifetime: std::time::Duration::from_secs(3600),
        idle: std::time::Duration::from_secs(600),
    };
    let ann = store.create_user(&name("ann"), T0).await.unwrap();
    assert_eq!(
        store.user_with_password(&name("ann")).await.unwrap(),
        Some((ann.clone(), None))
    );
    assert_eq!(
        store.user_with_password(&name("nobody")).await.unwrap(),
        None
    );
    store
        .set_password_hash(
            &ann.id,
            Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"),
        )
        .await
        .unwrap();
    let (_, hash) = store
        .user_with_password(&name("ann"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        hash.as_deref(),
        Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA")
    );

    // A password session: found by its secret, idle after ten minutes, touched to stay.
    let (by_password, secret) = store
        .create_web_session(&ann.id, &SignedInWith::Password, &policy, T0)
        .await
        .unwrap();
    let found = store.web_session(&secret, &policy, T0).await.unwrap();
    assert_eq!(found.as_ref(), Some(&by_password));
    let wrong = SessionSecret::from_presented(format!("{}x", secret.expose()));
    assert_eq!(store.web_session(&wrong, &policy, T0).await.unwrap(), None);
    let t9 = T0.plus_millis(9 * 60_000);
    store.touch_web_session(&by_password.id, t9).await.unwrap();
    let t15 = T0.plus_millis(15 * 60_000);
    assert!(
        store
            .web_session(&secret, &policy, t15)
            .await
            .unwrap()
            .is_some()
    );
    let t20 = T0.plus_millis(20 * 60_000);
    assert_eq!(
        store.web_session(&secret, &policy, t20).await.unwrap(),
        None,
        "idle"
    );
    // However busy, a session ends at its lifetime.
    let (_, busy) = store
        .create_web_session(&ann.id, &SignedInWith::Password, &policy, T0)
        .await
        .unwrap();
    let busy_id = store
        .web_session(&busy, &policy, T0)
        .await
        .unwrap()
        .unwrap()
        .id;
    for minute in (5..=55).step_by(5) {
        let at = T0.plus_millis(minute * 60_000);
        assert!(
            store
                .web_session(&busy, &policy, at)
                .await
                .unwrap()
                .is_some(),
            "at {minute} min"
        );
        store.touch_web_session(&busy_id, at).await.unwrap();
    }
    assert_eq!(
        store
            .web_session(&busy, &policy, T0.plus_millis(3_600_000))
            .await
            .unwrap(),
        None,
        "lifetime"
    );

    // A token session ends when its token is revoked; signing out ends it too.
    let (token, _) = store
        .create_token(&ann.id, "laptop", None, None, T0)
        .await
        .unwrap();
    let (from_token, token_secret) = store
        .create_web_session(&ann.id, &SignedInWith::Token(token.id.clone()), &policy, T0)
        .await
        .unwrap();
    assert_eq!(
        from_token.signed_in_with,
        SignedInWith::Token(token.id.clone())
    );
    assert!(
        store
            .web_session(&token_secret, &policy, T0)
            .await
            .unwrap()
            .is_some()
    );
    store
        .revoke_token(&token.id, T0.plus_millis(1))
        .await
        .unwrap();
    assert_eq!(
        store
            .web_session(&token_secret, &policy, T0.plus_millis(2))
            .await
            .unwrap(),
        None,
        "revoked token"
    );
    let (signed_out, out_secret) = store
        .create_web_session(&ann.id, &SignedInWith::Password, &policy, T0)
        .await
        .unwrap();
    store
        .end_web_session(&signed_out.id, T0.plus_millis(5))
        .await
        .unwrap();
    assert_eq!(
        store
            .web_session(&out_secret, &policy, T0.plus_millis(6))
            .await
            .unwrap(),
        None
    );

    // The store keeps hashes only; a password change ends every session; the user goes.
    let mut connection = db.raw().await;
    let stored: Vec<String> = sqlx::query_scalar("SELECT secret_sha256 FROM web_sessions")
        .fetch_all(&mut connection)
        .await
        .unwrap();
    assert_eq!(stored.len(), 4);
    assert!(
        !stored
            .iter()
            .any(|s| s == secret.expose() || s.contains("orc_"))
    );
    let (_, fresh) = store
        .create_web_session(&ann.id, &SignedInWith::Password, &policy, T0)
        .await
        .unwrap();
    // Four had not ended: idle, past their lifetime, of a revoked token, and the fresh one.
    assert_eq!(
        store
            .end_web_sessions_of(&ann.id, T0.plus_millis(7))
            .await
            .unwrap(),
        4
    );
    assert_eq!(
        store
            .web_session(&fresh, &policy, T0.plus_millis(8))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .delete_old_web_sessions(T0.plus_millis(4_000_000))
            .await
            .unwrap(),
        5
    );
    store.delete_user(&ann.id).await.unwrap();
    assert!(store.set_password_hash(&ann.id, None).await.is_err());
}

fn package_of(store_org: &orc_zone_model::OrgId, app: &str, version: &str) -> AppPackage {
    let document = PackageDocument {
        manifest: AppManifest::bare(app, version),
        binaries: [(
            Platform::LinuxAmd64,
            BinaryRef {
                digest: Digest::of(version.as_bytes()),
                size: version.len() as u64,
            },
        )]
        .into(),
    };
    AppPackage {
        org_id: store_org.clone(),
        name: name(app),
        digest: document.digest(),
        document,
        created_at: T0,
    }
}

pub async fn app_registry_tags_move_and_unused_packages_go(db: &TestDb) {
    let store = db.store().await;
    let (web, provider) = tenant(&store).await;
    let org = web.org_id.clone();
    let v1 = package_of(&org, "api", "1");
    let v2 = package_of(&org, "api", "2");
    store.put_app_package(&v1).await.unwrap();
    // Keeping the same package twice changes nothing.
    store.put_app_package(&v1).await.unwrap();
    store.put_app_package(&v2).await.unwrap();
    let mut forged = package_of(&org, "api", "3");
    forged.digest = v1.digest.clone();
    let err = store.put_app_package(&forged).await.unwrap_err();
    assert!(
        err.to_string().contains("not the digest of its document"),
        "{err}"
    );

    let before = store
        .set_app_tag(&org, &name("api"), "default", &v1.digest, T0)
        .await
        .unwrap();
    assert_eq!(before, None);
    let before = store
        .set_app_tag(&org, &name("api"), "default", &v2.digest, T0)
        .await
        .unwrap();
    assert_eq!(before, Some(v1.digest.clone()));
    store
        .set_app_tag(&org, &name("api"), "stable", &v1.digest, T0)
        .await
        .unwrap();
    let tags = store.list_app_tags(&org).await.unwrap();
    assert_eq!(
        tags.iter()
            .map(|t| (t.tag.as_str(), t.digest.clone()))
            .collect::<Vec<_>>(),
        [
            ("default", v2.digest.clone()),
            ("stable", v1.digest.clone())
        ]
    );
    let read = store
        .app_package(&org, &name("api"), &v2.digest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.document, v2.document);
    assert_eq!(
        store.app_tag(&org, &name("api"), "nope").await.unwrap(),
        None
    );
    // A tag of a package the registry does not hold is refused.
    let unknown = Digest::of(b"nothing");
    assert!(
        store
            .set_app_tag(&org, &name("api"), "x", &unknown, T0)
            .await
            .is_err()
    );

    // Untagged and unused by any pool: pruned. A pool's digest keeps its package.
    let mut spec = spec(&provider);
    spec.app = Some(AppSpec {
        package: "acme/api:stable".to_string(),
        digest: Some(v1.digest.clone()),
        params: BTreeMap::new(),
        sensitive: SensitiveParams::default(),
    });
    store
        .create_pool(
            &NewPool {
                project_id: web.id.clone(),
                name: name("runs-v1"),
                size: 0,
                spec,
            },
            T0,
        )
        .await
        .unwrap();
    assert!(
        store
            .delete_app_tag(&org, &name("api"), "stable")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_app_tag(&org, &name("api"), "stable")
            .await
            .unwrap()
    );
    assert!(store.prune_app_packages().await.unwrap().is_empty());
    assert!(
        store
            .delete_app_tag(&org, &name("api"), "default")
            .await
            .unwrap()
    );
    let pruned = store.prune_app_packages().await.unwrap();
    assert_eq!(
        pruned.iter().map(|p| &p.digest).collect::<Vec<_>>(),
        [&v2.digest]
    );
    assert_eq!(
        store.app_binary_digests().await.unwrap(),
        [Digest::of(b"1")].into()
    );
    assert_eq!(
        store
            .list_app_packages(&org, &name("api"))
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn app_binaries_belong_to_the_orgs_that_hold_them(db: &TestDb) {
    let store = db.store().await;
    let (web, _) = tenant(&store).await;
    let acme = web.org_id.clone();
    let globex = store.create_org(&name("globex"), T0).await.unwrap().id;
    // package_of names the binary whose content is its version.
    let binary = Digest::of(b"1");
    assert_eq!(store.app_blob_of(&acme, &binary).await.unwrap(), None);

    // Sent by acme: acme's, not globex's.
    store
        .put_app_blob_upload(&acme, &binary, 1, T0)
        .await
        .unwrap();
    assert_eq!(store.app_blob_of(&acme, &binary).await.unwrap(), Some(1));
    assert_eq!(store.app_blob_of(&globex, &binary).await.unwrap(), None);
    assert_eq!(
        store.app_binary_digests().await.unwrap(),
        [binary.clone()].into(),
        "an upload keeps its binary on disk"
    );

    // A package of acme takes the upload up: acme holds the binary through it, and an
    // expiry of uploads changes nothing for it.
    let package = package_of(&acme, "api", "1");
    store.put_app_package(&package).await.unwrap();
    assert_eq!(
        store
            .expire_app_blob_uploads(T0.plus_millis(1))
            .await
            .unwrap(),
        0,
        "the package ended the upload"
    );
    assert_eq!(store.app_blob_of(&acme, &binary).await.unwrap(), Some(1));
    assert_eq!(store.app_blob_of(&globex, &binary).await.unwrap(), None);

    // globex sends the same content: now globex's too, until its upload is forgotten.
    store
        .put_app_blob_upload(&globex, &binary, 1, T0.plus_millis(10))
        .await
        .unwrap();
    assert_eq!(store.app_blob_of(&globex, &binary).await.unwrap(), Some(1));
    assert_eq!(
        store
            .expire_app_blob_uploads(T0.plus_millis(10))
            .await
            .unwrap(),
        0,
        "an upload is forgotten only once it is older than the cut"
    );
    assert_eq!(
        store
            .expire_app_blob_uploads(T0.plus_millis(11))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.app_blob_of(&globex, &binary).await.unwrap(), None);

    // Without its package and upload, acme no longer holds it, and nothing keeps it.
    assert_eq!(
        store
            .prune_app_packages()
            .await
            .unwrap()
            .iter()
            .map(|p| &p.digest)
            .collect::<Vec<_>>(),
        [&package.digest]
    );
    assert_eq!(store.app_blob_of(&acme, &binary).await.unwrap(), None);
    assert!(store.app_binary_digests().await.unwrap().is_empty());

    // An org with an upload left is deleted with it.
    store
        .put_app_blob_upload(&globex, &binary, 1, T0)
        .await
        .unwrap();
    store.delete_org(&globex).await.unwrap();
    assert!(store.app_binary_digests().await.unwrap().is_empty());
}

pub async fn a_sole_principal_serves_its_first_provider_only(db: &TestDb) {
    let store = db.store().await;
    let (web, first) = tenant(&store).await;
    let second = store
        .create_provider(
            &NewProvider {
                project_id: web.id.clone(),
                name: name("second"),
                resource_uri: "urn:orc:test:second".to_string(),
                scope: ProviderScope::Project,
                pricing: PricingStrategy::None,
            },
            T0.plus_millis(1),
        )
        .await
        .unwrap();
    let pool = "pool:pl-000000000007";
    assert_eq!(store.first_provider_served_by(pool).await.unwrap(), None);
    assert!(store.claim_sole_provider(&first, pool).await.unwrap());
    assert!(
        store.claim_sole_provider(&first, pool).await.unwrap(),
        "claiming its own again"
    );
    assert!(
        !store.claim_sole_provider(&second.id, pool).await.unwrap(),
        "a second provider"
    );
    assert_eq!(
        store
            .first_provider_served_by(pool)
            .await
            .unwrap()
            .map(|p| p.id),
        Some(first.clone())
    );
    // The second stays free for its own credential; a user may serve several.
    assert!(store.claim_provider(&second.id, "user:u-1").await.unwrap());
    assert!(!store.claim_sole_provider(&second.id, pool).await.unwrap());
}

pub async fn mesh_projects_carry_their_org_and_project_names(db: &TestDb) {
    use orc_zone_store::{MeshMemberKind, NewMeshMember};
    let store = db.store().await;
    let (web, _) = tenant(&store).await;
    let range = orc_mesh::MeshRange::parse("10.88.0.0/16", 24).unwrap();
    store
        .ensure_mesh_member(
            &NewMeshMember {
                id: "n-1".to_string(),
                kind: MeshMemberKind::Node,
                project_id: web.id.clone(),
                name: "n-1".to_string(),
                public_key: None,
            },
            &range,
            T0,
        )
        .await
        .unwrap()
        .expect("an address");
    let projects = store.mesh_projects().await.unwrap();
    let names: Vec<(&str, &str)> = projects
        .iter()
        .map(|p| (p.org_name.as_str(), p.name.as_str()))
        .collect();
    assert_eq!(names, [("acme", "web")]);
}

pub async fn images_keep_manifests_tags_and_what_they_name(db: &TestDb) {
    use orc_zone_store::ImageManifestRow;
    let store = db.store().await;
    let (web, _provider) = tenant(&store).await;
    let org = web.org_id.clone();
    let repo = name("shop");
    let config = Digest::of(b"config");
    let layer = Digest::of(b"layer");
    let manifest = ImageManifestRow {
        digest: Digest::of(b"manifest"),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        size: 8,
    };
    store
        .put_app_blob_upload(&org, &layer, 5, T0)
        .await
        .unwrap();
    let refs = vec![(config.clone(), 6), (layer.clone(), 5), (layer.clone(), 5)];
    store
        .put_image_manifest(&org, &repo, &manifest, &refs, T0)
        .await
        .unwrap();
    // Keeping it again changes nothing; the upload it took up has ended.
    store
        .put_image_manifest(&org, &repo, &manifest, &refs, T0)
        .await
        .unwrap();
    assert_eq!(store.app_blob_of(&org, &layer).await.unwrap(), None);
    assert_eq!(store.image_blob_of(&org, &layer).await.unwrap(), Some(5));
    assert_eq!(
        store.image_blob_of(&org, &manifest.digest).await.unwrap(),
        Some(8)
    );
    assert_eq!(
        store
            .image_manifest(&org, &repo, &manifest.digest)
            .await
            .unwrap(),
        Some(manifest.clone())
    );
    for tag in ["2", "1"] {
        store
            .set_image_tag(&org, &repo, tag, &manifest.digest, T0)
            .await
            .unwrap();
    }
    assert_eq!(
        store.list_image_tags(&org, &repo).await.unwrap(),
        ["1", "2"]
    );
    assert_eq!(
        store.image_tag(&org, &repo, "1").await.unwrap(),
        Some(manifest.digest.clone())
    );
    assert_eq!(
        store.list_image_repositories(&org).await.unwrap(),
        std::slice::from_ref(&repo)
    );
    let all = store.image_blob_digests().await.unwrap();
    assert!(all.contains(&config) && all.contains(&layer) && all.contains(&manifest.digest));

    assert!(store.delete_image_tag(&org, &repo, "2").await.unwrap());
    assert!(!store.delete_image_tag(&org, &repo, "2").await.unwrap());
    assert!(
        store
            .delete_image_manifest(&org, &repo, &manifest.digest)
            .await
            .unwrap()
    );
    assert_eq!(store.image_tag(&org, &repo, "1").await.unwrap(), None);
    assert!(!store.image_repository_exists(&org, &repo).await.unwrap());
    assert!(store.image_blob_digests().await.unwrap().is_empty());
}

pub async fn apps_keep_revisions_states_and_placements(db: &TestDb) {
    use orc_zone_store::{AppReplicaRow, ReplicaChange};
    let store = db.store().await;
    let (web, _provider) = tenant(&store).await;
    let project = web.id.clone();
    let app = name("shop");
    let digest = |n: u8| format!("sha256:{}", format!("{n:02x}").repeat(32));
    let first = store
        .create_app_revision(
            &project,
            &app,
            &digest(1),
            "{\"v\":1}",
            "deploy",
            "DEPLOYING",
            None,
            Some("olivia"),
            T0,
        )
        .await
        .unwrap();
    assert_eq!(first.number, 1);
    let second = store
        .create_app_revision(
            &project,
            &app,
            &digest(2),
            "{\"v\":2}",
            "deploy",
            "BLOCKED",
            Some("no_nodes"),
            None,
            T0,
        )
        .await
        .unwrap();
    assert_eq!(second.number, 2);
    let history = store.list_app_revisions(&project, &app).await.unwrap();
    let states: Vec<(u64, &str)> = history
        .iter()
        .map(|r| (r.number, r.state.as_str()))
        .collect();
    assert_eq!(states, [(2, "BLOCKED"), (1, "SUPERSEDED")]);
    store
        .set_app_revision_state(&project, &app, 2, "HEALTHY", None, T0)
        .await
        .unwrap();
    let listed = store.list_apps(&project).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].number, listed[0].state.as_str()), (2, "HEALTHY"));
    assert_eq!(
        store
            .app_revision(&project, &app, 1)
            .await
            .unwrap()
            .map(|r| r.document),
        Some("{\"v\":1}".to_string())
    );

    let node: NodeId = "n-000000000001".parse().unwrap();
    let row = |slot: u32, revision: u64, node: Option<NodeId>| AppReplicaRow {
        workload: "web".into(),
        slot,
        revision,
        node_id: node,
        state: "pending".into(),
        ready: false,
        restarts: 0,
        updated_at: T0,
        address: None,
        message: None,
        draining_at: None,
    };
    // A step adds two replicas, one placed and one waiting.
    store
        .change_app_replicas(
            &project,
            &app,
            &ReplicaChange {
                add: vec![row(0, 1, Some(node.clone())), row(1, 1, None)],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // A report of another revision in the same slot is ignored; its own is kept.
    let report = |revision: u64| {
        store.report_app_replica(
            &node, &project, &app, "web", 0, revision, "running", true, 2, None, T0,
        )
    };
    assert!(!report(2).await.unwrap());
    assert!(report(1).await.unwrap());
    // The next step relabels the running one, places the waiting one, and adds a third;
    // the report recorded meanwhile stays.
    let other: NodeId = "n-000000000002".parse().unwrap();
    store
        .change_app_replicas(
            &project,
            &app,
            &ReplicaChange {
                adopt: vec![("web".into(), 0, 2)],
                place: vec![
                    ("web".into(), 1, other.clone()),
                    ("web".into(), 0, other.clone()),
                ],
                add: vec![row(2, 2, Some(other.clone()))],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let listed = store.list_app_replicas(&project, &app).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| (r.slot, r.revision, r.node_id.clone(), r.ready))
            .collect::<Vec<_>>(),
        [
            (0, 2, Some(node.clone()), true),
            (1, 1, Some(other.clone()), false),
            (2, 2, Some(other.clone()), false),
        ],
        "a placed replica is not placed again"
    );
    store
        .change_app_replicas(
            &project,
            &app,
            &ReplicaChange {
                remove: vec![("web".into(), 1), ("web".into(), 2)],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let on_nodes = store.app_replicas_on_nodes(&project).await.unwrap();
    assert_eq!(
        on_nodes,
        [(app.clone(), "web".to_string(), 0, 2, node.clone())]
    );

    // Replicas get the lowest free address after the bridge's, and keep it.
    let subnet: ipnet::Ipv4Net = "10.96.2.0/24".parse().unwrap();
    let addresses = store.assign_replica_addresses(&node, subnet).await.unwrap();
    let key = (project.clone(), app.clone(), "web".to_string(), 0);
    assert_eq!(addresses.get(&key), Some(&"10.96.2.2".parse().unwrap()));
    store
        .change_app_replicas(
            &project,
            &app,
            &ReplicaChange {
                add: vec![row(3, 2, Some(node.clone()))],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let addresses = store.assign_replica_addresses(&node, subnet).await.unwrap();
    assert_eq!(addresses.get(&key), Some(&"10.96.2.2".parse().unwrap()));
    assert_eq!(
        addresses.get(&(project.clone(), app.clone(), "web".to_string(), 3)),
        Some(&"10.96.2.3".parse().unwrap())
    );
    assert_eq!(
        store
            .ready_replica_addresses(&project)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.app.clone(), r.workload.clone(), r.address))
            .collect::<Vec<_>>(),
        [(app.clone(), "web".to_string(), "10.96.2.2".parse().unwrap())],
        "slot 0 reported ready; slot 3 has not"
    );
    assert!(
        store
            .report_app_replica(
                &node, &project, &app, "web", 3, 2, "running", true, 0, None, T0
            )
            .await
            .unwrap()
    );
    assert_eq!(
        store.ready_replica_addresses(&project).await.unwrap().len(),
        2
    );
    let listed = store.list_app_replicas(&project, &app).await.unwrap();
    assert_eq!(listed[1].address, Some("10.96.2.3".parse().unwrap()));
    assert_eq!(listed[1].message, None, "nothing said, nothing kept");
    // What the node says of a failing replica is kept, a line long at most; a report that
    // only says it again changes nothing.
    let long = format!("cannot fetch sha256:{}", "0".repeat(400));
    let fail = || {
        store.report_app_replica(
            &node,
            &project,
            &app,
            "web",
            3,
            2,
            "failed",
            false,
            0,
            Some(long.as_str()),
            T0,
        )
    };
    assert!(fail().await.unwrap());
    assert!(!fail().await.unwrap());
    let listed = store.list_app_replicas(&project, &app).await.unwrap();
    let kept = listed[1].message.as_deref().unwrap();
    assert!(kept.starts_with("cannot fetch sha256:000"), "{kept}");
    assert_eq!(
        kept.chars().count(),
        orc_zone_store::MESSAGE_CHARS + 1,
        "{kept}"
    );
    assert!(
        store
            .report_app_replica(
                &node,
                &project,
                &app,
                "web",
                3,
                2,
                "running",
                true,
                0,
                Some(""),
                T0
            )
            .await
            .unwrap()
    );
    let listed = store.list_app_replicas(&project, &app).await.unwrap();
    assert_eq!(
        listed[1].message, None,
        "a replica that runs again has nothing to say"
    );
    // A draining replica leaves its service's names at once and keeps the time it began.
    let drain = |at: i64| ReplicaChange {
        drain: vec![("web".into(), 3, Timestamp::from_unix_millis(at))],
        ..Default::default()
    };
    store
        .change_app_replicas(&project, &app, &drain(5_000))
        .await
        .unwrap();
    store
        .change_app_replicas(&project, &app, &drain(9_000))
        .await
        .unwrap();
    let listed = store.list_app_replicas(&project, &app).await.unwrap();
    assert_eq!(
        listed[1].draining_at,
        Some(Timestamp::from_unix_millis(5_000))
    );
    assert_eq!(
        store
            .ready_replica_addresses(&project)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.app.clone(), r.workload.clone(), r.address))
            .collect::<Vec<_>>(),
        [(app.clone(), "web".to_string(), "10.96.2.2".parse().unwrap())],
        "a draining replica is no service's address"
    );
    store
        .change_app_replicas(
            &project,
            &app,
            &ReplicaChange {
                remove: vec![("web".into(), 3)],
                ..Default::default()
            },
        )
        .await
        .unwrap();

    // A revision's rollout begins when it first deploys; it counts as healthy once.
    let third = store
        .create_app_revision(
            &project,
            &app,
            &digest(3),
            "{}",
            "deploy",
            "DEPLOYING",
            None,
            None,
            T0,
        )
        .await
        .unwrap();
    assert_eq!(third.started_at, Some(T0));
    let later = T0.plus_millis(5_000);
    for state in ["HEALTHY", "DEPLOYING", "HEALTHY"] {
        store
            .set_app_revision_state(&project, &app, 3, state, None, later)
            .await
            .unwrap();
    }
    let healthy = store
        .last_healthy_app_revision(&project, &app, 4)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (healthy.number, healthy.started_at, healthy.healthy_at),
        (3, Some(T0), Some(later))
    );
    assert!(
        store
            .last_healthy_app_revision(&project, &app, 3)
            .await
            .unwrap()
            .is_some_and(|r| r.number == 2),
        "revision 2 was healthy too"
    );
    assert_eq!(
        store.all_apps().await.unwrap(),
        [(project.clone(), app.clone())]
    );

    assert!(store.delete_app(&project, &app).await.unwrap());
    assert!(!store.delete_app(&project, &app).await.unwrap());
    assert!(store.list_apps(&project).await.unwrap().is_empty());
}

pub async fn secrets_are_sealed_versioned_and_kept_per_project(db: &TestDb) {
    let store = db.store().await;
    let org = store.create_org(&name("acme"), T0).await.unwrap();
    let web = store
        .create_project(&org.id, &name("web"), T0)
        .await
        .unwrap();
    let data = store
        .create_project(&org.id, &name("data"), T0)
        .await
        .unwrap();
    let mia = store.create_user(&name("mia"), T0).await.unwrap();
    let olivia = store.create_user(&name("olivia"), T0).await.unwrap();
    let db_password: SecretName = "db-password".parse().unwrap();
    let t1 = T0.plus_millis(1_000);

    // Set twice: the version counts, the creation time stays, the last setter is named.
    let first = store
        .set_secret(&web.id, &db_password, "first-Plain-Value", &mia.id, T0)
        .await
        .unwrap();
    let second = store
        .set_secret(&web.id, &db_password, "second-Plain-Value", &olivia.id, t1)
        .await
        .unwrap();
    assert_eq!((first, second), (1, 2));
    let listed = store.list_secrets(&web.id).await.unwrap();
    assert_eq!(
        listed,
        [SecretRecord {
            name: db_password.clone(),
            version: 2,
            created_at: T0,
            updated_at: t1,
            updated_by: olivia.id.clone(),
            updated_by_name: Some(name("olivia")),
        }]
    );
    assert!(
        !format!("{listed:?}").contains("Plain-Value"),
        "a listing holds no value: {listed:?}"
    );
    assert_eq!(
        store
            .secret_value(&web.id, &db_password)
            .await
            .unwrap()
            .as_deref()
            .map(String::as_str),
        Some("second-Plain-Value")
    );

    // The database holds the value sealed, never in clear.
    let mut raw = db.raw().await;
    let stored: Vec<(String, String, String)> =
        sqlx::query_as("SELECT project_id, name, sealed_value FROM secrets")
            .fetch_all(&mut raw)
            .await
            .unwrap();
    assert_eq!(stored.len(), 1);
    let (project_id, stored_name, sealed) = &stored[0];
    assert_eq!(
        (project_id.as_str(), stored_name.as_str()),
        (web.id.as_str(), "db-password")
    );
    assert!(sealed.starts_with("sealed:v1:"), "{sealed}");
    assert!(!sealed.contains("Plain-Value"), "{sealed}");

    // The same name in another project is another secret.
    assert_eq!(
        store.secret_value(&data.id, &db_password).await.unwrap(),
        None
    );
    let in_data = store
        .set_secret(&data.id, &db_password, "data-Plain-Value", &mia.id, t1)
        .await
        .unwrap();
    assert_eq!(in_data, 1);
    assert_eq!(store.list_secrets(&web.id).await.unwrap()[0].version, 2);
    assert_eq!(
        store
            .secret_value(&data.id, &db_password)
            .await
            .unwrap()
            .as_deref()
            .map(String::as_str),
        Some("data-Plain-Value")
    );
    // A sealed value copied into another project's row does not open there.
    sqlx::query("UPDATE secrets SET sealed_value = $1 WHERE project_id = $2")
        .bind(sealed)
        .bind(data.id.as_str())
        .execute(&mut raw)
        .await
        .unwrap();
    let moved = store
        .secret_value(&data.id, &db_password)
        .await
        .unwrap_err();
    assert!(matches!(moved, StoreError::Seal(_)), "{moved}");
    assert!(!moved.to_string().contains("Plain-Value"), "{moved}");

    // Nor under another name of the same project.
    let api_key: SecretName = "api-key".parse().unwrap();
    store
        .set_secret(&web.id, &api_key, "key-Plain-Value", &mia.id, t1)
        .await
        .unwrap();
    sqlx::query("UPDATE secrets SET sealed_value = $1 WHERE project_id = $2 AND name = $3")
        .bind(sealed)
        .bind(web.id.as_str())
        .bind("api-key")
        .execute(&mut raw)
        .await
        .unwrap();
    assert!(store.secret_value(&web.id, &api_key).await.is_err());

    // A deleted user's secrets stay, naming them by id only.
    store.delete_user(&mia.id).await.unwrap();
    let names: Vec<(String, Option<Name>, orc_zone_model::UserId)> = store
        .list_secrets(&web.id)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.name.to_string(), s.updated_by_name, s.updated_by))
        .collect();
    assert_eq!(
        names,
        [
            ("api-key".to_string(), None, mia.id.clone()),
            (
                "db-password".to_string(),
                Some(name("olivia")),
                olivia.id.clone()
            ),
        ],
        "listed by name"
    );

    // Delete: once it was there, then it is not.
    assert!(store.delete_secret(&web.id, &db_password).await.unwrap());
    assert!(!store.delete_secret(&web.id, &db_password).await.unwrap());
    assert_eq!(
        store.secret_value(&web.id, &db_password).await.unwrap(),
        None
    );
    let left: Vec<String> = store
        .list_secrets(&web.id)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(left, ["api-key"]);
    // Set again after a delete, a name starts over.
    let again = store
        .set_secret(&web.id, &db_password, "third-Plain-Value", &olivia.id, t1)
        .await
        .unwrap();
    assert_eq!(again, 1);

    // A project that does not exist holds none.
    let missing = orc_zone_model::ProjectId::from_counter(4242);
    let err = store
        .set_secret(&missing, &db_password, "lost-Plain-Value", &olivia.id, T0)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("secret refers to a missing project {missing}")
    );

    // A project's secrets go with it.
    store.delete_project(&data.id).await.unwrap();
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM secrets WHERE project_id = $1")
        .bind(data.id.as_str())
        .fetch_one(&mut raw)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

pub async fn node_labels_and_cordons(db: &TestDb) {
    let store = db.store().await;
    let node = NodeId::from_counter(store.allocate_ids(1).await.unwrap());
    store.set_node_label(&node, "tier", "front").await.unwrap();
    store.set_node_label(&node, "tier", "back").await.unwrap();
    store.set_node_label(&node, "disk", "ssd").await.unwrap();
    let labels = store.node_labels(&node).await.unwrap();
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        [
            ("disk".to_string(), "ssd".to_string()),
            ("tier".to_string(), "back".to_string())
        ]
    );
    assert!(store.remove_node_label(&node, "disk").await.unwrap());
    assert!(!store.remove_node_label(&node, "disk").await.unwrap());
    assert!(!store.node_cordoned(&node).await.unwrap());
    assert!(
        store
            .set_node_cordon(&node, true, false, Some("mia"), T0)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_node_cordon(&node, true, false, Some("mia"), T0)
            .await
            .unwrap(),
        "once"
    );
    assert_eq!(store.node_cordon(&node).await.unwrap(), Some(false));
    // A drain turns a cordon into a drain; a cordon again does not end it.
    assert!(
        store
            .set_node_cordon(&node, true, true, Some("mia"), T0)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_node_cordon(&node, true, false, Some("mia"), T0)
            .await
            .unwrap()
    );
    assert_eq!(store.node_cordon(&node).await.unwrap(), Some(true));
    assert!(store.node_cordoned(&node).await.unwrap());
    assert!(
        store
            .set_node_cordon(&node, false, false, None, T0)
            .await
            .unwrap()
    );
    assert!(!store.node_cordoned(&node).await.unwrap());
}

pub async fn certificates_are_sealed_and_follow_their_domain(db: &TestDb) {
    let store = db.store().await;
    let web = orc_zone_model::ProjectId::from_counter(7001);
    let shop = orc_zone_model::ProjectId::from_counter(7002);
    let domain = "shop.example.com";

    // A domain new to the store is due at once, with nothing issued.
    let row = store.want_certificate(domain, &web, T0).await.unwrap();
    assert_eq!(
        (row.project.clone(), row.chain_pem.clone(), row.attempts),
        (web.clone(), None, 0)
    );
    assert_eq!(row.next_attempt_at, T0);
    assert!(
        store
            .issued_certificates(&web, T0)
            .await
            .unwrap()
            .is_empty()
    );

    // Issued: the key is sealed in the database and opens for the project's nodes.
    let key_pem = "-----BEGIN PRIVATE KEY-----\nsecret-key-bytes\n-----END PRIVATE KEY-----\n";
    let not_after = T0.plus_millis(90 * 86_400_000);
    let renew_at = T0.plus_millis(60 * 86_400_000);
    let kept = store
        .record_certificate_issued(domain, &web, "CHAIN", key_pem, not_after, renew_at, T0)
        .await
        .unwrap();
    assert!(kept);
    let mut raw = db.raw().await;
    let stored: String =
        sqlx::query_scalar("SELECT sealed_key FROM certificates WHERE domain = 'shop.example.com'")
            .fetch_one(&mut raw)
            .await
            .unwrap();
    assert!(
        !stored.contains("secret-key-bytes"),
        "the key is stored sealed"
    );
    let issued = store.issued_certificates(&web, T0).await.unwrap();
    assert_eq!(issued.len(), 1);
    assert_eq!(
        (issued[0].domain.as_str(), issued[0].chain_pem.as_str()),
        (domain, "CHAIN")
    );
    assert_eq!(issued[0].key_pem.as_str(), key_pem);
    assert!(!format!("{:?}", issued[0]).contains("secret-key-bytes"));
    // An ended certificate is not handed out.
    assert!(
        store
            .issued_certificates(&web, not_after)
            .await
            .unwrap()
            .is_empty()
    );

    // A failed renewal keeps the certificate and says why.
    let retry = T0.plus_millis(120_000);
    store
        .record_certificate_failed(domain, &web, "the challenge failed: 404", retry, T0)
        .await
        .unwrap();
    let row = store.certificate(domain).await.unwrap().unwrap();
    assert_eq!(row.error.as_deref(), Some("the challenge failed: 404"));
    assert_eq!((row.attempts, row.next_attempt_at), (1, retry));
    assert_eq!(row.chain_pem.as_deref(), Some("CHAIN"));
    assert_eq!(store.issued_certificates(&web, T0).await.unwrap().len(), 1);

    // Wanted again by the same project: nothing changes but the time.
    let t1 = T0.plus_millis(1000);
    let row = store.want_certificate(domain, &web, t1).await.unwrap();
    assert_eq!((row.wanted_at, row.attempts), (t1, 1));
    assert_eq!(row.chain_pem.as_deref(), Some("CHAIN"));

    // The domain moves to another project: it starts over, and the key stays behind.
    let row = store.want_certificate(domain, &shop, t1).await.unwrap();
    assert_eq!(
        (
            row.project.clone(),
            row.chain_pem.clone(),
            row.error.clone()
        ),
        (shop.clone(), None, None)
    );
    assert_eq!((row.attempts, row.next_attempt_at), (0, t1));
    assert!(
        store
            .issued_certificates(&shop, t1)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .issued_certificates(&web, t1)
            .await
            .unwrap()
            .is_empty()
    );
    // A late success for the former owner is not kept.
    let kept = store
        .record_certificate_issued(domain, &web, "CHAIN", key_pem, not_after, renew_at, t1)
        .await
        .unwrap();
    assert!(!kept);
    assert_eq!(store.project_certificates(&shop).await.unwrap().len(), 1);
    assert!(store.project_certificates(&web).await.unwrap().is_empty());

    // Not wanted for long: removed.
    store
        .want_certificate("old.example.com", &web, T0)
        .await
        .unwrap();
    let gone = store.forget_certificates(t1).await.unwrap();
    assert_eq!(gone, ["old.example.com"]);
    assert_eq!(store.certificates().await.unwrap().len(), 1);

    // The ACME account: sealed, and the first kept wins.
    let dir = "https://acme.example/dir";
    assert!(store.acme_account(dir).await.unwrap().is_none());
    let first = store
        .keep_acme_account(dir, "{\"id\":\"one\"}", T0)
        .await
        .unwrap();
    let second = store
        .keep_acme_account(dir, "{\"id\":\"two\"}", t1)
        .await
        .unwrap();
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("{\"id\":\"one\"}", "{\"id\":\"one\"}")
    );
    let stored: String = sqlx::query_scalar("SELECT sealed_credentials FROM acme_accounts")
        .fetch_one(&mut raw)
        .await
        .unwrap();
    assert!(!stored.contains("one"));

    // Challenges: answered by the project's nodes until they end.
    let challenge = orc_zone_store::AcmeChallenge {
        token: "tok-1".into(),
        domain: domain.into(),
        key_authorization: "tok-1.thumb".into(),
    };
    store
        .put_acme_challenge(&challenge, &shop, T0.plus_millis(60_000))
        .await
        .unwrap();
    assert_eq!(
        store.acme_challenges(&shop, T0).await.unwrap(),
        std::slice::from_ref(&challenge)
    );
    assert!(store.acme_challenges(&web, T0).await.unwrap().is_empty());
    assert!(
        store
            .acme_challenges(&shop, T0.plus_millis(60_000))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .expire_acme_challenges(T0.plus_millis(60_000))
            .await
            .unwrap(),
        1
    );
    store
        .put_acme_challenge(&challenge, &shop, t1)
        .await
        .unwrap();
    store.delete_acme_challenge("tok-1").await.unwrap();
    assert!(store.acme_challenges(&shop, T0).await.unwrap().is_empty());
}
