//! The adapter's pure decisions: what the catalog says can be placed, which offer a quote
//! gets, what its token promises, and what a deploy carrying that token does.
//!
//! Nothing here calls a cloud, reads a clock or panics: the adapter reads the offers and
//! the time at its I/O edge and passes them in, so equal inputs give equal answers.
//!
//! A quote is decided in two steps, so that a quote the catalog already rules out is
//! answered without waiting for the first offers read:
//!
//! 1. [`screen_quote`], against the catalog: the class must be one of its locations and
//!    the operating system one of its images (operator_fix); a node pinned to another site
//!    cannot be placed (no_capacity); extra disks and GPU or metal kinds are not offered
//!    (unplaceable).
//! 2. [`pick_offer`], against the offers snapshot: without a snapshot the quote is
//!    transient. `placement["plan"]` names an exact plan at the location, which must be
//!    listed there and at least the shape (unplaceable otherwise) and be available
//!    (no_capacity). Otherwise the offer is the cheapest available one at the location
//!    whose vCPUs, memory and architecture equal the shape, ties going to the smaller plan
//!    id; none of that shape listed is unplaceable, all of them sold out is no_capacity. A
//!    snapshot's age does not matter: a failed refresh keeps the last one, and quotes keep
//!    using it.
//!
//! An unplaceable refusal carries words that name what is offered instead: the plans at
//! the location, or the listed shapes nearest the one asked for. A one-cloud provider's
//! tenant chose its cloud, so plans and locations may be named.
//!
//! The offer, and its token, lapse `ttl` after `now`. The token carries everything the
//! deploy needs ([`plan_deploy`]), so any replica can carry out the deploy; a deploy after
//! the lapse only answers a machine that an earlier deploy already made.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use orc_common::{Currency, Money, Period};
use orc_proto::{
    Availability, Catalog, ClassAvailability, ClassId, ClassInfo, Deploy, Offer, Offering, OsId,
    OsInfo, Quote, QuoteToken, RefusalKind, SiteName,
};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::model::{MachineCatalog, MachineKey, MachineOffer, MachineSpec, hostname_for};
use crate::cloud_init::{UserData, UserDataError};
use crate::token::{BadToken, decode_token, encode_token};

/// The offers read at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffersSnapshot {
    /// Every offer, sorted by location, then hourly price, then plan.
    pub offers: Vec<MachineOffer>,
    pub read_at: SystemTime,
}

impl OffersSnapshot {
    /// The snapshot of `offers` read at `read_at`, sorted as [`OffersSnapshot::offers`] says.
    pub fn new(mut offers: Vec<MachineOffer>, read_at: SystemTime) -> OffersSnapshot {
        offers.sort_by(|a, b| {
            (&a.location, a.hourly.amount, &a.plan).cmp(&(&b.location, b.hourly.amount, &b.plan))
        });
        OffersSnapshot { offers, read_at }
    }
}

/// Why a quote is refused: the kind the zone acts on, the reason for the operator's log
/// (never sent to the zone) and, for an `unplaceable` request, the tenant's words saying
/// what is offered instead (the generic words of the kind otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuoteRefusal {
    pub kind: RefusalKind,
    pub reason: &'static str,
    pub words: Option<String>,
}

fn refuse<T>(kind: RefusalKind, reason: &'static str) -> Result<T, QuoteRefusal> {
    Err(QuoteRefusal {
        kind,
        reason,
        words: None,
    })
}

fn never<T>(reason: &'static str, words: String) -> Result<T, QuoteRefusal> {
    Err(QuoteRefusal {
        kind: RefusalKind::Unplaceable,
        reason,
        words: Some(words),
    })
}

/// How many offered shapes or plans an `unplaceable` refusal names at most.
const NEAREST_SHOWN: usize = 6;

/// The shape a tenant asks for to get `offer`, when its memory is a whole number of GiB.
fn offered_shape(offer: &MachineOffer) -> Option<orc_common::Shape> {
    if !offer.memory_mib.is_multiple_of(1024) {
        return None;
    }
    Some(orc_common::Shape {
        vcpus: offer.vcpus,
        memory_gib: u32::try_from(offer.memory_mib / 1024).ok()?,
        arch: offer.arch,
        disks_gib: Vec::new(),
    })
}

