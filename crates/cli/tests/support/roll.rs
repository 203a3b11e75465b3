//! Rolling the partner under `orc up`: the zone's API as an operator and a tenant use it, a
//! sampler of who serves the partner's resource, and one reconfigure timed to its end.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::up::{MINUTE, Up};

/// A second key of the emulated account `orc up` runs against, for a key rotation.
pub const ROTATED_TOKEN: &str = "orc-up-emulator-token-2";

/// The zone's API with the admin token, trusting the zone's CA.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

const PROJECT: &str = "/api/orgs/sys/projects/sys";

impl Api {
    pub fn of(up: &Up) -> Api {
        let base = std::fs::read_to_string(up.data.join("zone-url"))
            .expect("the zone's URL file")
            .trim()
            .to_string();
        Api {
            http: orc_testkit::zone::pinned_client(Some(&up.ca_pem())),
            base,
            token: up.admin_token(),
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(60));
        if let Some(body) = body {
            request = request.json(&body);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.json().await.unwrap_or(Value::Null);
                (status, body)
            }
            Err(e) => (0, json!({ "error": { "message": e.to_string() } })),
        }
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// The partner's provider as project sys/sys sees it.
    pub async fn partner(&self) -> Value {
        self.get(&format!("{PROJECT}/providers/partner")).await
    }

