//! The Vultr provider against the in-process Vultr emulator: conformance over a real gRPC
//! stream, idempotent create under a race, error classes including a sold-out plan, power
//! and reinstall as the emulator logged them, and a whole deploy through the zone harness.

use std::sync::Arc;
use std::time::Duration;

use orc_cloud::vultr::InstanceFilter;
use orc_cloud::{ClientOptions, RetryPolicy, VultrClient, VultrConfig};
use orc_common::Currency;
use orc_emu::{EmuConfig, RunningEmulators};
use orc_proto::{
    Bootstrap, Deploy, DeployResult, DestroyResult, NodeId, ProviderName, QuoteReply, RefusalKind,
    Replica, ReplicaRole, ResourceUri,
};
use orc_prov_vultr::machines::{KEY_TAG_PREFIX, MANAGED_TAG};
use orc_prov_vultr::{Account, VultrMachines, VultrOptions};
use orc_provider_sdk::conformance::{ConformanceSetup, InstanceCounter, run_all};
use orc_provider_sdk::harness::ZoneHarness;
use orc_provider_sdk::machine::{
    AdapterOptions, MachineAdapter, MachineError, MachineKey, MachineProvider, MachineSpec,
    OfferQuery, PowerAction, hostname_for,
};
use orc_provider_sdk::secret::SecretRef;
use orc_provider_sdk::{HelloInfo, ProviderRunner, RunnerOptions};
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::eventually;
use orc_testkit::proto::{deploy, quote};

const TOKEN: &str = "demo-token";

