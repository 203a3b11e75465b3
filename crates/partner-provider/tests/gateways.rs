//! Site gateways and public pools' addresses against the emulators: a gateway takes the
//! site's stable IPv4, its fixed private address and the site's pool addresses; its
//! replacement keeps them; it is never refused on caps; a shape change lists the old ones;
//! a failure right after the gateway or address steps converges; pool addresses hold the
//! per-cloud limit and go with their pool's last node.

mod deploy_support;
mod support;

use std::net::IpAddr;

use deploy_support::*;
use orc_cloud::HcloudServerId;
use orc_cloud::vultr::InstanceFilter;
use orc_proto::{DestroyResult, NodeId, RefusalKind};
use orc_provider_sdk::Provider;
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::proto::{gateway_quote, public_quote, quote_in};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hetzner_gateway_takes_the_site_addresses_and_its_replacement_keeps_them() {
    let emu = emulators().await;
    let base = census(&emu).await;
    let p = provider(config(&source(&emu, "a")));
    place(
        &p,
        public_quote("acme/web/api", "n-pub", "eu-central", 2, 4),
    )
    .await;
    let h = hetzner(&emu);
    let floating = h.list_floating_ips(Some("orc-kind=pool")).await.unwrap();
    assert_eq!(floating.len(), 1);
    assert_eq!(floating[0].server, None, "no gateway yet");
    assert_eq!(floating[0].labels["orc-site"], "eu-central-a");
    let stable = h.list_primary_ips(Some("orc-kind=stable")).await.unwrap()[0].clone();
    let network = h.list_networks(Some("orc-kind=network")).await.unwrap()[0].clone();
    let gateway_ip = network.routes[0].gateway.clone();

    for gw in ["gw-1", "gw-2"] {
        let done = place(&p, gateway_quote(gw, "eu-central", "eu-central-a")).await;
        assert_eq!(done.site.as_str(), "eu-central-a");
        let public: IpAddr = stable.ip.parse().unwrap();
        assert_eq!(public_of(&done), vec![public], "{gw} holds the stable IPv4");
        let id: u64 = done.instance_ref.as_str()["hetzner:".len()..]
            .parse()
            .unwrap();
        let server = h.get_server(HcloudServerId(id)).await.unwrap().unwrap();
        assert_eq!(server.labels["orc-role"], "gateway");
        assert!(server.labels.contains_key("orc-gw-gen"));
        assert_eq!(server.private_net.len(), 1);
        assert_eq!(
            server.private_net[0].ip, gateway_ip,
            "the fixed private address"
        );
        let floating = h.list_floating_ips(Some("orc-kind=pool")).await.unwrap();
        assert_eq!(
            floating[0].server,
            Some(HcloudServerId(id)),
            "{gw} took the pool address"
        );
        assert_eq!(
            p.destroy(NodeId::new(gw).unwrap()).await,
            DestroyResult::Destroyed
        );
    }
    assert_eq!(
        added(&emu, &base).await,
        expect(&[
            ("hetzner servers", 1),
            ("hetzner networks", 1),
            ("hetzner primary ips", 1),
            ("hetzner floating ips", 1),
            ("hetzner ssh keys", 1),
        ]),
        "gateways come and go; the site's addresses stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vultr_gateway_takes_the_site_addresses_and_its_replacement_keeps_them() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    place(&p, public_quote("acme/web/api", "n-pub-v", "us-east", 2, 4)).await;
    let v = vultr(&emu);
    let reserved = v.list_reserved_ips().await.unwrap();
    let stable = reserved
        .iter()
        .find(|r| r.label.contains("orc-kind=stable"))
        .unwrap()
        .clone();
    let pool = reserved
        .iter()
        .find(|r| r.label.contains("orc-kind=pool"))
        .unwrap()
        .clone();
    assert!(
        pool.label.contains("orc-pool=acme.web.api"),
        "{}",
        pool.label
    );
    for gw in ["gw-v1", "gw-v2"] {
        let done = place(&p, gateway_quote(gw, "us-east", "us-east-b")).await;
        let public: IpAddr = stable.subnet.parse().unwrap();
        assert_eq!(public_of(&done), vec![public], "{gw} holds the stable IPv4");
        let id = &done.instance_ref.as_str()["vultr:".len()..];
        let pool_now = v.get_reserved_ip(&pool.id).await.unwrap().unwrap();
        assert_eq!(
            pool_now.instance_id.as_deref(),
            Some(id),
            "{gw} took the pool address"
        );
        assert_eq!(
            p.destroy(NodeId::new(gw).unwrap()).await,
            DestroyResult::Destroyed
        );
    }
    let gateways = v
        .list_instances(&InstanceFilter {
            tag: Some("orc-role=gateway".into()),
            ..InstanceFilter::default()
        })
        .await
        .unwrap();
    assert!(gateways.is_empty());
    assert_eq!(v.list_reserved_ips().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_ignore_caps_and_a_shape_change_lists_the_old_ones() {
    let emu = emulators().await;
    let capped = provider(config(
        &source(&emu, "a")
            .param("hetzner_max_nodes", "0")
            .param("hetzner_max_monthly_spend", "0"),
    ));
    match capped
        .quote(quote_in(POOL, "n-capped", "eu-nordic", 2, 4))
        .await
    {
        orc_proto::QuoteReply::Offer(o) => assert_ne!(o.site.as_str(), "eu-nordic-a"),
        orc_proto::QuoteReply::Refused(r) => assert_eq!(r.kind, RefusalKind::NoCapacity),
    }
    let done = place(&capped, gateway_quote("gw-cap", "eu-nordic", "eu-nordic-a")).await;
    assert_eq!(
        done.site.as_str(),
        "eu-nordic-a",
        "a gateway is never refused on caps"
    );
    assert!(capped.old_shape_gateways().await.unwrap().is_empty());

    let reshaped = provider(config(
        &source(&emu, "a").param("gateway", r#"{"cpu": 2, "mem": 4}"#),
    ));
    let old = reshaped.old_shape_gateways().await.unwrap();
    let names: Vec<&str> = old.iter().map(|o| o.marks.node_id.as_str()).collect();
    assert_eq!(names, ["gw-cap"]);
    assert_eq!(
        reshaped.destroy(NodeId::new("gw-cap").unwrap()).await,
        DestroyResult::Destroyed
    );
    let fresh = place(
        &reshaped,
        gateway_quote("gw-new", "eu-nordic", "eu-nordic-a"),
    )
    .await;
    assert_eq!(fresh.addresses, done.addresses, "the same stable IPv4");
    assert!(
        reshaped.old_shape_gateways().await.unwrap().is_empty(),
        "the replacement has the current shape"
    );
    let listed: Vec<String> = capped
        .old_shape_gateways()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.marks.node_id)
        .collect();
    assert_eq!(
        listed,
        ["gw-new"],
        "old to a replica that still has the first shape"
    );
}

/// A failure right after the gateway is created (its network attach) and right after a
/// pool address is created (its assign): the retry finishes with one of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_the_gateway_and_address_steps_converges() {
    let emu = emulators().await;
    let base = census(&emu).await;
    let control = EmuControl::hetzner(&emu);
    let p = provider(config(&source(&emu, "a")));
    place(&p, quote_in(POOL, "n-first", "eu-central", 2, 4)).await;
    let o = offer(&p, gateway_quote("gw-f", "eu-central", "eu-central-a")).await;
    control
        .fault(Fault::new("/v1/servers/", 503, 5).method("POST"))
        .await;
    let r = refusal(deploy_os(&p, "gw-f", o.quote_token.clone(), "gateway").await);
    assert_eq!(r.kind, RefusalKind::Transient, "{r}");
    control.clear_faults().await;
    let first = deployed(deploy_os(&p, "gw-f", o.quote_token.clone(), "gateway").await);
    let again = deployed(deploy_os(&p, "gw-f", o.quote_token, "gateway").await);
    assert_eq!(first.instance_ref, again.instance_ref);

    let q = public_quote("acme/shop/web", "n-pub-f", "eu-central", 2, 4);
    let o = offer(&p, q).await;
    control
        .fault(Fault::new("/v1/floating_ips/", 503, 5).method("POST"))
        .await;
    let r = refusal(deploy(&p, "n-pub-f", o.quote_token.clone()).await);
    assert_eq!(r.kind, RefusalKind::Transient, "{r}");
    control.clear_faults().await;
    deployed(deploy(&p, "n-pub-f", o.quote_token.clone()).await);
    deployed(deploy(&p, "n-pub-f", o.quote_token).await);
    let h = hetzner(&emu);
    let floating = h.list_floating_ips(Some("orc-kind=pool")).await.unwrap();
    assert_eq!(floating.len(), 1);
    let gw_id: u64 = first.instance_ref.as_str()["hetzner:".len()..]
        .parse()
        .unwrap();
    assert_eq!(floating[0].server, Some(HcloudServerId(gw_id)));
    assert_eq!(
        added(&emu, &base).await,
        expect(&[
            ("hetzner servers", 3),
            ("hetzner networks", 1),
            ("hetzner primary ips", 1),
            ("hetzner floating ips", 1),
            ("hetzner ssh keys", 1),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_addresses_hold_the_limit_and_go_with_the_pools_last_node() {
    let emu = emulators().await;
    let p = provider(config(
        &source(&emu, "a").param("hetzner_pool_ipv4_limit", "1"),
    ));
    assert_eq!(p.catalog().await.availability.public_ipv4_offered, 11);
    place(&p, public_quote("acme/a/web", "n-a1", "eu-central", 2, 4)).await;
    place(&p, public_quote("acme/a/web", "n-a2", "eu-central", 2, 4)).await;
    let h = hetzner(&emu);
    assert_eq!(
        h.list_floating_ips(None).await.unwrap().len(),
        1,
        "one per pool"
    );

    let o = offer(&p, public_quote("acme/b/web", "n-b1", "eu-central", 2, 4)).await;
    let r = refusal(deploy(&p, "n-b1", o.quote_token).await);
    assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}");
    assert_eq!(
        h.list_floating_ips(None).await.unwrap().len(),
        1,
        "the limit holds"
    );

    p.destroy(NodeId::new("n-a1").unwrap()).await;
    assert_eq!(
        h.list_floating_ips(None).await.unwrap().len(),
        1,
        "a node of the pool is left"
    );
    p.destroy(NodeId::new("n-a2").unwrap()).await;
    assert!(
        h.list_floating_ips(None).await.unwrap().is_empty(),
        "released with the last node"
    );
    let o = offer(&p, public_quote("acme/b/web", "n-b1", "eu-central", 2, 4)).await;
    deployed(deploy(&p, "n-b1", o.quote_token).await);
    let held = p
        .pool_addresses(orc_partner::ids::Cloud::Hetzner)
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].pool.as_deref(), Some("acme/b/web"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_pools_nodes_deployed_at_once_share_one_address() {
    let emu = emulators().await;
    let p = std::sync::Arc::new(provider(config(&source(&emu, "a"))));
    let mut tasks = Vec::new();
    for (i, class) in ["eu-central", "us-east"].iter().cycle().take(8).enumerate() {
        let p = p.clone();
        let class = class.to_string();
        tasks.push(tokio::spawn(async move {
            let node = format!("n-burst-{i}");
            place(&p, public_quote("acme/burst/web", &node, &class, 2, 4)).await
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let h = hetzner(&emu);
    assert_eq!(
        h.list_floating_ips(Some("orc-kind=pool"))
            .await
            .unwrap()
            .len(),
        1
    );
    let pools = vultr(&emu)
        .list_reserved_ips()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.label.contains("orc-kind=pool"))
        .count();
    assert_eq!(pools, 1);
    assert_eq!(
        h.list_networks(None).await.unwrap().len(),
        1,
        "one site opened once"
    );
}

/// A replacement gateway deployed while the previous one still holds the stable IPv4 is
/// refused `transient` and placed once the previous one is gone, on the same address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_waits_for_the_previous_gateway_to_let_go() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    for (class, site, suffix) in [
        ("eu-central", "eu-central-a", "h"),
        ("us-east", "us-east-b", "v"),
    ] {
        let old = format!("gw-old-{suffix}");
        let new = format!("gw-new-{suffix}");
        let first = place(&p, gateway_quote(&old, class, site)).await;
        let o = offer(&p, gateway_quote(&new, class, site)).await;
        let r = refusal(deploy_os(&p, &new, o.quote_token.clone(), "gateway").await);
        assert_eq!(r.kind, RefusalKind::Transient, "{r}");
        assert_eq!(count_node(&emu, &new).await, 0);
        assert_eq!(
            p.destroy(NodeId::new(&old).unwrap()).await,
            DestroyResult::Destroyed
        );
        let second = deployed(deploy_os(&p, &new, o.quote_token, "gateway").await);
        assert_eq!(public_of(&second), public_of(&first), "{site}");
    }
}
