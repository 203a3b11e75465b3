//! The reconcilers against a fake provider called directly, on a manual clock: refusal
//! kinds and retry times, operator_fix waiting for a configuration change, pricing and
//! usage, resize down, lost detection, and pool deletion.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::hub_support::*;
use orc_common::RefusalKind;
use orc_common::time::ManualClock;
use orc_proto::{Inventory, InventoryNode, Refusal};
use orc_provider_sdk::fake::FakeCloud;
use orc_zone::backend::Backends;
use orc_zone::model::{Markup, Node, NodeState, PricingStrategy, Timestamp};
use orc_zone::reconcile::apply_inventory;
use rust_decimal::Decimal;

async fn nodes(t: &Tenant, pool: &orc_zone::model::PoolId) -> Vec<Node> {
    t.store.list_nodes_by_pool(pool, true).await.unwrap()
}

#[tokio::test]
async fn reconcile_refusal_kinds_drive_node_states_and_retry_times() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let backend = Direct::new(&cloud);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    let cases = [
        (RefusalKind::NoCapacity, NodeState::Parked, 60_000),
        (RefusalKind::Counting, NodeState::Pending, 5_000),
        (RefusalKind::Transient, NodeState::Pending, 2_000),
        (RefusalKind::OperatorFix, NodeState::Parked, 30_000),
        (RefusalKind::Failed, NodeState::Pending, 2_000),
        (RefusalKind::Unplaceable, NodeState::Parked, 30_000),
    ];
    let mut pools = Vec::new();
    for (i, (kind, _, _)) in cases.iter().enumerate() {
        let pool = create_pool(&t, &provider, &format!("p{i}"), 1).await;
        let node = nodes(&t, &pool.id).await.remove(0);
        cloud.refuse_node(
            node.id.clone(),
            Some(Refusal::new(*kind, format!("words {kind}"))),
        );
        pools.push(pool);
    }
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    for ((kind, state, delay), pool) in cases.iter().zip(&pools) {
        let node = nodes(&t, &pool.id).await.remove(0);
        assert_eq!(node.status.state, *state, "{kind}");
        assert_eq!(
            node.status.state_words,
            Some(format!("words {kind}")),
            "{kind}"
        );
        assert_eq!(node.status.refusal.map(|r| r.as_str()), Some(kind.as_str()));
        assert_eq!(
            node.status.next_attempt_at,
            Some(START.plus_millis(*delay)),
            "{kind} retries after {delay} ms"
        );
    }
    let parked = nodes(&t, &pools[0].id).await.remove(0);
    let events = t
        .store
        .list_events(
            &orc_zone::model::EventScope {
                node_id: Some(parked.id.clone()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.kind.as_str(), e.words.as_str()))
        .collect();
    assert_eq!(seen, [("node.parked", "words no_capacity (no_capacity)")]);
    // A second transient refusal backs off further.
    clock.advance(Duration::from_secs(2));
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    let transient = nodes(&t, &pools[2].id).await.remove(0);
    assert_eq!(transient.status.attempts, 2);
    assert_eq!(
        transient.status.next_attempt_at,
        Some(START.plus_millis(2_000 + 4_000))
    );
    // Nothing was created for any refused node.
    assert_eq!(cloud.creates(), 0);
    assert!(backend.quotes.load(Ordering::SeqCst) >= 7);
}

#[tokio::test]
async fn reconcile_operator_fix_waits_for_a_configuration_change() {
    waits_for_a_configuration_change(RefusalKind::OperatorFix).await;
}

#[tokio::test]
async fn reconcile_unplaceable_waits_for_a_new_catalog() {
    waits_for_a_configuration_change(RefusalKind::Unplaceable).await;
}

