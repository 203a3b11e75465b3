//! The explained quote engine: a pure function of request, config, catalog snapshots and
//! state that answers "what would this node cost, where" with an offer or a refusal, and
//! explains every candidate site.
//!
//! For each site of the class, in map order, the checks run in this order and the first that
//! fails excludes the site (the outcome records why): site guard (live elsewhere), pin, key,
//! retired (tenants), location allow-list, catalog read, location sold, exact-fit plan (or
//! the gateway plan) with the plan allow-list and stock, image for the OS (or the gateway
//! image) with the image allow-list, block storage for extra disks; then the price is known
//! and shown, and the site may still be excluded for cooling down, counting, or a cap.
//!
//! Ranking: priced candidates by monthly USD (plan + disks), ties to the earlier site; every
//! unpriced candidate (an account billing in a currency with no exchange rate) ranks after
//! every priced one, among themselves by site order. A cloud being counted answers `counting`
//! only when its candidate would have ranked first.
//!
//! Never calls a cloud, never reads a clock, never panics; deterministic for equal inputs
//! whatever order the catalogs list plans and images in.

use orc_common::{Currency, Money, Period, Shape};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::catalog::{CatalogSnapshot, Catalogs, Image, LocatedPlan, Plan, PlanPrice};
use crate::ids::{
    ClassId, Cloud, ImageId, LocationId, NodeId, OsId, PlanId, PoolPath, SiteName, Timestamp,
};
use crate::maps::{ImageSelector, OsEntry, RegionClass, Site, gateway_image_selector};
use crate::params::{CloudConfig, Config};
use crate::state::{COUNTING_WINDOW, CountStatus, QuoteState, Reservation};
use crate::words;

/// Hours in a billing month, used to turn a block-storage monthly price into an hourly one.
pub const HOURS_PER_MONTH: u32 = 730;

pub use orc_common::{Purpose, RefusalKind};

/// One quote request, as the zone (or the admin page's preview) asks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuoteRequest {
    pub node: NodeId,
    pub pool: PoolPath,
    pub purpose: Purpose,
    pub class: ClassId,
    pub shape: Shape,
    /// The OS id; ignored for gateways, which boot the gateway image.
    pub os: OsId,
    /// Only this site may serve, when set.
    pub pinned_site: Option<SiteName>,
    /// A public pool: its pin in the state applies.
    pub public: bool,
    /// When the quote is asked.
    pub at: Timestamp,
}

/// Which kind a refusal takes when several sites were excluded for different reasons:
/// the kind that lets the node place soonest wins.
fn priority(kind: RefusalKind) -> u8 {
    match kind {
        RefusalKind::Counting => 0,
        RefusalKind::Transient => 1,
        RefusalKind::NoCapacity => 2,
        RefusalKind::OperatorFix => 3,
        RefusalKind::Failed => 4,
        RefusalKind::Unplaceable => 5,
    }
}

/// Why a site was left out of a quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Exclusion {
    /// The site name is live at another location than the map now gives it.
    RemappedWhileLive {
        live_cloud: Cloud,
        live_location: LocationId,
    },
    /// The pool is pinned to another site.
    PinnedElsewhere { pinned: SiteName },
    /// The site's cloud has no key in the params.
    NoKey,
    /// `<cloud>_enabled` is false.
    Retired,
    /// `<cloud>_regions` does not list the location.
    LocationNotAllowed,
    /// The cloud's catalog has not been read yet.
    CatalogUnread,
    /// The cloud sells nothing at the location right now.
    LocationNotSold,
    /// No plan of exactly the shape (or fitting the gateway minimum) is listed there.
    NoExactPlan,
    /// Exact-fit plans exist, but `<cloud>_plans` allows none of them.
    PlanNotAllowed,
    /// Exact-fit plans are listed there but sold out.
    SoldOut,
    /// `<cloud>_gateway_plan` names a plan the cloud does not list at the location.
    GatewayPlanNotOffered { plan: PlanId },
    /// The OS has no selector for this cloud, or it resolves to no image.
    NoImage,
    /// `<cloud>_images` allows neither the image's family nor its id.
    ImageNotAllowed { image: ImageId },
    /// Extra disks were asked for and the cloud's block-storage price is unknown.
    NoBlockStorage,
    /// The cloud refused a create here for lack of room.
    CoolingDown { until: Timestamp },
    /// The capped cloud is being counted (for at most the counting window).
    Counting { since: Timestamp },
    /// The capped cloud's count is not done (failed, overdue or not started): it sits out.
    CountPending,
    /// `<cloud>_max_nodes` would be passed.
    NodeCap { max: u32, used: u32 },
    /// `<cloud>_max_monthly_spend` would be passed.
    SpendCap {
        max: Decimal,
        used: Decimal,
        node: Decimal,
    },
    /// A spend cap is set but the node has no USD price (no exchange rate).
    SpendCapUnpriced,
}

