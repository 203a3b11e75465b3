//! Conformance cases every provider passes in its own tests.
//!
//! Each case starts the provider under the real runner, dials a [`ZoneHarness`] over gRPC
//! on loopback, plays the zone and checks what comes back. A provider's test supplies a
//! factory (called for every replica a case starts: providers are stateless, so a fresh
//! instance over the same cloud must behave like the old one) and a [`ConformanceSetup`].
//!
//! The cases:
//! - [`deploy_is_idempotent`]: deploying a node twice, concurrently or from a fresh
//!   replica, makes one instance and returns the same instance ref;
//! - [`destroy_of_absent_node_succeeds`]: destroy of a never-deployed or already-destroyed
//!   node answers destroyed;
//! - [`inventory_is_complete`]: inventory reports list every node exactly once and drop
//!   destroyed ones, or (for providers that report none) nothing is sent;
//! - [`refusal_kinds_round_trip`]: refusals reach the zone with kind and words unchanged;
//! - [`reconnect_resends_in_flight_work_once`]: a stream dropped mid-deploy reconnects,
//!   and the deploy the zone sends again completes with exactly one instance.
//!
//! Cases use node ids starting with `conformance-` and destroy what they deploy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use orc_proto::{
    Bootstrap, Deploy, DeployResult, Deployed, DestroyResult, Inventory, NodeId, Quote, QuoteReply,
    RefusalKind, ReplicaRole, ZoneBody,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::harness::{ZoneConn, ZoneHarness, deploy_outcome};
use crate::provider::Provider;
use crate::runner::{ProviderRunner, RunnerOptions};
use orc_common::Backoff;

/// Counts the instances a cloud holds for a node, by reading the cloud directly.
pub type InstanceCounter =
    Arc<dyn Fn(NodeId) -> Pin<Box<dyn Future<Output = usize> + Send>> + Send + Sync>;

/// What a provider's test tells the cases about it.
#[derive(Clone)]
pub struct ConformanceSetup {
    /// A quote the provider answers with an offer; the cases replace its node id.
    pub quote: Quote,
    /// SSH keys and bootstrap payload for deploys.
    pub ssh_keys: Vec<String>,
    pub bootstrap: Bootstrap,
    /// Quotes the provider refuses, with the kind it must refuse them with. At least one.
    pub refusals: Vec<(Quote, RefusalKind)>,
    /// Whether the provider reports inventory. A provider that cannot must send none.
    pub reports_inventory: bool,
    /// Counts instances in the cloud behind the provider, when the test can.
    pub count_instances: Option<InstanceCounter>,
    /// Runner settings for the cases (short inventory interval, quick reconnects).
    pub runner_options: RunnerOptions,
    /// Longest wait for any one step (an answer, a reconnect).
    pub step_timeout: Duration,
}

impl std::fmt::Debug for ConformanceSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConformanceSetup")
            .field("quote", &self.quote)
            .field("refusals", &self.refusals)
            .field("reports_inventory", &self.reports_inventory)
            .field("count_instances", &self.count_instances.is_some())
            .field("runner_options", &self.runner_options)
            .field("step_timeout", &self.step_timeout)
            .finish_non_exhaustive()
    }
}

impl ConformanceSetup {
    /// A setup with `quote` as the accepted quote and defaults for the rest.
    pub fn new(quote: Quote) -> Self {
        ConformanceSetup {
            quote,
            ssh_keys: Vec::new(),
            bootstrap: Bootstrap::default(),
            refusals: Vec::new(),
            reports_inventory: true,
            count_instances: None,
            runner_options: RunnerOptions {
                inventory_interval: Some(Duration::from_millis(100)),
                catalog_interval: None,
                backoff: Backoff {
                    initial: Duration::from_millis(20),
                    max: Duration::from_millis(500),
                },
                jitter_seed: Some(7),
                ..RunnerOptions::default()
            },
            step_timeout: Duration::from_secs(20),
        }
    }
}

