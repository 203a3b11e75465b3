//! The `orc-prov-robot` binary: `validate` and `offers` against the Robot emulator.

mod support;

use std::process::Command;

use support::*;

fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orc-prov-robot"));
    command
        .env_remove("ORC_PARAM_ACCOUNT")
        .env_remove("ORC_PARAM_ACCOUNT_FILE")
        .env_remove("ORC_PARAM_API_URL");
    command
}

fn account_json(dir: &std::path::Path) -> String {
    let password = dir.join("pw");
    std::fs::write(&password, ROBOT_PASSWORD).unwrap();
    serde_json::json!({
        "user": ROBOT_USER,
        "password": format!("file://{}", password.display()),
        "rescue_key_fingerprint": SEED_FINGERPRINT,
        "rescue_key": "env://ORC_TEST_RESCUE_KEY",
    })
    .to_string()
}

#[test]
fn validate_prints_the_config_without_secrets_or_names_every_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("validate")
        .env("ORC_PARAM_ACCOUNT", account_json(dir.path()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("user: demo"), "{stdout}");
    assert!(
        stdout.contains("image: Ubuntu-2404-noble-amd64-base.tar.gz"),
        "{stdout}"
    );
    assert!(
        stdout.contains("product AX102: 32 vCPU, 128 GiB"),
        "{stdout}"
    );
    assert!(!stdout.contains(ROBOT_PASSWORD), "{stdout}");

    let file = dir.path().join("bad.json");
    std::fs::write(
        &file,
        r#"{"user":"demo","password":"hunter2","image":"a b"}"#,
    )
    .unwrap();
    let out = bin()
        .arg("validate")
        .env("ORC_PARAM_ACCOUNT_FILE", &file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for field in ["password", "rescue_key", "rescue_key_fingerprint", "image"] {
        assert!(
            stderr.contains(&format!("{field}:")),
            "{field} not named: {stderr}"
        );
    }
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_lists_the_free_servers() {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let mut command = bin();
    command
        .arg("offers")
        .env("ORC_PARAM_ACCOUNT", account_json(dir.path()))
        .env("ORC_PARAM_API_URL", robot_url(&emu));
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[1].starts_with("EX44\thel1\t20\t64\ttrue\t"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_commands_claim_power_and_release_a_server() {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let account = account_json(dir.path());
    let url = robot_url(&emu);
    let run = |args: &'static [&'static str]| {
        let mut command = bin();
        command
            .arg("machine")
            .arg("--key")
            .arg("node-cli")
            .args(args)
            .env("ORC_PARAM_ACCOUNT", &account)
            .env("ORC_PARAM_API_URL", &url);
        tokio::task::spawn_blocking(move || command.output().unwrap())
    };
    let out = run(&["claim", "--server", "2001002"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("orc-node-cli"));
    assert_eq!(
        direct(&emu)
            .get_server(EX44)
            .await
            .unwrap()
            .unwrap()
            .server_name,
        "orc-node-cli"
    );
    let out = run(&["power", "graceful-restart"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Robot reset sw"));
    let out = run(&["power", "sideways"]).await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sideways"));
    let out = run(&["claim", "--server", "2001001"]).await.unwrap();
    assert!(!out.status.success(), "db-1 is someone else's");
    assert!(String::from_utf8_lossy(&out.stderr).contains("conflict"));
    let out = run(&["release"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        direct(&emu)
            .get_server(EX44)
            .await
            .unwrap()
            .unwrap()
            .server_name,
        ""
    );
}

#[test]
fn bootstrap_takes_the_first_boot_script_from_a_file_and_its_example_parses() {
    let dir = tempfile::tempdir().unwrap();
    let account = account_json(dir.path());
    let out = bin()
        .args(["machine", "--key", "node-cli", "bootstrap", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{help}");
    assert!(help.contains("--first-boot <FILE>"), "{help}");
    for gone in ["--agent-url", "--agent-sha256", "--zone-url", "--pin "] {
        assert!(!help.contains(gone), "{gone} is still offered: {help}");
    }

    // The example, run where its first-boot file does not exist: it parses, and the
    // unreadable file is named.
    let example = help
        .lines()
        .find_map(|l| l.strip_prefix("Example: "))
        .unwrap_or_else(|| panic!("no example: {help}"));
    let words: Vec<&str> = example.split_whitespace().collect();
    let program = words
        .iter()
        .position(|w| *w == "orc-prov-robot")
        .expect("the example runs orc-prov-robot");
    let redirect = words.iter().position(|w| *w == "<").unwrap_or(words.len());
    let out = bin()
        .args(&words[program + 1..redirect])
        .current_dir(dir.path())
        .env("ORC_PARAM_ACCOUNT", &account)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reading the first-boot script first-boot.sh"),
        "{stderr}"
    );

    let out = bin()
        .args([
            "machine",
            "--key",
            "node-cli",
            "bootstrap",
            "--token-file",
            "-",
        ])
        .env("ORC_PARAM_ACCOUNT", &account)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--first-boot is required");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--first-boot"));
}
