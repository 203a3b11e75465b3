//! How long the web console takes to answer each page, in a project with 20 pools and 200
//! nodes (19 pools of 5 nodes and one of 105).
//!
//! Two figures per page:
//! - `served`: the whole answer over https through the zone's own edge on loopback, one
//!   request at a time on a kept-alive connection, as a member of the project with an API
//!   token: identifying the person, the API requests the page makes in process (each with
//!   its store reads and access checks), rendering and TLS;
//! - `render`: the pure view alone, from fixed view models of the same size
//!   (`orc_testkit::console_sample`).
//!
//! `ORC_BENCH_CONSOLE_REQUESTS` (default 200) timed requests per page after 20 to warm up;
//! p50, p95 and p99 for each. The store is SQLite in a temp dir, as `orc up` runs it.
//!
//! `cargo bench -p orc-zone --bench console`.

use std::time::{Duration, Instant};

use orc_testkit::console_sample as sample;
use orc_zone::model::{
    Name, NewPool, NewProvider, PoolSpec, PricingStrategy, ProviderScope, Role, Timestamp,
};
use orc_zone::zone::{Zone, ZoneConfig};

const DOMAIN: &str = "orc.localhost";

fn name(s: &str) -> Name {
    s.parse().expect("a valid name")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn line(page: &str, how: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{page:<14} {how:<7} p50 {:>9.3} ms   p95 {:>9.3} ms   p99 {:>9.3} ms",
        percentile(&times, 0.50).as_secs_f64() * 1e3,
        percentile(&times, 0.95).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
    );
}

fn main() {
    let count: usize = std::env::var("ORC_BENCH_CONSOLE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);

    // The pure views, from models of the same size, each built once.
    {
        use orc_web::console::model::Section;
        use orc_web::console::views;
        let c = sample::current("member");
        let f = |s: Section| sample::frame("mia", false, s, &c);
        let pools = sample::pools_page(20, 10);
        let pool = sample::pool_page(200);
        let wizard = sample::wizard_offer();
        let providers = sample::providers_page();
        let usage = sample::usage_page(200);
        let tokens = sample::tokens_page();
        let node = sample::node_page();
        let mesh = sample::mesh_page();
        type Render<'a> = Box<dyn Fn() -> String + 'a>;
        let renders: Vec<(&str, Render)> = vec![
            (
                "pools",
                Box::new(|| views::pools(&f(Section::Pools), &c, &pools)),
            ),
            (
                "pool",
                Box::new(|| views::pool(&f(Section::Pools), &c, &pool)),
            ),
            (
                "request",
                Box::new(|| views::wizard(&f(Section::Request), &c, &wizard)),
            ),
            (
                "providers",
                Box::new(|| views::providers(&f(Section::Providers), &c, &providers)),
            ),
            (
                "usage",
                Box::new(|| views::usage(&f(Section::Usage), &c, &usage)),
            ),
            (
                "tokens",
                Box::new(|| views::tokens(&f(Section::Tokens), &tokens)),
            ),
            (
                "node",
                Box::new(|| views::node(&f(Section::Pools), &c, &node)),
            ),
            (
                "mesh",
                Box::new(|| views::mesh(&f(Section::Mesh), &c, &mesh)),
            ),
        ];
        for (page, render) in renders {
            let mut times = Vec::with_capacity(count);
            for i in 0..count + 20 {
                let started = Instant::now();
                let html = render();
                if i >= 20 {
                    times.push(started.elapsed());
                }
                assert!(!html.is_empty());
            }
            line(page, "render", times);
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = ZoneConfig::ephemeral(dir.path().join("zone"));
        let zone = Zone::start(config).await.expect("zone");
        let store = zone.store().clone();
        let now = Timestamp::now();
        let org = store.create_org(&name("acme"), now).await.unwrap();
        let project = store
            .create_project(&org.id, &name("web"), now)
            .await
            .unwrap();
        let user = store.create_user(&name("mia"), now).await.unwrap();
        store
            .add_membership(&user.id, &org.id, Some(&project.id), Role::Member, now)
            .await
            .unwrap();
        let (_, token) = store
            .create_token(&user.id, "bench", None, None, now)
            .await
            .unwrap();
        let provider = store
            .create_provider(
                &NewProvider {
                    project_id: project.id.clone(),
                    name: name("fake"),
                    resource_uri: "urn:orc:bench:fake".into(),
                    scope: ProviderScope::Project,
                    pricing: PricingStrategy::None,
                },
                now,
            )
            .await
            .unwrap();
        let mut pools = Vec::new();
        for i in 0..20u32 {
            let size = if i == 0 { 105 } else { 5 };
            let pool = store
                .create_pool(
                    &NewPool {
                        project_id: project.id.clone(),
                        name: name(&format!("pool{i:02}")),
                        size,
                        spec: PoolSpec {
                            provider_id: provider.id.clone(),
                            shape: orc_common::Shape {
                                vcpus: 2,
                                memory_gib: 4,
                                arch: Default::default(),
                                disks_gib: vec![],
                            },
                            region_class: "eu-central".parse().unwrap(),
                            os: "debian-12".parse().unwrap(),
                            public: false,
                            endpoints: vec![],
                            app: None,
                            placement: Default::default(),
                            ssh_keys: vec![],
                        },
                    },
                    now,
                )
                .await
                .unwrap()
                .pool;
            pools.push(pool);
        }
        // The reconciler gives every pool its nodes.
        let started = Instant::now();
        loop {
            let mut nodes = 0;
            for pool in &pools {
                nodes += store
                    .list_nodes_by_pool(&pool.id, false)
                    .await
                    .unwrap()
                    .len();
            }
            if nodes >= 200 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{nodes} nodes"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let first_node = store
            .list_nodes_by_pool(&pools[0].id, false)
            .await
            .unwrap()
            .remove(0)
            .id;
        let edge = zone.edge_addr().expect("an edge");
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(zone.ca_pem().unwrap().as_bytes()).unwrap(),
            )
            .resolve(DOMAIN, edge)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let base = format!("https://{DOMAIN}:{}", edge.port());
        let web = "/orgs/acme/projects/web";
        let pages = [
            ("projects", "/orgs".to_string()),
            ("pools", format!("{web}/pools")),
            ("pool", format!("{web}/pools/pool00")),
            ("delete", format!("{web}/pools/pool00/delete")),
            ("request", format!("{web}/request?provider=fake")),
            ("providers", format!("{web}/providers")),
            ("usage", format!("{web}/usage")),
            ("tokens", "/tokens".to_string()),
            ("node", format!("{web}/pools/pool00/nodes/{first_node}")),
            ("mesh", format!("{web}/mesh")),
        ];
        for (page, path) in pages {
            let url = format!("{base}{path}");
            let mut times = Vec::with_capacity(count);
            for i in 0..count + 20 {
                let started = Instant::now();
                let answer = client
                    .get(&url)
                    .bearer_auth(token.expose())
                    .header("accept", "text/html")
                    .send()
                    .await
                    .expect("answer");
                assert_eq!(answer.status(), 200, "{url}");
                answer.bytes().await.expect("body");
                if i >= 20 {
                    times.push(started.elapsed());
                }
            }
            line(page, "served", times);
        }
        zone.shutdown().await;
    });
}
