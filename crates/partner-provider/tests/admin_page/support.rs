//! A page under test: the zone's keys published over https by a small server whose
//! certificate a test CA signs, a provider in known state on a fixed clock, and its admin page
//! served in-process on 127.0.0.1:0.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use orc_access::{Assertion, JWKS_PATH, KeyRing, SigningKey};
use orc_common::ManualClock;
use orc_common::ReplicaRole;
use orc_partner::ids::Timestamp;
use orc_partner::params::{Config, MapSource, load_config};
use orc_partner_provider::admin::{Gate, server};
use orc_partner_provider::testing::{TestState, WorldSize, seed_catalogs, world};
use orc_partner_provider::{PartnerOptions, PartnerProvider, ReplicaInfo};
use orc_tls::{PinnedCa, ZoneCa};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::net::TcpListener;

pub const HETZNER_KEY: &str = "hz-SECRET-7c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4c";
pub const VULTR_KEY: &str = "VU-SECRET-Q2W4E6R8T0Y1U3I5O7P9";
/// 2027-01-15 08:00:00 UTC.
pub const START: i64 = 1_800_000_000;

/// How the page under test is set up.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub access_keys: bool,
    pub role: Option<ReplicaRole>,
    pub retire_vultr: bool,
    pub size: WorldSize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            access_keys: true,
            role: Some(ReplicaRole::Serving),
            retire_vultr: false,
            size: WorldSize {
                sites: 5,
                nodes: 12,
                pools: 4,
                troubles: true,
            },
        }
    }
}

/// The zone's published keys: a ring behind an https server, counting fetches.
pub struct Zone {
    pub ring: Mutex<KeyRing>,
    jwks: Arc<Mutex<String>>,
    pub fetches: Arc<AtomicUsize>,
    pub port: u16,
    pub ca: ZoneCa,
}

