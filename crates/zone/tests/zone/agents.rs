//! Nodes' agents against a whole zone: a real `orc-agent` joins a running node with a token
//! minted through the API, becomes ready, runs `orc exec` commands, survives a zone restart;
//! replayed, expired and foreign tokens are refused with their reason and an event.

use std::time::Duration;

use base64::Engine as _;
use orc_agent::{AgentError, AgentOptions};
use orc_proto::agent_pb::{self, agent_hub_client::AgentHubClient, agent_message, zone_message};
use orc_provider_sdk::fake::FakeCloud;
use orc_testkit::{eventually, eventually_some};
use orc_zone::model::{NodeId, Timestamp};
use orc_zone_model::{JoinTokenSecret, JoinTtl};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{API_WAIT, TestZone, pool_body, start_replica, tenancy_without_provider};
use orc_testkit::zone::Tenancy;

pub(crate) const WEB: &str = "/api/orgs/acme/projects/web";

/// A free loopback port, so a restarted zone listens where its agents dial.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Agent {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), AgentError>>,
}

fn options(dir: &std::path::Path, endpoint: &str, node: &str) -> AgentOptions {
    AgentOptions {
        endpoint: Some(endpoint.to_string()),
        node_id: Some(node.to_string()),
        token_file: dir.join("join-token"),
        state_dir: dir.join("state"),
        product_uuid_file: dir.join("product_uuid"),
        connect_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(300),
        // No WireGuard interfaces in the test's own network namespace.
        mesh: false,
        ..AgentOptions::default()
    }
}

fn start_agent(options: AgentOptions) -> Agent {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(orc_agent::run(options, async {
        let _ = stopped.await;
    }));
    Agent { stop, task }
}

/// The standard tenancy, a fake provider serving acme/web, and pool `db` of one running
/// node.
pub(crate) struct Running {
    pub(crate) t: Tenancy,
    pub(crate) cloud: std::sync::Arc<FakeCloud>,
    pub(crate) stop_provider: tokio::sync::oneshot::Sender<()>,
    pub(crate) node_id: String,
}

pub(crate) async fn running_node(z: &TestZone) -> Running {
    let t = tenancy_without_provider(z).await;
    let cloud = FakeCloud::new();
    let stop_provider = start_replica(z, &t.mia, "acme/web", &cloud);
    eventually("the provider serves", API_WAIT, || async {
        let list = z.get(&format!("{WEB}/providers"), &t.vic).await;
        list.body.as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["name"] == "acme/web/fake" && p["replicas"][0]["role"] == "serving")
        })
    })
    .await;
    let created = z
        .post(&format!("{WEB}/pools"), &t.mia, pool_body("db", 1))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    eventually("the node runs", API_WAIT, || async {
        node_view(z, &t.vic).await["state"] == "running"
    })
    .await;
    let node_id = node_view(z, &t.vic).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    Running {
        t,
        cloud,
        stop_provider,
        node_id,
    }
}

async fn node_view(z: &TestZone, token: &str) -> Value {
    let nodes = z.get(&format!("{WEB}/pools/db/nodes"), token).await;
    nodes.body[0].clone()
}

/// Runs `argv` on `node` and returns (stdout, stderr, exit line).
async fn exec(z: &TestZone, token: &str, node: &str, argv: &[&str]) -> (Vec<u8>, Vec<u8>, Value) {
    let response = z
        .http
        .post(format!("{}{WEB}/nodes/{node}/exec", z.zone.url()))
        .bearer_auth(token)
        .json(&json!({ "argv": argv, "timeout_seconds": 20 }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let body = response.bytes().await.unwrap();
    let (mut out, mut err, mut exit) = (Vec::new(), Vec::new(), Value::Null);
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let line: Value = serde_json::from_slice(line).unwrap();
        assert!(exit.is_null(), "nothing follows the exit: {line}");
        match line["type"].as_str() {
            Some("output") => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(line["data"].as_str().unwrap())
                    .unwrap();
                match line["stream"].as_str() {
                    Some("stdout") => out.extend(data),
                    Some("stderr") => err.extend(data),
                    other => panic!("stream {other:?}"),
                }
            }
            Some("exit") => exit = line,
            other => panic!("line type {other:?}"),
        }
    }
    (out, err, exit)
}

