//! The access edge over https, with two echo apps standing for a pool's two slots: who gets
//! in (members and owners, by session or bearer; not viewers, not strangers, not service
//! credentials), what the app sees (exactly one assertion, signed by the zone, none of the
//! client's credentials), sign-in and sign-out, sessions that expire, streams that stream,
//! and no secret in any answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::IntoResponse;
use orc_access::{KeySource, Verifier, VerifierOptions};
use orc_web::edge::{
    EdgeCerts, EdgeConfig, EdgeState, EndpointDirectory, PrivateReplica, PrivateServices,
    SessionPolicy,
};
use orc_zone::model::{PoolId, Timestamp};
use reqwest::StatusCode;
use reqwest::header::{self, HeaderValue};
use serde_json::{Value, json};

use crate::api_support::{TestZone, pool_body, tenancy};

const DOMAIN: &str = "orc.localhost";

/// What one echo app saw of one request.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// An app slot: answers every request with the headers it got, and `/events` with a stream
/// whose second event comes only after `release` is notified.
async fn echo_app(slot: u32, seen: Seen, release: Arc<tokio::sync::Notify>) -> SocketAddr {
    let app = axum::Router::new()
        .route(
            "/events",
            axum::routing::get(move || {
                let release = release.clone();
                async move {
                    let stream = async_stream(release);
                    (
                        [(header::CONTENT_TYPE, "text/event-stream")],
                        axum::body::Body::from_stream(stream),
                    )
                        .into_response()
                }
            }),
        )
        .fallback(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(headers.clone());
                let assertions: Vec<String> = headers
                    .get_all(orc_access::ASSERTION_HEADER)
                    .iter()
                    .map(|v| v.to_str().unwrap().to_string())
                    .collect();
                let mut response = axum::Json(json!({
                    "slot": slot,
                    "assertions": assertions,
                    "authorization": headers.get(header::AUTHORIZATION).map(|v| v.to_str().unwrap()),
                    "cookie": headers.get(header::COOKIE).map(|v| v.to_str().unwrap()),
                    "host": headers.get(header::HOST).map(|v| v.to_str().unwrap()),
                    "proto": headers.get("x-forwarded-proto").map(|v| v.to_str().unwrap()),
                    "for": headers.get("x-forwarded-for").map(|v| v.to_str().unwrap()),
                }))
                .into_response();
                // An app that tries to overwrite the person's session gets nowhere.
                response.headers_mut().append(
                    header::SET_COOKIE,
                    HeaderValue::from_static("__Secure-orc_session=planted; Domain=orc.localhost"),
                );
                response
                    .headers_mut()
                    .append(header::SET_COOKIE, HeaderValue::from_static("theme=dark"));
                response
            }
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Writes the first event at once and the second when `release` is notified.
fn async_stream(
    release: Arc<tokio::sync::Notify>,
) -> tokio_stream::wrappers::ReceiverStream<Result<axum::body::Bytes, std::io::Error>> {
    let (events, stream) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        let _ = events
            .send(Ok(axum::body::Bytes::from("data: one\n\n")))
            .await;
        release.notified().await;
        let _ = events
            .send(Ok(axum::body::Bytes::from("data: two\n\n")))
            .await;
    });
    tokio_stream::wrappers::ReceiverStream::new(stream)
}

/// Where one slot serves one endpoint: slot, endpoint, address.
type Listening = (u32, String, SocketAddr);

/// Slots by pool: what the apps supervisor tells the edge in a real zone.
#[derive(Default)]
struct Slots(Mutex<BTreeMap<PoolId, Vec<Listening>>>);

impl EndpointDirectory for Slots {
    fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)> {
        self.0
            .lock()
            .unwrap()
            .get(pool)
            .cloned()
            .unwrap_or_default()
    }
}

/// Private service `admin` of app `shop` in acme/web, with one ready replica (slot 0) on a
/// node, reached over a stream as the zone relays one through the node's agent: here a
/// loopback connection to an echo app.
struct Services {
    /// acme/web's id.
    web: orc_zone::model::ProjectId,
    replica: SocketAddr,
    /// The streams opened, by node and address.
    opened: Mutex<Vec<(String, String)>>,
}

