//! The control API under `/_emu/` and the gate every API request passes: injected errors,
//! rate-limit budgets, the clock, the request log and counters, reset.
//!
//! The levers are pulled with the test kit's `EmuControl`; what the control API answers on
//! the wire (bad bodies, the clock's answers, the state) is checked over raw HTTP.

use orc_emu::EmuConfig;
use orc_testkit::emu::{EmuControl, Fault};
use serde_json::{Value, json};

async fn post(client: &reqwest::Client, url: String, body: Value) -> reqwest::Response {
    client
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("control request")
}

async fn get_json(client: &reqwest::Client, url: String) -> Value {
    client
        .get(url)
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json body")
}

#[tokio::test]
async fn injected_fault_hits_only_matching_requests_and_only_count_times() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.hetzner.as_ref().unwrap().root_url();
    let c = reqwest::Client::new();
    EmuControl::hetzner(&emu)
        .fault(Fault::new("/v1/servers", 503, 2).method("POST"))
        .await;

    // A GET on the same path is not hit.
    let get = c.get(format!("{root}/v1/servers")).send().await.unwrap();
    assert_ne!(get.status(), 503);

    for _ in 0..2 {
        let r = c
            .post(format!("{root}/v1/servers"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["content-type"], "application/json");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unavailable");
    }
    let third = c
        .post(format!("{root}/v1/servers"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_ne!(
        third.status(),
        503,
        "the fault was injected for two requests only"
    );
}

#[tokio::test]
async fn fault_status_must_be_an_error_status() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.vultr.as_ref().unwrap().root_url();
    let r = post(
        &reqwest::Client::new(),
        format!("{root}/_emu/faults"),
        json!({"path": "/v2", "status": 200}),
    )
    .await;
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn each_api_renders_injected_errors_in_its_own_shape() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let c = reqwest::Client::new();

    let vultr = emu.vultr.as_ref().unwrap().root_url();
    EmuControl::vultr(&emu)
        .fault(Fault::new("/v2/instances", 500, 1))
        .await;
    let r = c.get(format!("{vultr}/v2/instances")).send().await.unwrap();
    assert_eq!(r.status(), 500);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], 500);
    assert!(body["error"].is_string());

    let robot = emu.robot.as_ref().unwrap().root_url();
    EmuControl::robot(&emu)
        .fault(Fault::new("/server", 404, 1))
        .await;
    let r = c.get(format!("{robot}/server")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["status"], 404);
    assert_eq!(body["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn hetzner_budget_runs_out_and_says_so_in_headers() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.hetzner.as_ref().unwrap().root_url();
    let c = reqwest::Client::new();
    // The default period, an hour.
    EmuControl::hetzner(&emu)
        .rate_limit(3600, 3600.0, Some(1))
        .await;

    let first = c.get(format!("{root}/v1/locations")).send().await.unwrap();
    assert_ne!(first.status(), 429);
    assert_eq!(first.headers()["ratelimit-limit"], "3600");
    assert_eq!(first.headers()["ratelimit-remaining"], "0");
    assert_eq!(first.headers()["x-correlation-id"].len(), 16);

    let second = c.get(format!("{root}/v1/locations")).send().await.unwrap();
    assert_eq!(second.status(), 429);
    let reset: u64 = second.headers()["ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    assert!(reset > now.as_secs(), "reset lies in the future");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(
        body["error"]["message"],
        "limit of 3600 requests per hour reached"
    );
}

#[tokio::test]
async fn robot_reports_rate_limit_as_403() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.robot.as_ref().unwrap().root_url();
    let c = reqwest::Client::new();
    // The default period, an hour.
    EmuControl::robot(&emu).rate_limit(5, 3600.0, Some(0)).await;
    let r = c
        .get(format!("{root}/server"))
        .basic_auth("demo", Some("demo-token"))
        .send()
        .await;
    let r = r.unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "RATE_LIMIT_EXCEEDED");
    assert_eq!(body["error"]["max_request"], 5);
}

#[tokio::test]
async fn explicit_clock_advances_on_request_and_rejects_negative_steps() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.hetzner.as_ref().unwrap().root_url();
    let c = reqwest::Client::new();
    let before = get_json(&c, format!("{root}/_emu/clock")).await;
    assert_eq!(before["mode"], "explicit");
    let after: Value = post(
        &c,
        format!("{root}/_emu/clock/advance"),
        json!({"seconds": 90}),
    )
    .await
    .json()
    .await
    .unwrap();
    let t0 = chrono::DateTime::parse_from_rfc3339(before["now"].as_str().unwrap()).unwrap();
    let t1 = chrono::DateTime::parse_from_rfc3339(after["now"].as_str().unwrap()).unwrap();
    assert_eq!((t1 - t0).num_seconds(), 90);
    let bad = post(
        &c,
        format!("{root}/_emu/clock/advance"),
        json!({"seconds": -1}),
    )
    .await;
    assert_eq!(bad.status(), 400);
    // All three emulators of one process share the clock.
    let vultr = emu.vultr.as_ref().unwrap().root_url();
    let v = get_json(&c, format!("{vultr}/_emu/clock")).await;
    assert_eq!(v["now"], after["now"]);
}

#[tokio::test]
async fn requests_are_logged_and_counted_by_operation_and_reset_clears_them() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let root = emu.hetzner.as_ref().unwrap().root_url();
    let c = reqwest::Client::new();
    for id in [1, 2, 3] {
        c.get(format!("{root}/v1/servers/{id}"))
            .send()
            .await
            .unwrap();
    }
    c.get(format!("{root}/v1/locations?page=1"))
        .send()
        .await
        .unwrap();

    let control = EmuControl::hetzner(&emu);
    let counters = control.counters().await;
    assert_eq!(counters.operations["GET /v1/servers/{id}"], 3);
    assert_eq!(counters.operations["GET /v1/locations"], 1);
    assert_eq!(counters.total, 4);

    let requests = control.requests().await;
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[3].query.as_deref(), Some("page=1"));
    assert_eq!(requests[0].path, "/v1/servers/1");

    control.reset().await;
    assert_eq!(control.counters().await.total, 0);
}

#[tokio::test]
async fn sold_out_and_disabled_locations_show_in_state() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let handle = emu.hetzner.as_ref().unwrap();
    let root = handle.root_url();
    let c = reqwest::Client::new();
    let control = EmuControl::hetzner(&emu);
    control.sold_out("cx23", "fsn1", true).await;
    control.location_disabled("nbg1", true).await;
    control.latency(5).await;
    control.fail_next_actions(2).await;
    let state = get_json(&c, format!("{root}/_emu/state")).await;
    assert_eq!(
        state["sold_out"],
        json!([{"plan": "cx23", "location": "fsn1"}])
    );
    assert_eq!(state["disabled_locations"], json!(["nbg1"]));
    assert_eq!(state["latency_ms"], 5);
    assert_eq!(state["fail_next_actions"], 2);
    assert!(handle.core.faults().is_sold_out("cx23", "fsn1"));

    control.sold_out("cx23", "fsn1", false).await;
    assert!(!handle.core.faults().is_sold_out("cx23", "fsn1"));
    let incomplete = post(&c, format!("{root}/_emu/sold-out"), json!({"plan": "cx23"})).await;
    assert!(
        incomplete.status().is_client_error(),
        "a body missing `location` is refused"
    );
}
