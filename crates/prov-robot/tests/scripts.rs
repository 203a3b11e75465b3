//! The bootstrap's shell text, checked by POSIX shells and run for real on this machine
//! against a scratch "rescue system" (stand-ins for installimage and curl, a fake
//! `/sys/block`, a target root instead of `/`).

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use orc_prov_robot::script::{
    self, BootstrapParams, JOIN_TOKEN_PATH, install_script, token_command,
};
use orc_provider_sdk::secret::Secret;
use support::*;

fn params(agent_sha256: &str) -> BootstrapParams {
    BootstrapParams {
        join_token: Secret::new(TOKEN),
        agent_url: "https://downloads.example.net/orc-agent-x86_64".into(),
        agent_sha256: agent_sha256.into(),
        zone_url: "https://zone.example.net:7443".into(),
        pins: BTreeMap::from([("serving-ca".to_string(), "sha256:abcd".to_string())]),
        hostname: "orc-node-1".into(),
        ssh_keys: vec![KEY.into()],
    }
}

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop";

fn syntax_ok(shell: &str, text: &str) -> Result<(), String> {
    let mut child = Command::new(shell)
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{shell} cannot start: {e}"))?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn run(shell_args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut child = Command::new("sh")
        .args(shell_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh starts");
    child.stdin.take().expect("stdin").write_all(stdin).unwrap();
    child.wait_with_output().expect("sh finishes")
}

#[test]
fn generated_scripts_pass_sh_and_dash_syntax_checks() {
    let layout = orc_prov_robot::RescueLayout::default();
    let p = params(&"ab".repeat(32));
    let assembled_post_install = format!(
        "{}cat > \"$root{JOIN_TOKEN_PATH}\" <<'ORC_JOIN_TOKEN_END'\n{TOKEN}\nORC_JOIN_TOKEN_END\n{}",
        script::post_install_head(&layout),
        script::post_install_body(&p)
    );
    let texts = [
        ("token command", token_command(&layout)),
        (
            "install script",
            install_script(&p, &layout, "Ubuntu-2404-noble-amd64-base.tar.gz"),
        ),
        ("post-install", assembled_post_install),
        ("probe", script::rescue_probe_command(&layout)),
        ("uuid", script::product_uuid_command(&layout)),
    ];
    for shell in ["sh", "dash"] {
        for (what, text) in &texts {
            if let Err(e) = syntax_ok(shell, text) {
                panic!("{shell} -n refuses the {what}: {e}\n{text}");
            }
        }
    }
    for (what, text) in &texts[..2] {
        assert!(!text.contains(TOKEN), "the {what} carries the token");
    }
}

#[test]
fn hostile_parameters_are_refused_before_any_script_is_made() {
    let good = params(&"ab".repeat(32));
    good.validate().unwrap();
    let cases: Vec<(&str, BootstrapParams)> = vec![
        (
            "agent_url",
            BootstrapParams {
                agent_url: "http://plain.example/agent".into(),
                ..good.clone()
            },
        ),
        (
            "agent_url",
            BootstrapParams {
                agent_url: "https://x/'; rm -rf /".into(),
                ..good.clone()
            },
        ),
        (
            "agent_sha256",
            BootstrapParams {
                agent_sha256: "ABCD".into(),
                ..good.clone()
            },
        ),
        (
            "zone_url",
            BootstrapParams {
                zone_url: "https://zone/%h".into(),
                ..good.clone()
            },
        ),
        (
            "join_token",
            BootstrapParams {
                join_token: Secret::new("two\nlines"),
                ..good.clone()
            },
        ),
        (
            "join_token",
            BootstrapParams {
                join_token: Secret::new("ORC_JOIN_TOKEN_END"),
                ..good.clone()
            },
        ),
        (
            "hostname",
            BootstrapParams {
                hostname: "a b".into(),
                ..good.clone()
            },
        ),
        (
            "ssh_keys[0]",
            BootstrapParams {
                ssh_keys: vec!["ORC_SSH_KEYS_END".into()],
                ..good.clone()
            },
        ),
        (
            "ssh_keys[1]",
            BootstrapParams {
                ssh_keys: vec![KEY.into(), "ssh-ed25519 AAAA\nrm -rf /".into()],
                ..good.clone()
            },
        ),
        (
            "pins.Bad",
            BootstrapParams {
                pins: BTreeMap::from([("Bad".into(), "x".into())]),
                ..good.clone()
            },
        ),
    ];
    for (field, p) in cases {
        let err = p.validate().expect_err(field);
        assert_eq!(err.field, field, "{err}");
        assert!(!err.to_string().contains("lines"), "{err}");
    }
}

#[test]
fn the_install_runs_with_raid1_over_nvme_and_leaves_the_token_only_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Nvme);
    let p = params(&rescue.agent_sha256);

    let stored = run(&["-c", &token_command(&rescue.layout)], TOKEN.as_bytes());
    assert!(
        stored.status.success(),
        "{}",
        String::from_utf8_lossy(&stored.stderr)
    );
    let token_file = std::path::Path::new(&rescue.layout.work_dir).join("join-token");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&token_file).unwrap().permissions(),
    );
    assert_eq!(
        mode & 0o777,
        0o600,
        "the rescue copy is created under umask 077"
    );

    let script = install_script(&p, &rescue.layout, "Ubuntu-2404-noble-amd64-base.tar.gz");
    let installed = run(&["-s"], script.as_bytes());
    assert!(
        installed.status.success(),
        "install failed: {}",
        String::from_utf8_lossy(&installed.stderr)
    );

    let conf = std::fs::read_to_string(rescue.record.join("install.conf")).unwrap();
    assert!(
        conf.contains("DRIVE1 /dev/nvme0n1\nDRIVE2 /dev/nvme1n1\nSWRAID 1\nSWRAIDLEVEL 1\n"),
        "{conf}"
    );
    assert!(
        !conf.contains("sda"),
        "SATA disks stay out when NVMe disks exist: {conf}"
    );
    assert!(conf.contains("HOSTNAME orc-node-1"), "{conf}");
    assert!(
        conf.contains(&format!(
            "IMAGE {}/Ubuntu-2404-noble-amd64-base.tar.gz",
            rescue.layout.image_dir
        )),
        "{conf}"
    );
    assert_eq!(
        std::fs::read_to_string(rescue.record.join("post-install.syntax"))
            .unwrap()
            .trim(),
        "ok"
    );
    assert_eq!(
        std::fs::read_to_string(rescue.record.join("post-install.mode"))
            .unwrap()
            .trim(),
        "700"
    );

    assert_eq!(
        std::fs::read_to_string(rescue.target.join("etc/orc/join-token")).unwrap(),
        format!("{TOKEN}\n")
    );
    assert_eq!(rescue.mode("etc/orc/join-token"), 0o600);
    assert_eq!(rescue.mode("etc/orc"), 0o700);
    assert_eq!(rescue.mode("usr/local/bin/orc-agent"), 0o755);
    assert_eq!(
        std::fs::read(rescue.target.join("usr/local/bin/orc-agent")).unwrap(),
        rescue.agent_bytes
    );
    let join_unit =
        std::fs::read_to_string(rescue.target.join("etc/systemd/system/orc-join.service")).unwrap();
    assert!(join_unit.contains("Type=oneshot"), "{join_unit}");
    assert!(
        join_unit.contains("ConditionPathExists=/etc/orc/join-token"),
        "{join_unit}"
    );
    assert!(join_unit.contains("ExecStart=/usr/local/bin/orc-agent join --zone https://zone.example.net:7443 --token-file /etc/orc/join-token --serving-ca-pin sha256:abcd"), "{join_unit}");
    for unit in ["orc-join.service", "orc-agent.service"] {
        let link = rescue
            .target
            .join("etc/systemd/system/multi-user.target.wants")
            .join(unit);
        assert_eq!(
            std::fs::read_link(&link).unwrap().to_str(),
            Some(format!("../{unit}").as_str())
        );
        assert_eq!(rescue.mode(&format!("etc/systemd/system/{unit}")), 0o644);
    }

    assert_eq!(
        std::fs::read_to_string(rescue.target.join("root/.ssh/authorized_keys")).unwrap(),
        format!("{KEY}\n"),
        "the pool's keys are root's"
    );
    assert_eq!(rescue.mode("root/.ssh"), 0o700);
    assert_eq!(rescue.mode("root/.ssh/authorized_keys"), 0o600);
    assert!(
        !rescue.target.join("post-install").exists(),
        "the post-install script shreds itself"
    );
    assert!(!token_file.exists(), "the rescue copy of the token is gone");
    assert!(
        !std::path::Path::new(&rescue.layout.work_dir)
            .join("post-install.sh")
            .exists()
    );
    let argv = rescue.argv_log();
    assert!(argv.contains("-a\n-c\n"), "{argv}");
    assert!(argv.contains("--proto\n=https\n"), "{argv}");
    assert!(!argv.contains(TOKEN), "the token is in an argv: {argv}");
    let holders = RescueBox::files_containing(dir.path(), TOKEN);
    assert_eq!(holders, [rescue.target.join("etc/orc/join-token")]);
}

