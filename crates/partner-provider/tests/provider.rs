//! The partner provider against the in-process emulators: the SDK's conformance cases,
//! stockouts, a failure after create, another installation's instances, standby, and the
//! request costs of each operation (figures in docs/partner/provider.md).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use orc_common::Money;
use orc_partner::ids::{Cloud, SiteName};
use orc_partner::params::MapSource;
use orc_partner_provider::token::OfferToken;
use orc_partner_provider::{PartnerOptions, PartnerProvider};
use orc_proto::{
    Bootstrap, Deploy, DeployResult, DestroyResult, NodeId, OsId, Quote, QuoteReply, QuoteToken,
    RefusalKind, ReplicaRole,
};
use orc_provider_sdk::conformance::{ConformanceSetup, run_all};
use orc_provider_sdk::{ProgressSink, Provider};
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::proto::quote;
use rust_decimal::Decimal;
use support::*;

async fn offer(p: &PartnerProvider, q: Quote) -> orc_proto::Offer {
    match p.quote(q).await {
        QuoteReply::Offer(offer) => offer,
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    }
}

async fn deploy(p: &PartnerProvider, node: &str, token: QuoteToken) -> DeployResult {
    let node = NodeId::new(node).unwrap();
    p.deploy(
        Deploy {
            node_id: node.clone(),
            quote_token: token,
            os: OsId::new("ubuntu-24.04").unwrap(),
            ssh_keys: vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkxbq0XPwVbYb2oZfhIfxXvqqxVGbAIbR2l4vXQdQ5Y ops@example".into()],
            bootstrap: Bootstrap(b"#!/bin/sh\necho joined\n".to_vec()),
        },
        ProgressSink::discard(node),
    )
    .await
}

fn deployed(result: DeployResult) -> orc_proto::Deployed {
    match result {
        DeployResult::Deployed(done) => done,
        DeployResult::Refused(r) => panic!("deploy refused: {r}"),
    }
}

fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_the_provider_conformance_cases() {
    let emu = Arc::new(emulators().await);
    let cfg = config(&source(&emu, "a"));
    let mut setup = ConformanceSetup::new(quote("conformance", "eu-central", 2, 4));
    setup.refusals = vec![
        (
            quote("refused-class", "nowhere", 2, 4),
            RefusalKind::OperatorFix,
        ),
        (
            quote("refused-shape", "us-east", 3, 7),
            RefusalKind::Unplaceable,
        ),
    ];
    let counter = emu.clone();
    setup.count_instances = Some(Arc::new(move |node: NodeId| {
        let emu = counter.clone();
        Box::pin(async move { count_node(&emu, node.as_str()).await })
    }));
    let failures = run_all(|| provider(cfg.clone()), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A tenant node has no public address and one on its site's private network.
fn only_on_its_site_network(done: &orc_proto::Deployed) {
    assert!(
        public_of(done).is_empty(),
        "a tenant node has no public address: {:?}",
        done.addresses
    );
    assert_eq!(
        private_of(done).len(),
        1,
        "it sits on the site's private network: {:?}",
        done.addresses
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_on_both_clouds_with_marks_price_and_addresses() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let vultr_offer = offer(&p, quote("n-vultr", "us-east", 2, 4)).await;
    assert_eq!(vultr_offer.site.as_str(), "us-east-b");
    assert_eq!(vultr_offer.words, "2 vCPU · 4 GiB · us-east");
    let done = deployed(deploy(&p, "n-vultr", vultr_offer.quote_token).await);
    assert!(done.instance_ref.as_str().starts_with("vultr:"));
    assert_eq!(done.price, Some(Money::usd_per_month(Decimal::new(20, 0))));
    only_on_its_site_network(&done);

    let hetzner_offer = offer(&p, quote("n-hetzner", "eu-central", 2, 4)).await;
    assert_eq!(hetzner_offer.site.as_str(), "eu-central-a");
    let done = deployed(deploy(&p, "n-hetzner", hetzner_offer.quote_token).await);
    assert!(done.instance_ref.as_str().starts_with("hetzner:"));
    assert_eq!(done.price, hetzner_offer.price, "USD at the recorded rate");
    only_on_its_site_network(&done);

    let inventory = p.inventory().await.unwrap();
    let listed: Vec<(&str, &str)> = inventory
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.site.as_str()))
        .collect();
    assert_eq!(
        listed,
        [("n-hetzner", "eu-central-a"), ("n-vultr", "us-east-b")]
    );
    for node in ["n-vultr", "n-hetzner"] {
        let gone = p.destroy(NodeId::new(node).unwrap()).await;
        assert_eq!(gone, DestroyResult::Destroyed);
        assert_eq!(count_node(&emu, node).await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stockout_cools_the_site_down_and_moves_the_node() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let first = offer(&p, quote("n-stock", "eu-central", 2, 4)).await;
    assert_eq!(first.site.as_str(), "eu-central-a");
    let offered = OfferToken::decode(first.quote_token.as_str()).unwrap();
    assert_eq!(
        (offered.cloud, offered.location.as_str()),
        (Cloud::Hetzner, "fsn1")
    );
    EmuControl::hetzner(&emu)
        .sold_out(&offered.plan, "fsn1", true)
        .await;
    match deploy(&p, "n-stock", first.quote_token).await {
        DeployResult::Refused(r) => {
            assert_eq!(r.kind, RefusalKind::NoCapacity);
            assert_eq!(r.words, "no capacity in Europe Central right now");
        }
        DeployResult::Deployed(d) => panic!("deployed into a sold-out plan: {d:?}"),
    }
    let state = p.quote_state();
    assert!(
        state
            .cooling_until(
                &SiteName::new("eu-central-a").unwrap(),
                orc_partner::ids::Timestamp::now()
            )
            .is_some()
    );
    let second = offer(&p, quote("n-stock", "eu-central", 2, 4)).await;
    assert_ne!(second.site.as_str(), "eu-central-a");
    let done = deployed(deploy(&p, "n-stock", second.quote_token).await);
    assert_eq!(done.site, second.site);
    assert_eq!(count_node(&emu, "n-stock").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_create_and_a_retried_deploy_leave_one_instance() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let first = offer(&p, quote("n-fault", "eu-central", 2, 4)).await;
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/actions", 503, 3).method("GET"))
        .await;
    match deploy(&p, "n-fault", first.quote_token.clone()).await {
        DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Transient, "{r}"),
        DeployResult::Deployed(d) => panic!("the injected failure was not seen: {d:?}"),
    }
    assert_eq!(
        count_node(&emu, "n-fault").await,
        1,
        "the server was created"
    );
    EmuControl::hetzner(&emu).clear_faults().await;
    let again = deployed(deploy(&p, "n-fault", first.quote_token.clone()).await);
    let twice = deployed(deploy(&p, "n-fault", first.quote_token).await);
    assert_eq!(again.instance_ref, twice.instance_ref);
    assert_eq!(count_node(&emu, "n-fault").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_installations_instances_are_never_reported_or_touched() {
    let emu = emulators().await;
    let ours = provider(config(&source(&emu, "ours")));
    let theirs = provider(config(&source(&emu, "theirs")));
    for (node, class) in [("n-theirs-h", "eu-central"), ("n-theirs-v", "us-east")] {
        let o = offer(&theirs, quote(node, class, 2, 4)).await;
        deployed(deploy(&theirs, node, o.quote_token).await);
    }
    let inventory = ours.inventory().await.unwrap();
    assert!(inventory.nodes.is_empty(), "{inventory:?}");
    for node in ["n-theirs-h", "n-theirs-v"] {
        let answer = ours.destroy(NodeId::new(node).unwrap()).await;
        assert_eq!(answer, DestroyResult::Destroyed);
        assert_eq!(count_node(&emu, node).await, 1, "{node} was touched");
    }
    assert_eq!(theirs.inventory().await.unwrap().nodes.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_reads_no_cloud_account() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    p.on_role(ReplicaRole::Standby);
    let catalog = p.catalog().await;
    assert!(catalog.classes.iter().any(|c| c.title == "Europe Central"));
    assert!(catalog.os.iter().any(|o| o.title == "Ubuntu 24.04 LTS"));
    assert!(catalog.availability.classes.iter().all(|c| !c.can_place));
    assert!(p.inventory().await.is_none());
    assert!(p.clients().request_counts().is_empty());
    assert!(!p.is_serving());

    offer(&p, quote("n-first-work", "eu-central", 2, 4)).await;
    assert!(p.is_serving());
    let catalog = p.catalog().await;
    assert!(catalog.availability.classes.iter().any(|c| c.can_place));
    assert_eq!(catalog.availability.public_ipv4_offered, 20);
    // Once the catalogs are read, each class lists the shapes a tenant may ask for, and
    // never a plan: the partner picks plans itself and names none.
    let europe = catalog
        .classes
        .iter()
        .find(|c| c.id.as_str() == "eu-central")
        .unwrap();
    let shapes: Vec<String> = europe
        .offerings
        .iter()
        .map(|o| o.shape.to_string())
        .collect();
    assert!(shapes.contains(&"2 vCPU · 4 GiB".to_string()), "{shapes:?}");
    assert!(
        !shapes.contains(&"3 vCPU · 7 GiB".to_string()),
        "{shapes:?}"
    );
    assert!(europe.offerings.iter().all(|o| o.plan.is_none()));
}

/// However long a standby waits, it starts no background work and sends no request: the
/// clock is tokio's paused one, so every refresh, count retry and release interval passes
/// at once. Its clouds' endpoints refuse connections, so any request would be counted.
#[tokio::test(start_paused = true)]
async fn a_standby_sends_no_request_however_long_it_waits() {
    let p = provider(config(
        &MapSource::new()
            .param("partner_id", "zone-1")
            .param("hetzner_api_token", TOKEN)
            .param("hetzner_owner_tag", "orc-partner-hetzner")
            .param("hetzner_max_nodes", "3")
            .param("vultr_api_key", TOKEN)
            .param("vultr_owner_tag", "orc-partner-vultr")
            .var("ORC_HETZNER_ENDPOINT", "http://127.0.0.1:9/v1")
            .var("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9"),
    ));
    p.on_role(ReplicaRole::Standby);
    p.catalog().await;
    assert!(p.inventory().await.is_none());
    let interval = PartnerOptions::default().refresh_interval;
    tokio::time::sleep(interval * 3).await;
    assert!(p.clients().request_counts().is_empty());
    assert!(!p.is_serving());
    p.on_role(ReplicaRole::Standby);
    tokio::time::sleep(interval * 3).await;
    assert!(p.clients().request_counts().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_cloud_is_counted_on_becoming_serving() {
    let emu = emulators().await;
    let p = provider(config(
        &source(&emu, "capped").param("vultr_max_nodes", "1"),
    ));
    let o = offer(&p, quote("n-cap-1", "us-east", 2, 4)).await;
    deployed(deploy(&p, "n-cap-1", o.quote_token).await);
    drop(p);
    let fresh = provider(config(
        &source(&emu, "capped").param("vultr_max_nodes", "1"),
    ));
    fresh.on_role(ReplicaRole::Serving);
    tokio::time::timeout(Duration::from_secs(10), async {
        while fresh.quote_state().count_status(Cloud::Vultr)
            != Some(orc_partner::state::CountStatus::Counted)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    match fresh.quote(quote("n-cap-2", "us-east", 2, 4)).await {
        QuoteReply::Refused(r) => assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}"),
        QuoteReply::Offer(o) => panic!("the cap of one node was passed: {o:?}"),
    }
}

/// Request costs of each operation, measured with the client counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_costs_match_the_documented_figures() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    p.on_role(ReplicaRole::Serving);
    tokio::time::timeout(Duration::from_secs(10), p.catalogs().first_read())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refresh = p.clients().request_counts();
    p.clients().reset_counts();

    let h = offer(&p, quote("n-cost-h", "eu-central", 2, 4)).await;
    let v = offer(&p, quote("n-cost-v", "us-east", 2, 4)).await;
    assert!(
        p.clients().request_counts().is_empty(),
        "quotes call no cloud"
    );
    deployed(deploy(&p, "n-cost-h", h.quote_token).await);
    let open_h = p.clients().request_counts();
    p.clients().reset_counts();
    deployed(deploy(&p, "n-cost-v", v.quote_token).await);
    let open_v = p.clients().request_counts();
    p.clients().reset_counts();
    let h2 = offer(&p, quote("n-cost-h2", "eu-central", 2, 4)).await;
    let v2 = offer(&p, quote("n-cost-v2", "us-east", 2, 4)).await;
    deployed(deploy(&p, "n-cost-h2", h2.quote_token).await);
    let deploy_h = p.clients().request_counts();
    p.clients().reset_counts();
    deployed(deploy(&p, "n-cost-v2", v2.quote_token).await);
    let deploy_v = p.clients().request_counts();
    p.clients().reset_counts();
    p.inventory().await.unwrap();
    let inventory = p.clients().request_counts();
    p.clients().reset_counts();
    p.destroy(NodeId::new("n-cost-h2").unwrap()).await;
    let destroy = p.clients().request_counts();
    p.clients().reset_counts();
    p.destroy(NodeId::new("n-cost-h").unwrap()).await;
    let destroy_last = p.clients().request_counts();

    let figures = format!(
        "refresh {refresh:?}\nopen hetzner {open_h:?}\nopen vultr {open_v:?}\ndeploy hetzner {deploy_h:?}\ndeploy vultr {deploy_v:?}\ninventory {inventory:?}\ndestroy {destroy:?}\ndestroy last {destroy_last:?}"
    );
    println!("{figures}");
    assert_eq!(total(&refresh), 3 + 2 + 5, "{figures}");
    assert_eq!(total(&open_h), 10, "{figures}");
    assert_eq!(total(&open_v), 9, "{figures}");
    assert_eq!(total(&deploy_h), 3, "{figures}");
    assert_eq!(total(&deploy_v), 2, "{figures}");
    assert!(total(&inventory) >= 2, "{figures}");
    assert_eq!(total(&destroy), 6, "{figures}");
    assert_eq!(total(&destroy_last), 7, "{figures}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_whose_location_is_not_sold_are_tracked_per_change() {
    let emu = emulators().await;
    let cfg = config(&source(&emu, "a"));
    let clients = orc_partner_provider::clients::CloudClients::from_config(&cfg).unwrap();
    let live = orc_partner_provider::live::LiveCatalogs::new();
    let at = orc_partner::ids::Timestamp::now();
    let (logs, _guard) = capture();
    let left_out =
        "Site eu-central-b is left out of quotes: its cloud does not sell hetzner:nbg1 right now";
    let back = "Site eu-central-b is sold again and back in quotes";
    assert!(live.refresh(&clients, &cfg, at).await.is_empty());
    let baseline = live.unsold_sites();
    assert!(!baseline.contains(&SiteName::new("eu-central-b").unwrap()));
    EmuControl::hetzner(&emu)
        .location_disabled("nbg1", true)
        .await;
    assert_eq!(logs.count(left_out), 0, "{}", logs.text());
    live.refresh(&clients, &cfg, at).await;
    let mut expected = baseline.clone();
    expected.insert(SiteName::new("eu-central-b").unwrap());
    assert_eq!(live.unsold_sites(), expected);
    live.refresh(&clients, &cfg, at).await;
    assert_eq!(
        logs.count(left_out),
        1,
        "once, not on every read: {}",
        logs.text()
    );
    let line = logs
        .text()
        .lines()
        .find(|l| l.contains(left_out))
        .unwrap()
        .to_string();
    assert!(line.contains(" INFO "), "{line}");
    EmuControl::hetzner(&emu)
        .location_disabled("nbg1", false)
        .await;
    live.refresh(&clients, &cfg, at).await;
    assert_eq!(live.unsold_sites(), baseline);
    assert_eq!(logs.count(back), 1, "{}", logs.text());
    assert_eq!(logs.count(left_out), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_cloud_sends_no_inventory() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let o = offer(&p, quote("n-inv", "us-east", 2, 4)).await;
    deployed(deploy(&p, "n-inv", o.quote_token).await);
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/servers", 503, 3).method("GET"))
        .await;
    assert_eq!(p.inventory().await, None);
    EmuControl::hetzner(&emu).clear_faults().await;
    assert_eq!(p.inventory().await.unwrap().nodes.len(), 1);
}

/// Two replicas deploy one node at once (a zone failover during a partition): the create
/// that loses Hetzner's unique-name race answers the instance that won, and the site they
/// both open ends with one network, one stable address and one sealed key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_on_one_node_make_one_server() {
    let emu = emulators().await;
    let a = provider(config(&source(&emu, "a")));
    let b = provider(config(&source(&emu, "a")));
    let o = offer(&a, quote("n-race", "eu-central", 2, 4)).await;
    EmuControl::hetzner(&emu).latency(150).await;
    let (first, second) = tokio::join!(
        deploy(&a, "n-race", o.quote_token.clone()),
        deploy(&b, "n-race", o.quote_token.clone())
    );
    EmuControl::hetzner(&emu).latency(0).await;
    let (first, second) = (deployed(first), deployed(second));
    assert_eq!(first.instance_ref, second.instance_ref);
    assert_eq!(count_node(&emu, "n-race").await, 1);
    let log = EmuControl::hetzner(&emu).requests().await;
    let conflicts = log
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/servers" && r.status == 409)
        .count();
    assert_eq!(conflicts, 1, "the race was not run: {log:?}");
    let h = orc_cloud::HetznerClient::new(
        orc_cloud::HetznerConfig::new(TOKEN).with_base_url(emu.hetzner_url().unwrap()),
    )
    .unwrap();
    assert_eq!(
        h.list_networks(None).await.unwrap().len(),
        1,
        "one site network"
    );
    assert_eq!(
        h.list_primary_ips(None).await.unwrap().len(),
        1,
        "one stable address"
    );
    let keys = h
        .list_ssh_keys(&orc_cloud::hetzner::SshKeyFilter::default())
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "one sealed key");
}
