//! The Hetzner Cloud emulator over raw HTTP: auth, error shapes, pagination, label
//! selectors, the server lifecycle in emulated time, capacity errors, uniqueness, action
//! failures, account isolation and reset.

use orc_emu::{Account, Accounts, EmuConfig, RunningEmulators, Timings};
use orc_testkit::emu::{EmuControl, Fault};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

struct Api {
    http: reqwest::Client,
    base: String,
    control: EmuControl,
    token: String,
    _emu: RunningEmulators,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Reply {
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }
    fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

async fn start_with(timings: Timings, accounts: Accounts) -> Api {
    let mut config = EmuConfig::for_tests();
    config.vultr = None;
    config.robot = None;
    config.timings = timings;
    config.accounts = accounts;
    let emu = config.start().await.expect("emulator starts");
    let h = emu.hetzner.as_ref().expect("hetzner emulator");
    Api {
        http: reqwest::Client::new(),
        base: emu.hetzner_url().expect("hetzner url"),
        control: EmuControl::new(h.root_url()),
        token: "demo-token".into(),
        _emu: emu,
    }
}

async fn start() -> Api {
    start_with(Timings::instant(), Accounts::default()).await
}

impl Api {
    async fn raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> Reply {
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body read");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.raw(Method::GET, path, Some(&self.token), None).await
    }
    async fn post(&self, path: &str, body: Value) -> Reply {
        self.raw(
            Method::POST,
            path,
            Some(&self.token),
            Some(body.to_string()),
        )
        .await
    }
    async fn put(&self, path: &str, body: Value) -> Reply {
        self.raw(Method::PUT, path, Some(&self.token), Some(body.to_string()))
            .await
    }
    async fn delete(&self, path: &str) -> Reply {
        self.raw(Method::DELETE, path, Some(&self.token), None)
            .await
    }

    async fn create_server(&self, name: &str, labels: Value) -> Reply {
        self.post(
            "/servers",
            json!({"name": name, "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1", "labels": labels}),
        )
        .await
    }
}

fn ids(reply: &Reply, key: &str) -> Vec<u64> {
    reply.body[key]
        .as_array()
        .expect("list")
        .iter()
        .map(|v| v["id"].as_u64().expect("id"))
        .collect()
}

fn names(reply: &Reply, key: &str) -> Vec<String> {
    let mut n: Vec<String> = reply.body[key]
        .as_array()
        .expect("list")
        .iter()
        .map(|v| v["name"].as_str().expect("name").to_string())
        .collect();
    n.sort();
    n
}

#[tokio::test]
async fn hetzner_routing_comes_before_auth() {
    let api = start().await;
    let unknown = api.raw(Method::GET, "/no_such_thing", None, None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.code(), "not_found");
    assert!(unknown.content_type().starts_with("application/json"));

    let missing = api.raw(Method::GET, "/servers", None, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.code(), "unauthorized");
    assert_eq!(missing.message(), "token is required");
    assert!(missing.body["error"]["details"].is_null());
    assert!(missing.content_type().starts_with("application/json"));

    let bad = api.raw(Method::GET, "/servers", Some("nope"), None).await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert_eq!(bad.message(), "the token you have provided is invalid");
    assert!(bad.headers.contains_key("ratelimit-limit"));
}

#[tokio::test]
async fn hetzner_error_shapes_for_unknown_ids_methods_and_bodies() {
    let api = start().await;
    let r = api.get("/servers/424242").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.code(), "not_found");
    assert!(r.message().contains("424242"), "{}", r.message());

    let r = api.get("/servers/abc").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "invalid_input");

    let r = api
        .raw(Method::PATCH, "/servers", Some("demo-token"), None)
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.code(), "method_not_allowed");
    assert!(r.content_type().starts_with("application/json"));

    let r = api
        .raw(
            Method::POST,
            "/servers",
            Some("demo-token"),
            Some("{not json".into()),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "json_error");

    let r = api.post("/servers", json!({"server_type": "cx23"})).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.code(), "invalid_input");
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "name");

    let created = api.create_server("web", json!({})).await;
    let id = created.body["server"]["id"].as_u64().unwrap();
    let r = api
        .post(&format!("/servers/{id}/actions/levitate"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let r = api.get("/servers?page=zero").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "invalid_input");

    let r = api.get("/datacenters").await;
    assert_eq!(r.status, StatusCode::GONE);
    assert_eq!(r.code(), "deprecated_api_endpoint");
    assert!(r.body["error"]["details"]["announcement"].is_string());
}

