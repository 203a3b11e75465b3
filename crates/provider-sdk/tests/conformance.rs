//! The conformance cases against `FakeProvider`, through the real gRPC stream on loopback,
//! and against deliberately broken providers, to show each case catches what it claims.

use std::sync::Arc;
use std::time::Duration;

use orc_common::Shape;
use orc_proto::{
    Catalog, ClassId, Deploy, DeployResult, DestroyResult, Inventory, NodeId, OsId, PoolPath,
    Purpose, Quote, QuoteReply, Refusal, RefusalKind,
};
use orc_provider_sdk::conformance::{self, ConformanceSetup};
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::{HelloInfo, ProgressSink, Provider};

fn quote(node_id: &str) -> Quote {
    Quote {
        pool: PoolPath::new("acme/web/app").unwrap(),
        node_id: NodeId::new(node_id).unwrap(),
        purpose: Purpose::Tenant,
        shape: Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Default::default(),
            disks_gib: vec![],
        },
        class: ClassId::new("eu-central").unwrap(),
        os: OsId::new("debian-12").unwrap(),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    }
}

/// A cloud with a small deploy delay and one refused quote per refusal kind.
fn setup(cloud: &Arc<FakeCloud>) -> ConformanceSetup {
    cloud.set_deploy_delay(Duration::from_millis(100));
    let mut setup = ConformanceSetup::new(quote("template"));
    for kind in RefusalKind::ALL {
        let refused = quote(&format!("refused-{kind}"));
        cloud.refuse_node(
            refused.node_id.clone(),
            Some(Refusal::new(kind, format!("Words for {kind}."))),
        );
        setup.refusals.push((refused, kind));
    }
    let counted = Arc::clone(cloud);
    setup.count_instances = Some(Arc::new(move |node| {
        let cloud = Arc::clone(&counted);
        Box::pin(async move { cloud.instance_count(&node) })
    }));
    setup
}

#[tokio::test]
async fn fake_deploy_is_idempotent() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    conformance::deploy_is_idempotent(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap();
    assert!(cloud.instances().is_empty());
    assert_eq!(cloud.creates(), 2);
}

#[tokio::test]
async fn fake_destroy_of_absent_node_succeeds() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    conformance::destroy_of_absent_node_succeeds(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap();
    assert_eq!(cloud.deletes(), 1);
}

#[tokio::test]
async fn fake_inventory_is_complete() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    conformance::inventory_is_complete(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap();
}

