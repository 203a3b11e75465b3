//! The one adapter that serves a [`MachineProvider`] to a zone as a [`Provider`].
//!
//! This is the I/O edge of the one-cloud providers: it holds the offers snapshot and the
//! task that refreshes it, keeps the replica's role in a [`RoleGate`], reads the clock and
//! calls the cloud, and leaves every decision to the pure functions
//! [`describe_catalog`](super::describe_catalog), [`screen_quote`](super::screen_quote),
//! [`pick_offer`](super::pick_offer) and [`plan_deploy`](super::plan_deploy):
//!
//! - a standby replica sends no request to the cloud; the offers refresh starts when the
//!   replica becomes serving (or first answers a quote) and stops when it stands by again
//!   or the adapter is dropped;
//! - a quote waits at most `first_read_wait` for the first snapshot, and never calls a
//!   cloud;
//! - deploy creates the machine with the node id as idempotency key (or, after the offer
//!   lapsed, only finds the one an earlier deploy made);
//! - destroy deletes, and a machine that is already gone counts as destroyed;
//! - inventory lists the managed machines, or reports nothing when the list could not be
//!   read completely.
//!
//! A [`MachineError`] is logged at DEBUG only; the zone gets the error's refusal kind and
//! the generic [words](super::words).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use orc_common::{Money, Whereabouts};
use orc_proto::{
    Catalog, Deploy, DeployResult, Deployed, DestroyResult, InstanceRef, InstanceState, Inventory,
    InventoryNode, InventorySite, NodeId, Quote, QuoteReply, Refusal, RefusalKind, ReplicaRole,
    SiteName,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::model::{
    Install, Machine, MachineCatalog, MachineKey, MachineProvider, MachineState, OfferQuery,
};
use super::offer::{
    DeployStep, OffersSnapshot, describe_catalog, pick_offer, plan_deploy, screen_quote,
};
use super::{MachineError, words};
use crate::provider::{HelloInfo, ProgressSink, Provider};
use crate::role::RoleGate;
use orc_common::Secret;

/// Settings of a [`MachineAdapter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterOptions {
    /// How often the offers snapshot is read again while serving. Default 5 minutes.
    pub refresh_interval: Duration,
    /// How soon a failed read is tried again. Default 30 s.
    pub failed_refresh_retry: Duration,
    /// How long a quote or catalog waits for the first snapshot before answering without
    /// it. Default 10 s.
    pub first_read_wait: Duration,
    /// How long an offer's quote token is honoured. Default 10 minutes.
    pub offer_ttl: Duration,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            refresh_interval: Duration::from_secs(300),
            failed_refresh_retry: Duration::from_secs(30),
            first_read_wait: Duration::from_secs(10),
            offer_ttl: Duration::from_secs(600),
        }
    }
}