impl Exclusion {
    /// The refusal kind this reason leads to when no site is left.
    pub fn refusal_kind(&self) -> RefusalKind {
        match self {
            Exclusion::PinnedElsewhere { .. }
            | Exclusion::Retired
            | Exclusion::LocationNotSold
            | Exclusion::NoExactPlan
            | Exclusion::SoldOut
            | Exclusion::NoBlockStorage
            | Exclusion::CoolingDown { .. }
            | Exclusion::NodeCap { .. }
            | Exclusion::SpendCap { .. } => RefusalKind::NoCapacity,
            Exclusion::Counting { .. } => RefusalKind::Counting,
            Exclusion::CatalogUnread | Exclusion::CountPending => RefusalKind::Transient,
            Exclusion::RemappedWhileLive { .. }
            | Exclusion::NoKey
            | Exclusion::LocationNotAllowed
            | Exclusion::PlanNotAllowed
            | Exclusion::GatewayPlanNotOffered { .. }
            | Exclusion::NoImage
            | Exclusion::ImageNotAllowed { .. }
            | Exclusion::SpendCapUnpriced => RefusalKind::OperatorFix,
        }
    }

    /// The site does not sell what was asked at all (the shape, the OS at that shape, or
    /// extra disks), stock aside.
    pub fn not_sold(&self) -> bool {
        matches!(
            self,
            Exclusion::NoExactPlan | Exclusion::NoImage | Exclusion::NoBlockStorage
        )
    }

    /// The site stays out until the catalog or the operator's config changes: nothing that
    /// passes by itself (stock, cooldowns, counting, caps, an unread catalog) excluded it.
    pub fn stays_until_changed(&self) -> bool {
        match self {
            Exclusion::NoExactPlan
            | Exclusion::NoImage
            | Exclusion::NoBlockStorage
            | Exclusion::RemappedWhileLive { .. }
            | Exclusion::NoKey
            | Exclusion::Retired
            | Exclusion::LocationNotAllowed
            | Exclusion::PlanNotAllowed
            | Exclusion::GatewayPlanNotOffered { .. }
            | Exclusion::ImageNotAllowed { .. }
            | Exclusion::SpendCapUnpriced => true,
            Exclusion::PinnedElsewhere { .. }
            | Exclusion::CatalogUnread
            | Exclusion::LocationNotSold
            | Exclusion::SoldOut
            | Exclusion::CoolingDown { .. }
            | Exclusion::Counting { .. }
            | Exclusion::CountPending
            | Exclusion::NodeCap { .. }
            | Exclusion::SpendCap { .. } => false,
        }
    }