/// A case found the provider not conforming.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance case {case}: {problem}")]
pub struct ConformanceError {
    pub case: &'static str,
    pub problem: String,
}

type CaseResult = Result<(), ConformanceError>;

/// Runs every case; returns the failures (empty when the provider conforms).
pub async fn run_all<P, F>(make: F, setup: &ConformanceSetup) -> Vec<ConformanceError>
where
    P: Provider,
    F: Fn() -> P,
{
    let mut failures = Vec::new();
    let results = [
        deploy_is_idempotent(&make, setup).await,
        destroy_of_absent_node_succeeds(&make, setup).await,
        inventory_is_complete(&make, setup).await,
        refusal_kinds_round_trip(&make, setup).await,
        reconnect_resends_in_flight_work_once(&make, setup).await,
    ];
    for result in results {
        if let Err(e) = result {
            failures.push(e);
        }
    }
    failures
}

/// A provider under the real runner, connected to a harness and welcomed as serving.
struct Rig {
    harness: ZoneHarness,
    conn: ZoneConn,
    stop: Option<oneshot::Sender<()>>,
    runner: JoinHandle<()>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.runner.abort();
    }
}

/// Checks and waits inside one case, each failure naming the case.
struct Case<'a> {
    name: &'static str,
    setup: &'a ConformanceSetup,
}

static NODE_COUNTER: AtomicU64 = AtomicU64::new(1);

