//! The `orc` binary against a zone started in-process: human tables compared with golden
//! files in `tests/golden/` (regenerate with `INSTA_UPDATE=always`), `--json` output, and errors as
//! one line naming the field.

use std::process::Output;

use orc_testkit::zone::{TestZone, tenancy};
use orc_zone::model::Timestamp;

/// A zone with the standard tenancy (the test kit's): org `acme`, projects `web` and `data`,
/// provider `fake` in acme/web.
async fn start() -> TestZone {
    let zone = TestZone::start().await;
    tenancy(&zone).await;
    zone
}

/// Runs `orc ARGS` against the zone as its admin (off the runtime's threads, which serve the
/// zone).
async fn orc(env: &TestZone, args: &[&str]) -> Output {
    orc_as(env, env.zone.admin_token().expose(), args).await
}

/// Runs `orc ARGS` against the zone with `token`.
async fn orc_as(env: &TestZone, token: &str, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(args)
        .env("ORC_URL", env.zone.url())
        .env("ORC_TOKEN", token)
        .env("ORC_DATA_DIR", env.dir())
        .env_remove("NO_COLOR");
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "orc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn golden(name: &str, actual: &str) {
    orc_testkit::golden::check(env!("CARGO_MANIFEST_DIR"), name, actual);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_nodes_and_providers_print_stable_tables() {
    let env = start().await;
    let created = orc(
        &env,
        &[
            "pool",
            "create",
            "acme/web/db",
            "--provider",
            "fake",
            "--class",
            "eu-central",
            "--cpu",
            "2",
            "--mem",
            "4",
            "--os",
            "debian-12",
            "--size",
            "3",
        ],
    )
    .await;
    assert_eq!(
        stdout(&created),
        "Created pool acme/web/db with 3 node(s).\n"
    );
    let created = orc(
        &env,
        &[
            "pool",
            "create",
            "acme/web/cache",
            "--provider",
            "fake",
            "--location",
            "eu-central",
            "--plan",
            "cax11",
            "--cpu",
            "1",
            "--mem",
            "2",
            "--arch",
            "arm64",
            "--disk",
            "20",
            "--os",
            "debian-12",
            "--size",
            "1",
        ],
    )
    .await;
    stdout(&created);

    golden("pools", &stdout(&orc(&env, &["pools", "acme/web"]).await));
    golden("pools-all", &stdout(&orc(&env, &["pools"]).await));
    // No replica of `fake` is connected: nodes wait in pending or quoting, so their table
    // (golden-tested from fixed views in orc-client's unit tests) is checked by shape here.
    let nodes = stdout(&orc(&env, &["nodes", "acme/web/db"]).await);
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(
        lines[0],
        "SLOT  NODE            STATE    SITE  PRIVATE  GATEWAY  PRICE     PUBLIC  INGRESS  AGENT  LAST CONTACT  WORDS",
        "{nodes}"
    );
    assert_eq!(lines.len(), 4, "{nodes}");
    for (slot, line) in lines[1..].iter().enumerate() {
        assert!(line.starts_with(&format!("{slot}     n-")), "{nodes}");
        assert!(line.contains("unpriced"), "{nodes}");
    }
    golden(
        "providers",
        &stdout(&orc(&env, &["providers", "acme/web"]).await),
    );

    let resized = orc(&env, &["pool", "resize", "acme/web/db", "1"]).await;
    assert_eq!(stdout(&resized), "Pool acme/web/db now has size 1.\n");
    let json = stdout(&orc(&env, &["--json", "nodes", "acme/web/db"]).await);
    let nodes: serde_json::Value = serde_json::from_str(&json).unwrap();
    let states: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.len(), 3, "{json}");
    assert!(matches!(states[0], "pending" | "quoting"), "{json}");
    assert_eq!(&states[1..], ["destroying", "destroying"], "{json}");

    let json = stdout(&orc(&env, &["--json", "pools", "acme/web"]).await);
    let pools: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(pools[0]["path"], "acme/web/cache");
    assert_eq!(pools[1]["nodes"]["destroying"], 2);

    let deleted = orc(&env, &["pool", "delete", "acme/web/cache"]).await;
    assert_eq!(
        stdout(&deleted),
        "Pool acme/web/cache is being deleted; its nodes are destroyed first.\n"
    );
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_scope_and_pricing_are_reported_in_words() {
    let env = start().await;
    let before = stdout(&orc(&env, &["providers", "acme/data"]).await);
    assert!(!before.contains("fake"), "{before}");
    assert!(before.contains("core"), "{before}");
    let changed = orc(&env, &["provider", "change-scope", "acme/web/fake", "zone"]).await;
    assert_eq!(
        stdout(&changed),
        "Provider acme/web/fake now has scope zone: visible to every project of the zone.\n"
    );
    let priced = orc(
        &env,
        &["provider", "pricing", "acme/web/fake", "--markup", "0.15"],
    )
    .await;
    assert_eq!(
        stdout(&priced),
        "Provider acme/web/fake now prices new nodes with markup 0.15.\n"
    );
    golden(
        "providers-zone",
        &stdout(&orc(&env, &["providers", "acme/data"]).await),
    );
    let unpriced = orc(&env, &["provider", "pricing", "acme/web/fake", "--none"]).await;
    assert_eq!(
        stdout(&unpriced),
        "Provider acme/web/fake has no pricing strategy: new nodes are unpriced.\n"
    );

    // 15 for 15 %: asked to confirm, nothing changed.
    let huge = orc(
        &env,
        &["provider", "pricing", "acme/web/fake", "--markup", "15"],
    )
    .await;
    assert!(!huge.status.success());
    assert_eq!(
        String::from_utf8(huge.stderr).unwrap(),
        "error: markup 15 is 1500%: more than doubling every price; give 0.15 for 15 %, or add \
         --yes if 15 is meant\n"
    );
    let confirmed = orc(
        &env,
        &[
            "provider",
            "pricing",
            "acme/web/fake",
            "--markup",
            "1.5",
            "--yes",
        ],
    )
    .await;
    assert_eq!(
        stdout(&confirmed),
        "Provider acme/web/fake now prices new nodes with markup 1.5.\n"
    );
    // A negative markup reaches the zone, whose message names the field.
    let negative = orc(
        &env,
        &["provider", "pricing", "acme/web/fake", "--markup", "-0.1"],
    )
    .await;
    assert!(!negative.status.success());
    let stderr = String::from_utf8(negative.stderr).unwrap();
    assert!(stderr.contains("(field: markup)"), "{stderr}");
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_line_naming_the_field() {
    let env = start().await;
    let out = orc(
        &env,
        &[
            "pool",
            "create",
            "acme/web/db",
            "--provider",
            "fake",
            "--class",
            "eu-central",
            "--cpu",
            "0",
            "--mem",
            "4",
            "--os",
            "debian-12",
            "--size",
            "1",
        ],
    )
    .await;
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: shape.cpu must be 1 to 1024 vCPUs, not 0 (field: shape.cpu) [400 invalid]\n"
    );

    let scope = orc(
        &env,
        &["provider", "change-scope", "acme/web/fake", "global"],
    )
    .await;
    assert_eq!(
        String::from_utf8(scope.stderr).unwrap(),
        "error: scope \"global\" is not one of zone, project (field: scope) [400 invalid]\n"
    );

    let path = orc(&env, &["nodes", "acme"]).await;
    assert_eq!(
        String::from_utf8(path.stderr).unwrap(),
        "error: \"acme\" is not ORG/PROJECT/POOL (or ORG/POOL)\n"
    );

    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(["pools", "acme/web"])
        .env("ORC_URL", env.zone.url())
        .env("ORC_TOKEN", "orc_wrong")
        .env("ORC_DATA_DIR", env.dir());
    let denied = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(denied.stderr).unwrap(),
        "error: the token is unknown, revoked or expired [401 unauthenticated]\n"
    );
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_dir_tells_the_cli_where_the_zone_is() {
    let env = start().await;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(["pools", "acme/web"])
        .env_remove("ORC_URL")
        .env_remove("ORC_TOKEN")
        .env("ORC_DATA_DIR", env.dir());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(stdout(&out), "No pools.\n");
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfigure_merges_params_and_usage_reads_a_month() {
    let env = start().await;
    let created = orc(
        &env,
        &[
            "pool",
            "create",
            "acme/web/svc",
            "--provider",
            "fake",
            "--class",
            "eu-central",
            "--cpu",
            "1",
            "--mem",
            "1",
            "--os",
            "debian-12",
            "--size",
            "0",
            "--app",
            "acme/svc:1",
            "--param",
            "mode=a",
            "--param",
            "old=x",
        ],
    )
    .await;
    stdout(&created);
    let changed = orc(
        &env,
        &[
            "pool",
            "reconfigure",
            "acme/web/svc",
            "--param",
            "mode=b",
            "--unset",
            "old",
            "--sensitive",
            "api_key=k",
        ],
    )
    .await;
    assert_eq!(
        stdout(&changed),
        "Pool acme/web/svc is at generation 2; its slots are replaced one at a time.\n"
    );
    let json = stdout(&orc(&env, &["--json", "pools", "acme/web"]).await);
    let pools: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        pools[0]["app"]["params"],
        serde_json::json!({ "mode": "b" })
    );
    assert_eq!(
        pools[0]["app"]["sensitive_params"],
        serde_json::json!(["api_key"])
    );

    let usage = stdout(&orc(&env, &["usage", "acme/web", "--month", "2026-11"]).await);
    assert!(
        usage.starts_with("Usage of 2026-11\nNo usage: no node of this project ran priced"),
        "{usage}"
    );
    let bad = orc(&env, &["usage", "acme/web", "--month", "2026-13"]).await;
    assert_eq!(
        String::from_utf8(bad.stderr).unwrap(),
        "error: month \"2026-13\" is invalid: \"2026-13\" is not a month of the form YYYY-MM \
         (field: month) [400 invalid]\n"
    );
    let json = stdout(&orc(&env, &["--json", "events", "acme/web", "--limit", "5"]).await);
    let events: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(events.as_array().is_some_and(|e| e.len() <= 5), "{json}");
    let bad_limit = orc(&env, &["events", "acme/web", "--limit", "0"]).await;
    assert_eq!(
        String::from_utf8(bad_limit.stderr).unwrap(),
        "error: limit must be 1 to 1000 (field: limit) [400 invalid]\n"
    );
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_list_what_the_provider_reported() {
    let env = start().await;
    let none = orc(&env, &["sites", "acme/web/fake"]).await;
    assert_eq!(stdout(&none), "Provider acme/web/fake has no open site.\n");

    let store = env.zone.store();
    let provider = store
        .list_providers()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_str() == "fake")
        .unwrap();
    let site = |name: &str, ipv4: Option<[u8; 4]>, prefix: Option<&str>| orc_proto::InventorySite {
        site: orc_proto::SiteName::new(name).unwrap(),
        public_ipv4: ipv4.map(std::net::Ipv4Addr::from),
        private_prefix: prefix.map(str::to_string),
    };
    let report = orc_proto::Inventory {
        nodes: vec![],
        sites: vec![
            site("eu-central-a", Some([192, 0, 2, 1]), Some("10.64.0.0/16")),
            site("us-east-a", None, None),
        ],
        pool_addresses: vec![],
    };
    orc_zone::reconcile::apply_inventory(
        store,
        &provider,
        &report,
        Timestamp::now(),
        std::time::Duration::from_secs(120),
    )
    .await
    .unwrap();
    golden(
        "sites",
        &stdout(&orc(&env, &["sites", "acme/web/fake"]).await),
    );
    let json = stdout(&orc(&env, &["--json", "sites", "acme/web/fake"]).await);
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed[0]["public_ipv4"], "192.0.2.1");
    assert_eq!(parsed[1]["reported"], true);
    // `--json` carries what the table's STATUS says.
    assert_eq!(parsed[1]["status"], "open", "{json}");

    // `core` has no replicas and reports no inventory: it is the zone, always there.
    let shown = stdout(&orc(&env, &["provider", "show", "core", "--project", "sys/sys"]).await);
    assert!(
        shown.contains("\nreplicas:  built into the zone"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_params_come_from_a_file_or_stdin_and_are_never_shown() {
    let env = start().await;
    let key_file = env.dir().join("api-key");
    std::fs::write(&key_file, "hunter2-from-file\n").unwrap();
    let key_arg = format!("api_key=@{}", key_file.display());
    let create = |name: &'static str, extra: Vec<String>| {
        let mut args: Vec<String> = [
            "pool",
            "create",
            name,
            "--provider",
            "fake",
            "--class",
            "eu-central",
            "--cpu",
            "1",
            "--mem",
            "1",
            "--os",
            "debian-12",
            "--size",
            "0",
            "--app",
            "acme/svc:1",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        args.extend(extra);
        args
    };
    let args = create("acme/web/svc", vec!["--sensitive".into(), key_arg]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    stdout(&orc(&env, &args).await);

    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(create(
        "acme/web/svc2",
        vec!["--sensitive".into(), "token=-".into()],
    ))
    .env("ORC_URL", env.zone.url())
    .env("ORC_TOKEN", env.zone.admin_token().expose())
    .env("ORC_CA_FILE", env.zone.ca_file().unwrap())
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let piped = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"hunter3-from-stdin\n").unwrap();
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    stdout(&piped);

    let json = stdout(&orc(&env, &["--json", "pools", "acme/web"]).await);
    let pools: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        pools[0]["app"]["sensitive_params"],
        serde_json::json!(["api_key"])
    );
    assert_eq!(
        pools[1]["app"]["sensitive_params"],
        serde_json::json!(["token"])
    );
    assert!(!json.contains("hunter"), "{json}");
    let stored = env
        .zone
        .store()
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &"svc".parse().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        stored.spec.app.unwrap().sensitive.0["api_key"],
        "hunter2-from-file",
        "the file's text without its line break"
    );

    let missing = env.dir().join("no-such-key");
    let args = create(
        "acme/web/svc3",
        vec![
            "--sensitive".into(),
            format!("api_key=@{}", missing.display()),
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = orc(&env, &args).await;
    assert!(!failed.status.success());
    let err = String::from_utf8(failed.stderr).unwrap();
    assert!(
        err.contains("cannot read sensitive param api_key from") && err.contains("no-such-key"),
        "{err}"
    );
    env.zone.shutdown().await;
}

/// Attack: read a token or a database password from another process's command line. The CLI
/// takes neither from argv: it refuses them there, naming where to put them instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_never_taken_from_the_command_line() {
    let env = start().await;
    let token = env.zone.admin_token().expose().to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    let run = |args: Vec<String>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
        cmd.args(args)
            .env("ORC_URL", env.zone.url())
            .env("ORC_CA_FILE", env.zone.ca_file().unwrap())
            .env("ORC_DATA_DIR", elsewhere.path())
            .env_remove("ORC_TOKEN")
            .env_remove("ORC_DATABASE_URL");
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let refused = run(vec!["pools".into(), "--token".into(), token.clone()]).await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--token would put the token on the command line")
            && stderr.contains("ORC_TOKEN or give --token-file PATH"),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "{stderr}");

    let file = elsewhere.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let by_file = run(vec![
        "pools".into(),
        "acme/web".into(),
        "--token-file".into(),
        file.display().to_string(),
    ])
    .await;
    assert!(
        by_file.status.success(),
        "{}",
        String::from_utf8_lossy(&by_file.stderr)
    );

    let url = "postgres://orc:pa55word@127.0.0.1:9/orc";
    let serve = run(vec![
        "zone".into(),
        "serve".into(),
        "--database-url".into(),
        url.into(),
    ])
    .await;
    assert!(!serve.status.success());
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(
        stderr.contains("--database-url would put the database password on the command line"),
        "{stderr}"
    );
    assert!(!stderr.contains("pa55word"), "{stderr}");
    env.zone.shutdown().await;
}

/// Mistakes and attacks on the CLI's connection: another zone's CA, no CA at all, plain
/// text to the TLS port. Each fails with one line that says what to do; `orc zone ca`
/// prints the CA to pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_pins_the_zone_ca_and_says_why_a_connection_fails() {
    let env = start().await;
    let elsewhere = tempfile::tempdir().unwrap();
    let other_ca = elsewhere.path().join("other-ca.pem");
    let other = orc_tls::ZoneCa::generate().unwrap();
    std::fs::write(&other_ca, other.cert_pem()).unwrap();
    let run = |url: String, ca: Option<std::path::PathBuf>, args: Vec<&'static str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
        cmd.args(args)
            .env("ORC_URL", url)
            .env("ORC_TOKEN", env.zone.admin_token().expose())
            .env("ORC_DATA_DIR", elsewhere.path())
            .env_remove("ORC_CA_FILE");
        if let Some(ca) = ca {
            cmd.env("ORC_CA_FILE", ca);
        }
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let url = env.zone.url();

    let wrong = run(url.clone(), Some(other_ca), vec!["pools", "acme/web"]).await;
    assert!(!wrong.status.success());
    assert_eq!(
        String::from_utf8(wrong.stderr).unwrap(),
        format!(
            "error: cannot reach the zone at {url}: its certificate is not signed by the pinned \
             CA (a different zone, or the wrong ca.pem)\n"
        )
    );

    let none = run(url.clone(), None, vec!["pools", "acme/web"]).await;
    assert!(
        String::from_utf8(none.stderr)
            .unwrap()
            .contains("speaks TLS, but there is no CA to trust: give --ca-file PATH"),
    );

    let plain = url.replacen("https://", "http://", 1);
    let refused = run(plain, None, vec!["pools", "acme/web"]).await;
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(
        stderr.contains("this port speaks TLS: use https://"),
        "{stderr}"
    );
    assert!(stderr.contains("[400 tls_required]"), "{stderr}");

    let pinned = run(url, env.zone.ca_file(), vec!["pools", "acme/web"]).await;
    assert!(pinned.status.success(), "{:?}", pinned);

    let dir = env.dir();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(["zone", "ca", "--data-dir", dir.to_str().unwrap()]);
    let ca = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(ca.status.success());
    assert_eq!(
        String::from_utf8(ca.stdout).unwrap(),
        env.zone.ca_pem().unwrap()
    );
    let fingerprint = env.zone.ca().unwrap().fingerprint();
    assert_eq!(
        String::from_utf8(ca.stderr).unwrap(),
        format!("fingerprint {fingerprint}\n")
    );
    env.zone.shutdown().await;
}

