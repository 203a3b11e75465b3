//! What the access edge adds to a request.
//!
//! An app slot that answers `ok` at once, reached three ways over loopback, one request at
//! a time on a kept-alive connection, `ORC_BENCH_EDGE_REQUESTS` (default 2000) each after
//! 200 to warm up:
//! - `direct`: plain HTTP to the slot, as the edge reaches it;
//! - `session`: https through the edge with a session cookie (HTTP/2, as browsers speak);
//! - `bearer`: https through the edge with an API token;
//! - `cold`: `session` through a second edge whose clock jumps 3 s at every reading, so it
//!   keeps nothing and every request reads the session, the user, their roles and the
//!   org's pools from the store (what the first request of a page costs).
//!
//! Each line gives p50, p90 and p99 and, for the edge, what it adds to `direct` at p50.
//! The store is SQLite in a temp dir, as `orc up` runs it.
//!
//! `cargo bench -p orc-zone --bench edge`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orc_web::edge::{EdgeCerts, EdgeConfig, EdgeState, EndpointDirectory};
use orc_zone::model::{
    Endpoint, Name, NewPool, NewProvider, PoolId, PoolSpec, PricingStrategy, ProviderScope, Role,
    Timestamp,
};
use orc_zone::zone::{Zone, ZoneConfig};

const DOMAIN: &str = "orc.localhost";
const HOST: &str = "web--site.acme.orc.localhost";

struct OneSlot(PoolId, SocketAddr);

impl EndpointDirectory for OneSlot {
    fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)> {
        if *pool == self.0 {
            vec![(0, "www".to_string(), self.1)]
        } else {
            Vec::new()
        }
    }
}

fn name(s: &str) -> Name {
    s.parse().expect("a valid name")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn time_requests(
    client: &reqwest::Client,
    url: &str,
    auth: &dyn Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    count: usize,
) -> Vec<Duration> {
    for _ in 0..200 {
        let answer = auth(client.get(url)).send().await.expect("answer");
        assert_eq!(answer.status(), 200, "{url}");
        answer.bytes().await.expect("body");
    }
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let answer = auth(client.get(url)).send().await.expect("answer");
        assert_eq!(answer.status(), 200);
        answer.bytes().await.expect("body");
        times.push(started.elapsed());
    }
    times.sort();
    times
}

fn main() {
    let count: usize = std::env::var("ORC_BENCH_EDGE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ZoneConfig::ephemeral(dir.path().join("zone"));
        config.edge = None;
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
        let pool = store
            .create_pool(
                &NewPool {
                    project_id: project.id.clone(),
                    name: name("site"),
                    size: 0,
                    spec: PoolSpec {
                        provider_id: provider.id,
                        shape: orc_common::Shape {
                            vcpus: 1,
                            memory_gib: 1,
                            arch: Default::default(),
                            disks_gib: vec![],
                        },
                        region_class: "eu-central".parse().unwrap(),
                        os: "debian-12".parse().unwrap(),
                        public: false,
                        endpoints: vec![Endpoint {
                            name: "www".into(),
                            protocol: "http".into(),
                            port: 8080,
                        }],
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

        let app = axum::Router::new().fallback(|| async { "ok" });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let slot = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let serve_edge = |clock: Option<Arc<std::sync::atomic::AtomicI64>>| {
            let store = store.clone();
            let keys = zone.access_keys().clone();
            let directory = Arc::new(OneSlot(pool.id.clone(), slot));
            let issuer = zone.url();
            let ca = zone.ca().unwrap().clone();
            async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let edge = listener.local_addr().unwrap();
                let mut state = EdgeState::new(
                    Arc::new(orc_zone::web::StoreForEdge(store)),
                    keys,
                    directory,
                    issuer,
                    EdgeConfig {
                        addr: edge,
                        ..EdgeConfig::default()
                    },
                    edge.port(),
                );
                if let Some(jumps) = clock {
                    state = state.with_clock(move || {
                        let n = jumps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Timestamp::now().plus_millis(n * 3_000)
                    });
                }
                let certs = Arc::new(EdgeCerts::new(ca, DOMAIN, Duration::from_secs(3600)));
                let options = orc_tls::ServeOptions {
                    tls: Some(certs.server_config()),
                    ..orc_tls::ServeOptions::default()
                };
                tokio::spawn(orc_web::edge::serve(
                    listener,
                    state,
                    options,
                    std::future::pending(),
                ));
                edge
            }
        };
        let edge = serve_edge(None).await;
        let cold_edge = serve_edge(Some(Arc::default())).await;

        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(zone.ca_pem().unwrap().as_bytes()).unwrap(),
            )
            .resolve(HOST, edge)
            .resolve(DOMAIN, edge)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let signed_in = client
            .post(format!("https://{DOMAIN}:{}/sign-in", edge.port()))
            .form(&[("token", token.expose())])
            .send()
            .await
            .unwrap();
        let cookie = signed_in.headers()[reqwest::header::SET_COOKIE]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let through = format!("https://{HOST}:{}/", edge.port());
        let cold_client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(zone.ca_pem().unwrap().as_bytes()).unwrap(),
            )
            .resolve(HOST, cold_edge)
            .build()
            .unwrap();
        let cold_through = format!("https://{HOST}:{}/", cold_edge.port());

        let direct = time_requests(&client, &format!("http://{slot}/"), &|r| r, count).await;
        let session = time_requests(
            &client,
            &through,
            &|r| r.header(reqwest::header::COOKIE, cookie.clone()),
            count,
        )
        .await;
        let bearer =
            time_requests(&client, &through, &|r| r.bearer_auth(token.expose()), count).await;
        let cold = time_requests(
            &cold_client,
            &cold_through,
            &|r| r.header(reqwest::header::COOKIE, cookie.clone()),
            count,
        )
        .await;
        println!("{count} requests each, one at a time, kept-alive connection, 2 cores");
        let base = percentile(&direct, 0.5);
        for (label, times) in [
            ("direct", &direct),
            ("session", &session),
            ("bearer", &bearer),
            ("cold", &cold),
        ] {
            let p50 = percentile(times, 0.5);
            print!(
                "{label:<8} p50 {:>6.0} µs  p90 {:>6.0} µs  p99 {:>6.0} µs",
                p50.as_secs_f64() * 1e6,
                percentile(times, 0.9).as_secs_f64() * 1e6,
                percentile(times, 0.99).as_secs_f64() * 1e6,
            );
            if label != "direct" {
                print!(
                    "  adds {:>5.0} µs at p50",
                    p50.saturating_sub(base).as_secs_f64() * 1e6
                );
            }
            println!();
        }
        zone.shutdown().await;
    });
}
