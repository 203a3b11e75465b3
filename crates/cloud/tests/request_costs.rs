//! Measures what client operations cost in requests, with the clients' own counters, and
//! checks that the table in `docs/cloud.md` says exactly that.

mod common;

use std::time::Duration;

use orc_cloud::hetzner::{CreateServer, Labels, ServerFilter};
use orc_cloud::vultr::{CreateInstance, InstanceFilter, InstanceSource};
use orc_cloud::{HcloudServerId, RequestCounters, VultrOsId, VultrRegionId};
use orc_testkit::emu::{EmuControl, Fault};
use tokio::time::Instant;

use common::*;

struct Row {
    client: &'static str,
    operation: &'static str,
    case: &'static str,
    requests: u64,
}

/// Runs `f`, then answers the requests `counters` recorded for `operation` meanwhile.
async fn measure<F: Future<Output = ()>>(counters: &RequestCounters, operation: &str, f: F) -> u64 {
    counters.reset();
    f.await;
    let snapshot = counters.snapshot();
    assert!(
        snapshot.keys().all(|k| k == operation),
        "only {operation} was expected, got {snapshot:?}"
    );
    counters.get(operation)
}

async fn hetzner_rows(rows: &mut Vec<Row>) {
    let mut config = orc_emu::EmuConfig::for_tests();
    config.hetzner_options.server_limit = 200;
    let emu = start_with(config).await;
    let client = hetzner(&emu);
    let counters = client.counters();
    let control = EmuControl::hetzner(&emu);
    let request = |name: String| {
        let mut r = CreateServer::new(name, "cx23", "ubuntu-24.04");
        r.location = Some("fsn1".into());
        r
    };

    let n = measure(counters, "hetzner.servers.list", async {
        assert!(
            client
                .list_servers(&ServerFilter::default())
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "list_servers",
        case: "no servers",
        requests: n,
    });

    let mut created = None;
    let n = measure(counters, "hetzner.servers.create", async {
        created = Some(
            client
                .create_server(&request("s-000".into()))
                .await
                .unwrap(),
        );
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "create_server",
        case: "accepted",
        requests: n,
    });
    let created = created.unwrap();

    let ids = created.action_ids();
    let n = measure(counters, "hetzner.actions.get", async {
        let done = client
            .wait_for_actions(
                &ids,
                Duration::from_millis(20),
                Instant::now() + Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(done.len(), 2);
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "wait_for_actions",
        case: "2 actions, finished at the first poll",
        requests: n,
    });

    let mut all_actions = Vec::new();
    for i in 1..120 {
        let c = client
            .create_server(&request(format!("s-{i:03}")))
            .await
            .unwrap();
        all_actions.extend(c.action_ids());
    }
    all_actions.truncate(30);
    let n = measure(counters, "hetzner.actions.get", async {
        let done = client
            .wait_for_actions(
                &all_actions,
                Duration::from_millis(20),
                Instant::now() + Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(done.len(), 30);
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "wait_for_actions",
        case: "30 actions, finished at the first poll",
        requests: n,
    });

    let n = measure(counters, "hetzner.servers.list", async {
        assert_eq!(
            client
                .list_servers(&ServerFilter::default())
                .await
                .unwrap()
                .len(),
            120
        );
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "list_servers",
        case: "120 servers",
        requests: n,
    });

    let n = measure(counters, "hetzner.servers.get", async {
        assert!(
            client
                .get_server(created.server.id)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            client
                .get_server(HcloudServerId(1))
                .await
                .unwrap()
                .is_none()
        );
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "get_server",
        case: "one present, one absent",
        requests: n,
    });

    let n = measure(counters, "hetzner.servers.create", async {
        control.sold_out("cx23", "fsn1", true).await;
        let err = client
            .create_server(&request("sold".into()))
            .await
            .unwrap_err();
        assert!(err.is_capacity());
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "create_server",
        case: "sold out",
        requests: n,
    });

    let n = measure(counters, "hetzner.servers.list", async {
        control
            .fault(Fault::new("/v1/servers", 503, 1).method("GET"))
            .await;
        client
            .list_servers(&ServerFilter {
                name: Some("s-001".into()),
                ..ServerFilter::default()
            })
            .await
            .unwrap();
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "list_servers",
        case: "one 503, then success",
        requests: n,
    });

    let n = measure(counters, "hetzner.ssh_keys.create", async {
        control.rate_limit(3600, 3600.0, Some(0)).await;
        client
            .create_ssh_key("k", &ssh_public_key(1), &Labels::new())
            .await
            .unwrap();
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "create_ssh_key",
        case: "one 429, then success",
        requests: n,
    });
}

async fn still_running_row(rows: &mut Vec<Row>) {
    let mut config = orc_emu::EmuConfig::for_tests();
    config.timings = orc_emu::Timings::realistic();
    let emu = start_with(config).await;
    let client = hetzner(&emu);
    let mut request = CreateServer::new("slow", "cx23", "ubuntu-24.04");
    request.location = Some("fsn1".into());
    let created = client.create_server(&request).await.unwrap();
    let n = measure(client.counters(), "hetzner.actions.get", async {
        let err = client
            .wait_for_actions(
                &created.action_ids(),
                Duration::from_millis(50),
                Instant::now() + Duration::from_millis(10),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, orc_cloud::CloudError::Deadline { .. }),
            "{err:?}"
        );
    })
    .await;
    rows.push(Row {
        client: "hetzner",
        operation: "wait_for_actions",
        case: "still running, deadline before the second poll",
        requests: n,
    });
}

async fn vultr_rows(rows: &mut Vec<Row>) {
    let emu = start().await;
    let client = vultr(&emu);
    let small_pages = vultr_paged(&emu, 20);
    let n = measure(client.counters(), "vultr.plans.list", async {
        assert_eq!(client.list_plans(None).await.unwrap().len(), 65);
    })
    .await;
    rows.push(Row {
        client: "vultr",
        operation: "list_plans",
        case: "65 plans, per_page 500",
        requests: n,
    });
    let n = measure(small_pages.counters(), "vultr.plans.list", async {
        assert_eq!(small_pages.list_plans(None).await.unwrap().len(), 65);
    })
    .await;
    rows.push(Row {
        client: "vultr",
        operation: "list_plans",
        case: "65 plans, per_page 20",
        requests: n,
    });

    let request = CreateInstance::new("fra", "vc2-1c-1gb", InstanceSource::Os(VultrOsId(2284)));
    let n = measure(client.counters(), "vultr.instances.create", async {
        client.create_instance(&request).await.unwrap();
    })
    .await;
    rows.push(Row {
        client: "vultr",
        operation: "create_instance",
        case: "accepted",
        requests: n,
    });

    let n = measure(client.counters(), "vultr.regions.availability", async {
        client
            .region_availability(&VultrRegionId::from("fra"))
            .await
            .unwrap();
    })
    .await;
    rows.push(Row {
        client: "vultr",
        operation: "region_availability",
        case: "one region",
        requests: n,
    });

    let n = measure(client.counters(), "vultr.instances.list", async {
        EmuControl::vultr(&emu).rate_limit(30, 1.0, Some(0)).await;
        assert_eq!(
            client
                .list_instances(&InstanceFilter::default())
                .await
                .unwrap()
                .len(),
            1
        );
    })
    .await;
    rows.push(Row {
        client: "vultr",
        operation: "list_instances",
        case: "one 429, then success",
        requests: n,
    });
}

async fn robot_rows(rows: &mut Vec<Row>) {
    let emu = start().await;
    let client = robot(&emu);
    let n = measure(client.counters(), "robot.servers.list", async {
        assert_eq!(client.list_servers().await.unwrap().len(), 3);
    })
    .await;
    rows.push(Row {
        client: "robot",
        operation: "list_servers",
        case: "3 servers",
        requests: n,
    });
    for key in client.list_keys().await.unwrap() {
        client.delete_key(&key.fingerprint).await.unwrap();
    }
    let n = measure(client.counters(), "robot.keys.list", async {
        assert!(client.list_keys().await.unwrap().is_empty());
    })
    .await;
    rows.push(Row {
        client: "robot",
        operation: "list_keys",
        case: "no keys (a 404)",
        requests: n,
    });
    let n = measure(client.counters(), "robot.servers.get", async {
        EmuControl::robot(&emu)
            .rate_limit(3600, 3600.0, Some(0))
            .await;
        assert!(
            client
                .get_server(orc_cloud::RobotServerNumber(2001001))
                .await
                .unwrap()
                .is_some()
        );
    })
    .await;
    rows.push(Row {
        client: "robot",
        operation: "get_server",
        case: "one 403 RATE_LIMIT_EXCEEDED, then success",
        requests: n,
    });
}

#[tokio::test]
async fn the_documented_request_costs_are_measured() {
    let mut rows = Vec::new();
    hetzner_rows(&mut rows).await;
    still_running_row(&mut rows).await;
    vultr_rows(&mut rows).await;
    robot_rows(&mut rows).await;

    let measured: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "| {} | `{}` | {} | {} |",
                r.client, r.operation, r.case, r.requests
            )
        })
        .collect();
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cloud.md");
    let doc = std::fs::read_to_string(doc_path).expect("docs/cloud.md exists");
    let start = doc
        .find("<!-- request-costs:start -->")
        .expect("start marker in docs/cloud.md");
    let end = doc
        .find("<!-- request-costs:end -->")
        .expect("end marker in docs/cloud.md");
    let documented: Vec<String> = doc[start..end]
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| client") && !l.starts_with("|---"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        documented,
        measured,
        "docs/cloud.md must list exactly the measured costs:\n{}",
        measured.join("\n")
    );
}