    /// The short category the Quote preview shows.
    pub fn category(&self) -> &'static str {
        match self {
            Exclusion::RemappedWhileLive { .. } => "remapped while live",
            Exclusion::PinnedElsewhere { .. } => "pinned elsewhere",
            Exclusion::NoKey
            | Exclusion::LocationNotAllowed
            | Exclusion::PlanNotAllowed
            | Exclusion::GatewayPlanNotOffered { .. }
            | Exclusion::ImageNotAllowed { .. }
            | Exclusion::SpendCapUnpriced => "config",
            Exclusion::Retired => "retired",
            Exclusion::CatalogUnread => "no catalog",
            Exclusion::LocationNotSold | Exclusion::SoldOut | Exclusion::NoBlockStorage => {
                "not sold"
            }
            Exclusion::NoExactPlan => "no exact plan",
            Exclusion::NoImage => "no image",
            Exclusion::CoolingDown { .. } => "cooling down",
            Exclusion::Counting { .. } | Exclusion::CountPending => "counting",
            Exclusion::NodeCap { .. } | Exclusion::SpendCap { .. } => "cap",
        }
    }

    /// Operator detail: what exactly excluded the site.
    pub fn detail(&self, cloud: Cloud) -> String {
        match self {
            Exclusion::RemappedWhileLive {
                live_cloud,
                live_location,
            } => format!("site is live at {live_cloud}:{live_location}; put the old mapping back"),
            Exclusion::PinnedElsewhere { pinned } => format!("pool is pinned to {pinned}"),
            Exclusion::NoKey => format!("{} is not set", cloud.key_param()),
            Exclusion::Retired => format!("{cloud}_enabled is false"),
            Exclusion::LocationNotAllowed => format!("{cloud}_regions does not list the location"),
            Exclusion::CatalogUnread => "the cloud's catalog has not been read yet".to_string(),
            Exclusion::LocationNotSold => "the cloud sells nothing here right now".to_string(),
            Exclusion::NoExactPlan => "no plan of exactly this shape here".to_string(),
            Exclusion::PlanNotAllowed => format!("{cloud}_plans allows no fitting plan"),
            Exclusion::SoldOut => "every fitting plan is sold out here".to_string(),
            Exclusion::GatewayPlanNotOffered { plan } => {
                format!("{cloud}_gateway_plan {plan} is not offered here")
            }
            Exclusion::NoImage => "the OS has no image on this cloud".to_string(),
            Exclusion::ImageNotAllowed { image } => {
                format!("{cloud}_images allows neither image {image} nor its family")
            }
            Exclusion::NoBlockStorage => "block-storage price unknown".to_string(),
            Exclusion::CoolingDown { until } => {
                format!("refused a create; sits out until unix time {until}")
            }
            Exclusion::Counting { since } => format!("being counted since unix time {since}"),
            Exclusion::CountPending => "count not done; sits out while it is retried".to_string(),
            Exclusion::NodeCap { max, used } => {
                format!("{cloud}_max_nodes {max} reached ({used} held or reserved)")
            }
            Exclusion::SpendCap { max, used, node } => {
                format!("{cloud}_max_monthly_spend {max} USD would be passed ({used} + {node})")
            }
            Exclusion::SpendCapUnpriced => format!(
                "{cloud}_max_monthly_spend is set but the account has no {cloud}_exchange_rate"
            ),
        }
    }
}

/// An image as the outcome names it (operator detail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageRef {
    pub id: ImageId,
    pub title: String,
}

/// A candidate's price: in the account currency and, when a rate is known, in USD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidatePrice {
    /// Plan plus extra disks, per month, in the account currency.
    pub account_monthly: Money,
    /// Plan plus extra disks, per hour, in the account currency.
    pub account_hourly: Money,
    /// USD per unit of the account currency; `None` leaves the candidate unpriced.
    pub exchange_rate: Option<Decimal>,
    pub usd_monthly: Option<Money>,
    pub usd_hourly: Option<Money>,
}

impl CandidatePrice {
    fn rank_key(&self) -> (bool, Decimal) {
        match &self.usd_monthly {
            Some(m) => (false, m.amount),
            None => (true, Decimal::ZERO),
        }
    }
}

/// How a candidate fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The offer.
    Winner,
    /// Could serve, but another candidate ranked first.
    Eligible,
    /// Left out, with the reason.
    Excluded { exclusion: Exclusion },
}

/// One site of the class and what the quote found there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// Position in the class's site list (0-based): the tie-break.
    pub order: usize,
    pub site: SiteName,
    pub cloud: Cloud,
    pub location: LocationId,
    pub plan: Option<PlanId>,
    pub image: Option<ImageRef>,
    pub price: Option<CandidatePrice>,
    pub verdict: Verdict,
}

impl Candidate {
    /// The reason it was excluded, if it was.
    pub fn exclusion(&self) -> Option<&Exclusion> {
        match &self.verdict {
            Verdict::Excluded { exclusion } => Some(exclusion),
            Verdict::Winner | Verdict::Eligible => None,
        }
    }

