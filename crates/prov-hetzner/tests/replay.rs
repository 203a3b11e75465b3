//! Record and replay: the scenario of `orc_prov_hetzner::recording` replayed from the
//! shipped recording with no server, a fresh recording against the emulator replayed to
//! the same outcome, and a crafted two-page server type listing.
//!
//! The shipped recording is made again with the emulator binary and the provider's CLI:
//!
//! ```text
//! cargo run -p orc-emu --bin orc-cloud-emu -- --hetzner 127.0.0.1:4010 --timings instant &
//! HCLOUD_TOKEN=demo-token \
//! ORC_PARAM_ACCOUNT='{"token": "env://HCLOUD_TOKEN", "location": "fsn1"}' \
//! ORC_PARAM_API_URL=http://127.0.0.1:4010/v1 \
//! cargo run -p orc-prov-hetzner -- record --out crates/prov-hetzner/tests/recordings/hetzner-scenario.ndjson
//! ```

use std::sync::Arc;
use std::time::Duration;

use orc_cloud::{HttpExchange, RecordingExchange, ReplayExchange};
use orc_emu::EmuConfig;
use orc_prov_hetzner::recording::{SCENARIO_KEY, scenario};
use orc_prov_hetzner::{Account, HetznerMachines, HetznerOptions};
use orc_provider_sdk::machine::{MachineProvider, OfferQuery};
use orc_provider_sdk::secret::SecretRef;

const SHIPPED: &str = include_str!("recordings/hetzner-scenario.ndjson");
const TOKEN: &str = "demo-token";

fn account(dir: &tempfile::TempDir) -> Account {
    let path = dir.path().join("token");
    std::fs::write(&path, TOKEN).unwrap();
    Account {
        token: SecretRef::File(path),
        location: "fsn1".parse().unwrap(),
    }
}

fn replaying(dir: &tempfile::TempDir, replay: Arc<ReplayExchange>) -> HetznerMachines {
    HetznerMachines::new(
        &account(dir),
        HetznerOptions {
            // Nothing listens here: every answer must come from the recording.
            base_url: "http://127.0.0.1:9/v1".into(),
            action_poll: Duration::from_millis(1),
            exchange: Some(replay),
            ..HetznerOptions::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn replays_the_shipped_recording_with_no_server() {
    assert!(!SHIPPED.contains(TOKEN), "the recording holds the token");
    let dir = tempfile::tempdir().unwrap();
    let replay = Arc::new(ReplayExchange::from_ndjson(SHIPPED).unwrap());
    let machines = replaying(&dir, replay.clone());
    let outcome = scenario(&machines).await.unwrap();
    assert!(outcome.offers > 0);
    assert!(outcome.idempotent);
    assert_eq!(outcome.listed, 1);
    assert!(outcome.gone);
    assert_eq!(replay.unused(), 0, "the scenario skipped recorded requests");
    let counts = machines.client().request_counts();
    assert_eq!(counts.get("hetzner.servers.create"), Some(&1));
    assert_eq!(counts.get("hetzner.servers.rebuild"), Some(&1));
    assert_eq!(counts.get("hetzner.servers.reboot"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_recording_replays_to_the_same_outcome() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.ndjson");
    let url = emu.hetzner_url().unwrap();
    let recorder = RecordingExchange::create(
        Arc::new(HttpExchange::new(&url, Default::default()).unwrap()),
        &path,
    )
    .unwrap();
    let live = HetznerMachines::new(
        &account(&dir),
        HetznerOptions {
            base_url: url,
            action_poll: Duration::from_millis(10),
            exchange: Some(Arc::new(recorder)),
            ..HetznerOptions::default()
        },
    )
    .unwrap();
    let recorded = scenario(&live).await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(TOKEN), "the recording holds the token");
    assert!(text.contains(SCENARIO_KEY));
    drop(emu);

    let replay = Arc::new(ReplayExchange::from_ndjson(&text).unwrap());
    let replayed = scenario(&replaying(&dir, replay.clone())).await.unwrap();
    assert_eq!(replayed, recorded);
    assert_eq!(replay.unused(), 0);
}

/// A recorded exchange answering `GET /server_types` page `page`.
fn page(page: u64, next: Option<u64>, types: &[serde_json::Value]) -> String {
    serde_json::json!({
        "request": {
            "method": "GET",
            "path": "/server_types",
            "query": [["page", page.to_string()], ["per_page", "50"]],
        },
        "response": {
            "status": 200,
            "headers": [],
            "body": serde_json::json!({
                "server_types": types,
                "meta": {"pagination": {"page": page, "per_page": 50, "next_page": next}},
            }).to_string(),
        },
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_follow_every_page_and_skip_deprecated_types() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let listing: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/server_types", emu.hetzner_url().unwrap()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut types = listing["server_types"].as_array().unwrap().clone();
    assert!(types.len() >= 4);
    // The second page holds one deprecated type and one type with a deprecated location.
    let second: Vec<serde_json::Value> = types.split_off(types.len() - 2);
    let mut deprecated = second[0].clone();
    deprecated["deprecated"] = true.into();
    deprecated["deprecation"] = serde_json::json!({
        "announced": "2026-01-01T00:00:00Z",
        "unavailable_after": "2026-04-01T00:00:00Z",
    });
    let mut partly = second[1].clone();
    let places = partly["locations"].as_array_mut().unwrap();
    assert!(places.len() >= 2);
    places[0]["deprecation"] = serde_json::json!({
        "announced": "2026-01-01T00:00:00Z",
        "unavailable_after": "2026-04-01T00:00:00Z",
    });
    let dropped_place = places[0]["name"].as_str().unwrap().to_string();
    let kept_places = places.len() - 1;
    let recording = format!(
        "{}\n{}\n",
        page(1, Some(2), &types),
        page(2, None, &[deprecated.clone(), partly.clone()])
    );
    let dir = tempfile::tempdir().unwrap();
    let replay = Arc::new(ReplayExchange::from_ndjson(&recording).unwrap());
    let offers = replaying(&dir, replay.clone())
        .offers(&OfferQuery::default())
        .await
        .unwrap();
    assert_eq!(replay.unused(), 0, "the second page was not read");
    let first_page_places: usize = types
        .iter()
        .map(|t| t["locations"].as_array().unwrap().len())
        .sum();
    assert_eq!(offers.len(), first_page_places + kept_places);
    let deprecated_name = deprecated["name"].as_str().unwrap();
    assert!(offers.iter().all(|o| o.plan != deprecated_name));
    let partly_name = partly["name"].as_str().unwrap();
    assert_eq!(
        offers.iter().filter(|o| o.plan == partly_name).count(),
        kept_places
    );
    assert!(
        !offers
            .iter()
            .any(|o| o.plan == partly_name && o.location == dropped_place)
    );
    assert!(
        offers
            .iter()
            .all(|o| o.hourly.currency == orc_common::Currency::EUR)
    );

    let gpu = replaying(&dir, Arc::new(ReplayExchange::from_ndjson("").unwrap()))
        .offers(&OfferQuery {
            gpu: true,
            ..OfferQuery::default()
        })
        .await
        .unwrap();
    assert!(gpu.is_empty());
}
