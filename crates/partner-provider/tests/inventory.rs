//! The inventory pass against the in-process emulators: owner-tag migration, another
//! installation's resources, an unreadable cloud, standby, the site guard with its log line,
//! reverse DNS set once and retried after a failure, and the request cost of one pass
//! (figures in docs/partner/inventory.md).
//!
//! Instances and site resources are made here through the cloud clients with the partner's
//! marks ([`Marks`], [`ResourceMarks`]), so each case controls exactly what the clouds hold.

mod support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use orc_cloud::hetzner::{CreateFloatingIp, CreatePrimaryIp, CreateServer, IpType};
use orc_cloud::vultr::{CreateInstance, InstanceSource};
use orc_cloud::{
    HcloudServerId, HetznerClient, HetznerConfig, VultrClient, VultrConfig, VultrInstanceId,
    VultrOsId,
};
use orc_emu::RunningEmulators;
use orc_partner::ids::Cloud;
use orc_partner_provider::PartnerProvider;
use orc_partner_provider::clouds::{hetzner, vultr};
use orc_partner_provider::naming::{Marks, Prefix, ResourceKind, ResourceMarks, pool_label};
use orc_proto::{Purpose, Quote, QuoteReply, ReplicaRole};
use orc_provider_sdk::Provider;
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::proto::{gateway_quote, public_quote, quote_in};
use support::*;

const CHILD: &str = "zone-1";
const DOMAIN: &str = "cloud.example.com";

struct Clouds {
    h: HetznerClient,
    v: VultrClient,
}

fn clouds(emu: &RunningEmulators) -> Clouds {
    Clouds {
        h: HetznerClient::new(HetznerConfig::new(TOKEN).with_base_url(emu.hetzner_url().unwrap()))
            .unwrap(),
        v: VultrClient::new(VultrConfig::new(TOKEN).with_base_url(emu.vultr_url().unwrap()))
            .unwrap(),
    }
}

fn marks(owner: &str, node: &str, site: &str, purpose: Purpose) -> Marks {
    Marks {
        owner_tag: owner.into(),
        child: CHILD.into(),
        node_id: node.into(),
        site: site.into(),
        purpose,
        rate: Some("1".parse().unwrap()),
        account_monthly: "5".parse().unwrap(),
        pool: None,
        gateway_gen: None,
    }
}

fn resource(owner: &str, kind: ResourceKind, site: &str) -> ResourceMarks {
    let mut m = ResourceMarks::new(owner, CHILD, kind);
    m.site = Some(site.into());
    m
}

impl Clouds {
    async fn hetzner_node(&self, owner: &str, node: &str, site: &str, location: &str) -> u64 {
        let mut request = CreateServer::new(format!("orc-{node}"), "cx23", "ubuntu-24.04");
        request.location = Some(location.into());
        request.labels = hetzner::labels(&marks(owner, node, site, Purpose::Tenant));
        self.h.create_server(&request).await.unwrap().server.id.0
    }

    async fn vultr_node(
        &self,
        owner: &str,
        node: &str,
        site: &str,
        region: &str,
        purpose: Purpose,
    ) -> VultrInstanceId {
        let mut request =
            CreateInstance::new(region, "vc2-1c-1gb", InstanceSource::Os(VultrOsId(2284)));
        request.tags = vultr::tags(&marks(owner, node, site, purpose));
        self.v.create_instance(&request).await.unwrap().id
    }

    async fn hetzner_stable(&self, owner: &str, site: &str, location: &str) -> Ipv4Addr {
        let ip = self
            .h
            .create_primary_ip(&CreatePrimaryIp {
                name: format!("orc-stable-{site}-{owner}"),
                kind: IpType::Ipv4,
                location: location.into(),
                labels: hetzner::resource_labels(&resource(owner, ResourceKind::Stable, site)),
                auto_delete: false,
            })
            .await
            .unwrap();
        ip.primary_ip.ip.parse().unwrap()
    }

    async fn hetzner_pool_address(&self, owner: &str, pool: &str, site: &str) -> Ipv4Addr {
        let mut m = resource(owner, ResourceKind::PoolAddress, site);
        m.pool = Some(pool_label(pool));
        let created = self
            .h
            .create_floating_ip(&CreateFloatingIp {
                kind: IpType::Ipv4,
                home_location: "fsn1".into(),
                name: None,
                description: Some(format!("pool {pool}")),
                labels: hetzner::resource_labels(&m),
            })
            .await
            .unwrap();
        created.floating_ip.ip.parse().unwrap()
    }

