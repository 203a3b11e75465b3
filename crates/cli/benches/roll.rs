//! How long a rolling reconfigure of the partner takes, and whether its resource is ever left
//! without a serving replica: `orc up` (two partner replicas, one tenant pool), then five
//! reconfigures one after another, each timed from the request until both replicas are new
//! processes attached to the zone, while a sampler asks every 100 ms who serves.
//!
//! `cargo bench -p orc-cli --bench roll` (about two minutes). The figures are in
//! docs/zone/apps.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use serde_json::json;
use support::roll::{Api, reconfigure_and_wait, sample_serving};
use support::up::Up;

const ROLLS: usize = 5;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let up = Up::start(&dir.path().join("up"));
    let api = Api::of(&up);
    api.wait_until_priced().await;
    api.create_pool("bench", "eu-central", 2).await;
    let stop = tokio::sync::watch::channel(false);
    let sampler = tokio::spawn(sample_serving(api.clone(), stop.1.clone()));
    let mut took = Vec::new();
    for i in 0..ROLLS {
        let cap = (40 + i).to_string();
        let roll = reconfigure_and_wait(
            &api,
            "cap change",
            move |params| {
                params.insert("vultr_max_nodes".into(), json!(cap));
            },
            None,
        )
        .await;
        took.push(roll.took);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    stop.0.send_replace(true);
    let serving = sampler.await.expect("the sampler");
    api.delete_pool("bench").await;
    up.stop();

    took.sort();
    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "roll of 2 replicas ({ROLLS} rolls): min {:.1} s, median {:.1} s, max {:.1} s",
        secs(took[0]),
        secs(took[ROLLS / 2]),
        secs(took[ROLLS - 1])
    );
    println!(
        "serving replica: {} samples every 100 ms, {} without one, longest gap {} ms",
        serving.samples,
        serving.gaps,
        serving.longest_gap.as_millis()
    );
}
