//! `orc-prov-partner serve` as a process against a zone harness and the emulators: hello,
//! standby that reads no cloud, then serving on the zone's word.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use orc_proto::{QuoteReply, ReplicaRole};
use orc_provider_sdk::harness::ZoneHarness;
use orc_testkit::emu::EmuControl;
use orc_testkit::proto::quote;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_orc-prov-partner");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_says_hello_stands_by_then_serves() {
    let emu = emulators().await;
    let harness = ZoneHarness::grpc().await.unwrap();
    let mut child = Command::new(BIN)
        .env_clear()
        .args([
            "serve",
            "--zone",
            &harness.endpoint().unwrap(),
            "--slot",
            "1",
        ])
        .env("RUST_LOG", "info")
        .env("HOSTNAME", "replica-a")
        .env("ORC_PARAM_PARTNER_ID", "zone-1")
        .env("ORC_PARAM_HETZNER_API_TOKEN", TOKEN)
        .env("ORC_PARAM_HETZNER_OWNER_TAG", "orc-partner-hetzner")
        .env("ORC_PARAM_HETZNER_EXCHANGE_RATE", "1.08")
        .env("ORC_HETZNER_ENDPOINT", emu.hetzner_url().unwrap())
        .env("ORC_PARAM_VULTR_API_KEY", TOKEN)
        .env("ORC_PARAM_VULTR_OWNER_TAG", "orc-partner-vultr")
        .env("ORC_VULTR_ENDPOINT", vultr_root(&emu))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let conn = tokio::time::timeout(Duration::from_secs(20), harness.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conn.hello().resource_uri.as_str(), "urn:orc:partner:zone-1");
    assert_eq!(conn.hello().provider.as_str(), "partner");
    assert_eq!(conn.hello().replica.host, "replica-a");
    assert_eq!(conn.hello().replica.slot, 1);
    assert!(
        conn.catalog()
            .classes
            .iter()
            .any(|c| c.id.as_str() == "eu-central")
    );

    // Hello and catalog need no cloud read; that a standby never reads however long it waits
    // is proven on tokio's paused clock (`a_standby_sends_no_request_however_long_it_waits`).
    conn.welcome(ReplicaRole::Standby).await.unwrap();
    let standing = EmuControl::hetzner(&emu).counters().await.total
        + EmuControl::vultr(&emu).counters().await.total;
    assert_eq!(standing, 0, "a standby reads no cloud account");

    conn.change_role(ReplicaRole::Serving).await.unwrap();
    let reply = conn.quote(quote("n-serve", "us-east", 2, 4)).await.unwrap();
    match reply {
        QuoteReply::Offer(offer) => assert_eq!(offer.site.as_str(), "us-east-b"),
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    }

    child.kill().unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("Standing by: this replica reads no cloud account until it is handed work"),
        "{log}"
    );
    assert!(
        log.contains("This replica is serving the partner resource now"),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "{log}");
}