#[tokio::test]
async fn fake_without_inventory_sends_none() {
    let cloud = FakeCloud::new();
    cloud.set_inventory_unreadable(true);
    let mut setup = setup(&cloud);
    setup.reports_inventory = false;
    conformance::inventory_is_complete(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap();
    // The same provider fails the case when the setup claims it reports inventory.
    setup.reports_inventory = true;
    let err = conformance::inventory_is_complete(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap_err();
    assert_eq!(err.problem, "the provider could not report its inventory");
}

#[tokio::test]
async fn fake_refusal_kinds_round_trip() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    conformance::refusal_kinds_round_trip(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
        .await
        .unwrap();
}

#[tokio::test]
async fn fake_reconnect_resends_in_flight_work_once() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    cloud.set_deploy_delay(Duration::from_millis(300));
    conformance::reconnect_resends_in_flight_work_once(
        || FakeProvider::new(Arc::clone(&cloud)),
        &setup,
    )
    .await
    .unwrap();
    assert_eq!(cloud.creates(), 1);
}

#[tokio::test]
async fn fake_passes_all_cases() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    let failures = conformance::run_all(|| FakeProvider::new(Arc::clone(&cloud)), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Wraps the fake and breaks one behaviour.
#[derive(Debug)]
struct Broken {
    inner: FakeProvider,
    flaw: Flaw,
}

#[derive(Debug, Clone, Copy)]
enum Flaw {
    /// Deploy replaces any existing instance with a new one.
    DeployRecreates,
    /// Inventory leaves out the last node.
    InventoryDropsOne,
    /// Every refusal goes out as `failed`.
    RefusalsBecomeFailed,
    /// Destroy refuses a node it does not hold.
    DestroyAbsentFails,
    /// Refusals go out without words.
    RefusalsWithoutWords,
}

impl Provider for Broken {
    fn hello(&self) -> HelloInfo {
        self.inner.hello()
    }

    async fn catalog(&self) -> Catalog {
        self.inner.catalog().await
    }

    async fn quote(&self, quote: Quote) -> QuoteReply {
        match (self.flaw, self.inner.quote(quote).await) {
            (Flaw::RefusalsBecomeFailed, QuoteReply::Refused(r)) => {
                QuoteReply::Refused(Refusal::new(RefusalKind::Failed, r.words))
            }
            (Flaw::RefusalsWithoutWords, QuoteReply::Refused(r)) => {
                QuoteReply::Refused(Refusal::new(r.kind, ""))
            }
            (_, reply) => reply,
        }
    }

    async fn deploy(&self, deploy: Deploy, progress: ProgressSink) -> DeployResult {
        if let Flaw::DeployRecreates = self.flaw {
            self.inner.destroy(deploy.node_id.clone()).await;
        }
        self.inner.deploy(deploy, progress).await
    }

    async fn destroy(&self, node_id: NodeId) -> DestroyResult {
        if let Flaw::DestroyAbsentFails = self.flaw
            && self.inner.cloud().instance_count(&node_id) == 0
        {
            return DestroyResult::Refused(Refusal::new(RefusalKind::Failed, "No such node."));
        }
        self.inner.destroy(node_id).await
    }

    async fn inventory(&self) -> Option<Inventory> {
        let mut inventory = self.inner.inventory().await?;
        if let Flaw::InventoryDropsOne = self.flaw {
            inventory.nodes.pop();
        }
        Some(inventory)
    }
}

fn broken(cloud: &Arc<FakeCloud>, flaw: Flaw) -> impl Fn() -> Broken {
    let cloud = Arc::clone(cloud);
    move || Broken {
        inner: FakeProvider::new(Arc::clone(&cloud)),
        flaw,
    }
}

#[tokio::test]
async fn a_recreating_deploy_fails_the_idempotency_case() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    let err = conformance::deploy_is_idempotent(broken(&cloud, Flaw::DeployRecreates), &setup)
        .await
        .unwrap_err();
    assert_eq!(err.case, "deploy_is_idempotent");
    assert!(
        err.problem.starts_with("second deploy of conformance-"),
        "{err}"
    );
}

#[tokio::test]
async fn an_inventory_missing_a_node_fails_the_inventory_case() {
    let cloud = FakeCloud::new();
    let mut setup = setup(&cloud);
    setup.step_timeout = Duration::from_secs(2);
    let err = conformance::inventory_is_complete(broken(&cloud, Flaw::InventoryDropsOne), &setup)
        .await
        .unwrap_err();
    assert_eq!(err.case, "inventory_is_complete");
    assert_eq!(
        err.problem,
        "an inventory with both nodes: no answer within 2 s"
    );
}

#[tokio::test]
async fn a_changed_refusal_kind_fails_the_refusal_case() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    let err =
        conformance::refusal_kinds_round_trip(broken(&cloud, Flaw::RefusalsBecomeFailed), &setup)
            .await
            .unwrap_err();
    assert_eq!(
        err.problem,
        "quote for refused-no_capacity refused as failed instead of no_capacity"
    );
}

#[tokio::test]
async fn a_refused_destroy_of_an_absent_node_fails_the_destroy_case() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    let err = conformance::destroy_of_absent_node_succeeds(
        broken(&cloud, Flaw::DestroyAbsentFails),
        &setup,
    )
    .await
    .unwrap_err();
    assert!(
        err.problem.ends_with("refused: failed: No such node."),
        "{err}"
    );
}

#[tokio::test]
async fn the_refusal_case_needs_refusals() {
    let cloud = FakeCloud::new();
    let setup = ConformanceSetup::new(quote("template"));
    let err =
        conformance::refusal_kinds_round_trip(|| FakeProvider::new(Arc::clone(&cloud)), &setup)
            .await
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "conformance case refusal_kinds_round_trip: the setup lists no refusals; give at least \
         one refused quote"
    );
}

#[tokio::test]
async fn a_refusal_without_words_is_named_by_the_refusal_case() {
    let cloud = FakeCloud::new();
    let setup = setup(&cloud);
    let err =
        conformance::refusal_kinds_round_trip(broken(&cloud, Flaw::RefusalsWithoutWords), &setup)
            .await
            .unwrap_err();
    assert_eq!(
        err.problem,
        "quote: the provider sent an invalid message: quote_reply.refusal.words is missing"
    );
}
