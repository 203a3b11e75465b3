//! The Vultr client against the Vultr emulator: every call, cursor pagination, the 429
//! retry, capacity errors, absent resources and retried GETs.

mod common;

use orc_cloud::vultr::{
    CreateBlock, CreateInstance, InstanceFilter, InstanceSource, InstanceStatus, PowerStatus,
};
use orc_cloud::{CloudError, VultrInstanceId, VultrOsId, VultrRegionId};
use orc_testkit::emu::{EmuControl, Fault};
use rust_decimal::Decimal;

use common::*;

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn ubuntu(region: &str, plan: &str) -> CreateInstance {
    CreateInstance::new(region, plan, InstanceSource::Os(VultrOsId(2284)))
}

#[tokio::test]
async fn catalogue_plans_regions_os_and_account() {
    let emu = start().await;
    let client = vultr_paged(&emu, 20);
    let plans = client.list_plans(None).await.unwrap();
    assert_eq!(plans.len(), 65);
    assert_eq!(client.counters().get("vultr.plans.list"), 4);
    let plan = plans
        .iter()
        .find(|p| p.id.as_str() == "vc2-2c-4gb")
        .unwrap();
    assert_eq!((plan.vcpu_count, plan.ram), (2, 4096));
    assert_eq!(plan.memory_gib(), dec("4"));
    assert_eq!(plan.monthly_cost, dec("20"));
    assert_eq!(plan.hourly_cost, Some(dec("0.027")));
    let half = plans
        .iter()
        .find(|p| p.id.as_str() == "vc2-1c-0.5gb")
        .unwrap();
    assert_eq!(half.memory_gib(), dec("0.5"));
    assert_eq!(half.monthly_cost, dec("3.5"));

    let vc2 = client.list_plans(Some("vc2")).await.unwrap();
    assert!(!vc2.is_empty() && vc2.iter().all(|p| p.kind == "vc2"));

    let regions = client.list_regions().await.unwrap();
    assert_eq!(regions.len(), 32);
    let fra = VultrRegionId::from("fra");
    assert!(regions.iter().any(|r| r.id == fra));
    let available = client.region_availability(&fra).await.unwrap();
    assert!(available.iter().any(|p| p.as_str() == "vc2-2c-4gb"));

    let os = client.list_os().await.unwrap();
    assert_eq!(os.len(), 48);
    assert!(os.iter().any(|o| o.id == VultrOsId(2284)));

    let account = client.account().await.unwrap();
    assert!(!account.email.is_empty());
}

