//! Table tests of the quote engine on the real seed catalogs, and property tests of its
//! ordering, tie-breaks and tenant words.

use std::collections::BTreeSet;
use std::time::Duration;

use orc_common::{Architecture, Shape};
use proptest::prelude::*;
use rust_decimal::{Decimal, dec};

use super::*;
use crate::catalog::Catalogs;
use crate::params::{MapSource, load_config};
use crate::seed::testing::{seed_catalogs, seed_hetzner, seed_vultr};
use crate::state::{CloudUsage, LiveSite, QuoteState, Reservation};

const T0: Timestamp = Timestamp::from_unix_secs(1_800_000_000);

fn source() -> MapSource {
    MapSource::new()
        .param("partner_id", "zone-1")
        .param("hetzner_api_token", "h-key")
        .param("hetzner_owner_tag", "orc-partner-hetzner")
        .param("vultr_api_key", "v-key")
        .param("vultr_owner_tag", "orc-partner-vultr")
}

fn config_with(extra: &[(&str, &str)]) -> Config {
    let mut s = source();
    for (name, value) in extra {
        s = s.param(name, value);
    }
    load_config(&s).unwrap()
}

/// Both clouds keyed, Hetzner's EUR account at 1.08 USD.
fn priced() -> Config {
    config_with(&[("hetzner_exchange_rate", "1.08")])
}

fn shape(vcpus: u32, gib: u32) -> Shape {
    Shape {
        vcpus,
        memory_gib: gib,
        arch: Architecture::X86_64,
        disks_gib: vec![],
    }
}

fn request(class: &str, shape: Shape, os: &str) -> QuoteRequest {
    QuoteRequest {
        node: NodeId::new("n-000001").unwrap(),
        pool: PoolPath::new("p-000001").unwrap(),
        purpose: Purpose::Tenant,
        class: ClassId::new(class).unwrap(),
        shape,
        os: OsId::new(os).unwrap(),
        pinned_site: None,
        public: false,
        at: T0,
    }
}

fn gateway(class: &str, site: &str) -> QuoteRequest {
    QuoteRequest {
        purpose: Purpose::Gateway,
        pinned_site: Some(SiteName::new(site).unwrap()),
        ..request(class, shape(0, 0), "gateway")
    }
}

fn offer(outcome: &QuoteOutcome) -> &Offer {
    outcome.offer().unwrap_or_else(|| {
        panic!(
            "expected an offer:\n{}",
            crate::explain::render_table(outcome)
        )
    })
}

fn refusal(outcome: &QuoteOutcome) -> &Refusal {
    outcome.refusal().unwrap_or_else(|| {
        panic!(
            "expected a refusal:\n{}",
            crate::explain::render_table(outcome)
        )
    })
}

fn exclusion<'a>(outcome: &'a QuoteOutcome, site: &str) -> Option<&'a Exclusion> {
    outcome
        .candidates
        .iter()
        .find(|c| c.site.as_str() == site)
        .and_then(Candidate::exclusion)
}

fn set_sold(catalogs: &mut Catalogs, cloud: Cloud, plan: &str, location: &str, sold: bool) {
    catalogs.update(cloud, |snapshot| {
        let plan = snapshot
            .plans
            .iter_mut()
            .find(|p| p.id.as_str() == plan)
            .unwrap();
        let loc = LocationId::new(location).unwrap();
        if sold {
            plan.sold_in.insert(loc);
        } else {
            plan.sold_in.remove(&loc);
        }
    });
}

fn counted(state: &mut QuoteState, cloud: Cloud, tenant_nodes: u32, spend: Decimal) {
    state.count_done(
        cloud,
        CloudUsage {
            tenant_nodes,
            monthly_spend_usd: spend,
        },
    );
}

#[test]
fn two_by_four_in_the_us_lands_on_vultr() {
    let catalogs = seed_catalogs();
    for (class, hetzner_site, vultr_site) in [
        ("us-east", "us-east-a", "us-east-b"),
        ("us-west", "us-west-a", "us-west-b"),
    ] {
        let outcome = quote(
            &request(class, shape(2, 4), "ubuntu-24.04"),
            &priced(),
            &catalogs,
            &QuoteState::new(),
        );
        let o = offer(&outcome);
        assert_eq!(
            (o.site.as_str(), o.cloud, o.plan.as_str()),
            (vultr_site, Cloud::Vultr, "vc2-2c-4gb")
        );
        assert_eq!(o.price.usd_monthly.unwrap().amount, dec!(20));
        assert_eq!(o.image.id.as_str(), "2284");
        assert_eq!(o.tenant_line, format!("2 vCPU · 4 GiB · {class}"));
        assert_eq!(
            exclusion(&outcome, hetzner_site),
            Some(&Exclusion::NoExactPlan)
        );
    }
}

