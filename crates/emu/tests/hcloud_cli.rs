//! The official `hcloud` CLI (Debian package `hcloud-cli`) against the Hetzner Cloud
//! emulator: a client we did not write must not tell the emulator from the real API.
//!
//! The emulator runs in-process; the CLI runs on a blocking thread so the server keeps
//! serving while the CLI waits for its answers.

use std::path::PathBuf;
use std::process::{Command, Output};

use std::time::Duration;

use orc_emu::{ClockMode, EmuConfig, RunningEmulators, Timings};
use serde_json::Value;

struct Cli {
    url: String,
    config: PathBuf,
    _emu: RunningEmulators,
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

fn require_hcloud() {
    match Command::new("hcloud").arg("version").output() {
        Ok(_) => {}
        Err(e) => panic!(
            "the hcloud CLI is not runnable ({e}); install the Debian package hcloud-cli \
             (apt-get install hcloud-cli) to run these tests"
        ),
    }
}

async fn start(test: &str) -> Cli {
    start_with(test, EmuConfig::for_tests()).await
}

async fn start_with(test: &str, mut config: EmuConfig) -> Cli {
    require_hcloud();
    config.vultr = None;
    config.robot = None;
    let emu = config.start().await.expect("emulator starts");
    let url = emu.hetzner_url().expect("hetzner url");
    let config =
        std::env::temp_dir().join(format!("orc-hcloud-cli-{}-{test}.toml", std::process::id()));
    std::fs::write(&config, "").expect("write empty hcloud config");
    Cli {
        url,
        config,
        _emu: emu,
    }
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Cli {
    async fn run(&self, args: &[&str]) -> Run {
        let url = self.url.clone();
        let config = self.config.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let output: Output = tokio::task::spawn_blocking(move || {
            Command::new("hcloud")
                .args(&args)
                .env("HCLOUD_ENDPOINT", url)
                .env("HCLOUD_TOKEN", "demo-token")
                .env("HCLOUD_CONFIG", config)
                .env_remove("HCLOUD_CONTEXT")
                .output()
                .expect("hcloud runs")
        })
        .await
        .expect("blocking task");
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args).await;
        assert!(
            r.ok,
            "hcloud {args:?} failed\nstdout: {}\nstderr: {}",
            r.stdout, r.stderr
        );
        r.stdout
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hcloud_cli_lists_server_types_and_locations() {
    let cli = start("catalogue").await;
    let types = cli.ok(&["server-type", "list"]).await;
    assert!(
        types
            .lines()
            .any(|l| l.contains("cx23") && l.contains("114")),
        "{types}"
    );
    assert!(
        types
            .lines()
            .any(|l| l.contains("ccx13") && l.contains("dedicated")),
        "{types}"
    );
    assert!(!types.contains("cx22"), "removed types are absent: {types}");

    let locations = cli.ok(&["location", "list"]).await;
    for name in ["fsn1", "nbg1", "hel1", "ash", "hil", "sin"] {
        assert!(locations.contains(name), "{name} missing: {locations}");
    }
    assert!(locations.contains("eu-central"), "{locations}");

    let described = cli.ok(&["server-type", "describe", "cx23"]).await;
    assert!(described.contains("CX 23"), "{described}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hcloud_cli_creates_lists_powers_off_and_deletes_a_server() {
    let cli = start("lifecycle").await;
    let created = cli
        .ok(&[
            "server",
            "create",
            "--name",
            "web-1",
            "--type",
            "cx23",
            "--image",
            "ubuntu-24.04",
            "--location",
            "fsn1",
            "--label",
            "k=v",
        ])
        .await;
    assert!(created.contains("created"), "{created}");
    assert!(created.contains("IPv4:"), "{created}");
    cli.ok(&[
        "server",
        "create",
        "--name",
        "other",
        "--type",
        "cx23",
        "--image",
        "ubuntu-24.04",
        "--location",
        "nbg1",
        "--label",
        "k=w",
    ])
    .await;

    let listed = cli
        .ok(&[
            "server",
            "list",
            "-l",
            "k=v",
            "-o",
            "columns=name,status,location,labels",
        ])
        .await;
    assert!(
        listed
            .lines()
            .any(|l| l.contains("web-1") && l.contains("running") && l.contains("fsn1")),
        "{listed}"
    );
    assert!(!listed.contains("other"), "{listed}");

    let json = cli.ok(&["server", "list", "-l", "k", "-o", "json"]).await;
    let servers: Value = serde_json::from_str(&json).expect("server list -o json is JSON");
    let mut names: Vec<&str> = servers
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["other", "web-1"]);

    let described = cli.ok(&["server", "describe", "web-1"]).await;
    assert!(described.contains("web-1"), "{described}");
    assert!(described.contains("running"), "{described}");
    assert!(described.contains("cx23"), "{described}");
    assert!(described.contains("ubuntu-24.04"), "{described}");

    let off = cli.ok(&["server", "poweroff", "web-1"]).await;
    assert!(off.contains("stopped"), "{off}");
    let described = cli.ok(&["server", "describe", "web-1"]).await;
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("Status:") && l.contains("off")),
        "{described}"
    );

    let deleted = cli.ok(&["server", "delete", "web-1"]).await;
    assert!(deleted.contains("deleted"), "{deleted}");
    let gone = cli.run(&["server", "describe", "web-1"]).await;
    assert!(!gone.ok, "describe of a deleted server must fail");
    assert!(gone.stderr.contains("not found"), "{}", gone.stderr);

    let remaining = cli
        .ok(&["server", "list", "-o", "noheader", "-o", "columns=name"])
        .await;
    assert_eq!(remaining.trim(), "other");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hcloud_cli_reports_unknown_servers() {
    let cli = start("unknown").await;
    let r = cli.run(&["server", "describe", "no-such-server"]).await;
    assert!(!r.ok);
    assert!(r.stderr.contains("server not found"), "{}", r.stderr);
    let r = cli.run(&["server", "describe", "987654"]).await;
    assert!(!r.ok);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hcloud_cli_manages_ssh_keys_networks_and_primary_ips() {
    let cli = start("resources").await;
    let key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKXDvO6tPGNwgp2AyT2t9jYm2YGcsBuJZHAVrGTPWbMH orc";
    cli.ok(&["ssh-key", "create", "--name", "ops", "--public-key", key])
        .await;
    let keys = cli.ok(&["ssh-key", "list"]).await;
    assert!(keys.contains("ops"), "{keys}");

    cli.ok(&[
        "network",
        "create",
        "--name",
        "lan",
        "--ip-range",
        "10.0.0.0/16",
    ])
    .await;
    cli.ok(&[
        "network",
        "add-subnet",
        "lan",
        "--type",
        "cloud",
        "--network-zone",
        "eu-central",
        "--ip-range",
        "10.0.1.0/24",
    ])
    .await;
    cli.ok(&[
        "server",
        "create",
        "--name",
        "db",
        "--type",
        "cx23",
        "--image",
        "ubuntu-24.04",
        "--location",
        "fsn1",
        "--ssh-key",
        "ops",
        "--network",
        "lan",
    ])
    .await;
    let described = cli.ok(&["server", "describe", "db"]).await;
    assert!(described.contains("10.0.1.1"), "{described}");

    let ips = cli.ok(&["primary-ip", "list"]).await;
    assert!(ips.contains("ipv4") && ips.contains("ipv6"), "{ips}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hcloud_cli_waits_for_running_actions_in_emulated_time() {
    let mut config = EmuConfig::for_tests();
    config.clock_mode = ClockMode::Auto;
    config.timings = Timings {
        create: Duration::from_secs(2),
        power: Duration::from_secs(1),
        quick: Duration::ZERO,
    };
    let cli = start_with("waiting", config).await;
    let created = cli
        .ok(&[
            "--poll-interval",
            "200ms",
            "server",
            "create",
            "--name",
            "slow",
            "--type",
            "cpx22",
            "--image",
            "debian-12",
            "--location",
            "sin",
        ])
        .await;
    assert!(created.contains("created"), "{created}");
    let described = cli.ok(&["server", "describe", "slow"]).await;
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("Status:") && l.contains("running")),
        "the CLI returns only after the start action finished: {described}"
    );
    let off = cli
        .ok(&["--poll-interval", "200ms", "server", "poweroff", "slow"])
        .await;
    assert!(off.contains("stopped"), "{off}");
    let described = cli.ok(&["server", "describe", "slow"]).await;
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("Status:") && l.contains("off")),
        "{described}"
    );
}