impl Zone {
    pub async fn start() -> Zone {
        let ca = ZoneCa::generate().unwrap();
        let identity = ca
            .issue_server(&["127.0.0.1".to_string()], Duration::from_secs(3600))
            .unwrap();
        let tls = orc_tls::server_config(
            orc_tls::RenewingCert::new(identity).unwrap(),
            orc_tls::ALPN_HTTP,
        );
        let ring = KeyRing::new(SigningKey::generate().unwrap());
        let jwks = Arc::new(Mutex::new(ring.jwks().to_string()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (jwks.clone(), fetches.clone());
        let app = Router::new().route(
            JWKS_PATH,
            get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                let body = served.lock().unwrap().clone();
                async move { ([("content-type", "application/json")], body) }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let options = orc_tls::ServeOptions {
            what: "test zone keys",
            tls: Some(tls),
            ..orc_tls::ServeOptions::default()
        };
        tokio::spawn(orc_tls::serve(
            listener,
            app,
            options,
            std::future::pending(),
        ));
        Zone {
            ring: Mutex::new(ring),
            jwks,
            fetches,
            port,
            ca,
        }
    }

    pub fn issuer(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn keys_url(&self) -> String {
        format!("{}{JWKS_PATH}", self.issuer())
    }

    /// Publishes the ring as it is now.
    pub fn publish(&self) {
        *self.jwks.lock().unwrap() = self.ring.lock().unwrap().jwks().to_string();
    }

    pub fn pinned(&self) -> PinnedCa {
        PinnedCa::from_pem(self.ca.cert_pem(), "test zone CA").unwrap()
    }
}

/// The params of the provider under test.
pub fn source(zone: &Zone, setup: &Setup) -> MapSource {
    let mut source = MapSource::new()
        .param("partner_id", "zone-1")
        .param("hetzner_api_token", HETZNER_KEY)
        .param("hetzner_owner_tag", "orc-partner-hetzner")
        .param("hetzner_exchange_rate", "1.08")
        .param("hetzner_max_nodes", "60")
        .param("vultr_api_key", VULTR_KEY)
        .param("vultr_owner_tag", "orc-partner-vultr")
        .param("vultr_max_monthly_spend", "400")
        .param("vultr_pool_ipv4_limit", "3")
        .param("ptr_domain", "cloud.example.com")
        .var("ORC_HETZNER_ENDPOINT", "http://127.0.0.1:9/v1")
        .var("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9");
    if setup.access_keys {
        source = source.param("access_keys_url", &zone.keys_url());
    }
    if setup.retire_vultr {
        source = source.param("vultr_enabled", "false");
    }
    source
}

/// A page under test.
pub struct Page {
    pub zone: Zone,
    pub provider: PartnerProvider,
    pub clock: Arc<ManualClock>,
    pub base: String,
    pub http: reqwest::Client,
}

impl Page {
    pub async fn start(setup: Setup) -> Page {
        let zone = Zone::start().await;
        let config: Config = load_config(&source(&zone, &setup)).unwrap();
        let clock = Arc::new(ManualClock::new(Timestamp::from_unix_secs(START)));
        let provider = PartnerProvider::new(
            config.clone(),
            PartnerOptions {
                clock: clock.clone(),
                ..PartnerOptions::default()
            },
            ReplicaInfo {
                host: "partner-a".into(),
                pid: 4242,
                slot: 0,
            },
        )
        .unwrap();
        let at = Timestamp::from_unix_secs(START);
        let world = world(&config, at, &setup.size);
        provider.install_for_tests(TestState {
            role: setup.role,
            catalogs: seed_catalogs(at.plus_millis(-240_000)),
            quotes: world.quotes,
            seen: world.seen,
            unlisted: Default::default(),
        });
        let gate = Arc::new(Gate::from_config(&config, Some(&zone.pinned())).unwrap());
        gate.load_keys(now_secs(&clock)).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(server::serve(
            listener,
            provider.admin_view(),
            gate,
            std::future::pending(),
        ));
        Page {
            zone,
            provider,
            clock,
            base,
            http: reqwest::Client::new(),
        }
    }

    pub fn now_secs(&self) -> u64 {
        now_secs(&self.clock)
    }

    /// Valid claims for the page at its clock's time.
    pub fn claims(&self) -> Assertion {
        let now = self.now_secs();
        Assertion {
            iss: self.zone.issuer(),
            sub: "user:ada".into(),
            name: "Ada".into(),
            org: "sys".into(),
            aud: "sys/partner/admin".into(),
            iat: now - 10,
            exp: now + 290,
            jti: format!("j-{now}"),
        }
    }

    /// A valid assertion, signed by the ring's current key.
    pub fn token(&self) -> String {
        self.zone.ring.lock().unwrap().sign(&self.claims()).unwrap()
    }

    pub fn with_token(&self) -> HeaderMap {
        orc_access::testing::headers(&[&self.token()])
    }

    /// GET `path` (relative to the page's root) with `headers`.
    pub async fn get(&self, path: &str, headers: HeaderMap) -> (StatusCode, String) {
        let answer = self
            .http
            .get(format!("{}{path}", self.base))
            .headers(headers)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        (status, answer.text().await.unwrap())
    }

    /// GET `path` with a valid assertion; the body of a 200.
    pub async fn view(&self, path: &str) -> String {
        let (status, body) = self.get(path, self.with_token()).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }

    /// POST `form` to `path` with a valid assertion.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let answer = self
            .http
            .post(format!("{}{path}", self.base))
            .headers(self.with_token())
            .form(form)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        (status, answer.text().await.unwrap())
    }

    /// The first event of the live stream.
    pub async fn first_event(&self, headers: HeaderMap) -> (StatusCode, String) {
        let mut answer = self
            .http
            .get(format!("{}events", self.base))
            .headers(headers)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let chunk = tokio::time::timeout(Duration::from_secs(10), answer.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&chunk).into_owned())
    }
}

fn now_secs(clock: &ManualClock) -> u64 {
    use orc_common::Clock as _;
    u64::try_from(clock.now().millis() / 1000).unwrap()
}

/// Every view's path with a query or form that exercises it.
pub const VIEW_PATHS: [&str; 7] = [
    "",
    "config",
    "children",
    "quote",
    "quote?class=eu-central&cpu=2&mem=4&arch=x86_64&os=ubuntu-24.04&site=&disks=20",
    "addresses",
    "validate",
];
