//! The static provider through the SDK's machine adapter passes the provider conformance
//! cases over a real gRPC stream, against four static hosts of an emulated internet reached
//! over real SSH (`orc_emu::static_hosts`). Needs root (network namespaces, sshd); CI runs
//! it as root, and it fails, naming the reason, without.

use std::sync::Arc;
use std::time::Duration;

use orc_emu::netns::Fabric;
use orc_emu::static_hosts::StaticHosts;
use orc_proto::{NodeId, OsId, ProviderName, Quote, RefusalKind, Replica, ResourceUri};
use orc_prov_static::{SshOptions, StaticAccount, StaticMachines, parse_account};
use orc_provider_sdk::HelloInfo;
use orc_provider_sdk::conformance::{ConformanceSetup, InstanceCounter, run_all};
use orc_provider_sdk::machine::{AdapterOptions, MachineAdapter};
use orc_testkit::proto::quote;

fn static_quote(node: &str, class: &str, vcpus: u32, memory_gib: u32) -> Quote {
    Quote {
        os: OsId::new("installed").unwrap(),
        ..quote(node, class, vcpus, memory_gib)
    }
}

fn adapter(account: &StaticAccount) -> MachineAdapter<StaticMachines> {
    let options = SshOptions {
        connect_timeout: Duration::from_secs(5),
        listing_ttl: Duration::from_millis(100),
        ..SshOptions::default()
    };
    let hello = HelloInfo {
        provider: ProviderName::new("static").unwrap(),
        resource_uri: ResourceUri::new("urn:orc:provider:static").unwrap(),
        replica: Replica {
            host: "test".into(),
            pid: std::process::id(),
            slot: 0,
        },
        version: "test".into(),
    };
    MachineAdapter::new(
        StaticMachines::new(account.clone(), options),
        hello,
        AdapterOptions {
            refresh_interval: Duration::from_millis(200),
            failed_refresh_retry: Duration::from_millis(200),
            ..AdapterOptions::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conforms_over_a_grpc_stream() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root (network namespaces and sshd); CI runs it as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("id");
    let made = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "orc-conformance",
            "-f",
        ])
        .arg(&key_path)
        .status()
        .unwrap();
    assert!(made.success());
    let public = std::fs::read_to_string(dir.path().join("id.pub"))
        .unwrap()
        .trim()
        .to_string();
    let fabric = Arc::new(
        tokio::task::spawn_blocking(|| Fabric::create(None))
            .await
            .unwrap()
            .unwrap(),
    );
    let hosts = {
        let fabric = fabric.clone();
        tokio::task::spawn_blocking(move || {
            StaticHosts::start(fabric, &["c-1", "c-2", "c-3", "c-4"], &[public])
        })
        .await
        .unwrap()
        .unwrap()
    };
    let entries: Vec<serde_json::Value> = hosts
        .hosts()
        .iter()
        .map(|h| {
            serde_json::json!({
                "name": h.name, "address": h.address.to_string(), "host_key": h.host_key,
                "location": "lab", "plan": "lab-2c4g", "vcpus": 2, "memory_gib": 4,
                "hourly": "0.01",
            })
        })
        .collect();
    let account = parse_account(
        &serde_json::json!({
            "ssh_key": format!("file://{}", key_path.display()),
            "hosts": entries,
        })
        .to_string(),
    )
    .unwrap();

    let mut setup = ConformanceSetup::new(static_quote("conformance", "lab", 2, 4));
    setup.refusals = vec![
        (
            static_quote("refused-class", "mars", 2, 4),
            RefusalKind::OperatorFix,
        ),
        (
            static_quote("refused-shape", "lab", 3, 5),
            RefusalKind::Unplaceable,
        ),
    ];
    let claims = |hosts: &StaticHosts| -> Vec<String> {
        hosts
            .hosts()
            .iter()
            .map(|h| {
                let out = hosts
                    .fabric()
                    .exec(&h.key, &["sh", "-c", "cat /var/lib/orc/claim 2>/dev/null"])
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            })
            .collect()
    };
    let hosts = Arc::new(hosts);
    let counted = hosts.clone();
    let count: InstanceCounter = Arc::new(move |node: NodeId| {
        let hosts = counted.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                claims(&hosts)
                    .iter()
                    .filter(|c| c.as_str() == node.as_str())
                    .count()
            })
            .await
            .unwrap()
        })
    });
    setup.count_instances = Some(count);
    let failures = run_all(|| adapter(&account), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");

    let left: Vec<String> = claims(&hosts)
        .into_iter()
        .filter(|c| !c.is_empty())
        .collect();
    assert!(left.is_empty(), "every host was released: {left:?}");
    drop(setup);
    let hosts = Arc::try_unwrap(hosts).expect("the counter is gone");
    tokio::task::spawn_blocking(move || {
        drop(hosts);
        drop(fabric);
    })
    .await
    .unwrap();
}