/// The operator rotates the admin token: the file holds a new one that works, the old one
/// is refused, and the token is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_admin_token_replaces_the_file_and_revokes_the_old_token() {
    let env = start().await;
    let dir = env.dir();
    let path = dir.join("admin-token");
    let old = std::fs::read_to_string(&path).unwrap().trim().to_string();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args([
        "zone",
        "rotate-admin-token",
        "--data-dir",
        dir.to_str().unwrap(),
    ])
    .env_remove("ORC_URL")
    .env_remove("ORC_TOKEN")
    .env_remove("ORC_CA_FILE");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("rotated the admin token of admin"),
        "{stdout}"
    );
    let new = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert_ne!(new, old);
    assert!(!stdout.contains(&new) && !stdout.contains(&old), "{stdout}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(env.get("/api/whoami", &new).await.status, 200);
    assert_eq!(env.get("/api/whoami", &old).await.status, 401);
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_keys_rotate_with_an_overlap_and_only_operators_may() {
    let env = start().await;
    let before: serde_json::Value = serde_json::from_str(&stdout(
        &orc(&env, &["--json", "zone", "access-keys"]).await,
    ))
    .unwrap();
    let first = before[0]["kid"].as_str().unwrap().to_string();
    let rotated = stdout(&orc(&env, &["zone", "rotate-access-key", "--overlap", "10m"]).await);
    assert!(
        rotated.starts_with("access key orc-")
            && rotated.contains(&format!("; {first} stays published until ")),
        "{rotated}"
    );
    let table = stdout(&orc(&env, &["zone", "access-keys"]).await);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[1].contains("signing") && lines[2].starts_with(&first),
        "{table}"
    );
    assert!(lines[2].contains("retiring"), "{table}");
    let too_long = orc(&env, &["zone", "rotate-access-key", "--overlap", "200h"]).await;
    assert!(!too_long.status.success());
    let error = String::from_utf8_lossy(&too_long.stderr);
    assert!(error.contains("overlap_seconds"), "{error}");
    let tenant = env.user("tess").await;
    let refused = orc_as(&env, &tenant, &["zone", "rotate-access-key"]).await;
    assert!(!refused.status.success());
    env.zone.shutdown().await;
}

