//! Shared setup of the API tests beyond the test kit's [`TestZone`] and tenancy: a pool
//! request and a provider's authenticated connector.

pub use orc_testkit::zone::{TestZone, tenancy, tenancy_without_provider};
use serde_json::{Value, json};

/// A valid pool request on provider `fake`.
pub fn pool_body(name: &str, size: u32) -> Value {
    json!({
        "name": name,
        "provider": "fake",
        "size": size,
        "shape": { "cpu": 2, "mem": 4 },
        "class": "eu-central",
        "os": "debian-12",
    })
}

/// How long an API test waits for the zone to get where it expects (real time).
pub const API_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Dials `zone`'s hub over TLS, pinning its CA, with an API token and project in the
/// stream's metadata, as a provider replica does.
pub fn auth_connector(
    zone: &orc_zone::zone::Zone,
    token: &str,
    project: &str,
) -> orc_provider_sdk::GrpcConnector {
    let credentials =
        orc_provider_sdk::ZoneCredentials::new(token, project).expect("printable credentials");
    let ca = zone
        .ca_pem()
        .map(|pem| orc_tls::PinnedCa::from_pem(pem, "the test zone").expect("CA PEM"));
    orc_provider_sdk::GrpcConnector::new(
        &zone.grpc_url(),
        std::time::Duration::from_secs(2),
        ca.as_ref(),
    )
    .expect("endpoint")
    .with_credentials(credentials)
}

/// Runs a fake provider on `cloud` (resource `urn:orc:fake:test`) against `z` with `token`,
/// registering in `project`, until the returned sender is dropped or sent to.
pub fn start_replica(
    z: &TestZone,
    token: &str,
    project: &str,
    cloud: &std::sync::Arc<orc_provider_sdk::fake::FakeCloud>,
) -> tokio::sync::oneshot::Sender<()> {
    use std::time::Duration;
    let provider = std::sync::Arc::new(orc_provider_sdk::fake::FakeProvider::new(
        std::sync::Arc::clone(cloud),
    ));
    let options = orc_provider_sdk::RunnerOptions {
        keepalive_interval: Duration::from_millis(500),
        backoff: orc_common::Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        inventory_interval: None,
        jitter_seed: Some(1),
        ..orc_provider_sdk::RunnerOptions::default()
    };
    let connector = auth_connector(&z.zone, token, project);
    let runner = orc_provider_sdk::ProviderRunner::with_connector(connector, provider, options);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    stop
}