#[test]
fn windows_routes_only_to_vultr() {
    let outcome = quote(
        &request("eu-central", shape(2, 4), "windows-2022"),
        &priced(),
        &seed_catalogs(),
        &QuoteState::new(),
    );
    let o = offer(&outcome);
    assert_eq!((o.site.as_str(), o.cloud), ("eu-central-c", Cloud::Vultr));
    assert_eq!(o.image.title, "Windows 2022 Standard x64");
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::NoImage)
    );
    assert_eq!(
        exclusion(&outcome, "eu-central-b"),
        Some(&Exclusion::NoImage)
    );
}

#[test]
fn a_price_tie_goes_to_the_earlier_site() {
    let outcome = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &priced(),
        &seed_catalogs(),
        &QuoteState::new(),
    );
    let o = offer(&outcome);
    assert_eq!((o.site.as_str(), o.plan.as_str()), ("eu-central-a", "cx23"));
    // 5.49 EUR net × 1.19 VAT × 1.08 USD/EUR.
    assert_eq!(o.price.usd_monthly.unwrap().amount, dec!(7.055748));
    assert_eq!(o.price.exchange_rate, Some(dec!(1.08)));
    let b = &outcome.candidates[1];
    assert_eq!(b.verdict, Verdict::Eligible);
    assert_eq!(b.price.as_ref().unwrap().usd_monthly, o.price.usd_monthly);
}

#[test]
fn a_sold_out_plan_moves_the_node_to_the_next_cheapest_site() {
    let mut catalogs = seed_catalogs();
    set_sold(&mut catalogs, Cloud::Hetzner, "cx23", "fsn1", false);
    let config = priced();
    let req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    let outcome = quote(&req, &config, &catalogs, &QuoteState::new());
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-b");
    // fsn1 still sells the dearer cpx22, so it stays eligible at its price.
    assert_eq!(
        outcome.candidates[0].plan.as_ref().unwrap().as_str(),
        "cpx22"
    );

    set_sold(&mut catalogs, Cloud::Hetzner, "cx23", "nbg1", false);
    set_sold(&mut catalogs, Cloud::Hetzner, "cpx22", "fsn1", false);
    set_sold(&mut catalogs, Cloud::Hetzner, "cpx22", "nbg1", false);
    let outcome = quote(&req, &config, &catalogs, &QuoteState::new());
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-c");
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::SoldOut)
    );
}

#[test]
fn a_cap_moves_the_node() {
    let config = config_with(&[
        ("hetzner_exchange_rate", "1.08"),
        ("hetzner_max_nodes", "2"),
    ]);
    let catalogs = seed_catalogs();
    let req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    let mut state = QuoteState::new();
    counted(&mut state, Cloud::Hetzner, 1, dec!(0));
    assert_eq!(
        offer(&quote(&req, &config, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-a"
    );

    // Another node's in-flight deploy holds the last slot.
    state.reserve(
        NodeId::new("n-other").unwrap(),
        Reservation {
            cloud: Cloud::Hetzner,
            site: SiteName::new("eu-central-b").unwrap(),
            purpose: Purpose::Tenant,
            usd_monthly: Some(dec!(7)),
            expires_at: T0.plus(Duration::from_secs(60)),
        },
    );
    let outcome = quote(&req, &config, &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-c");
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::NodeCap { max: 2, used: 2 })
    );

    // The node's own reservation, taken from its offer, does not count against it.
    state.release(&NodeId::new("n-other").unwrap());
    let first = quote(&req, &config, &catalogs, &state);
    let held = first.reservation(T0.plus(Duration::from_secs(60))).unwrap();
    assert_eq!(
        (held.cloud, held.usd_monthly),
        (Cloud::Hetzner, Some(dec!(7.055748)))
    );
    state.reserve(first.node.clone(), held);
    assert_eq!(quote(&req, &config, &catalogs, &state), first);

    // A second node sees the slot taken, until the first deploy fails and releases it.
    let second = QuoteRequest {
        node: NodeId::new("n-000002").unwrap(),
        ..req.clone()
    };
    assert_eq!(
        offer(&quote(&second, &config, &catalogs, &state)).cloud,
        Cloud::Vultr
    );
    state.release(&req.node);
    assert_eq!(
        offer(&quote(&second, &config, &catalogs, &state)).cloud,
        Cloud::Hetzner
    );
    // Committed, it counts like a running node.
    state.reserve(
        req.node.clone(),
        first.reservation(T0.plus(Duration::from_secs(60))).unwrap(),
    );
    state.commit(&req.node);
    assert_eq!(
        offer(&quote(&second, &config, &catalogs, &state)).cloud,
        Cloud::Vultr
    );
}

#[test]
fn a_spend_cap_counts_gateways_and_moves_the_node() {
    let config = config_with(&[
        ("hetzner_exchange_rate", "1.08"),
        ("hetzner_max_monthly_spend", "10"),
    ]);
    let catalogs = seed_catalogs();
    let mut state = QuoteState::new();
    counted(&mut state, Cloud::Hetzner, 0, dec!(2));
    let req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    assert_eq!(
        offer(&quote(&req, &config, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-a"
    );

    counted(&mut state, Cloud::Hetzner, 0, dec!(5));
    let outcome = quote(&req, &config, &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-c");
    assert!(matches!(
        exclusion(&outcome, "eu-central-a"),
        Some(Exclusion::SpendCap { .. })
    ));

    // A gateway counts but is never refused by the cap.
    let gw = quote(
        &gateway("eu-central", "eu-central-a"),
        &config,
        &catalogs,
        &state,
    );
    assert_eq!(offer(&gw).cloud, Cloud::Hetzner);
}

#[test]
fn a_euro_account_with_no_rate_is_unpriced_and_ranks_last() {
    let config = config_with(&[]);
    let catalogs = seed_catalogs();
    let outcome = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &config,
        &catalogs,
        &QuoteState::new(),
    );
    let o = offer(&outcome);
    assert_eq!(
        o.cloud,
        Cloud::Vultr,
        "a priced offer beats an unpriced cheaper one"
    );
    let a = outcome.candidates[0].price.as_ref().unwrap();
    assert_eq!((a.exchange_rate, a.usd_monthly), (None, None));
    assert_eq!(a.account_monthly.amount, dec!(6.5331));
    let table = crate::explain::render_table(&outcome);
    assert!(table.contains("unpriced (no rate for EUR)"), "{table}");

    // With no priced candidate, the earliest unpriced one wins, and the offer has no price.
    let only_hetzner = load_config(&source().param("vultr_api_key", "")).unwrap();
    let outcome = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &only_hetzner,
        &catalogs,
        &QuoteState::new(),
    );
    let o = offer(&outcome);
    assert_eq!(o.site.as_str(), "eu-central-a");
    assert!(o.price.usd_monthly.is_none() && o.price.usd_hourly.is_none());
    assert_eq!(exclusion(&outcome, "eu-central-c"), Some(&Exclusion::NoKey));

    // A spend cap cannot be held without a rate: operator fix.
    let capped = load_config(
        &source()
            .param("vultr_api_key", "")
            .param("hetzner_max_monthly_spend", "100"),
    )
    .unwrap();
    let mut state = QuoteState::new();
    counted(&mut state, Cloud::Hetzner, 0, dec!(0));
    let outcome = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &capped,
        &catalogs,
        &state,
    );
    assert_eq!(refusal(&outcome).kind, RefusalKind::OperatorFix);
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::SpendCapUnpriced)
    );
}

