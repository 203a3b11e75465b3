//! The `orc-prov-vultr` binary: `serve` dials a zone harness with everything taken from
//! the app runner's variables, `offers` lists priced plans, `validate` names bad fields.

use std::process::{Command, Stdio};
use std::time::Duration;

use orc_emu::EmuConfig;
use orc_proto::{QuoteReply, ReplicaRole};
use orc_provider_sdk::harness::ZoneHarness;
use orc_testkit::EmuControl;
use orc_testkit::proto::quote;

const BIN: &str = env!("CARGO_BIN_EXE_orc-prov-vultr");
const TOKEN: &str = "demo-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reads_the_app_runner_variables_and_serves_after_standby() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let control = EmuControl::vultr(&emu);
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("api-key");
    std::fs::write(&key_file, format!("{TOKEN}\n")).unwrap();
    let account_file = dir.path().join("account.json");
    std::fs::write(
        &account_file,
        format!(
            r#"{{"api_key": "file://{}", "region": "sjc"}}"#,
            key_file.display()
        ),
    )
    .unwrap();
    let harness = ZoneHarness::grpc().await.unwrap();
    let mut child = Command::new(BIN)
        .env_clear()
        .arg("serve")
        .env("RUST_LOG", "info")
        .env("HOSTNAME", "replica-v")
        .env("ORC_ZONE_ENDPOINT", harness.endpoint().unwrap())
        .env("ORC_SLOT", "2")
        .env("ORC_PARAM_ACCOUNT_FILE", &account_file)
        .env("ORC_PARAM_API_URL", emu.vultr_url().unwrap())
        .env("ORC_PARAM_NAME", "vultr-us")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let conn = tokio::time::timeout(Duration::from_secs(20), harness.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conn.hello().provider.as_str(), "vultr-us");
    assert_eq!(
        conn.hello().resource_uri.as_str(),
        "urn:orc:provider:vultr-us"
    );
    assert_eq!(conn.hello().replica.host, "replica-v");
    assert_eq!(conn.hello().replica.slot, 2);
    assert_eq!(conn.catalog().classes.len(), 32);

    conn.welcome(ReplicaRole::Standby).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        control.counters().await.total,
        0,
        "a standby reads no cloud account"
    );

    conn.change_role(ReplicaRole::Serving).await.unwrap();
    let reply = conn.quote(quote("n-serve", "sjc", 2, 4)).await.unwrap();
    match reply {
        QuoteReply::Offer(offer) => assert_eq!(offer.site.as_str(), "sjc"),
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    }

    child.kill().unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("Standing by"), "{log}");
    assert!(log.contains("This replica serves now"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
}

fn run(args: &[&str], account: &str, api_url: &str) -> std::process::Output {
    Command::new(BIN)
        .env_clear()
        .args(args)
        .env("VULTR_API_KEY", TOKEN)
        .env("ORC_PARAM_ACCOUNT", account)
        .env("ORC_PARAM_API_URL", api_url)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_and_validate_talk_to_the_api() {
    let emu = EmuConfig::for_tests().start().await.unwrap();
    let url = emu.vultr_url().unwrap();
    let account = r#"{"api_key": "env://VULTR_API_KEY", "region": "fra"}"#;
    let output = tokio::task::spawn_blocking({
        let url = url.clone();
        move || run(&["offers", "--location", "fra", "--json"], account, &url)
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let plan = lines.iter().find(|l| l["plan"] == "vc2-2c-4gb").unwrap();
    assert_eq!(plan["location"], "fra");
    assert_eq!(plan["currency"], "USD");
    assert_eq!(plan["vcpus"], 2);
    assert!(lines.iter().all(|l| l["location"] == "fra"));

    let output = tokio::task::spawn_blocking({
        let url = url.clone();
        move || run(&["validate"], account, &url)
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8(output.stdout).unwrap();
    assert!(
        said.contains("region fra, API key from env://VULTR_API_KEY"),
        "{said}"
    );
    assert!(said.contains("0 managed instances"), "{said}");
    assert!(!said.contains(TOKEN));
}

#[test]
fn validate_names_what_is_wrong() {
    let bad_location = run(
        &["validate", "--offline"],
        r#"{"api_key": "env://VULTR_API_KEY", "region": "fsn1"}"#,
        "http://127.0.0.1:9/v2",
    );
    assert!(!bad_location.status.success());
    let said = String::from_utf8_lossy(&bad_location.stderr);
    assert!(said.contains("`region`") && said.contains("fsn1"), "{said}");

    let vault = run(
        &["validate", "--offline"],
        r#"{"api_key": "vault://kv/vultr", "region": "fra"}"#,
        "http://127.0.0.1:9/v2",
    );
    assert!(!vault.status.success());
    let said = String::from_utf8_lossy(&vault.stderr);
    assert!(
        said.contains("`vault`") && said.contains("env://"),
        "{said}"
    );

    let unset = run(
        &["validate", "--offline"],
        r#"{"api_key": "env://NOT_SET_ANYWHERE", "region": "fra"}"#,
        "http://127.0.0.1:9/v2",
    );
    assert!(!unset.status.success());
    let said = String::from_utf8_lossy(&unset.stderr);
    assert!(said.contains("NOT_SET_ANYWHERE"), "{said}");
}
