//! The Hetzner provider against the in-process Hetzner Cloud emulator: conformance over a
//! real gRPC stream, idempotent create under a race, error classes, power and reinstall as
//! the emulator logged them, and a whole deploy through the zone harness.

use std::sync::Arc;
use std::time::Duration;

use orc_cloud::hetzner::ServerFilter;
use orc_cloud::{ClientOptions, HetznerClient, HetznerConfig, RetryPolicy};
use orc_common::Currency;
use orc_emu::{EmuConfig, RunningEmulators};
use orc_proto::{
    Bootstrap, Deploy, DeployResult, DestroyResult, NodeId, ProviderName, QuoteReply, RefusalKind,
    Replica, ReplicaRole, ResourceUri,
};
use orc_prov_hetzner::machines::{KEY_LABEL, MANAGED_LABEL};
use orc_prov_hetzner::{Account, HetznerMachines, HetznerOptions};
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
    token_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let emu = EmuConfig::for_tests().start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("hcloud-token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        Rig {
            emu,
            token_file,
            _dir: dir,
        }
    }

    fn account(&self) -> Account {
        Account {
            token: SecretRef::File(self.token_file.clone()),
            location: "fsn1".parse().unwrap(),
        }
    }

    fn options(&self) -> HetznerOptions {
        HetznerOptions {
            base_url: self.emu.hetzner_url().unwrap(),
            action_poll: Duration::from_millis(20),
            action_deadline: Duration::from_secs(10),
            ..HetznerOptions::default()
        }
    }

    fn machines(&self) -> HetznerMachines {
        HetznerMachines::new(&self.account(), self.options()).unwrap()
    }

    fn without_retries(&self) -> HetznerMachines {
        let options = HetznerOptions {
            client: ClientOptions {
                retry: RetryPolicy::none(),
                ..ClientOptions::default()
            },
            ..self.options()
        };
        HetznerMachines::new(&self.account(), options).unwrap()
    }

    fn raw_client(&self) -> HetznerClient {
        HetznerClient::new(HetznerConfig::new(TOKEN).with_base_url(self.emu.hetzner_url().unwrap()))
            .unwrap()
    }

    async fn servers_of(&self, key: &str) -> usize {
        self.raw_client()
            .list_servers(&ServerFilter {
                label_selector: Some(format!("{KEY_LABEL}={key}")),
                ..ServerFilter::default()
            })
            .await
            .unwrap()
            .len()
    }

    fn control(&self) -> EmuControl {
        EmuControl::hetzner(&self.emu)
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
        provider: ProviderName::new("hetzner").unwrap(),
        resource_uri: ResourceUri::new("urn:orc:provider:hetzner").unwrap(),
        replica: Replica {
            host: "test-host".into(),
            pid: std::process::id(),
            slot: 0,
        },
        version: "test".into(),
    }
}

fn adapter(machines: HetznerMachines) -> MachineAdapter<HetznerMachines> {
    MachineAdapter::new(
        machines,
        hello(),
        AdapterOptions {
            first_read_wait: Duration::from_secs(10),
            ..AdapterOptions::default()
        },
    )
}