/// The offers listed at `location`, stock aside, that a tenant can ask for by shape, in
/// shape order then plan.
fn offerings_at<'a>(
    snapshot: &'a OffersSnapshot,
    location: &str,
) -> Vec<(orc_common::Shape, &'a str)> {
    let mut found: Vec<(orc_common::Shape, &str)> = snapshot
        .offers
        .iter()
        .filter(|o| o.location == location)
        .filter_map(|o| Some((offered_shape(o)?, o.plan.as_str())))
        .collect();
    found.sort_by(|a, b| (a.0.list_key(), a.1).cmp(&(b.0.list_key(), b.1)));
    found.dedup();
    found
}

/// The catalog the zone is sent: the locations as classes and the images as operating
/// systems, in catalog order; a class can place a node when the snapshot holds an
/// available offer there (never without a snapshot). One-cloud providers offer no public
/// IPv4 addresses of their own and no site gateways.
pub fn describe_catalog(catalog: &MachineCatalog, snapshot: Option<&OffersSnapshot>) -> Catalog {
    let classes = catalog
        .locations
        .iter()
        .filter_map(|l| {
            let offerings = snapshot
                .map(|s| offerings_at(s, &l.id))
                .unwrap_or_default()
                .into_iter()
                .map(|(shape, plan)| Offering {
                    shape,
                    plan: Some(plan.to_string()),
                })
                .collect();
            Some(ClassInfo {
                id: ClassId::new(l.id.as_str()).ok()?,
                title: l.title.clone(),
                offerings,
            })
        })
        .collect();
    let os = catalog
        .images
        .iter()
        .filter_map(|i| {
            Some(OsInfo {
                id: OsId::new(i.id.as_str()).ok()?,
                title: i.title.clone(),
            })
        })
        .collect();
    let availability = Availability {
        classes: catalog
            .locations
            .iter()
            .filter_map(|l| {
                let can_place = snapshot
                    .is_some_and(|s| s.offers.iter().any(|o| o.location == l.id && o.available));
                Some(ClassAvailability {
                    class: ClassId::new(l.id.as_str()).ok()?,
                    can_place,
                })
            })
            .collect(),
        public_ipv4_offered: 0,
    };
    Catalog {
        classes,
        os,
        availability,
        site_gateways: false,
    }
}

/// The rules of a quote that need no offers: the class must be a catalog location and the
/// operating system a catalog image (operator_fix), a node pinned to another site cannot
/// be placed (no_capacity), extra disks and GPU or metal kinds are not offered
/// (unplaceable).
pub fn screen_quote(quote: &Quote, catalog: &MachineCatalog) -> Result<(), QuoteRefusal> {
    let location = quote.class.as_str();
    if !catalog.locations.iter().any(|l| l.id == location) {
        return refuse(RefusalKind::OperatorFix, "the class is not a location here");
    }
    if !catalog.images.iter().any(|i| i.id == quote.os.as_str()) {
        return refuse(
            RefusalKind::OperatorFix,
            "the operating system is not offered",
        );
    }
    if quote
        .pinned_site
        .as_ref()
        .is_some_and(|s| s.as_str() != location)
    {
        return refuse(
            RefusalKind::NoCapacity,
            "the node is pinned to another site",
        );
    }
    if !quote.shape.disks_gib.is_empty() {
        return never(
            "extra disks are not deployed",
            format!("extra disks are not offered here; ask for {location} without disks"),
        );
    }
    if let Some(kind) = quote.placement.get("kind")
        && matches!(kind.as_str(), "gpu" | "metal")
    {
        return never(
            "this cloud has no GPU or metal",
            format!("no {kind} machines are offered here"),
        );
    }
    Ok(())
}