    /// Waits until `orc up` has widened the partner and given it a markup.
    pub async fn wait_until_priced(&self) {
        let start = Instant::now();
        loop {
            let (status, p) = self
                .call(
                    reqwest::Method::GET,
                    &format!("{PROJECT}/providers/partner"),
                    None,
                )
                .await;
            if status == 200 && p["scope"] == "zone" && p["pricing"]["markup"] == "0" {
                return;
            }
            assert!(
                start.elapsed() < 2 * MINUTE,
                "the partner was never priced: {p}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub async fn create_pool(&self, pool: &str, class: &str, size: u32) {
        let body = json!({
            "name": pool, "provider": "partner", "size": size,
            "shape": { "cpu": 2, "mem": 4 }, "class": class, "os": "ubuntu-24.04",
        });
        let (status, answer) = self
            .call(
                reqwest::Method::POST,
                &format!("{PROJECT}/pools"),
                Some(body),
            )
            .await;
        assert_eq!(status, 201, "creating {pool}: {answer}");
    }

    pub async fn resize(&self, pool: &str, size: u32) {
        let (status, answer) = self
            .call(
                reqwest::Method::POST,
                &format!("{PROJECT}/pools/{pool}/resize"),
                Some(json!({ "size": size })),
            )
            .await;
        assert_eq!(status, 200, "resizing {pool}: {answer}");
    }

    pub async fn delete_pool(&self, pool: &str) {
        let (status, answer) = self
            .call(
                reqwest::Method::DELETE,
                &format!("{PROJECT}/pools/{pool}"),
                None,
            )
            .await;
        assert!(status == 202 || status == 404, "deleting {pool}: {answer}");
    }

    pub async fn nodes(&self, pool: &str, all: bool) -> Vec<Value> {
        let path = format!("{PROJECT}/pools/{pool}/nodes?include_ended={all}");
        self.get(&path)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub async fn wait_running(&self, pool: &str, count: usize, limit: Duration) {
        let start = Instant::now();
        loop {
            let nodes = self.nodes(pool, false).await;
            if nodes.len() == count && nodes.iter().all(|n| n["state"] == "running") {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{pool} never had {count} running nodes: {nodes:#?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub async fn quote(&self, class: &str) -> Value {
        let body = json!({
            "provider": "partner", "shape": { "cpu": 2, "mem": 4 },
            "class": class, "os": "ubuntu-24.04",
        });
        self.call(
            reqwest::Method::POST,
            &format!("{PROJECT}/quote"),
            Some(body),
        )
        .await
        .1
    }

    /// Every instance of the emulated clouds as `(node id, role)` from the partner's marks.
    pub async fn cloud_instances(&self, up: &Up) -> Vec<(String, String)> {
        let url_of = |prefix: &str| {
            up.summary
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no {prefix:?} in the summary"))
                .to_string()
        };
        let plain = reqwest::Client::new();
        let token = "orc-up-emulator-token";
        let mut out = Vec::new();
        let hetzner: Value = plain
            .get(format!("{}/v1/servers?per_page=50", url_of("hetzner   ")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for server in hetzner["servers"].as_array().unwrap() {
            let labels = &server["labels"];
            if let (Some(node), Some(role)) =
                (labels["orc-node"].as_str(), labels["orc-role"].as_str())
            {
                out.push((node.to_string(), role.to_string()));
            }
        }
        let vultr: Value = plain
            .get(format!(
                "{}/v2/instances?per_page=500",
                url_of("vultr     ")
            ))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for instance in vultr["instances"].as_array().unwrap() {
            let tags: Vec<&str> = instance["tags"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let mark = |key: &str| {
                tags.iter()
                    .find_map(|t| t.strip_prefix(key))
                    .map(str::to_string)
            };
            if let (Some(node), Some(role)) = (mark("orc-node="), mark("orc-role=")) {
                out.push((node, role));
            }
        }
        out
    }
}

/// What the sampler saw.
#[derive(Debug, Default, Clone)]
pub struct Serving {
    pub samples: usize,
    /// Samples in which no connected replica was serving.
    pub gaps: usize,
    /// The longest run of such samples, as time.
    pub longest_gap: Duration,
}

/// Every 100 ms until `stop`, asks the zone which replicas of the partner are connected, and
/// counts the samples in which none was serving.
pub async fn sample_serving(api: Api, stop: tokio::sync::watch::Receiver<bool>) -> Serving {
    let mut seen = Serving::default();
    let mut gap_started: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !*stop.borrow() {
        tick.tick().await;
        let (status, partner) = api
            .call(
                reqwest::Method::GET,
                &format!("{PROJECT}/providers/partner"),
                None,
            )
            .await;
        seen.samples += 1;
        let serving = status == 200
            && partner["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["role"] == "serving"));
        if serving {
            if let Some(since) = gap_started.take() {
                seen.longest_gap = seen.longest_gap.max(since.elapsed());
            }
        } else {
            seen.gaps += 1;
            gap_started.get_or_insert_with(Instant::now);
        }
    }
    if let Some(since) = gap_started {
        seen.longest_gap = seen.longest_gap.max(since.elapsed());
    }
    seen
}

/// One reconfigure of the partner pool, timed until both replicas are new processes attached
/// to the zone.
#[derive(Debug, Clone)]
pub struct RollReport {
    pub what: &'static str,
    pub started: Instant,
    pub finished: Instant,
    pub took: Duration,
}

/// Reconfigures `sys/sys/partner` with its params changed by `change` (and, when given, all
/// its sensitive params replaced), then waits until two replicas are connected, both of
/// them since the reconfigure.
pub async fn reconfigure_and_wait(
    api: &Api,
    what: &'static str,
    change: impl FnOnce(&mut serde_json::Map<String, Value>),
    sensitive: Option<Value>,
) -> RollReport {
    let pool = api.get(&format!("{PROJECT}/pools/partner")).await;
    let mut params = pool["app"]["params"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    change(&mut params);
    let mut body = json!({ "params": params, "generation": pool["generation"] });
    if let Some(sensitive) = sensitive {
        body["sensitive_params"] = sensitive;
    }
    let started = Instant::now();
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (status, answer) = api
        .call(
            reqwest::Method::POST,
            &format!("{PROJECT}/pools/partner/reconfigure"),
            Some(body),
        )
        .await;
    assert_eq!(status, 200, "reconfiguring the partner ({what}): {answer}");
    loop {
        let partner = api.partner().await;
        let replicas = partner["replicas"].as_array().cloned().unwrap_or_default();
        let fresh = replicas
            .iter()
            .filter(|r| r["connected_since"].as_i64().is_some_and(|t| t >= since_ms))
            .count();
        if replicas.len() == 2 && fresh == 2 {
            let finished = Instant::now();
            return RollReport {
                what,
                started,
                finished,
                took: finished - started,
            };
        }
        assert!(
            started.elapsed() < 3 * MINUTE,
            "the roll ({what}) did not finish: {partner:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The built-in region map with one more site in class eu-central (Vultr's Amsterdam).
pub fn regions_with_a_new_site() -> Value {
    let mut map: Value =
        serde_json::from_str(orc_partner::maps::BUILTIN_REGIONS).expect("the built-in map");
    map["eu-central"]["sites"]
        .as_array_mut()
        .expect("sites")
        .push(json!({ "eu-central-d": "vultr:ams" }));
    Value::String(map.to_string())
}