    fn rank_key(&self) -> Option<(bool, Decimal, usize)> {
        self.price.as_ref().map(|p| {
            let (unpriced, usd) = p.rank_key();
            (unpriced, usd, self.order)
        })
    }
}

/// The winning placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offer {
    pub site: SiteName,
    pub cloud: Cloud,
    pub location: LocationId,
    pub plan: PlanId,
    pub image: ImageRef,
    pub price: CandidatePrice,
    /// What the tenant reads: `2 vCPU · 4 GiB · eu-central`.
    pub tenant_line: String,
}

/// A refusal with its kind and the tenant's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    /// The generic tenant message (from [`crate::words`]).
    pub words: String,
    /// The site the refusal concerns, when one does.
    pub site: Option<SiteName>,
}

/// Offer or refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Offer(Offer),
    Refusal(Refusal),
}

/// The answer and its full explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuoteOutcome {
    pub node: NodeId,
    pub purpose: Purpose,
    pub class: ClassId,
    /// `None` when the class is not in the region map.
    pub class_title: Option<String>,
    /// The tenant's shape, or for a gateway the gateway minimum.
    pub shape: Shape,
    pub os: OsId,
    /// The pin that applied (from the request or the pool's pin).
    pub pinned_site: Option<SiteName>,
    /// Every site of the class, in map order.
    pub candidates: Vec<Candidate>,
    pub decision: Decision,
}

impl QuoteOutcome {
    /// The offer, if the quote made one.
    pub fn offer(&self) -> Option<&Offer> {
        match &self.decision {
            Decision::Offer(offer) => Some(offer),
            Decision::Refusal(_) => None,
        }
    }

    /// The refusal, if the quote refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.decision {
            Decision::Offer(_) => None,
            Decision::Refusal(refusal) => Some(refusal),
        }
    }

    /// The reservation that holds this outcome's offer until `expires_at`, for
    /// [`QuoteState::reserve`] under [`QuoteOutcome::node`]. `None` for a refusal.
    pub fn reservation(&self, expires_at: Timestamp) -> Option<Reservation> {
        self.offer().map(|offer| Reservation {
            cloud: offer.cloud,
            site: offer.site.clone(),
            purpose: self.purpose,
            usd_monthly: offer.price.usd_monthly.map(|m| m.amount),
            expires_at,
        })
    }

    /// Every string of this outcome a tenant may read.
    pub fn tenant_strings(&self) -> Vec<&str> {
        match &self.decision {
            Decision::Offer(offer) => vec![offer.tenant_line.as_str()],
            Decision::Refusal(refusal) => vec![refusal.words.as_str()],
        }
    }
}

/// Quotes one node. See the module docs for the algorithm.
pub fn quote(
    request: &QuoteRequest,
    config: &Config,
    catalogs: &Catalogs,
    state: &QuoteState,
) -> QuoteOutcome {
    let pin = request.pinned_site.clone().or_else(|| {
        request
            .public
            .then(|| state.pin_of(&request.pool).cloned())
            .flatten()
    });
    let mut outcome = QuoteOutcome {
        node: request.node.clone(),
        purpose: request.purpose,
        class: request.class.clone(),
        class_title: None,
        shape: match request.purpose {
            Purpose::Tenant => request.shape.clone(),
            Purpose::Gateway => Shape {
                vcpus: config.gateway.cpu,
                memory_gib: config.gateway.mem_gib,
                arch: orc_common::Architecture::X86_64,
                disks_gib: Vec::new(),
            },
        },
        os: request.os.clone(),
        pinned_site: pin.clone(),
        candidates: Vec::new(),
        decision: Decision::Refusal(Refusal {
            kind: RefusalKind::OperatorFix,
            words: String::new(),
            site: None,
        }),
    };
    let Some(class) = config.regions.class(request.class.as_str()) else {
        outcome.decision = Decision::Refusal(Refusal {
            kind: RefusalKind::OperatorFix,
            words: words::needs_operator_in_class(request.node.as_str(), request.class.as_str()),
            site: None,
        });
        return outcome;
    };
    outcome.class_title = Some(class.title.clone());
    let os_entry = config.os_map.get(request.os.as_str());
    let ctx = Context {
        request,
        config,
        state,
        pin: pin.as_ref(),
        os_entry,
    };
    outcome.candidates = class
        .sites
        .iter()
        .enumerate()
        .map(|(order, site)| ctx.evaluate(order, site, catalogs))
        .collect();
    outcome.decision = decide(
        request,
        &outcome.shape,
        class,
        pin.as_ref(),
        &mut outcome.candidates,
    );
    if let Decision::Refusal(refusal) = &mut outcome.decision
        && refusal.kind == RefusalKind::Unplaceable
    {
        refusal.words = unplaceable_words(request, class, config, catalogs, &outcome.candidates);
    }
    outcome
}