impl Case<'_> {
    fn fail(&self, problem: impl Into<String>) -> ConformanceError {
        ConformanceError {
            case: self.name,
            problem: problem.into(),
        }
    }

    fn check(&self, ok: bool, problem: impl FnOnce() -> String) -> CaseResult {
        if ok {
            Ok(())
        } else {
            Err(self.fail(problem()))
        }
    }

    async fn step<T, E: std::error::Error>(
        &self,
        what: &str,
        future: impl Future<Output = Result<T, E>>,
    ) -> Result<T, ConformanceError> {
        match timeout(self.setup.step_timeout, future).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let mut problem = format!("{what}: {e}");
                let mut source = e.source();
                while let Some(cause) = source {
                    problem.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                Err(self.fail(problem))
            }
            Err(_) => Err(self.fail(format!(
                "{what}: no answer within {} s",
                self.setup.step_timeout.as_secs()
            ))),
        }
    }

    fn node(&self) -> NodeId {
        let n = NODE_COUNTER.fetch_add(1, Ordering::SeqCst);
        let id = format!(
            "conformance-{}-{}-{n}",
            self.name.replace('_', "-"),
            std::process::id()
        );
        NodeId::new(id).unwrap_or_else(|_| unreachable!("non-empty"))
    }

    async fn start<P: Provider>(&self, provider: P) -> Result<Rig, ConformanceError> {
        let harness = self.step("start the harness", ZoneHarness::grpc()).await?;
        let endpoint = harness
            .endpoint()
            .ok_or_else(|| self.fail("the gRPC harness has no endpoint"))?;
        let runner = ProviderRunner::new(
            &endpoint,
            Arc::new(provider),
            self.setup.runner_options.clone(),
        )
        .map_err(|e| self.fail(e.to_string()))?;
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let runner = tokio::spawn(runner.run_until(async {
            let _ = stop_rx.await;
        }));
        let conn = self
            .step("accept the provider's stream", harness.accept())
            .await?;
        self.step("welcome the provider", conn.welcome(ReplicaRole::Serving))
            .await?;
        Ok(Rig {
            harness,
            conn,
            stop: Some(stop_tx),
            runner,
        })
    }

    async fn offer_token(
        &self,
        conn: &ZoneConn,
        node_id: &NodeId,
    ) -> Result<orc_proto::QuoteToken, ConformanceError> {
        let quote = Quote {
            node_id: node_id.clone(),
            ..self.setup.quote.clone()
        };
        match self.step("quote", conn.quote(quote)).await? {
            QuoteReply::Offer(offer) => Ok(offer.quote_token),
            QuoteReply::Refused(r) => Err(self.fail(format!(
                "the setup's quote was refused ({r}); it must get an offer"
            ))),
        }
    }

    fn deploy_request(&self, node_id: &NodeId, token: orc_proto::QuoteToken) -> Deploy {
        Deploy {
            node_id: node_id.clone(),
            quote_token: token,
            os: self.setup.quote.os.clone(),
            ssh_keys: self.setup.ssh_keys.clone(),
            bootstrap: self.setup.bootstrap.clone(),
        }
    }

    async fn deploy(
        &self,
        conn: &ZoneConn,
        node_id: &NodeId,
    ) -> Result<Deployed, ConformanceError> {
        let token = self.offer_token(conn, node_id).await?;
        let outcome = self
            .step("deploy", conn.deploy(self.deploy_request(node_id, token)))
            .await?;
        self.deployed(node_id, outcome.result)
    }

    fn deployed(
        &self,
        node_id: &NodeId,
        result: DeployResult,
    ) -> Result<Deployed, ConformanceError> {
        match result {
            DeployResult::Deployed(done) => {
                self.check(&done.node_id == node_id, || {
                    format!("deploy of {node_id} answered for node {}", done.node_id)
                })?;
                Ok(done)
            }
            DeployResult::Refused(r) => Err(self.fail(format!("deploy of {node_id} refused: {r}"))),
        }
    }

    async fn destroy(&self, conn: &ZoneConn, node_id: &NodeId) -> CaseResult {
        match self.step("destroy", conn.destroy(node_id.clone())).await? {
            DestroyResult::Destroyed => Ok(()),
            DestroyResult::Refused(r) => {
                Err(self.fail(format!("destroy of {node_id} refused: {r}")))
            }
        }
    }

    /// Checks the cloud holds exactly `expected` instances of `node_id`, through the
    /// provider's inventory and, when given, the setup's counter.
    async fn expect_instances<P: Provider>(
        &self,
        provider: &P,
        node_id: &NodeId,
        expected: usize,
    ) -> CaseResult {
        if self.setup.reports_inventory {
            let inventory = self.direct_inventory(provider).await?;
            let listed = inventory
                .nodes
                .iter()
                .filter(|n| &n.node_id == node_id)
                .count();
            self.check(listed == expected, || {
                format!("inventory lists {node_id} {listed} times, expected {expected}")
            })?;
        }
        if let Some(count) = &self.setup.count_instances {
            let counted = count(node_id.clone()).await;
            self.check(counted == expected, || {
                format!("the cloud holds {counted} instances of {node_id}, expected {expected}")
            })?;
        }
        Ok(())
    }

    async fn direct_inventory<P: Provider>(
        &self,
        provider: &P,
    ) -> Result<Inventory, ConformanceError> {
        timeout(self.setup.step_timeout, provider.inventory())
            .await
            .map_err(|_| self.fail("inventory took longer than the step timeout"))?
            .ok_or_else(|| self.fail("the provider could not report its inventory"))
    }
}