#[test]
fn gateways_take_the_cheapest_x86_plan_with_the_minimum_or_the_named_plan() {
    let catalogs = seed_catalogs();
    let config = priced();
    let outcome = quote(
        &gateway("eu-central", "eu-central-a"),
        &config,
        &catalogs,
        &QuoteState::new(),
    );
    let o = offer(&outcome);
    assert_eq!(
        (o.plan.as_str(), o.image.title.as_str()),
        ("cx23", "Ubuntu 24.04")
    );
    assert_eq!(
        exclusion(&outcome, "eu-central-c"),
        Some(&Exclusion::PinnedElsewhere {
            pinned: SiteName::new("eu-central-a").unwrap()
        })
    );

    let o = quote(
        &gateway("eu-central", "eu-central-c"),
        &config,
        &catalogs,
        &QuoteState::new(),
    );
    assert_eq!(
        (offer(&o).plan.as_str(), offer(&o).image.id.as_str()),
        ("vc2-1c-2gb", "2284")
    );

    let o = quote(
        &gateway("us-east", "us-east-a"),
        &config,
        &catalogs,
        &QuoteState::new(),
    );
    assert_eq!(offer(&o).plan.as_str(), "cpx11");

    let bigger = config_with(&[
        ("hetzner_exchange_rate", "1.08"),
        ("gateway", r#"{"cpu": 2, "mem": 8}"#),
    ]);
    let o = quote(
        &gateway("us-east", "us-east-a"),
        &bigger,
        &catalogs,
        &QuoteState::new(),
    );
    // At least 2 vCPU / 8 GiB: cpx31 (4/8) is cheaper than ccx13 (2/8) in ash.
    assert_eq!(offer(&o).plan.as_str(), "cpx31");

    let named = config_with(&[
        ("hetzner_gateway_plan", "cpx22"),
        ("hetzner_max_nodes", "0"),
    ]);
    let o = quote(
        &gateway("eu-central", "eu-central-b"),
        &named,
        &catalogs,
        &QuoteState::new(),
    );
    assert_eq!(
        offer(&o).plan.as_str(),
        "cpx22",
        "named plan, and caps or counting never refuse a gateway"
    );

    let retired = config_with(&[("hetzner_enabled", "false")]);
    let o = quote(
        &gateway("eu-central", "eu-central-b"),
        &retired,
        &catalogs,
        &QuoteState::new(),
    );
    assert_eq!(
        offer(&o).cloud,
        Cloud::Hetzner,
        "a retired cloud's open site keeps its gateway"
    );
    let o = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &retired,
        &catalogs,
        &QuoteState::new(),
    );
    assert_eq!(exclusion(&o, "eu-central-a"), Some(&Exclusion::Retired));
}

