//! The Hetzner Cloud client against the Hetzner emulator: every call, pagination, rate
//! limits, capacity errors, absent resources and retried GETs.

mod common;

use std::time::Duration;

use orc_cloud::hetzner::{
    ActionStatus, AssigneeType, CreateFloatingIp, CreateNetwork, CreatePrimaryIp, CreateServer,
    CreateVolume, HcloudArchitecture, ImageFilter, ImageRef, IpType, Labels, Route, ServerFilter,
    ServerStatus, SshKeyFilter, SubnetRequest, SubnetType, VolumePlacement,
};
use orc_cloud::{CloudError, HcloudActionId, HcloudServerId, HetznerClient, HetznerConfig, Secret};
use orc_common::Currency;
use orc_testkit::emu::{EmuControl, Fault};
use rust_decimal::Decimal;
use tokio::time::Instant;

use common::*;

const POLL: Duration = Duration::from_millis(20);

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn create_running(client: &HetznerClient, name: &str) -> HcloudServerId {
    let mut request = CreateServer::new(name, "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    let created = client.create_server(&request).await.expect("create");
    client
        .wait_for_actions(&created.action_ids(), POLL, deadline())
        .await
        .expect("create finishes");
    created.server.id
}

#[tokio::test]
async fn catalogue_prices_and_images_are_typed_exactly() {
    let emu = start().await;
    let client = hetzner(&emu);

    let types = client.list_server_types().await.unwrap();
    assert_eq!(types.len(), 25);
    let cx23 = types.iter().find(|t| t.name == "cx23").expect("cx23");
    assert_eq!((cx23.cores, cx23.memory, cx23.disk), (2, dec("4"), 40));
    assert_eq!(cx23.architecture, HcloudArchitecture::X86);
    let fsn1 = cx23.price_in("fsn1").expect("cx23 in fsn1");
    assert_eq!(fsn1.price_monthly.net, dec("5.49"));
    assert_eq!(fsn1.price_monthly.gross, dec("6.5331"));
    assert!(cx23.available_in("fsn1"));
    assert!(cx23.price_in("ash").is_none());

    let locations = client.list_locations().await.unwrap();
    let names: Vec<_> = locations.iter().map(|l| l.name.as_str()).collect();
    for expected in ["fsn1", "nbg1", "hel1", "ash", "hil", "sin"] {
        assert!(names.contains(&expected), "{names:?}");
    }

    let arm = client
        .list_images(&ImageFilter {
            kind: Some(orc_cloud::hetzner::ImageType::System),
            architecture: Some(HcloudArchitecture::Arm),
            ..ImageFilter::default()
        })
        .await
        .unwrap();
    assert!(!arm.is_empty());
    assert!(
        arm.iter()
            .all(|i| i.architecture == HcloudArchitecture::Arm)
    );

    let pricing = client.pricing().await.unwrap();
    assert_eq!(pricing.currency, Currency::EUR);
    assert_eq!(pricing.vat_rate, dec("19"));
    assert_eq!(pricing.volume_per_gb_month_net().amount, dec("0.0572"));
    assert_eq!(
        pricing
            .primary_ip_monthly_net(IpType::Ipv4, "fsn1")
            .map(|m| m.amount),
        Some(dec("0.5"))
    );
}

#[tokio::test]
async fn server_lifecycle_with_every_power_action() {
    let emu = start().await;
    let client = hetzner(&emu);
    let key = client
        .create_ssh_key("ops", &ssh_public_key(1), &Labels::new())
        .await
        .unwrap();

    let mut request = CreateServer::new("node-1", "cx23", "ubuntu-24.04");
    request.location = Some("nbg1".into());
    request.labels = labels(&[("orc/node", "n1"), ("env", "test")]);
    request.user_data = Some("#cloud-config\n".into());
    request.ssh_keys = vec![key.id];
    let created = client.create_server(&request).await.unwrap();
    assert_eq!(created.server.name, "node-1");
    assert!(created.root_password.is_none(), "an SSH key was given");
    assert_eq!(created.action.command, "create_server");
    let done = client
        .wait_for_actions(&created.action_ids(), POLL, deadline())
        .await
        .unwrap();
    assert!(done.iter().all(|a| a.status == ActionStatus::Success));

    let id = created.server.id;
    let server = client.get_server(id).await.unwrap().expect("exists");
    assert_eq!(server.status, ServerStatus::Running);
    assert_eq!(server.location.name, "nbg1");
    assert_eq!(
        server.labels.get("orc/node").map(String::as_str),
        Some("n1")
    );
    assert!(server.public_net.ipv4.is_some());

    let by_label = client
        .list_servers(&ServerFilter {
            label_selector: Some("orc/node=n1".into()),
            ..ServerFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(by_label.iter().map(|s| s.id).collect::<Vec<_>>(), [id]);
    let none = client
        .list_servers(&ServerFilter {
            label_selector: Some("orc/node=n2".into()),
            ..ServerFilter::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    let by_name = client
        .list_servers(&ServerFilter {
            name: Some("node-1".into()),
            ..ServerFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(by_name.len(), 1);

    let off = client.poweroff_server(id).await.unwrap();
    client
        .wait_for_actions(&[off.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client.get_server(id).await.unwrap().unwrap().status,
        ServerStatus::Off
    );
    let on = client.poweron_server(id).await.unwrap();
    client
        .wait_for_actions(&[on.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client.get_server(id).await.unwrap().unwrap().status,
        ServerStatus::Running
    );
    for action in [
        client.reboot_server(id).await.unwrap(),
        client.reset_server(id).await.unwrap(),
        client.shutdown_server(id).await.unwrap(),
    ] {
        let done = client
            .wait_for_actions(&[action.id], POLL, deadline())
            .await
            .unwrap();
        assert_eq!(done[0].status, ActionStatus::Success);
    }
    let rebuilt = client
        .rebuild_server(id, &ImageRef::from("debian-12"), None)
        .await
        .unwrap();
    assert_eq!(rebuilt.action.command, "rebuild_server");
    client
        .wait_for_actions(&[rebuilt.action.id], POLL, deadline())
        .await
        .unwrap();

    let deleted = client.delete_server(id).await.unwrap();
    client
        .wait_for_actions(&[deleted.id], POLL, deadline())
        .await
        .unwrap();
    assert!(client.get_server(id).await.unwrap().is_none());
    let gone = client.delete_server(id).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone:?}");
    let gone = client.poweron_server(id).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone:?}");
}

#[tokio::test]
async fn listings_follow_pages_beyond_fifty() {
    let emu = start().await;
    let client = hetzner(&emu);
    for i in 0..60 {
        client
            .create_ssh_key(
                &format!("key-{i:02}"),
                &ssh_public_key(i),
                &labels(&[("batch", "a")]),
            )
            .await
            .unwrap();
    }
    client.counters().reset();
    let keys = client
        .list_ssh_keys(&SshKeyFilter::default())
        .await
        .unwrap();
    assert_eq!(keys.len(), 60);
    let mut names: Vec<_> = keys.iter().map(|k| k.name.clone()).collect();
    names.dedup();
    assert_eq!(names.len(), 60);
    assert_eq!(client.counters().get("hetzner.ssh_keys.list"), 2);

    let one = client
        .list_ssh_keys(&SshKeyFilter {
            name: Some("key-07".into()),
            ..SshKeyFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    let key = client.get_ssh_key(one[0].id).await.unwrap().expect("found");
    assert_eq!(key.public_key, ssh_public_key(7));
    client.delete_ssh_key(key.id).await.unwrap();
    assert!(client.get_ssh_key(key.id).await.unwrap().is_none());
    assert!(
        client
            .delete_ssh_key(key.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn a_429_is_retried_once_a_token_is_back() {
    let emu = start().await;
    let client = hetzner(&emu);
    // One token per second, none left: the next request is refused and the next token
    // comes back about a second later.
    EmuControl::hetzner(&emu)
        .rate_limit(3600, 3600.0, Some(0))
        .await;
    let servers = client.list_servers(&ServerFilter::default()).await.unwrap();
    assert!(servers.is_empty());
    assert_eq!(client.counters().get("hetzner.servers.list"), 2);
}

#[tokio::test]
async fn a_long_rate_limit_wait_is_left_to_the_caller() {
    let emu = start().await;
    let client = hetzner(&emu);
    // Ten requests per ten hours: one token takes an hour, far beyond the 5 s cap.
    EmuControl::hetzner(&emu)
        .rate_limit(10, 36000.0, Some(0))
        .await;
    let err = client.list_locations().await.unwrap_err();
    match &err {
        CloudError::RateLimited {
            operation,
            retry_after,
        } => {
            assert_eq!(*operation, "hetzner.locations.list");
            assert!(*retry_after > Duration::from_secs(5), "{retry_after:?}");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert!(err.retryable());
    assert_eq!(client.counters().get("hetzner.locations.list"), 1);
}

#[tokio::test]
async fn sold_out_and_disabled_locations_are_no_capacity() {
    let emu = start().await;
    let client = hetzner(&emu);
    let control = EmuControl::hetzner(&emu);
    control.sold_out("cx23", "fsn1", true).await;
    let types = client.list_server_types().await.unwrap();
    let cx23 = types.iter().find(|t| t.name == "cx23").unwrap();
    assert!(!cx23.available_in("fsn1"));
    assert!(cx23.available_in("nbg1"));

    let mut request = CreateServer::new("sold", "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    let err = client.create_server(&request).await.unwrap_err();
    assert!(err.is_capacity(), "{err:?}");
    assert!(!err.retryable());

    control.location_disabled("nbg1", true).await;
    request.location = Some("nbg1".into());
    let err = client.create_server(&request).await.unwrap_err();
    assert!(err.is_capacity(), "{err:?}");

    request.server_type = "cx33".into();
    request.location = Some("ash".into());
    let err = client.create_server(&request).await.unwrap_err();
    assert!(
        !err.is_capacity(),
        "a type never offered there is not a stock-out: {err:?}"
    );
    assert_eq!(client.counters().get("hetzner.servers.create"), 3);
}

#[tokio::test]
async fn an_injected_503_is_retried_for_gets_only() {
    let emu = start().await;
    let client = hetzner(&emu);
    let control = EmuControl::hetzner(&emu);
    control
        .fault(Fault::new("/v1/servers", 503, 1).method("GET"))
        .await;
    client.list_servers(&ServerFilter::default()).await.unwrap();
    assert_eq!(client.counters().get("hetzner.servers.list"), 2);

    control
        .fault(Fault::new("/v1/servers", 503, 1).method("POST"))
        .await;
    let err = client
        .create_server(&CreateServer::new("x", "cx23", "ubuntu-24.04"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 503, .. }),
        "{err:?}"
    );
    assert!(err.retryable());
    assert_eq!(client.counters().get("hetzner.servers.create"), 1);
}

#[tokio::test]
async fn failed_and_unfinished_actions_are_reported() {
    let emu = start().await;
    let client = hetzner(&emu);
    let id = create_running(&client, "actions").await;
    EmuControl::hetzner(&emu).fail_next_actions(1).await;
    let reboot = client.reboot_server(id).await.unwrap();
    let err = client
        .wait_for_actions(&[reboot.id], POLL, deadline())
        .await
        .unwrap_err();
    match err {
        CloudError::ActionFailed {
            action, command, ..
        } => {
            assert_eq!(action, reboot.id);
            assert_eq!(command, "reboot_server");
        }
        other => panic!("expected ActionFailed, got {other:?}"),
    }
    let err = client
        .wait_for_actions(&[HcloudActionId(1)], POLL, deadline())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn actions_still_running_at_the_deadline() {
    let mut config = orc_emu::EmuConfig::for_tests();
    config.timings = orc_emu::Timings::realistic();
    let emu = start_with(config).await;
    let client = hetzner(&emu);
    let mut request = CreateServer::new("slow", "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    let created = client.create_server(&request).await.unwrap();
    let locked = client.poweroff_server(created.server.id).await.unwrap_err();
    assert!(
        matches!(&locked, CloudError::Provider { status: 423, code: Some(code), .. } if code == "locked"),
        "{locked:?}"
    );
    assert!(locked.retryable());
    assert_eq!(client.counters().get("hetzner.servers.poweroff"), 1);
    let err = client
        .wait_for_actions(
            &created.action_ids(),
            Duration::from_millis(10),
            Instant::now() + Duration::from_millis(50),
        )
        .await
        .unwrap_err();
    match &err {
        CloudError::Deadline { pending, .. } => assert!(pending.contains(&created.action.id)),
        other => panic!("expected Deadline, got {other:?}"),
    }
    assert!(err.retryable());
    EmuControl::hetzner(&emu).advance_clock(60.0).await;
    client.counters().reset();
    client
        .wait_for_actions(&created.action_ids(), POLL, deadline())
        .await
        .unwrap();
    assert_eq!(client.counters().get("hetzner.actions.get"), 1);
}

#[tokio::test]
async fn networks_with_subnets_and_routes() {
    let emu = start().await;
    let client = hetzner(&emu);
    let network = client
        .create_network(&CreateNetwork {
            name: "mesh".into(),
            ip_range: "10.0.0.0/16".into(),
            subnets: vec![SubnetRequest {
                kind: SubnetType::Cloud,
                ip_range: "10.0.1.0/24".into(),
                network_zone: "eu-central".into(),
            }],
            routes: vec![Route {
                destination: "10.100.0.0/24".into(),
                gateway: "10.0.1.10".into(),
            }],
            labels: labels(&[("orc", "mesh")]),
        })
        .await
        .unwrap();
    assert_eq!(network.ip_range, "10.0.0.0/16");
    assert_eq!(network.subnets.len(), 1);
    assert_eq!(network.routes.len(), 1);

    let route = Route {
        destination: "10.200.0.0/24".into(),
        gateway: "10.0.1.11".into(),
    };
    let added = client.add_route(network.id, &route).await.unwrap();
    client
        .wait_for_actions(&[added.id], POLL, deadline())
        .await
        .unwrap();
    let fetched = client
        .get_network(network.id)
        .await
        .unwrap()
        .expect("exists");
    assert!(fetched.routes.contains(&route));
    let removed = client.delete_route(network.id, &route).await.unwrap();
    client
        .wait_for_actions(&[removed.id], POLL, deadline())
        .await
        .unwrap();
    let fetched = client.get_network(network.id).await.unwrap().unwrap();
    assert!(!fetched.routes.contains(&route));

    let listed = client.list_networks(Some("orc=mesh")).await.unwrap();
    assert_eq!(listed.len(), 1);
    client.delete_network(network.id).await.unwrap();
    assert!(client.get_network(network.id).await.unwrap().is_none());
    assert!(
        client
            .delete_network(network.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn primary_ips_created_unassigned_then_assigned() {
    let emu = start().await;
    let client = hetzner(&emu);
    let created = client
        .create_primary_ip(&CreatePrimaryIp {
            name: "ip-n1".into(),
            kind: IpType::Ipv4,
            location: "fsn1".into(),
            labels: labels(&[("orc/node", "n1")]),
            auto_delete: false,
        })
        .await
        .unwrap();
    let ip = created.primary_ip;
    assert_eq!(ip.assignee_type, AssigneeType::Unassigned);
    assert!(!ip.auto_delete);
    assert_eq!(ip.server(), None);

    let listed = client.list_primary_ips(Some("orc/node=n1")).await.unwrap();
    assert_eq!(listed.iter().map(|p| p.id).collect::<Vec<_>>(), [ip.id]);
    let relabelled = client
        .update_primary_ip_labels(ip.id, &labels(&[("orc/node", "n2")]))
        .await
        .unwrap();
    assert_eq!(relabelled.labels, labels(&[("orc/node", "n2")]));
    assert!(
        client
            .list_primary_ips(Some("orc/node=n1"))
            .await
            .unwrap()
            .is_empty()
    );

    let ptr = client
        .change_primary_ip_dns_ptr(ip.id, &ip.ip, Some("n1.example.org"))
        .await
        .unwrap();
    client
        .wait_for_actions(&[ptr.id], POLL, deadline())
        .await
        .unwrap();
    let fetched = client.get_primary_ip(ip.id).await.unwrap().expect("exists");
    assert_eq!(fetched.dns_ptr[0].dns_ptr, "n1.example.org");

    let mut request = CreateServer::new("ipless", "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    request.public_net.enable_ipv4 = false;
    request.start_after_create = false;
    let server = client.create_server(&request).await.unwrap();
    client
        .wait_for_actions(&server.action_ids(), POLL, deadline())
        .await
        .unwrap();
    let assign = client
        .assign_primary_ip(ip.id, server.server.id)
        .await
        .unwrap();
    client
        .wait_for_actions(&[assign.id], POLL, deadline())
        .await
        .unwrap();
    let fetched = client.get_primary_ip(ip.id).await.unwrap().unwrap();
    assert_eq!(fetched.server(), Some(server.server.id));
    let unassign = client.unassign_primary_ip(ip.id).await.unwrap();
    client
        .wait_for_actions(&[unassign.id], POLL, deadline())
        .await
        .unwrap();
    client.delete_primary_ip(ip.id).await.unwrap();
    assert!(client.get_primary_ip(ip.id).await.unwrap().is_none());
    assert!(
        client
            .delete_primary_ip(ip.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn floating_ips_assign_and_rdns() {
    let emu = start().await;
    let client = hetzner(&emu);
    let server = create_running(&client, "fip-holder").await;
    let created = client
        .create_floating_ip(&CreateFloatingIp {
            kind: IpType::Ipv4,
            home_location: "fsn1".into(),
            name: Some("vip".into()),
            description: Some("ingress".into()),
            labels: labels(&[("orc", "vip")]),
        })
        .await
        .unwrap();
    let fip = created.floating_ip;
    assert_eq!(fip.server, None);
    let assign = client.assign_floating_ip(fip.id, server).await.unwrap();
    client
        .wait_for_actions(&[assign.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client
            .get_floating_ip(fip.id)
            .await
            .unwrap()
            .unwrap()
            .server,
        Some(server)
    );
    let ptr = client
        .change_floating_ip_dns_ptr(fip.id, &fip.ip, Some("vip.example.org"))
        .await
        .unwrap();
    client
        .wait_for_actions(&[ptr.id], POLL, deadline())
        .await
        .unwrap();
    let unassign = client.unassign_floating_ip(fip.id).await.unwrap();
    client
        .wait_for_actions(&[unassign.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client
            .list_floating_ips(Some("orc=vip"))
            .await
            .unwrap()
            .len(),
        1
    );
    client.delete_floating_ip(fip.id).await.unwrap();
    assert!(client.get_floating_ip(fip.id).await.unwrap().is_none());
}

#[tokio::test]
async fn volumes_attach_and_detach() {
    let emu = start().await;
    let client = hetzner(&emu);
    let server = create_running(&client, "vol-holder").await;
    let created = client
        .create_volume(&CreateVolume {
            name: "data".into(),
            size_gb: 20,
            placement: VolumePlacement::Location("fsn1".into()),
            format: Some("ext4".into()),
            labels: labels(&[("orc", "data")]),
        })
        .await
        .unwrap();
    let volume = created.volume;
    assert_eq!(volume.size, 20);
    let ids: Vec<_> = created.action.iter().map(|a| a.id).collect();
    client
        .wait_for_actions(&ids, POLL, deadline())
        .await
        .unwrap();
    let attach = client
        .attach_volume(volume.id, server, false)
        .await
        .unwrap();
    client
        .wait_for_actions(&[attach.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client.get_volume(volume.id).await.unwrap().unwrap().server,
        Some(server)
    );
    let detach = client.detach_volume(volume.id).await.unwrap();
    client
        .wait_for_actions(&[detach.id], POLL, deadline())
        .await
        .unwrap();
    assert_eq!(
        client.list_volumes(Some("orc=data")).await.unwrap().len(),
        1
    );
    client.delete_volume(volume.id).await.unwrap();
    assert!(client.get_volume(volume.id).await.unwrap().is_none());
    assert!(
        client
            .detach_volume(volume.id)
            .await
            .unwrap_err()
            .is_not_found()
    );

    let attached = client
        .create_volume(&CreateVolume {
            name: "scratch".into(),
            size_gb: 10,
            placement: VolumePlacement::Server {
                server,
                automount: false,
            },
            format: None,
            labels: Labels::new(),
        })
        .await
        .unwrap();
    assert_eq!(attached.volume.server, Some(server));
    assert_eq!(attached.volume.location.name, "fsn1");
}

#[tokio::test]
async fn a_wrong_token_is_a_provider_error_without_the_token() {
    let emu = start().await;
    let url = emu.hetzner_url().unwrap();
    let client =
        HetznerClient::new(HetznerConfig::new(Secret::new("wrong-token-123")).with_base_url(url))
            .unwrap();
    let err = client
        .list_servers(&ServerFilter::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 401, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains("wrong-token-123"));
    assert!(!format!("{err:?}").contains("wrong-token-123"));
    assert!(!format!("{client:?}").contains("wrong-token-123"));
}

#[tokio::test]
async fn a_private_only_server_joins_its_networks() {
    let emu = start().await;
    let client = hetzner(&emu);
    let network = client
        .create_network(&CreateNetwork {
            name: "private".into(),
            ip_range: "10.1.0.0/16".into(),
            subnets: vec![SubnetRequest {
                kind: SubnetType::Cloud,
                ip_range: "10.1.0.0/24".into(),
                network_zone: "eu-central".into(),
            }],
            routes: vec![],
            labels: Labels::new(),
        })
        .await
        .unwrap();
    let mut request = CreateServer::new("private-1", "cx23", "ubuntu-24.04");
    request.location = Some("hel1".into());
    request.networks = vec![network.id];
    request.public_net.enable_ipv4 = false;
    request.public_net.enable_ipv6 = false;
    let created = client.create_server(&request).await.unwrap();
    client
        .wait_for_actions(&created.action_ids(), POLL, deadline())
        .await
        .unwrap();
    let server = client.get_server(created.server.id).await.unwrap().unwrap();
    assert!(server.public_net.ipv4.is_none());
    assert!(server.public_net.ipv6.is_none());
    assert_eq!(
        server
            .private_net
            .iter()
            .map(|p| p.network)
            .collect::<Vec<_>>(),
        [network.id]
    );
    assert!(server.private_net[0].ip.starts_with("10.1.0."));
}

#[tokio::test]
async fn clones_share_counters_and_a_dead_endpoint_is_a_transport_error() {
    let emu = start().await;
    let client = hetzner(&emu);
    let clone = client.clone();
    client.list_locations().await.unwrap();
    clone.list_locations().await.unwrap();
    assert_eq!(
        client.request_counts().get("hetzner.locations.list"),
        Some(&2)
    );

    // A loopback port that was just released: every connection is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let dead =
        HetznerClient::new(HetznerConfig::new(SECRET).with_base_url(format!("http://{addr}/v1")))
            .unwrap();
    let err = dead.list_locations().await.unwrap_err();
    assert!(matches!(err, CloudError::Transport { .. }), "{err:?}");
    assert!(err.retryable());
    assert_eq!(
        dead.counters().get("hetzner.locations.list"),
        3,
        "GETs are retried"
    );
    let err = dead
        .create_server(&CreateServer::new("x", "cx23", "ubuntu-24.04"))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Transport { .. }), "{err:?}");
    assert_eq!(
        dead.counters().get("hetzner.servers.create"),
        1,
        "POSTs are not"
    );
}

/// Collects formatted tracing output.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn debug_logs_name_each_request_without_secrets_or_bodies() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("orc_cloud=debug")
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let emu = start().await;
    let client = hetzner(&emu);
    let mut request = CreateServer::new("logged", "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    request.user_data = Some("#cloud-config\nsecret_marker: body-must-not-be-logged\n".into());
    client.create_server(&request).await.unwrap();
    client.list_servers(&ServerFilter::default()).await.unwrap();

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("hetzner.servers.create"), "{logs}");
    assert!(logs.contains("POST") && logs.contains("/servers"), "{logs}");
    assert!(
        logs.contains("status=201") && logs.contains("attempt=1"),
        "{logs}"
    );
    assert!(logs.contains("hetzner.servers.list"), "{logs}");
    assert!(!logs.contains(SECRET), "the token leaked: {logs}");
    assert!(
        !logs.contains("body-must-not-be-logged"),
        "a body leaked: {logs}"
    );
}