async fn waits_for_a_configuration_change(kind: RefusalKind) {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let backend = Direct::new(&cloud);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    let pool = create_pool(&t, &provider, "web", 1).await;
    let class = orc_proto::ClassId::new("eu-central").unwrap();
    cloud.refuse_class(
        class.clone(),
        Some(Refusal::new(kind, "The provider cannot take this now.")),
    );
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    assert_eq!(nodes(&t, &pool.id).await[0].status.state, NodeState::Parked);
    let quotes = backend.quotes.load(Ordering::SeqCst);
    cloud.refuse_class(class, None);

    // Re-checks without a configuration change send nothing.
    for _ in 0..3 {
        clock.advance(Duration::from_secs(30));
        reconciler.pass().await.unwrap();
        reconciler.settle().await.unwrap();
    }
    let node = nodes(&t, &pool.id).await.remove(0);
    assert_eq!(node.status.state, NodeState::Parked);
    assert_eq!(node.status.refusal, Some(kind));
    assert_eq!(
        backend.quotes.load(Ordering::SeqCst),
        quotes,
        "no quote while waiting"
    );

    // The provider's configuration changes: the node is quoted again and deploys.
    clock.advance(Duration::from_secs(1));
    *backend.config_changed.lock().unwrap() = Some(clock_now(&clock));
    clock.advance(Duration::from_secs(30));
    drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(cloud.creates(), 1);
}

fn clock_now(clock: &ManualClock) -> Timestamp {
    use orc_common::time::Clock;
    clock.now()
}

#[tokio::test]
async fn reconcile_pricing_unpriced_markup_and_usage_lines() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, Backends::single(Direct::new(&cloud)), &clock);

    let free = create_pool(&t, &provider, "unpriced", 1).await;
    drive(
        &reconciler,
        &t.store,
        &free.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    let half = Markup::new(Decimal::new(5, 1)).unwrap();
    t.store
        .set_provider_pricing(&provider.id, PricingStrategy::Markup(half), START)
        .await
        .unwrap();
    let priced = create_pool(&t, &provider, "priced", 1).await;
    drive(
        &reconciler,
        &t.store,
        &priced.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    let zero = Markup::new(Decimal::ZERO).unwrap();
    t.store
        .set_provider_pricing(&provider.id, PricingStrategy::Markup(zero), START)
        .await
        .unwrap();
    let at_cost = create_pool(&t, &provider, "at-cost", 1).await;
    drive(
        &reconciler,
        &t.store,
        &at_cost.id,
        4,
        all_in(NodeState::Running),
    )
    .await;

    let unpriced = nodes(&t, &free.id).await.remove(0);
    assert_eq!(unpriced.status.price, None, "unpriced, not zero");
    assert_eq!(unpriced.status.markup, None);
    let marked = nodes(&t, &priced.id).await.remove(0);
    assert_eq!(
        marked.status.markup,
        Some(Decimal::new(5, 1)),
        "markup kept after change"
    );
    let price = marked.status.price.expect("priced");
    assert_eq!(
        price.amount,
        Decimal::new(750, 2),
        "5.00 a month with 50 % markup"
    );
    let cost = nodes(&t, &at_cost.id).await.remove(0);
    assert_eq!(cost.status.markup, Some(Decimal::ZERO));
    assert_eq!(cost.status.price.unwrap().amount, Decimal::new(500, 2));

    // An hour later the priced nodes have accrued one hour; the unpriced one nothing.
    clock.advance(Duration::from_secs(3600));
    let report = reconciler.pass().await.unwrap();
    assert_eq!(report.accrued, 2);
    let month = "2026-03".parse().unwrap();
    let lines = t.store.list_usage(&t.project.id, &month).await.unwrap();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let line = lines
        .iter()
        .find(|l| l.node_id.as_ref() == Some(&marked.id))
        .expect("line of the marked-up node");
    assert_eq!(line.description, "2 vCPU · 4 GiB · eu-central");
    assert_eq!(line.hours, Decimal::ONE);
    assert_eq!(line.amount, Decimal::new(750, 2) / Decimal::from(730));
    assert!(
        lines
            .iter()
            .all(|l| l.node_id.as_ref() != Some(&unpriced.id))
    );
    // Accruing again at the same instant adds nothing.
    orc_zone::reconcile::accrue_usage(
        &t.store,
        &orc_zone::pricing::BillingSubject {
            project_id: t.project.id.clone(),
            pool_id: priced.id.clone(),
            node_id: marked.id.clone(),
            description: line.description.clone(),
            rate: line.rate,
            public_ipv4: false,
        },
        clock_now(&clock),
    )
    .await
    .unwrap();
    let again = t.store.list_usage(&t.project.id, &month).await.unwrap();
    assert_eq!(again, lines);
}

#[tokio::test]
async fn reconcile_resize_down_destroys_and_deleting_pool_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, Backends::single(Direct::new(&cloud)), &clock);
    let pool = create_pool(&t, &provider, "web", 3).await;
    drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    t.store.resize_pool(&pool.id, 1, START).await.unwrap();
    let after = drive(&reconciler, &t.store, &pool.id, 4, |nodes| {
        nodes
            .iter()
            .filter(|n| n.status.state == NodeState::Ended)
            .count()
            == 2
    })
    .await;
    let live: Vec<_> = after.iter().filter(|n| n.status.state.is_live()).collect();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].slot, 0);
    assert_eq!(cloud.deletes(), 2);
    assert_eq!(cloud.instances().len(), 1);

    t.store.mark_pool_deleting(&pool.id, START).await.unwrap();
    drive(&reconciler, &t.store, &pool.id, 4, all_in(NodeState::Ended)).await;
    assert_eq!(reconciler.pool_pass().await.unwrap(), 1);
    assert!(t.store.get_pool(&pool.id).await.is_err(), "pool deleted");
    assert!(cloud.instances().is_empty());
}

