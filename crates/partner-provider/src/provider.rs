//! The partner as an `orc_provider_sdk::Provider`: quotes from the pure engine over the live
//! catalogs, deploys and destroys through the cloud clients, inventory by owner tag.
//!
//! Roles: a replica that is standing by reads no cloud account. It becomes serving on the
//! zone's word or on its first work (a quote included), logs so once, reads every keyed
//! cloud's catalog straight away and then every refresh interval, counts each capped
//! cloud's nodes before that cloud may place one ([`QuoteState::start_counting`]), and every
//! refresh interval releases the stable addresses of sites closed for seven days.
//!
//! Invariants:
//! - A quote never calls a cloud. Only a quote that arrives before the first catalog read
//!   has finished waits for it, at most [`PartnerOptions::first_read_wait`].
//! - An offer is reserved in the [`QuoteState`] before it is answered, until the deploy
//!   commits it or [`PartnerOptions::offer_ttl`] passes; the quote token carries the whole
//!   offer ([`crate::token`]), so any replica can carry out a deploy.
//! - A deploy looks the node id up before it creates anything, and a create that loses the
//!   unique-name race (on a cloud with unique names) answers the instance that won; destroy of an absent node
//!   succeeds.
//! - An inventory is complete or not sent.
//! - Tenant words come only from `orc_partner::words`; the cloud's own words go to DEBUG.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use orc_cloud::CloudError;
use orc_common::{SharedClock, SystemClock};
use orc_partner::ids::{Cloud, Timestamp};
use orc_partner::params::Config;
use orc_partner::quote::{Decision, Purpose, QuoteRequest, quote};
use orc_partner::state::{CloudUsage, QuoteState};
use orc_partner::words;
use orc_proto as proto;
use orc_provider_sdk::{HelloInfo, ProgressSink, Provider, RoleGate};
use tokio::task::JoinHandle;

use crate::clients::CloudClients;
use crate::instances::{self, Ownership};
use crate::live::LiveCatalogs;
use crate::naming;
use crate::quote_book::{KnownSites, QuoteBook};
use crate::sync::lock;
use crate::token::OfferToken;

/// Timing of the provider process.
#[derive(Debug, Clone)]
pub struct PartnerOptions {
    /// How often the serving replica reads every catalog again. Default 10 minutes.
    pub refresh_interval: Duration,
    /// How long an offer (and its reservation) holds. Default 5 minutes.
    pub offer_ttl: Duration,
    /// How long a quote waits for the very first catalog read. Default 10 s.
    pub first_read_wait: Duration,
    /// How long a deploy waits for the cloud to finish creating. Default 5 minutes.
    pub deploy_deadline: Duration,
    /// How often a deploy polls while it waits. Default 2 s.
    pub poll_interval: Duration,
    /// How long after a failed count it is tried again. Default 15 s.
    pub count_retry: Duration,
    /// Where the provider reads the time: the wall clock, or a test's manual clock.
    pub clock: SharedClock,
}