fn spec(key: &str) -> MachineSpec {
    MachineSpec {
        idempotency_key: MachineKey::new(key).unwrap(),
        name: hostname_for(key),
        location: "fsn1".into(),
        plan: "cx23".into(),
        image: "ubuntu-24.04".into(),
        ssh_keys: vec![],
        user_data: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conforms_over_a_grpc_stream() {
    let rig = Arc::new(Rig::start().await);
    let mut setup = ConformanceSetup::new(quote("conformance", "fsn1", 2, 4));
    setup.refusals = vec![
        (
            quote("refused-class", "mars1", 2, 4),
            RefusalKind::OperatorFix,
        ),
        (
            quote("refused-shape", "fsn1", 3, 5),
            RefusalKind::Unplaceable,
        ),
    ];
    let counter = rig.clone();
    let count: InstanceCounter = Arc::new(move |node: NodeId| {
        let rig = counter.clone();
        Box::pin(async move { rig.servers_of(node.as_str()).await })
    });
    setup.count_instances = Some(count);
    let failures = run_all(|| adapter(rig.machines()), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_key_make_one_server() {
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
        "creates answered different servers: {refs:?}"
    );
    assert_eq!(rig.servers_of("race-node").await, 1);
    let listed = rig.machines().list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key.as_str(), "race-node");
    assert_eq!(listed[0].name, "race-node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_only_managed_servers() {
    let rig = Rig::start().await;
    let client = rig.raw_client();
    let mut foreign = orc_cloud::hetzner::CreateServer::new("someone-else", "cx23", "ubuntu-24.04");
    foreign.location = Some("fsn1".into());
    foreign.labels.insert(KEY_LABEL.into(), "stolen-key".into());
    client.create_server(&foreign).await.unwrap();
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
    let server = &client
        .list_servers(&ServerFilter {
            label_selector: Some(format!("{KEY_LABEL}=mine")),
            ..ServerFilter::default()
        })
        .await
        .unwrap()[0];
    assert_eq!(
        server.labels.get(MANAGED_LABEL).map(String::as_str),
        Some("true")
    );
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

    rig.control().sold_out("cx23", "fsn1", true).await;
    let sold_out = machines.create(&spec("sold-out-node")).await.unwrap_err();
    assert!(
        matches!(sold_out, MachineError::Capacity { .. }),
        "{sold_out:?}"
    );
    assert_eq!(sold_out.refusal_kind(), RefusalKind::NoCapacity);
    let offers = machines
        .offers(&OfferQuery {
            location: Some("fsn1".into()),
            ..OfferQuery::default()
        })
        .await
        .unwrap();
    let cx23 = offers.iter().find(|o| o.plan == "cx23").unwrap();
    assert!(!cx23.available);

    rig.control()
        .fault(Fault::new("/v1/servers", 429, 1).method("GET"))
        .await;
    let limited = machines.get(&absent).await.unwrap_err();
    assert!(
        matches!(limited, MachineError::RateLimited { .. }),
        "{limited:?}"
    );
    assert_eq!(limited.refusal_kind(), RefusalKind::Transient);

    rig.control()
        .fault(
            Fault::new("/v1/servers", 500, 1)
                .method("GET")
                .code("server_error"),
        )
        .await;
    match machines.get(&absent).await.unwrap_err() {
        MachineError::Provider { status, code, .. } => {
            assert_eq!(status, Some(500));
            assert_eq!(code.as_deref(), Some("server_error"));
        }
        other => panic!("expected Provider, got {other:?}"),
    }

    std::fs::write(&rig.token_file, "not-the-token\n").unwrap();
    let refused = machines.list().await.unwrap_err();
    assert!(
        matches!(refused, MachineError::Config { .. }),
        "{refused:?}"
    );
    assert_eq!(refused.refusal_kind(), RefusalKind::OperatorFix);
    assert!(!refused.to_string().contains("not-the-token"));
    std::fs::write(&rig.token_file, format!("{TOKEN}\n")).unwrap();
    assert!(
        machines.list().await.is_ok(),
        "a rotated token is used on the next request"
    );

    std::fs::remove_file(&rig.token_file).unwrap();
    let unreadable = machines.list().await.unwrap_err();
    assert!(
        matches!(unreadable, MachineError::Config { .. }),
        "{unreadable:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_and_reinstall_map_to_hetzner_actions() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let machine = machines.create(&spec("power-node")).await.unwrap();
    let key = machine.key.clone();
    let expected = [
        (PowerAction::On, "poweron"),
        (PowerAction::Off, "poweroff"),
        (PowerAction::GracefulOff, "shutdown"),
        (PowerAction::Reset, "reset"),
        (PowerAction::Cycle, "reset"),
        (PowerAction::GracefulRestart, "reboot"),
    ];
    for (action, name) in expected {
        machines.power(&key, action).await.unwrap();
        let last = rig.logged().await.pop().unwrap();
        assert_eq!(
            last,
            format!("POST /v1/servers/{}/actions/{name}", machine.instance_ref),
            "{action}"
        );
    }
    machines.reinstall(&key, "debian-12").await.unwrap();
    let last = rig.logged().await.pop().unwrap();
    assert_eq!(
        last,
        format!("POST /v1/servers/{}/actions/rebuild", machine.instance_ref)
    );
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
    let classes: Vec<&str> = conn
        .catalog()
        .classes
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(classes, vec!["ash", "fsn1", "hel1", "hil", "nbg1", "sin"]);
    assert!(
        conn.catalog()
            .os
            .iter()
            .any(|o| o.id.as_str() == "ubuntu-24.04")
    );
    conn.welcome(ReplicaRole::Serving).await.unwrap();

    let mut placed = quote("e2e-node-1", "nbg1", 2, 4);
    placed.placement.insert("plan".into(), "cpx22".into());
    let offer = match conn.quote(placed).await.unwrap() {
        QuoteReply::Offer(offer) => offer,
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    };
    assert_eq!(offer.site.as_str(), "nbg1");
    let price = offer.price.unwrap();
    assert_eq!(price.currency, Currency::EUR);
    assert!(price.amount > rust_decimal::Decimal::ZERO);

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
    assert_eq!(deployed.site.as_str(), "nbg1");
    assert_eq!(deployed.price, Some(price));
    assert!(deployed.addresses.iter().any(|a| a.is_ipv4()));
    let server = rig
        .raw_client()
        .get_server(
            deployed
                .instance_ref
                .as_str()
                .parse::<u64>()
                .unwrap()
                .into(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server.server_type.name, "cpx22");
    assert_eq!(server.location.name, "nbg1");

    let inventory = loop {
        let inventory = conn.next_inventory().await.unwrap();
        if !inventory.nodes.is_empty() {
            break inventory;
        }
    };
    assert_eq!(inventory.nodes.len(), 1);
    assert_eq!(inventory.nodes[0].instance_ref, deployed.instance_ref);
    assert_eq!(inventory.sites.len(), 1);

    let mut sold_out = quote("e2e-node-2", "nbg1", 2, 4);
    sold_out.placement.insert("plan".into(), "cpx22".into());
    rig.control().sold_out("cpx22", "nbg1", true).await;
    let token = match conn.quote(sold_out).await.unwrap() {
        QuoteReply::Offer(offer) => offer.quote_token,
        QuoteReply::Refused(r) => panic!("the snapshot still offers cpx22, got {r}"),
    };
    let refused = conn.deploy(deploy("e2e-node-2", token)).await.unwrap();
    match refused.result {
        DeployResult::Refused(r) => {
            assert_eq!(r.kind, RefusalKind::NoCapacity);
            assert!(
                !r.words.contains("cpx22") && !r.words.contains("nbg1"),
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
    assert_eq!(rig.servers_of("e2e-node-1").await, 0);
    let _ = stop.send(());
    let _ = running.await;
}

/// Requests per operation, read from the client's counters (the figures in
/// docs/providers/hetzner.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_costs_per_operation() {
    let rig = Rig::start().await;
    let machines = rig.machines();
    let total = |m: &HetznerMachines| m.client().request_counts().values().sum::<u64>();
    let mut costs = Vec::new();
    let mut measure = |what: &str, before: u64, after: u64| {
        costs.push((what.to_string(), after - before));
    };
    let before = total(&machines);
    machines.offers(&OfferQuery::default()).await.unwrap();
    measure("offers (every location)", before, total(&machines));
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
    machines.reinstall(&key, "debian-12").await.unwrap();
    measure("reinstall", before, total(&machines));
    let before = total(&machines);
    machines.delete(&key).await.unwrap();
    measure("delete", before, total(&machines));
    eprintln!("{costs:#?}");
    let expected: Vec<(String, u64)> = [
        ("offers (every location)", 1),
        ("create (new)", 4),
        ("create (exists)", 1),
        ("list", 1),
        ("power", 2),
        ("reinstall", 2),
        ("delete", 3),
    ]
    .into_iter()
    .map(|(w, n)| (w.to_string(), n))
    .collect();
    assert_eq!(costs, expected);
}

/// With actions that take emulated time, create and delete poll Hetzner's actions until
/// they finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_delete_wait_for_their_actions() {
    let emu = EmuConfig {
        timings: orc_emu::Timings::realistic(),
        ..EmuConfig::for_tests()
    }
    .start()
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let machines = HetznerMachines::new(
        &Account {
            token: SecretRef::File(token_file),
            location: "fsn1".parse().unwrap(),
        },
        HetznerOptions {
            base_url: emu.hetzner_url().unwrap(),
            action_poll: Duration::from_millis(20),
            action_deadline: Duration::from_secs(20),
            ..HetznerOptions::default()
        },
    )
    .unwrap();
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
    assert_eq!(
        machine.state,
        orc_provider_sdk::machine::MachineState::Running
    );
    let key = machine.key.clone();
    let deleting = tokio::spawn({
        let machines = machines.clone();
        async move { machines.delete(&key).await }
    });
    eventually("the delete to finish", Duration::from_secs(60), || {
        emu.clock.advance(Duration::from_secs(2));
        let finished = deleting.is_finished();
        async move { finished }
    })
    .await;
    deleting.await.unwrap().unwrap();
    assert_eq!(machines.get(&machine.key).await.unwrap(), None);
    let polls = machines
        .client()
        .request_counts()
        .get("hetzner.actions.get")
        .copied()
        .unwrap_or(0);
    assert!(
        polls >= 3,
        "only {polls} action polls for a create and a delete"
    );
}