    async fn hetzner_network(&self, owner: &str, site: &str, prefix: Prefix) {
        let mut m = resource(owner, ResourceKind::Network, site);
        m.prefix = Some(prefix);
        self.h
            .create_network(&orc_cloud::hetzner::CreateNetwork {
                name: format!("orc-{site}-{owner}"),
                ip_range: prefix.to_string(),
                subnets: vec![],
                routes: vec![],
                labels: hetzner::resource_labels(&m),
            })
            .await
            .unwrap();
    }

    /// A reserved IPv4 with the marks in its label, attached to `holder`.
    async fn vultr_address(
        &self,
        marks: &ResourceMarks,
        region: &str,
        holder: &VultrInstanceId,
    ) -> Ipv4Addr {
        let reserved = self
            .v
            .create_reserved_ip(&region.into(), "v4", Some(&vultr::resource_text(marks)))
            .await
            .unwrap();
        self.v
            .attach_reserved_ip(&reserved.id, holder)
            .await
            .unwrap();
        reserved.subnet.parse().unwrap()
    }

    async fn hetzner_ptr(&self, ip: Ipv4Addr) -> String {
        let ip = ip.to_string();
        let mut names = Vec::new();
        for p in self.h.list_primary_ips(None).await.unwrap() {
            names.extend(p.dns_ptr.into_iter().filter(|d| d.ip == ip));
        }
        for f in self.h.list_floating_ips(None).await.unwrap() {
            names.extend(f.dns_ptr.into_iter().filter(|d| d.ip == ip));
        }
        names.pop().map(|d| d.dns_ptr).unwrap_or_default()
    }

    async fn vultr_ptr(&self, holder: &VultrInstanceId, ip: Ipv4Addr) -> String {
        self.v
            .list_instance_ipv4(holder)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.ip == ip.to_string())
            .map(|i| i.reverse)
            .unwrap_or_default()
    }
}

async fn offered_site(p: &PartnerProvider, node: &str, class: &str) -> String {
    match p.quote(quote_in(POOL, node, class, 2, 4)).await {
        QuoteReply::Offer(o) => o.site.as_str().to_string(),
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    }
}

/// Requests per operation whose name contains `part`.
fn counted(p: &PartnerProvider, part: &str) -> u64 {
    p.clients()
        .request_counts()
        .iter()
        .filter(|(op, _)| op.contains(part))
        .map(|(_, n)| n)
        .sum()
}