impl Default for PartnerOptions {
    fn default() -> Self {
        PartnerOptions {
            refresh_interval: Duration::from_secs(600),
            offer_ttl: Duration::from_secs(300),
            first_read_wait: Duration::from_secs(10),
            deploy_deadline: Duration::from_secs(300),
            poll_interval: Duration::from_secs(2),
            count_retry: Duration::from_secs(15),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Where this replica runs, for `Hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub host: String,
    pub pid: u32,
    pub slot: u32,
}

/// The provider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Clients(#[from] crate::clients::ClientError),
    #[error("{what} is empty")]
    Empty { what: &'static str },
}

/// What every task of the replica shares: the read-only setting (config, clients, options,
/// ownership, hello) and the named parts that change, each owned by its module and changed
/// only through its methods.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) clients: CloudClients,
    pub(crate) options: PartnerOptions,
    /// The latest catalog snapshots ([`crate::live`]).
    pub(crate) catalogs: LiveCatalogs,
    /// Caps, reservations, cooldowns, counting and live sites.
    pub(crate) quotes: QuoteBook,
    pub(crate) role: RoleGate,
    /// Where the nodes this replica knows run.
    pub(crate) known: KnownSites,
    pub(crate) ownership: BTreeMap<Cloud, Ownership>,
    pub(crate) hello: HelloInfo,
    /// Open sites and sealed keys known to this process.
    pub(crate) sites: crate::sites::SiteCache,
    /// What the inventory pass remembers between passes.
    pub(crate) inventory: crate::inventory::InventoryState,
}

impl Shared {
    /// Now, on the provider's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.options.clock.now()
    }
}

/// The partner provider. Background work stops when it is dropped.
#[derive(Debug)]
pub struct PartnerProvider {
    pub(crate) shared: Arc<Shared>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for PartnerProvider {
    fn drop(&mut self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}

pub(crate) fn refused(kind: proto::RefusalKind, words: String) -> proto::Refusal {
    proto::Refusal::new(kind, words)
}

impl PartnerProvider {
    /// A provider over `config`'s clouds. Touches no network.
    pub fn new(
        config: Config,
        options: PartnerOptions,
        replica: ReplicaInfo,
    ) -> Result<PartnerProvider, SetupError> {
        let clients = CloudClients::from_config(&config)?;
        let child = naming::child_value(&config.partner_id);
        let mut ownership = BTreeMap::new();
        for (cloud, cc) in &config.clouds {
            let mut tags: Vec<String> = cc.owner_tag.iter().map(|t| t.to_string()).collect();
            tags.extend(cc.also_owned_tags.iter().map(|t| t.to_string()));
            ownership.insert(
                *cloud,
                Ownership {
                    child: child.clone(),
                    tags,
                },
            );
        }
        let hello = HelloInfo {
            provider: proto::ProviderName::new("partner").map_err(|_| SetupError::Empty {
                what: "provider name",
            })?,
            resource_uri: proto::ResourceUri::new(config.resource_uri()).map_err(|_| {
                SetupError::Empty {
                    what: "resource uri",
                }
            })?,
            replica: proto::Replica {
                host: replica.host,
                pid: replica.pid,
                slot: replica.slot,
            },
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        Ok(PartnerProvider {
            shared: Arc::new(Shared {
                config,
                clients,
                options,
                catalogs: LiveCatalogs::new(),
                quotes: QuoteBook::default(),
                role: RoleGate::new(),
                known: KnownSites::default(),
                ownership,
                hello,
                sites: Default::default(),
                inventory: Default::default(),
            }),
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// The cloud clients (their request counters serve tests and measurements).
    pub fn clients(&self) -> &CloudClients {
        &self.shared.clients
    }

    /// The live catalogs.
    pub fn catalogs(&self) -> &LiveCatalogs {
        &self.shared.catalogs
    }

    /// A copy of the quote state.
    pub fn quote_state(&self) -> QuoteState {
        self.shared.quotes.snapshot()
    }

    /// Whether this replica is serving.
    pub fn is_serving(&self) -> bool {
        self.shared.role.is_serving()
    }

    /// Makes this replica serving, once: logs it, starts the catalog refresh and the count
    /// of capped clouds.
    pub(crate) fn become_serving(&self) {
        if !self.shared.role.serve() {
            return;
        }
        tracing::info!(
            resource = %self.shared.hello.resource_uri,
            "This replica is serving the partner resource now; it keeps catalogs, caps, inventory and reverse DNS current from here on"
        );
        let at = self.shared.now();
        let capped = capped_clouds(&self.shared);
        self.shared.quotes.with(|state| {
            for cloud in capped {
                state.start_counting(cloud, at);
            }
        });
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("no async runtime to run the catalog refresh on");
            return;
        };
        let mut tasks = lock(&self.tasks);
        if tasks.is_empty() {
            let shared = self.shared.clone();
            tasks.push(runtime.spawn(refresh_loop(shared)));
            let provider = PartnerProvider {
                shared: self.shared.clone(),
                tasks: Mutex::new(Vec::new()),
            };
            tasks.push(runtime.spawn(release_loop(provider)));
        }
        let shared = self.shared.clone();
        tasks.push(runtime.spawn(count_capped_clouds(shared)));
    }

    pub(crate) fn class_title(&self, class: &str) -> String {
        self.shared
            .config
            .regions
            .class(class)
            .map_or_else(|| class.to_string(), |c| c.title.clone())
    }

    /// Answers one quote (the body of [`Provider::quote`]).
    async fn answer_quote(&self, q: proto::Quote) -> proto::QuoteReply {
        self.become_serving();
        let shared = &self.shared;
        if !shared.catalogs.has_read() {
            let _ =
                tokio::time::timeout(shared.options.first_read_wait, shared.catalogs.first_read())
                    .await;
        }
        let node = q.node_id.as_str().to_string();
        let at = shared.now();
        let known_site = shared.known.site_of(&node);
        let request = QuoteRequest {
            node: q.node_id.clone(),
            pool: q.pool.clone(),
            purpose: q.purpose,
            class: q.class.clone(),
            shape: q.shape.clone(),
            os: q.os.clone(),
            pinned_site: q.pinned_site.clone().or(known_site),
            public: q.public,
            at,
        };
        let expires = at.plus(shared.options.offer_ttl);
        let outcome = shared.quotes.with(|state| {
            state.expire_reservations(at);
            let outcome = shared
                .catalogs
                .with(|catalogs| quote(&request, &shared.config, catalogs, state));
            // A preview holds nothing: its token is never deployed.
            if !q.preview
                && let Some(reservation) = outcome.reservation(expires)
            {
                state.reserve(request.node.clone(), reservation);
            }
            outcome
        });
        match &outcome.decision {
            Decision::Offer(offer) => {
                let token = OfferToken {
                    node: node.clone(),
                    class: request.class.to_string(),
                    site: offer.site.to_string(),
                    cloud: offer.cloud,
                    location: offer.location.to_string(),
                    plan: offer.plan.to_string(),
                    image: offer.image.id.to_string(),
                    gateway: request.purpose == Purpose::Gateway,
                    rate: offer.price.exchange_rate,
                    account_monthly: offer.price.account_monthly.amount,
                    expires_ms: expires.millis(),
                    pool: q.pool.as_str().to_string(),
                    public: q.public,
                    disks_gib: q.shape.disks_gib.clone(),
                };
                let (Ok(site), Ok(quote_token)) = (
                    proto::SiteName::new(offer.site.as_str()),
                    proto::QuoteToken::new(token.encode()),
                ) else {
                    return proto::QuoteReply::Refused(refused(
                        proto::RefusalKind::Failed,
                        words::could_not_create(&node, offer.site.as_str()),
                    ));
                };
                tracing::debug!(node = %node, site = %offer.site, cloud = %offer.cloud, plan = %offer.plan, "offer");
                proto::QuoteReply::Offer(proto::Offer {
                    site,
                    price: offer.price.usd_monthly,
                    words: offer.tenant_line.clone(),
                    quote_token,
                    expires: UNIX_EPOCH
                        + Duration::from_millis(u64::try_from(expires.millis()).unwrap_or(0)),
                })
            }
            Decision::Refusal(r) => {
                tracing::debug!(node = %node, kind = r.kind.as_str(), "quote refused");
                proto::QuoteReply::Refused(refused(r.kind, r.words.clone()))
            }
        }
    }

    fn describe_catalog(&self) -> proto::Catalog {
        let config = &self.shared.config;
        let at = self.shared.now();
        let state = self.shared.quotes.snapshot();
        let classes = self.shared.catalogs.with(|catalogs| {
            config
                .regions
                .classes()
                .filter_map(|(id, class)| {
                    Some(proto::ClassInfo {
                        id: proto::ClassId::new(id.as_str()).ok()?,
                        title: class.title.clone(),
                        offerings: orc_partner::offered::offered_shapes(class, config, catalogs)
                            .into_iter()
                            .map(|shape| proto::Offering { shape, plan: None })
                            .collect(),
                    })
                })
                .collect()
        });
        let os = config
            .os_map
            .entries()
            .filter_map(|(id, entry)| {
                Some(proto::OsInfo {
                    id: proto::OsId::new(id.as_str()).ok()?,
                    title: entry.title.clone(),
                })
            })
            .collect();
        let availability = self.shared.catalogs.with(|catalogs| {
            config
                .regions
                .classes()
                .filter_map(|(id, class)| {
                    let can_place = class.sites.iter().any(|site| {
                        let usable = config
                            .cloud(site.cloud)
                            .is_some_and(|c| c.is_keyed() && c.enabled);
                        usable
                            && catalogs
                                .get(site.cloud)
                                .is_some_and(|s| s.sells_at(&site.location))
                            && state.cooling_until(&site.name, at).is_none()
                    });
                    Some(proto::ClassAvailability {
                        class: proto::ClassId::new(id.as_str()).ok()?,
                        can_place,
                    })
                })
                .collect()
        });
        let public_ipv4_offered = config
            .clouds
            .values()
            .filter(|c| c.is_keyed() && c.enabled)
            .map(|c| c.pool_ipv4_limit)
            .sum();
        proto::Catalog {
            classes,
            os,
            availability: proto::Availability {
                classes: availability,
                public_ipv4_offered,
            },
            site_gateways: true,
        }
    }
}

/// How soon a failed catalog read is tried again (never later than the refresh interval).
const FAILED_READ_RETRY: Duration = Duration::from_secs(30);

/// Reads every keyed cloud's catalog now and then every refresh interval, while serving; a
/// read that failed is tried again after [`FAILED_READ_RETRY`].
async fn refresh_loop(shared: Arc<Shared>) {
    loop {
        let mut wait = shared.options.refresh_interval;
        if shared.role.is_serving() {
            let failures = shared
                .catalogs
                .refresh(&shared.clients, &shared.config, shared.now())
                .await;
            if !failures.is_empty() {
                wait = wait.min(FAILED_READ_RETRY);
            }
        }
        tokio::time::sleep(wait).await;
    }
}

/// Every refresh interval while serving, releases the stable addresses of sites closed
/// for [`crate::naming::STABLE_KEEP`] ([`PartnerProvider::release_closed_addresses`]).
async fn release_loop(provider: PartnerProvider) {
    loop {
        tokio::time::sleep(provider.shared.options.refresh_interval).await;
        if provider.shared.role.is_serving() {
            provider
                .release_closed_addresses(provider.shared.now())
                .await;
        }
    }
}

/// The keyed clouds with a cap.
fn capped_clouds(shared: &Shared) -> Vec<Cloud> {
    shared
        .clients
        .keyed()
        .into_iter()
        .filter(|c| shared.config.cloud(*c).is_some_and(|cc| cc.is_capped()))
        .collect()
}

/// Counts each capped cloud's nodes (their counts were started on promotion), retrying a
/// failed count, until every one is counted or the replica stands by. A retried count does
/// not start a new counting window: a cloud whose count failed sits out until one succeeds.
async fn count_capped_clouds(shared: Arc<Shared>) {
    let mut pending = capped_clouds(&shared);
    while !pending.is_empty() && shared.role.is_serving() {
        let mut failed = Vec::new();
        for cloud in pending {
            match count_cloud(&shared, cloud).await {
                Ok(usage) => {
                    tracing::info!(%cloud, tenant_nodes = usage.tenant_nodes, monthly_spend_usd = %usage.monthly_spend_usd, "Counted the cloud's nodes; it may place nodes again");
                    shared.quotes.with(|state| state.count_done(cloud, usage));
                }
                Err(e) => {
                    tracing::warn!(%cloud, "The cloud's nodes could not be counted; it sits out quotes until a count succeeds");
                    tracing::debug!(%cloud, error = %e, "the cloud's answer");
                    shared
                        .quotes
                        .with(|state| state.count_failed(cloud, shared.now()));
                    failed.push(cloud);
                }
            }
        }
        pending = failed;
        if !pending.is_empty() {
            tokio::time::sleep(shared.options.count_retry).await;
        }
    }
}

async fn count_cloud(shared: &Shared, cloud: Cloud) -> Result<CloudUsage, CloudError> {
    let mut usage = CloudUsage::default();
    let Some(ownership) = shared.ownership.get(&cloud) else {
        return Ok(usage);
    };
    let mut seen = BTreeSet::new();
    for tag in &ownership.tags {
        for owned in instances::list_by_tag(&shared.clients, cloud, tag, ownership).await? {
            if !seen.insert(owned.instance_ref.clone()) {
                continue;
            }
            if owned.marks.purpose == Purpose::Tenant {
                usage.tenant_nodes = usage.tenant_nodes.saturating_add(1);
            }
            usage.monthly_spend_usd = usage
                .monthly_spend_usd
                .saturating_add(owned.marks.usd_monthly().unwrap_or_default());
        }
    }
    Ok(usage)
}

impl Provider for PartnerProvider {
    fn hello(&self) -> HelloInfo {
        self.shared.hello.clone()
    }

    async fn catalog(&self) -> proto::Catalog {
        self.describe_catalog()
    }

    async fn quote(&self, quote: proto::Quote) -> proto::QuoteReply {
        self.answer_quote(quote).await
    }

    async fn deploy(&self, deploy: proto::Deploy, progress: ProgressSink) -> proto::DeployResult {
        self.carry_out_deploy(deploy, &progress).await
    }

    async fn destroy(&self, node_id: proto::NodeId) -> proto::DestroyResult {
        self.carry_out_destroy(node_id).await
    }

    async fn inventory(&self) -> Option<proto::Inventory> {
        self.report_inventory().await
    }

    fn on_role(&self, role: proto::ReplicaRole) {
        match role {
            proto::ReplicaRole::Serving => self.become_serving(),
            proto::ReplicaRole::Standby => {
                let changed = self.shared.role.stand_by();
                self.shared.sites.clear();
                if changed {
                    tracing::info!(
                        "Standing by: this replica reads no cloud account until it is handed work"
                    );
                }
            }
        }
    }
}