/// Deploying one node id twice, concurrently, or from a fresh replica yields one instance
/// with one instance ref.
pub async fn deploy_is_idempotent<P, F>(make: F, setup: &ConformanceSetup) -> CaseResult
where
    P: Provider,
    F: Fn() -> P,
{
    let case = Case {
        name: "deploy_is_idempotent",
        setup,
    };
    let rig = case.start(make()).await?;
    let node = case.node();
    let first = case.deploy(&rig.conn, &node).await?;
    let second = case.deploy(&rig.conn, &node).await?;
    case.check(first.instance_ref == second.instance_ref, || {
        format!(
            "second deploy of {node} made {} after {}",
            second.instance_ref, first.instance_ref
        )
    })?;
    case.check(first.site == second.site, || {
        format!(
            "second deploy of {node} moved it from {} to {}",
            first.site, second.site
        )
    })?;
    case.expect_instances(&make(), &node, 1).await?;

    let racing = case.node();
    let token = case.offer_token(&rig.conn, &racing).await?;
    let a = case
        .step(
            "send a deploy",
            rig.conn.request(ZoneBody::Deploy(
                case.deploy_request(&racing, token.clone()),
            )),
        )
        .await?;
    let b = case
        .step(
            "send the same deploy again",
            rig.conn
                .request(ZoneBody::Deploy(case.deploy_request(&racing, token))),
        )
        .await?;
    let a = case.deployed(
        &racing,
        case.step("first of two deploys", deploy_outcome(a))
            .await?
            .result,
    )?;
    let b = case.deployed(
        &racing,
        case.step("second of two deploys", deploy_outcome(b))
            .await?
            .result,
    )?;
    case.check(a.instance_ref == b.instance_ref, || {
        format!(
            "two concurrent deploys of {racing} made {} and {}",
            a.instance_ref, b.instance_ref
        )
    })?;
    case.expect_instances(&make(), &racing, 1).await?;
    drop(rig);

    let fresh = case.start(make()).await?;
    let again = case.deploy(&fresh.conn, &node).await?;
    case.check(again.instance_ref == first.instance_ref, || {
        format!(
            "a fresh replica deployed {node} as {} instead of finding {}",
            again.instance_ref, first.instance_ref
        )
    })?;
    case.expect_instances(&make(), &node, 1).await?;
    case.destroy(&fresh.conn, &node).await?;
    case.destroy(&fresh.conn, &racing).await?;
    case.expect_instances(&make(), &node, 0).await
}

/// Destroying a node that was never deployed, or destroying twice, answers destroyed.
pub async fn destroy_of_absent_node_succeeds<P, F>(make: F, setup: &ConformanceSetup) -> CaseResult
where
    P: Provider,
    F: Fn() -> P,
{
    let case = Case {
        name: "destroy_of_absent_node_succeeds",
        setup,
    };
    let rig = case.start(make()).await?;
    case.destroy(&rig.conn, &case.node()).await?;
    let node = case.node();
    case.deploy(&rig.conn, &node).await?;
    case.destroy(&rig.conn, &node).await?;
    case.destroy(&rig.conn, &node).await?;
    case.expect_instances(&make(), &node, 0).await
}

/// Inventory reports over the stream list every deployed node exactly once, with the
/// instance ref and site its deploy returned, and drop destroyed nodes. A provider that
/// reports no inventory sends none at all.
pub async fn inventory_is_complete<P, F>(make: F, setup: &ConformanceSetup) -> CaseResult
where
    P: Provider,
    F: Fn() -> P,
{
    let case = Case {
        name: "inventory_is_complete",
        setup,
    };
    let rig = case.start(make()).await?;
    let a = case.node();
    let b = case.node();
    let deployed_a = case.deploy(&rig.conn, &a).await?;
    let deployed_b = case.deploy(&rig.conn, &b).await?;
    if !setup.reports_inventory {
        let quiet = setup
            .runner_options
            .inventory_interval
            .unwrap_or(Duration::from_millis(100))
            * 3;
        let heard = timeout(quiet, rig.conn.next_inventory()).await;
        case.check(heard.is_err(), || {
            "the setup says the provider reports no inventory, but it sent one".to_string()
        })?;
        case.destroy(&rig.conn, &a).await?;
        return case.destroy(&rig.conn, &b).await;
    }
    case.direct_inventory(&make()).await?;
    let holds = |inventory: &Inventory, node: &Deployed| {
        inventory.nodes.iter().any(|n| {
            n.node_id == node.node_id && n.instance_ref == node.instance_ref && n.site == node.site
        })
    };
    let report = case
        .step("an inventory with both nodes", async {
            loop {
                let inventory = rig.conn.next_inventory().await?;
                if holds(&inventory, &deployed_a) && holds(&inventory, &deployed_b) {
                    return Ok::<_, crate::harness::HarnessError>(inventory);
                }
            }
        })
        .await?;
    for node in [&a, &b] {
        let listed = report.nodes.iter().filter(|n| &n.node_id == node).count();
        case.check(listed == 1, || {
            format!("inventory lists {node} {listed} times")
        })?;
    }
    for (i, site) in report.sites.iter().enumerate() {
        let repeated = report.sites[..i].iter().any(|s| s.site == site.site);
        case.check(!repeated, || {
            format!("inventory lists site {} twice", site.site)
        })?;
    }
    case.destroy(&rig.conn, &a).await?;
    case.step("an inventory without the destroyed node", async {
        loop {
            let inventory = rig.conn.next_inventory().await?;
            if !inventory.nodes.iter().any(|n| n.node_id == a) {
                return Ok::<_, crate::harness::HarnessError>(inventory);
            }
        }
    })
    .await?;
    case.destroy(&rig.conn, &b).await
}

