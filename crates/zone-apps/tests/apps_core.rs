//! The `core` provider against real child processes: a small shell script stands in for an
//! app. Each test runs its own store and data dir in a temp dir; waits poll for an outcome
//! with a generous deadline and never assert how long anything took.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use orc_common::{Architecture, Shape};
use orc_testkit::eventually_some;
use orc_testkit::proto::deploy;
use orc_zone_apps::policy::RestartPolicy;
use orc_zone_apps::{AppBinary, Apps, AppsConfig, AppsOptions, Level, LogSource, SlotInfo};
use orc_zone_model::registry::{
    AppManifest, AppPackage, BinaryRef, Digest, PackageDocument, Platform,
};
use orc_zone_model::{
    AppSpec, Endpoint, Expected, NewPool, Node, NodeState, NodeStatus, Pool, PoolSpec,
    SensitiveParams, Timestamp, TokenSecret, sys_project_id,
};
use orc_zone_store::Store;

const SCRIPT: &str = r#"
trap 'echo "stop $ORC_SLOT $ORC_POOL_GENERATION" >> "$OUT_DIR/events"; exit 0' TERM
out="$OUT_DIR/slot-$ORC_SLOT"
mkdir -p "$out"
env > "$out/env.tmp" && mv "$out/env.tmp" "$out/env"
echo "start $ORC_SLOT $ORC_POOL_GENERATION" >> "$OUT_DIR/events"
echo "INFO started generation $ORC_POOL_GENERATION"
echo "WARN the key is $(cat "$ORC_PARAM_API_KEY_FILE")"
echo "2026-11-29T18:23:51.123456Z DEBUG detail of slot $ORC_SLOT"
echo "ERROR from stderr" >&2
echo "a plain line"
if [ "$ORC_PARAM_MODE" = crash ]; then exit 3; fi
while true; do sleep 0.05; done
"#;

const SECRET: &str = "sekrit-value-123456";

struct Fixture {
    _dir: tempfile::TempDir,
    out: PathBuf,
    data: PathBuf,
    store: Store,
    apps: Apps,
}

fn fast_options() -> AppsOptions {
    AppsOptions {
        restart: RestartPolicy {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            stable_after: Duration::from_secs(60),
        },
        settle: Duration::from_millis(300),
        stop_grace: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
        log_lines: 100,
    }
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&out).unwrap();
    let script = dir.path().join("app.sh");
    std::fs::write(&script, SCRIPT).unwrap();
    let store = Store::open_sqlite_file(&dir.path().join("zone.db"))
        .await
        .unwrap();
    store
        .set_sealing_key(orc_zone_store::SealingKey::generate())
        .await
        .unwrap();
    let mut config = AppsConfig {
        options: fast_options(),
        // The fixture's script lives in a private temporary dir: run it as the zone's user
        // (tests/isolation.rs covers unprivileged slots).
        run_as: orc_zone_apps::RunAs::ZoneUser,
        ..AppsConfig::default()
    };
    config.apps.insert(
        "testapp".to_string(),
        AppBinary {
            path: "/bin/sh".into(),
            args: vec![script.to_string_lossy().into_owned()],
            env: BTreeMap::from([("OUT_DIR".to_string(), out.to_string_lossy().into_owned())]),
            sensitive_params: Default::default(),
        },
    );
    // The registry's app gets the same directory from the operator's environment.
    config.env.insert(
        "regapp".to_string(),
        BTreeMap::from([("OUT_DIR".to_string(), out.to_string_lossy().into_owned())]),
    );
    let endpoint = orc_zone_apps::ZoneEndpoint {
        url: "http://127.0.0.1:7999".into(),
        ca_pem: None,
    };
    let apps = Apps::start(store.clone(), &data, endpoint, config)
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        out,
        data,
        store,
        apps,
    }
}

fn app(params: &[(&str, &str)]) -> AppSpec {
    AppSpec {
        package: "sys/testapp:default".to_string(),
        digest: None,
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        sensitive: SensitiveParams(BTreeMap::from([(
            "api_key".to_string(),
            SECRET.to_string(),
        )])),
    }
}

