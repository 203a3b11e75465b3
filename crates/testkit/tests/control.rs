//! The control client against a running emulator: each lever changes what the API answers.

use orc_emu::EmuConfig;
use orc_testkit::emu::{EmuControl, Fault};

#[tokio::test]
async fn levers_change_what_the_api_answers_and_the_log_shows_it() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let control = EmuControl::hetzner(&emu);
    let http = reqwest::Client::new();
    let get = |path: &str| {
        http.get(format!("{}/v1{path}", control.root()))
            .bearer_auth("demo-token")
            .send()
    };
    assert_eq!(get("/server_types").await.unwrap().status(), 200);

    control
        .fault(
            Fault::new("/v1/server_types", 503, 1)
                .method("GET")
                .code("unavailable"),
        )
        .await;
    assert_eq!(get("/server_types").await.unwrap().status(), 503);
    assert_eq!(
        get("/server_types").await.unwrap().status(),
        200,
        "one answer only"
    );

    control.fault(Fault::new("/v1/locations", 500, 5)).await;
    control.clear_faults().await;
    assert_eq!(get("/locations").await.unwrap().status(), 200);

    let log = control.requests().await;
    let statuses: Vec<(String, u16)> = log.iter().map(|r| (r.path.clone(), r.status)).collect();
    assert_eq!(
        statuses,
        [
            ("/v1/server_types".to_string(), 200),
            ("/v1/server_types".to_string(), 503),
            ("/v1/server_types".to_string(), 200),
            ("/v1/locations".to_string(), 200),
        ]
    );
    let counters = control.counters().await;
    assert_eq!(counters.total, 4);
    assert_eq!(counters.operations.get("GET /v1/server_types"), Some(&3));

    control.reset().await;
    assert_eq!(
        control.counters().await.total,
        0,
        "a reset starts the counts afresh"
    );
    control.sold_out("cx23", "fsn1", true).await;
    control.location_disabled("nbg1", true).await;
    control.rate_limit(1, 3600.0, Some(0)).await;
    assert_eq!(get("/locations").await.unwrap().status(), 429);
}