#[tokio::test]
async fn reconcile_complete_inventory_marks_missing_running_nodes_lost() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, Backends::single(Direct::new(&cloud)), &clock);
    let pool = create_pool(&t, &provider, "web", 2).await;
    let running = drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    let kept = &running[0];
    let report = Inventory {
        nodes: vec![InventoryNode {
            node_id: kept.id.clone(),
            site: orc_proto::SiteName::new(kept.status.site.clone().unwrap()).unwrap(),
            instance_ref: orc_proto::InstanceRef::new(kept.status.instance_ref.clone().unwrap())
                .unwrap(),
            state: orc_proto::InstanceState::Running,
        }],
        sites: vec![],
        pool_addresses: vec![],
    };
    let grace = Duration::from_secs(120);
    let within_grace = apply_inventory(&t.store, &provider, &report, START, grace).await;
    assert_eq!(
        within_grace.unwrap().lost,
        0,
        "nodes that just started are spared"
    );
    let later = START.plus_millis(121_000);
    assert_eq!(
        apply_inventory(&t.store, &provider, &report, later, grace)
            .await
            .unwrap()
            .lost,
        1
    );
    let after = nodes(&t, &pool.id).await;
    assert_eq!(after[0].status.state, NodeState::Running);
    assert_eq!(after[1].status.state, NodeState::Lost);
    assert_eq!(
        after[1].status.state_words.as_deref(),
        Some("The node is no longer reported by its provider.")
    );
    assert_eq!(after[1].status.lost_at, Some(later));
    assert_eq!(after[1].status.next_attempt_at, Some(later));
    let events = t
        .store
        .list_events(
            &orc_zone::model::EventScope {
                node_id: Some(after[1].id.clone()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["node.running", "node.lost"]);
}

fn listing(nodes: &[&Node]) -> Inventory {
    Inventory {
        nodes: nodes
            .iter()
            .map(|node| InventoryNode {
                node_id: node.id.clone(),
                site: orc_proto::SiteName::new(node.status.site.clone().unwrap()).unwrap(),
                instance_ref: orc_proto::InstanceRef::new(
                    node.status.instance_ref.clone().unwrap(),
                )
                .unwrap(),
                state: orc_proto::InstanceState::Running,
            })
            .collect(),
        sites: vec![],
        pool_addresses: vec![],
    }
}

#[tokio::test]
async fn reconcile_lost_node_is_restored_when_reported_again_else_replaced_in_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let zero = Markup::new(Decimal::ZERO).unwrap();
    t.store
        .set_provider_pricing(&provider.id, PricingStrategy::Markup(zero), START)
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, Backends::single(Direct::new(&cloud)), &clock);
    let pool = create_pool(&t, &provider, "web", 2).await;
    let running = drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    let (kept, missing) = (&running[0], &running[1]);
    let grace = Duration::from_secs(120);

    // Missing from one report, listed by the next: running again, with an event.
    let t1 = START.plus_millis(600_000);
    clock.set(t1);
    let marked = apply_inventory(&t.store, &provider, &listing(&[kept]), t1, grace).await;
    assert_eq!(marked.unwrap().lost, 1);
    let t2 = t1.plus_millis(60_000);
    clock.set(t2);
    apply_inventory(&t.store, &provider, &listing(&[kept, missing]), t2, grace)
        .await
        .unwrap();
    let node = t.store.get_node(&missing.id).await.unwrap();
    assert_eq!(node.status.state, NodeState::Running);
    assert_eq!(node.status.lost_at, None);
    let kinds: Vec<String> = t
        .store
        .list_events(
            &orc_zone::model::EventScope {
                node_id: Some(missing.id.clone()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["node.running", "node.lost", "node.found"]);

    // Missing again and not reported within the replacement delay: a pass before the
    // delay leaves it lost; one after it destroys what is left of it.
    // (The restored node is written by the next pass: an accrual that opens its grace
    // again. A report after the grace marks it lost.)
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    let t3 = t2.plus_millis(600_000);
    clock.set(t3);
    apply_inventory(&t.store, &provider, &listing(&[kept]), t3, grace)
        .await
        .unwrap();
    let month = "2026-03".parse().unwrap();
    let hours_of = |lines: Vec<orc_zone::model::UsageLine>| -> Decimal {
        lines
            .iter()
            .filter(|l| l.node_id.as_ref() == Some(&missing.id))
            .map(|l| l.hours)
            .sum()
    };
    let billed_at_loss = hours_of(t.store.list_usage(&t.project.id, &month).await.unwrap());
    assert!(
        billed_at_loss > Decimal::ZERO,
        "billed until it went missing"
    );
    clock.set(t3.plus_millis(240_000));
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    let node = t.store.get_node(&missing.id).await.unwrap();
    assert_eq!(node.status.state, NodeState::Lost, "still within the delay");
    assert_eq!(cloud.deletes(), 0);

    clock.set(t3.plus_millis(300_000));
    reconciler.pass().await.unwrap();
    reconciler.settle().await.unwrap();
    let node = t.store.get_node(&missing.id).await.unwrap();
    assert_eq!(node.status.state, NodeState::Ended);
    assert_eq!(
        cloud.deletes(),
        1,
        "what was left of the lost node is destroyed"
    );
    assert_eq!(
        hours_of(t.store.list_usage(&t.project.id, &month).await.unwrap()),
        billed_at_loss,
        "no usage accrues for the time a node was lost"
    );

    // The pool pass gives the slot a new node, which is deployed like any other.
    reconciler.pool_pass().await.unwrap();
    let after = drive(&reconciler, &t.store, &pool.id, 4, |nodes| {
        nodes
            .iter()
            .filter(|n| n.status.state == NodeState::Running)
            .count()
            == 2
    })
    .await;
    let live: Vec<&Node> = after.iter().filter(|n| n.status.state.is_live()).collect();
    assert_eq!(live.len(), 2);
    let replacement = live.iter().find(|n| n.slot == missing.slot).unwrap();
    assert_ne!(replacement.id, missing.id);
    assert_eq!(cloud.instances().len(), 2);
    assert_eq!(reconciler.pool_pass().await.unwrap(), 0);
    assert!(t.store.pools_with_free_slots().await.unwrap().is_empty());
}

#[tokio::test]
async fn reconcile_a_deploy_refused_for_capacity_is_quoted_again_soon() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let backend = Direct::new(&cloud);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    cloud.push_deploy_fault(orc_provider_sdk::fake::DeployFault::RefuseBeforeCreate(
        Refusal::new(RefusalKind::NoCapacity, "sold out there"),
    ));
    let pool = create_pool(&t, &provider, "web", 1).await;
    // Quote, then deploy (refused).
    for _ in 0..2 {
        reconciler.pass().await.unwrap();
        reconciler.settle().await.unwrap();
    }
    let node = nodes(&t, &pool.id).await.remove(0);
    assert_eq!(node.status.state, NodeState::Pending);
    assert_eq!(node.status.refusal, Some(RefusalKind::NoCapacity));
    let due = node.status.next_attempt_at.unwrap();
    assert!(
        due <= clock_now(&clock).plus_millis(2_000),
        "due at {due:?}"
    );
    clock.set(due);
    let done = drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(done.len(), 1);
    assert_eq!(cloud.creates(), 1);
}

