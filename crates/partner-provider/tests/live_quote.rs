//! `orc-prov-partner quote` against the emulators: live catalogs read once through the
//! clients, stock changes seen, and an unpriced account shown as such.

mod support;

use std::process::{Command, Output};

use orc_testkit::emu::EmuControl;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_orc-prov-partner");

async fn run_quote(env: Vec<(String, String)>, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.env_clear().arg("quote").args(args).arg("--json");
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn env(
    emu: &orc_emu::RunningEmulators,
    hetzner_rate: Option<&str>,
    vultr: bool,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("ORC_PARAM_PARTNER_ID", "zone-1".to_string()),
        ("ORC_PARAM_HETZNER_API_TOKEN", TOKEN.to_string()),
        (
            "ORC_PARAM_HETZNER_OWNER_TAG",
            "orc-partner-hetzner".to_string(),
        ),
        ("ORC_HETZNER_ENDPOINT", emu.hetzner_url().unwrap()),
    ];
    if let Some(rate) = hetzner_rate {
        env.push(("ORC_PARAM_HETZNER_EXCHANGE_RATE", rate.to_string()));
    }
    if vultr {
        env.push(("ORC_PARAM_VULTR_API_KEY", TOKEN.to_string()));
        env.push(("ORC_PARAM_VULTR_OWNER_TAG", "orc-partner-vultr".to_string()));
        env.push(("ORC_VULTR_ENDPOINT", vultr_root(emu)));
    }
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_by_four_in_us_east_lands_on_vultr() {
    let emu = emulators().await;
    let out = run_quote(
        env(&emu, Some("1.08"), true),
        &["--class", "us-east", "--cpu", "2", "--mem", "4"],
    )
    .await;
    let outcome = json(&out);
    assert_eq!(outcome["decision"]["site"], "us-east-b", "{outcome}");
    assert_eq!(outcome["decision"]["plan"], "vc2-2c-4gb");
    assert_eq!(
        outcome["candidates"][0]["verdict"]["exclusion"]["reason"],
        "no_exact_plan"
    );
    let counters = EmuControl::vultr(&emu).counters().await;
    assert!(
        counters.total > 0,
        "the catalog was read live: {counters:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_plan_moves_the_node() {
    let emu = emulators().await;
    let args = ["--class", "eu-central", "--cpu", "2", "--mem", "4"];
    let before = json(&run_quote(env(&emu, Some("1.08"), true), &args).await);
    assert_eq!(before["decision"]["site"], "eu-central-a", "{before}");
    let plan = before["decision"]["plan"].as_str().unwrap().to_string();
    EmuControl::hetzner(&emu)
        .sold_out(&plan, "fsn1", true)
        .await;
    let after = json(&run_quote(env(&emu, Some("1.08"), true), &args).await);
    assert_ne!(after["decision"]["site"], "eu-central-a", "{after}");
    assert_eq!(after["decision"]["decision"], "offer", "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_euro_account_without_a_rate_is_unpriced() {
    let emu = emulators().await;
    let out = run_quote(
        env(&emu, None, false),
        &["--class", "eu-central", "--cpu", "2", "--mem", "4"],
    )
    .await;
    let outcome = json(&out);
    assert_eq!(outcome["decision"]["site"], "eu-central-a", "{outcome}");
    let price = &outcome["decision"]["price"];
    assert_eq!(price["account_monthly"]["currency"], "EUR", "{outcome}");
    assert!(price["usd_monthly"].is_null(), "{outcome}");
    assert!(price["exchange_rate"].is_null(), "{outcome}");
}