fn node_ids(inventory: &orc_proto::Inventory) -> Vec<String> {
    inventory
        .nodes
        .iter()
        .map(|n| n.node_id.as_str().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_tag_migration_with_also_owned_tags_keeps_every_node() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let (old_h, old_v) = ("orc-partner-hetzner-old", "orc-partner-vultr-old");
    c.hetzner_node(old_h, "n-old-h", "eu-central-a", "fsn1")
        .await;
    c.vultr_node(old_v, "n-old-v", "us-east-b", "ewr", Purpose::Tenant)
        .await;
    c.hetzner_node("orc-partner-hetzner-new", "n-new-h", "eu-central-a", "fsn1")
        .await;
    c.hetzner_stable(old_h, "eu-central-a", "fsn1").await;

    let migrated = provider(config(
        &source(&emu, "new")
            .param("hetzner_also_owned_tags", old_h)
            .param("vultr_also_owned_tags", old_v),
    ));
    let inventory = migrated.inventory().await.unwrap();
    assert_eq!(node_ids(&inventory), ["n-new-h", "n-old-h", "n-old-v"]);
    assert_eq!(
        counted(&migrated, "hetzner.servers.list"),
        2,
        "one listing per owned tag"
    );
    assert_eq!(counted(&migrated, "vultr.instances.list"), 2);
    let site = inventory
        .sites
        .iter()
        .find(|s| s.site.as_str() == "eu-central-a")
        .unwrap();
    assert!(site.public_ipv4.is_some(), "the old tag's stable address");

    let unmigrated = provider(config(&source(&emu, "new")));
    let inventory = unmigrated.inventory().await.unwrap();
    assert_eq!(
        node_ids(&inventory),
        ["n-new-h"],
        "without also_owned_tags the old tag's nodes are not the partner's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_installations_instances_and_addresses_are_never_reported_or_touched() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let (theirs_h, theirs_v) = ("orc-partner-hetzner-theirs", "orc-partner-vultr-theirs");
    c.hetzner_node(theirs_h, "n-theirs-h", "eu-central-a", "fsn1")
        .await;
    let gw = c
        .vultr_node(
            theirs_v,
            "n-theirs-gw",
            "us-east-b",
            "ewr",
            Purpose::Gateway,
        )
        .await;
    let their_stable_h = c.hetzner_stable(theirs_h, "eu-central-a", "fsn1").await;
    let their_pool_h = c
        .hetzner_pool_address(theirs_h, "acme/web/api", "eu-central-a")
        .await;
    let their_stable_v = c
        .vultr_address(
            &resource(theirs_v, ResourceKind::Stable, "us-east-b"),
            "ewr",
            &gw,
        )
        .await;
    let before = (
        c.hetzner_ptr(their_stable_h).await,
        c.hetzner_ptr(their_pool_h).await,
        c.vultr_ptr(&gw, their_stable_v).await,
    );

    let ours = provider(config(&source(&emu, "ours").param("ptr_domain", DOMAIN)));
    let inventory = ours.inventory().await.unwrap();
    assert!(inventory.nodes.is_empty(), "{inventory:?}");
    assert!(inventory.sites.is_empty(), "{inventory:?}");
    assert!(inventory.pool_addresses.is_empty(), "{inventory:?}");
    assert!(ours.quote_state().live_sites().is_empty());
    let counts = ours.clients().request_counts();
    let writes: Vec<&String> = counts
        .keys()
        .filter(|op| {
            [
                "create", "delete", "change", "reverse", "assign", "attach", "update", "labels",
            ]
            .iter()
            .any(|w| op.contains(w))
        })
        .collect();
    assert!(writes.is_empty(), "nothing is changed: {counts:?}");
    assert_eq!(counted(&ours, "list_ipv4"), 0, "no read of their instance");
    let after = (
        c.hetzner_ptr(their_stable_h).await,
        c.hetzner_ptr(their_pool_h).await,
        c.vultr_ptr(&gw, their_stable_v).await,
    );
    assert_eq!(before, after);

    let theirs = provider(config(&source(&emu, "theirs")));
    assert_eq!(
        node_ids(&theirs.inventory().await.unwrap()),
        ["n-theirs-gw", "n-theirs-h"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_that_cannot_be_listed_sends_no_inventory_and_the_guard_says_incomplete() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    c.hetzner_node("orc-partner-hetzner-a", "n-a", "eu-central-a", "fsn1")
        .await;
    let p = provider(config(&source(&emu, "a")));
    assert_eq!(node_ids(&p.inventory().await.unwrap()), ["n-a"]);
    assert!(!p.site_guard_incomplete());

    EmuControl::vultr(&emu)
        .fault(Fault::new("/v2/instances", 500, 20).method("GET"))
        .await;
    assert_eq!(
        p.inventory().await,
        None,
        "one cloud unreadable: no inventory"
    );
    assert!(p.site_guard_incomplete());
    EmuControl::vultr(&emu).clear_faults().await;
    p.inventory().await.unwrap();
    assert!(!p.site_guard_incomplete());

    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/primary_ips", 503, 20).method("GET"))
        .await;
    assert_eq!(
        p.inventory().await,
        None,
        "addresses unreadable: no inventory"
    );
    assert!(p.site_guard_incomplete());
    assert_eq!(
        p.quote_state().live_sites().len(),
        1,
        "the live sites stay as the last complete pass found them"
    );
    EmuControl::hetzner(&emu).clear_faults().await;

    assert_eq!(node_ids(&p.inventory().await.unwrap()), ["n-a"]);
    assert!(!p.site_guard_incomplete());
}

#[tokio::test]
async fn the_unreadable_cloud_line_is_logged() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let (logs, _guard) = capture();
    let p = provider(config(&source(&emu, "a")));
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/servers", 503, 20).method("GET"))
        .await;
    assert_eq!(p.inventory().await, None);
    assert_eq!(
        logs.count("One cloud's inventory could not be read"),
        1,
        "{}",
        logs.text()
    );
    assert!(logs.text().contains("cloud=hetzner"), "{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_lists_nothing_and_sends_no_inventory() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    c.hetzner_node("orc-partner-hetzner-a", "n-a", "eu-central-a", "fsn1")
        .await;
    let p = provider(config(&source(&emu, "a")));
    p.on_role(ReplicaRole::Standby);
    assert_eq!(p.inventory().await, None);
    assert!(
        p.clients().request_counts().is_empty(),
        "a standby reads no cloud"
    );
    assert!(
        !p.is_serving(),
        "an inventory pass is not work that promotes"
    );
    p.on_role(ReplicaRole::Serving);
    assert_eq!(node_ids(&p.inventory().await.unwrap()), ["n-a"]);
}

#[tokio::test]
async fn a_remapped_live_site_is_left_out_of_quotes_with_one_log_line() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let regions = serde_json::json!({
        "eu-central": {
            "title": "Europe Central",
            "sites": [{"eu-central-a": "hetzner:nbg1"}, {"eu-central-c": "vultr:fra"}]
        }
    });
    let p = provider(config(
        &source(&emu, "a").param("regions", &regions.to_string()),
    ));
    assert_eq!(
        offered_site(&p, "n-before", "eu-central").await,
        "eu-central-a",
        "the site wins on price while nothing is known to be live"
    );
    let server = c
        .hetzner_node("orc-partner-hetzner-a", "n-old", "eu-central-a", "fsn1")
        .await;

    let (logs, _guard) = capture();
    p.inventory().await.unwrap();
    assert_eq!(
        offered_site(&p, "n-after", "eu-central").await,
        "eu-central-c"
    );
    let line =
        "Site eu-central-a is live at hetzner:fsn1 but the region map now puts it at hetzner:nbg1";
    assert_eq!(logs.count(line), 1, "{}", logs.text());
    p.inventory().await.unwrap();
    p.inventory().await.unwrap();
    assert_eq!(logs.count(line), 1, "logged once until it clears");
    let flagged: Vec<(String, Option<String>)> = p
        .sites_out_of_step()
        .into_iter()
        .map(|o| {
            (
                format!("{}@{}:{}", o.site, o.live_cloud, o.live_location),
                o.mapped
                    .map(|(cloud, location)| format!("{cloud}:{location}")),
            )
        })
        .collect();
    assert_eq!(
        flagged,
        [(
            "eu-central-a@hetzner:fsn1".to_string(),
            Some("hetzner:nbg1".to_string())
        )]
    );

    c.h.delete_server(HcloudServerId(server)).await.unwrap();
    p.inventory().await.unwrap();
    assert_eq!(
        logs.count("Site eu-central-a is in step with the region map again"),
        1,
        "{}",
        logs.text()
    );
    assert!(p.sites_out_of_step().is_empty());
    assert_eq!(
        offered_site(&p, "n-cleared", "eu-central").await,
        "eu-central-a"
    );
    c.hetzner_node("orc-partner-hetzner-a", "n-back", "eu-central-a", "fsn1")
        .await;
    p.inventory().await.unwrap();
    assert_eq!(logs.count(line), 2, "logged again after it cleared");
}

/// Both clouds with one open site each (network, stable address on the gateway, one pool
/// address) under `owner`; answers the Vultr gateway and the four addresses.
async fn two_open_sites(c: &Clouds, owner: &str) -> (VultrInstanceId, [Ipv4Addr; 4]) {
    let (h_owner, v_owner) = (
        format!("orc-partner-hetzner-{owner}"),
        format!("orc-partner-vultr-{owner}"),
    );
    c.hetzner_node(&h_owner, "n-h", "eu-central-a", "fsn1")
        .await;
    c.hetzner_network(&h_owner, "eu-central-a", Prefix::new(0).unwrap())
        .await;
    let stable_h = c.hetzner_stable(&h_owner, "eu-central-a", "fsn1").await;
    let pool_h = c
        .hetzner_pool_address(&h_owner, "acme/web/api", "eu-central-a")
        .await;
    c.vultr_node(&v_owner, "n-v", "us-east-b", "ewr", Purpose::Tenant)
        .await;
    let gw = c
        .vultr_node(&v_owner, "n-gw-v", "us-east-b", "ewr", Purpose::Gateway)
        .await;
    let stable_v = c
        .vultr_address(
            &resource(&v_owner, ResourceKind::Stable, "us-east-b"),
            "ewr",
            &gw,
        )
        .await;
    let mut pool = resource(&v_owner, ResourceKind::PoolAddress, "us-east-b");
    pool.pool = Some(pool_label("acme/db/main"));
    let pool_v = c.vultr_address(&pool, "ewr", &gw).await;
    (gw, [stable_h, pool_h, stable_v, pool_v])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_lists_open_sites_and_pool_addresses() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let (_, [stable_h, pool_h, stable_v, pool_v]) = two_open_sites(&c, "a").await;
    let p = provider(config(&source(&emu, "a")));
    let inventory = p.inventory().await.unwrap();
    assert_eq!(node_ids(&inventory), ["n-gw-v", "n-h", "n-v"]);
    let sites: Vec<(&str, Option<Ipv4Addr>, Option<&str>)> = inventory
        .sites
        .iter()
        .map(|s| (s.site.as_str(), s.public_ipv4, s.private_prefix.as_deref()))
        .collect();
    assert_eq!(
        sites,
        [
            ("eu-central-a", Some(stable_h), Some("10.128.0.0/24")),
            ("us-east-b", Some(stable_v), None),
        ]
    );
    let pools: Vec<(&str, &str, Ipv4Addr)> = inventory
        .pool_addresses
        .iter()
        .map(|a| (a.pool.as_str(), a.site.as_str(), a.ipv4))
        .collect();
    assert_eq!(
        pools,
        [
            ("acme/db/main", "us-east-b", pool_v),
            ("acme/web/api", "eu-central-a", pool_h),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverse_dns_is_set_once_and_a_failed_record_is_retried() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let (gw, [stable_h, pool_h, stable_v, pool_v]) = two_open_sites(&c, "a").await;
    let p = provider(config(&source(&emu, "a").param("ptr_domain", DOMAIN)));

    p.inventory().await.unwrap();
    assert_eq!(counted(&p, "primary_ips.change_dns_ptr"), 1);
    assert_eq!(counted(&p, "floating_ips.change_dns_ptr"), 1);
    assert_eq!(counted(&p, "vultr.instances.reverse_ipv4"), 2);
    assert_eq!(
        c.hetzner_ptr(stable_h).await,
        "gw-eu-central-a.cloud.example.com"
    );
    assert_eq!(
        c.hetzner_ptr(pool_h).await,
        "pool-acme-web-api-eu-central-a.cloud.example.com"
    );
    assert_eq!(
        c.vultr_ptr(&gw, stable_v).await,
        "gw-us-east-b.cloud.example.com"
    );
    assert_eq!(
        c.vultr_ptr(&gw, pool_v).await,
        "pool-acme-db-main-us-east-b.cloud.example.com"
    );

    p.clients().reset_counts();
    p.inventory().await.unwrap();
    assert_eq!(
        counted(&p, "dns_ptr") + counted(&p, "reverse_ipv4"),
        0,
        "every record already right: nothing is set"
    );

    // Someone changes a record by hand while the cloud refuses changes for a while.
    let floating = c.h.list_floating_ips(None).await.unwrap();
    c.h.change_floating_ip_dns_ptr(
        floating[0].id,
        &pool_h.to_string(),
        Some("elsewhere.example.net"),
    )
    .await
    .unwrap();
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/floating_ips/", 503, 20).method("POST"))
        .await;
    p.inventory()
        .await
        .expect("a reverse DNS failure does not hold the inventory back");
    assert_eq!(
        p.reverse_dns_pending(),
        BTreeMap::from([(
            pool_h,
            "pool-acme-web-api-eu-central-a.cloud.example.com".to_string()
        )])
    );
    EmuControl::hetzner(&emu).clear_faults().await;
    p.clients().reset_counts();
    p.inventory().await.unwrap();
    assert_eq!(counted(&p, "floating_ips.change_dns_ptr"), 1);
    assert_eq!(counted(&p, "primary_ips.change_dns_ptr"), 0);
    assert!(p.reverse_dns_pending().is_empty());
    assert_eq!(
        c.hetzner_ptr(pool_h).await,
        "pool-acme-web-api-eu-central-a.cloud.example.com"
    );
}

#[tokio::test]
async fn a_reverse_dns_failure_is_logged_once_while_it_lasts() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    c.hetzner_node("orc-partner-hetzner-a", "n-h", "eu-central-a", "fsn1")
        .await;
    c.hetzner_stable("orc-partner-hetzner-a", "eu-central-a", "fsn1")
        .await;
    let p = provider(config(&source(&emu, "a").param("ptr_domain", DOMAIN)));
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/primary_ips/", 503, 50).method("POST"))
        .await;
    let (logs, _guard) = capture();
    p.inventory().await.unwrap();
    p.inventory().await.unwrap();
    let line = "Some addresses' reverse DNS could not be set yet";
    assert_eq!(logs.count(line), 1, "{}", logs.text());
    EmuControl::hetzner(&emu).clear_faults().await;
    p.inventory().await.unwrap();
    assert_eq!(
        logs.count("Every address's reverse DNS is set now"),
        1,
        "{}",
        logs.text()
    );
}

/// A stable address's reverse DNS name says where a site is live too: an address whose
/// name was left as `gw-eu-nordic-b.<ptr_domain>` marks eu-nordic-b live where the address
/// is, until the pass names the address after its own site again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_name_in_reverse_dns_makes_its_site_live_where_the_address_is() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let owner = "orc-partner-vultr-a";
    let gw = c
        .vultr_node(owner, "n-gw", "us-east-b", "ewr", Purpose::Gateway)
        .await;
    let stable = c
        .vultr_address(
            &resource(owner, ResourceKind::Stable, "us-east-b"),
            "ewr",
            &gw,
        )
        .await;
    c.v.set_reverse_ipv4(&gw, &stable.to_string(), "gw-eu-nordic-b.cloud.example.com")
        .await
        .unwrap();
    let p = provider(config(&source(&emu, "a").param("ptr_domain", DOMAIN)));

    p.inventory().await.unwrap();
    let state = p.quote_state();
    let live = state
        .live_at(&orc_partner::ids::SiteName::new("eu-nordic-b").unwrap())
        .expect("eu-nordic-b is live by its gateway name");
    assert_eq!((live.cloud, live.location.as_str()), (Cloud::Vultr, "ewr"));
    assert_eq!(
        c.vultr_ptr(&gw, stable).await,
        "gw-us-east-b.cloud.example.com"
    );

    p.inventory().await.unwrap();
    let state = p.quote_state();
    assert!(
        state
            .live_at(&orc_partner::ids::SiteName::new("eu-nordic-b").unwrap())
            .is_none()
    );
    assert!(
        state
            .live_at(&orc_partner::ids::SiteName::new("us-east-b").unwrap())
            .is_some()
    );
}

/// Lifts both emulators' rate limits, so a count never includes a retry after a 429 caused
/// by the other providers of the same test sharing the account.
async fn no_rate_limits(emu: &RunningEmulators) {
    for control in [EmuControl::vultr(emu), EmuControl::hetzner(emu)] {
        control.rate_limit(1_000_000, 1.0, Some(1_000_000)).await;
    }
}

/// A serving provider whose first catalog read is done and counters are zero.
async fn serving(p: PartnerProvider) -> PartnerProvider {
    p.on_role(ReplicaRole::Serving);
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        p.catalogs().first_read(),
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    p.clients().reset_counts();
    p
}

/// The requests one inventory pass sends.
async fn one_pass(p: &PartnerProvider) -> BTreeMap<String, u64> {
    p.clients().reset_counts();
    p.inventory().await.unwrap();
    p.clients().request_counts()
}

/// The request cost of one pass, measured with the clients' counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cost_of_one_pass_matches_the_documented_figures() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    two_open_sites(&c, "a").await;
    let p = serving(provider(config(
        &source(&emu, "a").param("ptr_domain", DOMAIN),
    )))
    .await;
    let first = one_pass(&p).await;
    let steady = one_pass(&p).await;
    let plain = serving(provider(config(&source(&emu, "a")))).await;
    let without_ptr = one_pass(&plain).await;
    let migrating = serving(provider(config(
        &source(&emu, "a")
            .param("hetzner_also_owned_tags", "orc-partner-hetzner-old")
            .param("vultr_also_owned_tags", "orc-partner-vultr-old"),
    )))
    .await;
    let two_tags = one_pass(&migrating).await;

    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    let figures = format!(
        "first pass with ptr_domain {first:?}\nsteady pass with ptr_domain {steady:?}\nwithout ptr_domain {without_ptr:?}\ntwo tags per cloud {two_tags:?}"
    );
    println!("{figures}");
    let listings = BTreeMap::from([
        ("hetzner.floating_ips.list".to_string(), 1),
        ("hetzner.networks.list".to_string(), 1),
        ("hetzner.primary_ips.list".to_string(), 1),
        ("hetzner.servers.list".to_string(), 1),
        ("vultr.instances.list".to_string(), 1),
        ("vultr.reserved_ips.list".to_string(), 1),
        ("vultr.vpcs.list".to_string(), 1),
    ]);
    assert_eq!(without_ptr, listings, "{figures}");
    let mut with_reads = listings.clone();
    with_reads.insert("vultr.instances.list_ipv4".to_string(), 1);
    assert_eq!(steady, with_reads, "{figures}");
    assert_eq!(total(&first), total(&steady) + 4, "{figures}");
    let mut more_tags = listings.clone();
    more_tags.insert("hetzner.servers.list".to_string(), 2);
    more_tags.insert("vultr.instances.list".to_string(), 2);
    assert_eq!(two_tags, more_tags, "{figures}");
}

/// Through the SDK runner, as the zone sees it: while a cloud cannot be listed no inventory
/// arrives at all (the zone declares nothing lost); once it can, the complete one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_runner_an_unreadable_cloud_sends_nothing_until_it_reads_again() {
    use orc_provider_sdk::harness::ZoneHarness;
    use orc_provider_sdk::{ProviderRunner, RunnerOptions};

    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    c.hetzner_node("orc-partner-hetzner-a", "n-a", "eu-central-a", "fsn1")
        .await;
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/servers", 503, 1000).method("GET"))
        .await;
    let (harness, connector) = ZoneHarness::in_memory();
    let options = RunnerOptions {
        inventory_interval: Some(std::time::Duration::from_millis(50)),
        catalog_interval: None,
        ..RunnerOptions::default()
    };
    let p = Arc::new(provider(config(&source(&emu, "a"))));
    let runner = ProviderRunner::with_connector(connector, Arc::clone(&p), options);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();

    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while !p.site_guard_incomplete() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a pass ran into the unreadable cloud");
    let silent =
        tokio::time::timeout(std::time::Duration::from_millis(300), conn.next_inventory()).await;
    assert!(silent.is_err(), "an inventory arrived: {silent:?}");

    EmuControl::hetzner(&emu).clear_faults().await;
    let inventory = tokio::time::timeout(std::time::Duration::from_secs(10), conn.next_inventory())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(node_ids(&inventory), ["n-a"]);
    let _ = stop.send(());
    task.await.unwrap();
}

/// Places `q` through the provider's own quote and deploy (the deploy path's marks are what
/// the pass reads back).
async fn place(p: &PartnerProvider, q: Quote) -> orc_proto::Deployed {
    let node = q.node_id.clone();
    let os = q.os.clone();
    let offer = match p.quote(q).await {
        QuoteReply::Offer(o) => o,
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    };
    let result = p
        .deploy(
            orc_proto::Deploy {
                node_id: node.clone(),
                quote_token: offer.quote_token,
                os,
                ssh_keys: vec![],
                bootstrap: orc_proto::Bootstrap(b"#!/bin/sh\ntrue\n".to_vec()),
            },
            orc_provider_sdk::ProgressSink::discard(node),
        )
        .await;
    match result {
        orc_proto::DeployResult::Deployed(done) => done,
        orc_proto::DeployResult::Refused(r) => panic!("deploy refused: {r}"),
    }
}

/// Sites opened and public pools placed by the deploy path on both clouds: one pass reports
/// every node and gateway, each site with its stable IPv4 and prefix, each pool address, and
/// names every address; the next pass sets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_deploy_path_opens_is_reported_and_named() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let p = provider(config(&source(&emu, "a").param("ptr_domain", DOMAIN)));
    let h_node = place(
        &p,
        public_quote("acme/web/api", "n-pub-h", "eu-central", 2, 4),
    )
    .await;
    assert_eq!(h_node.site.as_str(), "eu-central-a");
    let h_gw = place(&p, gateway_quote("n-gw-h", "eu-central", "eu-central-a")).await;
    let v_node = place(&p, public_quote("acme/db/main", "n-pub-v", "us-east", 2, 4)).await;
    assert_eq!(v_node.site.as_str(), "us-east-b");
    let v_gw = place(&p, gateway_quote("n-gw-v", "us-east", "us-east-b")).await;

    let inventory = p.inventory().await.unwrap();
    assert_eq!(
        node_ids(&inventory),
        ["n-gw-h", "n-gw-v", "n-pub-h", "n-pub-v"]
    );
    let ipv4 = |done: &orc_proto::Deployed| match done.addresses.first() {
        Some(std::net::IpAddr::V4(ip)) => *ip,
        other => panic!("a gateway answers its stable IPv4, not {other:?}"),
    };
    let stable: BTreeMap<&str, Ipv4Addr> = inventory
        .sites
        .iter()
        .map(|s| (s.site.as_str(), s.public_ipv4.expect("a stable IPv4")))
        .collect();
    assert_eq!(
        stable,
        BTreeMap::from([("eu-central-a", ipv4(&h_gw)), ("us-east-b", ipv4(&v_gw))])
    );
    assert!(
        inventory.sites.iter().all(|s| s.private_prefix.is_some()),
        "{inventory:?}"
    );
    let pools: Vec<(&str, &str)> = inventory
        .pool_addresses
        .iter()
        .map(|a| (a.pool.as_str(), a.site.as_str()))
        .collect();
    assert_eq!(
        pools,
        [
            ("acme/db/main", "us-east-b"),
            ("acme/web/api", "eu-central-a")
        ]
    );

    assert_eq!(
        c.hetzner_ptr(ipv4(&h_gw)).await,
        "gw-eu-central-a.cloud.example.com"
    );
    let v_gw_id = VultrInstanceId(v_gw.instance_ref.as_str()["vultr:".len()..].to_string());
    assert_eq!(
        c.vultr_ptr(&v_gw_id, ipv4(&v_gw)).await,
        "gw-us-east-b.cloud.example.com"
    );
    for address in &inventory.pool_addresses {
        let name = format!(
            "pool-{}-{}.cloud.example.com",
            address.pool.as_str().replace('/', "-"),
            address.site
        );
        let found = match address.site.as_str() {
            "eu-central-a" => c.hetzner_ptr(address.ipv4).await,
            _ => c.vultr_ptr(&v_gw_id, address.ipv4).await,
        };
        assert_eq!(found, name);
    }
    assert!(p.reverse_dns_pending().is_empty());

    p.clients().reset_counts();
    p.inventory().await.unwrap();
    assert_eq!(counted(&p, "dns_ptr") + counted(&p, "reverse_ipv4"), 0);
}

