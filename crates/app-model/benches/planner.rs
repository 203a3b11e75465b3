//! The planner at scale: 10,000 replicas (1,000 workloads of 10) on 1,000 nodes, every
//! workload constrained to one of four sites. Target: under 100 ms on one core.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use orc_app_model::planner::{PlanInput, PlanNode, PlanWorkload, VolumeHome, plan};

const GI: u64 = 1 << 30;

fn input(nodes: usize, workloads: usize, replicas: u32) -> PlanInput {
    let sites = ["eu-central-a", "eu-central-b", "us-east-a", "us-west-a"];
    PlanInput {
        nodes: (0..nodes)
            .map(|i| PlanNode {
                name: format!("n{i:05}"),
                labels: BTreeMap::from([(
                    "orc.site".to_string(),
                    sites[i % sites.len()].to_string(),
                )]),
                cpu_millis: 8000,
                memory_bytes: 32 * GI,
                cordoned: false,
            })
            .collect(),
        taken: BTreeMap::new(),
        ports_taken: BTreeMap::new(),
        workloads: (0..workloads)
            .map(|i| PlanWorkload {
                key: format!("app{}/w{i}", i / 10),
                replicas,
                cpu_millis: 100 + (i as u64 % 5) * 50,
                memory_bytes: GI / 8 * (1 + i as u64 % 4),
                constraints: BTreeMap::from([(
                    "orc.site".to_string(),
                    sites[i % sites.len()].to_string(),
                )]),
                volume: VolumeHome::NoVolume,
                current: Vec::new(),
                ports: Vec::new(),
            })
            .collect(),
    }
}

fn bench(c: &mut Criterion) {
    let fresh = input(1_000, 1_000, 10);
    let placed = plan(&fresh);
    assert!(placed.is_complete(), "the benchmark's input must fit");
    let mut group = c.benchmark_group("planner");
    group.sample_size(20);
    group.bench_function("10k replicas on 1k nodes, from nothing", |b| {
        b.iter(|| black_box(plan(black_box(&fresh))))
    });
    // The same, with every replica already placed: the plan a steady zone runs.
    let mut steady = fresh.clone();
    for workload in &mut steady.workloads {
        workload.current = placed.placements[&workload.key].clone();
    }
    group.bench_function("10k replicas on 1k nodes, all placed", |b| {
        b.iter(|| black_box(plan(black_box(&steady))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
