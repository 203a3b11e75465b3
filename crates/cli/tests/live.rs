//! `orc` against a zone with a fake provider connected to its hub: `pool create --wait`
//! returns once every node runs, and `orc quote` prints the provider's offer with the
//! markup applied.

use std::future::Future;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::transport::{ConnectError, Connector, ProviderStream, ZoneStream};
use orc_provider_sdk::{ProviderRunner, RunnerOptions};
use orc_zone::model::{Markup, PricingStrategy, Timestamp};
use orc_zone::zone::{Zone, ZoneConfig};

/// Dials the hub with a token and project in the stream's metadata.
#[derive(Clone)]
struct AuthConnector {
    endpoint: tonic::transport::Endpoint,
    token: String,
}

impl Connector for AuthConnector {
    fn connect(
        &self,
        outbound: ProviderStream,
    ) -> impl Future<Output = Result<ZoneStream, ConnectError>> + Send {
        let this = self.clone();
        async move {
            let channel = this
                .endpoint
                .connect()
                .await
                .map_err(ConnectError::Transport)?;
            let mut client = orc_proto::pb::provider_hub_client::ProviderHubClient::new(channel);
            let mut request = tonic::Request::new(outbound);
            let bearer = format!("Bearer {}", this.token).parse().expect("ascii");
            request.metadata_mut().insert("authorization", bearer);
            request
                .metadata_mut()
                .insert("x-orc-project", "sys/sys".parse().expect("ascii"));
            let response = client
                .attach(request)
                .await
                .map_err(ConnectError::Refused)?;
            let inbound: ZoneStream = Box::pin(response.into_inner());
            Ok(inbound)
        }
    }
}

async fn orc(zone: &Zone, dir: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(args)
        .env("ORC_URL", zone.url())
        .env("ORC_TOKEN", zone.admin_token().expose())
        .env("ORC_DATA_DIR", dir);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "orc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_create_waits_for_running_nodes_and_quotes_show_the_markup() {
    let dir = tempfile::tempdir().unwrap();
    let zone = Zone::start(ZoneConfig::ephemeral(dir.path()))
        .await
        .unwrap();

    let cloud = FakeCloud::new();
    let connector = AuthConnector {
        endpoint: tonic::transport::Endpoint::from_shared(zone.grpc_url()).unwrap(),
        token: zone.admin_token().expose().to_string(),
    };
    let options = RunnerOptions {
        keepalive_interval: Duration::from_millis(500),
        inventory_interval: None,
        jitter_seed: Some(1),
        ..RunnerOptions::default()
    };
    let runner = ProviderRunner::with_connector(
        connector,
        Arc::new(FakeProvider::new(Arc::clone(&cloud))),
        options,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));

    let mut provider = None;
    for _ in 0..300 {
        if let Ok(p) = zone.store().provider_by_resource("urn:orc:fake:test").await
            && !zone.hub().replicas_of(&p).is_empty()
        {
            provider = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let provider = provider.expect("the fake provider registers");
    zone.store()
        .set_provider_pricing(
            &provider.id,
            PricingStrategy::Markup(Markup::new("0.15".parse().unwrap()).unwrap()),
            Timestamp::now(),
        )
        .await
        .unwrap();

    let quote = stdout(
        &orc(
            &zone,
            dir.path(),
            &[
                "quote",
                "sys/sys",
                "--provider",
                "fake",
                "--class",
                "eu-central",
                "--cpu",
                "2",
                "--mem",
                "4",
                "--os",
                "debian-12",
            ],
        )
        .await,
    );
    let lines: Vec<&str> = quote.lines().collect();
    assert_eq!(lines[0], "provider:  fake", "{quote}");
    assert_eq!(lines[1], "outcome:   offer", "{quote}");
    assert_eq!(lines[2], "site:      eu-central-a", "{quote}");
    assert_eq!(
        lines[3], "line:      2 vCPU · 4 GiB · eu-central",
        "{quote}"
    );
    assert!(
        lines[4].starts_with("price:     ") && lines[4].contains(" USD/"),
        "{quote}"
    );
    assert_eq!(lines[5], "markup:    0.15", "{quote}");

    let created = stdout(
        &orc(
            &zone,
            dir.path(),
            &[
                "pool",
                "create",
                "sys/sys/web",
                "--provider",
                "fake",
                "--class",
                "eu-central",
                "--cpu",
                "2",
                "--mem",
                "4",
                "--os",
                "debian-12",
                "--size",
                "2",
                "--wait",
                "--timeout",
                "60",
            ],
        )
        .await,
    );
    assert_eq!(created, "Pool sys/sys/web is up: 2 of 2 node(s) running.\n");
    assert_eq!(cloud.instances().len(), 2);

    let nodes = stdout(&orc(&zone, dir.path(), &["nodes", "sys/web"]).await);
    let rows: Vec<&str> = nodes.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{nodes}");
    for row in rows {
        assert!(row.contains(" running "), "{nodes}");
        assert!(row.contains(" eu-central-a "), "{nodes}");
        assert!(row.contains(" USD/"), "{nodes}");
    }

    let _ = stop.send(());
    zone.shutdown().await;
}