/// What a pass lists is what the admin page shows: the Children view lists each node, the
/// open site with its stable address and network, and the Pool addresses view the pool's
/// address; a failed listing shows as the cloud's key failing while the last complete
/// listing stays on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_shows_what_the_last_pass_listed() {
    let emu = emulators().await;
    no_rate_limits(&emu).await;
    let c = clouds(&emu);
    let owner = "orc-partner-hetzner-page";
    c.hetzner_node(owner, "n-page-1", "eu-central-a", "fsn1")
        .await;
    let stable = c.hetzner_stable(owner, "eu-central-a", "fsn1").await;
    let pool_ip = c
        .hetzner_pool_address(owner, "acme/web/api", "eu-central-a")
        .await;
    c.hetzner_network(owner, "eu-central-a", Prefix::new(3).unwrap())
        .await;
    let p = provider(config(&source(&emu, "page")));
    p.inventory().await.unwrap();

    let view = p.admin_view();
    let snapshot = view.snapshot();
    let page = snapshot.page();
    let seen = &page.seen.clouds[&Cloud::Hetzner];
    assert_eq!(seen.instances.len(), 1);
    assert_eq!(seen.instances[0].node_id, "n-page-1");
    assert_eq!(seen.instances[0].location, "fsn1");
    let children = orc_partner::admin::views::children(&page);
    for shown in [
        "n-page-1".to_string(),
        stable.to_string(),
        Prefix::new(3).unwrap().to_string(),
    ] {
        assert!(children.contains(&shown), "{shown} missing from Children");
    }
    let addresses = orc_partner::admin::views::addresses(&page);
    assert!(addresses.contains(&pool_ip.to_string()), "{addresses}");
    assert!(addresses.contains("acme/web/api"), "{addresses}");

    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/servers", 500, 20).method("GET"))
        .await;
    assert_eq!(p.inventory().await, None);
    let snapshot = view.snapshot();
    let page = snapshot.page();
    assert!(page.seen.failures.contains_key(&Cloud::Hetzner));
    let children = orc_partner::admin::views::children(&page);
    assert!(children.contains("failing: "), "{children}");
    assert!(
        children.contains("n-page-1"),
        "the last complete listing stays"
    );
    assert!(!children.contains(TOKEN), "no key on the page");
}