/// What an `unplaceable` refusal tells the tenant: what no site sells (the OS at this shape
/// when some site sells the shape, extra disks when some site sells both, else the shape),
/// with what is offered instead.
fn unplaceable_words(
    request: &QuoteRequest,
    class: &RegionClass,
    config: &Config,
    catalogs: &Catalogs,
    candidates: &[Candidate],
) -> String {
    let found = |wanted: fn(&Exclusion) -> bool| {
        candidates.iter().any(|c| c.exclusion().is_some_and(wanted))
    };
    let bare = Shape {
        disks_gib: Vec::new(),
        ..request.shape.clone()
    };
    if found(|e| matches!(e, Exclusion::NoImage)) {
        let offered: Vec<String> = crate::offered::offered_os(class, config, catalogs, &bare)
            .into_iter()
            .map(|os| os.to_string())
            .collect();
        return words::os_not_offered(&class.title, request.os.as_str(), &bare, &offered);
    }
    if found(|e| matches!(e, Exclusion::NoBlockStorage)) {
        return words::disks_not_offered(&class.title, &bare);
    }
    let offered = crate::offered::offered_shapes(class, config, catalogs);
    let nearest = bare.nearest(&offered, crate::offered::NEAREST_SHOWN);
    words::shape_not_offered(&class.title, &bare, &nearest)
}

struct Context<'a> {
    request: &'a QuoteRequest,
    config: &'a Config,
    state: &'a QuoteState,
    pin: Option<&'a SiteName>,
    os_entry: Option<&'a OsEntry>,
}