#[tokio::test]
async fn reconcile_gateways_are_never_billed_and_public_pools_get_an_ipv4_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = operator_provider(&t, "partner").await;
    let zero = Markup::new(Decimal::ZERO).unwrap();
    t.store
        .set_provider_pricing(&provider.id, PricingStrategy::Markup(zero), START)
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let reconciler = reconciler(&t.store, Backends::single(Direct::new(&cloud)), &clock);
    let gateway = t
        .store
        .create_pool(
            &orc_zone::model::NewPool {
                project_id: orc_zone::model::sys_project_id(),
                name: orc_zone_model::gateway::gateway_pool_name(&provider.id, "eu-central-a")
                    .unwrap(),
                size: 1,
                spec: spec(&provider),
            },
            START,
        )
        .await
        .unwrap()
        .pool;
    let public = t
        .store
        .create_pool(
            &orc_zone::model::NewPool {
                project_id: t.project.id.clone(),
                name: name("edge"),
                size: 1,
                spec: orc_zone::model::PoolSpec {
                    public: true,
                    ..spec(&provider)
                },
            },
            START,
        )
        .await
        .unwrap()
        .pool;
    drive(
        &reconciler,
        &t.store,
        &gateway.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    drive(
        &reconciler,
        &t.store,
        &public.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    clock.advance(Duration::from_secs(2 * 3600));
    reconciler.pass().await.unwrap();

    let month = "2026-03".parse().unwrap();
    let sys_lines = t
        .store
        .list_usage(&orc_zone::model::sys_project_id(), &month)
        .await
        .unwrap();
    assert!(
        sys_lines.is_empty(),
        "gateways are not billed: {sys_lines:#?}"
    );
    let lines = t.store.list_usage(&t.project.id, &month).await.unwrap();
    let descriptions: Vec<&str> = lines.iter().map(|l| l.description.as_str()).collect();
    assert_eq!(descriptions, ["2 vCPU · 4 GiB · eu-central", "public IPv4"]);
    assert!(lines.iter().all(|l| l.hours == Decimal::from(2)));
    assert_eq!(lines[1].rate.amount, Decimal::ZERO);
    assert_eq!(lines[1].amount, Decimal::ZERO);
    assert_eq!(
        lines[0].amount,
        Decimal::new(500, 2) / Decimal::from(730) * Decimal::from(2)
    );
}

#[tokio::test]
async fn reconcile_site_gateways_follow_tenant_nodes_and_public_pools_stay_on_one_site() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = operator_provider(&t, "partner").await;
    let gw = |site: &str| format!("gw-{}-{site}", provider.id);
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let backend = Direct::new(&cloud);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    let pool = create_pool(&t, &provider, "web", 2).await;
    drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;

    // A provider whose catalog does not ask for gateways gets none.
    reconciler.pool_pass().await.unwrap();
    let sys = orc_zone::model::sys_project_id();
    assert!(t.store.list_pools(&sys).await.unwrap().is_empty());

    // One that does gets one gateway pool per site in use, pinned to its site.
    backend.site_gateways.store(true, Ordering::SeqCst);
    reconciler.pool_pass().await.unwrap();
    let gateways = t.store.list_pools(&sys).await.unwrap();
    let names: Vec<&str> = gateways.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, [gw("eu-central-a")]);
    let gateway = &gateways[0];
    assert_eq!(gateway.size, 1);
    assert_eq!(gateway.spec.os, "gateway");
    assert_eq!(gateway.spec.region_class, "eu-central");
    let gw_nodes = drive(
        &reconciler,
        &t.store,
        &gateway.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(gw_nodes[0].status.site.as_deref(), Some("eu-central-a"));
    assert_eq!(
        gw_nodes[0].status.price, None,
        "a gateway is never priced to a tenant"
    );
    reconciler.pool_pass().await.unwrap();
    assert_eq!(
        t.store.get_pool(&gateway.id).await.unwrap().size,
        1,
        "stable"
    );

    // A public pool's nodes follow its address's site once the provider reports one.
    let mut public = orc_zone::model::NewPool {
        project_id: t.project.id.clone(),
        name: "edge".parse().unwrap(),
        size: 1,
        spec: spec(&provider),
    };
    public.spec.public = true;
    let public = t.store.create_pool(&public, START).await.unwrap().pool;
    let report = Inventory {
        nodes: vec![],
        sites: vec![],
        pool_addresses: vec![orc_proto::PoolAddress {
            pool: orc_proto::PoolPath::new("acme/web/edge").unwrap(),
            site: orc_proto::SiteName::new("eu-central-b").unwrap(),
            ipv4: std::net::Ipv4Addr::new(192, 0, 2, 10),
        }],
    };
    apply_inventory(
        &t.store,
        &provider,
        &report,
        START,
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    let edge = drive(
        &reconciler,
        &t.store,
        &public.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(edge[0].status.site.as_deref(), Some("eu-central-b"));
    let address = t.store.pool_address(&public.id).await.unwrap().unwrap();
    assert_eq!(
        (address.site.as_str(), address.ipv4.as_str()),
        ("eu-central-b", "192.0.2.10")
    );
    reconciler.pool_pass().await.unwrap();
    let mut names: Vec<String> = t
        .store
        .list_pools(&sys)
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.size == 1)
        .map(|p| p.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, [gw("eu-central-a"), gw("eu-central-b")]);

    // When the last tenant node of a site has ended, its gateway pool is deleted, so the
    // closed site leaves the pools list (the partner's site stays open for its own keep
    // period).
    t.store.resize_pool(&pool.id, 0, START).await.unwrap();
    drive(&reconciler, &t.store, &pool.id, 4, all_in(NodeState::Ended)).await;
    reconciler.pool_pass().await.unwrap();
    assert!(t.store.get_pool(&gateway.id).await.unwrap().deleting);
    drive(
        &reconciler,
        &t.store,
        &gateway.id,
        4,
        all_in(NodeState::Ended),
    )
    .await;
    reconciler.pool_pass().await.unwrap();
    reconciler.settle().await.unwrap();
    reconciler.pool_pass().await.unwrap();
    let pools = t.store.list_pools(&sys).await.unwrap();
    assert!(
        !pools.iter().any(|p| p.id == gateway.id),
        "the closed site's gateway pool is gone: {pools:?}"
    );
    let b = pools
        .iter()
        .find(|p| p.name.as_str() == gw("eu-central-b"))
        .unwrap();
    assert_eq!(b.size, 1, "site b still has the public pool's node");
    // A report without the address removes it.
    let empty = Inventory {
        nodes: vec![],
        sites: vec![],
        pool_addresses: vec![],
    };
    apply_inventory(&t.store, &provider, &empty, START, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(t.store.pool_address(&public.id).await.unwrap(), None);
}

#[tokio::test]
async fn reconcile_two_providers_with_one_site_name_each_get_their_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let first = operator_provider(&t, "partner").await;
    let second = operator_provider(&t, "other").await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let backend = Direct::new(&cloud);
    backend.site_gateways.store(true, Ordering::SeqCst);
    let reconciler = reconciler(&t.store, Backends::single(backend.clone()), &clock);
    for (provider, pool) in [(&first, "web"), (&second, "api")] {
        let pool = create_pool(&t, provider, pool, 1).await;
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
    let sys = orc_zone::model::sys_project_id();
    let mut gateways: Vec<(String, orc_zone::model::ProviderId, u32)> = t
        .store
        .list_pools(&sys)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name.to_string(), p.spec.provider_id, p.size))
        .collect();
    gateways.sort();
    assert_eq!(
        gateways,
        [
            (format!("gw-{}-eu-central-a", first.id), first.id.clone(), 1),
            (
                format!("gw-{}-eu-central-a", second.id),
                second.id.clone(),
                1
            ),
        ]
    );
}