impl Fixture {
    async fn pool(&self, name: &str, size: u32, app: AppSpec) -> (Pool, Vec<Node>) {
        self.pool_with(name, size, app, vec![]).await
    }

    async fn pool_with(
        &self,
        name: &str,
        size: u32,
        app: AppSpec,
        endpoints: Vec<Endpoint>,
    ) -> (Pool, Vec<Node>) {
        let new = NewPool {
            project_id: sys_project_id(),
            name: name.parse().unwrap(),
            size,
            spec: PoolSpec {
                provider_id: self.apps.provider().id.clone(),
                shape: Shape {
                    vcpus: 1,
                    memory_gib: 1,
                    arch: Architecture::X86_64,
                    disks_gib: vec![],
                },
                region_class: "local".parse().unwrap(),
                os: "none".parse().unwrap(),
                public: false,
                endpoints,
                app: Some(app),
                placement: Default::default(),
                ssh_keys: Vec::new(),
            },
        };
        let change = self
            .store
            .create_pool(&new, Timestamp::now())
            .await
            .unwrap();
        (change.pool, change.created)
    }

    async fn deploy(&self, node: &Node) -> orc_proto::DeployResult {
        self.apps
            .deploy_slot(&orc_proto::Deploy {
                os: orc_proto::OsId::new("none").unwrap(),
                ..deploy(node.id.as_str(), orc_proto::QuoteToken::new("t").unwrap())
            })
            .await
    }

    fn slot_out(&self, slot: u32) -> PathBuf {
        self.out.join(format!("slot-{slot}"))
    }

    fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.out.join("events"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// How long a test waits for the apps' processes to get where it expects.
const WAIT: Duration = Duration::from_secs(10);

fn read_env(path: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path.join("env")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

async fn slot_info(apps: &Apps, node: &Node) -> Option<SlotInfo> {
    apps.slots()
        .await
        .into_iter()
        .find(|s| s.node_id == node.id)
}

#[tokio::test]
async fn slot_gets_env_and_files_and_deploy_is_idempotent() {
    let f = fixture().await;
    let (pool, nodes) = f
        .pool(
            "web",
            1,
            app(&[("partner_id", "zone-1"), ("regions", "{\"eu\": [1, 2]}")]),
        )
        .await;
    let node = &nodes[0];

    let first = match f.deploy(node).await {
        orc_proto::DeployResult::Deployed(d) => d,
        other => panic!("deploy refused: {other:?}"),
    };
    assert_eq!(first.site.as_str(), "local");
    assert_eq!(first.price, None);
    let env = eventually_some("the env dump", WAIT, || async { read_env(&f.slot_out(0)) }).await;
    let info = slot_info(&f.apps, node).await.unwrap();
    let pid = info.pid.unwrap();

    assert_eq!(env["ORC_SLOT"], "0");
    assert_eq!(env["ORC_POOL"], "sys/sys/web");
    assert_eq!(env["ORC_NODE"], node.id.as_str());
    assert_eq!(env["ORC_ZONE_GRPC"], "http://127.0.0.1:7999");
    assert_eq!(env["ORC_ZONE_ENDPOINT"], "http://127.0.0.1:7999");
    assert_eq!(env["ORC_ZONE_PROJECT"], "sys/sys");
    assert_eq!(env["ORC_PARAM_PARTNER_ID"], "zone-1");
    // The slot's log keeps debug lines of orc's crates unless the zone says otherwise.
    let log_filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info,orc=debug".into());
    assert_eq!(env["RUST_LOG"], log_filter);
    assert!(!env.contains_key("ORC_PARAM_REGIONS"));
    assert!(!env.contains_key("ORC_PARAM_API_KEY"));
    let env_text = std::fs::read_to_string(f.slot_out(0).join("env")).unwrap();
    assert!(
        !env_text.contains(SECRET),
        "a sensitive value is in the environment"
    );

    let run_dir = f
        .data
        .join("apps")
        .join(pool.id.as_str())
        .join("slot-0/run");
    assert_eq!(
        std::fs::metadata(&run_dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for (var, content) in [
        ("ORC_PARAM_API_KEY_FILE", SECRET),
        ("ORC_PARAM_REGIONS_FILE", "{\"eu\": [1, 2]}"),
    ] {
        let path = PathBuf::from(&env[var]);
        assert!(
            path.starts_with(&run_dir),
            "{var} is outside the runtime dir"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{var}");
    }

    let token = std::fs::read_to_string(&env["ORC_ZONE_TOKEN_FILE"]).unwrap();
    let record = f
        .store
        .authenticate_token(&TokenSecret::from_presented(token), Timestamp::now())
        .await
        .unwrap()
        .expect("the app's zone token authenticates");
    // A service credential of the pool, not a role: the apps user holds none.
    assert_eq!(record.service_pool.as_ref(), Some(&pool.id));
    let memberships = f
        .store
        .list_memberships_of_user(&record.user_id)
        .await
        .unwrap();
    assert!(memberships.is_empty(), "{memberships:?}");

    let again = match f.deploy(node).await {
        orc_proto::DeployResult::Deployed(d) => d,
        other => panic!("second deploy refused: {other:?}"),
    };
    assert_eq!(again.instance_ref, first.instance_ref);
    let infos = f.apps.slots().await;
    assert_eq!(infos.len(), 1);
    assert_eq!(
        infos[0].pid,
        Some(pid),
        "a second deploy started another process"
    );

    let logs = eventually_some("the secret line", WAIT, || async {
        let lines = f.apps.logs(&pool.id, None, Level::Warn);
        lines
            .iter()
            .any(|l| l.text.starts_with("the key is"))
            .then_some(lines)
    })
    .await;
    let line = logs
        .iter()
        .find(|l| l.text.starts_with("the key is"))
        .unwrap();
    assert_eq!(line.text, "the key is <redacted>");
    assert_eq!(line.level, Level::Warn);
    let file = std::fs::read_to_string(f.apps.log_file(&pool.id, 0)).unwrap();
    assert!(file.contains("the key is <redacted>"));
    assert!(!file.contains(SECRET));

    assert_eq!(
        f.apps.destroy_slot(&node.id.clone()).await,
        orc_proto::DestroyResult::Destroyed
    );
    assert!(!alive(pid), "the process outlived its destroy");
    assert!(!run_dir.exists(), "the runtime dir outlived its slot");
    assert!(
        f.events().contains(&"stop 0 1".to_string()),
        "no SIGTERM first"
    );
    assert!(f.apps.slots().await.is_empty());
    assert_eq!(
        f.apps.destroy_slot(&node.id.clone()).await,
        orc_proto::DestroyResult::Destroyed
    );
    f.apps.shutdown().await;
}

#[tokio::test]
async fn crashing_slot_restarts_with_backoff() {
    let f = fixture().await;
    let (pool, nodes) = f.pool("crashy", 1, app(&[("mode", "crash")])).await;
    assert!(matches!(
        f.deploy(&nodes[0]).await,
        orc_proto::DeployResult::Deployed(_)
    ));
    let info = eventually_some("three restarts", WAIT, || async {
        slot_info(&f.apps, &nodes[0])
            .await
            .filter(|s| s.restarts >= 3 && s.backoff.is_some())
    })
    .await;
    let policy = fast_options().restart;
    assert!(info.exits_in_a_row >= 3);
    assert!(info.last_exit.as_deref().unwrap().contains('3'));
    assert!(policy.delay(info.exits_in_a_row) >= policy.delay(1));
    let starts = f
        .events()
        .iter()
        .filter(|e| e.as_str() == "start 0 1")
        .count();
    assert!(starts >= 3, "{starts} starts");
    let notes: Vec<_> = f
        .apps
        .logs(&pool.id, Some(0), Level::Warn)
        .into_iter()
        .filter(|l| l.source == LogSource::Supervisor)
        .collect();
    assert!(
        notes
            .iter()
            .any(|l| l.text.contains("ended (exit status: 3)")),
        "{notes:?}"
    );
    f.apps.shutdown().await;
}

#[tokio::test]
async fn logs_have_levels_and_filter_by_level_and_slot() {
    let f = fixture().await;
    let (pool, nodes) = f.pool("logs", 2, app(&[])).await;
    for node in &nodes {
        assert!(matches!(
            f.deploy(node).await,
            orc_proto::DeployResult::Deployed(_)
        ));
    }
    let all = eventually_some("lines of both slots", WAIT, || async {
        let lines = f.apps.logs(&pool.id, None, Level::Trace);
        let plain = |slot| {
            lines
                .iter()
                .any(|l| l.slot == slot && l.text == "a plain line")
        };
        let stderr = |slot| {
            lines
                .iter()
                .any(|l| l.slot == slot && l.source == LogSource::Stderr)
        };
        (plain(0) && plain(1) && stderr(0) && stderr(1)).then_some(lines)
    })
    .await;
    let level_of = |slot: u32, start: &str| {
        all.iter()
            .find(|l| l.slot == slot && l.text.starts_with(start))
            .map(|l| l.level)
    };
    assert_eq!(level_of(0, "started"), Some(Level::Info));
    assert_eq!(level_of(0, "the key"), Some(Level::Warn));
    assert_eq!(level_of(0, "detail of slot"), Some(Level::Debug));
    assert_eq!(level_of(0, "from stderr"), Some(Level::Error));
    assert_eq!(level_of(0, "a plain line"), Some(Level::Info));
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));

    let slot1_warn = f.apps.logs(&pool.id, Some(1), Level::Warn);
    assert!(!slot1_warn.is_empty());
    assert!(
        slot1_warn
            .iter()
            .all(|l| l.slot == 1 && l.level >= Level::Warn)
    );
    assert!(slot1_warn.iter().any(|l| l.level == Level::Error));
    let no_debug = f.apps.logs(&pool.id, None, Level::Info);
    assert!(no_debug.iter().all(|l| l.level != Level::Debug));
    assert!(f.apps.logs(&pool.id, Some(7), Level::Trace).is_empty());
    f.apps.shutdown().await;
}

#[tokio::test]
async fn params_change_replaces_slots_one_at_a_time() {
    let f = fixture().await;
    let (pool, nodes) = f.pool("roll", 2, app(&[("partner_id", "one")])).await;
    for node in &nodes {
        assert!(matches!(
            f.deploy(node).await,
            orc_proto::DeployResult::Deployed(_)
        ));
    }
    eventually_some("both first starts", WAIT, || async {
        let events = f.events();
        (events.contains(&"start 0 1".to_string()) && events.contains(&"start 1 1".to_string()))
            .then_some(())
    })
    .await;
    let before = f.events().len();

    let mut spec = pool.spec.clone();
    spec.app = Some(app(&[("partner_id", "two")]));
    let reconfigured = f
        .store
        .reconfigure_pool(&pool.id, pool.generation, &spec, Timestamp::now())
        .await
        .unwrap();
    assert_eq!(reconfigured.generation, 2);

    eventually_some("both slots started on generation 2", WAIT, || async {
        let events = f.events();
        (events.contains(&"start 0 2".to_string()) && events.contains(&"start 1 2".to_string()))
            .then_some(())
    })
    .await;
    let events = f.events()[before..].to_vec();
    assert_eq!(
        events,
        vec!["stop 0 1", "start 0 2", "stop 1 1", "start 1 2"],
        "slots were not replaced one at a time"
    );
    for slot in 0..2 {
        let env = read_env(&f.slot_out(slot)).unwrap();
        assert_eq!(env["ORC_PARAM_PARTNER_ID"], "two");
        assert_eq!(env["ORC_POOL_GENERATION"], "2");
    }
    f.apps.shutdown().await;
}

#[tokio::test]
async fn running_nodes_are_adopted_and_ended_nodes_stopped() {
    let f = fixture().await;
    let (_, nodes) = f.pool("resume", 1, app(&[])).await;
    let node = &nodes[0];
    let mut status = NodeStatus::pending(Timestamp::now());
    status.state = NodeState::Running;
    status.next_attempt_at = None;
    status.site = Some("local".to_string());
    let running = f
        .store
        .update_node_state(
            &node.id,
            Expected::Version(node.version),
            &status,
            Timestamp::now(),
        )
        .await
        .unwrap();

    let info = eventually_some("the adopted slot", WAIT, || async {
        slot_info(&f.apps, node).await.filter(|s| s.pid.is_some())
    })
    .await;
    let pid = info.pid.unwrap();
    assert!(alive(pid));

    f.store
        .end_node(
            &node.id,
            Expected::Version(running.version),
            None,
            Timestamp::now(),
        )
        .await
        .unwrap();
    eventually_some("the process of the ended node to stop", WAIT, || async {
        (f.apps.slots().await.is_empty() && !alive(pid)).then_some(())
    })
    .await;
    assert!(
        f.events().contains(&"stop 0 1".to_string()),
        "no SIGTERM first"
    );
    f.apps.shutdown().await;
}

#[tokio::test]
async fn quotes_offer_local_unpriced_or_refuse_with_operator_fix() {
    let f = fixture().await;
    let (_, good) = f.pool("good", 1, app(&[])).await;
    let mut missing = app(&[]);
    missing.package = "sys/not-there:v1".to_string();
    let (_, bad) = f.pool("bad", 1, missing).await;
    let mut bad_param = app(&[]);
    bad_param
        .params
        .insert("Bad-Name".to_string(), "x".to_string());
    let (_, worse) = f.pool("worse", 1, bad_param).await;

    let quote = |node: &Node| orc_proto::Quote {
        pool: orc_proto::PoolPath::new("sys/sys/x").unwrap(),
        os: orc_proto::OsId::new("none").unwrap(),
        ..orc_testkit::proto::quote(node.id.as_str(), "local", 1, 1)
    };
    match f.apps.quote_slot(&quote(&good[0])).await {
        orc_proto::QuoteReply::Offer(offer) => {
            assert_eq!(offer.site.as_str(), "local");
            assert_eq!(offer.price, None);
            assert_eq!(offer.words, "sys/testapp:default · local");
        }
        other => panic!("expected an offer: {other:?}"),
    }
    for (node, words) in [
        (
            &bad[0],
            "app sys/not-there:v1 is not published in this zone's registry",
        ),
        (&worse[0], "param \"Bad-Name\""),
    ] {
        match f.apps.quote_slot(&quote(node)).await {
            orc_proto::QuoteReply::Refused(refusal) => {
                assert_eq!(refusal.kind, orc_proto::RefusalKind::OperatorFix);
                assert!(refusal.words.contains(words), "{}", refusal.words);
            }
            other => panic!("expected a refusal: {other:?}"),
        }
    }
    assert!(matches!(
        f.deploy(&bad[0]).await,
        orc_proto::DeployResult::Refused(r) if r.kind == orc_proto::RefusalKind::OperatorFix
    ));
    assert!(f.apps.slots().await.is_empty());
    f.apps.shutdown().await;
}

#[tokio::test]
async fn http_endpoints_get_a_loopback_port_per_slot_that_outlives_a_restart() {
    let f = fixture().await;
    let endpoint = |name: &str, protocol: &str, port| Endpoint {
        name: name.into(),
        protocol: protocol.into(),
        port,
    };
    let (pool, nodes) = f
        .pool_with(
            "site",
            2,
            app(&[]),
            vec![
                endpoint("web", "http", 8080),
                endpoint("admin-ui", "http", 9090),
                endpoint("raw", "tcp", 7000),
            ],
        )
        .await;
    for node in &nodes {
        assert!(matches!(
            f.deploy(node).await,
            orc_proto::DeployResult::Deployed(_)
        ));
    }
    let mut seen = Vec::new();
    for slot in 0..2 {
        let env = eventually_some("the env dump", WAIT, || async {
            read_env(&f.slot_out(slot))
        })
        .await;
        assert!(
            !env.contains_key("ORC_HTTP_RAW_ADDR"),
            "a tcp endpoint gets no http address"
        );
        for (name, variable) in [
            ("admin-ui", "ORC_HTTP_ADMIN_UI_ADDR"),
            ("web", "ORC_HTTP_WEB_ADDR"),
        ] {
            let address: std::net::SocketAddr = env[variable].parse().unwrap();
            assert!(address.ip().is_loopback(), "{address}");
            seen.push((slot, name.to_string(), address));
        }
    }
    let mut ports: Vec<u16> = seen.iter().map(|(_, _, a)| a.port()).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(
        ports.len(),
        4,
        "every slot and endpoint has its own port: {seen:?}"
    );
    assert_eq!(f.apps.http_endpoints(&pool.id), seen);

    // The process dies and comes back: same address.
    let pid = slot_info(&f.apps, &nodes[0]).await.unwrap().pid.unwrap();
    std::fs::remove_file(f.slot_out(0).join("env")).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let env = eventually_some("the restarted slot's env", WAIT, || async {
        read_env(&f.slot_out(0))
    })
    .await;
    assert_ne!(slot_info(&f.apps, &nodes[0]).await.unwrap().pid, Some(pid));
    assert_eq!(env["ORC_HTTP_WEB_ADDR"], seen[1].2.to_string());
    assert_eq!(env["ORC_HTTP_ADMIN_UI_ADDR"], seen[0].2.to_string());

    // The second slot ends: its ports are given back.
    f.apps.destroy_slot(&nodes[1].id).await;
    assert_eq!(f.apps.http_endpoints(&pool.id), seen[..2].to_vec());
    f.apps.shutdown().await;
}

/// Publishes `binary` as `sys/regapp:default` with `args`; returns the package's digest.
async fn publish(f: &Fixture, binary: &[u8], args: &[&str]) -> Digest {
    let blob = Digest::of(binary);
    f.apps.blobs().put(&blob, binary, 1 << 20).await.unwrap();
    let mut manifest = AppManifest::bare("regapp", "1.0");
    manifest.args = args.iter().map(ToString::to_string).collect();
    let document = PackageDocument {
        manifest,
        binaries: [(
            Platform::host().unwrap(),
            BinaryRef {
                digest: blob,
                size: binary.len() as u64,
            },
        )]
        .into(),
    };
    let package = AppPackage {
        org_id: orc_zone_model::sys_org_id(),
        name: "regapp".parse().unwrap(),
        digest: document.digest(),
        document,
        created_at: Timestamp::now(),
    };
    f.store.put_app_package(&package).await.unwrap();
    package.digest
}

#[tokio::test]
async fn registry_apps_run_their_hashed_binary_and_a_changed_one_does_not_run() {
    let f = fixture().await;
    let binary = format!("#!/bin/sh\n{SCRIPT}");
    let digest = publish(&f, binary.as_bytes(), &[]).await;
    let spec = AppSpec {
        package: "sys/regapp:default".to_string(),
        digest: Some(digest.clone()),
        ..app(&[("mode", "registry")])
    };
    let (_, nodes) = f.pool("reg", 2, spec.clone()).await;
    assert!(matches!(
        f.deploy(&nodes[0]).await,
        orc_proto::DeployResult::Deployed(_)
    ));
    let env = eventually_some(
        "the registry slot's environment",
        Duration::from_secs(20),
        || async { std::fs::read_to_string(f.slot_out(0).join("env")).ok() },
    )
    .await;
    assert!(env.contains("ORC_PARAM_MODE=registry"), "{env}");
    assert!(
        env.contains(&format!("ORC_POOL={}", "sys/sys/reg")),
        "{env}"
    );

    // The binary on disk changes under the registry: the next slot is refused, naming it.
    let blob_path = f.apps.blobs().path(&Digest::of(binary.as_bytes()));
    std::fs::set_permissions(&blob_path, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(&blob_path, "#!/bin/sh\nexit 0\n").unwrap();
    match f.deploy(&nodes[1]).await {
        orc_proto::DeployResult::Refused(r) => {
            assert_eq!(r.kind, orc_proto::RefusalKind::OperatorFix);
            assert!(r.words.contains("has changed"), "{}", r.words);
        }
        other => panic!("a changed binary ran: {other:?}"),
    }

    // A digest the registry does not hold is named.
    let (_, gone) = f
        .pool(
            "gone",
            1,
            AppSpec {
                digest: Some(Digest::of(b"never published")),
                ..spec
            },
        )
        .await;
    match f.deploy(&gone[0]).await {
        orc_proto::DeployResult::Refused(r) => {
            assert!(r.words.contains("no longer in the registry"), "{}", r.words);
        }
        other => panic!("an unknown package ran: {other:?}"),
    }
}
