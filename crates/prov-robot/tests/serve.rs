//! `orc-prov-robot serve` as a process: it dials a zone (the SDK's harness over gRPC),
//! introduces itself with the configured name, advertises the Robot locations and answers
//! a quote for a pool placed directly on a product.

mod support;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

use orc_proto::{NodeId, OsId, Quote, QuoteReply, ReplicaRole};
use orc_provider_sdk::harness::ZoneHarness;
use support::*;

/// Kills the provider process on every exit path.
struct Provider(Child);

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_dials_the_zone_and_quotes_a_product_placement() {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("pw");
    std::fs::write(&password, ROBOT_PASSWORD).unwrap();
    let account = serde_json::json!({
        "user": ROBOT_USER,
        "password": format!("file://{}", password.display()),
        "rescue_key_fingerprint": SEED_FINGERPRINT,
        "rescue_key": "env://ORC_TEST_RESCUE_KEY",
    });
    let zone = ZoneHarness::grpc().await.expect("harness listens");
    let endpoint = zone.endpoint().expect("a gRPC endpoint");
    let _provider = Provider(
        Command::new(env!("CARGO_BIN_EXE_orc-prov-robot"))
            .arg("serve")
            .env("ORC_ZONE_ENDPOINT", &endpoint)
            .env("ORC_PARAM_ACCOUNT", account.to_string())
            .env("ORC_PARAM_API_URL", robot_url(&emu))
            .env("ORC_PARAM_NAME", "robot-hel")
            .env_remove("ORC_PARAM_ACCOUNT_FILE")
            .env_remove("ORC_ZONE_TOKEN_FILE")
            .env_remove("ORC_ZONE_PROJECT")
            .stdin(Stdio::null())
            .spawn()
            .expect("orc-prov-robot starts"),
    );
    let conn = tokio::time::timeout(std::time::Duration::from_secs(30), zone.accept())
        .await
        .expect("the provider dials within 30 s")
        .expect("a stream");
    assert_eq!(conn.hello().provider.as_str(), "robot-hel");
    assert_eq!(conn.hello().resource_uri.as_str(), "urn:orc:robot:demo");
    let classes: Vec<&str> = conn
        .catalog()
        .classes
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(classes, ["fsn1", "hel1", "nbg1"]);
    conn.welcome(ReplicaRole::Serving).await.unwrap();

    let quote = Quote {
        os: OsId::new("Ubuntu-2404-noble-amd64-base.tar.gz").unwrap(),
        placement: BTreeMap::from([("plan".to_string(), "EX44".to_string())]),
        ..orc_testkit::proto::quote("node-q", "hel1", 20, 64)
    };
    match conn.quote(quote.clone()).await.unwrap() {
        QuoteReply::Offer(offer) => {
            assert_eq!(offer.site.as_str(), "hel1");
            let price = offer.price.expect("priced");
            assert!(
                price.amount.is_zero(),
                "a paid-for server costs nothing more: {price:?}"
            );
        }
        QuoteReply::Refused(refusal) => panic!("EX44 in hel1 refused: {refusal:?}"),
    }
    let elsewhere = Quote {
        node_id: NodeId::new("node-r").unwrap(),
        placement: BTreeMap::from([("plan".to_string(), "AX102".to_string())]),
        ..quote
    };
    assert!(
        matches!(conn.quote(elsewhere).await.unwrap(), QuoteReply::Refused(_)),
        "the account has no AX102"
    );
}