#[async_trait::async_trait]
impl PrivateServices for Services {
    async fn private_services(
        &self,
        project: &orc_zone::model::ProjectId,
    ) -> Result<Vec<(String, String)>, String> {
        Ok(if *project == self.web {
            vec![("shop".into(), "admin".into())]
        } else {
            Vec::new()
        })
    }

    async fn replicas(
        &self,
        _: &orc_zone::model::ProjectId,
        app: &str,
        service: &str,
    ) -> Result<Vec<PrivateReplica>, String> {
        assert_eq!((app, service), ("shop", "admin"));
        Ok(vec![PrivateReplica {
            slot: 0,
            node: "n-000000000042".into(),
            address: "10.96.0.2:8080".into(),
        }])
    }

    async fn connect(&self, node: &str, address: &str) -> Result<tokio::io::DuplexStream, String> {
        self.opened
            .lock()
            .unwrap()
            .push((node.to_string(), address.to_string()));
        let mut upstream = tokio::net::TcpStream::connect(self.replica)
            .await
            .map_err(|e| e.to_string())?;
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let _ = tokio::io::copy_bidirectional(&mut theirs, &mut upstream).await;
        });
        Ok(ours)
    }
}

struct Setup {
    z: TestZone,
    services: Arc<Services>,
    /// What the private service's replica saw.
    service_seen: Seen,
    edge: SocketAddr,
    port: u16,
    clock: Arc<AtomicI64>,
    seen: Seen,
    release: Arc<tokio::sync::Notify>,
    mia: String,
    vic: String,
    stan: String,
    olivia: String,
    /// Every answer body the test read, to scan for secrets at the end.
    bodies: Mutex<Vec<String>>,
}

impl Setup {
    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }

    /// A browser-like client: trusts the zone's CA, resolves every name it is given to the
    /// edge, never follows redirects.
    fn client(&self, hosts: &[&str]) -> reqwest::Client {
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(self.z.zone.ca_pem().unwrap().as_bytes()).unwrap(),
            )
            .redirect(reqwest::redirect::Policy::none());
        for host in hosts.iter().chain([&DOMAIN]) {
            builder = builder.resolve(host, self.edge);
        }
        builder.build().unwrap()
    }

    async fn read(&self, response: reqwest::Response) -> (StatusCode, HeaderMap, String) {
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap();
        self.bodies.lock().unwrap().push(body.clone());
        (status, headers, body)
    }

    /// Signs in with `form` and returns the session cookie's value and the redirect.
    async fn sign_in(&self, form: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        let client = self.client(&[]);
        let answer = client
            .post(self.url(DOMAIN, "/sign-in"))
            .header(header::ORIGIN, self.url(DOMAIN, ""))
            .form(form)
            .send()
            .await
            .unwrap();
        self.read(answer).await
    }

    async fn session_of(&self, token: &str) -> String {
        let (status, headers, body) = self.sign_in(&[("token", token)]).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
        cookie_value(&headers).expect("a session cookie")
    }
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    let cookie = headers.get(header::SET_COOKIE)?.to_str().unwrap();
    let value = cookie
        .strip_prefix("__Secure-orc_session=")?
        .split(';')
        .next()?;
    (!value.is_empty()).then(|| value.to_string())
}