#[test]
fn sata_disks_are_used_when_there_is_no_nvme_and_a_bad_checksum_stops_the_install() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Sata);
    let stored = run(&["-c", &token_command(&rescue.layout)], TOKEN.as_bytes());
    assert!(stored.status.success());
    let p = params(&"0".repeat(64));
    let script = install_script(&p, &rescue.layout, "Debian-1205-bookworm-amd64-base.tar.gz");
    let installed = run(&["-s"], script.as_bytes());
    assert!(
        !installed.status.success(),
        "a checksum mismatch must fail the install"
    );
    assert!(
        String::from_utf8_lossy(&installed.stderr).contains("does not match its sha256"),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let conf = std::fs::read_to_string(rescue.record.join("install.conf")).unwrap();
    assert!(
        conf.contains("DRIVE1 /dev/sda\nDRIVE2 /dev/sdb\nSWRAID 1\n"),
        "{conf}"
    );
    assert!(!rescue.target.join("usr/local/bin/orc-agent").exists());
    assert!(
        !rescue
            .target
            .join("usr/local/bin/orc-agent.download")
            .exists()
    );
    let work = std::path::Path::new(&rescue.layout.work_dir);
    assert!(
        !work.join("join-token").exists() && !work.join("post-install.sh").exists(),
        "a failed install still removes the rescue copies of the token"
    );
}

#[test]
fn an_install_without_a_stored_token_stops_before_installimage() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Nvme);
    let script = install_script(&params(&rescue.agent_sha256), &rescue.layout, "x.tar.gz");
    let out = run(&["-s"], script.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        rescue.argv_log().is_empty(),
        "installimage ran without a token"
    );
}
