//! Reconfiguring the partner loses nothing: `orc up` runs two partner replicas while tenant
//! pools in three classes resize up and down and quotes keep coming, and the partner pool is
//! reconfigured three times (a key rotation, a region map edit that adds a site, a cap
//! change). Sampled every 100 ms, a live replica serves the partner's resource throughout;
//! every quote is an offer or, for at most 30 s after a roll, "counting capacity"; every node
//! asked for runs, no cloud holds two instances of one node, and no node's price changes.
//!
//! The roll figures (how long each roll took, the longest time no replica served) are printed;
//! `cargo bench -p orc-cli --bench roll` measures them the same way (docs/zone/apps.md).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};
use support::roll::{Api, RollReport, reconfigure_and_wait, sample_serving};
use support::up::{MINUTE, Up};

const POOLS: [(&str, &str); 3] = [
    ("roll-eu", "eu-central"),
    ("roll-us", "us-east"),
    ("roll-nordic", "eu-nordic"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_partner_rolls_three_times_under_load_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(&dir.path().join("up"));
    let api = Api::of(&up);
    api.wait_until_priced().await;
    for (pool, class) in POOLS {
        api.create_pool(pool, class, 1).await;
    }

    let stop = tokio::sync::watch::channel(false);
    let sampler = tokio::spawn(sample_serving(api.clone(), stop.1.clone()));
    let churn = tokio::spawn(churn(api.clone(), stop.1.clone()));
    let quotes = tokio::spawn(quote_continuously(api.clone(), stop.1.clone()));

    // Let the load run before the first roll, then roll three times.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut rolls: Vec<RollReport> = Vec::new();
    let rotated = json!({
        "hetzner_api_token": support::roll::ROTATED_TOKEN,
        "vultr_api_key": support::roll::ROTATED_TOKEN,
    });
    rolls.push(reconfigure_and_wait(&api, "key rotation", |_| {}, Some(rotated)).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    rolls.push(
        reconfigure_and_wait(
            &api,
            "region map edit",
            |params| {
                params.insert("regions".into(), support::roll::regions_with_a_new_site());
            },
            None,
        )
        .await,
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    rolls.push(
        reconfigure_and_wait(
            &api,
            "cap change",
            |params| {
                params.insert("hetzner_max_nodes".into(), "40".into());
            },
            None,
        )
        .await,
    );
    tokio::time::sleep(Duration::from_secs(35)).await;
    stop.0.send_replace(true);
    let churned = churn.await.unwrap();
    let quoted = quotes.await.unwrap();
    let serving = sampler.await.unwrap();

    // Every roll ends with two replicas, both started after the reconfigure.
    for roll in &rolls {
        eprintln!(
            "roll ({}): {:.1} s for 2 replicas",
            roll.what,
            roll.took.as_secs_f64()
        );
    }
    eprintln!(
        "serving sampled {} times every 100 ms; longest gap without a serving replica: {:?}",
        serving.samples, serving.longest_gap
    );
    assert!(serving.samples > 300, "{serving:?}");
    assert_eq!(
        serving.gaps, 0,
        "a sample found no live replica serving: {serving:?}"
    );

    // Quotes: offers, or "counting capacity" shortly after a roll, nothing else.
    assert!(quoted.len() > 50, "too few quotes: {}", quoted.len());
    let mut counting = 0;
    for q in &quoted {
        match q.outcome.as_str() {
            "offer" => {}
            _ if q.refusal.as_deref() == Some("counting") => {
                counting += 1;
                let after_roll = rolls
                    .iter()
                    .any(|r| q.at >= r.started && q.at <= r.finished + Duration::from_secs(30));
                assert!(after_roll, "counting capacity far from any roll: {q:?}");
            }
            _ => panic!(
                "a quote neither offered nor counted ({:?} at {:?}): {}",
                q.outcome, q.at, q.words
            ),
        }
    }
    eprintln!("{} quotes, {counting} counting capacity", quoted.len());

    // Settle: every pool at 2 nodes, every node running.
    for (pool, _) in POOLS {
        api.resize(pool, 2).await;
    }
    for (pool, _) in POOLS {
        api.wait_running(pool, 2, 5 * MINUTE).await;
    }
    // No node was lost or given up on, and none changed price.
    let mut live_ids = BTreeSet::new();
    for (pool, _) in POOLS {
        for node in api.nodes(pool, true).await {
            let state = node["state"].as_str().unwrap();
            assert!(
                !matches!(state, "lost" | "parked"),
                "{pool}: a node was lost or parked: {node:#}"
            );
            if state == "running" {
                live_ids.insert(node["id"].as_str().unwrap().to_string());
                let id = node["id"].as_str().unwrap();
                if let Some(first) = churned.prices.get(id) {
                    assert_eq!(&node["price"], first, "node {id} was repriced");
                }
            }
        }
    }
    assert!(churned.resizes >= 10, "the pools hardly moved: {churned:?}");

    // The clouds hold exactly one instance per live node.
    let instances = api.cloud_instances(&up).await;
    let nodes: Vec<&String> = instances
        .iter()
        .filter(|(_, role)| role == "node")
        .map(|(node, _)| node)
        .collect();
    let unique: BTreeSet<&String> = nodes.iter().copied().collect();
    assert_eq!(
        unique.len(),
        nodes.len(),
        "a node has two instances: {nodes:?}"
    );
    let held: BTreeSet<String> = unique.into_iter().cloned().collect();
    assert_eq!(
        held, live_ids,
        "the clouds hold other nodes than the zone runs"
    );

    for (pool, _) in POOLS {
        api.delete_pool(pool).await;
    }
    up.stop();
}

/// What the churn saw.
#[derive(Debug, Default)]
struct Churned {
    resizes: usize,
    /// The price each node had when first seen running.
    prices: BTreeMap<String, Value>,
}

/// Resizes the pools through a fixed sequence until `stop`, and notes each running node's
/// first price.
async fn churn(api: Api, stop: tokio::sync::watch::Receiver<bool>) -> Churned {
    let sizes = [2u32, 3, 1, 0, 2, 1, 3];
    let mut churned = Churned::default();
    let mut step = 0;
    while !*stop.borrow() {
        for (i, (pool, _)) in POOLS.iter().enumerate() {
            api.resize(pool, sizes[(step + i) % sizes.len()]).await;
            churned.resizes += 1;
            for node in api.nodes(pool, false).await {
                if node["state"] == "running" {
                    churned
                        .prices
                        .entry(node["id"].as_str().unwrap().to_string())
                        .or_insert_with(|| node["price"].clone());
                }
            }
        }
        step += 1;
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    churned
}

/// One quote's answer and when it came.
#[derive(Debug)]
struct Quoted {
    at: std::time::Instant,
    outcome: String,
    refusal: Option<String>,
    words: String,
}

async fn quote_continuously(api: Api, stop: tokio::sync::watch::Receiver<bool>) -> Vec<Quoted> {
    let mut out = Vec::new();
    while !*stop.borrow() {
        for (_, class) in POOLS {
            let answer = api.quote(class).await;
            out.push(Quoted {
                at: std::time::Instant::now(),
                outcome: answer["outcome"].as_str().unwrap_or("").to_string(),
                refusal: answer["refusal"].as_str().map(str::to_string),
                words: answer["words"].as_str().unwrap_or("").to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    out
}