impl Context<'_> {
    fn evaluate(&self, order: usize, site: &Site, catalogs: &Catalogs) -> Candidate {
        let mut candidate = Candidate {
            order,
            site: site.name.clone(),
            cloud: site.cloud,
            location: site.location.clone(),
            plan: None,
            image: None,
            price: None,
            verdict: Verdict::Eligible,
        };
        let snapshot = catalogs.get(site.cloud);
        let located = catalogs.plans_at(site.cloud, &site.location);
        if let Err(exclusion) = self.check(site, snapshot, located, &mut candidate) {
            candidate.verdict = Verdict::Excluded { exclusion };
        }
        candidate
    }

    fn check(
        &self,
        site: &Site,
        snapshot: Option<&CatalogSnapshot>,
        located: &[LocatedPlan],
        candidate: &mut Candidate,
    ) -> Result<(), Exclusion> {
        let request = self.request;
        let tenant = request.purpose == Purpose::Tenant;
        if let Some(live) = self.state.live_at(&site.name)
            && (live.cloud != site.cloud || live.location != site.location)
        {
            return Err(Exclusion::RemappedWhileLive {
                live_cloud: live.cloud,
                live_location: live.location.clone(),
            });
        }
        if let Some(pin) = self.pin
            && *pin != site.name
        {
            return Err(Exclusion::PinnedElsewhere {
                pinned: pin.clone(),
            });
        }
        let Some(cloud) = self.config.cloud(site.cloud).filter(|c| c.is_keyed()) else {
            return Err(Exclusion::NoKey);
        };
        if tenant && !cloud.enabled {
            return Err(Exclusion::Retired);
        }
        if let Some(allowed) = &cloud.regions
            && !allowed.contains(&site.location)
        {
            return Err(Exclusion::LocationNotAllowed);
        }
        let Some(snapshot) = snapshot else {
            return Err(Exclusion::CatalogUnread);
        };
        let (plan, plan_price) = match request.purpose {
            Purpose::Tenant => exact_plan(snapshot, located, cloud, &request.shape)?,
            Purpose::Gateway => gateway_plan(snapshot, located, cloud, self.config)?,
        };
        candidate.plan = Some(plan.id.clone());

        let arch = plan.arch;
        let gateway_selector;
        let selector: &ImageSelector = match request.purpose {
            Purpose::Tenant => self
                .os_entry
                .and_then(|e| e.selectors.get(&site.cloud))
                .ok_or(Exclusion::NoImage)?,
            Purpose::Gateway => {
                gateway_selector = gateway_image_selector(site.cloud);
                &gateway_selector
            }
        };
        let image = selector
            .resolve(&snapshot.images, arch)
            .ok_or(Exclusion::NoImage)?;
        if let Some(allowed) = &cloud.images
            && !image_named(allowed, image)
        {
            return Err(Exclusion::ImageNotAllowed {
                image: image.id.clone(),
            });
        }
        candidate.image = Some(ImageRef {
            id: image.id.clone(),
            title: image.title.clone(),
        });

        let disk_gib: u64 = match request.purpose {
            Purpose::Tenant => request.shape.disks_gib.iter().map(|&d| u64::from(d)).sum(),
            Purpose::Gateway => 0,
        };
        let disk_monthly = if disk_gib == 0 {
            Decimal::ZERO
        } else {
            let per_gib = snapshot
                .block_storage_per_gib_month
                .ok_or(Exclusion::NoBlockStorage)?;
            per_gib * Decimal::from(disk_gib)
        };
        let price = price(snapshot.currency, plan_price, disk_monthly, cloud);
        let usd_monthly = price.usd_monthly.map(|m| m.amount);
        candidate.price = Some(price);

        if let Some(until) = self.state.cooling_until(&site.name, request.at) {
            return Err(Exclusion::CoolingDown { until });
        }
        if tenant && cloud.is_capped() {
            match self.state.count_status(site.cloud) {
                Some(CountStatus::Counted) => {}
                Some(CountStatus::Counting { since })
                    if request.at.since(since) < COUNTING_WINDOW =>
                {
                    return Err(Exclusion::Counting { since });
                }
                Some(CountStatus::Counting { .. } | CountStatus::Failed { .. }) | None => {
                    return Err(Exclusion::CountPending);
                }
            }
            let usage = self
                .state
                .usage_with_reservations(site.cloud, &request.node, request.at);
            if let Some(max) = cloud.max_nodes
                && usage.tenant_nodes.saturating_add(1) > max
            {
                return Err(Exclusion::NodeCap {
                    max,
                    used: usage.tenant_nodes,
                });
            }
            if let Some(max) = cloud.max_monthly_spend {
                let node = usd_monthly.ok_or(Exclusion::SpendCapUnpriced)?;
                if usage
                    .monthly_spend_usd
                    .checked_add(node)
                    .is_none_or(|total| total > max)
                {
                    return Err(Exclusion::SpendCap {
                        max,
                        used: usage.monthly_spend_usd,
                        node,
                    });
                }
            }
        }
        Ok(())
    }
}

fn price(
    currency: Currency,
    plan: PlanPrice,
    disk_monthly: Decimal,
    cloud: &CloudConfig,
) -> CandidatePrice {
    let monthly = plan.monthly + disk_monthly;
    let hourly = if disk_monthly.is_zero() {
        plan.hourly
    } else {
        plan.hourly + disk_monthly / Decimal::from(HOURS_PER_MONTH)
    };
    let rate = cloud.usd_rate(currency);
    let usd = |amount: Decimal, period| {
        rate.and_then(|r| amount.checked_mul(r))
            .map(|a| Money::new(a, Currency::USD, period))
    };
    CandidatePrice {
        account_monthly: Money::new(monthly, currency, Period::Month),
        account_hourly: Money::new(hourly, currency, Period::Hour),
        exchange_rate: rate,
        usd_monthly: usd(monthly, Period::Month),
        usd_hourly: usd(hourly, Period::Hour),
    }
}

