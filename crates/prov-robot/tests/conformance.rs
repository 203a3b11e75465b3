//! The Robot provider through the SDK's machine adapter passes the provider conformance
//! cases over a real gRPC stream, against the Robot emulator with extra free EX44 servers
//! in HEL1 (added through the emulator's control API).

mod support;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use orc_cloud::RateQuota;
use orc_proto::{NodeId, OsId, ProviderName, Quote, RefusalKind, Replica, ResourceUri};
use orc_prov_robot::{RobotAccount, RobotMachines, SshOptions};
use orc_provider_sdk::HelloInfo;
use orc_provider_sdk::conformance::{ConformanceSetup, InstanceCounter, run_all};
use orc_provider_sdk::machine::{AdapterOptions, MachineAdapter};
use orc_testkit::EmuControl;
use orc_testkit::proto::quote;
use support::*;

/// The test kit's quote with a Robot image as the OS.
fn robot_quote(node: &str, class: &str, vcpus: u32, memory_gib: u32) -> Quote {
    Quote {
        os: OsId::new("Ubuntu-2404-noble-amd64-base.tar.gz").unwrap(),
        ..quote(node, class, vcpus, memory_gib)
    }
}

fn adapter(account: &RobotAccount, url: &str) -> MachineAdapter<RobotMachines> {
    // The cases start many replicas in one process, each refreshing every 200 ms: that would
    // spend Robot's real hourly budget, which every client of the account shares, in
    // seconds, so the account here (and its emulator) allows far more.
    let machines =
        RobotMachines::new(account.clone(), url, SshOptions::default()).with_quota(RateQuota {
            requests: NonZeroU32::new(100_000).unwrap(),
            per: Duration::from_secs(3600),
        });
    let hello = HelloInfo {
        provider: ProviderName::new("robot").unwrap(),
        resource_uri: ResourceUri::new("urn:orc:robot:demo").unwrap(),
        replica: Replica {
            host: "test".into(),
            pid: std::process::id(),
            slot: 0,
        },
        version: "test".into(),
    };
    MachineAdapter::new(
        machines,
        hello,
        AdapterOptions {
            refresh_interval: Duration::from_millis(200),
            failed_refresh_retry: Duration::from_millis(200),
            ..AdapterOptions::default()
        },
    )
}

async fn add_ex44(url: &str, number: u64, last_octet: u8) {
    let server = serde_json::json!({
        "server_ip": format!("198.51.100.{last_octet}"),
        "server_ipv6_net": null,
        "server_number": number,
        "server_name": "",
        "product": "EX44",
        "dc": "HEL1-DC7",
        "traffic": "unlimited",
        "status": "ready",
        "cancelled": false,
        "paid_until": "2026-12-31",
        "ip": [format!("198.51.100.{last_octet}")],
        "subnet": null,
        "reset": true, "rescue": true, "vnc": true, "windows": false, "plesk": false,
        "cpanel": false, "wol": true, "hot_swap": false, "linked_storagebox": null,
        "_reset_types": ["sw", "hw", "man"],
        "_operating_status": "not supported"
    });
    EmuControl::new(url)
        .post(
            "robot/servers",
            serde_json::json!({"account": ROBOT_USER, "server": server}),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conforms_over_a_grpc_stream() {
    let emu = robot_emulator().await;
    EmuControl::robot(&emu)
        .rate_limit(100_000, 3600.0, None)
        .await;
    let url = robot_url(&emu);
    for (number, octet) in [(2001010, 30), (2001011, 31), (2001012, 32)] {
        add_ex44(&url, number, octet).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let account = account(dir.path(), "unused");

    let mut setup = ConformanceSetup::new(robot_quote("conformance", "hel1", 20, 64));
    setup.refusals = vec![
        (
            robot_quote("refused-class", "mars1", 20, 64),
            RefusalKind::OperatorFix,
        ),
        (
            robot_quote("refused-shape", "hel1", 3, 5),
            RefusalKind::Unplaceable,
        ),
    ];
    let robot = Arc::new(direct(&emu));
    let count: InstanceCounter = Arc::new(move |node: NodeId| {
        let robot = robot.clone();
        Box::pin(async move {
            let name = format!("orc-{node}");
            robot
                .list_servers()
                .await
                .unwrap()
                .iter()
                .filter(|s| s.server_name == name)
                .count()
        })
    });
    setup.count_instances = Some(count);
    let failures = run_all(|| adapter(&account, &url), &setup).await;
    assert!(failures.is_empty(), "{failures:#?}");

    let left: Vec<_> = direct(&emu)
        .list_servers()
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.server_name.starts_with("orc-"))
        .map(|s| s.server_name)
        .collect();
    assert!(left.is_empty(), "every claim was released: {left:?}");
}