/// `orc … | head` closes the pipe before `orc` is done writing: it ends quietly, status 0,
/// without a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_command_quietly() {
    let env = start().await;
    let dir = env.dir();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(["zone", "ca", "--data-dir", dir.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    env.zone.shutdown().await;
}

/// Connection mistakes a newcomer makes read as what they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_mistakes_are_named() {
    let env = start().await;
    let dir = env.dir();
    let run = |args: Vec<String>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
        cmd.args(args)
            .env("ORC_DATA_DIR", &dir)
            .env_remove("ORC_URL")
            .env_remove("ORC_TOKEN");
        async move {
            let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap();
            assert!(!out.status.success());
            String::from_utf8(out.stderr).unwrap()
        }
    };
    let no_scheme = env.zone.url().replacen("https://", "", 1);
    let stderr = run(vec![
        "pools".into(),
        "acme/web".into(),
        "--url".into(),
        no_scheme.clone(),
    ])
    .await;
    assert_eq!(
        stderr,
        format!(
            "error: the zone URL {no_scheme:?} has no scheme: give https://{no_scheme} (or \
             http:// for a zone started with --plain)\n"
        )
    );
    let missing = dir.join("no-such-token");
    let stderr = run(vec![
        "pools".into(),
        "acme/web".into(),
        "--token-file".into(),
        missing.display().to_string(),
    ])
    .await;
    assert!(
        stderr.starts_with(&format!(
            "error: cannot read the token file {}",
            missing.display()
        )),
        "{stderr}"
    );
    env.zone.shutdown().await;
}

