//! What the benches share: a zone's fake provider with a running pool, process usage from
//! `/proc`, percentiles.

use std::sync::Arc;
use std::time::Duration;

use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::{ProviderRunner, RunnerOptions, ZoneCredentials};
use orc_zone::model::{Node, NodeState, PoolId, Timestamp};
use orc_zone::zone::Zone;

/// Clock ticks per second of `/proc/*/stat` times (`_SC_CLK_TCK`, 100 on Linux).
const TICKS: f64 = 100.0;

/// User + system CPU seconds in a `/proc/…/stat` line.
fn cpu_of_stat(stat: &str) -> f64 {
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name and state.
    (ticks(11) + ticks(12)) / TICKS
}

/// (user + system CPU seconds, resident KiB) of process `pid` (`self` for this one).
pub fn usage(pid: &str) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    (cpu_of_stat(&stat), rss)
}

/// CPU seconds of this process's threads, summed by thread name (`/proc/self/task`).
#[allow(
    dead_code,
    reason = "the mesh bench uses it, the agents bench does not"
)]
pub fn thread_usage() -> std::collections::BTreeMap<String, f64> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let name = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map_or("", |(n, _)| n)
            .to_string();
        *by_name.entry(name).or_insert(0.0) += cpu_of_stat(&stat);
    }
    by_name
}