#[tokio::test]
async fn instance_lifecycle() {
    let emu = start().await;
    let client = vultr(&emu);
    let key = client
        .create_ssh_key("ops", &ssh_public_key(1))
        .await
        .unwrap();
    let vpc = client
        .create_vpc(&VultrRegionId::from("fra"), "mesh", Some(("10.8.0.0", 24)))
        .await
        .unwrap();
    assert_eq!(
        (vpc.v4_subnet.as_str(), vpc.v4_subnet_mask),
        ("10.8.0.0", 24)
    );

    let mut request = ubuntu("fra", "vc2-1c-1gb");
    request.label = Some("node-1".into());
    request.hostname = Some("node-1".into());
    request.tags = vec!["orc".into(), "node-1".into()];
    request.user_data = Some("#cloud-config\n".into());
    request.attach_vpc = vec![vpc.id.clone()];
    request.sshkey_id = vec![key.id.clone()];
    let created = client.create_instance(&request).await.unwrap();
    assert_eq!(created.label, "node-1");
    assert_eq!(created.tags, ["orc", "node-1"]);
    assert_eq!(created.plan.as_str(), "vc2-1c-1gb");
    let id = created.id.clone();

    let fetched = client.get_instance(&id).await.unwrap().expect("exists");
    assert_eq!(fetched.region.as_str(), "fra");
    assert_eq!(fetched.status, InstanceStatus::Active);

    let tagged = client
        .list_instances(&InstanceFilter {
            tag: Some("node-1".into()),
            ..InstanceFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(tagged.iter().map(|i| &i.id).collect::<Vec<_>>(), [&id]);
    let other = client
        .list_instances(&InstanceFilter {
            tag: Some("node-2".into()),
            ..InstanceFilter::default()
        })
        .await
        .unwrap();
    assert!(other.is_empty());

    client.halt_instance(&id).await.unwrap();
    assert_eq!(
        client
            .get_instance(&id)
            .await
            .unwrap()
            .unwrap()
            .power_status,
        PowerStatus::Stopped
    );
    client.start_instance(&id).await.unwrap();
    assert_eq!(
        client
            .get_instance(&id)
            .await
            .unwrap()
            .unwrap()
            .power_status,
        PowerStatus::Running
    );
    client.reboot_instance(&id).await.unwrap();
    let reinstalled = client
        .reinstall_instance(&id, Some("node-1b"))
        .await
        .unwrap();
    assert_eq!(reinstalled.id, id);

    let main_ip = client.get_instance(&id).await.unwrap().unwrap().main_ip;
    client
        .set_reverse_ipv4(&id, &main_ip, "node-1.example.org")
        .await
        .unwrap();

    client.delete_instance(&id).await.unwrap();
    assert!(client.get_instance(&id).await.unwrap().is_none());
    assert!(
        client
            .delete_instance(&id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(client.start_instance(&id).await.unwrap_err().is_not_found());

    assert_eq!(client.list_vpcs().await.unwrap().len(), 1);
    assert!(client.get_vpc(&vpc.id).await.unwrap().is_some());
    client.delete_vpc(&vpc.id).await.unwrap();
    assert!(client.get_vpc(&vpc.id).await.unwrap().is_none());
}

#[tokio::test]
async fn ipv6_only_instances_have_no_public_ipv4() {
    let emu = start().await;
    let client = vultr(&emu);
    let mut request = ubuntu("ewr", "vc2-1c-1gb");
    request.disable_public_ipv4 = true;
    let created = client.create_instance(&request).await.unwrap();
    let fetched = client.get_instance(&created.id).await.unwrap().unwrap();
    assert!(!fetched.v6_main_ip.is_empty(), "{fetched:?}");
    assert!(
        fetched.main_ip.is_empty() || fetched.main_ip == "0.0.0.0",
        "{}",
        fetched.main_ip
    );
}

#[tokio::test]
async fn listings_follow_the_cursor_beyond_a_hundred() {
    let emu = start().await;
    let client = vultr_paged(&emu, 50);
    for i in 0..120 {
        client
            .create_ssh_key(&format!("key-{i:03}"), &ssh_public_key(i))
            .await
            .unwrap();
    }
    client.counters().reset();
    let keys = client.list_ssh_keys().await.unwrap();
    assert_eq!(keys.len(), 120);
    let mut names: Vec<_> = keys.iter().map(|k| k.name.clone()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 120);
    assert_eq!(client.counters().get("vultr.ssh_keys.list"), 3);

    let key = &keys[0];
    assert_eq!(
        client.get_ssh_key(&key.id).await.unwrap().unwrap().name,
        key.name
    );
    client.delete_ssh_key(&key.id).await.unwrap();
    assert!(client.get_ssh_key(&key.id).await.unwrap().is_none());
    assert!(
        client
            .delete_ssh_key(&key.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn reserved_ips_attach_detach() {
    let emu = start().await;
    let client = vultr(&emu);
    let region = VultrRegionId::from("ams");
    let instance = client
        .create_instance(&ubuntu("ams", "vc2-1c-1gb"))
        .await
        .unwrap();
    let ip = client
        .create_reserved_ip(&region, "v4", Some("vip"))
        .await
        .unwrap();
    assert_eq!((ip.ip_type.as_str(), ip.subnet_size), ("v4", 32));
    assert_eq!(ip.instance(), None);
    client
        .attach_reserved_ip(&ip.id, &instance.id)
        .await
        .unwrap();
    assert_eq!(
        client
            .get_reserved_ip(&ip.id)
            .await
            .unwrap()
            .unwrap()
            .instance(),
        Some(instance.id.clone())
    );
    client
        .set_reverse_ipv4(&instance.id, &ip.subnet, "vip.example.org")
        .await
        .unwrap();
    client.detach_reserved_ip(&ip.id).await.unwrap();
    assert_eq!(
        client
            .get_reserved_ip(&ip.id)
            .await
            .unwrap()
            .unwrap()
            .instance(),
        None
    );
    assert_eq!(client.list_reserved_ips().await.unwrap().len(), 1);
    client.delete_reserved_ip(&ip.id).await.unwrap();
    assert!(client.get_reserved_ip(&ip.id).await.unwrap().is_none());
    assert!(
        client
            .delete_reserved_ip(&ip.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn block_storage_attach_detach() {
    let emu = start().await;
    let client = vultr(&emu);
    let instance = client
        .create_instance(&ubuntu("ewr", "vc2-1c-1gb"))
        .await
        .unwrap();
    let block = client
        .create_block(&CreateBlock {
            region: VultrRegionId::from("ewr"),
            size_gb: 40,
            label: Some("data".into()),
            block_type: None,
        })
        .await
        .unwrap();
    assert_eq!(block.size_gb, 40);
    assert_eq!(block.attached_to_instance, None);
    assert!(block.cost > Decimal::ZERO);
    client
        .attach_block(&block.id, &instance.id, true)
        .await
        .unwrap();
    assert_eq!(
        client
            .get_block(&block.id)
            .await
            .unwrap()
            .unwrap()
            .attached_to_instance,
        Some(instance.id.to_string())
    );
    client.detach_block(&block.id, true).await.unwrap();
    assert_eq!(client.list_blocks().await.unwrap().len(), 1);
    client.delete_block(&block.id).await.unwrap();
    assert!(client.get_block(&block.id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_429_is_retried_after_a_short_wait() {
    let emu = start().await;
    let client = vultr(&emu);
    EmuControl::vultr(&emu).rate_limit(30, 1.0, Some(0)).await;
    client
        .list_instances(&InstanceFilter::default())
        .await
        .unwrap();
    assert_eq!(client.counters().get("vultr.instances.list"), 2);
}

#[tokio::test]
async fn sold_out_plans_and_closed_regions_are_no_capacity() {
    let emu = start().await;
    let client = vultr(&emu);
    let control = EmuControl::vultr(&emu);
    control.sold_out("vc2-1c-1gb", "fra", true).await;
    let available = client
        .region_availability(&VultrRegionId::from("fra"))
        .await
        .unwrap();
    assert!(!available.iter().any(|p| p.as_str() == "vc2-1c-1gb"));
    let err = client
        .create_instance(&ubuntu("fra", "vc2-1c-1gb"))
        .await
        .unwrap_err();
    assert!(err.is_capacity(), "{err:?}");

    control.location_disabled("ams", true).await;
    let err = client
        .create_instance(&ubuntu("ams", "vc2-2c-4gb"))
        .await
        .unwrap_err();
    assert!(err.is_capacity(), "{err:?}");

    let err = client
        .create_instance(&ubuntu("fra", "no-such-plan"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(client.counters().get("vultr.instances.create"), 3);
}

#[tokio::test]
async fn an_injected_503_is_retried_for_gets_only() {
    let emu = start().await;
    let client = vultr(&emu);
    let control = EmuControl::vultr(&emu);
    control
        .fault(Fault::new("/v2/instances", 503, 1).method("GET"))
        .await;
    client
        .list_instances(&InstanceFilter::default())
        .await
        .unwrap();
    assert_eq!(client.counters().get("vultr.instances.list"), 2);
    control
        .fault(Fault::new("/v2/instances", 503, 1).method("POST"))
        .await;
    let err = client
        .create_instance(&ubuntu("fra", "vc2-1c-1gb"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 503, .. }),
        "{err:?}"
    );
    assert_eq!(client.counters().get("vultr.instances.create"), 1);
    let missing = VultrInstanceId::from("00000000-0000-4000-8000-000000000000");
    assert!(client.get_instance(&missing).await.unwrap().is_none());
}

#[tokio::test]
async fn deleting_an_installing_instance_is_a_retryable_refusal() {
    let mut config = orc_emu::EmuConfig::for_tests();
    config.timings = orc_emu::Timings::realistic();
    let emu = start_with(config).await;
    let client = vultr(&emu);
    let created = client
        .create_instance(&ubuntu("fra", "vc2-1c-1gb"))
        .await
        .unwrap();
    assert_eq!(created.status, InstanceStatus::Pending);
    assert!(created.default_password.is_some());
    assert!(!format!("{created:?}").contains(created.default_password.as_ref().unwrap().expose()));
    let err = client.delete_instance(&created.id).await.unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 500, .. }),
        "{err:?}"
    );
    assert!(err.retryable());
    assert_eq!(
        client.counters().get("vultr.instances.delete"),
        1,
        "DELETEs are not repeated"
    );
    EmuControl::vultr(&emu).advance_clock(120.0).await;
    client.delete_instance(&created.id).await.unwrap();
    assert!(client.get_instance(&created.id).await.unwrap().is_none());
}