async fn setup(policy: SessionPolicy) -> Setup {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let seen: Seen = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let slots = Arc::new(Slots::default());
    for (project, pool, endpoints) in [
        ("web", "site", vec![("www", "http"), ("ssh", "tcp")]),
        ("data", "db", vec![("console", "http")]),
        ("web", "api", vec![("public", "http"), ("admin", "http")]),
    ] {
        let mut body = pool_body(pool, 2);
        body["endpoints"] = json!(
            endpoints
                .iter()
                .map(|(name, protocol)| json!({ "name": name, "protocol": protocol, "port": 8080 }))
                .collect::<Vec<_>>()
        );
        if project == "data" {
            z.provider("acme", "data", "store").await;
            body["provider"] = json!("store");
        }
        let created = z
            .post(
                &format!("/api/orgs/acme/projects/{project}/pools"),
                &t.olivia,
                body,
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let id: PoolId = created.body["id"].as_str().unwrap().parse().unwrap();
        let mut listening = Vec::new();
        for slot in 0..2 {
            let addr = echo_app(slot, seen.clone(), release.clone()).await;
            for (name, protocol) in &endpoints {
                if *protocol == "http" {
                    listening.push((slot, name.to_string(), addr));
                }
            }
        }
        slots.0.lock().unwrap().insert(id, listening);
    }
    let project = z.get("/api/orgs/acme/projects/web", &t.olivia).await;
    assert_eq!(project.status, StatusCode::OK, "{}", project.body);
    let service_seen: Seen = Arc::default();
    let services = Arc::new(Services {
        web: project.body["id"].as_str().unwrap().parse().unwrap(),
        replica: echo_app(0, service_seen.clone(), release.clone()).await,
        opened: Mutex::new(Vec::new()),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let edge = listener.local_addr().unwrap();
    let clock = Arc::new(AtomicI64::new(Timestamp::now().millis()));
    let config = EdgeConfig {
        addr: edge,
        domain: DOMAIN.into(),
        sessions: policy,
        sign_in_failures_per_minute: 5,
        ..EdgeConfig::default()
    };
    let state = EdgeState::new(
        Arc::new(orc_zone::web::StoreForEdge(z.zone.store().clone())),
        z.zone.access_keys().clone(),
        slots,
        z.zone.url(),
        config,
        edge.port(),
    )
    .with_clock({
        let clock = clock.clone();
        move || Timestamp(clock.load(Ordering::SeqCst))
    })
    .with_services(services.clone());
    let certs = Arc::new(EdgeCerts::new(
        z.zone.ca().unwrap().clone(),
        DOMAIN,
        Duration::from_secs(3600),
    ));
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
    Setup {
        z,
        services,
        service_seen,
        edge,
        port: edge.port(),
        clock,
        seen,
        release,
        mia: t.mia,
        vic: t.vic,
        stan: t.stan,
        olivia: t.olivia,
        bodies: Mutex::new(Vec::new()),
    }
}

/// The zone's JWKS over https.
struct ZoneKeys(reqwest::Client, String);

impl KeySource for ZoneKeys {
    async fn fetch(&self) -> Result<String, String> {
        let answer = self
            .0
            .get(&self.1)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        answer.text().await.map_err(|e| e.to_string())
    }
}

fn verifier(s: &Setup, audience: &str) -> Verifier<ZoneKeys> {
    Verifier::new(
        VerifierOptions::new(&s.z.zone.url(), "acme", audience),
        ZoneKeys(
            s.z.http.clone(),
            format!("{}{}", s.z.zone.url(), orc_access::JWKS_PATH),
        ),
    )
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

const SITE: &str = "web--site.acme.orc.localhost";
const SITE_1: &str = "web--site-1.acme.orc.localhost";
const DB: &str = "data--db.acme.orc.localhost";
const API_ADMIN: &str = "web--api-admin.acme.orc.localhost";
const API: &str = "web--api.acme.orc.localhost";
const SHOP_ADMIN: &str = "web--shop-admin.acme.orc.localhost";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_get_in_with_one_signed_assertion_and_nothing_of_theirs_reaches_the_app() {
    let s = setup(SessionPolicy::default()).await;
    let browser = s.client(&[SITE, SITE_1, DB, API, API_ADMIN]);

    // Nobody: a browser goes to the sign-in page and is sent back after; a script gets 401.
    let answer = browser
        .get(s.url(SITE, "/reports?week=3"))
        .header(header::ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    let (status, headers, _) = s.read(answer).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let location = headers[header::LOCATION].to_str().unwrap();
    let next = s.url(SITE, "/reports?week=3");
    assert_eq!(
        location,
        format!(
            "{}?{}",
            s.url(DOMAIN, "/sign-in"),
            serde_urlencoded::to_string([("next", next.as_str())]).unwrap()
        )
    );
    let (status, headers, body) = s
        .read(browser.get(s.url(SITE, "/")).send().await.unwrap())
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(headers.contains_key(header::WWW_AUTHENTICATE));
    // Someone who never signed in is asked to sign in, not to sign in again.
    assert!(body.contains("<h1>Sign in</h1>"), "{body}");
    assert!(s.seen.lock().unwrap().is_empty(), "nothing reached the app");

    // The sign-in page, then a sign-in with mia's token: a cookie with every flag, and the
    // way back to where she was going.
    let (status, _, page) = s.read(browser.get(location).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("name=\"token\"") && page.contains(&next.replace('&', "&amp;")),
        "{page}"
    );
    let (status, headers, _) = s.sign_in(&[("token", &s.mia), ("next", &next)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], next.as_str());
    let set_cookie = headers[header::SET_COOKIE].to_str().unwrap();
    for flag in [
        "Domain=orc.localhost",
        "Path=/",
        "Secure",
        "HttpOnly",
        "SameSite=Lax",
    ] {
        assert!(set_cookie.contains(flag), "{flag} in {set_cookie}");
    }
    let session = cookie_value(&headers).unwrap();
    assert!(!session.contains(&s.mia));

    // With the session, a forged assertion and a cookie of the app's own: the app sees its
    // cookie, one assertion the zone signed for this endpoint, and no session.
    let forged = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyOnN0YW4ifQ.";
    let answer = browser
        .get(s.url(SITE, "/reports?week=3"))
        .header(
            header::COOKIE,
            format!("theme=light; __Secure-orc_session={session}"),
        )
        .header(orc_access::ASSERTION_HEADER, forged)
        .header("X-Orc-Access-Assertion", "second-forgery")
        .header("x-forwarded-for", "6.6.6.6")
        .send()
        .await
        .unwrap();
    let (status, headers, body) = s.read(answer).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cookies: Vec<&str> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies, ["theme=dark"], "the app cannot plant a session");
    let seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["slot"], 0, "no slot part: the lowest slot");
    assert_eq!(seen["cookie"], "theme=light");
    assert_eq!(seen["authorization"], Value::Null);
    assert_eq!(seen["proto"], "https");
    assert_eq!(seen["for"], "127.0.0.1");
    assert_eq!(seen["host"], format!("{SITE}:{}", s.port));
    let assertions = seen["assertions"].as_array().unwrap();
    assert_eq!(assertions.len(), 1, "{assertions:?}");
    let token = assertions[0].as_str().unwrap();
    assert!(token != forged && token != "second-forgery");
    let checked = verifier(&s, "web/site/www")
        .verify_token(token, now_secs())
        .await
        .unwrap();
    assert_eq!(
        (
            checked.sub.as_str(),
            checked.name.as_str(),
            checked.org.as_str()
        ),
        ("user:mia", "mia", "acme")
    );
    assert!(checked.exp - checked.iat <= 300);
    // The same assertion is not good for another endpoint.
    assert!(
        verifier(&s, "web/api/admin")
            .verify_token(token, now_secs())
            .await
            .is_err()
    );

    // A slot part opens that slot; a pool with two http endpoints needs the endpoint part.
    let cookie = format!("__Secure-orc_session={session}");
    let get = |host: &'static str| {
        browser
            .get(s.url(host, "/"))
            .header(header::COOKIE, cookie.clone())
            .send()
    };
    let (_, _, body) = s.read(get(SITE_1).await.unwrap()).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["slot"], 1);
    let (status, _, body) = s.read(get(API).await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("admin, public"), "{body}");
    let (status, _, body) = s.read(get(API_ADMIN).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // mia has no role in acme/data: the same answer as a name that leads nowhere.
    let (status, _, db_body) = s.read(get(DB).await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let nowhere = s.client(&["web--nothing.acme.orc.localhost"]);
    let (status, _, nothing_body) = s
        .read(
            nowhere
                .get(s.url("web--nothing.acme.orc.localhost", "/"))
                .header(header::COOKIE, cookie.clone())
                .send()
                .await
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        db_body.replace(DB, "HOST"),
        nothing_body.replace("web--nothing.acme.orc.localhost", "HOST")
    );

    // A viewer is refused, a stranger too; the org's owner opens acme/data.
    let vic = s.session_of(&s.vic).await;
    let answer = browser
        .get(s.url(SITE, "/"))
        .header(header::COOKIE, format!("__Secure-orc_session={vic}"))
        .send()
        .await
        .unwrap();
    let (status, _, body) = s.read(answer).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("you are viewer"), "{body}");
    // The edge publishes the same keys as the API, with no sign-in, so a zone whose web URL
    // is the edge's serves its JWKS there.
    let (status, headers, edge_jwks) = s
        .read(
            browser
                .get(s.url(DOMAIN, orc_access::JWKS_PATH))
                .send()
                .await
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    let api_jwks =
        s.z.call(reqwest::Method::GET, orc_access::JWKS_PATH, None, None)
            .await;
    assert_eq!(
        serde_json::from_str::<Value>(&edge_jwks).unwrap(),
        api_jwks.body
    );
    let stan = s.session_of(&s.stan).await;
    let answer = browser
        .get(s.url(SITE, "/"))
        .header(header::COOKIE, format!("__Secure-orc_session={stan}"))
        .send()
        .await
        .unwrap();
    assert_eq!(s.read(answer).await.0, StatusCode::NOT_FOUND);
    let answer = browser
        .get(s.url(DB, "/"))
        .bearer_auth(&s.olivia)
        .send()
        .await
        .unwrap();
    let (status, _, body) = s.read(answer).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        seen["authorization"],
        Value::Null,
        "the bearer stays at the edge"
    );
    let checked = verifier(&s, "data/db/console")
        .verify_token(seen["assertions"][0].as_str().unwrap(), now_secs())
        .await
        .unwrap();
    assert!(checked.sub.starts_with("token:t-"), "{}", checked.sub);

    // A pool's service credential opens no endpoint.
    let store = s.z.zone.store();
    let pool = store
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &"site".parse().unwrap(),
        )
        .await
        .unwrap();
    let mia = store.user_by_name(&"mia".parse().unwrap()).await.unwrap();
    let (_, service) = store
        .create_service_token(&mia.id, &pool.id, "slot", None, Timestamp::now())
        .await
        .unwrap();
    let answer = browser
        .get(s.url(SITE, "/"))
        .bearer_auth(service.expose())
        .send()
        .await
        .unwrap();
    let (status, _, body) = s.read(answer).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("<h1>Sign in again</h1>"), "{body}");
    let (status, _, _) = s.sign_in(&[("token", service.expose())]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The home page lists what mia may open; sign-out ends the session on the spot.
    let (status, _, home) = s
        .read(
            browser
                .get(s.url(DOMAIN, "/"))
                .header(header::COOKIE, cookie.clone())
                .send()
                .await
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        home.contains(&s.url(SITE, "/")) && !home.contains(DB),
        "{home}"
    );
    let answer = browser
        .post(s.url(DOMAIN, "/sign-out"))
        .header(header::COOKIE, cookie.clone())
        .header(header::ORIGIN, s.url(DOMAIN, ""))
        .send()
        .await
        .unwrap();
    let (status, headers, _) = s.read(answer).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let (status, _, _) = s.read(get(SITE).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "signed out");

    // Never a secret in an answer body: no token, no session.
    let bodies = s.bodies.lock().unwrap().join("\n");
    for secret in [
        &s.mia, &s.vic, &s.stan, &s.olivia, &s.z.admin, &session, &vic, &stan,
    ] {
        assert!(
            !bodies.contains(secret.as_str()),
            "a secret leaked into a page"
        );
    }
    assert!(!bodies.contains(service.expose()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_takes_passwords_refuses_strangers_pages_and_counts_failures() {
    let s = setup(SessionPolicy::default()).await;
    // mia sets her own password; a too-short one is named.
    let short =
        s.z.put(
            "/api/users/mia/password",
            &s.mia,
            json!({ "password": "short" }),
        )
        .await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    assert_eq!(short.field(), Some("password"));
    let other =
        s.z.put(
            "/api/users/vic/password",
            &s.mia,
            json!({ "password": "a long password 1" }),
        )
        .await;
    assert_eq!(
        other.status,
        StatusCode::FORBIDDEN,
        "only herself or an operator"
    );
    let set =
        s.z.put(
            "/api/users/mia/password",
            &s.mia,
            json!({ "password": "a long password 1" }),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);

    let (status, headers, _) = s
        .sign_in(&[("user", "mia"), ("password", "a long password 1")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let session = cookie_value(&headers).unwrap();
    // An operator resetting the password ends that session.
    let reset =
        s.z.put(
            "/api/users/mia/password",
            &s.z.admin,
            json!({ "password": "another long one" }),
        )
        .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT);
    let browser = s.client(&[SITE]);
    let answer = browser
        .get(s.url(SITE, "/"))
        .header(header::COOKIE, format!("__Secure-orc_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(s.read(answer).await.0, StatusCode::UNAUTHORIZED);

    // A sign-in never sends the browser off the zone's names.
    let (status, headers, _) = s
        .sign_in(&[("token", &s.mia), ("next", "https://evil.example/steal")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], s.url(DOMAIN, "/").as_str());
    // A form posted from another site is refused.
    let answer = s
        .client(&[])
        .post(s.url(DOMAIN, "/sign-in"))
        .header(header::ORIGIN, "https://evil.example")
        .form(&[("token", s.mia.as_str())])
        .send()
        .await
        .unwrap();
    let (status, headers, _) = s.read(answer).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!headers.contains_key(header::SET_COOKIE));

    // Wrong passwords and an unknown user read the same; after five, the address waits.
    let (status, _, wrong) = s
        .sign_in(&[("user", "mia"), ("password", "not her password")])
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, _, unknown) = s
        .sign_in(&[("user", "nobody"), ("password", "not her password")])
        .await;
    assert_eq!(wrong, unknown);
    for _ in 0..3 {
        s.sign_in(&[("token", "orc_made_up")]).await;
    }
    let (status, _, body) = s
        .sign_in(&[("user", "mia"), ("password", "another long one")])
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    s.clock.fetch_add(60_000, Ordering::SeqCst);
    let (status, _, _) = s
        .sign_in(&[("user", "mia"), ("password", "another long one")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "a minute later");

    let bodies = s.bodies.lock().unwrap().join("\n");
    for secret in ["a long password 1", "another long one", s.mia.as_str()] {
        assert!(!bodies.contains(secret), "a secret leaked into a page");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_end_when_idle_at_their_lifetime_or_with_their_token() {
    let s = setup(SessionPolicy {
        lifetime: Duration::from_secs(3600),
        idle: Duration::from_secs(600),
    })
    .await;
    let browser = s.client(&[SITE]);
    let open = |session: String| {
        browser
            .get(s.url(SITE, "/"))
            .header(header::COOKIE, format!("__Secure-orc_session={session}"))
            .send()
    };
    let session = s.session_of(&s.mia).await;
    // Busy every five minutes: it holds until its lifetime, then it is gone.
    for _ in 0..11 {
        s.clock.fetch_add(300_000, Ordering::SeqCst);
        let (status, _, body) = s.read(open(session.clone()).await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    s.clock.fetch_add(300_000, Ordering::SeqCst);
    assert_eq!(
        s.read(open(session).await.unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );

    // Idle for ten minutes: gone.
    let idle = s.session_of(&s.mia).await;
    s.clock.fetch_add(599_000, Ordering::SeqCst);
    assert_eq!(
        s.read(open(idle.clone()).await.unwrap()).await.0,
        StatusCode::OK
    );
    s.clock.fetch_add(600_000, Ordering::SeqCst);
    assert_eq!(
        s.read(open(idle).await.unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );

    // Made from a token that is then revoked: gone.
    let made =
        s.z.post(
            "/api/users/mia/tokens",
            &s.mia,
            json!({ "label": "laptop" }),
        )
        .await;
    let (id, value) = (
        made.body["token"]["id"].as_str().unwrap().to_string(),
        made.body["value"].as_str().unwrap().to_string(),
    );
    let from_token = s.session_of(&value).await;
    assert_eq!(
        s.read(open(from_token.clone()).await.unwrap()).await.0,
        StatusCode::OK
    );
    let revoked =
        s.z.delete(&format!("/api/users/mia/tokens/{id}"), &s.mia)
            .await;
    assert!(revoked.status.is_success(), "{}", revoked.body);
    // The edge keeps who a credential is for two seconds: the revocation holds after that.
    s.clock.fetch_add(2_000, Ordering::SeqCst);
    assert_eq!(
        s.read(open(from_token).await.unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_reaches_the_browser_as_it_is_written() {
    let s = setup(SessionPolicy::default()).await;
    let browser = s.client(&[SITE]);
    let session = s.session_of(&s.mia).await;
    let mut answer = browser
        .get(s.url(SITE, "/events"))
        .header(header::COOKIE, format!("__Secure-orc_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
    // The first event arrives while the app still holds the second back.
    let first = tokio::time::timeout(Duration::from_secs(10), answer.chunk())
        .await
        .expect("the first event arrives before the stream ends")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"data: one\n\n");
    s.release.notify_one();
    let second = answer.chunk().await.unwrap().unwrap();
    assert_eq!(&second[..], b"data: two\n\n");
    assert!(answer.chunk().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_outside_the_zone_and_missing_slots_are_told_apart() {
    let s = setup(SessionPolicy::default()).await;
    let other = "example.com";
    let client = s.client(&[other, "web--site-7.acme.orc.localhost"]);
    // The edge's certificates name the zone's domain only: a client that checks names
    // refuses to talk to it as anything else.
    let refused = client.get(s.url(other, "/")).send().await;
    assert!(refused.is_err(), "{refused:?}");
    let answer = client
        .get(s.url("web--site-7.acme.orc.localhost", "/"))
        .bearer_auth(&s.mia)
        .send()
        .await
        .unwrap();
    let (status, _, body) = s.read(answer).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "slot 7 of a 2-slot pool: {body}"
    );
}

/// Attack: a page elsewhere (or a script) posts the sign-in or sign-out form without an
/// `Origin`, to sign a person in as someone else or out. Both forms need the edge's own
/// origin (or, without one, `Sec-Fetch-Site: same-origin`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_and_sign_out_without_the_edges_origin_are_refused() {
    let s = setup(SessionPolicy::default()).await;
    let browser = s.client(&[]);
    for headers in [vec![], vec![("sec-fetch-site", "same-site")]] {
        let mut request = browser
            .post(s.url(DOMAIN, "/sign-in"))
            .form(&[("token", s.mia.as_str())]);
        for (name, value) in &headers {
            request = request.header(*name, *value);
        }
        let (status, answered, body) = s.read(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
        assert!(!answered.contains_key(header::SET_COOKIE), "{headers:?}");
        assert!(body.contains("own sign-in page"), "{body}");
    }
    let answer = browser
        .post(s.url(DOMAIN, "/sign-in"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("token", s.mia.as_str())])
        .send()
        .await
        .unwrap();
    let (status, answered, _) = s.read(answer).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = format!("__Secure-orc_session={}", cookie_value(&answered).unwrap());

    let answer = browser
        .post(s.url(DOMAIN, "/sign-out"))
        .header(header::COOKIE, cookie.clone())
        .send()
        .await
        .unwrap();
    let (status, answered, _) = s.read(answer).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!answered.contains_key(header::SET_COOKIE));
    let home = browser
        .get(s.url(DOMAIN, "/"))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(s.read(home).await.0, StatusCode::OK, "still signed in");
}

/// Attack: a sign-in link whose `next` holds a line break, to break the redirect's
/// `Location` (or add a header) after the session is made. Such a `next` is no place to go
/// back to: the sign-in goes to the home page, with its cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_with_a_line_break_signs_in_to_the_home_page() {
    let s = setup(SessionPolicy::default()).await;
    for next in [
        format!("{}\r\nSet-Cookie: planted=1", s.url(SITE, "/")),
        format!("{}\n", s.url(DOMAIN, "/orgs")),
        format!("{}\u{7f}", s.url(DOMAIN, "/orgs")),
    ] {
        let (status, headers, body) = s.sign_in(&[("token", &s.mia), ("next", &next)]).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{next:?}: {body}");
        assert_eq!(
            headers.get(header::LOCATION).map(|v| v.to_str().unwrap()),
            Some(s.url(DOMAIN, "/").as_str()),
            "{next:?}"
        );
        assert!(
            cookie_value(&headers).is_some(),
            "{next:?}: no session cookie"
        );
        assert!(
            !headers
                .get_all(header::SET_COOKIE)
                .iter()
                .any(|c| c.to_str().unwrap().contains("planted")),
            "{headers:?}"
        );
    }
    // A good next is kept as the URL parser writes it.
    let next = s.url(SITE, "/a path?x=1");
    let (status, headers, _) = s.sign_in(&[("token", &s.mia), ("next", &next)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers[header::LOCATION],
        s.url(SITE, "/a%20path?x=1").as_str()
    );
}

/// Attack: someone on the network answers a browser's first plain-http request to the zone's
/// domain or an app's name and keeps it off TLS (SSL stripping). Every answer of the edge,
/// its own pages, refusals and apps' answers alike, tells browsers to use https only, for
/// the domain and every name under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_the_edge_pins_https_for_the_domain_and_its_names() {
    let s = setup(SessionPolicy::default()).await;
    let browser = s.client(&[SITE, "nothing--here.acme.orc.localhost"]);
    let answers = [
        ("sign-in page", browser.get(s.url(DOMAIN, "/sign-in"))),
        ("home, signed out", browser.get(s.url(DOMAIN, "/"))),
        ("an unknown page", browser.get(s.url(DOMAIN, "/nope"))),
        (
            "an app's answer",
            browser.get(s.url(SITE, "/")).bearer_auth(&s.mia),
        ),
        (
            "a name that leads nowhere",
            browser
                .get(s.url("nothing--here.acme.orc.localhost", "/"))
                .bearer_auth(&s.mia),
        ),
        (
            "a refused sign-in",
            browser
                .post(s.url(DOMAIN, "/sign-in"))
                .header(header::ORIGIN, "https://evil.example"),
        ),
    ];
    for (what, request) in answers {
        let (status, headers, _) = s.read(request.send().await.unwrap()).await;
        assert_eq!(
            headers
                .get(header::STRICT_TRANSPORT_SECURITY)
                .map(|v| v.to_str().unwrap()),
            Some("max-age=31536000; includeSubDomains"),
            "{what} ({status})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_service_opens_to_members_through_its_replicas_node() {
    let s = setup(SessionPolicy::default()).await;
    let client = s.client(&[SHOP_ADMIN]);
    let get = |token: Option<&str>| {
        let mut request = client.get(s.url(SHOP_ADMIN, "/orders"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };

    // Strangers: nobody gets 401, a person with no role there the same 404 as a name that
    // leads nowhere, a viewer 403; none reaches the replica or opens a stream.
    let (status, _, _) = s.read(get(None).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = s.read(get(Some(&s.stan)).await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = s.read(get(Some(&s.vic)).await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(s.service_seen.lock().unwrap().is_empty());
    assert!(s.services.opened.lock().unwrap().is_empty());

    // A member: through the replica's node to its address, with one assertion for the
    // service and not her token.
    let (status, _, body) = s.read(get(Some(&s.mia)).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        s.services.opened.lock().unwrap().as_slice(),
        [("n-000000000042".to_string(), "10.96.0.2:8080".to_string())]
    );
    let seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["authorization"], Value::Null);
    assert_eq!(seen["host"], format!("{SHOP_ADMIN}:{}", s.port));
    let assertions = seen["assertions"].as_array().unwrap();
    assert_eq!(assertions.len(), 1, "{assertions:?}");
    let checked = verifier(&s, "web/shop/admin")
        .verify_token(assertions[0].as_str().unwrap(), now_secs())
        .await
        .unwrap();
    assert_eq!(checked.name.as_str(), "mia");
    // An assertion for the service is no good for a pool's endpoint.
    assert!(
        verifier(&s, "web/site/www")
            .verify_token(assertions[0].as_str().unwrap(), now_secs())
            .await
            .is_err()
    );
}