struct Rig {
    emu: RunningEmulators,
    key_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let emu = EmuConfig::for_tests().start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("vultr-key");
        std::fs::write(&key_file, format!("{TOKEN}\n")).unwrap();
        Rig {
            emu,
            key_file,
            _dir: dir,
        }
    }

    fn account(&self) -> Account {
        Account {
            api_key: SecretRef::File(self.key_file.clone()),
            region: "fra".into(),
        }
    }

    fn options(&self) -> VultrOptions {
        VultrOptions {
            base_url: self.emu.vultr_url().unwrap(),
            ready_poll: Duration::from_millis(20),
            ready_deadline: Duration::from_secs(10),
            ..VultrOptions::default()
        }
    }

    fn machines(&self) -> VultrMachines {
        VultrMachines::new(&self.account(), self.options())
    }

    fn without_retries(&self) -> VultrMachines {
        let options = VultrOptions {
            client: ClientOptions {
                retry: RetryPolicy::none(),
                ..ClientOptions::default()
            },
            ..self.options()
        };
        VultrMachines::new(&self.account(), options)
    }

    fn raw_client(&self) -> VultrClient {
        VultrClient::new(VultrConfig::new(TOKEN).with_base_url(self.emu.vultr_url().unwrap()))
            .unwrap()
    }

    async fn instances_of(&self, key: &str) -> usize {
        self.raw_client()
            .list_instances(&InstanceFilter {
                tag: Some(format!("{KEY_TAG_PREFIX}{key}")),
                ..InstanceFilter::default()
            })
            .await
            .unwrap()
            .len()
    }

    fn control(&self) -> EmuControl {
        EmuControl::vultr(&self.emu)
    }

    /// `METHOD path` of every request the emulator logged, oldest first.
    async fn logged(&self) -> Vec<String> {
        self.control()
            .requests()
            .await
            .into_iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

fn hello() -> HelloInfo {
    HelloInfo {
        provider: ProviderName::new("vultr").unwrap(),
        resource_uri: ResourceUri::new("urn:orc:provider:vultr").unwrap(),
        replica: Replica {
            host: "test-host".into(),
            pid: std::process::id(),
            slot: 0,
        },
        version: "test".into(),
    }
}

fn adapter(machines: VultrMachines) -> MachineAdapter<VultrMachines> {
    MachineAdapter::new(
        machines,
        hello(),
        AdapterOptions {
            first_read_wait: Duration::from_secs(15),
            ..AdapterOptions::default()
        },
    )
}

fn spec(key: &str) -> MachineSpec {
    MachineSpec {
        idempotency_key: MachineKey::new(key).unwrap(),
        name: hostname_for(key),
        location: "fra".into(),
        plan: "vc2-1c-1gb".into(),
        image: "ubuntu-24.04".into(),
        ssh_keys: vec![],
        user_data: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conforms_over_a_grpc_stream() {
    let rig = Arc::new(Rig::start().await);
    let mut setup = ConformanceSetup::new(quote("conformance", "fra", 2, 4));
    setup.refusals = vec![
        (
            quote("refused-class", "fsn1", 2, 4),
            RefusalKind::OperatorFix,
        ),
        (
            quote("refused-shape", "fra", 3, 5),
            RefusalKind::Unplaceable,
        ),
    ];
    let counter = rig.clone();
    let count: InstanceCounter = Arc::new(move |node: NodeId| {
        let rig = counter.clone();
        Box::pin(async move { rig.instances_of(node.as_str()).await })
    });
    setup.count_instances = Some(count);
    // One process's adapters share its client, and with it the account's rate limit.
    let machines = rig.machines();
    let failures = run_all(|| adapter(machines.clone()), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_key_make_one_instance() {
    let rig = Rig::start().await;
    let mut racers = Vec::new();
    for _ in 0..6 {
        let machines = rig.machines();
        racers.push(tokio::spawn(async move {
            machines.create(&spec("race-node")).await
        }));
    }
    let mut refs = Vec::new();
    for racer in racers {
        refs.push(racer.await.unwrap().unwrap().instance_ref);
    }
    refs.dedup();
    assert_eq!(
        refs.len(),
        1,
        "creates answered different instances: {refs:?}"
    );
    assert_eq!(rig.instances_of("race-node").await, 1);
    let listed = rig.machines().list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key.as_str(), "race-node");
    assert!(listed[0].addresses.iter().any(|a| a.is_ipv4()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_from_another_replica_yields_to_the_earliest_and_delete_removes_both() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let first = machines.create(&spec("dup-node")).await.unwrap();
    let mut stray = orc_cloud::vultr::CreateInstance::new(
        "fra",
        "vc2-1c-1gb",
        orc_cloud::vultr::InstanceSource::Os(orc_cloud::VultrOsId(2284)),
    );
    stray.tags = vec![format!("{KEY_TAG_PREFIX}dup-node"), MANAGED_TAG.to_string()];
    rig.control().advance_clock(5.0).await;
    rig.raw_client().create_instance(&stray).await.unwrap();
    assert_eq!(rig.instances_of("dup-node").await, 2);
    let key = MachineKey::new("dup-node").unwrap();
    let got = machines.get(&key).await.unwrap().unwrap();
    assert_eq!(
        got.instance_ref, first.instance_ref,
        "get answers the earliest"
    );
    machines.delete(&key).await.unwrap();
    assert_eq!(
        rig.instances_of("dup-node").await,
        0,
        "delete removes every duplicate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_only_managed_instances() {
    let rig = Rig::start().await;
    let mut foreign = orc_cloud::vultr::CreateInstance::new(
        "fra",
        "vc2-1c-1gb",
        orc_cloud::vultr::InstanceSource::Os(orc_cloud::VultrOsId(2284)),
    );
    foreign.tags = vec![format!("{KEY_TAG_PREFIX}stolen-key")];
    rig.raw_client().create_instance(&foreign).await.unwrap();
    let machines = rig.machines();
    machines.create(&spec("mine")).await.unwrap();
    let listed: Vec<String> = machines
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key.as_str().to_string())
        .collect();
    assert_eq!(listed, vec!["mine".to_string()]);
    assert_eq!(
        machines
            .get(&MachineKey::new("stolen-key").unwrap())
            .await
            .unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_are_priced_in_usd_with_live_stock() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let query = OfferQuery {
        location: Some("fra".into()),
        ..OfferQuery::default()
    };
    let offers = machines.offers(&query).await.unwrap();
    assert!(!offers.is_empty());
    assert!(offers.iter().all(|o| o.location == "fra"));
    assert!(offers.iter().all(|o| o.hourly.currency == Currency::USD));
    assert!(offers.iter().all(|o| !o.plan.ends_with("-v6")));
    let plan = offers.iter().find(|o| o.plan == "vc2-2c-4gb").unwrap();
    assert!(plan.available);
    assert_eq!((plan.vcpus, plan.memory_mib), (2, 4096));

    rig.control().sold_out("vc2-2c-4gb", "fra", true).await;
    let offers = machines.offers(&query).await.unwrap();
    let plan = offers.iter().find(|o| o.plan == "vc2-2c-4gb").unwrap();
    assert!(
        !plan.available,
        "the sold-out plan is still offered as available"
    );

    let none = machines
        .offers(&OfferQuery {
            metal: true,
            ..query.clone()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_fall_into_their_classes() {
    let rig = Rig::start().await;
    let machines = rig.without_retries();
    let absent = MachineKey::new("never-made").unwrap();
    assert_eq!(machines.get(&absent).await.unwrap(), None);
    assert!(matches!(
        machines.delete(&absent).await,
        Err(MachineError::NotFound { .. })
    ));
    assert!(matches!(
        machines.power(&absent, PowerAction::On).await,
        Err(MachineError::NotFound { .. })
    ));

    rig.control().sold_out("vc2-1c-1gb", "fra", true).await;
    let sold_out = machines.create(&spec("sold-out-node")).await.unwrap_err();
    assert!(
        matches!(sold_out, MachineError::Capacity { .. }),
        "{sold_out:?}"
    );
    assert_eq!(sold_out.refusal_kind(), RefusalKind::NoCapacity);

    rig.control()
        .fault(Fault::new("/v2/instances", 429, 1).method("GET"))
        .await;
    let limited = machines.get(&absent).await.unwrap_err();
    assert!(
        matches!(limited, MachineError::RateLimited { .. }),
        "{limited:?}"
    );
    assert_eq!(limited.refusal_kind(), RefusalKind::Transient);

    rig.control()
        .fault(Fault::new("/v2/instances", 500, 1).method("GET"))
        .await;
    match machines.get(&absent).await.unwrap_err() {
        MachineError::Provider { status, .. } => assert_eq!(status, Some(500)),
        other => panic!("expected Provider, got {other:?}"),
    }

    std::fs::write(&rig.key_file, "not-the-key\n").unwrap();
    let refused = machines.list().await.unwrap_err();
    assert!(
        matches!(refused, MachineError::Config { .. }),
        "{refused:?}"
    );
    assert!(!refused.to_string().contains("not-the-key"));
    std::fs::write(&rig.key_file, format!("{TOKEN}\n")).unwrap();
    assert!(
        machines.list().await.is_ok(),
        "a rotated key is used on the next request"
    );

    let wrong_image = MachineSpec {
        image: "windows-2022".into(),
        ..spec("image-node")
    };
    assert!(matches!(
        machines.create(&wrong_image).await,
        Err(MachineError::Config { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_and_reinstall_map_to_vultr_calls() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let machine = machines.create(&spec("power-node")).await.unwrap();
    let key = machine.key.clone();
    let expected = [
        (PowerAction::On, "start"),
        (PowerAction::Off, "halt"),
        (PowerAction::GracefulOff, "halt"),
        (PowerAction::Reset, "reboot"),
        (PowerAction::Cycle, "reboot"),
        (PowerAction::GracefulRestart, "reboot"),
    ];
    for (action, name) in expected {
        machines.power(&key, action).await.unwrap();
        let last = rig.logged().await.pop().unwrap();
        assert_eq!(
            last,
            format!("POST /v2/instances/{}/{name}", machine.instance_ref),
            "{action}"
        );
    }
    machines.reinstall(&key, "ubuntu-24.04").await.unwrap();
    let last = rig.logged().await.pop().unwrap();
    assert_eq!(
        last,
        format!("POST /v2/instances/{}/reinstall", machine.instance_ref)
    );
    assert!(matches!(
        machines.reinstall(&key, "debian-12").await,
        Err(MachineError::Config { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_a_directly_placed_pool_through_the_zone_harness() {
    let rig = Rig::start().await;
    let harness = ZoneHarness::grpc().await.unwrap();
    let endpoint = harness.endpoint().unwrap();
    let runner = ProviderRunner::new(
        &endpoint,
        Arc::new(adapter(rig.machines())),
        RunnerOptions {
            inventory_interval: Some(Duration::from_millis(100)),
            ..RunnerOptions::default()
        },
    )
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    let conn = harness.accept().await.unwrap();
    assert_eq!(conn.catalog().classes.len(), 32);
    assert!(
        conn.catalog()
            .os
            .iter()
            .any(|o| o.id.as_str() == "debian-12")
    );
    conn.welcome(ReplicaRole::Serving).await.unwrap();

    let mut placed = quote("e2e-node-1", "ewr", 2, 4);
    placed.placement.insert("plan".into(), "vhf-2c-4gb".into());
    let offer = match conn.quote(placed).await.unwrap() {
        QuoteReply::Offer(offer) => offer,
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    };
    assert_eq!(offer.site.as_str(), "ewr");
    let price = offer.price.unwrap();
    assert_eq!(price.currency, Currency::USD);

    let outcome = conn
        .deploy(Deploy {
            ssh_keys: vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e test@orc".into()],
            bootstrap: Bootstrap(b"#!/bin/sh\necho hello\n".to_vec()),
            ..deploy("e2e-node-1", offer.quote_token)
        })
        .await
        .unwrap();
    let deployed = match outcome.result {
        DeployResult::Deployed(d) => d,
        DeployResult::Refused(r) => panic!("refused: {r}"),
    };
    assert_eq!(deployed.site.as_str(), "ewr");
    assert_eq!(deployed.price, Some(price));
    assert!(deployed.addresses.iter().any(|a| a.is_ipv4()));
    let instance = rig
        .raw_client()
        .get_instance(&deployed.instance_ref.as_str().into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(instance.plan.as_str(), "vhf-2c-4gb");

    let inventory = loop {
        let inventory = conn.next_inventory().await.unwrap();
        if !inventory.nodes.is_empty() {
            break inventory;
        }
    };
    assert_eq!(inventory.nodes.len(), 1);
    assert_eq!(inventory.nodes[0].instance_ref, deployed.instance_ref);

    rig.control().sold_out("vhf-2c-4gb", "ewr", true).await;
    let mut sold_out = quote("e2e-node-2", "ewr", 2, 4);
    sold_out
        .placement
        .insert("plan".into(), "vhf-2c-4gb".into());
    let token = match conn.quote(sold_out).await.unwrap() {
        QuoteReply::Offer(offer) => offer.quote_token,
        QuoteReply::Refused(r) => panic!("the snapshot still offers the plan, got {r}"),
    };
    let refused = conn.deploy(deploy("e2e-node-2", token)).await.unwrap();
    match refused.result {
        DeployResult::Refused(r) => {
            assert_eq!(r.kind, RefusalKind::NoCapacity);
            assert!(
                !r.words.contains("vhf") && !r.words.contains("ewr"),
                "{}",
                r.words
            );
        }
        DeployResult::Deployed(d) => panic!("deployed on a sold-out plan: {d:?}"),
    }

    assert_eq!(
        conn.destroy(deployed.node_id.clone()).await.unwrap(),
        DestroyResult::Destroyed
    );
    assert_eq!(rig.instances_of("e2e-node-1").await, 0);
    let _ = stop.send(());
    let _ = running.await;
}

/// Requests per operation, read from the client's counters (the figures in
/// docs/providers/vultr.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_costs_per_operation() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let total = |m: &VultrMachines| m.client().unwrap().request_counts().values().sum::<u64>();
    let mut costs = Vec::new();
    let mut measure = |what: &str, before: u64, after: u64| {
        costs.push((what.to_string(), after - before));
    };
    let before = total(&machines);
    machines.offers(&OfferQuery::default()).await.unwrap();
    let every_region = total(&machines) - before;
    let counts = machines.client().unwrap().request_counts();
    assert_eq!(counts.get("vultr.plans.list"), Some(&1));
    // One availability read per region; the emulator's 30 requests per second may answer
    // one of them 429, which the client waits out and repeats.
    let availability = counts
        .get("vultr.regions.availability")
        .copied()
        .unwrap_or(0);
    assert!((32..=34).contains(&availability), "{availability}");
    assert_eq!(every_region, 1 + availability);
    // The full read spent the emulator's one-second budget; once it has refilled, the
    // figures below are each operation's own cost rather than a retry the burst caused.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = total(&machines);
    machines
        .offers(&OfferQuery {
            location: Some("fra".into()),
            ..OfferQuery::default()
        })
        .await
        .unwrap();
    measure("offers (one region)", before, total(&machines));
    let before = total(&machines);
    machines.create(&spec("cost-node")).await.unwrap();
    measure("create (new)", before, total(&machines));
    let before = total(&machines);
    machines.create(&spec("cost-node")).await.unwrap();
    measure("create (exists)", before, total(&machines));
    let before = total(&machines);
    machines.list().await.unwrap();
    measure("list", before, total(&machines));
    let key = MachineKey::new("cost-node").unwrap();
    let before = total(&machines);
    machines
        .power(&key, PowerAction::GracefulRestart)
        .await
        .unwrap();
    measure("power", before, total(&machines));
    let before = total(&machines);
    machines.reinstall(&key, "ubuntu-24.04").await.unwrap();
    measure("reinstall", before, total(&machines));
    let before = total(&machines);
    machines.delete(&key).await.unwrap();
    measure("delete", before, total(&machines));
    eprintln!("{costs:#?}");
    let expected: Vec<(String, u64)> = [
        ("offers (one region)", 2),
        ("create (new)", 3),
        ("create (exists)", 1),
        ("list", 1),
        ("power", 2),
        ("reinstall", 2),
        ("delete", 2),
    ]
    .into_iter()
    .map(|(w, n)| (w.to_string(), n))
    .collect();
    assert_eq!(costs, expected);
}

/// With creates that take emulated time, create reads the instance until it is active and
/// answers its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_waits_until_the_instance_has_its_address() {
    let emu = EmuConfig {
        timings: orc_emu::Timings::realistic(),
        ..EmuConfig::for_tests()
    }
    .start()
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, TOKEN).unwrap();
    let machines = VultrMachines::new(
        &Account {
            api_key: SecretRef::File(key_file),
            region: "fra".into(),
        },
        VultrOptions {
            base_url: emu.vultr_url().unwrap(),
            ready_poll: Duration::from_millis(20),
            ready_deadline: Duration::from_secs(20),
            ..VultrOptions::default()
        },
    );
    let creating = tokio::spawn({
        let machines = machines.clone();
        async move { machines.create(&spec("slow-node")).await }
    });
    eventually("the create to finish", Duration::from_secs(60), || {
        emu.clock.advance(Duration::from_secs(2));
        let finished = creating.is_finished();
        async move { finished }
    })
    .await;
    let machine = creating.await.unwrap().unwrap();
    assert!(machine.addresses.iter().any(|a| a.is_ipv4()), "{machine:?}");
    let reads = machines
        .client()
        .unwrap()
        .request_counts()
        .get("vultr.instances.get")
        .copied()
        .unwrap_or(0);
    assert!(
        reads >= 1,
        "create answered before reading the instance again"
    );
}