/// Serves a [`MachineProvider`] to a zone as a [`Provider`].
///
/// A standby replica sends no request to the cloud; the offers refresh starts when the
/// replica becomes serving (or first answers a quote) and stops when the adapter is
/// dropped.
pub struct MachineAdapter<M: MachineProvider> {
    shared: Arc<Shared<M>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared<M> {
    machines: M,
    hello: HelloInfo,
    options: AdapterOptions,
    catalog: MachineCatalog,
    snapshot: watch::Sender<Option<Arc<OffersSnapshot>>>,
    role: RoleGate,
}

impl<M: MachineProvider> fmt::Debug for MachineAdapter<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MachineAdapter")
            .field("provider", &self.shared.hello.provider)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl<M: MachineProvider> Drop for MachineAdapter<M> {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<M: MachineProvider> MachineAdapter<M> {
    /// An adapter over `machines` that introduces itself with `hello`. Touches no network.
    pub fn new(machines: M, hello: HelloInfo, options: AdapterOptions) -> Self {
        let catalog = machines.catalog();
        let (snapshot, _) = watch::channel(None);
        MachineAdapter {
            shared: Arc::new(Shared {
                machines,
                hello,
                options,
                catalog,
                snapshot,
                role: RoleGate::new(),
            }),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The machine provider behind the adapter.
    pub fn machines(&self) -> &M {
        &self.shared.machines
    }

    /// The current offers snapshot, when one was read.
    pub fn snapshot(&self) -> Option<Arc<OffersSnapshot>> {
        self.shared.snapshot.borrow().clone()
    }

    /// Reads the offers now and replaces the snapshot; the snapshot is kept on failure.
    pub async fn refresh(&self) -> Result<(), MachineError> {
        refresh_once(&self.shared).await
    }

    fn become_serving(&self) {
        if !self.shared.role.serve() {
            return;
        }
        tracing::info!(
            provider = %self.shared.hello.provider,
            "This replica serves now; it reads the cloud's offers from here on"
        );
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("no async runtime to run the offers refresh on");
            return;
        };
        let shared = self.shared.clone();
        lock(&self.tasks).push(runtime.spawn(refresh_loop(shared)));
    }

    fn stand_by(&self) {
        if !self.shared.role.stand_by() {
            return;
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        tracing::info!("Standing by: this replica reads no cloud account until it is handed work");
    }

    async fn current_snapshot(&self) -> Option<Arc<OffersSnapshot>> {
        let mut rx = self.shared.snapshot.subscribe();
        let waited = tokio::time::timeout(
            self.shared.options.first_read_wait,
            rx.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(snapshot)) => snapshot.clone(),
            Ok(Err(_)) | Err(_) => None,
        }
    }

    async fn answer_quote(&self, q: Quote) -> QuoteReply {
        self.become_serving();
        let decided = match screen_quote(&q, &self.shared.catalog) {
            Ok(()) => {
                let snapshot = self.current_snapshot().await;
                pick_offer(
                    &q,
                    snapshot.as_deref(),
                    SystemTime::now(),
                    self.shared.options.offer_ttl,
                )
            }
            Err(refusal) => Err(refusal),
        };
        match decided {
            Ok(offer) => QuoteReply::Offer(offer),
            Err(refusal) => {
                tracing::info!(
                    node = q.node_id.as_str(),
                    class = q.class.as_str(),
                    reason = refusal.reason,
                    "quote refused"
                );
                let words = refusal
                    .words
                    .unwrap_or_else(|| words::quote(refusal.kind).to_string());
                QuoteReply::Refused(Refusal::new(refusal.kind, words))
            }
        }
    }

    async fn carry_out_deploy(&self, d: Deploy, progress: &ProgressSink) -> DeployResult {
        self.become_serving();
        let node = d.node_id.as_str();
        let failed = |why: &str| {
            tracing::warn!(node, reason = why, "deploy refused");
            DeployResult::Refused(Refusal::new(RefusalKind::Failed, words::COULD_NOT_CREATE))
        };
        let plan = match plan_deploy(&d, SystemTime::now()) {
            Ok(plan) => plan,
            Err(why) => return failed(why),
        };
        let machines = &self.shared.machines;
        let outcome = match plan.step {
            DeployStep::FindExisting(key) => match machines.get(&key).await {
                Ok(Some(machine)) => Ok(machine),
                Ok(None) => return failed("the offer lapsed before the deploy"),
                Err(e) => Err(e),
            },
            DeployStep::Create(spec) => {
                tracing::info!(node, location = %spec.location, plan = %spec.plan, "creating the node's machine");
                match machines.create(&spec).await {
                    Ok(machine) if !d.bootstrap.0.is_empty() => {
                        let install = Install {
                            // plan_deploy refused a bootstrap that is not UTF-8.
                            bootstrap: Secret::new(String::from_utf8_lossy(&d.bootstrap.0)),
                            hostname: spec.name.clone(),
                            ssh_keys: spec.ssh_keys.clone(),
                        };
                        machines
                            .install(&machine, &install, progress)
                            .await
                            .map(|()| machine)
                    }
                    other => other,
                }
            }
        };
        match outcome {
            Ok(machine) => deployed(
                &d.node_id,
                self.shared.hello.provider.as_str(),
                machine,
                Some(plan.hourly),
            ),
            Err(e) => {
                let kind = e.refusal_kind();
                tracing::info!(node, kind = %kind, "the node's machine could not be created");
                tracing::debug!(node, error = %e, "the cloud's answer");
                DeployResult::Refused(Refusal::new(kind, words::deploy(kind)))
            }
        }
    }

    async fn carry_out_destroy(&self, node_id: NodeId) -> DestroyResult {
        self.become_serving();
        let Some(key) = MachineKey::new(node_id.as_str()) else {
            return DestroyResult::Destroyed;
        };
        match self.shared.machines.delete(&key).await {
            Ok(()) => DestroyResult::Destroyed,
            Err(e) if e.is_not_found() => DestroyResult::Destroyed,
            Err(e) => {
                let kind = e.refusal_kind();
                tracing::info!(node = %node_id, kind = %kind, "the node's machine could not be deleted");
                tracing::debug!(node = %node_id, error = %e, "the cloud's answer");
                DestroyResult::Refused(Refusal::new(kind, words::destroy(kind)))
            }
        }
    }

    async fn report_inventory(&self) -> Option<Inventory> {
        let machines = match self.shared.machines.list().await {
            Ok(machines) => machines,
            Err(e) => {
                tracing::info!(kind = %e.refusal_kind(), "the machines could not be listed; no inventory this pass");
                tracing::debug!(error = %e, "the cloud's answer");
                return None;
            }
        };
        Some(inventory_of(&machines))
    }
}

/// The inventory report of a complete machine list: one node per machine, one site per
/// location that holds one, both sorted.
pub fn inventory_of(machines: &[Machine]) -> Inventory {
    let mut nodes = Vec::new();
    let mut sites = BTreeSet::new();
    for machine in machines {
        let (Ok(node_id), Ok(site), Ok(instance_ref)) = (
            NodeId::new(machine.key.as_str()),
            SiteName::new(machine.location.as_str()),
            InstanceRef::new(machine.instance_ref.as_str()),
        ) else {
            continue;
        };
        sites.insert(site.clone());
        nodes.push(InventoryNode {
            node_id,
            site,
            instance_ref,
            state: match machine.state {
                MachineState::Provisioning => InstanceState::Provisioning,
                MachineState::Running => InstanceState::Running,
                MachineState::Stopped => InstanceState::Stopped,
                MachineState::Deleting => InstanceState::Deleting,
            },
        });
    }
    nodes.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    Inventory {
        nodes,
        sites: sites
            .into_iter()
            .map(|site| InventorySite {
                site,
                public_ipv4: None,
                private_prefix: None,
            })
            .collect(),
        pool_addresses: Vec::new(),
    }
}

fn deployed(node_id: &NodeId, cloud: &str, machine: Machine, price: Option<Money>) -> DeployResult {
    let (Ok(site), Ok(instance_ref)) = (
        SiteName::new(machine.location.as_str()),
        InstanceRef::new(machine.instance_ref.as_str()),
    ) else {
        tracing::warn!(node = %node_id, "the cloud answered a machine without location or id");
        return DeployResult::Refused(Refusal::new(RefusalKind::Failed, words::COULD_NOT_CREATE));
    };
    DeployResult::Deployed(Deployed {
        node_id: node_id.clone(),
        site,
        addresses: machine.addresses,
        price,
        instance_ref,
        placed: Some(Whereabouts {
            cloud: cloud.to_string(),
            location: machine.location,
            plan: machine.plan,
        }),
    })
}

async fn refresh_once<M: MachineProvider>(shared: &Shared<M>) -> Result<(), MachineError> {
    let offers = shared.machines.offers(&OfferQuery::default()).await?;
    tracing::debug!(offers = offers.len(), "offers read");
    let snapshot = OffersSnapshot::new(offers, SystemTime::now());
    shared.snapshot.send_replace(Some(Arc::new(snapshot)));
    Ok(())
}

async fn refresh_loop<M: MachineProvider>(shared: Arc<Shared<M>>) {
    loop {
        let wait = match refresh_once(&shared).await {
            Ok(()) => shared.options.refresh_interval,
            Err(e) => {
                tracing::warn!(kind = %e.refusal_kind(), "the cloud's offers could not be read; quotes use the last snapshot");
                tracing::debug!(error = %e, "the cloud's answer");
                shared
                    .options
                    .failed_refresh_retry
                    .min(shared.options.refresh_interval)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

impl<M: MachineProvider> Provider for MachineAdapter<M> {
    fn hello(&self) -> HelloInfo {
        self.shared.hello.clone()
    }

    async fn catalog(&self) -> Catalog {
        if self.shared.role.is_serving() {
            let _ = self.current_snapshot().await;
        }
        let snapshot = self.shared.snapshot.borrow().clone();
        describe_catalog(&self.shared.catalog, snapshot.as_deref())
    }

    async fn quote(&self, quote: Quote) -> QuoteReply {
        self.answer_quote(quote).await
    }

    async fn deploy(&self, deploy: Deploy, progress: ProgressSink) -> DeployResult {
        progress.note(words::CREATING).await;
        self.carry_out_deploy(deploy, &progress).await
    }

    async fn destroy(&self, node_id: NodeId) -> DestroyResult {
        self.carry_out_destroy(node_id).await
    }

    async fn inventory(&self) -> Option<Inventory> {
        self.report_inventory().await
    }

    fn on_role(&self, role: ReplicaRole) {
        match role {
            ReplicaRole::Serving => self.become_serving(),
            ReplicaRole::Standby => self.stand_by(),
        }
    }
}
#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use orc_common::{Architecture, Currency, Period, Shape};
    use orc_proto::{
        Bootstrap, ClassId, Offer, OsId, PoolPath, ProviderName, Purpose, QuoteToken, Replica,
        ResourceUri,
    };
    use rust_decimal::Decimal;

    use super::*;
    use crate::machine::model::{CatalogEntry, MachineOffer, MachineSpec, PowerAction};
    use crate::machine::offer::OfferToken;

    /// Machines in memory: offers as given, creates keyed, one injected failure.
    #[derive(Default)]
    struct Memory {
        offers: Mutex<Vec<MachineOffer>>,
        machines: Mutex<BTreeMap<MachineKey, Machine>>,
        fail_next: Mutex<Option<MachineError>>,
        offer_reads: AtomicUsize,
        creates: AtomicUsize,
    }

    impl Memory {
        fn failure(&self) -> Result<(), MachineError> {
            match lock(&self.fail_next).take() {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
    }

    impl MachineProvider for Arc<Memory> {
        fn catalog(&self) -> MachineCatalog {
            MachineCatalog {
                locations: vec![
                    CatalogEntry {
                        id: "here".into(),
                        title: "Here".into(),
                    },
                    CatalogEntry {
                        id: "there".into(),
                        title: "There".into(),
                    },
                ],
                images: vec![CatalogEntry {
                    id: "linux".into(),
                    title: "Linux".into(),
                }],
            }
        }

        async fn offers(&self, _query: &OfferQuery) -> Result<Vec<MachineOffer>, MachineError> {
            self.offer_reads.fetch_add(1, Ordering::SeqCst);
            self.failure()?;
            Ok(lock(&self.offers).clone())
        }

        async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
            self.failure()?;
            let mut machines = lock(&self.machines);
            let n = machines.len();
            self.creates.fetch_add(1, Ordering::SeqCst);
            Ok(machines
                .entry(spec.idempotency_key.clone())
                .or_insert_with(|| Machine {
                    key: spec.idempotency_key.clone(),
                    instance_ref: format!("m-{n}"),
                    name: spec.name.clone(),
                    location: spec.location.clone(),
                    plan: spec.plan.clone(),
                    state: MachineState::Running,
                    addresses: vec!["192.0.2.10".parse().unwrap()],
                })
                .clone())
        }

        async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
            self.failure()?;
            Ok(lock(&self.machines).get(key).cloned())
        }

        async fn list(&self) -> Result<Vec<Machine>, MachineError> {
            self.failure()?;
            Ok(lock(&self.machines).values().cloned().collect())
        }

        async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
            self.failure()?;
            match lock(&self.machines).remove(key) {
                Some(_) => Ok(()),
                None => Err(MachineError::NotFound {
                    what: key.to_string(),
                }),
            }
        }

        async fn power(&self, key: &MachineKey, _action: PowerAction) -> Result<(), MachineError> {
            self.get(key)
                .await?
                .map(|_| ())
                .ok_or(MachineError::NotFound {
                    what: key.to_string(),
                })
        }

        async fn reinstall(&self, key: &MachineKey, _image: &str) -> Result<(), MachineError> {
            self.power(key, PowerAction::Reset).await
        }
    }

    fn offer(plan: &str, location: &str, vcpus: u32, gib: u32, hourly: &str) -> MachineOffer {
        MachineOffer {
            plan: plan.into(),
            location: location.into(),
            vcpus,
            memory_mib: u64::from(gib) * 1024,
            arch: Architecture::X86_64,
            disk_gb: 40,
            hourly: Money::new(hourly.parse().unwrap(), Currency::EUR, Period::Hour),
            monthly: None,
            available: true,
        }
    }

    fn memory() -> Arc<Memory> {
        let memory = Arc::new(Memory::default());
        *lock(&memory.offers) = vec![
            offer("big", "here", 4, 8, "0.02"),
            offer("small-a", "here", 2, 4, "0.009"),
            offer("small-b", "here", 2, 4, "0.007"),
            offer("small-c", "there", 2, 4, "0.001"),
        ];
        memory
    }

    fn adapter(memory: &Arc<Memory>) -> MachineAdapter<Arc<Memory>> {
        MachineAdapter::new(
            memory.clone(),
            HelloInfo {
                provider: ProviderName::new("memory").unwrap(),
                resource_uri: ResourceUri::new("urn:orc:provider:memory").unwrap(),
                replica: Replica {
                    host: "h".into(),
                    pid: 1,
                    slot: 0,
                },
                version: "0".into(),
            },
            AdapterOptions {
                first_read_wait: Duration::from_secs(5),
                ..AdapterOptions::default()
            },
        )
    }

    fn quote(node: &str, class: &str, vcpus: u32, gib: u32) -> Quote {
        Quote {
            pool: PoolPath::new("p").unwrap(),
            node_id: NodeId::new(node).unwrap(),
            purpose: Purpose::Tenant,
            shape: Shape {
                vcpus,
                memory_gib: gib,
                arch: Architecture::X86_64,
                disks_gib: vec![],
            },
            class: ClassId::new(class).unwrap(),
            os: OsId::new("linux").unwrap(),
            pinned_site: None,
            public: false,
            placement: BTreeMap::new(),
            preview: false,
        }
    }

    fn refused(reply: QuoteReply) -> RefusalKind {
        match reply {
            QuoteReply::Refused(r) => r.kind,
            QuoteReply::Offer(o) => panic!("expected a refusal, got an offer at {}", o.site),
        }
    }

    fn offered(reply: QuoteReply) -> Offer {
        match reply {
            QuoteReply::Offer(o) => o,
            QuoteReply::Refused(r) => panic!("expected an offer, got {r}"),
        }
    }

    fn deploy_of(node: &str, offer: &Offer) -> Deploy {
        Deploy {
            node_id: NodeId::new(node).unwrap(),
            quote_token: offer.quote_token.clone(),
            os: OsId::new("linux").unwrap(),
            ssh_keys: vec![],
            bootstrap: Bootstrap::default(),
        }
    }

    #[tokio::test]
    async fn quotes_pick_the_cheapest_available_offer_of_the_exact_shape() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        assert_eq!(offer.site.as_str(), "here");
        assert_eq!(offer.price.unwrap().amount, Decimal::new(7, 3));
        let token = OfferToken::decode(offer.quote_token.as_str()).unwrap();
        assert_eq!(token.plan, "small-b");

        lock(&memory.offers)[2].available = false;
        adapter.refresh().await.unwrap();
        let token = offered(adapter.quote(quote("n1", "here", 2, 4)).await).quote_token;
        assert_eq!(OfferToken::decode(token.as_str()).unwrap().plan, "small-a");

        for o in lock(&memory.offers).iter_mut() {
            o.available = false;
        }
        adapter.refresh().await.unwrap();
        assert_eq!(
            refused(adapter.quote(quote("n1", "here", 2, 4)).await),
            RefusalKind::NoCapacity
        );
        assert_eq!(
            refused(adapter.quote(quote("n1", "here", 3, 4)).await),
            RefusalKind::Unplaceable,
            "no plan of the shape is listed at all"
        );
    }

    #[tokio::test]
    async fn quotes_honour_placement_and_refuse_by_kind() {
        let memory = memory();
        let adapter = adapter(&memory);
        let mut placed = quote("n1", "here", 2, 4);
        placed.placement.insert("plan".into(), "small-a".into());
        let token = offered(adapter.quote(placed.clone()).await).quote_token;
        assert_eq!(OfferToken::decode(token.as_str()).unwrap().plan, "small-a");

        let mut too_small = quote("n1", "here", 4, 8);
        too_small.placement.insert("plan".into(), "small-a".into());
        assert_eq!(
            refused(adapter.quote(too_small).await),
            RefusalKind::Unplaceable
        );
        let mut roomy = quote("n1", "here", 1, 2);
        roomy.placement.insert("plan".into(), "big".into());
        offered(adapter.quote(roomy).await);

        placed.placement.insert("plan".into(), "nonesuch".into());
        match adapter.quote(placed).await {
            QuoteReply::Refused(r) => {
                assert_eq!(r.kind, RefusalKind::Unplaceable);
                assert!(
                    r.words
                        .starts_with("plan nonesuch is not offered at here; plans there: "),
                    "the tenant reads the plans offered: {}",
                    r.words
                );
            }
            QuoteReply::Offer(o) => panic!("expected a refusal, got an offer at {}", o.site),
        }

        let mut gpu = quote("n1", "here", 2, 4);
        gpu.placement.insert("kind".into(), "gpu".into());
        assert_eq!(refused(adapter.quote(gpu).await), RefusalKind::Unplaceable);

        let mut disks = quote("n1", "here", 2, 4);
        disks.shape.disks_gib = vec![100];
        assert_eq!(
            refused(adapter.quote(disks).await),
            RefusalKind::Unplaceable
        );

        let mut pinned = quote("n1", "here", 2, 4);
        pinned.pinned_site = Some(SiteName::new("there").unwrap());
        assert_eq!(
            refused(adapter.quote(pinned).await),
            RefusalKind::NoCapacity
        );

        let mut os = quote("n1", "here", 2, 4);
        os.os = OsId::new("plan9").unwrap();
        assert_eq!(refused(adapter.quote(os).await), RefusalKind::OperatorFix);

        assert_eq!(
            refused(adapter.quote(quote("n1", "elsewhere", 2, 4)).await),
            RefusalKind::OperatorFix
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_replica_reads_nothing_and_a_failed_first_read_is_transient() {
        let memory = memory();
        let adapter = adapter(&memory);
        adapter.on_role(ReplicaRole::Standby);
        let catalog = adapter.catalog().await;
        assert_eq!(catalog.classes.len(), 2);
        assert!(catalog.availability.classes.iter().all(|c| !c.can_place));
        assert!(!catalog.site_gateways);
        assert_eq!(memory.offer_reads.load(Ordering::SeqCst), 0);

        let failing = self::memory();
        *lock(&failing.fail_next) = Some(MachineError::RateLimited {
            retry_after: Duration::from_secs(1),
        });
        let quick = MachineAdapter::new(
            failing.clone(),
            adapter.hello(),
            AdapterOptions {
                first_read_wait: Duration::from_millis(200),
                failed_refresh_retry: Duration::from_secs(600),
                ..AdapterOptions::default()
            },
        );
        assert_eq!(
            refused(quick.quote(quote("n1", "here", 2, 4)).await),
            RefusalKind::Transient
        );
        assert_eq!(failing.offer_reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn deploy_destroy_and_inventory_map_machine_errors_to_refusals() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        let progress = || ProgressSink::discard(NodeId::new("n1").unwrap());

        *lock(&memory.fail_next) = Some(MachineError::RateLimited {
            retry_after: Duration::from_secs(3),
        });
        match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Transient),
            DeployResult::Deployed(d) => panic!("deployed through a rate limit: {d:?}"),
        }
        *lock(&memory.fail_next) = Some(MachineError::Config {
            problem: "token".into(),
        });
        match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Refused(r) => {
                assert_eq!(r.kind, RefusalKind::OperatorFix);
                assert!(!r.words.contains("token"));
            }
            DeployResult::Deployed(d) => panic!("deployed with a bad config: {d:?}"),
        }

        let first = match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Deployed(d) => d,
            DeployResult::Refused(r) => panic!("refused: {r}"),
        };
        assert_eq!(first.site.as_str(), "here");
        assert_eq!(first.price, offer.price);
        let again = match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Deployed(d) => d,
            DeployResult::Refused(r) => panic!("refused: {r}"),
        };
        assert_eq!(again.instance_ref, first.instance_ref);

        match adapter.deploy(deploy_of("n2", &offer), progress()).await {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Failed),
            DeployResult::Deployed(d) => panic!("another node's token deployed {d:?}"),
        }

        let inventory = adapter.inventory().await.unwrap();
        assert_eq!(inventory.nodes.len(), 1);
        assert_eq!(inventory.sites.len(), 1);
        *lock(&memory.fail_next) = Some(MachineError::Provider {
            status: Some(500),
            code: None,
            message: "boom".into(),
        });
        assert_eq!(adapter.inventory().await, None);

        let n1 = NodeId::new("n1").unwrap();
        assert_eq!(adapter.destroy(n1.clone()).await, DestroyResult::Destroyed);
        assert_eq!(adapter.destroy(n1).await, DestroyResult::Destroyed);
        assert_eq!(memory.creates.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_expired_offer_deploys_only_a_machine_that_exists() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        let mut token = OfferToken::decode(offer.quote_token.as_str()).unwrap();
        token.expires_ms = 1;
        let expired = Offer {
            quote_token: QuoteToken::new(token.encode()).unwrap(),
            ..offer
        };
        let progress = ProgressSink::discard(NodeId::new("n1").unwrap());
        match adapter
            .deploy(deploy_of("n1", &expired), progress.clone())
            .await
        {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Failed),
            DeployResult::Deployed(d) => panic!("an expired offer created {d:?}"),
        }
        assert_eq!(memory.creates.load(Ordering::SeqCst), 0);
    }
}