/// Tenancy without curl: an operator makes an org, a project, a user with a role and a
/// token; the new user sees themself with `orc whoami`; the token is revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenancy_from_the_command_line() {
    let env = start().await;
    assert_eq!(
        stdout(&orc(&env, &["org", "create", "globex"]).await),
        "Org globex created. Next: `orc project create globex/NAME`.\n"
    );
    assert_eq!(
        stdout(&orc(&env, &["project", "create", "globex/shop"]).await),
        "Project globex/shop created.\n"
    );
    assert!(stdout(&orc(&env, &["project", "list", "globex"]).await).contains("globex/shop"));
    assert!(
        stdout(&orc(&env, &["user", "create", "gina"]).await).starts_with("User gina created.")
    );
    let added = stdout(&orc(&env, &["member", "add", "globex/shop", "gina", "member"]).await);
    assert!(
        added.starts_with("gina is now member of globex/shop (m-"),
        "{added}"
    );
    let members = stdout(&orc(&env, &["member", "list", "globex"]).await);
    assert!(
        members.contains("gina") && members.contains("shop"),
        "{members}"
    );

    let made = orc(
        &env,
        &[
            "token", "create", "gina", "--label", "laptop", "--days", "7",
        ],
    )
    .await;
    let value = stdout(&made).trim().to_string();
    assert!(value.starts_with("orc_"), "{value}");
    assert!(
        String::from_utf8(made.stderr)
            .unwrap()
            .contains("shown this once"),
        "the words go to stderr"
    );

    let me = stdout(&orc_as(&env, &value, &["whoami"]).await);
    assert!(me.starts_with("user:     gina\n"), "{me}");
    assert!(
        me.contains("\nproject:  (none: commands name one)\n"),
        "{me}"
    );
    assert!(me.contains("globex  shop     member"), "{me}");

    // Her `orc providers` means her own project, not sys/sys (where she has no role).
    let providers = stdout(&orc_as(&env, &value, &["providers"]).await);
    assert!(providers.contains("core"), "{providers}");

    let list = stdout(&orc(&env, &["token", "list", "gina"]).await);
    let id = list
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(list.contains("laptop") && list.contains("active"), "{list}");
    let revoked = stdout(&orc(&env, &["token", "revoke", "gina", &id]).await);
    assert!(
        revoked.starts_with(&format!("Token {id} of gina revoked")),
        "{revoked}"
    );
    assert!(stdout(&orc(&env, &["token", "list", "gina"]).await).contains("revoked"));
    env.zone.shutdown().await;
}

