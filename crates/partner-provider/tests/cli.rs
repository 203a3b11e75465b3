//! The `orc-prov-partner` binary: exit codes and output of `validate`, `quote` (offline,
//! with `--seed-dir`) and `bench-quote`.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_orc-prov-partner");
const SEED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../emu/seed");

fn run(args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn validate_prints_normalised_drafts_or_every_error() {
    let ok = run(
        &[
            "validate",
            "--regions",
            "-",
            "--ptr-domain",
            "Cloud.Example.com.",
        ],
        &[],
        r#"{"eu-west": {"sites": [{"eu-west-a": "vultr:ams"}], "title": " Europe West "}}"#,
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let out = text(&ok.stdout);
    assert!(out.contains("\"title\": \"Europe West\""), "{out}");
    assert!(
        out.contains("ptr_domain (valid):\ncloud.example.com"),
        "{out}"
    );

    let bad = run(
        &["validate", "--os-map", "-"],
        &[],
        r#"{"x": {"title": "X", "vultr": {"family": "w", "id": "1", "version": "2"}}}"#,
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stdout).contains("x.vultr: must have exactly one of `id` or `version`"),
        "{}",
        text(&bad.stdout)
    );
}

#[test]
fn quote_explains_with_params_from_the_environment() {
    let env = [
        ("ORC_PARAM_PARTNER_ID", "zone-1"),
        ("ORC_PARAM_HETZNER_API_TOKEN", "secret-token-value"),
        ("ORC_PARAM_HETZNER_OWNER_TAG", "orc-partner-hetzner"),
        ("ORC_PARAM_HETZNER_EXCHANGE_RATE", "1.08"),
    ];
    let out = run(
        &[
            "quote",
            "--class",
            "eu-central",
            "--cpu",
            "2",
            "--mem",
            "4",
            "--json",
            "--seed-dir",
            SEED_DIR,
        ],
        &env,
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["decision"]["site"], "eu-central-a");
    assert_eq!(
        json["candidates"][2]["verdict"]["exclusion"]["reason"],
        "no_key"
    );
    assert!(!text(&out.stdout).contains("secret-token-value"));

    let broken = run(
        &["quote", "--class", "eu-central", "--cpu", "2", "--mem", "4"],
        &[
            ("ORC_PARAM_PARTNER_ID", "a:b"),
            ("ORC_PARAM_VULTR_API_KEY", "bad key"),
        ],
        "",
    );
    assert_eq!(broken.status.code(), Some(2));
    let err = text(&broken.stderr);
    assert!(err.contains("param partner_id:"), "{err}");
    assert!(err.contains("param vultr_api_key:"), "{err}");
    assert!(!err.contains("bad key"), "{err}");
}

#[test]
fn bench_quote_ends_with_its_figure() {
    let out = run(&["bench-quote", "--iterations", "2000"], &[], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let figure = last
        .strip_prefix("ns_per_quote ")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(figure.parse::<u64>().is_ok(), "{last}");
    assert!(stdout.contains("winner: eu-central-a"), "{stdout}");
}
