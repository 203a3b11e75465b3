//! The Hetzner Robot emulator over raw HTTP: basic auth and the failed-login block, the
//! error envelope, servers, resets and power, the rescue system, keys, reverse DNS and the
//! per-endpoint rate limit.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};
use orc_emu::{EmuConfig, RunningEmulators, Timings};
use orc_testkit::EmuControl;
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

const FIRST: u64 = 2001001;
const SEED_KEY: &str = "56:29:99:a4:5d:ed:ac:95:c1:f5:88:82:90:5d:dd:10";

struct Robot {
    _emu: RunningEmulators,
    base: String,
    control: EmuControl,
    http: Client,
}

impl Robot {
    async fn start() -> Robot {
        let config = EmuConfig {
            hetzner: None,
            vultr: None,
            timings: Timings::realistic(),
            ..EmuConfig::for_tests()
        };
        let emu = config.start().await.expect("emulator starts");
        let base = emu.robot_url().expect("robot runs");
        Robot {
            control: EmuControl::robot(&emu),
            _emu: emu,
            base,
            http: Client::new(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        login: Option<(&str, &str)>,
        form: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some((user, password)) = login {
            req = req.basic_auth(user, Some(password));
        }
        if !form.is_empty() {
            req = req.form(form);
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

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, Some(("demo", "demo-token")), &[])
            .await
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, Value) {
        self.send(Method::POST, path, Some(("demo", "demo-token")), form)
            .await
    }

    async fn call(&self, method: Method, path: &str, form: &[(&str, &str)]) -> (StatusCode, Value) {
        self.send(method, path, Some(("demo", "demo-token")), form)
            .await
    }

    /// The emulator's `X-Emu-Booted-Into-Rescue` header of a GET.
    async fn booted_into_rescue(&self, path: &str) -> String {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .basic_auth("demo", Some("demo-token"))
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), StatusCode::OK);
        r.headers()["x-emu-booted-into-rescue"]
            .to_str()
            .expect("ascii header")
            .to_string()
    }
}

fn assert_error(status: StatusCode, body: &Value, want: StatusCode, code: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"]["status"], json!(want.as_u16()), "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// An ed25519 public key line with a chosen 32-byte body, and its MD5 fingerprint.
fn ed25519(seed: u8) -> (String, String) {
    let mut blob = Vec::new();
    for part in [&b"ssh-ed25519"[..], &[seed; 32][..]] {
        blob.extend_from_slice(&(part.len() as u32).to_be_bytes());
        blob.extend_from_slice(part);
    }
    let fp: Vec<String> = Md5::digest(&blob)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (
        format!("ssh-ed25519 {} test@example", STANDARD.encode(&blob)),
        fp.join(":"),
    )
}

#[tokio::test]
async fn robot_auth_comes_first_and_three_failures_block_the_client() {
    let r = Robot::start().await;
    let (status, body) = r.send(Method::GET, "/server/999", None, &[]).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    assert_eq!(body["error"]["message"], "Unauthorized");
    let challenge = r
        .http
        .get(format!("{}/server", r.base))
        .send()
        .await
        .unwrap();
    assert!(
        challenge.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic ")
    );
    for _ in 0..3 {
        let (status, _) = r.send(Method::GET, "/server", None, &[]).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "no credentials is no failed login"
        );
    }
    let (status, body) = r.get("/server/999").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "SERVER_NOT_FOUND");

    for _ in 0..2 {
        let (status, _) = r
            .send(Method::GET, "/server", Some(("demo", "wrong")), &[])
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, _) = r.get("/server").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a good login clears earlier failures"
    );
    for _ in 0..3 {
        let (status, _) = r
            .send(Method::GET, "/server", Some(("demo", "wrong")), &[])
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, body) = r.get("/server").await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "BLOCKED");
    r.control.advance_clock(599.0).await;
    let (status, _) = r.get("/server").await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "still inside the ten minutes"
    );
    r.control.advance_clock(2.0).await;
    let (status, _) = r.get("/server").await;
    assert_eq!(status, StatusCode::OK);

    let (status, body) = r.get("/nothing/here").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "NOT_FOUND");
    let (status, body) = r.get("/server.yaml").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "NOT_FOUND");
    let (status, body) = r.call(Method::DELETE, "/server", &[]).await;
    assert_error(
        status,
        &body,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    );
}