/// `orc pool delete --wait` returns once the pool is gone, saying so; `orc usage` of a
/// month without priced nodes says why it is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_delete_waits_and_empty_usage_says_why() {
    let env = start().await;
    stdout(
        &orc(
            &env,
            &[
                "pool",
                "create",
                "acme/web/tmp",
                "--provider",
                "fake",
                "--class",
                "eu-central",
                "--cpu",
                "2",
                "--mem",
                "4",
                "--os",
                "debian-12",
                "--size",
                "0",
            ],
        )
        .await,
    );
    let deleted = stdout(
        &orc(
            &env,
            &[
                "pool",
                "delete",
                "acme/web/tmp",
                "--wait",
                "--timeout",
                "60",
            ],
        )
        .await,
    );
    assert!(
        deleted.ends_with("Pool acme/web/tmp is deleted: its nodes are gone.\n"),
        "{deleted}"
    );
    let gone = orc(&env, &["nodes", "acme/web/tmp"]).await;
    assert!(!gone.status.success());

    let usage = stdout(&orc(&env, &["usage", "acme/web"]).await);
    assert!(
        usage.contains("No usage: no node of this project ran priced"),
        "{usage}"
    );
    env.zone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workstation_connects_with_a_key_made_here_and_disconnects() {
    use base64::Engine as _;
    use std::os::unix::fs::PermissionsExt as _;

    let env = TestZone::start().await;
    let t = tenancy(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("acme.conf");
    let file_arg = file.to_str().unwrap();
    let connect = [
        "mesh", "connect", "acme/web", "--name", "laptop", "--output", file_arg,
    ];

    let refused = orc_as(&env, &t.vic, &connect).await;
    assert!(!refused.status.success());
    assert!(!file.exists(), "nothing written for a viewer");

    let out = orc_as(&env, &t.mia, &connect).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Connected workstation laptop to the mesh of acme/web at 10.88.0."),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("wg-quick up {file_arg}")),
        "{stderr}"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&file).unwrap();
    let private = text
        .lines()
        .find_map(|l| l.strip_prefix("PrivateKey = "))
        .expect("a private key in the file");
    assert!(!stderr.contains(private) && !String::from_utf8_lossy(&out.stdout).contains(private));
    let private: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(private)
        .unwrap()
        .try_into()
        .unwrap();
    let listed = env
        .get("/api/orgs/acme/projects/web/mesh/workstations", &t.vic)
        .await
        .body;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        listed[0]["public_key"],
        base64::engine::general_purpose::STANDARD.encode(orc_wg::public_key(&private)),
        "the zone holds the public half of the file's key"
    );
    assert!(
        text.contains(&format!(
            "Address = {}/24",
            listed[0]["address"].as_str().unwrap()
        )),
        "{text}"
    );

    // An existing file is not replaced, and the zone is not asked.
    let again = orc_as(&env, &t.mia, &connect).await;
    assert_eq!(
        String::from_utf8(again.stderr).unwrap(),
        format!(
            "error: {file_arg} exists; choose another --output or pass --force to replace it\n"
        )
    );
    let forced: Vec<&str> = connect.iter().copied().chain(["--force"]).collect();
    let taken = orc_as(&env, &t.mia, &forced).await;
    let taken_err = String::from_utf8(taken.stderr).unwrap();
    assert!(
        taken_err.contains("workstation laptop is already on the mesh of acme/web"),
        "{taken_err}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        text,
        "the file is left alone"
    );

    let status = stdout(&orc_as(&env, &t.vic, &["mesh", "status", "acme/web"]).await);
    assert!(
        status.starts_with("Mesh 10.88.0.0/24 of acme/web"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("laptop ") && l.contains("workstation") && l.contains("idle")),
        "{status}"
    );

    let gone = stdout(
        &orc_as(
            &env,
            &t.mia,
            &["mesh", "disconnect", "acme/web", "--name", "laptop"],
        )
        .await,
    );
    assert!(
        gone.starts_with("Disconnected workstation laptop (10.88.0."),
        "{gone}"
    );
    let listed = env
        .get("/api/orgs/acme/projects/web/mesh/workstations", &t.vic)
        .await
        .body;
    assert_eq!(listed, serde_json::json!([]));
    env.zone.shutdown().await;
}