/// The offer a screened quote gets from `snapshot`, lapsing `ttl` after `now`.
///
/// Without a snapshot the quote is transient. `placement["plan"]` names an exact plan at
/// the location, which must be listed and hold the shape (unplaceable) and be available
/// (no_capacity); otherwise the cheapest available offer at the location whose vCPUs,
/// memory and architecture equal the shape wins, ties going to the smaller plan id.
pub fn pick_offer(
    quote: &Quote,
    snapshot: Option<&OffersSnapshot>,
    now: SystemTime,
    ttl: Duration,
) -> Result<Offer, QuoteRefusal> {
    let Some(snapshot) = snapshot else {
        return refuse(RefusalKind::Transient, "the offers are not read yet");
    };
    let location = quote.class.as_str();
    let shape = &quote.shape;
    let chosen = match quote.placement.get("plan") {
        Some(plan) => {
            let Some(offer) = snapshot
                .offers
                .iter()
                .find(|o| &o.plan == plan && o.location == location)
            else {
                let mut plans: Vec<&str> = snapshot
                    .offers
                    .iter()
                    .filter(|o| o.location == location)
                    .map(|o| o.plan.as_str())
                    .collect();
                plans.sort_unstable();
                plans.dedup();
                let words = if plans.is_empty() {
                    format!("plan {plan} is not offered at {location}, nor any other plan now")
                } else {
                    format!(
                        "plan {plan} is not offered at {location}; plans there: {}",
                        plans.join(", ")
                    )
                };
                return never("the placement's plan is unknown", words);
            };
            let fits = offer.vcpus >= shape.vcpus
                && offer.memory_mib >= u64::from(shape.memory_gib) * 1024
                && offer.arch == shape.arch;
            if !fits {
                let has = offered_shape(offer).map_or_else(
                    || format!("{} vCPU · {} MiB", offer.vcpus, offer.memory_mib),
                    |s| s.to_string(),
                );
                return never(
                    "the placement's plan is smaller than the shape",
                    format!("plan {plan} has {has}, less than the {shape} asked for"),
                );
            }
            if !offer.available {
                return refuse(RefusalKind::NoCapacity, "the plan is sold out");
            }
            offer
        }
        None => {
            let shaped: Vec<&MachineOffer> = snapshot
                .offers
                .iter()
                .filter(|o| {
                    o.location == location && o.matches(shape.vcpus, shape.memory_gib, shape.arch)
                })
                .collect();
            let cheapest = shaped
                .iter()
                .copied()
                .filter(|o| o.available)
                .min_by(|a, b| (a.hourly.amount, &a.plan).cmp(&(b.hourly.amount, &b.plan)));
            match cheapest {
                Some(offer) => offer,
                None if shaped.is_empty() => {
                    let offered: Vec<orc_common::Shape> = offerings_at(snapshot, location)
                        .into_iter()
                        .map(|(s, _)| s)
                        .collect();
                    let nearest = shape.nearest(&offered, NEAREST_SHOWN);
                    let words = if nearest.is_empty() {
                        format!("no plan at {location} has {shape}, nor any other shape now")
                    } else {
                        let list: Vec<String> = nearest.iter().map(ToString::to_string).collect();
                        format!(
                            "no plan at {location} has {shape}; nearest offered: {}",
                            list.join(", ")
                        )
                    };
                    return never("no plan has this shape", words);
                }
                None => {
                    return refuse(
                        RefusalKind::NoCapacity,
                        "every plan of this shape is sold out",
                    );
                }
            }
        }
    };
    let Some(expires) = now.checked_add(ttl) else {
        return refuse(RefusalKind::Failed, "the offer's lapse is out of range");
    };
    let token = OfferToken {
        node: quote.node_id.as_str().to_string(),
        location: chosen.location.clone(),
        plan: chosen.plan.clone(),
        amount: chosen.hourly.amount,
        currency: chosen.hourly.currency,
        expires_ms: unix_millis(expires),
    };
    let (Ok(site), Ok(quote_token)) = (
        SiteName::new(chosen.location.as_str()),
        QuoteToken::new(token.encode()),
    ) else {
        return refuse(RefusalKind::Failed, "the offer has an empty location");
    };
    Ok(Offer {
        site,
        price: Some(chosen.hourly),
        words: format!("{} · {}", quote.shape, chosen.location),
        quote_token,
        expires,
    })
}

/// What a deploy does with the offer its token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployPlan {
    /// The offer's hourly price, reported with the deployed node.
    pub hourly: Money,
    pub step: DeployStep,
}

/// The cloud call a deploy makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeployStep {
    /// Create the machine, or find the one an earlier deploy of the node made.
    Create(MachineSpec),
    /// The offer lapsed: only a machine that already carries the key is answered.
    FindExisting(MachineKey),
}

