//! The Vultr v2 emulator over raw HTTP: auth, error shapes, cursor pagination, filters,
//! the instance lifecycle on the explicit clock, capacity faults, reserved-IP and VPC
//! rules, bad input, account isolation and reset.

use std::collections::BTreeSet;

use orc_emu::{Account, Accounts, EmuConfig, RunningEmulators, Timings};
use orc_testkit::EmuControl;
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

struct Vultr {
    _emu: RunningEmulators,
    base: String,
    control: EmuControl,
    http: Client,
    key: String,
}

impl Vultr {
    async fn start(timings: Timings) -> Vultr {
        Vultr::start_with(timings, Accounts::default()).await
    }

    async fn start_with(timings: Timings, accounts: Accounts) -> Vultr {
        let config = EmuConfig {
            hetzner: None,
            robot: None,
            timings,
            accounts,
            ..EmuConfig::for_tests()
        };
        let emu = config.start().await.expect("emulator starts");
        let base = emu.vultr_url().expect("vultr runs");
        let control = EmuControl::vultr(&emu);
        let v = Vultr {
            _emu: emu,
            base,
            control,
            http: Client::new(),
            key: "demo-token".into(),
        };
        // Many requests per test: lift the per-second budget.
        v.control.rate_limit(1_000_000, 1.0, None).await;
        v
    }

    fn as_key(&self, key: &str) -> Vultr2<'_> {
        Vultr2 {
            v: self,
            key: key.to_string(),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.as_key(&self.key.clone())
            .call(method, path, body)
            .await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn advance(&self, seconds: u64) {
        self.control.advance_clock(seconds as f64).await;
    }

    async fn create(&self, body: Value) -> Value {
        let (status, v) = self.post("/instances", body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{v}");
        v["instance"].clone()
    }
}

/// The same emulator seen with another API key.
struct Vultr2<'a> {
    v: &'a Vultr,
    key: String,
}

impl Vultr2<'_> {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .v
            .http
            .request(method, format!("{}{path}", self.v.base))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r = req.send().await.expect("request");
        let status = r.status();
        let text = r.text().await.expect("body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        };
        (status, value)
    }
}

fn ubuntu(region: &str, plan: &str) -> Value {
    json!({"region": region, "plan": plan, "os_id": 2284})
}

fn assert_error(status: StatusCode, body: &Value, want: StatusCode, phrase: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["status"], json!(want.as_u16()), "{body}");
    let msg = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error text: {body}"));
    assert!(msg.contains(phrase), "{msg:?} lacks {phrase:?}");
}