/// Pushes a one-layer image through the registry's OCI API as the admin.
async fn push_image(env: &TestZone, repository: &str, tag: &str, layer: &[u8]) {
    use base64::Engine as _;
    use orc_zone_model::registry::Digest;
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("admin:{}", env.zone.admin_token().expose()))
    );
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    for blob in [&config[..], layer] {
        let r = env
            .http
            .post(format!(
                "{}/v2/{repository}/blobs/uploads/?digest={}",
                env.zone.url(),
                Digest::of(blob)
            ))
            .header("authorization", &auth)
            .body(blob.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": Digest::of(config).to_string(), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": Digest::of(layer).to_string(), "size": layer.len()}],
    }))
    .unwrap();
    let r = env
        .http
        .put(format!(
            "{}/v2/{repository}/manifests/{tag}",
            env.zone.url()
        ))
        .header("authorization", &auth)
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_from_the_command_line() {
    let env = start().await;
    push_image(&env, "acme/shop", "1", b"layer one").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("orch.pkl");
    let file_arg = file.to_str().unwrap();
    let init = stdout(
        &orc(
            &env,
            &[
                "app",
                "init",
                "--name",
                "shop",
                "--image",
                "acme/shop:1",
                "--file",
                file_arg,
            ],
        )
        .await,
    );
    assert!(
        init.contains("app shop, 2 replicas of acme/shop:1"),
        "{init}"
    );

    let plan = stdout(&orc(&env, &["app", "plan", file_arg, "--project", "acme/web"]).await);
    assert!(
        plan.starts_with("App shop in acme/web, against nothing deployed yet:\n"),
        "{plan}"
    );
    assert!(
        plan.contains("  + services[\"shop\"].replicas: 2\n"),
        "{plan}"
    );
    assert!(
        plan.contains("It would be BLOCKED now:\n  shop: no_nodes"),
        "{plan}"
    );

    // Blocked: said, and a failure for a script.
    let deploy = orc(&env, &["app", "deploy", file_arg, "--project", "acme/web"]).await;
    assert!(!deploy.status.success());
    let said = String::from_utf8_lossy(&deploy.stdout);
    assert!(
        said.contains("App shop in acme/web: revision 1 is BLOCKED."),
        "{said}"
    );
    let error = String::from_utf8_lossy(&deploy.stderr);
    assert!(
        error.contains("nothing of revision 1 is applied until it fits"),
        "{error}"
    );

    let status = stdout(&orc(&env, &["app", "status", "shop", "--project", "acme/web"]).await);
    assert!(
        status.starts_with("App shop in acme/web: revision 1, BLOCKED, 0/2 replicas ready.\n"),
        "{status}"
    );
    assert!(status.contains("acme/shop:1"), "{status}");

    std::fs::write(
        &file,
        std::fs::read_to_string(&file)
            .unwrap()
            .replace("replicas = 2", "replicas = 3"),
    )
    .unwrap();
    let _ = orc(&env, &["app", "deploy", file_arg, "--project", "acme/web"]).await;
    let diff = stdout(
        &orc(
            &env,
            &["app", "diff", "shop", "1", "2", "--project", "acme/web"],
        )
        .await,
    );
    assert_eq!(
        diff,
        "App shop, revision 1 -> 2:\n  ~ services[\"shop\"].replicas: 2 -> 3\n"
    );
    let back = stdout(
        &orc(
            &env,
            &["app", "rollback", "shop", "1", "--project", "acme/web"],
        )
        .await,
    );
    assert!(
        back.contains("revision 3 (the app and images of revision 1)"),
        "{back}"
    );
    let history = stdout(&orc(&env, &["app", "history", "shop", "--project", "acme/web"]).await);
    let origins: Vec<&str> = history
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(origins, ["rollback:1", "deploy", "deploy"], "{history}");
    let listed: serde_json::Value = serde_json::from_str(&stdout(
        &orc(&env, &["app", "list", "--project", "acme/web", "--json"]).await,
    ))
    .unwrap();
    assert_eq!(listed[0]["name"], "shop");
    assert_eq!(listed[0]["revision"], 3);
    let removed = stdout(&orc(&env, &["app", "remove", "shop", "--project", "acme/web"]).await);
    assert!(
        removed.starts_with("App shop removed from acme/web"),
        "{removed}"
    );
    let none = stdout(&orc(&env, &["app", "list", "--project", "acme/web"]).await);
    assert!(none.contains("runs no app yet"), "{none}");
}