/// Every refusal the setup lists reaches the zone with the expected kind and exactly the
/// words the provider gave.
pub async fn refusal_kinds_round_trip<P, F>(make: F, setup: &ConformanceSetup) -> CaseResult
where
    P: Provider,
    F: Fn() -> P,
{
    let case = Case {
        name: "refusal_kinds_round_trip",
        setup,
    };
    if setup.refusals.is_empty() {
        return Err(case.fail("the setup lists no refusals; give at least one refused quote"));
    }
    let direct = make();
    let rig = case.start(make()).await?;
    for (quote, kind) in &setup.refusals {
        let expected = direct.quote(quote.clone()).await;
        let received = case.step("quote", rig.conn.quote(quote.clone())).await?;
        case.check(received == expected, || {
            format!("the provider answered {expected:?} but the zone received {received:?}")
        })?;
        match received {
            QuoteReply::Refused(refusal) => case.check(refusal.kind == *kind, || {
                format!(
                    "quote for {} refused as {} instead of {kind}",
                    quote.node_id, refusal.kind
                )
            })?,
            QuoteReply::Offer(offer) => {
                return Err(case.fail(format!(
                    "quote for {} got an offer at {} instead of a {kind} refusal",
                    quote.node_id, offer.site
                )));
            }
        }
    }
    Ok(())
}

/// A stream dropped while a deploy is in flight reconnects; the deploy the zone sends
/// again on the new stream completes, and exactly one instance exists.
pub async fn reconnect_resends_in_flight_work_once<P, F>(
    make: F,
    setup: &ConformanceSetup,
) -> CaseResult
where
    P: Provider,
    F: Fn() -> P,
{
    let case = Case {
        name: "reconnect_resends_in_flight_work_once",
        setup,
    };
    let mut rig = case.start(make()).await?;
    let node = case.node();
    let token = case.offer_token(&rig.conn, &node).await?;
    let mut in_flight = case
        .step(
            "send a deploy",
            rig.conn
                .request(ZoneBody::Deploy(case.deploy_request(&node, token.clone()))),
        )
        .await?;
    // Let the deploy get under way (its first progress note, or a short grace) so the drop
    // hits work in flight rather than a request still on the wire.
    let _ = timeout(Duration::from_millis(500), in_flight.next()).await;
    rig.conn.drop_stream().await;
    rig.conn = case
        .step("accept the reconnected stream", rig.harness.accept())
        .await?;
    case.step(
        "welcome the reconnected provider",
        rig.conn.welcome(ReplicaRole::Serving),
    )
    .await?;
    let resent = case
        .step(
            "deploy sent again",
            rig.conn.deploy(case.deploy_request(&node, token.clone())),
        )
        .await?;
    let first = case.deployed(&node, resent.result)?;
    case.expect_instances(&make(), &node, 1).await?;
    let again = case.deploy(&rig.conn, &node).await?;
    case.check(again.instance_ref == first.instance_ref, || {
        format!(
            "deploy after the reconnect made {} after {}",
            again.instance_ref, first.instance_ref
        )
    })?;
    case.expect_instances(&make(), &node, 1).await?;
    case.destroy(&rig.conn, &node).await
}
