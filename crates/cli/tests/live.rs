//! `orc` against a zone with a fake provider connected to its hub: `pool create --wait`
//! returns once every node runs, and `orc quote` prints the provider's offer with the
//! markup applied.

use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::{ProviderRunner, RunnerOptions, ZoneCredentials};
use orc_zone::model::{Markup, PricingStrategy, Timestamp};
use orc_zone::zone::{Zone, ZoneConfig};

async fn orc(zone: &Zone, dir: &std::path::Path, args: &[&str]) -> Output {
    orc_as(zone, dir, zone.admin_token().expose(), args).await
}

/// `orc ARGS` with `token`.
async fn orc_as(zone: &Zone, dir: &std::path::Path, token: &str, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cmd.args(args)
        .env("ORC_URL", zone.url())
        .env("ORC_TOKEN", token)
        .env("ORC_DATA_DIR", dir);
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

/// A zone with a fake provider connected to its hub, registered in `sys/sys`.
struct Live {
    zone: Zone,
    dir: std::path::PathBuf,
    cloud: Arc<FakeCloud>,
    provider: orc_zone::model::Provider,
    stop: tokio::sync::oneshot::Sender<()>,
    _tmp: tempfile::TempDir,
}

async fn live() -> Live {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();

    let cloud = FakeCloud::new();
    let credentials = ZoneCredentials::new(zone.admin_token().expose(), "sys/sys").unwrap();
    let options = RunnerOptions {
        keepalive_interval: Duration::from_millis(500),
        inventory_interval: None,
        jitter_seed: Some(1),
        credentials: Some(credentials),
        zone_ca: zone
            .ca_pem()
            .and_then(|pem| orc_tls::PinnedCa::from_pem(pem, "the test zone")),
        ..RunnerOptions::default()
    };
    let runner = ProviderRunner::new(
        &zone.grpc_url(),
        Arc::new(FakeProvider::new(Arc::clone(&cloud))),
        options,
    )
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));

    let mut provider = None;
    for _ in 0..300 {
        if let Ok(p) = zone.store().provider_by_resource("urn:orc:fake:test").await
            && !zone.hub().replicas_of(&p).is_empty()
        {
            provider = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let provider = provider.expect("the fake provider registers");
    Live {
        zone,
        dir,
        cloud,
        provider,
        stop,
        _tmp: tmp,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_create_waits_for_running_nodes_and_quotes_show_the_markup() {
    let Live {
        zone,
        dir,
        cloud,
        provider,
        stop,
        _tmp,
    } = live().await;
    zone.store()
        .set_provider_pricing(
            &provider.id,
            PricingStrategy::Markup(Markup::new("0.15".parse().unwrap()).unwrap()),
            Timestamp::now(),
        )
        .await
        .unwrap();

    let quote = stdout(
        &orc(
            &zone,
            &dir,
            &[
                "quote",
                "sys/sys",
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
            ],
        )
        .await,
    );
    let lines: Vec<&str> = quote.lines().collect();
    assert_eq!(lines[0], "provider:  fake", "{quote}");
    assert_eq!(lines[1], "outcome:   offer", "{quote}");
    assert_eq!(lines[2], "site:      eu-central-a", "{quote}");
    assert_eq!(
        lines[3], "line:      2 vCPU · 4 GiB · eu-central",
        "{quote}"
    );
    assert!(
        lines[4].starts_with("price:     ") && lines[4].contains(" USD/"),
        "{quote}"
    );
    assert_eq!(lines[5], "markup:    0.15", "{quote}");

    // A refusal is printed, and the exit status says it was one.
    cloud.refuse_class(
        orc_proto::ClassId::new("us-east").unwrap(),
        Some(orc_proto::Refusal::new(
            orc_proto::RefusalKind::NoCapacity,
            "No capacity in US East right now.",
        )),
    );
    // Without ORG/PROJECT, the token's project asks (the operator's is sys/sys).
    let refused = orc(
        &zone,
        &dir,
        &[
            "quote",
            "--provider",
            "fake",
            "--class",
            "us-east",
            "--cpu",
            "2",
            "--mem",
            "4",
            "--os",
            "debian-12",
        ],
    )
    .await;
    assert!(!refused.status.success());
    let text = String::from_utf8(refused.stdout).unwrap();
    assert!(
        text.contains("outcome:   refused"),
        "{text} / {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(
        String::from_utf8(refused.stderr).unwrap(),
        "error: the provider refused the quote (no_capacity)\n"
    );

    let created = stdout(
        &orc(
            &zone,
            &dir,
            &[
                "pool",
                "create",
                "sys/sys/web",
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
                "2",
                "--wait",
                "--timeout",
                "60",
            ],
        )
        .await,
    );
    assert_eq!(created, "Pool sys/sys/web is up: 2 of 2 node(s) running.\n");
    assert_eq!(cloud.instances().len(), 2);

    let nodes = stdout(&orc(&zone, &dir, &["nodes", "sys/web"]).await);
    let rows: Vec<&str> = nodes.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{nodes}");
    for row in rows {
        assert!(row.contains(" running "), "{nodes}");
        assert!(row.contains(" eu-central-a "), "{nodes}");
        assert!(row.contains(" USD/"), "{nodes}");
    }

    // The deploys' progress notes are events of the pool, where `--wait` reads them (they
    // are written as they arrive, so the last may land just after the deploy is done).
    let mut creating = 0;
    let mut events = serde_json::Value::Null;
    for _ in 0..50 {
        events = serde_json::from_str(&stdout(
            &orc(
                &zone,
                &dir,
                &["--json", "events", "sys/sys", "--pool", "web"],
            )
            .await,
        ))
        .unwrap();
        creating = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "node.progress" && e["words"] == "Creating the machine.")
            .count();
        if creating == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(creating, 2, "{events:#}");

    let _ = stop.send(());
    zone.shutdown().await;
}

fn pool_create(name: &str, class: &str, cpu: &str, wait: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "pool",
        "create",
        name,
        "--provider",
        "fake",
        "--class",
        class,
        "--cpu",
        cpu,
        "--mem",
        "4",
        "--os",
        "debian-12",
        "--size",
        "2",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    if wait {
        args.extend(["--wait", "--timeout", "120"].map(String::from));
    }
    args
}

/// A pool nothing can place is refused when it is created, naming what is offered;
/// `--wait` on a pool whose nodes park for a reason that does not clear by itself stops at
/// once with that reason, and without a terminal it writes a line per change to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_that_cannot_place_fail_fast() {
    let live = live().await;
    let (zone, dir) = (&live.zone, live.dir.as_path());
    live.cloud.refuse_class(
        orc_proto::ClassId::new("us-east").unwrap(),
        Some(orc_proto::Refusal::new(
            orc_proto::RefusalKind::Unplaceable,
            "no site in US East offers 2 vCPU · 4 GiB; nearest offered: 1 vCPU · 2 GiB",
        )),
    );
    let args = pool_create("sys/sys/never", "us-east", "2", false);
    let refused = orc(
        zone,
        dir,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8(refused.stderr).unwrap(),
        "error: provider fake can never place this pool: no site in US East offers \
         2 vCPU · 4 GiB; nearest offered: 1 vCPU · 2 GiB [422 unplaceable]\n"
    );
    assert!(
        zone.store()
            .list_pools(&orc_zone::model::sys_project_id())
            .await
            .unwrap()
            .is_empty()
    );

    // Passes the check at creation, then parks for the operator: --wait gives up at once.
    live.cloud.refuse_class(
        orc_proto::ClassId::new("us-east").unwrap(),
        Some(orc_proto::Refusal::new(
            orc_proto::RefusalKind::OperatorFix,
            "the provider's operator must add a key",
        )),
    );
    let started = std::time::Instant::now();
    let args = pool_create("sys/sys/stuck", "us-east", "2", true);
    let waited = orc(
        zone,
        dir,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    assert!(!waited.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "--wait stopped before its timeout"
    );
    let stderr = String::from_utf8(waited.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some(
            "error: pool sys/sys/stuck cannot finish: 0 of 2 node(s) running, 2 parked until \
             the provider's configuration or catalog changes: the provider's operator must add \
             a key; see `orc events sys/sys --pool stuck`"
        ),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Pool sys/sys/stuck: 0/2 running, ")),
        "a line per change without a terminal: {stderr}"
    );
    let mut unique = lines.clone();
    unique.dedup();
    assert_eq!(unique, lines, "a line only when something changed");

    // The pools table and `orc pool show` say why the nodes are parked.
    let pools = stdout(&orc(zone, dir, &["pools", "sys/sys"]).await);
    let row = pools
        .lines()
        .find(|l| l.starts_with("sys/sys/stuck "))
        .unwrap_or_else(|| panic!("{pools}"));
    assert!(
        row.ends_with("parked: the provider's operator must add a key"),
        "{pools}"
    );
    let shown = stdout(&orc(zone, dir, &["pool", "show", "sys/sys/stuck"]).await);
    assert!(shown.starts_with("pool:"), "{shown}");
    assert!(
        shown.contains("\nstatus:      parked: the provider's operator must add a key\n"),
        "{shown}"
    );
    assert!(
        shown.contains("\nnodes:       0 running, 0 starting, 2 parked, 0 destroying, 0 lost\n"),
        "{shown}"
    );

    let shown = stdout(
        &orc(
            zone,
            dir,
            &["provider", "show", "fake", "--project", "sys/sys"],
        )
        .await,
    );
    assert!(shown.starts_with("provider:  fake\n"), "{shown}");
    assert!(
        shown.contains("\nus-east "),
        "every class is listed: {shown}"
    );
    assert!(shown.contains("\ndebian-12 "), "OS ids are listed: {shown}");

    let _ = live.stop.send(());
    live.zone.shutdown().await;
}

/// A tenant's first steps: a token that names its project makes `orc providers`,
/// `orc sites` and `orc provider show` work without naming one; `orc nodes` shows private
/// addresses to everyone and where nodes went only to zone operators; empty projects and
/// users are deleted from the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_works_in_their_own_project() {
    let live = live().await;
    let (zone, dir) = (&live.zone, live.dir.as_path());
    for args in [
        &["org", "create", "acme"][..],
        &["project", "create", "acme/web"],
        &["project", "create", "acme/spare"],
        &["user", "create", "ann"],
        &["member", "add", "acme/web", "ann", "member"],
        &["provider", "change-scope", "sys/sys/fake", "zone"],
        &["provider", "pricing", "sys/sys/fake", "--markup", "0.15"],
    ] {
        stdout(&orc(zone, dir, args).await);
    }
    let made = orc(
        zone,
        dir,
        &[
            "token",
            "create",
            "ann",
            "--label",
            "laptop",
            "--project",
            "acme/web",
        ],
    )
    .await;
    let token = stdout(&made).trim().to_string();
    let listed = stdout(&orc(zone, dir, &["token", "list", "ann"]).await);
    assert!(listed.contains(" acme/web "), "{listed}");

    let me = stdout(&orc_as(zone, dir, &token, &["whoami"]).await);
    assert!(me.contains("\nproject:  acme/web\n"), "{me}");
    let providers = stdout(&orc_as(zone, dir, &token, &["providers"]).await);
    assert!(providers.contains("fake"), "{providers}");
    // One pricing rule everywhere: a tenant sees that nodes are priced, never the markup.
    assert!(
        providers
            .lines()
            .any(|row| row.starts_with("fake ") && row.contains(" priced ")),
        "{providers}"
    );
    // A tenant sees neither the operator's markup nor where the provider's replicas run.
    let seen: serde_json::Value = serde_json::from_str(&stdout(
        &orc_as(zone, dir, &token, &["--json", "provider", "show", "fake"]).await,
    ))
    .unwrap();
    assert_eq!(seen["pricing"]["markup"], serde_json::Value::Null, "{seen}");
    assert_eq!(seen["pricing"]["priced"], true, "{seen}");
    let quoted: serde_json::Value = serde_json::from_str(&stdout(
        &orc_as(
            zone,
            dir,
            &token,
            &[
                "--json",
                "quote",
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
            ],
        )
        .await,
    ))
    .unwrap();
    assert!(quoted["price"]["amount"].is_string(), "{quoted}");
    assert_eq!(quoted["markup"], serde_json::Value::Null, "{quoted}");
    assert_eq!(seen["replicas"][0]["host"], "", "{seen}");
    assert_eq!(seen["replicas"][0]["pid"], 0, "{seen}");
    let operator: serde_json::Value = serde_json::from_str(&stdout(
        &orc(
            zone,
            dir,
            &["--json", "provider", "show", "fake", "--project", "sys/sys"],
        )
        .await,
    ))
    .unwrap();
    assert_eq!(operator["pricing"]["markup"], "0.15", "{operator}");
    assert_ne!(operator["replicas"][0]["host"], "", "{operator}");
    assert_ne!(operator["replicas"][0]["pid"], 0, "{operator}");
    let sites = orc_as(zone, dir, &token, &["sites", "fake"]).await;
    assert!(
        sites.status.success(),
        "a tenant's `orc sites` uses the token's project: {}",
        String::from_utf8_lossy(&sites.stderr)
    );

    // The tenant's own SSH key reaches every node's deploy.
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop";
    let key_file = dir.join("ann.pub");
    std::fs::write(&key_file, format!("# ann's laptop\n{KEY}\n")).unwrap();
    let mut args = pool_create("acme/web/db", "eu-central", "2", true);
    args.extend(["--ssh-key".to_string(), key_file.display().to_string()]);
    stdout(
        &orc_as(
            zone,
            dir,
            &token,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .await,
    );
    let keyed: Vec<Vec<String>> = live
        .cloud
        .instances()
        .into_iter()
        .map(|i| i.ssh_keys)
        .collect();
    assert_eq!(keyed, [vec![KEY.to_string()], vec![KEY.to_string()]]);
    let shown = stdout(&orc_as(zone, dir, &token, &["pool", "show", "acme/web/db"]).await);
    assert!(
        shown.contains("ssh key:     ssh-ed25519 SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU ann@laptop\n"),
        "{shown}"
    );
    // A private key file is refused before anything is sent, naming the file.
    let private = dir.join("ann");
    std::fs::write(&private, "-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n").unwrap();
    let mut args = pool_create("acme/web/other", "eu-central", "2", false);
    args.extend(["--ssh-key".to_string(), private.display().to_string()]);
    let refused = orc_as(
        zone,
        dir,
        &token,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "error: {} holds a private key; give its public one (the .pub file)\n",
            private.display()
        )
    );
    let tenant = stdout(&orc_as(zone, dir, &token, &["nodes", "acme/web/db"]).await);
    let head = tenant.lines().next().unwrap();
    assert!(
        head.contains(" PRIVATE ") && head.contains(" GATEWAY "),
        "{tenant}"
    );
    assert!(
        !head.contains("PLACED"),
        "a tenant never sees where nodes went: {tenant}"
    );
    assert!(!tenant.contains("fake:"), "{tenant}");
    let operator = stdout(&orc(zone, dir, &["nodes", "acme/web/db"]).await);
    assert!(
        operator.lines().next().unwrap().contains(" PLACED "),
        "{operator}"
    );
    assert_eq!(
        operator
            .lines()
            .skip(1)
            .filter(|l| l.contains(" fake eu-central-"))
            .count(),
        2,
        "{operator}"
    );

    // A project with a pool is not empty; an empty one and a user are deleted.
    let busy = orc(zone, dir, &["project", "delete", "acme/web"]).await;
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("project acme/web is not empty"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    let gone = stdout(&orc(zone, dir, &["project", "delete", "acme/spare"]).await);
    assert_eq!(gone, "Project acme/spare deleted.\n");
    let user = stdout(&orc(zone, dir, &["user", "delete", "ann"]).await);
    assert_eq!(user, "User ann deleted, with their roles and tokens.\n");
    let after = orc_as(zone, dir, &token, &["whoami"]).await;
    assert!(
        !after.status.success(),
        "the deleted user's token no longer works"
    );

    let _ = live.stop.send(());
    live.zone.shutdown().await;
}

/// The node agent through the binary: `orc node join create` writes a token file, `orc
/// agent` joins with it and the node reads `ready` in `orc nodes`; `orc exec` prints the
/// command's output and exits with its code; a used token cannot be minted into a second
/// join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orc_agent_joins_and_orc_exec_runs_commands_on_the_node() {
    let Live {
        zone,
        dir,
        cloud: _cloud,
        provider: _provider,
        stop,
        _tmp,
    } = live().await;
    let args = pool_create("sys/sys/edge", "eu-central", "2", true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    stdout(&orc(&zone, &dir, &args).await);
    let nodes: serde_json::Value = serde_json::from_str(&stdout(
        &orc(&zone, &dir, &["--json", "nodes", "sys/edge"]).await,
    ))
    .unwrap();
    let node = nodes[0]["id"].as_str().unwrap().to_string();

    let node_dir = tempfile::tempdir().unwrap();
    let token_file = node_dir.path().join("join-token");
    let created = orc(
        &zone,
        &dir,
        &[
            "node",
            "join",
            "create",
            &node,
            "--ttl",
            "10m",
            "--output",
            token_file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        stdout(&created).is_empty(),
        "the token is not printed when written to a file"
    );
    let said = String::from_utf8_lossy(&created.stderr).to_string();
    assert!(said.contains(&format!("admits node {node} once")), "{said}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let token = std::fs::read_to_string(&token_file).unwrap();

    let mut agent = std::process::Command::new(env!("CARGO_BIN_EXE_orc"))
        .args(["agent", "--zone", &zone.grpc_url(), "--node", &node])
        .arg("--join-token-file")
        .arg(&token_file)
        .arg("--state-dir")
        .arg(node_dir.path().join("state"))
        .arg("--product-uuid-file")
        .arg(node_dir.path().join("product_uuid"))
        .env("ORC_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = false;
    for _ in 0..300 {
        let table = stdout(&orc(&zone, &dir, &["nodes", "sys/edge"]).await);
        if table
            .lines()
            .nth(1)
            .is_some_and(|row| row.contains(" ready "))
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the node reads ready in `orc nodes`");
    assert!(!token_file.exists(), "the agent deleted the used token");

    let out = orc(
        &zone,
        &dir,
        &[
            "exec",
            &node,
            "--",
            "sh",
            "-c",
            "echo hello; echo oops >&2; exit 3",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    let ok = orc(&zone, &dir, &["exec", &node, "--", "echo", "fine"]).await;
    assert_eq!(stdout(&ok), "fine\n");
    // `orc exec … | head -1`: the reader leaving early is no error.
    let mut cut_short = std::process::Command::new(env!("CARGO_BIN_EXE_orc"));
    cut_short
        .args(["exec", &node, "--", "sh", "-c", "seq 1 100000"])
        .env("ORC_URL", zone.url())
        .env("ORC_TOKEN", zone.admin_token().expose())
        .env("ORC_DATA_DIR", &dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (first, cut_short) = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        let mut child = cut_short.spawn().unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        (first, child.wait_with_output().unwrap())
    })
    .await
    .unwrap();
    assert_eq!(first, "1\n");
    assert!(
        cut_short.status.success(),
        "{:?}: {}",
        cut_short.status,
        String::from_utf8_lossy(&cut_short.stderr)
    );
    assert!(
        cut_short.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&cut_short.stderr)
    );
    let unknown = orc(&zone, &dir, &["exec", "n-zzzzzzzzzzzz", "--", "true"]).await;
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("not found"),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
    let listed = stdout(&orc(&zone, &dir, &["node", "join", "list", &node]).await);
    // The deploy's own token, revoked by the one minted by hand, which was used.
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    assert!(
        rows[0].contains(" revoked ") && rows[0].contains(" zone "),
        "{listed}"
    );
    assert!(rows[1].contains(" used "), "{listed}");
    assert!(!listed.contains(token.trim()));

    agent.kill().unwrap();
    let output = agent.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("joined the zone"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "a log that goes to no terminal has no colour codes: {log}"
    );
    assert!(
        !log.contains(&token.trim()[40..]),
        "the agent never logs its token: {log}"
    );
    let _ = stop.send(());
    zone.shutdown().await;
}
