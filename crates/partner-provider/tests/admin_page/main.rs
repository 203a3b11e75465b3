//! The admin page over HTTP: its gate against hostile requests and across a key rotation,
//! the closed page, golden files of every view, no key or token in any response, page
//! requests that change nothing, live updates, and `serve` starting the page on
//! `ORC_HTTP_ADMIN_ADDR`.

mod support;

#[path = "../support/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use orc_access::testing::{headers, hostile_requests};
use orc_access::{Assertion, SigningKey};
use orc_common::ReplicaRole;
use orc_partner::params::load_config;
use orc_partner_provider::testing::WorldSize;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use support::*;

/// Compares a page with its golden file: the test zone's port written as `<port>`, one tag
/// per line so a change reads as a small diff.
fn golden(page: &Page, name: &str, html: &str) {
    let text = html
        .replace(&format!("127.0.0.1:{}", page.zone.port), "127.0.0.1:<port>")
        .replace("><", ">\n<");
    orc_testkit::golden::check(env!("CARGO_MANIFEST_DIR"), name, &text);
}

const REGIONS_DRAFT: &str = r#"{
  "eu-central": {"title": "Europe Central", "sites": [{"eu-central-a": "hetzner:nbg1"}, {"eu-central-c": "vultr:fra"}]},
  "us-east": {"title": "US East", "sites": [{"us-east-b": "vultr:ewr"}, {"us-east-x": "vultr:ord"}]}
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_of_a_serving_replica_matches_its_golden_file() {
    let page = Page::start(Setup::default()).await;
    golden(&page, "admin-overview", &page.view("").await);
    golden(&page, "admin-config", &page.view("config").await);
    golden(&page, "admin-children", &page.view("children").await);
    golden(&page, "admin-quote-form", &page.view("quote").await);
    golden(
        &page,
        "admin-quote-preview",
        &page
            .view("quote?class=eu-central&cpu=2&mem=4&arch=x86_64&os=ubuntu-24.04&site=&disks=20")
            .await,
    );
    golden(
        &page,
        "admin-quote-pinned-windows",
        &page
            .view("quote?class=eu-central&cpu=2&mem=4&os=windows-2022&site=eu-central-a")
            .await,
    );
    golden(
        &page,
        "admin-quote-bad-input",
        &page
            .view("quote?class=eu-central&cpu=two&mem=0&os=ubuntu-24.04&site=us-east-a&disks=10,x")
            .await,
    );
    golden(&page, "admin-addresses", &page.view("addresses").await);
    golden(&page, "admin-validate-form", &page.view("validate").await);
    let (status, validated) = page
        .post(
            "validate",
            &[
                ("regions", REGIONS_DRAFT),
                ("os_map", r#"{"plan9": {"title": "Plan 9"}}"#),
                ("gateway", r#"{"mem": 4, "cpu": 2}"#),
                ("ptr_domain", "Cloud.Example.COM."),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    golden(&page, "admin-validate-result", &validated);
    let (status, missing) = page.get("nodes", page.with_token()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    golden(&page, "admin-not-found", &missing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_shows_the_banner_and_only_what_needs_no_cloud_account() {
    let page = Page::start(Setup {
        role: Some(ReplicaRole::Standby),
        ..Setup::default()
    })
    .await;
    let overview = page.view("").await;
    assert!(
        overview.contains("Standing by: this replica reads no cloud account"),
        "{overview}"
    );
    golden(&page, "admin-standby-overview", &overview);
    let children = page.view("children").await;
    assert!(children.contains("shown by the serving replica"));
    assert!(!children.contains("n-0001"), "no cloud data on a standby");
    golden(&page, "admin-standby-children", &children);
    let addresses = page.view("addresses").await;
    assert!(addresses.contains("shown by the serving replica"));
    assert!(!addresses.contains("203.0.113."));
    // What needs no cloud account is there.
    assert!(page.view("config").await.contains("eu-central-a"));
    let preview = page
        .view("quote?class=eu-central&cpu=2&mem=4&os=ubuntu-24.04")
        .await;
    assert!(preview.contains("winner"), "{preview}");
    assert!(preview.contains("Standing by"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_cloud_without_nodes_lists_what_it_left_behind() {
    let page = Page::start(Setup {
        retire_vultr: true,
        ..Setup::default()
    })
    .await;
    let children = page.view("children").await;
    assert!(children.contains("Left behind"), "{children}");
    assert!(children.contains("198.51.100.2"), "a stable address kept");
    assert!(children.contains("orc-sealed-"), "the sealed key is named");
    golden(&page, "admin-children-retired", &children);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_are_refused_on_every_view() {
    let page = Page::start(Setup::default()).await;
    let (key, ring) = {
        let ring = page.zone.ring.lock().unwrap();
        (ring.current().clone(), ring.clone())
    };
    let claims = page.claims();
    let good = ring.sign(&claims).unwrap();
    let cases = hostile_requests(&key, &ring, &claims, page.now_secs());
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let signature = good.rsplit('.').next().unwrap().to_string();
    let mut let_in = Vec::new();
    for (i, (name, request)) in cases.iter().enumerate() {
        let path = VIEW_PATHS[i % VIEW_PATHS.len()];
        let (status, body) = page.get(path, request.clone()).await;
        if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            let_in.push(format!("{name} on /{path}: {status}"));
            continue;
        }
        assert!(body.contains("Not let in"), "{name}: {body}");
        assert!(
            !body.contains(&signature) && !body.contains(&good[..24]),
            "{name}: the refusal repeats the token"
        );
    }
    assert!(let_in.is_empty(), "let in: {let_in:?}");
    let (status, body) = page.post("validate", &[("gateway", "{}")]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused_post = page
        .http
        .post(format!("{}validate", page.base))
        .form(&[("gateway", "{}")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused_post.status(), StatusCode::UNAUTHORIZED);
    let (status, _) = page.first_event(HeaderMap::new()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the event stream too");
    for path in VIEW_PATHS {
        page.view(path).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_assertion_for_another_endpoint_is_forbidden() {
    let page = Page::start(Setup::default()).await;
    let other = Assertion {
        aud: "sys/partner-old/admin".into(),
        ..page.claims()
    };
    let token = page.zone.ring.lock().unwrap().sign(&other).unwrap();
    let (status, body) = page.get("config", headers(&[&token])).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("sys/partner-old/admin"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_assertions_are_let_in_across_a_key_rotation() {
    let page = Page::start(Setup::default()).await;
    let first = page.zone.ring.lock().unwrap().current().clone();
    page.view("").await;
    assert_eq!(
        page.zone.fetches.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the keys are loaded once at start and cached"
    );

    // The zone rotates: the new key signs, the old one stays published for an hour.
    let second = SigningKey::generate().unwrap();
    page.zone
        .ring
        .lock()
        .unwrap()
        .rotate(second.clone(), page.now_secs(), 3600);
    page.zone.publish();
    page.clock.advance(Duration::from_secs(31));
    let by_second = page.token();
    let (status, body) = page.get("config", headers(&[&by_second])).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the new key's kid is fetched: {body}"
    );
    let by_first = first.sign(&page.claims()).unwrap();
    let (status, _) = page.get("", headers(&[&by_first])).await;
    assert_eq!(status, StatusCode::OK, "the old key during its overlap");

    // The overlap ends and the old key is retired: once the keys are fetched again (an
    // unknown kid, after the refetch interval), assertions it signs are refused.
    page.clock.advance(Duration::from_secs(3600));
    let retired = page.zone.ring.lock().unwrap().retire(page.now_secs());
    assert_eq!(retired, [first.kid().to_string()]);
    page.zone.publish();
    let stranger = SigningKey::generate()
        .unwrap()
        .sign(&page.claims())
        .unwrap();
    let (status, _) = page.get("", headers(&[&stranger])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = page
        .get("", headers(&[&first.sign(&page.claims()).unwrap()]))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    page.view("children").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_access_keys_url_every_view_is_closed_and_names_the_param() {
    let page = Page::start(Setup {
        access_keys: false,
        ..Setup::default()
    })
    .await;
    for path in VIEW_PATHS.iter().chain(&["events", "nodes"]) {
        for request in [HeaderMap::new(), page.with_token()] {
            let (status, body) = page.get(path, request).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "/{path}");
            assert!(body.contains("access_keys_url"), "/{path}: {body}");
            assert!(body.contains("/.well-known/orc-access/jwks.json"));
        }
    }
    let (status, body) = page.post("validate", &[("gateway", "{}")]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    golden(&page, "admin-closed", &body);
}

#[test]
fn a_keys_url_over_http_is_refused_when_the_params_are_read() {
    for bad in [
        "http://orc.localhost:7443/.well-known/orc-access/jwks.json",
        "https://ops@orc.localhost/.well-known/orc-access/jwks.json",
    ] {
        let source = orc_partner::params::MapSource::new()
            .param("partner_id", "zone-1")
            .param("vultr_api_key", VULTR_KEY)
            .param("vultr_owner_tag", "orc-partner-vultr")
            .param("access_keys_url", bad);
        let errors = load_config(&source).unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        assert_eq!(errors.0[0].param, "access_keys_url", "{errors}");
        assert!(errors.to_string().contains("param access_keys_url:"));
    }
}

/// Everything a test of the page could leak: the cloud keys, the assertions it sent, the
/// signing key's private half.
fn secrets(page: &Page, tokens: &[String]) -> Vec<String> {
    let key = page.zone.ring.lock().unwrap().current().clone();
    let mut out = vec![
        HETZNER_KEY.to_string(),
        VULTR_KEY.to_string(),
        "SECRET".to_string(),
        base64::engine::general_purpose::STANDARD.encode(key.pkcs8()),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.pkcs8()),
    ];
    for token in tokens.iter().filter(|t| t.len() > 8) {
        out.push(token.clone());
        out.extend(token.split('.').filter(|p| p.len() > 8).map(str::to_string));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_carries_a_key_a_token_or_a_private_key() {
    let page = Page::start(Setup::default()).await;
    let mut responses = Vec::new();
    let mut tokens = Vec::new();
    for path in VIEW_PATHS.iter().chain(&["nodes", "quote?class=nowhere"]) {
        let request = page.with_token();
        tokens.push(
            request[orc_access::ASSERTION_HEADER]
                .to_str()
                .unwrap()
                .to_string(),
        );
        responses.push(page.get(path, request).await.1);
    }
    let validate = [
        ("regions", REGIONS_DRAFT),
        ("os_map", r#"{"plan9": {"title": "Plan 9"}}"#),
        ("gateway", r#"{"cpu": 1, "mem": 2}"#),
        ("ptr_domain", "cloud.example.com"),
    ];
    responses.push(page.post("validate", &validate).await.1);
    let (_, event) = page.first_event(page.with_token()).await;
    assert!(event.contains("event: status"), "{event}");
    responses.push(event);
    let key = page.zone.ring.lock().unwrap().current().clone();
    let ring = page.zone.ring.lock().unwrap().clone();
    for (_, request) in hostile_requests(&key, &ring, &page.claims(), page.now_secs()) {
        for value in request.values() {
            tokens.push(value.to_str().unwrap_or_default().to_string());
        }
        responses.push(page.get("", request).await.1);
    }
    let scan = secrets(&page, &tokens);
    assert!(responses.len() > 70, "{} responses", responses.len());
    for (i, body) in responses.iter().enumerate() {
        for secret in &scan {
            assert!(
                !body.contains(secret.as_str()),
                "response {i} carries {}…",
                &secret[..6.min(secret.len())]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_requests_change_nothing_and_call_no_cloud() {
    let page = Page::start(Setup::default()).await;
    let view = page.provider.admin_view();
    let before = (
        page.provider.quote_state(),
        page.provider.catalogs().snapshot(),
        view.snapshot().page().seen.clone(),
    );
    for _ in 0..3 {
        for path in VIEW_PATHS {
            page.view(path).await;
        }
        page.view("quote?class=eu-central&cpu=2&mem=4&os=ubuntu-24.04&site=eu-central-a")
            .await;
        page.view("quote?class=us-east&cpu=4&mem=8&os=debian-12&disks=10,20")
            .await;
        page.post(
            "validate",
            &[
                ("regions", REGIONS_DRAFT),
                ("gateway", r#"{"cpu": 2, "mem": 4}"#),
            ],
        )
        .await;
        page.first_event(page.with_token()).await;
    }
    let after = (
        page.provider.quote_state(),
        page.provider.catalogs().snapshot(),
        view.snapshot().page().seen.clone(),
    );
    assert_eq!(before.0, after.0, "the quote state, reservations included");
    assert!(
        after
            .0
            .reservation(&orc_partner::ids::NodeId::new("admin-preview").unwrap())
            .is_none(),
        "a preview reserves nothing"
    );
    assert_eq!(before.1, after.1, "the catalogs");
    assert_eq!(before.2, after.2, "what the passes saw");
    assert!(
        page.provider.clients().request_counts().is_empty(),
        "no cloud was called: {:?}",
        page.provider.clients().request_counts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_goes_live_with_server_sent_events() {
    let page = Page::start(Setup {
        role: Some(ReplicaRole::Standby),
        size: WorldSize {
            sites: 2,
            nodes: 2,
            pools: 0,
            troubles: false,
        },
        ..Setup::default()
    })
    .await;
    let overview = page.view("").await;
    assert!(overview.contains(r#"id="live-role""#));
    assert!(overview.contains("new EventSource(\"events\")"));
    let (status, event) = page.first_event(page.with_token()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(event.starts_with("event: status\n"), "{event}");
    let data: serde_json::Value = serde_json::from_str(
        event
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["live-role"], "standing by");
    assert!(
        data["live-read-hetzner"]
            .as_str()
            .unwrap()
            .contains("4 min ago")
    );
    // Every live text is an element of the page.
    for id in data.as_object().unwrap().keys() {
        assert!(overview.contains(&format!("id=\"{id}\"")), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_that_cannot_be_bound_is_logged_and_the_provider_goes_on() {
    let (logs, _guard) = common::capture();
    let page = Page::start(Setup::default()).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let started = orc_partner_provider::admin::launch(
        Some(addr),
        page.provider.admin_view(),
        Some(&page.zone.pinned()),
    )
    .await;
    assert!(started.is_none());
    let text = logs.text();
    assert!(text.contains("ERROR"), "{text}");
    assert!(
        text.contains(&format!("could not bind its address {addr}")),
        "{text}"
    );
}

#[test]
fn serve_answers_on_its_admin_address_closed_without_access_keys_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_orc-prov-partner"))
        .env_clear()
        .args(["serve", "--zone", "http://127.0.0.1:9"])
        .env("RUST_LOG", "info")
        .env("ORC_HTTP_ADMIN_ADDR", format!("127.0.0.1:{port}"))
        .env("ORC_PARAM_PARTNER_ID", "zone-1")
        .env("ORC_PARAM_VULTR_API_KEY", VULTR_KEY)
        .env("ORC_PARAM_VULTR_OWNER_TAG", "orc-partner-vultr")
        .env("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(async {
        let url = format!("http://127.0.0.1:{port}/config");
        for _ in 0..200 {
            if let Ok(answer) = reqwest::get(&url).await {
                return Some((answer.status(), answer.text().await.unwrap()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    });
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let (status, body) = answer.expect("the page answers");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("access_keys_url"), "{body}");
    assert_eq!(
        stderr.matches("The admin page is closed").count(),
        1,
        "logged once at start: {stderr}"
    );
    assert!(!stderr.contains(VULTR_KEY));
}