#[tokio::test]
async fn hetzner_pagination_clamps_and_links_pages() {
    let api = start().await;
    for i in 0..55 {
        let r = api
            .create_server(&format!("srv-{i:02}"), json!({"batch": "a"}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    let first = api.get("/servers?per_page=100").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(ids(&first, "servers").len(), 50);
    let p = &first.body["meta"]["pagination"];
    assert_eq!(p["page"], 1);
    assert_eq!(p["per_page"], 50);
    assert_eq!(p["previous_page"], Value::Null);
    assert_eq!(p["next_page"], 2);
    assert_eq!(p["last_page"], 2);
    assert_eq!(p["total_entries"], 55);
    let link = first.headers["link"].to_str().unwrap();
    assert!(link.contains("page=2&per_page=50>; rel=\"next\""), "{link}");
    assert!(link.contains("rel=\"last\""), "{link}");
    assert!(!link.contains("rel=\"prev\""), "{link}");

    let second = api.get("/servers?page=2&per_page=50").await;
    assert_eq!(ids(&second, "servers").len(), 5);
    let p = &second.body["meta"]["pagination"];
    assert_eq!(p["previous_page"], 1);
    assert_eq!(p["next_page"], Value::Null);
    let link = second.headers["link"].to_str().unwrap();
    assert!(link.contains("rel=\"prev\"") && link.contains("rel=\"last\""));
    assert!(!link.contains("rel=\"next\""), "{link}");

    let default = api.get("/servers").await;
    assert_eq!(default.body["meta"]["pagination"]["per_page"], 25);
    assert_eq!(default.body["meta"]["pagination"]["last_page"], 3);

    let single = api.get("/servers?name=srv-07").await;
    assert_eq!(ids(&single, "servers").len(), 1);
    let link = single.headers["link"].to_str().unwrap();
    assert!(
        link.contains("rel=\"last\"") && !link.contains("rel=\"next\""),
        "{link}"
    );

    let desc = api.get("/servers?sort=name:desc&per_page=3").await;
    let got: Vec<&str> = desc.body["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["srv-54", "srv-53", "srv-52"]);

    let bad = api.get("/servers?sort=color").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn hetzner_label_selectors_support_every_operator() {
    let api = start().await;
    api.create_server("a", json!({"env": "prod", "tier": "web"}))
        .await;
    api.create_server("b", json!({"env": "dev", "tier": "db"}))
        .await;
    api.create_server("c", json!({"tier": "web"})).await;
    let cases: [(&str, &[&str]); 10] = [
        ("env=prod", &["a"]),
        ("env==dev", &["b"]),
        ("env!=prod", &["b", "c"]),
        ("env", &["a", "b"]),
        ("!env", &["c"]),
        ("env in (prod,dev)", &["a", "b"]),
        ("env notin (prod)", &["b", "c"]),
        ("tier=web,env", &["a"]),
        ("tier in (web), !env", &["c"]),
        ("missing", &[]),
    ];
    for (selector, expected) in cases {
        let q = serde_urlencoded::to_string([("label_selector", selector)]).unwrap();
        let r = api.get(&format!("/servers?{q}")).await;
        assert_eq!(r.status, StatusCode::OK, "{selector}: {:?}", r.body);
        assert_eq!(names(&r, "servers"), expected, "selector {selector}");
    }
    let q = serde_urlencoded::to_string([("label_selector", "env in (prod")]).unwrap();
    let r = api.get(&format!("/servers?{q}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "invalid_input");

    let id = api.get("/servers?name=a").await.body["servers"][0]["id"]
        .as_u64()
        .unwrap();
    let r = api
        .put(&format!("/servers/{id}"), json!({"labels": {"env": "dev"}}))
        .await;
    assert_eq!(r.body["server"]["labels"], json!({"env": "dev"}));
    let r = api.get("/servers?label_selector=tier%3Dweb").await;
    assert_eq!(names(&r, "servers"), ["c"]);
}

#[tokio::test]
async fn hetzner_invalid_labels_are_refused_with_field_details() {
    let api = start().await;
    for labels in [
        json!({"hetzner.cloud/x": "1"}),
        json!({"-bad": "1"}),
        json!({"k": "bad value"}),
        json!({"k": "a".repeat(64)}),
    ] {
        let r = api.create_server("x", labels.clone()).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{labels}");
        assert_eq!(r.code(), "invalid_input");
        let field = &r.body["error"]["details"]["fields"][0];
        assert_eq!(field["name"], "labels");
        assert!(!field["messages"].as_array().unwrap().is_empty());
    }
    assert_eq!(ids(&api.get("/servers").await, "servers").len(), 0);
}

#[tokio::test]
async fn hetzner_server_is_locked_until_the_clock_passes_its_create_time() {
    let api = start_with(Timings::realistic(), Accounts::default()).await;
    let r = api.create_server("slow", json!({})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let id = r.body["server"]["id"].as_u64().unwrap();
    assert_eq!(r.body["server"]["status"], "initializing");
    assert_eq!(r.body["server"]["locked"], true);
    assert_eq!(r.body["action"]["status"], "running");
    assert_eq!(r.body["next_actions"][0]["command"], "start_server");
    assert!(r.body["root_password"].is_string());
    let action = r.body["next_actions"][0]["id"].as_u64().unwrap();

    let locked = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(locked.status, StatusCode::LOCKED);
    assert_eq!(locked.code(), "locked");

    api.control.advance_clock(12.0).await;
    let mid = api.get(&format!("/servers/{id}")).await;
    assert_eq!(mid.body["server"]["status"], "starting");

    api.control.advance_clock(30.0).await;
    let done = api.get(&format!("/servers/{id}")).await;
    assert_eq!(done.body["server"]["status"], "running");
    assert_eq!(done.body["server"]["locked"], false);
    let a = api.get(&format!("/actions/{action}")).await;
    assert_eq!(a.body["action"]["status"], "success");
    assert_eq!(a.body["action"]["progress"], 100);
    assert!(a.body["action"]["finished"].is_string());

    let off = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(off.status, StatusCode::CREATED);
    assert_eq!(off.body["action"]["command"], "stop_server");
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "stopping"
    );
    api.control.advance_clock(10.0).await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "off"
    );

    let del = api.delete(&format!("/servers/{id}")).await;
    assert_eq!(del.status, StatusCode::OK);
    assert_eq!(del.body["action"]["command"], "delete_server");
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "deleting"
    );
    api.control.advance_clock(10.0).await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn hetzner_capacity_errors_have_the_observed_forms() {
    let api = start().await;
    api.control.sold_out("cx23", "fsn1", true).await;
    let sold = api.create_server("a", json!({})).await;
    assert_eq!(sold.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(sold.code(), "resource_unavailable");
    assert_eq!(sold.message(), "error during placement");
    assert!(sold.body["error"]["details"].is_null());
    let t = api.get("/server_types?name=cx23").await;
    let locs = t.body["server_types"][0]["locations"].as_array().unwrap();
    let fsn1 = locs.iter().find(|l| l["name"] == "fsn1").unwrap();
    let nbg1 = locs.iter().find(|l| l["name"] == "nbg1").unwrap();
    assert_eq!(fsn1["available"], false);
    assert_eq!(nbg1["available"], true);

    api.control.location_disabled("nbg1", true).await;
    let disabled = api
        .post(
            "/servers",
            json!({"name": "b", "server_type": "ccx13", "image": "ubuntu-24.04", "location": "nbg1"}),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(disabled.code(), "resource_unavailable");
    assert_eq!(disabled.message(), "server location disabled");

    let unsupported = api
        .post(
            "/servers",
            json!({"name": "c", "server_type": "cx23", "image": "ubuntu-24.04", "location": "ash"}),
        )
        .await;
    assert_eq!(unsupported.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unsupported.code(), "invalid_input");
    assert_eq!(
        unsupported.message(),
        "unsupported location for server type"
    );

    let removed = api
        .post(
            "/servers",
            json!({"name": "d", "server_type": "cx22", "image": "ubuntu-24.04", "location": "hel1"}),
        )
        .await;
    assert_eq!(removed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(ids(&api.get("/server_types?name=cx22").await, "server_types").is_empty());

    let ok = api
        .post(
            "/servers",
            json!({"name": "e", "server_type": 114, "image": "ubuntu-24.04", "location": "3"}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{:?}", ok.body);
    assert_eq!(ok.body["server"]["location"]["name"], "hel1");
    assert_eq!(ok.body["server"]["image"]["architecture"], "x86");
}

#[tokio::test]
async fn hetzner_names_and_key_fingerprints_are_unique() {
    let api = start().await;
    assert_eq!(
        api.create_server("dup", json!({})).await.status,
        StatusCode::CREATED
    );
    let again = api.create_server("dup", json!({})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.code(), "uniqueness_error");
    assert_eq!(again.message(), "server name is already used");

    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKXDvO6tPGNwgp2AyT2t9jYm2YGcsBuJZHAVrGTPWbMH me";
    let k = api
        .post("/ssh_keys", json!({"name": "k1", "public_key": key}))
        .await;
    assert_eq!(k.status, StatusCode::CREATED);
    let fp = k.body["ssh_key"]["fingerprint"].as_str().unwrap();
    assert_eq!(fp.split(':').count(), 16);
    let same = api
        .post("/ssh_keys", json!({"name": "k2", "public_key": key}))
        .await;
    assert_eq!(same.status, StatusCode::CONFLICT);
    assert_eq!(
        same.body["error"]["details"]["fields"][0]["name"],
        "public_key"
    );
    let garbage = api
        .post(
            "/ssh_keys",
            json!({"name": "k3", "public_key": "ssh-rsa ???"}),
        )
        .await;
    assert_eq!(garbage.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(garbage.code(), "invalid_input");
    let by_fp = api.get(&format!("/ssh_keys?fingerprint={fp}")).await;
    assert_eq!(names(&by_fp, "ssh_keys"), ["k1"]);

    let with_key = api
        .post(
            "/servers",
            json!({"name": "keyed", "server_type": "cx23", "image": "ubuntu-24.04", "ssh_keys": ["k1"]}),
        )
        .await;
    assert_eq!(with_key.status, StatusCode::CREATED);
    assert!(with_key.body["root_password"].is_null());
}

#[tokio::test]
async fn hetzner_failed_action_ends_in_error_and_leaves_the_server() {
    let api = start().await;
    let id = api.create_server("f", json!({})).await.body["server"]["id"]
        .as_u64()
        .unwrap();
    api.control.fail_next_actions(1).await;
    let r = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let action = r.body["action"]["id"].as_u64().unwrap();
    let a = api.get(&format!("/actions?id={action}")).await;
    assert_eq!(a.body["actions"][0]["status"], "error");
    assert_eq!(a.body["actions"][0]["error"]["code"], "action_failed");
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    let next = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let next_id = next.body["action"]["id"].as_u64().unwrap();
    assert_eq!(
        api.get(&format!("/actions/{next_id}")).await.body["action"]["status"],
        "success"
    );
}

#[tokio::test]
async fn hetzner_actions_endpoints_require_ids_and_sort() {
    let api = start().await;
    let created = api.create_server("s", json!({})).await;
    let id = created.body["server"]["id"].as_u64().unwrap();
    let a1 = created.body["action"]["id"].as_u64().unwrap();
    let a2 = created.body["next_actions"][0]["id"].as_u64().unwrap();

    let none = api.get("/actions").await;
    assert_eq!(none.status, StatusCode::BAD_REQUEST);
    assert_eq!(none.code(), "invalid_input");

    let both = api
        .get(&format!(
            "/actions?id={a2}&id={a1}&id=1&sort=status&sort=id"
        ))
        .await;
    assert_eq!(ids(&both, "actions"), [a1, a2]);
    assert!(
        both.body.get("meta").is_none(),
        "GET /actions is not paginated"
    );

    let of_server = api.get(&format!("/servers/{id}/actions")).await;
    assert_eq!(ids(&of_server, "actions"), [a1, a2]);
    let one = api.get(&format!("/servers/{id}/actions/{a1}")).await;
    assert_eq!(one.body["action"]["command"], "create_server");
    let all = api.get("/servers/actions?sort=id:desc").await;
    assert_eq!(ids(&all, "actions"), [a2, a1]);
    let by_id = api.get(&format!("/servers/actions/{a2}")).await;
    assert_eq!(by_id.body["action"]["id"], a2);
}

#[tokio::test]
async fn hetzner_accounts_are_isolated_and_reset_forgets_everything() {
    let accounts = Accounts::new(vec![
        Account {
            name: "alice".into(),
            secret: "alice-token".into(),
        },
        Account {
            name: "bob".into(),
            secret: "bob-token".into(),
        },
    ]);
    let mut api = start_with(Timings::instant(), accounts).await;
    api.token = "alice-token".into();
    let id = api.create_server("mine", json!({})).await.body["server"]["id"]
        .as_u64()
        .unwrap();
    api.token = "bob-token".into();
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(ids(&api.get("/servers").await, "servers").is_empty());
    assert_eq!(
        api.create_server("mine", json!({})).await.status,
        StatusCode::CREATED,
        "names are unique per account only"
    );

    api.control.reset().await;
    api.token = "alice-token".into();
    assert!(ids(&api.get("/servers").await, "servers").is_empty());
    assert!(ids(&api.get("/primary_ips").await, "primary_ips").is_empty());
}

#[tokio::test]
async fn hetzner_delete_takes_auto_delete_ips_and_releases_others() {
    let api = start().await;
    let kept = api
        .post(
            "/primary_ips",
            json!({"name": "kept", "type": "ipv4", "location": "fsn1", "auto_delete": false}),
        )
        .await;
    assert_eq!(kept.status, StatusCode::CREATED);
    assert_eq!(kept.body["primary_ip"]["assignee_type"], "unassigned");
    assert!(kept.body["action"].is_null());
    let kept_id = kept.body["primary_ip"]["id"].as_u64().unwrap();

    let created = api
        .post(
            "/servers",
            json!({"name": "s", "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1",
                   "public_net": {"enable_ipv4": true, "enable_ipv6": true, "ipv4": kept_id}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let server = &created.body["server"];
    let id = server["id"].as_u64().unwrap();
    assert_eq!(server["public_net"]["ipv4"]["id"], kept_id);
    let v6 = server["public_net"]["ipv6"]["id"].as_u64().unwrap();
    assert!(
        server["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .ends_with("::/64")
    );

    let busy = api.delete(&format!("/primary_ips/{kept_id}")).await;
    assert_eq!(busy.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(busy.code(), "must_be_unassigned");
    let running = api
        .post(
            &format!("/primary_ips/{kept_id}/actions/unassign"),
            json!({}),
        )
        .await;
    assert_eq!(running.code(), "server_not_stopped");

    assert_eq!(
        api.delete(&format!("/servers/{id}")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.get(&format!("/primary_ips/{v6}")).await.status,
        StatusCode::NOT_FOUND
    );
    let after = api.get(&format!("/primary_ips/{kept_id}")).await;
    assert_eq!(after.body["primary_ip"]["assignee_id"], Value::Null);
    assert_eq!(after.body["primary_ip"]["assignee_type"], "unassigned");
    assert_eq!(
        api.delete(&format!("/primary_ips/{kept_id}")).await.status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn hetzner_networks_hand_out_private_ips_from_the_subnet() {
    let api = start().await;
    let net = api
        .post(
            "/networks",
            json!({"name": "n", "ip_range": "10.0.0.0/16",
                   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "eu-central"}],
                   "labels": {"orc": "1"}}),
        )
        .await;
    assert_eq!(net.status, StatusCode::CREATED, "{:?}", net.body);
    assert_eq!(net.body["network"]["subnets"][0]["gateway"], "10.0.0.1");
    let net_id = net.body["network"]["id"].as_u64().unwrap();

    let s = api
        .post(
            "/servers",
            json!({"name": "p", "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1",
                   "networks": [net_id], "public_net": {"enable_ipv4": false, "enable_ipv6": false}}),
        )
        .await;
    assert_eq!(s.status, StatusCode::CREATED, "{:?}", s.body);
    assert_eq!(s.body["server"]["private_net"][0]["ip"], "10.0.0.2");
    assert!(s.body["server"]["public_net"]["ipv4"].is_null());

    let no_interface = api
        .post(
            "/servers",
            json!({"name": "q", "server_type": "cx23", "image": "ubuntu-24.04",
                   "public_net": {"enable_ipv4": false, "enable_ipv6": false}}),
        )
        .await;
    assert_eq!(no_interface.status, StatusCode::UNPROCESSABLE_ENTITY);

    let us = api
        .post(
            "/servers",
            json!({"name": "r", "server_type": "ccx13", "image": "ubuntu-24.04", "location": "ash",
                   "networks": [net_id]}),
        )
        .await;
    assert_eq!(us.code(), "no_subnet_available");

    let second = api
        .post(
            "/servers",
            json!({"name": "t", "server_type": "cx23", "image": "ubuntu-24.04", "location": "nbg1"}),
        )
        .await;
    let second_id = second.body["server"]["id"].as_u64().unwrap();
    let attach = api
        .post(
            &format!("/servers/{second_id}/actions/attach_to_network"),
            json!({"network": net_id}),
        )
        .await;
    assert_eq!(attach.status, StatusCode::CREATED);
    let got = api.get(&format!("/servers/{second_id}")).await;
    assert_eq!(got.body["server"]["private_net"][0]["ip"], "10.0.0.3");
    let n = api.get(&format!("/networks/{net_id}")).await;
    assert_eq!(n.body["network"]["servers"].as_array().unwrap().len(), 2);

    let route = api
        .post(
            &format!("/networks/{net_id}/actions/add_route"),
            json!({"destination": "10.100.1.0/24", "gateway": "10.0.0.9"}),
        )
        .await;
    assert_eq!(route.status, StatusCode::CREATED);
    let overlap = api
        .post(
            &format!("/networks/{net_id}/actions/add_subnet"),
            json!({"type": "cloud", "ip_range": "10.0.0.128/25", "network_zone": "eu-central"}),
        )
        .await;
    assert_eq!(overlap.status, StatusCode::UNPROCESSABLE_ENTITY);
    let n = api.get(&format!("/networks/{net_id}")).await;
    assert_eq!(n.body["network"]["routes"][0]["gateway"], "10.0.0.9");
    assert_eq!(
        api.delete(&format!("/networks/{net_id}")).await.status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn hetzner_catalogue_prices_and_images() {
    let api = start().await;
    let pricing = api.get("/pricing").await;
    assert_eq!(pricing.body["pricing"]["currency"], "EUR");
    let cx23 = pricing.body["pricing"]["server_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "cx23")
        .unwrap()
        .clone();
    assert_eq!(cx23["prices"][0]["price_monthly"]["net"], "5.4900000000");
    assert_eq!(
        cx23["prices"][0]["price_monthly"]["gross"],
        "6.5331000000000000"
    );

    let arm = api.get("/images?name=ubuntu-24.04&architecture=arm").await;
    assert_eq!(arm.body["images"].as_array().unwrap().len(), 1);
    assert_eq!(arm.body["images"][0]["architecture"], "arm");
    let apps = api.get("/images?type=app").await;
    assert!(
        apps.body["images"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] == "app")
    );
    let bad = api.get("/images?type=weird").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let arm_server = api
        .post(
            "/servers",
            json!({"name": "arm", "server_type": "cax11", "image": "ubuntu-24.04", "location": "fsn1"}),
        )
        .await;
    assert_eq!(arm_server.body["server"]["image"]["architecture"], "arm");
    assert_eq!(arm_server.body["server"]["primary_disk_size"], 40);
    assert_eq!(arm_server.body["server"]["datacenter"]["name"], "fsn1-dc14");

    let loc = api.get("/locations/6").await;
    assert_eq!(loc.body["location"]["network_zone"], "ap-southeast");
}

#[tokio::test]
async fn hetzner_server_actions_change_the_server() {
    let api = start().await;
    let created = api.create_server("act", json!({})).await;
    let id = created.body["server"]["id"].as_u64().unwrap();
    let v4 = created.body["server"]["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    let v6 = created.body["server"]["public_net"]["ipv6"]["ip"]
        .as_str()
        .unwrap()
        .replace("::/64", "::1");
    let path = |a: &str| format!("/servers/{id}/actions/{a}");

    let ptr = api
        .post(
            &path("change_dns_ptr"),
            json!({"ip": v4, "dns_ptr": "web.example.com"}),
        )
        .await;
    assert_eq!(ptr.status, StatusCode::CREATED);
    api.post(
        &path("change_dns_ptr"),
        json!({"ip": v6, "dns_ptr": "v6.example.com"}),
    )
    .await;
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(
        s.body["server"]["public_net"]["ipv4"]["dns_ptr"],
        "web.example.com"
    );
    assert_eq!(
        s.body["server"]["public_net"]["ipv6"]["dns_ptr"][0],
        json!({"ip": v6, "dns_ptr": "v6.example.com"})
    );
    let foreign = api
        .post(
            &path("change_dns_ptr"),
            json!({"ip": "1.2.3.4", "dns_ptr": "x.example.com"}),
        )
        .await;
    assert_eq!(foreign.status, StatusCode::UNPROCESSABLE_ENTITY);
    api.post(&path("change_dns_ptr"), json!({"ip": v4, "dns_ptr": null}))
        .await;
    let s = api.get(&format!("/servers/{id}")).await;
    assert!(
        s.body["server"]["public_net"]["ipv4"]["dns_ptr"]
            .as_str()
            .unwrap()
            .ends_with(".clients.your-server.de")
    );

    let rebuilt = api
        .post(&path("rebuild"), json!({"image": "debian-12"}))
        .await;
    assert_eq!(rebuilt.status, StatusCode::CREATED);
    assert!(rebuilt.body["root_password"].is_string());
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(s.body["server"]["image"]["name"], "debian-12");
    assert_eq!(s.body["server"]["status"], "running");

    let rescue = api
        .post(&path("enable_rescue"), json!({"type": "linux64"}))
        .await;
    assert!(rescue.body["root_password"].is_string());
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["rescue_enabled"],
        true
    );

    let running_resize = api
        .post(
            &path("change_type"),
            json!({"server_type": "cx33", "upgrade_disk": false}),
        )
        .await;
    assert_eq!(running_resize.code(), "server_not_stopped");
    api.post(&path("poweroff"), json!({})).await;
    let arm = api
        .post(
            &path("change_type"),
            json!({"server_type": "cax11", "upgrade_disk": false}),
        )
        .await;
    assert_eq!(arm.status, StatusCode::UNPROCESSABLE_ENTITY);
    let resized = api
        .post(
            &path("change_type"),
            json!({"server_type": "cx33", "upgrade_disk": true}),
        )
        .await;
    assert_eq!(resized.status, StatusCode::CREATED);
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(s.body["server"]["server_type"]["name"], "cx33");
    assert_eq!(s.body["server"]["status"], "off");

    api.post(
        &path("change_protection"),
        json!({"delete": true, "rebuild": true}),
    )
    .await;
    let protected = api.delete(&format!("/servers/{id}")).await;
    assert_eq!(protected.status, StatusCode::LOCKED);
    assert_eq!(protected.code(), "protected");
    let no_rebuild = api
        .post(&path("rebuild"), json!({"image": "debian-12"}))
        .await;
    assert_eq!(no_rebuild.code(), "protected");

    let big = "x".repeat(32 * 1024 + 1);
    let r = api
        .post(
            "/servers",
            json!({"name": "big", "server_type": "cx23", "image": "ubuntu-24.04", "user_data": big}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "user_data");
}

#[tokio::test]
async fn hetzner_floating_ips_volumes_and_primary_ip_assignment() {
    let api = start().await;
    let created = api.create_server("host", json!({})).await;
    let id = created.body["server"]["id"].as_u64().unwrap();

    let fip = api
        .post(
            "/floating_ips",
            json!({"type": "ipv4", "home_location": "nbg1", "labels": {"role": "vip"}}),
        )
        .await;
    assert_eq!(fip.status, StatusCode::CREATED, "{:?}", fip.body);
    let fid = fip.body["floating_ip"]["id"].as_u64().unwrap();
    let assign = api
        .post(
            &format!("/floating_ips/{fid}/actions/assign"),
            json!({"server": id}),
        )
        .await;
    assert_eq!(assign.status, StatusCode::CREATED);
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(s.body["server"]["public_net"]["floating_ips"], json!([fid]));
    let busy = api.delete(&format!("/floating_ips/{fid}")).await;
    assert_eq!(busy.code(), "must_be_unassigned");
    api.post(&format!("/floating_ips/{fid}/actions/unassign"), json!({}))
        .await;
    assert_eq!(
        api.delete(&format!("/floating_ips/{fid}")).await.status,
        StatusCode::NO_CONTENT
    );

    let vol = api
        .post(
            "/volumes",
            json!({"name": "data", "size": 10, "server": id, "format": "ext4"}),
        )
        .await;
    assert_eq!(vol.status, StatusCode::CREATED, "{:?}", vol.body);
    assert_eq!(vol.body["next_actions"][0]["command"], "attach_volume");
    let vid = vol.body["volume"]["id"].as_u64().unwrap();
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(s.body["server"]["volumes"], json!([vid]));
    let shrink = api
        .post(
            &format!("/volumes/{vid}/actions/resize"),
            json!({"size": 5}),
        )
        .await;
    assert_eq!(shrink.status, StatusCode::UNPROCESSABLE_ENTITY);
    api.post(
        &format!("/volumes/{vid}/actions/resize"),
        json!({"size": 50}),
    )
    .await;
    assert_eq!(
        api.get(&format!("/volumes/{vid}")).await.body["volume"]["size"],
        50
    );
    assert_eq!(
        api.delete(&format!("/volumes/{vid}")).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    api.post(&format!("/volumes/{vid}/actions/detach"), json!({}))
        .await;
    assert_eq!(
        api.delete(&format!("/volumes/{vid}")).await.status,
        StatusCode::NO_CONTENT
    );

    let spare = api
        .post(
            "/primary_ips",
            json!({"name": "spare", "type": "ipv4", "location": "fsn1"}),
        )
        .await;
    let pid = spare.body["primary_ip"]["id"].as_u64().unwrap();
    let assign = |server: u64| json!({"assignee_type": "server", "assignee_id": server});
    let running = api
        .post(&format!("/primary_ips/{pid}/actions/assign"), assign(id))
        .await;
    assert_eq!(running.code(), "server_not_stopped");
    api.post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let has_v4 = api
        .post(&format!("/primary_ips/{pid}/actions/assign"), assign(id))
        .await;
    assert_eq!(has_v4.code(), "server_has_ipv4");
    let own = created.body["server"]["public_net"]["ipv4"]["id"]
        .as_u64()
        .unwrap();
    let un = api
        .post(&format!("/primary_ips/{own}/actions/unassign"), json!({}))
        .await;
    assert_eq!(un.status, StatusCode::CREATED);
    let ok = api
        .post(&format!("/primary_ips/{pid}/actions/assign"), assign(id))
        .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    let s = api.get(&format!("/servers/{id}")).await;
    assert_eq!(s.body["server"]["public_net"]["ipv4"]["id"], pid);
    let listed = api.get("/primary_ips?ip=116.203.0.3").await;
    assert_eq!(listed.body["primary_ips"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn hetzner_options_switch_old_client_shapes() {
    let mut config = EmuConfig::for_tests();
    config.vultr = None;
    config.robot = None;
    config.hetzner_options = orc_emu::hetzner::Options {
        emit_datacenter: false,
        serve_datacenters: true,
        accept_datacenter_field: true,
        legacy_assignee_type: true,
        server_limit: 1,
        fabric: None,
    };
    let emu = config.start().await.unwrap();
    let api = Api {
        http: reqwest::Client::new(),
        base: emu.hetzner_url().unwrap(),
        control: EmuControl::hetzner(&emu),
        token: "demo-token".into(),
        _emu: emu,
    };
    let s = api
        .post(
            "/servers",
            json!({"name": "a", "server_type": "cx23", "image": "ubuntu-24.04", "datacenter": "fsn1-dc14"}),
        )
        .await;
    assert_eq!(s.status, StatusCode::CREATED, "{:?}", s.body);
    assert!(s.body["server"].get("datacenter").is_none());
    let limit = api.create_server("b", json!({})).await;
    assert_eq!(limit.status, StatusCode::FORBIDDEN);
    assert_eq!(limit.code(), "resource_limit_exceeded");

    let dcs = api.get("/datacenters").await;
    assert_eq!(dcs.status, StatusCode::OK);
    assert_eq!(dcs.body["datacenters"][0]["name"], "nbg1-dc3");
    assert!(dcs.body["recommendation"].is_u64());
    api.control.sold_out("cx23", "fsn1", true).await;
    let fsn = api.get("/datacenters/4").await;
    let supported = fsn.body["datacenter"]["server_types"]["supported"]
        .as_array()
        .unwrap();
    let available = fsn.body["datacenter"]["server_types"]["available"]
        .as_array()
        .unwrap();
    assert!(supported.contains(&json!(114)));
    assert!(!available.contains(&json!(114)));

    let p = api
        .post(
            "/primary_ips",
            json!({"name": "p", "type": "ipv6", "location": "hel1"}),
        )
        .await;
    assert_eq!(p.body["primary_ip"]["assignee_type"], "server");
    assert!(p.body["primary_ip"]["assignee_id"].is_null());
    assert!(p.body["primary_ip"].get("datacenter").is_none());
}

#[tokio::test]
async fn hetzner_rate_limit_and_injected_faults_use_the_api_envelope() {
    let api = start().await;
    api.control
        .fault(Fault::new("/v1/servers", 503, 1).method("POST"))
        .await;
    let r = api.create_server("x", json!({})).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.code(), "unavailable");
    assert!(r.content_type().starts_with("application/json"));
    assert_eq!(
        api.create_server("x", json!({})).await.status,
        StatusCode::CREATED
    );

    api.control.rate_limit(3600, 3_600_000.0, Some(1)).await;
    let last = api.get("/servers").await;
    assert_eq!(last.status, StatusCode::OK);
    assert_eq!(last.headers["ratelimit-remaining"], "0");
    let limited = api.get("/servers").await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.code(), "rate_limit_exceeded");
    assert_eq!(limited.headers["ratelimit-limit"], "3600");
}