/// The `p` quantile of `sorted`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Connects a fake provider to `zone` and runs pool `sys/sys/bench` of `count` nodes on it;
/// returns once every node runs.
#[allow(
    dead_code,
    reason = "the agents bench uses it, the mesh bench does not"
)]
pub async fn running_pool(zone: &Zone, count: usize) -> (PoolId, Vec<Node>) {
    let provider = connect(zone, FakeProvider::new(FakeCloud::new())).await;
    let pool = zone
        .store()
        .create_pool(
            &orc_zone::model::NewPool {
                project_id: orc_zone::model::sys_project_id(),
                name: "bench".parse().unwrap(),
                size: u32::try_from(count).unwrap(),
                spec: bench_spec(provider.id.clone()),
            },
            Timestamp::now(),
        )
        .await
        .expect("pool")
        .pool;
    zone.wake();
    loop {
        let nodes = zone
            .store()
            .list_nodes_by_pool(&pool.id, false)
            .await
            .unwrap();
        if nodes.len() == count && nodes.iter().all(|n| n.status.state == NodeState::Running) {
            return (pool.id, nodes);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The pools and gateways of [`running_sites`].
#[allow(
    dead_code,
    reason = "the mesh bench uses it, the agents bench does not"
)]
pub struct Sites {
    /// Each site's name, stable IPv4 and private prefix, as the provider reported them.
    pub sites: Vec<(String, std::net::Ipv4Addr, ipnet::Ipv4Net)>,
    /// The tenant pools, one per site, and every node of them, sorted by site.
    pub pools: Vec<PoolId>,
    pub nodes: Vec<Node>,
    /// Each site's gateway node, in the order of `sites`.
    pub gateways: Vec<Node>,
}

/// Connects a fake provider whose `sites` sites need gateways to `zone`, records the sites
/// (stable IPv4 198.18.0.x, prefix 10.100+x.0.0/24) as its inventory would, and runs one pool
/// of `sys/sys` per site with `count` nodes in all; returns once every node and every
/// site's gateway runs.
#[allow(
    dead_code,
    reason = "the mesh bench uses it, the agents bench does not"
)]
pub async fn running_sites(zone: &Zone, count: usize, sites: usize) -> Sites {
    use orc_proto::{ClassId, SiteName};
    let names: Vec<String> = (0..sites).map(|i| format!("site-{i}")).collect();
    let config = orc_provider_sdk::fake::FakeConfig {
        classes: names
            .iter()
            .map(|name| {
                (
                    ClassId::new(name.as_str()).unwrap(),
                    name.clone(),
                    vec![SiteName::new(name.as_str()).unwrap()],
                )
            })
            .collect(),
        site_gateways: true,
        ..Default::default()
    };
    let provider = connect(zone, FakeProvider::with_config(FakeCloud::new(), config)).await;
    // Only a zone-scoped provider of org sys runs site gateways.
    let provider = zone
        .store()
        .set_provider_scope(
            &provider.id,
            orc_zone::model::ProviderScope::Zone,
            Timestamp::now(),
        )
        .await
        .expect("the provider is widened to the zone");
    let reported: Vec<(String, std::net::Ipv4Addr, ipnet::Ipv4Net)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let i = u8::try_from(i).expect("at most 100 sites");
            (
                name.clone(),
                std::net::Ipv4Addr::new(198, 18, 0, 1 + i),
                ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(10, 100 + i, 0, 0), 24).unwrap(),
            )
        })
        .collect();
    let rows: Vec<orc_zone::store::ProviderSite> = reported
        .iter()
        .map(|(site, stable, prefix)| orc_zone::store::ProviderSite {
            site: site.clone(),
            public_ipv4: Some(stable.to_string()),
            private_prefix: Some(prefix.to_string()),
            updated_at: Timestamp::now(),
        })
        .collect();
    zone.store()
        .replace_provider_sites(&provider.id, &rows)
        .await
        .expect("the sites are recorded");
    let mut pools = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let size = count / sites + usize::from(i < count % sites);
        let mut spec = bench_spec(provider.id.clone());
        spec.region_class = name.parse().unwrap();
        let pool = zone
            .store()
            .create_pool(
                &orc_zone::model::NewPool {
                    project_id: orc_zone::model::sys_project_id(),
                    name: format!("bench-{i}").parse().unwrap(),
                    size: u32::try_from(size).unwrap(),
                    spec,
                },
                Timestamp::now(),
            )
            .await
            .expect("pool")
            .pool;
        pools.push(pool.id);
    }
    zone.wake();
    let sys = orc_zone::model::sys_project_id();
    loop {
        let mut nodes = Vec::new();
        for pool in &pools {
            nodes.extend(zone.store().list_nodes_by_pool(pool, false).await.unwrap());
        }
        let sys_pools = zone.store().list_pools(&sys).await.unwrap();
        let mut gateways = Vec::new();
        for name in &names {
            let pool = sys_pools.iter().find(|p| {
                orc_zone_model::gateway::gateway_site(p.name.as_str(), &provider.id)
                    == Some(name.as_str())
            });
            if let Some(pool) = pool {
                gateways.extend(
                    zone.store()
                        .list_nodes_by_pool(&pool.id, false)
                        .await
                        .unwrap(),
                );
            }
        }
        let running = |nodes: &[Node]| nodes.iter().all(|n| n.status.state == NodeState::Running);
        if nodes.len() == count && gateways.len() == sites && running(&nodes) && running(&gateways)
        {
            return Sites {
                sites: reported,
                pools,
                nodes,
                gateways,
            };
        }
        zone.wake();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Connects `provider` to `zone` through a runner; its row once a replica serves it.
async fn connect(zone: &Zone, provider: FakeProvider) -> orc_zone::model::Provider {
    let options = RunnerOptions {
        inventory_interval: None,
        credentials: Some(ZoneCredentials::new(zone.admin_token().expose(), "sys/sys").unwrap()),
        zone_ca: zone
            .ca_pem()
            .and_then(|pem| orc_tls::PinnedCa::from_pem(pem, "the bench zone")),
        ..RunnerOptions::default()
    };
    let runner =
        ProviderRunner::new(&zone.grpc_url(), Arc::new(provider), options).expect("runner");
    tokio::spawn(runner.run_until(std::future::pending()));
    loop {
        if let Ok(p) = zone.store().provider_by_resource("urn:orc:fake:test").await
            && !zone.hub().replicas_of(&p).is_empty()
        {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn bench_spec(provider_id: orc_zone::model::ProviderId) -> orc_zone::model::PoolSpec {
    orc_zone::model::PoolSpec {
        provider_id,
        shape: orc_common::Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: orc_common::Architecture::X86_64,
            disks_gib: Vec::new(),
        },
        region_class: "eu-central".parse().unwrap(),
        os: "debian-12".parse().unwrap(),
        public: false,
        endpoints: Vec::new(),
        app: None,
        placement: Default::default(),
        ssh_keys: Vec::new(),
    }
}