async fn events_of(z: &TestZone, token: &str) -> Vec<Value> {
    let events = z
        .get(&format!("{WEB}/events?pool=db&limit=1000"), token)
        .await;
    events.body.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joins_becomes_ready_runs_commands_and_reconnects_after_a_restart() {
    let grpc_port = free_port();
    let z = TestZone::start_with(|c| {
        c.grpc_addr = std::net::SocketAddr::from(([127, 0, 0, 1], grpc_port));
        c.agents.keepalive_interval = Duration::from_millis(300);
        // An agent stopped in-process may leave its connection open; the zone then notices
        // the silence (the agent sends a keep-alive every second here).
        c.agents.keepalive_timeout = Duration::from_secs(4);
    })
    .await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id,
    } = running_node(&z).await;
    let node = node_view(&z, &t.vic).await;
    assert!(node["agent"].is_null(), "no agent before a join: {node}");

    // A viewer may not mint; a member may, and sees the secret once.
    let path = format!("{WEB}/nodes/{node_id}/join-tokens");
    let denied = z.post(&path, &t.vic, json!({})).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);
    let bad_ttl = z.post(&path, &t.mia, json!({ "ttl_seconds": 5 })).await;
    assert_eq!(bad_ttl.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_ttl.field(), Some("ttl_seconds"));
    let minted = z.post(&path, &t.mia, json!({ "ttl_seconds": 600 })).await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    let secret = minted.body["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("orcjoin1."), "{secret}");
    assert_eq!(minted.body["endpoint"], z.zone.grpc_url());
    assert_eq!(minted.body["state"], "live");
    // The deploy minted the first token; the new one revoked it.
    let listed = z.get(&path, &t.vic).await;
    assert_eq!(listed.body[0]["created_by"], "zone", "{}", listed.body);
    assert_eq!(listed.body[0]["state"], "revoked", "{}", listed.body);
    assert_eq!(listed.body[1]["id"], minted.body["id"]);
    assert!(
        !listed.body.to_string().contains(&secret[20..]),
        "a list never shows a secret"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("join-token"), &secret).unwrap();
    let agent = start_agent(options(dir.path(), &z.zone.grpc_url(), &node_id));
    eventually("the node is ready", API_WAIT, || async {
        let agent = &node_view(&z, &t.vic).await["agent"];
        agent["state"] == "ready" && agent["connected"] == true
    })
    .await;
    assert!(
        !dir.path().join("join-token").exists(),
        "the agent deletes the used token"
    );
    let view = node_view(&z, &t.vic).await;
    assert_eq!(view["agent"]["desired_generation"], 1, "{view}");
    assert_eq!(view["agent"]["applied_generation"], 1, "{view}");
    let applied: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("state/config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(applied["pool"], "db");
    assert_eq!(applied["node_id"], node_id.as_str());
    assert_eq!(applied["labels"]["orc.provider"], "fake");

    // Commands: output on both streams and the exit code, for members only.
    let (out, err, exit) = exec(
        &z,
        &t.mia,
        &node_id,
        &["sh", "-c", "echo hello; echo oops >&2; exit 7"],
    )
    .await;
    assert_eq!(
        (out.as_slice(), err.as_slice()),
        (&b"hello\n"[..], &b"oops\n"[..])
    );
    assert_eq!(exit["code"], 7, "{exit}");
    let (_, _, missing) = exec(&z, &t.mia, &node_id, &["/nonexistent/tool"]).await;
    assert!(missing["code"].is_null());
    assert!(
        missing["error"].as_str().unwrap().contains("cannot start"),
        "{missing}"
    );
    let viewer = z
        .post(
            &format!("{WEB}/nodes/{node_id}/exec"),
            &t.vic,
            json!({ "argv": ["true"] }),
        )
        .await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN);
    let empty = z
        .post(
            &format!("{WEB}/nodes/{node_id}/exec"),
            &t.mia,
            json!({ "argv": [] }),
        )
        .await;
    assert_eq!(empty.field(), Some("argv"));

    // The events tell the story without the arguments.
    let events = events_of(&z, &t.vic).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    for kind in ["node.join_token", "node.joined", "node.ready", "node.exec"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let execs: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "node.exec")
        .filter_map(|e| e["words"].as_str())
        .collect();
    assert_eq!(
        execs[0], "mia ran \"sh\" with 2 argument(s) (timeout 20 s)",
        "{execs:?}"
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("hello") && !all.contains(&secret[20..]),
        "{all}"
    );

    // The used token again, from a second machine: refused, with the reason, and an event.
    let replay = tempfile::tempdir().unwrap();
    std::fs::write(replay.path().join("join-token"), &secret).unwrap();
    let refused = orc_agent::run(
        options(replay.path(), &z.zone.grpc_url(), &node_id),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("already used"), "{refused}");
    eventually("the refusal is an event", API_WAIT, || async {
        events_of(&z, &t.vic).await.iter().any(|e| {
            e["kind"] == "node.join_refused"
                && e["words"]
                    .as_str()
                    .is_some_and(|w| w.contains("already used"))
        })
    })
    .await;

    // A zone restart: the agent dials again and is ready again.
    let z = z.restart().await;
    eventually(
        "the agent reconnects after the restart",
        API_WAIT,
        || async {
            let agent = &node_view(&z, &t.vic).await["agent"];
            agent["state"] == "ready" && agent["connected"] == true
        },
    )
    .await;
    let (out, _, exit) = exec(&z, &t.mia, &node_id, &["echo", "again"]).await;
    assert_eq!(out, b"again\n");
    assert_eq!(exit["code"], 0);

    let _ = agent.stop.send(());
    agent.task.await.unwrap().unwrap();
    eventually(
        "the node is no longer ready once its agent is gone",
        API_WAIT,
        || async {
            let agent = &node_view(&z, &t.vic).await["agent"];
            agent["state"] == "joined" && agent["connected"] == false
        },
    )
    .await;
    let offline = z
        .post(
            &format!("{WEB}/nodes/{node_id}/exec"),
            &t.mia,
            json!({ "argv": ["true"] }),
        )
        .await;
    assert_eq!(
        offline.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        offline.body
    );
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// Calls `Join` directly with `token`, trusting the zone's CA.
async fn join_with(z: &TestZone, token: &str, node: &str) -> tonic::Status {
    let key = orc_tls::NodeIdentity::generate().unwrap();
    join_as(z, token, node, &key).await.unwrap_err()
}

/// Calls `Join` directly with `token` for `node`, over `key`.
pub(crate) async fn join_as(
    z: &TestZone,
    token: &str,
    node: &str,
    key: &orc_tls::NodeIdentity,
) -> Result<agent_pb::JoinReply, tonic::Status> {
    let ca = orc_tls::PinnedCa::from_pem(z.zone.ca_pem().unwrap(), "test").unwrap();
    let channel = orc_agent::connect::channel(
        &z.zone.grpc_url(),
        ca.client_config(orc_tls::ALPN_H2),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let request = agent_pb::JoinRequest {
        token: token.to_string(),
        node_id: node.to_string(),
        public_key: key.public_key().to_vec(),
        facts: None,
        version: "test".into(),
    };
    AgentHubClient::new(channel)
        .join(request)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_foreign_and_unbound_tokens_are_refused_with_their_reason() {
    let z = TestZone::start().await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id,
    } = running_node(&z).await;
    let node: NodeId = node_id.parse().unwrap();
    let ours = z.zone.ca().unwrap().fingerprint();

    // Expired: minted two minutes ago with a one-minute life.
    let new = orc_zone::store::NewJoinToken {
        ca_fingerprint: &ours,
        created_by: "zone",
        ttl: JoinTtl::new(Duration::from_secs(60)).unwrap(),
        product_uuid: None,
    };
    let past = Timestamp::from_unix_millis(Timestamp::now().millis() - 120_000);
    let (_, expired) = z
        .zone
        .store()
        .create_join_token(&node, &new, past)
        .await
        .unwrap();
    let status = join_with(&z, expired.expose(), &node_id).await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    assert!(status.message().contains("expired"), "{}", status.message());

    // A token pinning another zone's CA.
    let other = orc_tls::ZoneCa::generate().unwrap().fingerprint();
    let foreign = JoinTokenSecret::generate(&other);
    let status = join_with(&z, foreign.expose(), &node_id).await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    assert!(status.message().contains("pins CA"), "{}", status.message());

    // Bound to another machine; and an unknown one.
    let bound = orc_zone::store::NewJoinToken {
        product_uuid: Some("4c4c4544-0042"),
        ..new.clone()
    };
    let (_, secret) = z
        .zone
        .store()
        .create_join_token(&node, &bound, Timestamp::now())
        .await
        .unwrap();
    let status = join_with(&z, secret.expose(), &node_id).await;
    assert!(
        status.message().contains("another machine"),
        "{}",
        status.message()
    );
    let unknown = JoinTokenSecret::generate(&ours);
    let status = join_with(&z, unknown.expose(), &node_id).await;
    assert!(status.message().contains("unknown"), "{}", status.message());
    let garbage = join_with(&z, "not-a-token", &node_id).await;
    assert_eq!(garbage.code(), tonic::Code::InvalidArgument);

    // The refusals are the node's events, naming reasons, never tokens.
    let events = events_of(&z, &t.vic).await;
    let refusals: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "node.join_refused")
        .filter_map(|e| e["words"].as_str())
        .collect();
    assert_eq!(refusals.len(), 4, "{refusals:?}");
    let all = serde_json::to_string(&events).unwrap();
    for secret in [expired.expose(), foreign.expose(), unknown.expose()] {
        assert!(!all.contains(&secret[75..]), "no token in events");
    }

    // An attach without a node certificate is refused.
    let ca = orc_tls::PinnedCa::from_pem(z.zone.ca_pem().unwrap(), "test").unwrap();
    let channel = orc_agent::connect::channel(
        &z.zone.grpc_url(),
        ca.client_config(orc_tls::ALPN_H2),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let (_tx, rx) = tokio::sync::mpsc::channel::<agent_pb::AgentMessage>(1);
    let status = AgentHubClient::new(channel)
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// The join token inside a bootstrap script.
fn token_in(script: &str) -> String {
    let start = script
        .find("<<'ORC_TOKEN'\n")
        .expect("a token here-document")
        + 14;
    let end = start + script[start..].find("\nORC_TOKEN\n").unwrap();
    script[start..end].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_node_carries_a_bootstrap_whose_token_joins_it() {
    let tmp = tempfile::tempdir().unwrap();
    let binary = tmp.path().join("orc");
    std::fs::write(&binary, b"#!/bin/sh\necho not really orc\n").unwrap();
    let served = binary.clone();
    let z = TestZone::start_with(move |c| c.agent_binary = Some(served)).await;
    let Running {
        t,
        cloud,
        stop_provider,
        node_id,
    } = running_node(&z).await;

    // The binary is served to anyone, with its digest, which the script checks.
    let sha256 = orc_zone::api::nodes::file_sha256(&binary).unwrap();
    let got = z
        .http
        .get(format!("{}/api/agent/orc", z.zone.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.headers()["x-orc-sha256"], sha256.as_str());
    assert_eq!(got.bytes().await.unwrap(), std::fs::read(&binary).unwrap());
    let sum = z
        .http
        .get(format!("{}/api/agent/orc.sha256", z.zone.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(sum, format!("{sha256}  orc\n"));

    let instances = cloud.instances();
    let script = String::from_utf8(instances[0].bootstrap.clone()).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains(&format!("ORC_AGENT_NODE={node_id}\n")),
        "{script}"
    );
    assert!(script.contains(&format!("ORC_AGENT_ZONE={}\n", z.zone.grpc_url())));
    assert!(script.contains(&format!("sum={sha256}\n")), "{script}");
    assert!(script.contains(&format!("{}/api/agent/orc", z.zone.url())));
    let tokens = z
        .get(&format!("{WEB}/nodes/{node_id}/join-tokens"), &t.vic)
        .await;
    assert_eq!(tokens.body[0]["created_by"], "zone", "{}", tokens.body);
    assert_eq!(tokens.body[0]["state"], "live");
    assert_eq!(
        tokens.body[0]["ca_fingerprint"],
        z.zone.ca().unwrap().fingerprint()
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("join-token"), token_in(&script)).unwrap();
    let agent = start_agent(options(dir.path(), &z.zone.grpc_url(), &node_id));
    eventually("the deployed node's agent is ready", API_WAIT, || async {
        node_view(&z, &t.vic).await["agent"]["state"] == "ready"
    })
    .await;
    let tokens = z
        .get(&format!("{WEB}/nodes/{node_id}/join-tokens"), &t.vic)
        .await;
    assert_eq!(tokens.body[0]["state"], "used");
    let _ = agent.stop.send(());
    agent.task.await.unwrap().unwrap();
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// An agent whose certificate has less than a third of its life left renews it on its open
/// stream: a new key and certificate on disk, the zone knowing both the new fingerprint and
/// the one before, and a reconnect with the new certificate is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_renews_its_certificate_on_the_open_stream() {
    let z = TestZone::start_with(|c| {
        // Shorter than the agent's renewal threshold (10 days): due at once.
        c.agents.cert_lifetime = Duration::from_secs(24 * 3600);
        c.agents.keepalive_interval = Duration::from_millis(300);
    })
    .await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id,
    } = running_node(&z).await;
    let node: NodeId = node_id.parse().unwrap();
    let minted = z
        .post(
            &format!("{WEB}/nodes/{node_id}/join-tokens"),
            &t.mia,
            json!({}),
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("join-token"),
        minted.body["secret"].as_str().unwrap(),
    )
    .unwrap();
    let agent = start_agent(options(dir.path(), &z.zone.grpc_url(), &node_id));
    eventually("the agent joined", API_WAIT, || async {
        z.zone.store().node_agent(&node).await.unwrap().is_some()
    })
    .await;
    let first = z.zone.store().node_agent(&node).await.unwrap().unwrap();
    // The agent writes its key once the zone has recorded the join: wait for the file.
    let key_file = dir.path().join("state/node.key");
    let first_key = eventually_some("the agent's key on disk", API_WAIT, || async {
        std::fs::read_to_string(&key_file).ok()
    })
    .await;
    eventually("the certificate is renewed", API_WAIT, || async {
        let now = z.zone.store().node_agent(&node).await.unwrap().unwrap();
        now.previous_fingerprint.as_deref() == Some(first.cert_fingerprint.as_str())
    })
    .await;
    let renewed = z.zone.store().node_agent(&node).await.unwrap().unwrap();
    assert_ne!(renewed.cert_fingerprint, first.cert_fingerprint);
    eventually(
        "the new key and certificate are on disk",
        API_WAIT,
        || async {
            std::fs::read_to_string(dir.path().join("state/node.key")).unwrap() != first_key
        },
    )
    .await;
    let chain = std::fs::read_to_string(dir.path().join("state/node.pem")).unwrap();
    use orc_tls::rustls::pki_types::CertificateDer;
    use orc_tls::rustls::pki_types::pem::PemObject as _;
    let der = CertificateDer::pem_slice_iter(chain.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        orc_tls::ca::fingerprint(der.as_ref()),
        renewed.cert_fingerprint
    );

    // A restart of the agent attaches with the renewed certificate.
    let _ = agent.stop.send(());
    agent.task.await.unwrap().unwrap();
    let again = start_agent(options(dir.path(), &z.zone.grpc_url(), &node_id));
    eventually("the renewed certificate attaches", API_WAIT, || async {
        let agent = &node_view(&z, &t.vic).await["agent"];
        agent["state"] == "ready" && agent["connected"] == true
    })
    .await;
    let _ = again.stop.send(());
    again.task.await.unwrap().unwrap();
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// One hand-driven `Attach` stream of a node: what a second copy of an agent would open.
pub(crate) struct Stream {
    tx: tokio::sync::mpsc::Sender<agent_pb::AgentMessage>,
    inbound: tonic::Streaming<agent_pb::ZoneMessage>,
}

impl Stream {
    /// Attaches with the node certificate `chain` over `key`, says hello and applies the
    /// config the zone sends.
    pub(crate) async fn attach(z: &TestZone, chain: &str, key: &orc_tls::NodeIdentity) -> Stream {
        Stream::attach_with(z, chain, key, None).await
    }

    /// [`Stream::attach`] with `facts` in the hello.
    pub(crate) async fn attach_with(
        z: &TestZone,
        chain: &str,
        key: &orc_tls::NodeIdentity,
        facts: Option<agent_pb::Facts>,
    ) -> Stream {
        Stream::attach_as(z, chain, key, facts, false).await
    }

    /// [`Stream::attach_with`] as an agent that applies mesh changes (`true`) or one that
    /// knows only whole configs.
    pub(crate) async fn attach_as(
        z: &TestZone,
        chain: &str,
        key: &orc_tls::NodeIdentity,
        facts: Option<agent_pb::Facts>,
        applies_mesh_changes: bool,
    ) -> Stream {
        let ca = orc_tls::PinnedCa::from_pem(z.zone.ca_pem().unwrap(), "test").unwrap();
        let config = ca
            .client_config_with_identity(orc_tls::ALPN_H2, chain, key.private_key_der())
            .unwrap();
        let channel =
            orc_agent::connect::channel(&z.zone.grpc_url(), config, Duration::from_secs(2))
                .await
                .unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let hello = agent_pb::Hello {
            protocol_version: orc_proto::AGENT_PROTOCOL_VERSION,
            version: "test".into(),
            facts,
            applied_generation: 0,
            applies_mesh_changes,
        };
        let hello = agent_pb::AgentMessage {
            body: Some(agent_message::Body::Hello(hello)),
        };
        tx.send(hello).await.unwrap();
        let inbound = AgentHubClient::new(channel)
            .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        Stream { tx, inbound }
    }

    pub(crate) async fn send(&self, body: agent_message::Body) {
        let message = agent_pb::AgentMessage { body: Some(body) };
        self.tx.send(message).await.unwrap();
    }

    /// The next message of the zone other than a keep-alive or the node's workloads (a
    /// hand-driven stream runs no apps; `apps_on_nodes` tests those).
    pub(crate) async fn next(&mut self) -> zone_message::Body {
        loop {
            let message = tokio::time::timeout(API_WAIT, self.inbound.message())
                .await
                .expect("the zone says something")
                .expect("the stream is whole")
                .expect("the stream is open");
            match message.body.expect("a body") {
                zone_message::Body::KeepAlive(_) | zone_message::Body::Workloads(_) => continue,
                body => return body,
            }
        }
    }

    /// Reads the welcome and the config, and reports the config applied.
    async fn settle(&mut self) {
        assert!(matches!(self.next().await, zone_message::Body::Welcome(_)));
        let zone_message::Body::Config(config) = self.next().await else {
            panic!("a config follows the welcome");
        };
        let applied = agent_pb::Applied {
            generation: config.generation,
            error: String::new(),
        };
        self.send(agent_message::Body::Applied(applied)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_stream_of_a_node_takes_over_and_the_older_one_leaves_its_record_alone() {
    let z = TestZone::start().await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id,
    } = running_node(&z).await;
    let minted = z
        .post(
            &format!("{WEB}/nodes/{node_id}/join-tokens"),
            &t.mia,
            json!({}),
        )
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    let key = orc_tls::NodeIdentity::generate().unwrap();
    let secret = minted.body["secret"].as_str().unwrap();
    let joined = join_as(&z, secret, &node_id, &key).await.unwrap();
    let chain = joined.certificate_chain_pem;

    let mut older = Stream::attach(&z, &chain, &key).await;
    older.settle().await;
    let ready = || async {
        let agent = &node_view(&z, &t.vic).await["agent"];
        agent["state"] == "ready" && agent["connected"] == true
    };
    eventually("the first stream makes the node ready", API_WAIT, ready).await;

    // The second stream takes over; the first is told to leave.
    let mut newer = Stream::attach(&z, &chain, &key).await;
    newer.settle().await;
    let zone_message::Body::Leave(leave) = older.next().await else {
        panic!("the older stream is asked to leave");
    };
    assert!(
        leave.reason.contains("newer connection"),
        "{}",
        leave.reason
    );
    drop(older);

    // Commands go to the newer stream, and the older one's end changed nothing.
    let call = tokio::spawn({
        let (http, url, token) = (z.http.clone(), z.zone.url(), t.mia.clone());
        let path = format!("{url}{WEB}/nodes/{node_id}/exec");
        async move {
            let response = http
                .post(path)
                .bearer_auth(token)
                .json(&json!({ "argv": ["true"] }))
                .send()
                .await
                .unwrap();
            (response.status(), response.text().await.unwrap())
        }
    });
    let zone_message::Body::ExecStart(start) = newer.next().await else {
        panic!("the command reaches the newer stream");
    };
    let exit = agent_pb::ExecExit {
        exec_id: start.exec_id,
        code: Some(0),
        error: String::new(),
    };
    newer.send(agent_message::Body::ExecExit(exit)).await;
    let (status, body) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"code\":0"), "{body}");
    eventually("the node stays ready on the newer stream", API_WAIT, ready).await;

    drop(newer);
    eventually(
        "the node is joined once the newer stream ends",
        API_WAIT,
        || async {
            let agent = &node_view(&z, &t.vic).await["agent"];
            agent["state"] == "joined" && agent["connected"] == false
        },
    )
    .await;
    // One departure: the node's, not the replaced stream's. The event is written
    // after the state, so it is waited for.
    let departures = || async {
        events_of(&z, &t.vic)
            .await
            .iter()
            .filter(|e| e["kind"] == "node.agent_gone")
            .count()
    };
    eventually("the departure is recorded", API_WAIT, || async {
        departures().await > 0
    })
    .await;
    assert_eq!(departures().await, 1);
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}