/// The plan of `deploy` at `now`, or why it cannot be carried out (always a failed
/// refusal: another node's token, a token that cannot be read, an empty node id, a
/// bootstrap that cannot travel as user data).
pub fn plan_deploy(deploy: &Deploy, now: SystemTime) -> Result<DeployPlan, &'static str> {
    let node = deploy.node_id.as_str();
    let token = match OfferToken::decode(deploy.quote_token.as_str()) {
        Ok(token) if token.node == node => token,
        Ok(_) => return Err("the quote token belongs to another node"),
        Err(_) => return Err("the quote token cannot be read"),
    };
    let Some(key) = MachineKey::new(node) else {
        return Err("the node id is empty");
    };
    let hourly = token.hourly();
    if token.expires_ms < unix_millis(now) {
        return Ok(DeployPlan {
            hourly,
            step: DeployStep::FindExisting(key),
        });
    }
    let user_data = user_data(&deploy.bootstrap.0, &deploy.ssh_keys)?;
    Ok(DeployPlan {
        hourly,
        step: DeployStep::Create(MachineSpec {
            idempotency_key: key,
            name: hostname_for(node),
            location: token.location,
            plan: token.plan,
            image: deploy.os.as_str().to_string(),
            ssh_keys: deploy.ssh_keys.clone(),
            user_data,
        }),
    })
}

/// The node's user data: a cloud-config installing `ssh_keys` for root, the zone's
/// bootstrap payload, or a MIME multipart document with both ([`UserData`]). `Err` names
/// what is wrong.
pub fn user_data(bootstrap: &[u8], ssh_keys: &[String]) -> Result<Option<String>, &'static str> {
    match UserData::new(bootstrap) {
        Ok(data) => Ok(data.ssh_keys(ssh_keys).render()),
        Err(UserDataError::BootstrapNotText) => Err("the bootstrap is not UTF-8"),
    }
}

/// What a quote token carries: the node, the plan and location it was offered at, the
/// hourly price and when it lapses. Any replica can read it (no state behind it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OfferToken {
    pub(crate) node: String,
    pub(crate) location: String,
    pub(crate) plan: String,
    pub(crate) amount: Decimal,
    pub(crate) currency: Currency,
    pub(crate) expires_ms: u64,
}

/// The token layout's version; a token of another layout is refused by name.
const TOKEN_VERSION: &str = "m2";

impl OfferToken {
    pub(crate) fn encode(&self) -> String {
        encode_token(TOKEN_VERSION, self)
    }

    pub(crate) fn decode(text: &str) -> Result<OfferToken, BadToken> {
        decode_token(TOKEN_VERSION, text)
    }

    fn hourly(&self) -> Money {
        Money::new(self.amount, self.currency, Period::Hour)
    }
}

fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use orc_common::{Architecture, Shape};
    use orc_proto::{Bootstrap, ClassId, NodeId, OsId, PoolPath, Purpose};

    use super::*;
    use crate::machine::model::CatalogEntry;

    const TTL: Duration = Duration::from_secs(600);

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000)
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

    fn sold_out(offer: MachineOffer) -> MachineOffer {
        MachineOffer {
            available: false,
            ..offer
        }
    }

    fn snapshot(offers: Vec<MachineOffer>) -> OffersSnapshot {
        OffersSnapshot::new(offers, now())
    }

    fn standard() -> OffersSnapshot {
        snapshot(vec![
            offer("big", "here", 4, 8, "0.02"),
            offer("small-a", "here", 2, 4, "0.009"),
            offer("small-b", "here", 2, 4, "0.007"),
            offer("small-c", "there", 2, 4, "0.001"),
        ])
    }

    fn catalog() -> MachineCatalog {
        let entry = |id: &str| CatalogEntry {
            id: id.into(),
            title: id.to_uppercase(),
        };
        MachineCatalog {
            locations: vec![entry("here"), entry("there")],
            images: vec![entry("linux")],
        }
    }

    fn quote(class: &str, vcpus: u32, gib: u32) -> Quote {
        Quote {
            pool: PoolPath::new("p").unwrap(),
            node_id: NodeId::new("n1").unwrap(),
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

    fn placed(plan: &str, vcpus: u32, gib: u32) -> Quote {
        let mut q = quote("here", vcpus, gib);
        q.placement.insert("plan".into(), plan.into());
        q
    }

    fn plan_of(picked: Result<Offer, QuoteRefusal>) -> String {
        let offer = picked.unwrap_or_else(|r| panic!("refused: {r:?}"));
        OfferToken::decode(offer.quote_token.as_str()).unwrap().plan
    }

    fn words(picked: Result<Offer, QuoteRefusal>) -> String {
        match picked {
            Ok(offer) => panic!("expected a refusal, got an offer at {}", offer.site),
            Err(r) => r
                .words
                .expect("an unplaceable refusal says what is offered"),
        }
    }

    fn refusal(picked: Result<Offer, QuoteRefusal>) -> (RefusalKind, &'static str) {
        match picked {
            Ok(offer) => panic!("expected a refusal, got an offer at {}", offer.site),
            Err(r) => (r.kind, r.reason),
        }
    }

    fn pick(q: &Quote, snapshot: &OffersSnapshot) -> Result<Offer, QuoteRefusal> {
        pick_offer(q, Some(snapshot), now(), TTL)
    }

    #[test]
    fn the_cheapest_available_offer_of_the_exact_shape_at_the_location_wins() {
        let offer = pick(&quote("here", 2, 4), &standard()).unwrap();
        assert_eq!(offer.site.as_str(), "here");
        assert_eq!(offer.price.unwrap().amount, Decimal::new(7, 3));
        assert_eq!(offer.words, "2 vCPU · 4 GiB · here");
        assert_eq!(offer.expires, now() + TTL);
        let token = OfferToken::decode(offer.quote_token.as_str()).unwrap();
        assert_eq!(
            token,
            OfferToken {
                node: "n1".into(),
                location: "here".into(),
                plan: "small-b".into(),
                amount: Decimal::new(7, 3),
                currency: Currency::EUR,
                expires_ms: 1_800_000_600_000,
            }
        );
        assert_eq!(plan_of(pick(&quote("there", 2, 4), &standard())), "small-c");
    }

    #[test]
    fn vcpus_memory_and_architecture_must_equal_the_shape() {
        let near_misses = snapshot(vec![
            offer("more-cpu", "here", 4, 4, "0.001"),
            offer("more-memory", "here", 2, 8, "0.001"),
            MachineOffer {
                memory_mib: 4095,
                ..offer("a-mib-short", "here", 2, 4, "0.001")
            },
            MachineOffer {
                arch: Architecture::Arm64,
                ..offer("arm", "here", 2, 4, "0.001")
            },
        ]);
        assert_eq!(
            refusal(pick(&quote("here", 2, 4), &near_misses)),
            (RefusalKind::Unplaceable, "no plan has this shape")
        );
        assert_eq!(
            words(pick(&quote("here", 2, 4), &near_misses)),
            "no plan at here has 2 vCPU · 4 GiB; nearest offered: 2 vCPU · 4 GiB · arm64, \
             2 vCPU · 8 GiB, 4 vCPU · 4 GiB",
            "a plan of 4095 MiB cannot be asked for"
        );
        let mut arm = quote("here", 2, 4);
        arm.shape.arch = Architecture::Arm64;
        assert_eq!(plan_of(pick(&arm, &near_misses)), "arm");
    }

    #[test]
    fn equal_prices_go_to_the_smaller_plan_id_whatever_the_order() {
        let tied = vec![
            offer("b-plan", "here", 2, 4, "0.005"),
            offer("a-plan", "here", 2, 4, "0.005"),
            offer("c-plan", "here", 2, 4, "0.005"),
        ];
        assert_eq!(
            plan_of(pick(&quote("here", 2, 4), &snapshot(tied.clone()))),
            "a-plan"
        );
        let unsorted = OffersSnapshot {
            offers: tied,
            read_at: now(),
        };
        assert_eq!(plan_of(pick(&quote("here", 2, 4), &unsorted)), "a-plan");
    }

    #[test]
    fn sold_out_offers_are_passed_over_and_none_left_is_no_capacity() {
        let cheapest_gone = snapshot(vec![
            sold_out(offer("small-b", "here", 2, 4, "0.007")),
            offer("small-a", "here", 2, 4, "0.009"),
        ]);
        assert_eq!(
            plan_of(pick(&quote("here", 2, 4), &cheapest_gone)),
            "small-a"
        );
        let all_gone = snapshot(vec![
            sold_out(offer("small-b", "here", 2, 4, "0.007")),
            sold_out(offer("small-a", "here", 2, 4, "0.009")),
            offer("small-c", "there", 2, 4, "0.001"),
        ]);
        assert_eq!(
            refusal(pick(&quote("here", 2, 4), &all_gone)),
            (
                RefusalKind::NoCapacity,
                "every plan of this shape is sold out"
            )
        );
    }

    #[test]
    fn a_placement_plan_is_taken_as_named_when_it_holds_the_shape() {
        assert_eq!(
            plan_of(pick(&placed("small-a", 2, 4), &standard())),
            "small-a"
        );
        assert_eq!(plan_of(pick(&placed("big", 1, 2), &standard())), "big");
        assert_eq!(
            refusal(pick(&placed("small-a", 4, 8), &standard())),
            (
                RefusalKind::Unplaceable,
                "the placement's plan is smaller than the shape"
            )
        );
        assert_eq!(
            words(pick(&placed("small-a", 4, 8), &standard())),
            "plan small-a has 2 vCPU · 4 GiB, less than the 4 vCPU · 8 GiB asked for"
        );
        let mut arm = placed("big", 2, 4);
        arm.shape.arch = Architecture::Arm64;
        assert_eq!(refusal(pick(&arm, &standard())).0, RefusalKind::Unplaceable);
        assert_eq!(
            refusal(pick(&placed("nonesuch", 2, 4), &standard())),
            (RefusalKind::Unplaceable, "the placement's plan is unknown")
        );
        assert_eq!(
            words(pick(&placed("nonesuch", 2, 4), &standard())),
            "plan nonesuch is not offered at here; plans there: big, small-a, small-b"
        );
        assert_eq!(
            refusal(pick(&placed("small-c", 2, 4), &standard())),
            (RefusalKind::Unplaceable, "the placement's plan is unknown"),
            "a plan of another location is not one of this location's"
        );
        let gone = snapshot(vec![sold_out(offer("small-a", "here", 2, 4, "0.009"))]);
        assert_eq!(
            refusal(pick(&placed("small-a", 2, 4), &gone)),
            (RefusalKind::NoCapacity, "the plan is sold out")
        );
    }

    #[test]
    fn no_snapshot_is_transient_an_empty_one_has_nothing_and_an_old_one_still_serves() {
        assert_eq!(
            refusal(pick_offer(&quote("here", 2, 4), None, now(), TTL)),
            (RefusalKind::Transient, "the offers are not read yet")
        );
        assert_eq!(
            refusal(pick(&quote("here", 2, 4), &snapshot(vec![]))),
            (RefusalKind::Unplaceable, "no plan has this shape")
        );
        assert_eq!(
            words(pick(&quote("here", 2, 4), &snapshot(vec![]))),
            "no plan at here has 2 vCPU · 4 GiB, nor any other shape now"
        );
        let old = OffersSnapshot {
            read_at: UNIX_EPOCH,
            ..standard()
        };
        assert_eq!(plan_of(pick(&quote("here", 2, 4), &old)), "small-b");
    }

    #[test]
    fn an_offer_lapse_out_of_range_is_refused_not_a_panic() {
        assert_eq!(
            refusal(pick_offer(
                &quote("here", 2, 4),
                Some(&standard()),
                now(),
                Duration::MAX
            ))
            .0,
            RefusalKind::Failed
        );
    }

    #[test]
    fn the_snapshot_is_sorted_by_location_price_and_plan() {
        let sorted = standard();
        let order: Vec<&str> = sorted.offers.iter().map(|o| o.plan.as_str()).collect();
        assert_eq!(order, ["small-b", "small-a", "big", "small-c"]);
    }

    #[test]
    fn a_class_can_place_when_its_location_has_an_available_offer() {
        let can_place = |snapshot: Option<&OffersSnapshot>| -> Vec<(String, bool)> {
            describe_catalog(&catalog(), snapshot)
                .availability
                .classes
                .iter()
                .map(|c| (c.class.as_str().to_string(), c.can_place))
                .collect()
        };
        let none = vec![("here".to_string(), false), ("there".to_string(), false)];
        assert_eq!(can_place(None), none);
        assert_eq!(can_place(Some(&snapshot(vec![]))), none);
        let there_sold_out = snapshot(vec![
            offer("small-a", "here", 2, 4, "0.009"),
            sold_out(offer("small-c", "there", 2, 4, "0.001")),
        ]);
        assert_eq!(
            can_place(Some(&there_sold_out)),
            vec![("here".to_string(), true), ("there".to_string(), false)]
        );
        let described = describe_catalog(&catalog(), Some(&there_sold_out));
        let classes: Vec<(&str, &str)> = described
            .classes
            .iter()
            .map(|c| (c.id.as_str(), c.title.as_str()))
            .collect();
        assert_eq!(classes, [("here", "HERE"), ("there", "THERE")]);
        assert_eq!(described.os.len(), 1);
        assert_eq!(described.availability.public_ipv4_offered, 0);
        assert!(!described.site_gateways);
    }

    #[test]
    fn each_class_lists_its_plans_by_shape_stock_aside() {
        let mut listed = standard();
        listed
            .offers
            .push(sold_out(offer("sold", "here", 8, 16, "0.04")));
        listed.offers.push(MachineOffer {
            memory_mib: 512,
            ..offer("tiny", "here", 1, 1, "0.001")
        });
        let described = describe_catalog(&catalog(), Some(&listed));
        let here: Vec<String> = described.classes[0]
            .offerings
            .iter()
            .map(|o| format!("{} {}", o.plan.as_deref().unwrap_or("-"), o.shape))
            .collect();
        assert_eq!(
            here,
            [
                "small-a 2 vCPU · 4 GiB",
                "small-b 2 vCPU · 4 GiB",
                "big 4 vCPU · 8 GiB",
                "sold 8 vCPU · 16 GiB"
            ],
            "a plan of 512 MiB cannot be asked for by shape"
        );
        assert!(
            describe_catalog(&catalog(), None).classes[0]
                .offerings
                .is_empty()
        );
    }

    #[test]
    fn screening_refuses_what_the_catalog_rules_out() {
        let screen = |q: &Quote| screen_quote(q, &catalog()).map_err(|r| (r.kind, r.reason));
        assert_eq!(screen(&quote("here", 2, 4)), Ok(()));
        assert_eq!(
            screen(&quote("elsewhere", 2, 4)),
            Err((RefusalKind::OperatorFix, "the class is not a location here"))
        );
        let mut os = quote("here", 2, 4);
        os.os = OsId::new("plan9").unwrap();
        assert_eq!(screen(&os).unwrap_err().0, RefusalKind::OperatorFix);
        let mut pinned = quote("here", 2, 4);
        pinned.pinned_site = Some(SiteName::new("there").unwrap());
        assert_eq!(screen(&pinned).unwrap_err().0, RefusalKind::NoCapacity);
        pinned.pinned_site = Some(SiteName::new("here").unwrap());
        assert_eq!(screen(&pinned), Ok(()));
        let mut disks = quote("here", 2, 4);
        disks.shape.disks_gib = vec![100];
        assert_eq!(screen(&disks).unwrap_err().0, RefusalKind::Unplaceable);
        for kind in ["gpu", "metal"] {
            let mut special = quote("here", 2, 4);
            special.placement.insert("kind".into(), kind.into());
            assert_eq!(screen(&special).unwrap_err().0, RefusalKind::Unplaceable);
        }
        let mut general = quote("here", 2, 4);
        general.placement.insert("kind".into(), "general".into());
        assert_eq!(screen(&general), Ok(()));
    }

    fn deploy_with(offer: &Offer, node: &str) -> Deploy {
        Deploy {
            node_id: NodeId::new(node).unwrap(),
            quote_token: offer.quote_token.clone(),
            os: OsId::new("linux").unwrap(),
            ssh_keys: vec!["ssh-ed25519 AAAA a@b".into()],
            bootstrap: Bootstrap(b"#!/bin/sh\necho hi\n".to_vec()),
        }
    }

    #[test]
    fn a_deploy_in_time_creates_the_offered_plan_under_the_node_key() {
        let offer = pick(&quote("here", 2, 4), &standard()).unwrap();
        let plan = plan_deploy(&deploy_with(&offer, "n1"), now()).unwrap();
        assert_eq!(plan.hourly, offer.price.unwrap());
        let DeployStep::Create(spec) = plan.step else {
            panic!("expected a create, got {:?}", plan.step);
        };
        assert_eq!(spec.idempotency_key.as_str(), "n1");
        assert_eq!(spec.name, "n1");
        assert_eq!(
            (spec.location.as_str(), spec.plan.as_str()),
            ("here", "small-b")
        );
        assert_eq!(spec.image, "linux");
        assert_eq!(spec.ssh_keys, ["ssh-ed25519 AAAA a@b"]);
        let user_data = spec.user_data.unwrap();
        assert!(user_data.contains("echo hi") && user_data.contains("ssh-ed25519 AAAA a@b"));
        let at_the_lapse = plan_deploy(&deploy_with(&offer, "n1"), offer.expires).unwrap();
        assert!(matches!(at_the_lapse.step, DeployStep::Create(_)));
    }

    #[test]
    fn a_deploy_after_the_lapse_only_finds_an_existing_machine() {
        let offer = pick(&quote("here", 2, 4), &standard()).unwrap();
        let mut deploy = deploy_with(&offer, "n1");
        deploy.bootstrap = Bootstrap(vec![0xff, 0xfe]);
        let late = offer.expires + Duration::from_millis(1);
        assert_eq!(
            plan_deploy(&deploy, late),
            Ok(DeployPlan {
                hourly: offer.price.unwrap(),
                step: DeployStep::FindExisting(MachineKey::new("n1").unwrap()),
            })
        );
        assert_eq!(
            plan_deploy(&deploy, now()),
            Err("the bootstrap is not UTF-8")
        );
    }

    #[test]
    fn a_deploy_with_another_nodes_or_an_unreadable_token_is_refused() {
        let offer = pick(&quote("here", 2, 4), &standard()).unwrap();
        assert_eq!(
            plan_deploy(&deploy_with(&offer, "n2"), now()),
            Err("the quote token belongs to another node")
        );
        for text in [
            "m1|here|small-b|0.007|EUR|1800000600000|n1",
            "m2.!!",
            "p1.e30",
        ] {
            let forged = Offer {
                quote_token: QuoteToken::new(text).unwrap(),
                ..offer.clone()
            };
            assert_eq!(
                plan_deploy(&deploy_with(&forged, "n1"), now()),
                Err("the quote token cannot be read"),
                "{text}"
            );
        }
    }

    #[test]
    fn offer_tokens_round_trip_and_refuse_other_layouts() {
        let token = OfferToken {
            node: "node|with|bars".into(),
            location: "fsn1".into(),
            plan: "cx23".into(),
            amount: Decimal::new(595, 5),
            currency: Currency::EUR,
            expires_ms: 1_800_000_000_000,
        };
        let text = token.encode();
        assert!(text.starts_with("m2."), "{text}");
        assert_eq!(OfferToken::decode(&text), Ok(token));
        assert!(OfferToken::decode("m1|fsn1|cx23|0.00595|EUR|1|n").is_err());
        let extra = encode_token(
            TOKEN_VERSION,
            &serde_json::json!({
                "node": "n", "location": "l", "plan": "p", "amount": "1",
                "currency": "EUR", "expires_ms": 1, "zone": "z"
            }),
        );
        assert!(OfferToken::decode(&extra).is_err());
        let bad_currency = encode_token(
            TOKEN_VERSION,
            &serde_json::json!({
                "node": "n", "location": "l", "plan": "p", "amount": "1",
                "currency": "euro", "expires_ms": 1
            }),
        );
        assert!(OfferToken::decode(&bad_currency).is_err());
    }

    #[test]
    fn user_data_carries_keys_and_bootstrap_and_names_a_bad_bootstrap() {
        assert_eq!(user_data(b"", &[]), Ok(None));
        let keys = vec!["ssh-ed25519 AAAA a@b".to_string(), " ".to_string()];
        let only_keys = user_data(b"", &keys).unwrap().unwrap();
        assert!(only_keys.starts_with("#cloud-config\n"));
        assert!(only_keys.contains("\"ssh-ed25519 AAAA a@b\""));
        assert_eq!(
            user_data(b"#!/bin/sh\n", &[]).unwrap().as_deref(),
            Some("#!/bin/sh\n")
        );
        let both = user_data(b"#!/bin/sh\necho hi\n", &keys).unwrap().unwrap();
        assert!(both.contains("multipart/mixed"));
        assert!(both.contains("text/x-shellscript") && both.contains("echo hi"));
        assert_eq!(
            user_data(&[0xff, 0xfe], &[]),
            Err("the bootstrap is not UTF-8")
        );
    }
}