/// With a bootstrap and a join grace, each deploy carries the node's own join token; a node
/// whose agent joins stays, one whose agent never joins is destroyed once the grace is over
/// and its slot gets a new node, deployed with a new token.
#[tokio::test]
async fn reconcile_a_node_whose_agent_never_joins_is_replaced_after_the_grace() {
    use orc_zone::agents::AgentBootstrap;
    use orc_zone::model::AgentState;
    use orc_zone_model::{NodeAgent, NodeFacts};
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let cloud = FakeCloud::new();
    let clock = ManualClock::new(START);
    let ca = orc_tls::ZoneCa::generate().unwrap();
    let options = orc_zone::reconcile::ReconcileOptions {
        join_grace: Some(Duration::from_secs(600)),
        bootstrap: Some(std::sync::Arc::new(AgentBootstrap {
            endpoint: "https://127.0.0.1:7400".into(),
            ca_pem: ca.cert_pem().to_string(),
            ca_fingerprint: ca.fingerprint(),
            binary: None,
            ttl: orc_zone_model::JoinTtl::default(),
        })),
        ..orc_zone::reconcile::ReconcileOptions::default()
    };
    let reconciler = orc_zone::reconcile::Reconciler::new(
        t.store.clone(),
        Backends::single(Direct::new(&cloud)),
        std::sync::Arc::new(clock.clone()),
        options,
    );
    let pool = create_pool(&t, &provider, "web", 2).await;
    let running = drive(
        &reconciler,
        &t.store,
        &pool.id,
        4,
        all_in(NodeState::Running),
    )
    .await;
    for instance in cloud.instances() {
        let script = String::from_utf8(instance.bootstrap).unwrap();
        assert!(script.contains(&format!("ORC_AGENT_NODE={}\n", instance.node_id)));
    }
    let (joined, silent) = (&running[0], &running[1]);
    t.store
        .record_node_join(&NodeAgent {
            node_id: joined.id.clone(),
            state: AgentState::Ready,
            joined_at: START,
            product_uuid: String::new(),
            cert_fingerprint: "sha256:aa".into(),
            previous_fingerprint: None,
            cert_not_after: START.plus_days(30),
            version: "test".into(),
            facts: NodeFacts::default(),
            desired_generation: 1,
            config_digest: String::new(),
            applied_generation: 1,
            apply_error: None,
            last_contact_at: START,
        })
        .await
        .unwrap();

    clock.set(START.plus_millis(9 * 60_000));
    reconciler.pool_pass().await.unwrap();
    assert_eq!(
        t.store.get_node(&silent.id).await.unwrap().status.state,
        NodeState::Running,
        "within the grace"
    );
    clock.set(START.plus_millis(11 * 60_000));
    reconciler.pool_pass().await.unwrap();
    let node = t.store.get_node(&silent.id).await.unwrap();
    assert_eq!(node.status.state, NodeState::Destroying);
    assert!(
        node.status
            .state_words
            .as_deref()
            .unwrap()
            .starts_with("its agent did not join within 10 min"),
        "{node:?}"
    );
    assert_eq!(
        t.store.get_node(&joined.id).await.unwrap().status.state,
        NodeState::Running
    );
    drive(&reconciler, &t.store, &pool.id, 4, |nodes| {
        nodes
            .iter()
            .any(|n| n.id == silent.id && n.status.state == NodeState::Ended)
    })
    .await;
    reconciler.pool_pass().await.unwrap();
    let after = drive(&reconciler, &t.store, &pool.id, 4, |nodes| {
        nodes
            .iter()
            .filter(|n| n.status.state == NodeState::Running)
            .count()
            == 2
    })
    .await;
    let replacement = after
        .iter()
        .find(|n| n.slot == silent.slot && n.status.state == NodeState::Running)
        .unwrap();
    assert_ne!(replacement.id, silent.id);
    let tokens = t.store.list_join_tokens(&replacement.id).await.unwrap();
    assert_eq!(
        tokens.len(),
        1,
        "the replacement was deployed with its own token"
    );
    let events = t
        .store
        .list_events(
            &orc_zone::model::EventScope {
                node_id: Some(silent.id.clone()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert!(
        events.iter().any(|e| e.kind == "node.unjoined"),
        "{events:?}"
    );
}

#[tokio::test]
async fn reconcile_an_inventory_says_when_what_the_mesh_plans_from_changed() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let provider = provider_row(&t).await;
    let mut public = orc_zone::model::NewPool {
        project_id: t.project.id.clone(),
        name: "edge".parse().unwrap(),
        size: 0,
        spec: spec(&provider),
    };
    public.spec.public = true;
    t.store.create_pool(&public, START).await.unwrap();
    let site = |prefix: &str| orc_proto::InventorySite {
        site: orc_proto::SiteName::new("eu-central-a").unwrap(),
        public_ipv4: Some(std::net::Ipv4Addr::new(198, 18, 0, 10)),
        private_prefix: Some(prefix.to_string()),
    };
    let address = orc_proto::PoolAddress {
        pool: orc_proto::PoolPath::new("acme/web/edge").unwrap(),
        site: orc_proto::SiteName::new("eu-central-a").unwrap(),
        ipv4: std::net::Ipv4Addr::new(198, 18, 0, 20),
    };
    let report =
        |sites: Vec<orc_proto::InventorySite>, addresses: Vec<orc_proto::PoolAddress>| Inventory {
            nodes: vec![],
            sites,
            pool_addresses: addresses,
        };
    let grace = Duration::from_secs(120);
    let mut at = START;
    let mut apply = async |inventory: Inventory| {
        at = at.plus_millis(60_000);
        apply_inventory(&t.store, &provider, &inventory, at, grace)
            .await
            .unwrap()
            .mesh_changed
    };
    assert!(
        apply(report(vec![site("10.1.0.0/24")], vec![])).await,
        "a new site"
    );
    assert!(
        !apply(report(vec![site("10.1.0.0/24")], vec![])).await,
        "the same site again, reported later"
    );
    assert!(
        apply(report(vec![site("10.2.0.0/24")], vec![])).await,
        "the site's prefix moved"
    );
    assert!(
        apply(report(vec![site("10.2.0.0/24")], vec![address.clone()])).await,
        "a pool address"
    );
    assert!(!apply(report(vec![site("10.2.0.0/24")], vec![address])).await);
    assert!(
        apply(report(vec![], vec![])).await,
        "the site and the address are gone"
    );
    assert!(!apply(report(vec![], vec![])).await);
}