/// Whether `<cloud>_images` names the image by its family, id or name.
pub(crate) fn image_named(allowed: &std::collections::BTreeSet<String>, image: &Image) -> bool {
    allowed.contains(image.family.as_str())
        || allowed.contains(image.id.as_str())
        || image
            .name
            .as_ref()
            .is_some_and(|n| allowed.contains(n.as_str()))
}

/// Whether `<cloud>_plans` allows the plan (no list allows every plan).
pub(crate) fn plan_allowed(cloud: &CloudConfig, plan: &Plan) -> bool {
    cloud
        .plans
        .as_ref()
        .is_none_or(|allowed| allowed.contains(&plan.id))
}

/// The cheapest sold, allowed plan among those listed at a location that pass `fits`, or the
/// most specific reason there is none. Ties go to the smaller plan id, so listing order never
/// matters.
fn cheapest_plan<'a>(
    snapshot: &'a CatalogSnapshot,
    located: &[LocatedPlan],
    cloud: &CloudConfig,
    fits: impl Fn(&Plan) -> bool,
) -> Result<(&'a Plan, PlanPrice), Exclusion> {
    let mut best: Option<(&Plan, PlanPrice)> = None;
    let (mut listed, mut allowed) = (false, false);
    for lp in located {
        let Some(plan) = snapshot.plans.get(lp.plan) else {
            continue;
        };
        if !fits(plan) {
            continue;
        }
        listed = true;
        if let Some((held, held_price)) = &best
            && (lp.price.monthly, plan.id.as_str()) >= (held_price.monthly, held.id.as_str())
        {
            continue;
        }
        if !plan_allowed(cloud, plan) {
            continue;
        }
        allowed = true;
        if lp.sold {
            best = Some((plan, lp.price));
        }
    }
    match best {
        Some(found) => Ok(found),
        None if !located.iter().any(|lp| lp.sold) => Err(Exclusion::LocationNotSold),
        None if !listed => Err(Exclusion::NoExactPlan),
        None if !allowed => Err(Exclusion::PlanNotAllowed),
        None => Err(Exclusion::SoldOut),
    }
}

/// The cheapest plan of exactly the shape sold at the location, or why there is none.
fn exact_plan<'a>(
    snapshot: &'a CatalogSnapshot,
    located: &[LocatedPlan],
    cloud: &CloudConfig,
    shape: &Shape,
) -> Result<(&'a Plan, PlanPrice), Exclusion> {
    cheapest_plan(snapshot, located, cloud, |plan| {
        plan.vcpus == shape.vcpus
            && plan.arch == shape.arch
            && plan.memory_gib_exact() == Some(shape.memory_gib)
    })
}

/// The gateway's plan at the location: `<cloud>_gateway_plan`, or the cheapest x86 plan with
/// at least the gateway minimum.
fn gateway_plan<'a>(
    snapshot: &'a CatalogSnapshot,
    located: &[LocatedPlan],
    cloud: &CloudConfig,
    config: &Config,
) -> Result<(&'a Plan, PlanPrice), Exclusion> {
    if let Some(named) = &cloud.gateway_plan {
        let not_offered = || Exclusion::GatewayPlanNotOffered {
            plan: named.clone(),
        };
        let lp = located
            .iter()
            .find(|lp| snapshot.plans.get(lp.plan).is_some_and(|p| p.id == *named))
            .ok_or_else(not_offered)?;
        let plan = snapshot.plans.get(lp.plan).ok_or_else(not_offered)?;
        if !plan_allowed(cloud, plan) {
            return Err(Exclusion::PlanNotAllowed);
        }
        return if lp.sold {
            Ok((plan, lp.price))
        } else {
            Err(Exclusion::SoldOut)
        };
    }
    let min_mib = u64::from(config.gateway.mem_gib) * 1024;
    cheapest_plan(snapshot, located, cloud, |plan| {
        plan.arch == orc_common::Architecture::X86_64
            && plan.vcpus >= config.gateway.cpu
            && plan.memory_mib >= min_mib
    })
}