#[tokio::test]
async fn vultr_catalogue_is_public_and_the_rest_needs_a_key() {
    let v = Vultr::start(Timings::instant()).await;
    for path in ["/regions", "/plans", "/os", "/regions/ewr/availability"] {
        let r = v
            .http
            .get(format!("{}{path}", v.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    for path in [
        "/account",
        "/instances",
        "/ssh-keys",
        "/reserved-ips",
        "/vpcs",
        "/blocks",
    ] {
        let r = v
            .http
            .get(format!("{}{path}", v.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(r.headers()["content-type"], "application/json");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["status"], 401);
        assert!(body["error"].is_string());
    }
    let (status, body) = v.as_key("wrong").call(Method::GET, "/account", None).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "");
    let r = v
        .http
        .get(format!("{}/account", v.base))
        .bearer_auth("demo-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-user"], "demo@example.com");
    let (status, body) = v.get("/account").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["account"]["name"], "demo");
    assert!(body["account"]["balance"].is_number());

    let r = v
        .http
        .get(format!("{}/nope", v.base))
        .bearer_auth("demo-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], 404);
    let (status, body) = v.call(Method::PUT, "/regions", None).await;
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "");
}

#[tokio::test]
async fn vultr_plans_page_with_cursors_and_filter_by_type() {
    let v = Vultr::start(Timings::instant()).await;
    let (_, first) = v.get("/plans").await;
    assert_eq!(first["plans"].as_array().unwrap().len(), 65);
    assert_eq!(first["meta"]["links"]["next"], "");
    assert_eq!(first["meta"]["links"]["prev"], "");
    let plan = &first["plans"][2];
    assert_eq!(plan["id"], "vc2-1c-1gb");
    assert_eq!(plan["ram"], json!(1024));
    assert!(plan.to_string().contains("\"monthly_cost\":5,"), "{plan}");

    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let q = if cursor.is_empty() {
            "/plans?per_page=20".to_string()
        } else {
            format!("/plans?per_page=20&cursor={}", urlencode(&cursor))
        };
        let (status, page) = v.get(&q).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["meta"]["total"], 65);
        assert_eq!(page["meta"]["links"]["prev"] == "", pages == 0);
        seen.extend(
            page["plans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].clone()),
        );
        pages += 1;
        cursor = page["meta"]["links"]["next"].as_str().unwrap().to_string();
        if cursor.is_empty() {
            break;
        }
        if pages == 2 {
            let prev = page["meta"]["links"]["prev"].as_str().unwrap();
            let (_, back) = v
                .get(&format!("/plans?per_page=20&cursor={}", urlencode(prev)))
                .await;
            assert_eq!(back["plans"][0]["id"], seen[0]);
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(seen.len(), 65);
    assert_eq!(
        seen.iter()
            .map(|s| s.as_str().unwrap())
            .collect::<BTreeSet<_>>()
            .len(),
        65
    );

    let (_, vc2) = v.get("/plans?type=vc2").await;
    assert!(
        vc2["plans"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["type"] == "vc2")
    );
    let (_, windows) = v.get("/plans?type=vc2&os=windows").await;
    let ids: Vec<&str> = windows["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(
        !ids.contains(&"vc2-1c-1gb") && ids.contains(&"vc2-1c-2gb"),
        "{ids:?}"
    );

    let (status, body) = v.get("/plans?cursor=bm9wZQ==").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "cursor");
    let (_, regions) = v.get("/regions?per_page=10").await;
    assert_eq!(regions["regions"].as_array().unwrap().len(), 10);
    assert_eq!(
        regions["meta"]["total"], 11,
        "the real API counts one lookahead region"
    );
}

fn urlencode(s: &str) -> String {
    s.replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}

#[tokio::test]
async fn vultr_the_deprecated_tag_field_still_tags_the_instance() {
    let v = Vultr::start(Timings::instant()).await;
    let mut body = ubuntu("ewr", "vc2-1c-1gb");
    body["tag"] = json!("orc-node=n-1");
    let created = v.create(body).await;
    assert_eq!(created["tags"], json!(["orc-node=n-1"]));
    assert_eq!(created["tag"], "orc-node=n-1");
    let (_, found) = v.get("/instances?tag=orc-node%3Dn-1").await;
    assert_eq!(found["instances"].as_array().unwrap().len(), 1, "{found}");

    let mut both = ubuntu("ewr", "vc2-1c-1gb");
    both["tags"] = json!(["a", "b"]);
    both["tag"] = json!("b");
    assert_eq!(v.create(both).await["tags"], json!(["a", "b"]));

    let id = created["id"].as_str().unwrap();
    let (status, patched) = v
        .call(
            Method::PATCH,
            &format!("/instances/{id}"),
            Some(json!({"tag": "web"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{patched}");
    assert_eq!(patched["instance"]["tags"], json!(["orc-node=n-1", "web"]));
}

#[tokio::test]
async fn vultr_instances_page_past_one_hundred_and_filter_by_tag() {
    let v = Vultr::start(Timings::instant()).await;
    for n in 0..120 {
        let tags = if n % 2 == 0 {
            json!(["even", "all"])
        } else {
            json!(["even-not", "all"])
        };
        let mut body = ubuntu("ewr", "vc2-1c-1gb");
        body["tags"] = tags;
        body["label"] = json!(format!("node-{n:03}"));
        v.create(body).await;
    }
    let (_, first) = v.get("/instances").await;
    assert_eq!(first["instances"].as_array().unwrap().len(), 100);
    assert_eq!(first["meta"]["total"], 120);
    let next = first["meta"]["links"]["next"].as_str().unwrap().to_string();
    assert!(!next.is_empty());
    let (_, second) = v
        .get(&format!("/instances?cursor={}", urlencode(&next)))
        .await;
    let rest = second["instances"].as_array().unwrap();
    assert_eq!(rest.len(), 20);
    assert_eq!(second["meta"]["links"]["next"], "");
    assert_eq!(
        rest[19]["label"], "node-119",
        "listing is in creation order"
    );
    let mut ids: BTreeSet<String> = BTreeSet::new();
    for i in first["instances"].as_array().unwrap().iter().chain(rest) {
        ids.insert(i["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 120);

    let (_, even) = v.get("/instances?tag=even&per_page=500").await;
    let even = even["instances"].as_array().unwrap().clone();
    assert_eq!(even.len(), 60, "tag filter is exact");
    assert!(even.iter().all(|i| i["tags"] == json!(["even", "all"])));
    let (_, labelled) = v.get("/instances?label=node-007").await;
    assert_eq!(labelled["instances"].as_array().unwrap().len(), 1);
    let ip = labelled["instances"][0]["main_ip"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, by_ip) = v.get(&format!("/instances?main_ip={ip}")).await;
    assert_eq!(by_ip["instances"][0]["label"], "node-007");
    let (_, other_region) = v.get("/instances?region=fra").await;
    assert_eq!(other_region["instances"], json!([]));
    assert_eq!(other_region["meta"]["links"]["next"], "");
}

#[tokio::test]
async fn vultr_instance_lifecycle_follows_the_clock() {
    let v = Vultr::start(Timings::realistic()).await;
    let mut body = ubuntu("fra", "vc2-1c-1gb");
    body["label"] = json!("web-1");
    body["tags"] = json!(["b", "a", "b"]);
    body["user_data"] = json!("I2Nsb3VkLWNvbmZpZwo=");
    body["enable_ipv6"] = json!(true);
    let created = v.create(body).await;
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["status"], "pending");
    assert_eq!(created["server_status"], "none");
    assert_eq!(created["power_status"], "running");
    assert_eq!(created["main_ip"], "0.0.0.0");
    assert_eq!(created["disk"], json!(0));
    assert_eq!(created["ram"], json!(1024));
    assert_eq!(created["vcpu_count"], json!(1));
    assert_eq!(created["tags"], json!(["b", "a"]));
    assert_eq!(created["v6_network"], "");
    assert!(
        created["date_created"]
            .as_str()
            .unwrap()
            .ends_with("+00:00")
    );
    assert!(
        created["default_password"]
            .as_str()
            .is_some_and(|p| p.len() >= 12)
    );

    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert!(got["instance"].get("default_password").is_none());
    let (status, err) = v
        .call(Method::DELETE, &format!("/instances/{id}"), None)
        .await;
    assert_error(
        status,
        &err,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Server is currently locked",
    );

    v.advance(6).await;
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert_eq!(got["instance"]["server_status"], "locked");
    let (status, err) = v
        .post(&format!("/instances/{id}/reinstall"), json!({}))
        .await;
    assert_error(
        status,
        &err,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Unable to reinstall server",
    );

    v.advance(5).await;
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    let i = &got["instance"];
    assert_eq!(i["status"], "active");
    assert_eq!(i["server_status"], "installingbooting");
    assert_ne!(i["main_ip"], "0.0.0.0");
    assert_eq!(i["disk"], json!(25));
    assert_eq!(i["v6_network_size"], json!(64));
    assert!(i["v6_main_ip"].as_str().unwrap().starts_with("2001:db8:"));

    v.advance(10).await;
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert_eq!(got["instance"]["server_status"], "ok");

    let (status, _) = v.post(&format!("/instances/{id}/halt"), json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert_eq!(got["instance"]["power_status"], "stopped");
    let (status, _) = v
        .post("/instances/start", json!({"instance_ids": [id]}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert_eq!(got["instance"]["power_status"], "running");

    let (status, re) = v
        .post(
            &format!("/instances/{id}/reinstall"),
            json!({"hostname": "h2"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(re["instance"]["server_status"], "installingbooting");
    assert_eq!(re["instance"]["hostname"], "h2");
    v.advance(20).await;

    let (_, ud) = v.get(&format!("/instances/{id}/user-data")).await;
    assert_eq!(ud["user_data"]["data"], "I2Nsb3VkLWNvbmZpZwo=");
    let (status, patched) = v
        .call(
            Method::PATCH,
            &format!("/instances/{id}"),
            Some(json!({"tags": ["x"], "label": "web-2"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(patched["instance"]["tags"], json!(["x"]));
    assert_eq!(patched["instance"]["label"], "web-2");

    let (status, _) = v
        .call(Method::DELETE, &format!("/instances/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v.get(&format!("/instances/{id}")).await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "instance not found");
    let (status, err) = v
        .call(Method::DELETE, &format!("/instances/{id}"), None)
        .await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "instance not found");
}

#[tokio::test]
async fn vultr_sold_out_and_disabled_regions_show_in_stock_and_create() {
    let v = Vultr::start(Timings::instant()).await;
    let (_, avail) = v.get("/regions/fra/availability").await;
    assert!(
        avail["available_plans"]
            .as_array()
            .unwrap()
            .contains(&json!("vc2-1c-1gb"))
    );
    v.control.sold_out("vc2-1c-1gb", "fra", true).await;
    let (_, avail) = v.get("/regions/fra/availability").await;
    let plans = avail["available_plans"].as_array().unwrap();
    assert!(!plans.contains(&json!("vc2-1c-1gb")));
    assert!(plans.contains(&json!("vc2-1c-2gb")));
    let (_, all) = v.get("/plans?type=vc2").await;
    let plan = all["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "vc2-1c-1gb")
        .unwrap()
        .clone();
    assert!(
        plan["locations"]
            .as_array()
            .unwrap()
            .contains(&json!("fra")),
        "catalogue unchanged"
    );
    let (status, err) = v.post("/instances", ubuntu("fra", "vc2-1c-1gb")).await;
    assert_error(
        status,
        &err,
        StatusCode::BAD_REQUEST,
        "Plan is not available in the selected region.",
    );
    v.create(ubuntu("ams", "vc2-1c-1gb")).await;

    v.control.location_disabled("ams", true).await;
    let (_, avail) = v.get("/regions/ams/availability").await;
    assert_eq!(avail["available_plans"], json!([]));
    let (status, err) = v.post("/instances", ubuntu("ams", "vc2-1c-2gb")).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "not available");

    let (status, err) = v.post("/instances", ubuntu("ewr", "vbm-4c-32gb")).await;
    assert_error(
        status,
        &err,
        StatusCode::BAD_REQUEST,
        "Invalid plan chosen.",
    );
    let (status, err) = v.post("/instances", ubuntu("xyz", "vc2-1c-1gb")).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "region");
    let (status, err) = v
        .post(
            "/instances",
            json!({"region": "ewr", "plan": "vc2-1c-1gb", "os_id": 9}),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "operating system");
    let (status, err) = v
        .post(
            "/instances",
            json!({"region": "sea", "plan": "vc2-1c-0.5gb", "os_id": 2284}),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "not available");
    let (status, err) = v.get("/regions/xyz/availability").await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "region");
}

#[tokio::test]
async fn vultr_rejects_malformed_bodies_and_bad_user_data() {
    let v = Vultr::start(Timings::instant()).await;
    let r = v
        .http
        .post(format!("{}/instances", v.base))
        .bearer_auth("demo-token")
        .header("content-type", "application/json")
        .body("{\"region\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], 400);

    let mut b = ubuntu("ewr", "vc2-1c-1gb");
    b["user_data"] = json!("#cloud-config not base64");
    let (status, err) = v.post("/instances", b).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "base64");
    let (status, err) = v
        .post("/instances", json!({"region": "ewr", "plan": 5}))
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "Invalid JSON");
    let (status, err) = v
        .post("/instances", json!({"region": "ewr", "plan": "vc2-1c-1gb"}))
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "os_id");
    let (status, err) = v.get("/instances?per_page=abc").await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "per_page");
    let (_, list) = v.get("/instances").await;
    assert_eq!(
        list["instances"],
        json!([]),
        "nothing was created by the failed calls"
    );
}

#[tokio::test]
async fn vultr_reserved_ips_attach_only_in_region_and_once() {
    let v = Vultr::start(Timings::instant()).await;
    let (status, r) = v
        .post(
            "/reserved-ips",
            json!({"region": "ewr", "ip_type": "v4", "label": "vip"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let rip = r["reserved_ip"].clone();
    assert_eq!(rip["subnet_size"], json!(32));
    assert_eq!(rip["instance_id"], "");
    let rid = rip["id"].as_str().unwrap().to_string();
    let a = v.create(ubuntu("ewr", "vc2-1c-1gb")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = v.create(ubuntu("ewr", "vc2-1c-1gb")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let far = v.create(ubuntu("fra", "vc2-1c-1gb")).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    let (status, err) = v
        .post(
            &format!("/reserved-ips/{rid}/attach"),
            json!({"instance_id": far}),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "same region");
    let (status, _) = v
        .post(
            &format!("/reserved-ips/{rid}/attach"),
            json!({"instance_id": a}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, got) = v.get(&format!("/reserved-ips/{rid}")).await;
    assert_eq!(got["reserved_ip"]["instance_id"], json!(a));
    let (status, err) = v
        .post(
            &format!("/reserved-ips/{rid}/attach"),
            json!({"instance_id": b}),
        )
        .await;
    assert_error(
        status,
        &err,
        StatusCode::BAD_REQUEST,
        "Floating IPv4 address is already attached to another server",
    );
    let (_, ips) = v.get(&format!("/instances/{a}/ipv4")).await;
    let kinds: Vec<&str> = ips["ipv4s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["main_ip", "secondary_ip"]);
    let mut with_rip = ubuntu("ewr", "vc2-1c-1gb");
    with_rip["reserved_ipv4"] = json!(rid);
    let (status, err) = v.post("/instances", with_rip.clone()).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "already attached");

    let (status, _) = v
        .post(&format!("/reserved-ips/{rid}/detach"), json!({}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v
        .post(&format!("/reserved-ips/{rid}/detach"), json!({}))
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "not attached");
    let created = v.create(with_rip).await;
    assert_eq!(
        created["main_ip"], rip["subnet"],
        "created on the reserved address"
    );

    let main_b = v.get(&format!("/instances/{b}")).await.1["instance"]["main_ip"].clone();
    let (status, conv) = v
        .post(
            "/reserved-ips/convert",
            json!({"ip_address": main_b, "label": "kept"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{conv}");
    assert_eq!(conv["reserved_ip"]["instance_id"], json!(b));
    let (status, patched) = v
        .call(
            Method::PATCH,
            &format!("/reserved-ips/{rid}"),
            Some(json!({"label": "renamed"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(patched["reserved_ip"]["label"], "renamed");
    let (status, _) = v
        .call(Method::DELETE, &format!("/reserved-ips/{rid}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v.get(&format!("/reserved-ips/{rid}")).await;
    assert_error(
        status,
        &err,
        StatusCode::NOT_FOUND,
        "Invalid reserved-ip ID",
    );
}

#[tokio::test]
async fn vultr_vpc_delete_is_refused_while_attached() {
    let v = Vultr::start(Timings::instant()).await;
    let (status, vpc) = v
        .post("/vpcs", json!({"region": "ewr", "description": "net", "v4_subnet": "10.9.0.0", "v4_subnet_mask": 24}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{vpc}");
    let vpc_id = vpc["vpc"]["id"].as_str().unwrap().to_string();
    assert_eq!(vpc["vpc"]["v4_subnet_mask"], json!(24));
    let mut body = ubuntu("ewr", "vc2-1c-1gb");
    body["attach_vpc"] = json!([vpc_id]);
    let inst = v.create(body).await;
    let id = inst["id"].as_str().unwrap().to_string();
    assert!(inst["internal_ip"].as_str().unwrap().starts_with("10.9.0."));
    let (_, ports) = v.get(&format!("/instances/{id}/vpcs")).await;
    assert_eq!(ports["vpcs"][0]["id"], json!(vpc_id));
    assert!(ports["vpcs"][0]["mac_address"].is_string());

    let (status, err) = v
        .call(Method::DELETE, &format!("/vpcs/{vpc_id}"), None)
        .await;
    assert_error(
        status,
        &err,
        StatusCode::BAD_REQUEST,
        "attached to this VPC network",
    );
    let (status, _) = v
        .post(
            &format!("/instances/{id}/vpcs/detach"),
            json!({"vpc_id": vpc_id}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = v
        .call(Method::DELETE, &format!("/vpcs/{vpc_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v.get(&format!("/vpcs/{vpc_id}")).await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "Invalid VPC ID");

    let (status, err) = v.get("/vpc2").await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "no longer supported");
    let mut body = ubuntu("ewr", "vc2-1c-1gb");
    body["enable_vpc2"] = json!(true);
    let (status, err) = v.post("/instances", body).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "no longer supported");
}

#[tokio::test]
async fn vultr_accounts_are_isolated_and_reset_forgets_everything() {
    let accounts = Accounts::new(vec![
        Account {
            name: "demo".into(),
            secret: "demo-token".into(),
        },
        Account {
            name: "other".into(),
            secret: "other-token".into(),
        },
    ]);
    let v = Vultr::start_with(Timings::instant(), accounts).await;
    let id = v.create(ubuntu("ewr", "vc2-1c-1gb")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = v
        .post("/ssh-keys", json!({"name": "k", "ssh_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvXGWm0fHqu9y6gHjIQoPbVnB0jl+2/0A1+CEJ1x6bp me"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let other = v.as_key("other-token");
    let (_, list) = other.call(Method::GET, "/instances", None).await;
    assert_eq!(list["instances"], json!([]));
    let (_, keys) = other.call(Method::GET, "/ssh-keys", None).await;
    assert_eq!(keys["ssh_keys"], json!([]));
    let (status, err) = other
        .call(Method::GET, &format!("/instances/{id}"), None)
        .await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "instance not found");
    let (status, _) = other
        .call(Method::DELETE, &format!("/instances/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    v.control.reset().await;
    v.control.rate_limit(1_000_000, 1.0, None).await;
    let (_, list) = v.get("/instances").await;
    assert_eq!(list["instances"], json!([]));
    let (_, keys) = v.get("/ssh-keys").await;
    assert_eq!(keys["ssh_keys"], json!([]));
    let again = v.create(ubuntu("ewr", "vc2-1c-1gb")).await;
    assert_eq!(again["id"], json!(id), "ids start over after a reset");
}

#[tokio::test]
async fn vultr_action_failures_break_an_install_then_a_halt() {
    let v = Vultr::start(Timings::realistic()).await;
    v.control.fail_next_actions(2).await;
    let id = v.create(ubuntu("ewr", "vc2-1c-1gb")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    v.advance(60).await;
    let (_, got) = v.get(&format!("/instances/{id}")).await;
    assert_eq!(got["instance"]["status"], "active");
    assert_eq!(got["instance"]["server_status"], "installingbooting");
    assert_eq!(got["instance"]["power_status"], "stopped");
    let (status, err) = v.post(&format!("/instances/{id}/halt"), json!({})).await;
    assert_error(
        status,
        &err,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Unable to halt server",
    );
    let (status, _) = v.post(&format!("/instances/{id}/halt"), json!({})).await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "only two failures were asked for"
    );
    let (status, _) = v
        .call(Method::DELETE, &format!("/instances/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn vultr_reverse_dns_keys_and_blocks() {
    let v = Vultr::start(Timings::instant()).await;
    let mut body = ubuntu("ewr", "vc2-1c-1gb");
    body["enable_ipv6"] = json!(true);
    let inst = v.create(body).await;
    let id = inst["id"].as_str().unwrap().to_string();
    let ip = inst["main_ip"].as_str().unwrap().to_string();
    let (status, _) = v
        .post(
            &format!("/instances/{id}/ipv4/reverse"),
            json!({"ip": ip, "reverse": "web.example.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, ips) = v.get(&format!("/instances/{id}/ipv4")).await;
    assert_eq!(ips["ipv4s"][0]["reverse"], "web.example.com");
    let (status, _) = v
        .post(
            &format!("/instances/{id}/ipv4/reverse/default"),
            json!({"ip": ip}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, ips) = v.get(&format!("/instances/{id}/ipv4")).await;
    assert_ne!(ips["ipv4s"][0]["reverse"], "web.example.com");
    let (status, err) = v
        .post(
            &format!("/instances/{id}/ipv4/reverse"),
            json!({"ip": "192.0.2.1", "reverse": "x"}),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "does not belong");

    let v6 = inst["v6_main_ip"].as_str().unwrap().to_string();
    let (status, _) = v
        .post(
            &format!("/instances/{id}/ipv6/reverse"),
            json!({"ip": v6, "reverse": "six.example.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, rev) = v.get(&format!("/instances/{id}/ipv6/reverse")).await;
    assert_eq!(
        rev["reverse_ipv6s"],
        json!([{"ip": v6, "reverse": "six.example.com"}])
    );
    let (status, _) = v
        .call(
            Method::DELETE,
            &format!("/instances/{id}/ipv6/reverse/{v6}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, rev) = v.get(&format!("/instances/{id}/ipv6/reverse")).await;
    assert_eq!(rev["reverse_ipv6s"], json!([]));

    let (status, err) = v
        .post("/ssh-keys", json!({"name": "bad", "ssh_key": "nope"}))
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "SSH key");
    let (_, key) = v
        .post("/ssh-keys", json!({"name": "k", "ssh_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvXGWm0fHqu9y6gHjIQoPbVnB0jl+2/0A1+CEJ1x6bp me"}))
        .await;
    let kid = key["ssh_key"]["id"].as_str().unwrap().to_string();
    let (status, _) = v
        .call(
            Method::PATCH,
            &format!("/ssh-keys/{kid}"),
            Some(json!({"name": "k2"})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, key) = v.get(&format!("/ssh-keys/{kid}")).await;
    assert_eq!(key["ssh_key"]["name"], "k2");
    let mut with_key = ubuntu("ewr", "vc2-1c-1gb");
    with_key["sshkey_id"] = json!(["00000000-0000-4000-8000-000000000000"]);
    let (status, err) = v.post("/instances", with_key).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "SSH key");
    let (status, _) = v
        .call(Method::DELETE, &format!("/ssh-keys/{kid}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v.get(&format!("/ssh-keys/{kid}")).await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "Invalid ssh key");

    let (status, blk) = v
        .post(
            "/blocks",
            json!({"region": "ewr", "size_gb": 50, "label": "data"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{blk}");
    assert_eq!(blk["block"]["cost"], json!(5));
    assert_eq!(blk["block"]["block_type"], "high_perf");
    let bid = blk["block"]["id"].as_str().unwrap().to_string();
    let (status, _) = v
        .post(
            &format!("/blocks/{bid}/attach"),
            json!({"instance_id": id, "live": true}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v
        .call(Method::DELETE, &format!("/blocks/{bid}"), None)
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "attached");
    let (status, _) = v
        .post(&format!("/blocks/{bid}/detach"), json!({"live": true}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v
        .call(
            Method::PATCH,
            &format!("/blocks/{bid}"),
            Some(json!({"size_gb": 20})),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "grow");
    let (status, _) = v
        .call(Method::DELETE, &format!("/blocks/{bid}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = v
        .post(
            "/blocks",
            json!({"region": "fra", "size_gb": 50, "block_type": "high_perf"}),
        )
        .await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "not available");
}