/// Runs `orc ARGS` as `token` with `input` on its stdin (a pipe, not a terminal).
async fn orc_with_stdin(env: &TestZone, token: &str, args: &[&str], input: &[u8]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(args)
        .env("ORC_URL", env.zone.url())
        .env("ORC_TOKEN", token)
        .env("ORC_DATA_DIR", env.dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let input = input.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), &input).unwrap();
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// A secret's value comes from stdin, less one line break, and no output shows it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_set_from_stdin_listed_and_deleted() {
    let env = TestZone::start().await;
    let t = tenancy(&env).await;
    let set = ["secret", "set", "db-password", "--project", "acme/web"];
    let value_of = || async {
        let store = env.zone.store();
        let project = store
            .project_by_path(&"acme".parse().unwrap(), &"web".parse().unwrap())
            .await
            .unwrap();
        store
            .secret_value(&project.id, &"db-password".parse().unwrap())
            .await
            .unwrap()
            .map(|v| v.to_string())
    };

    let first = orc_with_stdin(&env, &t.mia, &set, b"pa55-From-Stdin\n").await;
    assert_eq!(
        stdout(&first),
        "Secret db-password set in acme/web (version 1).\n"
    );
    assert_eq!(value_of().await.as_deref(), Some("pa55-From-Stdin"));
    let second = orc_with_stdin(&env, &t.mia, &set, b"line one\nline two\n\n").await;
    assert_eq!(
        stdout(&second),
        "Secret db-password set in acme/web (version 2).\n"
    );
    assert_eq!(
        value_of().await.as_deref(),
        Some("line one\nline two\n"),
        "one line break dropped, the rest kept"
    );

    // Nothing on stdin sets nothing.
    let empty = orc_with_stdin(&env, &t.mia, &set, b"").await;
    assert!(!empty.status.success());
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(stderr.contains("stdin held no value"), "{stderr}");
    // A viewer may not set one, whatever the value.
    let viewer = orc_with_stdin(&env, &t.vic, &set, b"viewer-Value\n").await;
    assert!(!viewer.status.success());
    let stderr = String::from_utf8_lossy(&viewer.stderr);
    assert!(stderr.contains("needs the member role"), "{stderr}");
    assert!(!stderr.contains("viewer-Value"), "{stderr}");
    // A bad name is named.
    let bad = orc_with_stdin(
        &env,
        &t.mia,
        &["secret", "set", "Bad", "--project", "acme/web"],
        b"fine\n",
    )
    .await;
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("(field: name)"), "{stderr}");

    let table = stdout(&orc_as(&env, &t.vic, &["secret", "list", "--project", "acme/web"]).await);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("NAME         VERSION  UPDATED"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("db-password  2        ") && lines[1].ends_with("  mia"),
        "{table}"
    );
    let json = stdout(
        &orc_as(
            &env,
            &t.vic,
            &["--json", "secret", "list", "--project", "acme/web"],
        )
        .await,
    );
    let listed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(listed[0]["name"], "db-password");
    assert_eq!(listed[0]["version"], 2);
    for output in [&table, &json] {
        assert!(
            !output.contains("pa55") && !output.contains("line one"),
            "{output}"
        );
    }

    let deleted = stdout(
        &orc_as(
            &env,
            &t.mia,
            &["secret", "delete", "db-password", "--project", "acme/web"],
        )
        .await,
    );
    assert_eq!(deleted, "Secret db-password deleted from acme/web.\n");
    assert_eq!(value_of().await, None);
    let again = orc_as(
        &env,
        &t.mia,
        &["secret", "delete", "db-password", "--project", "acme/web"],
    )
    .await;
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("secret db-password not found in project acme/web"),
        "{stderr}"
    );
    let none = stdout(&orc_as(&env, &t.vic, &["secret", "list", "--project", "acme/web"]).await);
    assert_eq!(none, "No secrets in acme/web.\n");
    env.zone.shutdown().await;
}