#[test]
fn a_pinned_public_pool_parks_with_generic_words() {
    let mut catalogs = seed_catalogs();
    let config = priced();
    let mut state = QuoteState::new();
    let mut req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    req.public = true;
    state.pin(req.pool.clone(), SiteName::new("eu-central-b").unwrap());
    let outcome = quote(&req, &config, &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-b");

    for plan in ["cx23", "cpx22"] {
        set_sold(&mut catalogs, Cloud::Hetzner, plan, "nbg1", false);
    }
    let outcome = quote(&req, &config, &catalogs, &state);
    let r = refusal(&outcome);
    assert_eq!(r.kind, RefusalKind::NoCapacity);
    assert_eq!(
        r.words,
        "no capacity in Europe Central for this shape right now"
    );
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::PinnedElsewhere {
            pinned: SiteName::new("eu-central-b").unwrap()
        })
    );

    // A pool that is not public is never pinned.
    req.public = false;
    assert_eq!(
        offer(&quote(&req, &config, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-a"
    );
}

#[test]
fn a_cheaper_cloud_being_counted_answers_counting_for_thirty_seconds() {
    let config = config_with(&[
        ("hetzner_exchange_rate", "1.08"),
        ("hetzner_max_nodes", "50"),
    ]);
    let catalogs = seed_catalogs();
    let mut state = QuoteState::new();
    state.start_counting(Cloud::Hetzner, T0);
    let mut req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    req.at = T0.plus(Duration::from_secs(5));
    let outcome = quote(&req, &config, &catalogs, &state);
    let r = refusal(&outcome);
    assert_eq!(
        (r.kind, r.words.as_str()),
        (
            RefusalKind::Counting,
            "counting capacity, try again shortly"
        )
    );

    // In us-east Hetzner has no exact plan, so counting it does not hold the node back.
    let us = request("us-east", shape(2, 4), "ubuntu-24.04");
    assert_eq!(
        offer(&quote(
            &QuoteRequest { at: req.at, ..us },
            &config,
            &catalogs,
            &state
        ))
        .cloud,
        Cloud::Vultr
    );

    req.at = T0.plus(Duration::from_secs(30));
    let outcome = quote(&req, &config, &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-c");
    assert_eq!(
        exclusion(&outcome, "eu-central-a"),
        Some(&Exclusion::CountPending)
    );

    state.count_failed(Cloud::Hetzner, T0.plus(Duration::from_secs(2)));
    req.at = T0.plus(Duration::from_secs(3));
    assert_eq!(
        offer(&quote(&req, &config, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-c"
    );

    counted(&mut state, Cloud::Hetzner, 0, dec!(0));
    assert_eq!(
        offer(&quote(&req, &config, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-a"
    );

    // A dearer cloud being counted does not hold the cheaper one back.
    let vultr_capped = config_with(&[("hetzner_exchange_rate", "1.08"), ("vultr_max_nodes", "5")]);
    let mut state = QuoteState::new();
    state.start_counting(Cloud::Vultr, T0);
    assert_eq!(
        offer(&quote(&req, &vultr_capped, &catalogs, &state))
            .site
            .as_str(),
        "eu-central-a"
    );

    // Only counting left: the class answers transient words.
    let only_hetzner = load_config(
        &source()
            .param("vultr_api_key", "")
            .param("hetzner_max_nodes", "3"),
    )
    .unwrap();
    let r = quote(&req, &only_hetzner, &catalogs, &QuoteState::new());
    assert_eq!(refusal(&r).kind, RefusalKind::Transient);
    assert_eq!(
        refusal(&r).words,
        "could not finish in Europe Central right now; it will be retried"
    );
}

#[test]
fn cooldown_site_guard_and_allow_lists_exclude_with_reasons() {
    let catalogs = seed_catalogs();
    let req = request("eu-central", shape(2, 4), "ubuntu-24.04");
    let mut state = QuoteState::new();
    state.cool_down(
        SiteName::new("eu-central-a").unwrap(),
        T0.plus(Duration::from_secs(1)).plus(Duration::ZERO),
    );
    let outcome = quote(&req, &priced(), &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-b");
    assert!(matches!(
        exclusion(&outcome, "eu-central-a"),
        Some(Exclusion::CoolingDown { .. })
    ));

    let mut state = QuoteState::new();
    state.set_live(
        SiteName::new("eu-central-a").unwrap(),
        LiveSite {
            cloud: Cloud::Hetzner,
            location: LocationId::new("hel1").unwrap(),
        },
    );
    state.set_live(
        SiteName::new("eu-central-b").unwrap(),
        LiveSite {
            cloud: Cloud::Hetzner,
            location: LocationId::new("nbg1").unwrap(),
        },
    );
    let outcome = quote(&req, &priced(), &catalogs, &state);
    assert_eq!(offer(&outcome).site.as_str(), "eu-central-b");
    assert!(matches!(
        exclusion(&outcome, "eu-central-a"),
        Some(Exclusion::RemappedWhileLive { .. })
    ));

    let cases: &[(&str, &str, Exclusion)] = &[
        ("hetzner_regions", "nbg1", Exclusion::LocationNotAllowed),
        ("hetzner_plans", "ccx13", Exclusion::PlanNotAllowed),
        (
            "hetzner_images",
            "debian",
            Exclusion::ImageNotAllowed {
                image: ImageId::new("200000003").unwrap(),
            },
        ),
    ];
    for (param, value, expected) in cases {
        let config = config_with(&[("hetzner_exchange_rate", "1.08"), (param, value)]);
        let outcome = quote(&req, &config, &catalogs, &QuoteState::new());
        assert_eq!(
            exclusion(&outcome, "eu-central-a"),
            Some(expected),
            "{param}"
        );
    }
    let config = config_with(&[
        ("hetzner_exchange_rate", "1.08"),
        ("hetzner_plans", "cpx22"),
    ]);
    let o = quote(&req, &config, &catalogs, &QuoteState::new());
    assert_eq!(o.candidates[0].plan.as_ref().unwrap().as_str(), "cpx22");
    assert_eq!(
        offer(&o).cloud,
        Cloud::Vultr,
        "cpx22 is dearer than Vultr's 20 USD"
    );
}

#[test]
fn disks_arm_and_unknown_inputs() {
    let catalogs = seed_catalogs();
    let mut with_disk = request("eu-central", shape(2, 4), "ubuntu-24.04");
    with_disk.shape.disks_gib = vec![60, 40];
    let o = quote(&with_disk, &priced(), &catalogs, &QuoteState::new());
    let price = &offer(&o).price;
    // 5.49 × 1.19 + 100 GiB × 0.0572 × 1.19, in EUR.
    assert_eq!(price.account_monthly.amount, dec!(13.3399));
    assert_eq!(
        o.candidates[2]
            .price
            .as_ref()
            .unwrap()
            .usd_monthly
            .unwrap()
            .amount,
        dec!(30)
    );

    let mut arm = request("eu-central", shape(2, 4), "debian-13");
    arm.shape.arch = Architecture::Arm64;
    let o = quote(&arm, &priced(), &catalogs, &QuoteState::new());
    assert_eq!(
        (offer(&o).plan.as_str(), offer(&o).image.id.as_str()),
        ("cax11", "200000008")
    );
    assert_eq!(exclusion(&o, "eu-central-c"), Some(&Exclusion::NoExactPlan));

    let o = quote(
        &request("mars-north", shape(2, 4), "ubuntu-24.04"),
        &priced(),
        &catalogs,
        &QuoteState::new(),
    );
    let r = refusal(&o);
    assert_eq!(r.kind, RefusalKind::OperatorFix);
    assert_eq!(
        r.words,
        "node n-000001 cannot be created in mars-north until the provider's operator changes its configuration"
    );
    assert!(o.candidates.is_empty());

    let o = quote(
        &request("eu-central", shape(2, 4), "plan9"),
        &priced(),
        &catalogs,
        &QuoteState::new(),
    );
    let r = refusal(&o);
    assert_eq!(
        r.kind,
        RefusalKind::Unplaceable,
        "no site boots an OS the map lacks"
    );
    assert_eq!(
        r.words,
        "no site in Europe Central offers plan9 at 2 vCPU · 4 GiB; offered at this shape: \
         alma-10, alma-9, debian-12, debian-13, rocky-10, rocky-9, ubuntu-22.04, ubuntu-24.04, \
         windows-2022, windows-2025"
    );

    let o = quote(
        &request("eu-central", shape(3, 7), "ubuntu-24.04"),
        &priced(),
        &catalogs,
        &QuoteState::new(),
    );
    let r = refusal(&o);
    assert_eq!(
        r.kind,
        RefusalKind::Unplaceable,
        "no site sells 3 vCPU · 7 GiB"
    );
    assert_eq!(
        r.words,
        "no site in Europe Central offers 3 vCPU · 7 GiB; nearest offered: 2 vCPU · 2 GiB, \
         2 vCPU · 4 GiB, 2 vCPU · 8 GiB, 3 vCPU · 8 GiB, 4 vCPU · 8 GiB, 4 vCPU · 12 GiB"
    );

    let o = quote(
        &request("eu-central", shape(2, 4), "ubuntu-24.04"),
        &priced(),
        &Catalogs::new(),
        &QuoteState::new(),
    );
    assert_eq!(refusal(&o).kind, RefusalKind::Transient);
}

#[test]
fn what_no_site_sells_is_unplaceable_and_says_what_is_offered() {
    let catalogs = seed_catalogs();
    let config = priced();
    for (class, _) in config.regions.classes() {
        let o = quote(
            &request(class.as_str(), shape(3, 7), "ubuntu-24.04"),
            &config,
            &catalogs,
            &QuoteState::new(),
        );
        let r = refusal(&o);
        assert_eq!(r.kind, RefusalKind::Unplaceable, "class {class}");
        assert!(r.words.contains("nearest offered: "), "{}", r.words);
    }

    let o = quote(
        &request("us-east", shape(2, 4), "debian-12"),
        &config,
        &catalogs,
        &QuoteState::new(),
    );
    let r = refusal(&o);
    assert_eq!(r.kind, RefusalKind::Unplaceable);
    assert_eq!(
        r.words,
        "no site in US East offers debian-12 at 2 vCPU · 4 GiB; offered at this shape: alma-10, \
         alma-9, debian-13, rocky-10, rocky-9, ubuntu-22.04, ubuntu-24.04, windows-2022, windows-2025"
    );

    // A passing lack stays no_capacity: the only site that sells the shape is sold out.
    let state = QuoteState::new();
    let o = quote(
        &request("us-east", shape(2, 4), "ubuntu-24.04"),
        &config,
        &catalogs,
        &state,
    );
    assert!(o.offer().is_some());
    let mut sold_out = catalogs.clone();
    sold_out.update(Cloud::Vultr, |snapshot| {
        for plan in &mut snapshot.plans {
            plan.sold_in.clear();
        }
    });
    let o = quote(
        &request("us-east", shape(2, 4), "ubuntu-24.04"),
        &config,
        &sold_out,
        &state,
    );
    assert_eq!(refusal(&o).kind, RefusalKind::NoCapacity);
    assert_eq!(refusal(&o).words, "no capacity in US East right now");

    // A gateway's refusal is never unplaceable: its shape is the operator's.
    let mut gateway = request("eu-central", shape(3, 7), "ubuntu-24.04");
    gateway.purpose = Purpose::Gateway;
    let o = quote(&gateway, &config, &catalogs, &QuoteState::new());
    assert!(o.offer().is_some(), "a gateway takes its own minimum shape");
}

#[test]
fn explanation_and_json_are_deterministic() {
    let catalogs = seed_catalogs();
    let req = request("us-east", shape(2, 4), "ubuntu-24.04");
    let outcome = quote(&req, &priced(), &catalogs, &QuoteState::new());
    let table = crate::explain::render_table(&outcome);
    let expected = "\
quote for tenant node n-000001: 2 vCPU · 4 GiB, os ubuntu-24.04, class us-east (\"US East\")
#  site       cloud    location  plan        image                      account/month  rate  USD/month  verdict
1  us-east-a  hetzner  ash       -           -                          -              -     -          excluded (no exact plan): no plan of exactly this shape here
2  us-east-b  vultr    ewr       vc2-2c-4gb  2284 Ubuntu 24.04 LTS x64  20 USD/month   1     20         WINNER
offer: site us-east-b (vultr:ewr, plan vc2-2c-4gb, image 2284) at 20 USD/month; tenant sees \"2 vCPU · 4 GiB · us-east\"
";
    assert_eq!(table, expected);
    let json = crate::explain::to_json(&outcome);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["decision"]["decision"], "offer");
    assert_eq!(value["decision"]["price"]["usd_monthly"]["amount"], "20");
    assert_eq!(
        value["candidates"][0]["verdict"]["exclusion"]["reason"],
        "no_exact_plan"
    );
    assert_eq!(
        json,
        crate::explain::to_json(&quote(&req, &priced(), &catalogs, &QuoteState::new()))
    );
}

// ---- properties -------------------------------------------------------------------------

const CLASSES: [&str; 5] = [
    "us-east",
    "us-west",
    "eu-central",
    "eu-nordic",
    "ap-southeast",
];
const OSES: [&str; 6] = [
    "ubuntu-24.04",
    "debian-12",
    "windows-2022",
    "rocky-9",
    "ubuntu-26.04",
    "none",
];
const SHAPES: [(u32, u32, bool); 9] = [
    (1, 1, false),
    (1, 2, false),
    (2, 2, false),
    (2, 4, false),
    (2, 4, true),
    (2, 8, false),
    (3, 4, false),
    (4, 8, false),
    (8, 32, false),
];

#[derive(Debug, Clone)]
struct Scenario {
    class: usize,
    os: usize,
    shape: usize,
    disk: Option<u32>,
    gateway: bool,
    rate: Option<u32>,
    vultr_key: bool,
    hetzner_cap: Option<u32>,
    vultr_spend_cap: Option<u32>,
    counted_hetzner: Option<u32>,
    counting_vultr_secs: Option<u64>,
    sold_out: Vec<(usize, usize)>,
    cooling: Vec<usize>,
    pin: Option<usize>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        (
            0..CLASSES.len(),
            0..OSES.len(),
            0..SHAPES.len(),
            proptest::option::of(1u32..500),
        ),
        (
            any::<bool>(),
            proptest::option::of(50u32..200),
            any::<bool>(),
        ),
        (
            proptest::option::of(0u32..4),
            proptest::option::of(0u32..100),
            proptest::option::of(0u32..4),
            proptest::option::of(0u64..60),
        ),
        (
            proptest::collection::vec((0usize..100, 0usize..40), 0..40),
            proptest::collection::vec(0usize..3, 0..2),
            proptest::option::of(0usize..3),
        ),
    )
        .prop_map(
            |(
                (class, os, shape, disk),
                (gateway, rate, vultr_key),
                (hetzner_cap, vultr_spend_cap, counted_hetzner, counting_vultr_secs),
                (sold_out, cooling, pin),
            )| Scenario {
                class,
                os,
                shape,
                disk,
                gateway,
                rate,
                vultr_key,
                hetzner_cap,
                vultr_spend_cap,
                counted_hetzner,
                counting_vultr_secs,
                sold_out,
                cooling,
                pin,
            },
        )
}

fn build(s: &Scenario) -> (QuoteRequest, Config, Catalogs, QuoteState) {
    let mut src = source();
    if let Some(rate) = s.rate {
        src = src.param(
            "hetzner_exchange_rate",
            &format!("{}.{:02}", rate / 100, rate % 100),
        );
    }
    if !s.vultr_key {
        src = src.param("vultr_api_key", "");
    }
    if let Some(cap) = s.hetzner_cap {
        src = src.param("hetzner_max_nodes", &cap.to_string());
    }
    if let Some(cap) = s.vultr_spend_cap {
        src = src.param("vultr_max_monthly_spend", &cap.to_string());
    }
    let config = load_config(&src).unwrap();
    let mut catalogs = seed_catalogs();
    for cloud in [Cloud::Hetzner, Cloud::Vultr] {
        catalogs.update(cloud, |snap| {
            let n = snap.plans.len();
            for &(plan, loc) in &s.sold_out {
                let p = &mut snap.plans[plan % n];
                if let Some(l) = p.sold_in.iter().nth(loc % p.sold_in.len().max(1)).cloned() {
                    p.sold_in.remove(&l);
                }
            }
        });
    }
    let class = config.regions.class(CLASSES[s.class]).unwrap();
    let mut state = QuoteState::new();
    if let Some(n) = s.counted_hetzner {
        counted(&mut state, Cloud::Hetzner, n, Decimal::ZERO);
    }
    match s.counting_vultr_secs {
        Some(secs) => state.start_counting(
            Cloud::Vultr,
            Timestamp::from_unix_secs(T0.millis() / 1000 - secs as i64),
        ),
        None => counted(&mut state, Cloud::Vultr, 0, dec!(40)),
    }
    for &i in &s.cooling {
        if let Some(site) = class.sites.get(i) {
            state.cool_down(site.name.clone(), T0);
        }
    }
    let (vcpus, gib, arm) = SHAPES[s.shape];
    let mut req = request(CLASSES[s.class], shape(vcpus, gib), OSES[s.os]);
    if arm {
        req.shape.arch = Architecture::Arm64;
    }
    req.shape.disks_gib = s.disk.into_iter().collect();
    if s.gateway {
        req.purpose = Purpose::Gateway;
    }
    req.pinned_site = s
        .pin
        .and_then(|i| class.sites.get(i))
        .map(|site| site.name.clone());
    (req, config, catalogs, state)
}

fn key(c: &Candidate) -> (bool, Decimal, usize) {
    let p = c.price.as_ref().unwrap();
    match &p.usd_monthly {
        Some(m) => (false, m.amount, c.order),
        None => (true, Decimal::ZERO, c.order),
    }
}

type Forbidden = (Vec<String>, BTreeSet<String>);

/// Every word a tenant must never read: cloud names, plan ids, cities, location ids.
fn forbidden() -> &'static Forbidden {
    static FORBIDDEN: std::sync::OnceLock<Forbidden> = std::sync::OnceLock::new();
    FORBIDDEN.get_or_init(forbidden_words)
}

fn forbidden_words() -> Forbidden {
    let (h, v) = (seed_hetzner(), seed_vultr());
    let mut substrings: Vec<String> = vec!["hetzner".into(), "vultr".into()];
    for seed in [&h, &v] {
        substrings.extend(
            seed.snapshot
                .plans
                .iter()
                .map(|p| p.id.to_string().to_lowercase()),
        );
        substrings.extend(seed.cities.iter().map(|c| c.to_lowercase()));
    }
    let locations = h.locations.iter().chain(&v.locations).cloned().collect();
    (substrings, locations)
}

fn assert_neutral(text: &str, forbidden: &Forbidden) {
    let lower = text.to_lowercase();
    for word in &forbidden.0 {
        assert!(
            !lower.contains(word.as_str()),
            "tenant text {text:?} contains {word:?}"
        );
    }
    for token in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        assert!(
            !forbidden.1.contains(token),
            "tenant text {text:?} names location {token:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_winner_is_never_dearer_and_never_excluded(s in scenario()) {
        let (req, config, catalogs, state) = build(&s);
        let outcome = quote(&req, &config, &catalogs, &state);
        let winners: Vec<&Candidate> =
            outcome.candidates.iter().filter(|c| c.verdict == Verdict::Winner).collect();
        match outcome.offer() {
            Some(o) => {
                prop_assert_eq!(winners.len(), 1);
                let w = winners[0];
                prop_assert_eq!(&w.site, &o.site);
                prop_assert!(w.exclusion().is_none());
                for c in &outcome.candidates {
                    if c.verdict == Verdict::Eligible {
                        prop_assert!(key(c) > key(w), "{} beats the winner", c.site);
                    }
                }
                if let Some(pin) = &req.pinned_site {
                    prop_assert_eq!(pin, &o.site);
                }
            }
            None => {
                prop_assert!(winners.is_empty());
                if outcome.refusal().is_some_and(|r| r.kind == RefusalKind::Counting) {
                    let counting = outcome
                        .candidates
                        .iter()
                        .filter(|c| matches!(c.exclusion(), Some(Exclusion::Counting { .. })))
                        .map(key)
                        .min();
                    prop_assert!(counting.is_some(), "counting refusal with no cloud counted");
                    for c in outcome.candidates.iter().filter(|c| c.verdict == Verdict::Eligible) {
                        prop_assert!(counting < Some(key(c)), "counting held back a cheaper {}", c.site);
                    }
                }
                prop_assert!(outcome.candidates.iter().all(|c| c.verdict != Verdict::Eligible
                    || outcome.refusal().is_some_and(|r| r.kind == RefusalKind::Counting)));
            }
        }
        if req.purpose == Purpose::Gateway {
            for c in &outcome.candidates {
                let cap_or_count = matches!(
                    c.exclusion(),
                    Some(Exclusion::NodeCap { .. } | Exclusion::SpendCap { .. } | Exclusion::Counting { .. } | Exclusion::CountPending)
                );
                prop_assert!(!cap_or_count, "gateway refused by cap or counting at {}", c.site);
            }
        }
    }

    #[test]
    fn the_result_does_not_depend_on_listing_order(s in scenario(), seed in any::<u64>()) {
        let (req, config, catalogs, state) = build(&s);
        let expected = quote(&req, &config, &catalogs, &state);
        let mut shuffled = Catalogs::new();
        for cloud in Cloud::ALL {
            let mut snap = catalogs.get(cloud).unwrap().clone();
            let mut rng = seed;
            let mut shuffle = |n: usize| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                usize::try_from(rng >> 33).unwrap_or(0) % n.max(1)
            };
            for i in (1..snap.plans.len()).rev() {
                let j = shuffle(i + 1);
                snap.plans.swap(i, j);
            }
            for i in (1..snap.images.len()).rev() {
                let j = shuffle(i + 1);
                snap.images.swap(i, j);
            }
            shuffled.replace(snap);
        }
        prop_assert_eq!(quote(&req, &config, &shuffled, &state), expected);
    }

    #[test]
    fn tenant_words_never_name_a_cloud_plan_city_or_location(s in scenario()) {
        let (req, config, catalogs, state) = build(&s);
        let outcome = quote(&req, &config, &catalogs, &state);
        let forbidden = forbidden();
        for text in outcome.tenant_strings() {
            assert_neutral(text, forbidden);
        }
        let site = outcome.candidates.first().map_or("eu-central-a".to_string(), |c| c.site.to_string());
        let class = outcome.class_title.clone().unwrap_or_default();
        for text in [
            words::no_capacity(&class),
            words::no_capacity_pinned(&class),
            words::counting(),
            words::could_not_finish(&class),
            words::needs_operator(req.node.as_str(), &site),
            words::could_not_create(req.node.as_str(), &site),
            words::pool_address_line(req.class.as_str()),
            words::price_line(&req.shape, req.class.as_str()),
        ] {
            assert_neutral(&text, forbidden);
        }
    }
}

#[test]
fn the_forbidden_word_check_catches_a_leak() {
    let forbidden = forbidden();
    for leak in [
        "placed on Vultr",
        "plan cx23",
        "in Falkenstein",
        "at fsn1",
        "ewr",
    ] {
        let caught = std::panic::catch_unwind(|| assert_neutral(leak, forbidden)).is_err();
        assert!(caught, "{leak:?} slipped through");
    }
    assert_neutral("no capacity in Asia Southeast right now", forbidden);
}
