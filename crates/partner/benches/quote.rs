//! Benchmark of one quote over the full seed catalogs of both clouds and the built-in maps.
//! Target: at most 10 µs on one core (see docs/partner/quote.md for the measured figure).

use criterion::{Criterion, criterion_group, criterion_main};
use orc_common::{Architecture, Shape};
use orc_partner::catalog::Catalogs;
use orc_partner::ids::{ClassId, NodeId, OsId, PoolPath, Timestamp};
use orc_partner::params::{MapSource, load_config};
use orc_partner::quote::{Purpose, QuoteRequest, quote};
use orc_partner::{QuoteState, seed};

fn seed_text(file: &str) -> String {
    let path = format!("{}/../emu/seed/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn bench_quote(c: &mut Criterion) {
    let at = Timestamp::from_unix_secs(1_800_000_000);
    let mut catalogs = Catalogs::new();
    catalogs.replace(
        seed::vultr(&seed_text("vultr-catalog.json"), at)
            .unwrap()
            .snapshot,
    );
    catalogs.replace(
        seed::hetzner(&seed_text("hetzner-cloud-catalog.json"), at)
            .unwrap()
            .snapshot,
    );
    let config = load_config(
        &MapSource::new()
            .param("partner_id", "bench")
            .param("hetzner_api_token", "t")
            .param("hetzner_owner_tag", "orc-partner-hetzner")
            .param("hetzner_exchange_rate", "1.08")
            .param("vultr_api_key", "k")
            .param("vultr_owner_tag", "orc-partner-vultr"),
    )
    .unwrap();
    let state = QuoteState::new();
    let request = |class: &str, vcpus: u32, gib: u32, os: &str| QuoteRequest {
        node: NodeId::new("bench-node").unwrap(),
        pool: PoolPath::new("bench-pool").unwrap(),
        purpose: Purpose::Tenant,
        class: ClassId::new(class).unwrap(),
        shape: Shape {
            vcpus,
            memory_gib: gib,
            arch: Architecture::X86_64,
            disks_gib: vec![],
        },
        os: OsId::new(os).unwrap(),
        pinned_site: None,
        public: false,
        at,
    };
    let eu = request("eu-central", 2, 4, "ubuntu-24.04");
    assert!(quote(&eu, &config, &catalogs, &state).offer().is_some());
    c.bench_function("quote eu-central 2c/4g ubuntu", |b| {
        b.iter(|| quote(std::hint::black_box(&eu), &config, &catalogs, &state))
    });
    let us = request("us-east", 2, 4, "windows-2022");
    c.bench_function("quote us-east 2c/4g windows", |b| {
        b.iter(|| quote(std::hint::black_box(&us), &config, &catalogs, &state))
    });
    let mut gw = request("eu-central", 0, 0, "");
    gw.purpose = Purpose::Gateway;
    c.bench_function("quote eu-central gateway", |b| {
        b.iter(|| quote(std::hint::black_box(&gw), &config, &catalogs, &state))
    });
}

criterion_group!(benches, bench_quote);
criterion_main!(benches);
