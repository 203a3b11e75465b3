//! Sites against the emulators: opening once whatever is repeated, a failure injected right
//! after each site step converging on retry with nothing leaked or doubled, a lost route put
//! back, closing with the 7-day keep of the stable address, and a retired cloud.

mod deploy_support;
mod support;

use std::time::Duration;

use deploy_support::*;
use orc_cloud::hetzner::{Route, ServerFilter};
use orc_partner::ids::Cloud;
use orc_partner::ids::Timestamp;
use orc_partner_provider::naming::{CLOSED_KEY, Prefix};
use orc_proto::{DestroyResult, NodeId, RefusalKind};
use orc_provider_sdk::Provider;
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::proto::{gateway_quote, quote_in};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_opens_once_however_often_it_is_asked() {
    let emu = emulators().await;
    let base = census(&emu).await;
    let p = provider(config(&source(&emu, "a")));
    for node in ["n-h1", "n-h2"] {
        let done = place(&p, quote_in(POOL, node, "eu-central", 2, 4)).await;
        assert_eq!(done.site.as_str(), "eu-central-a");
        assert!(
            public_of(&done).is_empty(),
            "a tenant node has no public IPv4: {:?}",
            done.addresses
        );
    }
    for node in ["n-v1", "n-v2"] {
        let done = place(&p, quote_in(POOL, node, "us-east", 2, 4)).await;
        assert_eq!(done.site.as_str(), "us-east-b");
    }
    let cold = provider(config(&source(&emu, "a")));
    place(&cold, quote_in(POOL, "n-h3", "eu-central", 2, 4)).await;
    place(&cold, quote_in(POOL, "n-v3", "us-east", 2, 4)).await;
    assert_eq!(
        added(&emu, &base).await,
        expect(&[
            ("hetzner servers", 3),
            ("hetzner networks", 1),
            ("hetzner primary ips", 1),
            ("hetzner ssh keys", 1),
            ("vultr instances", 3),
            ("vultr vpcs", 1),
            ("vultr reserved ips", 1),
            ("vultr ssh keys", 1),
        ])
    );

    let h = hetzner(&emu);
    let networks = h.list_networks(Some("orc-kind=network")).await.unwrap();
    let [network] = networks.as_slice() else {
        panic!("{networks:?}")
    };
    let prefix = Prefix::parse(&network.labels["orc-prefix"]).unwrap();
    assert_eq!(network.ip_range, prefix.to_string());
    assert_eq!(network.labels["orc-site"], "eu-central-a");
    assert_eq!(
        network.routes,
        vec![Route {
            destination: "0.0.0.0/0".into(),
            gateway: prefix.gateway().to_string()
        }]
    );
    let servers = h
        .list_servers(&ServerFilter {
            label_selector: Some("orc-role=node".into()),
            ..ServerFilter::default()
        })
        .await
        .unwrap();
    for server in &servers {
        assert!(server.public_net.ipv4.is_none(), "{server:?}");
        assert_eq!(server.private_net.len(), 1);
        assert_eq!(server.private_net[0].network, network.id);
        assert_eq!(server.labels["orc-pool"], "acme.web.api");
    }
    let stable = h.list_primary_ips(Some("orc-kind=stable")).await.unwrap();
    assert!(
        !stable[0].auto_delete,
        "the stable address is never auto-deleted"
    );
    assert_eq!(stable[0].labels["orc-site"], "eu-central-a");

    let v = vultr(&emu);
    let vpcs = v.list_vpcs().await.unwrap();
    let vpc = vpcs
        .iter()
        .find(|vpc| vpc.description.contains("orc-site=us-east-b"))
        .unwrap();
    let vultr_prefix = Prefix::parse(&format!("{}/{}", vpc.v4_subnet, vpc.v4_subnet_mask)).unwrap();
    assert_ne!(vultr_prefix, prefix, "prefixes are unique in the zone");
    let instances = v
        .list_instances(&orc_cloud::vultr::InstanceFilter {
            tag: Some("orc-role=node".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(instances.len(), 3);
    for instance in &instances {
        let main: std::net::IpAddr = instance
            .main_ip
            .parse()
            .unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
        assert!(main.is_unspecified(), "no public IPv4: {instance:?}");
    }
}

/// One failure injected right after each site step (network and route, address, sealed
/// key, node): the deploy fails, the retry finishes the node with one of each resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_each_site_step_converges_on_retry() {
    let emu = emulators().await;
    let base = census(&emu).await;
    let p = provider(config(&source(&emu, "a")));
    let hetzner_control = EmuControl::hetzner(&emu);
    let vultr_control = EmuControl::vultr(&emu);
    let cases: [(&str, &str, &str, &str, &str, &str); 6] = [
        // node, class, emulator, path, method: the request after the step that just ran.
        (
            "n-after-addr",
            "eu-central",
            "h",
            "/v1/ssh_keys",
            "POST",
            "eu-central-a",
        ),
        (
            "n-after-net",
            "eu-central",
            "h",
            "/v1/primary_ips",
            "POST",
            "eu-central-b",
        ),
        (
            "n-after-key",
            "eu-nordic",
            "h",
            "/v1/servers",
            "POST",
            "eu-nordic-a",
        ),
        (
            "n-after-node",
            "ap-southeast",
            "h",
            "/v1/actions",
            "GET",
            "ap-southeast-a",
        ),
        (
            "n-after-rip",
            "us-east",
            "v",
            "/v2/ssh-keys",
            "POST",
            "us-east-b",
        ),
        (
            "n-after-vpc",
            "eu-nordic",
            "v",
            "/v2/reserved-ips",
            "POST",
            "eu-nordic-b",
        ),
    ];
    for (node, class, which, path, method, site) in cases {
        let control = if which == "h" {
            &hetzner_control
        } else {
            &vultr_control
        };
        let pinned = orc_proto::Quote {
            pinned_site: Some(orc_proto::SiteName::new(site).unwrap()),
            ..quote_in(POOL, node, class, 2, 4)
        };
        let o = offer(&p, pinned).await;
        assert_eq!(o.site.as_str(), site, "{node}");
        control.fault(Fault::new(path, 503, 5).method(method)).await;
        let r = refusal(deploy(&p, node, o.quote_token.clone()).await);
        assert_eq!(r.kind, RefusalKind::Transient, "{node}: {r}");
        control.clear_faults().await;
        let first = deployed(deploy(&p, node, o.quote_token.clone()).await);
        let again = deployed(deploy(&p, node, o.quote_token).await);
        assert_eq!(first.instance_ref, again.instance_ref, "{node}");
        assert_eq!(first.site.as_str(), site);
    }
    assert_eq!(
        added(&emu, &base).await,
        expect(&[
            ("hetzner servers", 4),
            ("hetzner networks", 4),
            ("hetzner primary ips", 4),
            ("hetzner ssh keys", 1),
            ("vultr instances", 2),
            ("vultr vpcs", 2),
            ("vultr reserved ips", 2),
            ("vultr ssh keys", 1),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_that_lost_its_route_gets_it_back() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    place(&p, quote_in(POOL, "n-route-1", "eu-central", 2, 4)).await;
    let h = hetzner(&emu);
    let network = h.list_networks(Some("orc-kind=network")).await.unwrap()[0].clone();
    let route = network.routes[0].clone();
    h.delete_route(network.id, &route).await.unwrap();
    assert!(
        h.get_network(network.id)
            .await
            .unwrap()
            .unwrap()
            .routes
            .is_empty()
    );
    let cold = provider(config(&source(&emu, "a")));
    place(&cold, quote_in(POOL, "n-route-2", "eu-central", 2, 4)).await;
    let routes = h.get_network(network.id).await.unwrap().unwrap().routes;
    assert_eq!(routes, vec![route]);
    assert_eq!(h.list_networks(None).await.unwrap().len(), 1);
}

async fn stable_labels(emu: &orc_emu::RunningEmulators) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = hetzner(emu)
        .list_primary_ips(Some("orc-kind=stable"))
        .await
        .unwrap()
        .into_iter()
        .map(|ip| (ip.ip, ip.labels.get(CLOSED_KEY).cloned()))
        .collect();
    out.extend(
        vultr(emu)
            .list_reserved_ips()
            .await
            .unwrap()
            .into_iter()
            .filter(|ip| ip.label.contains("orc-kind=stable"))
            .map(|ip| {
                let closed = ip
                    .label
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("orc-closed="))
                    .map(str::to_string);
                (ip.subnet, closed)
            }),
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_node_closes_the_site_and_the_address_is_kept_seven_days() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    for node in ["n-keep-1", "n-keep-2"] {
        place(&p, quote_in(POOL, node, "eu-central", 2, 4)).await;
    }
    place(&p, quote_in(POOL, "n-keep-v", "us-east", 2, 4)).await;
    let open = stable_labels(&emu).await;
    assert_eq!(open.len(), 2);
    assert!(open.iter().all(|(_, closed)| closed.is_none()), "{open:?}");

    let destroy = |node: &'static str| p.destroy(NodeId::new(node).unwrap());
    assert_eq!(destroy("n-keep-1").await, DestroyResult::Destroyed);
    assert!(
        stable_labels(&emu).await.iter().all(|(_, c)| c.is_none()),
        "a site with a node left stays open"
    );
    assert_eq!(destroy("n-keep-2").await, DestroyResult::Destroyed);
    assert_eq!(destroy("n-keep-v").await, DestroyResult::Destroyed);
    let closed = stable_labels(&emu).await;
    assert!(closed.iter().all(|(_, c)| c.is_some()), "{closed:?}");

    // Six days on, both addresses are still held; a returning site takes its own back.
    EmuControl::hetzner(&emu)
        .advance_clock(6.0 * 86_400.0)
        .await;
    let six_days = Timestamp::now().plus(Duration::from_secs(6 * 86_400));
    assert!(p.release_closed_addresses(six_days).await.is_empty());
    place(&p, quote_in(POOL, "n-keep-3", "eu-central", 2, 4)).await;
    let back = stable_labels(&emu).await;
    let hetzner_ip = open
        .iter()
        .find(|(ip, _)| back.iter().any(|(b, c)| b == ip && c.is_none()));
    assert!(
        hetzner_ip.is_some(),
        "the returning site reopened its address: {back:?}"
    );
    assert_eq!(back.len(), 2);
    assert_eq!(destroy("n-keep-3").await, DestroyResult::Destroyed);

    // Seven days after the last close, both are released; the networks stay.
    EmuControl::hetzner(&emu)
        .advance_clock(7.0 * 86_400.0 + 60.0)
        .await;
    let later = Timestamp::now().plus(Duration::from_secs(7 * 86_400 + 60));
    let mut released = p.release_closed_addresses(later).await;
    released.sort();
    let mut expected: Vec<std::net::Ipv4Addr> =
        open.iter().map(|(ip, _)| ip.parse().unwrap()).collect();
    expected.sort();
    assert_eq!(released, expected);
    assert!(stable_labels(&emu).await.is_empty());
    assert_eq!(
        hetzner(&emu)
            .list_networks(Some("orc-kind=network"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        vultr(&emu)
            .list_vpcs()
            .await
            .unwrap()
            .iter()
            .any(|v| v.description.contains("orc-kind=network"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_cloud_places_nothing_new_destroys_through_it_and_lists_what_it_leaves() {
    let emu = emulators().await;
    let active = provider(config(&source(&emu, "a")));
    let held = place(&active, quote_in(POOL, "n-old", "eu-central", 2, 4)).await;
    assert!(held.instance_ref.as_str().starts_with("hetzner:"));
    let late = offer(&active, quote_in(POOL, "n-late", "eu-central", 2, 4)).await;

    let retired = provider(config(&source(&emu, "a").param("hetzner_enabled", "false")));
    let moved = offer(&retired, quote_in(POOL, "n-new", "eu-central", 2, 4)).await;
    assert_eq!(
        moved.site.as_str(),
        "eu-central-c",
        "the retired cloud places nothing new"
    );
    let r = refusal(deploy(&retired, "n-late", late.quote_token).await);
    assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}");
    assert_eq!(count_node(&emu, "n-late").await, 0);
    let gateway = place(
        &retired,
        gateway_quote("gw-retired", "eu-central", "eu-central-a"),
    )
    .await;
    assert!(
        gateway.instance_ref.as_str().starts_with("hetzner:"),
        "the retired cloud's open site still gets its gateway"
    );
    assert_eq!(
        retired.destroy(NodeId::new("gw-retired").unwrap()).await,
        DestroyResult::Destroyed
    );

    assert_eq!(
        retired.destroy(NodeId::new("n-old").unwrap()).await,
        DestroyResult::Destroyed
    );
    assert_eq!(count_node(&emu, "n-old").await, 0);
    let left = retired.left_behind(Cloud::Hetzner).await.unwrap().unwrap();
    assert_eq!(left.networks.len(), 1);
    assert_eq!(left.stable.len(), 1);
    assert!(left.stable["eu-central-a"].closed_at.is_some());
    assert_eq!(left.sealed_keys.len(), 1);
    assert!(retired.left_behind(Cloud::Vultr).await.unwrap().is_none());
    let again = retired.left_behind(Cloud::Hetzner).await.unwrap().unwrap();
    assert_eq!(again, left, "listing deletes nothing");
}

/// A gateway deployed into a closed site reopens it; its destroy with no tenant node there
/// closes it again, so the address is not held for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_alone_does_not_keep_a_site_open() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    place(&p, quote_in(POOL, "n-lone", "eu-central", 2, 4)).await;
    p.destroy(NodeId::new("n-lone").unwrap()).await;
    let closed = stable_labels(&emu).await;
    assert!(closed[0].1.is_some(), "{closed:?}");
    place(&p, gateway_quote("gw-lone", "eu-central", "eu-central-a")).await;
    assert_eq!(
        stable_labels(&emu).await[0].1,
        None,
        "the gateway reopened the site"
    );
    p.destroy(NodeId::new("gw-lone").unwrap()).await;
    let again = stable_labels(&emu).await;
    assert!(again[0].1.is_some(), "closed again: {again:?}");
    assert_eq!(again[0].0, closed[0].0, "the same address");
}