fn decide(
    request: &QuoteRequest,
    shape: &Shape,
    class: &RegionClass,
    pin: Option<&SiteName>,
    candidates: &mut [Candidate],
) -> Decision {
    let node = request.node.as_str();
    let mut winner: Option<(usize, (bool, Decimal, usize))> = None;
    let mut counting: Option<(bool, Decimal, usize)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let Some(key) = c.rank_key() else { continue };
        match &c.verdict {
            Verdict::Eligible => {
                if winner.as_ref().is_none_or(|(_, held)| key < *held) {
                    winner = Some((i, key));
                }
            }
            Verdict::Excluded {
                exclusion: Exclusion::Counting { .. },
            } => {
                if counting.is_none_or(|held| key < held) {
                    counting = Some(key);
                }
            }
            Verdict::Excluded { .. } | Verdict::Winner => {}
        }
    }
    if let Some(counting_key) = counting
        && winner.as_ref().is_none_or(|(_, key)| counting_key < *key)
    {
        return Decision::Refusal(Refusal {
            kind: RefusalKind::Counting,
            words: words::counting(),
            site: None,
        });
    }
    if let Some((i, _)) = winner {
        let c = &mut candidates[i];
        c.verdict = Verdict::Winner;
        if let (Some(plan), Some(image), Some(price)) = (&c.plan, &c.image, &c.price) {
            return Decision::Offer(Offer {
                site: c.site.clone(),
                cloud: c.cloud,
                location: c.location.clone(),
                plan: plan.clone(),
                image: image.clone(),
                price: price.clone(),
                tenant_line: words::price_line(shape, request.class.as_str()),
            });
        }
    }
    refusal(node, request.purpose, class, pin, candidates)
}

/// A tenant's request no site can ever take as asked: every site stays out until something
/// changes, and at least one because it does not sell the shape, the OS or the disks.
fn never_placeable(purpose: Purpose, pin: Option<&SiteName>, candidates: &[Candidate]) -> bool {
    purpose == Purpose::Tenant
        && pin.is_none()
        && candidates
            .iter()
            .all(|c| c.exclusion().is_some_and(Exclusion::stays_until_changed))
        && candidates
            .iter()
            .any(|c| c.exclusion().is_some_and(Exclusion::not_sold))
}

fn refusal(
    node: &str,
    purpose: Purpose,
    class: &RegionClass,
    pin: Option<&SiteName>,
    candidates: &[Candidate],
) -> Decision {
    if never_placeable(purpose, pin, candidates) {
        return Decision::Refusal(Refusal {
            kind: RefusalKind::Unplaceable,
            // Worded by the caller, which holds the catalogs.
            words: String::new(),
            site: None,
        });
    }
    let pinned = pin.and_then(|p| candidates.iter().find(|c| &c.site == p));
    let chosen = match (pin, pinned) {
        (Some(_), Some(c)) => c.exclusion().map(|e| (e.refusal_kind(), Some(c))),
        (Some(_), None) => None,
        (None, _) => candidates
            .iter()
            .filter_map(|c| c.exclusion().map(|e| (e.refusal_kind(), Some(c))))
            .min_by_key(|(kind, c)| (priority(*kind), c.map(|c| c.order))),
    };
    let (kind, site) = chosen.unwrap_or((RefusalKind::NoCapacity, None));
    let site_name = site.map(|c| c.site.clone());
    let site_text = site_name.as_ref().map_or("", |s| s.as_str());
    let words = match kind {
        RefusalKind::NoCapacity if pin.is_some() => words::no_capacity_pinned(&class.title),
        RefusalKind::NoCapacity => words::no_capacity(&class.title),
        RefusalKind::Counting => words::counting(),
        RefusalKind::Transient => words::could_not_finish(&class.title),
        RefusalKind::OperatorFix => words::needs_operator(node, site_text),
        RefusalKind::Failed => words::could_not_create(node, site_text),
        // Only `never_placeable` decides this kind, above.
        RefusalKind::Unplaceable => words::no_capacity(&class.title),
    };
    Decision::Refusal(Refusal {
        kind,
        words,
        site: site_name,
    })
}

#[cfg(test)]
#[path = "quote_tests.rs"]
mod tests;