#[tokio::test]
async fn robot_lists_servers_wrapped_and_renames_by_number_or_ip() {
    let r = Robot::start().await;
    let (status, list) = r.get("/server").await;
    assert_eq!(status, StatusCode::OK);
    let list = list.as_array().unwrap().clone();
    assert_eq!(list.len(), 3);
    assert!(list.iter().all(|s| s["server"]["server_number"].is_u64()));
    assert_eq!(list[2]["server"]["server_ip"], Value::Null);
    assert!(
        list[0]["server"].get("reset").is_none(),
        "flags only in the detail"
    );

    let (_, one) = r.get(&format!("/server/{FIRST}")).await;
    assert_eq!(one["server"]["product"], "AX42");
    assert_eq!(one["server"]["reset"], true);
    let (_, by_ip) = r.get("/server/198.51.100.10").await;
    assert_eq!(by_ip["server"]["server_number"], json!(FIRST));
    let (status, body) = r.get("/server/203.0.113.9").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "SERVER_NOT_FOUND");

    let (status, renamed) = r
        .post(
            &format!("/server/{FIRST}"),
            &[("server_name", "db-primary")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(renamed["server"]["server_name"], "db-primary");
    let (_, list) = r.get("/server").await;
    assert_eq!(list[0]["server"]["server_name"], "db-primary");
    let (status, body) = r.post(&format!("/server/{FIRST}"), &[("other", "x")]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["missing"], json!(["server_name"]));
    assert_eq!(body["error"]["invalid"], Value::Null);
}

#[tokio::test]
async fn robot_resets_follow_each_servers_menu_and_power_state() {
    let r = Robot::start().await;
    let (_, resets) = r.get("/reset").await;
    assert_eq!(resets.as_array().unwrap().len(), 3);
    let (_, menu) = r.get(&format!("/reset/{FIRST}")).await;
    assert_eq!(
        menu["reset"]["type"],
        json!(["sw", "hw", "man", "power", "power_long"])
    );
    assert_eq!(menu["reset"]["operating_status"], "running");

    let path = format!("/reset/{FIRST}");
    let (status, done) = r.post(&path, &[("type", "power_long")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(done["reset"]["type"], "power_long");
    assert_eq!(r.get(&path).await.1["reset"]["operating_status"], "stopped");
    r.post(&path, &[("type", "hw")]).await;
    assert_eq!(
        r.get(&path).await.1["reset"]["operating_status"],
        "stopped",
        "hw does not power on"
    );
    r.post(&path, &[("type", "power")]).await;
    assert_eq!(r.get(&path).await.1["reset"]["operating_status"], "running");

    let (status, body) = r.post("/reset/2001002", &[("type", "power")]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["invalid"], json!(["type"]));
    let (status, body) = r.post(&path, &[]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["missing"], json!(["type"]));

    let (status, _) = r.post(&path, &[("type", "man")]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = r.post(&path, &[("type", "man")]).await;
    assert_error(status, &body, StatusCode::CONFLICT, "RESET_MANUAL_ACTIVE");
    r.control.advance_clock(30.0).await;
    let (status, _) = r.post(&path, &[("type", "man")]).await;
    assert_eq!(status, StatusCode::OK, "the technician is done");

    r.control.fail_next_actions(1).await;
    let (status, body) = r.post(&path, &[("type", "power_long")]).await;
    assert_error(
        status,
        &body,
        StatusCode::INTERNAL_SERVER_ERROR,
        "RESET_FAILED",
    );
    assert_eq!(
        r.get(&path).await.1["reset"]["operating_status"],
        "running",
        "no effect"
    );
    let (status, _) = r.post(&path, &[("type", "sw")]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn robot_rescue_activates_once_and_is_used_up_by_a_boot() {
    let r = Robot::start().await;
    let path = format!("/boot/{FIRST}/rescue");
    let (_, idle) = r.get(&path).await;
    assert_eq!(idle["rescue"]["active"], false);
    assert_eq!(idle["rescue"]["password"], Value::Null);
    assert_eq!(idle["rescue"]["os"], json!(["linux", "vkvm"]));

    let (status, body) = r
        .post(&path, &[("os", "linux"), ("authorized_key[]", "00:11")])
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["invalid"], json!(["authorized_key"]));
    let (status, body) = r.post(&path, &[("authorized_key[]", SEED_KEY)]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["missing"], json!(["os"]));

    let (status, on) = r
        .post(&path, &[("os", "linux"), ("authorized_key[0]", SEED_KEY)])
        .await;
    assert_eq!(status, StatusCode::OK, "{on}");
    let rescue = &on["rescue"];
    assert_eq!(rescue["active"], true);
    assert_eq!(rescue["os"], "linux");
    assert_eq!(rescue["arch"], json!(64));
    assert!(rescue["password"].as_str().is_some_and(|p| p.len() >= 8));
    assert_eq!(rescue["authorized_key"][0]["key"]["fingerprint"], SEED_KEY);
    let (_, shown) = r.get(&path).await;
    assert_eq!(shown["rescue"]["active"], true);
    assert_eq!(
        shown["rescue"]["password"],
        Value::Null,
        "the password is shown once"
    );
    let (status, body) = r.post(&path, &[("os", "linux")]).await;
    assert_error(status, &body, StatusCode::CONFLICT, "BOOT_ALREADY_ENABLED");

    let (status, off) = r.call(Method::DELETE, &path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(off["rescue"]["active"], false);

    assert_eq!(r.booted_into_rescue(&path).await, "false");
    r.post(&path, &[("os", "linux"), ("authorized_key[]", SEED_KEY)])
        .await;
    r.post(&format!("/reset/{FIRST}"), &[("type", "hw")]).await;
    let (_, after) = r.get(&path).await;
    assert_eq!(
        after["rescue"]["active"], false,
        "the boot used the activation up"
    );
    assert_eq!(r.booted_into_rescue(&path).await, "true");
    assert_eq!(
        r.booted_into_rescue(&format!("/boot/{FIRST}")).await,
        "true"
    );
    let (_, boot) = r.get(&format!("/boot/{FIRST}")).await;
    assert_eq!(boot["boot"]["rescue"]["active"], false);
    assert_eq!(boot["boot"]["plesk"], Value::Null);
    r.post(&format!("/reset/{FIRST}"), &[("type", "sw")]).await;
    assert_eq!(r.booted_into_rescue(&path).await, "false");

    let (_, v6only) = r.get("/boot/2001003/rescue").await;
    assert_eq!(v6only["rescue"]["server_ip"], Value::Null);
}

#[tokio::test]
async fn robot_keys_are_404_when_empty_and_fingerprinted_by_md5() {
    let r = Robot::start().await;
    let (_, keys) = r.get("/key").await;
    assert_eq!(keys[0]["key"]["fingerprint"], SEED_KEY);
    let (status, _) = r
        .call(Method::DELETE, &format!("/key/{SEED_KEY}"), &[])
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = r.get("/key").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(body["error"]["message"], "No keys found");

    let (line, fp) = ed25519(7);
    let (status, created) = r.post("/key", &[("name", "laptop"), ("data", &line)]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["key"]["fingerprint"], json!(fp));
    assert_eq!(created["key"]["type"], "ED25519");
    assert_eq!(created["key"]["size"], json!(256));
    let (status, body) = r.post("/key", &[("name", "again"), ("data", &line)]).await;
    assert_error(status, &body, StatusCode::CONFLICT, "KEY_ALREADY_EXISTS");
    let (status, body) = r
        .post("/key", &[("name", "bad"), ("data", "ssh-ed25519 !!")])
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["invalid"], json!(["data"]));
    let (status, body) = r.post("/key", &[("data", &line)]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(body["error"]["missing"], json!(["name"]));

    let (status, renamed) = r.post(&format!("/key/{fp}"), &[("name", "desk")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(renamed["key"]["name"], "desk");
    assert_eq!(r.get(&format!("/key/{fp}")).await.1["key"]["name"], "desk");
    let (status, body) = r.get("/key/aa:bb").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "NOT_FOUND");

    let path = format!("/boot/{FIRST}/rescue");
    let (status, on) = r
        .post(&path, &[("os", "linux"), ("authorized_key[]", &fp)])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(on["rescue"]["authorized_key"][0]["key"]["name"], "desk");
}

#[tokio::test]
async fn robot_reverse_dns_for_server_addresses() {
    let r = Robot::start().await;
    let (status, body) = r.get("/rdns/198.51.100.10").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "RDNS_NOT_FOUND");
    let (status, body) = r.get("/rdns/192.0.2.77").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "IP_NOT_FOUND");

    let (status, created) = r
        .call(
            Method::PUT,
            "/rdns/198.51.100.10",
            &[("ptr", "db1.example.com")],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        created["rdns"],
        json!({"ip": "198.51.100.10", "ptr": "db1.example.com"})
    );
    let (status, body) = r
        .call(
            Method::PUT,
            "/rdns/198.51.100.10",
            &[("ptr", "x.example.com")],
        )
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "RDNS_ALREADY_EXISTS");
    let (status, updated) = r
        .post("/rdns/198.51.100.10", &[("ptr", "db.example.com")])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(updated["rdns"]["ptr"], "db.example.com");
    assert_eq!(
        r.get("/rdns/198.51.100.10").await.1["rdns"]["ptr"],
        "db.example.com"
    );
    let (status, body) = r.post("/rdns/198.51.100.10", &[]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "INVALID_INPUT");

    let v6 = "2a01:4f8:20b:9e1::2";
    let (status, _) = r
        .post(&format!("/rdns/{v6}"), &[("ptr", "arm.example.com")])
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = r.call(Method::DELETE, &format!("/rdns/{v6}"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = r.call(Method::DELETE, &format!("/rdns/{v6}"), &[]).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "RDNS_NOT_FOUND");
}

#[tokio::test]
async fn robot_rate_limit_is_a_403_and_reset_restores_the_seed() {
    let r = Robot::start().await;
    r.post(&format!("/server/{FIRST}"), &[("server_name", "changed")])
        .await;
    r.control.rate_limit(2, 3600.0, Some(0)).await;
    let (status, body) = r.get("/server").await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "RATE_LIMIT_EXCEEDED");
    assert_eq!(body["error"]["max_request"], json!(2));
    assert_eq!(body["error"]["interval"], json!(3600));

    r.control.reset().await;
    let (status, list) = r.get("/server").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list[0]["server"]["server_name"], "db-1");
}
