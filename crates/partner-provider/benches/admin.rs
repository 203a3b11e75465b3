//! The admin page's views rendered over a populated replica: 8 open sites, 200 tenant nodes
//! with their gateways and 20 public pools with their addresses, on the seed catalogs.
//!
//! Each view is timed as a request costs it after the gate: a snapshot of the replica's state
//! through `AdminView` and the HTML rendered from it (the Quote preview runs the quote, the
//! Validate view checks a region-map draft). After criterion's own report, the p50 and p95 of
//! each view over 400 timed renders are printed (figures in docs/partner/admin.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use orc_common::ManualClock;
use orc_common::ReplicaRole;
use orc_partner::admin::{forms, views};
use orc_partner::ids::Timestamp;
use orc_partner::maps::BUILTIN_REGIONS;
use orc_partner::params::{MapSource, load_config};
use orc_partner_provider::admin::AdminView;
use orc_partner_provider::testing::{TestState, WorldSize, seed_catalogs, world};
use orc_partner_provider::{PartnerOptions, PartnerProvider, ReplicaInfo};

const START: i64 = 1_800_000_000;

fn provider() -> PartnerProvider {
    let config = load_config(
        &MapSource::new()
            .param("partner_id", "bench")
            .param("hetzner_api_token", "bench-token")
            .param("hetzner_owner_tag", "orc-partner-hetzner")
            .param("hetzner_exchange_rate", "1.08")
            .param("hetzner_max_nodes", "500")
            .param("vultr_api_key", "bench-key")
            .param("vultr_owner_tag", "orc-partner-vultr")
            .param("vultr_pool_ipv4_limit", "20")
            .param(
                "access_keys_url",
                "https://orc.localhost:7443/.well-known/orc-access/jwks.json",
            )
            .var("ORC_HETZNER_ENDPOINT", "http://127.0.0.1:9/v1")
            .var("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9"),
    )
    .expect("bench params");
    let at = Timestamp::from_unix_secs(START);
    let provider = PartnerProvider::new(
        config.clone(),
        PartnerOptions {
            clock: Arc::new(ManualClock::new(at)),
            ..PartnerOptions::default()
        },
        ReplicaInfo {
            host: "bench".into(),
            pid: 1,
            slot: 0,
        },
    )
    .expect("bench provider");
    let world = world(
        &config,
        at,
        &WorldSize {
            sites: 8,
            nodes: 200,
            pools: 20,
            troubles: true,
        },
    );
    assert_eq!(
        world
            .seen
            .clouds
            .values()
            .map(|c| c.tenant_nodes())
            .sum::<usize>(),
        200
    );
    provider.install_for_tests(TestState {
        role: Some(ReplicaRole::Serving),
        catalogs: seed_catalogs(at),
        quotes: world.quotes,
        seen: world.seen,
        unlisted: Default::default(),
    });
    provider
}

type Render = fn(&AdminView) -> String;

fn views_under_test() -> Vec<(&'static str, Render)> {
    vec![
        // The copies every view starts from, rendered into nothing.
        ("snapshot only", |v| {
            v.snapshot().page().now.millis().to_string()
        }),
        ("overview", |v| views::overview(&v.snapshot().page())),
        ("config", |v| views::config(&v.snapshot().page())),
        ("children", |v| views::children(&v.snapshot().page())),
        ("quote preview", |v| {
            let snapshot = v.snapshot();
            let page = snapshot.page();
            let query: BTreeMap<String, String> = [
                ("class", "eu-central"),
                ("cpu", "2"),
                ("mem", "4"),
                ("os", "ubuntu-24.04"),
                ("disks", "20"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let (form, request) = forms::read_preview(&query, page.config, page.now);
            views::quote_preview(&page, &form, request.as_ref())
        }),
        ("pool addresses", |v| views::addresses(&v.snapshot().page())),
        ("validate", |v| {
            let snapshot = v.snapshot();
            let form = forms::read_validate(
                &[("regions".to_string(), BUILTIN_REGIONS.to_string())]
                    .into_iter()
                    .collect(),
            );
            views::validate(&snapshot.page(), &form)
        }),
    ]
}

fn bench_views(c: &mut Criterion) {
    let provider = provider();
    let view = provider.admin_view();
    let mut group = c.benchmark_group("admin_view");
    for (name, render) in views_under_test() {
        group.bench_function(name, |b| b.iter(|| std::hint::black_box(render(&view))));
    }
    group.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// p50 and p95 of each view over `runs` timed renders.
fn report_percentiles(runs: usize) {
    let provider = provider();
    let view = provider.admin_view();
    println!("admin page, 8 sites, 200 nodes, 20 pools: {runs} renders per view");
    println!("{:<16} {:>10} {:>10} {:>10}", "view", "p50", "p95", "bytes");
    for (name, render) in views_under_test() {
        let bytes = render(&view).len();
        let mut times: Vec<Duration> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(render(&view));
                start.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "{name:<16} {:>10.3?} {:>10.3?} {bytes:>10}",
            percentile(&times, 50.0),
            percentile(&times, 95.0)
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = bench_views
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; a test run of the bench target only checks it renders.
    if std::env::args().any(|a| a == "--bench") {
        report_percentiles(400);
    }
}
