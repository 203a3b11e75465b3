//! The bootstrap's shell text, checked by POSIX shells and run for real on this machine
//! against a scratch "rescue system" (a stand-in for installimage, a fake `/sys/block`, a
//! target root instead of `/`).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use orc_common::Secret;
use orc_prov_robot::script::{
    self, BootstrapParams, FIRST_BOOT_PATH, FIRST_BOOT_UNIT, JOIN_TOKEN_PATH, install_script,
    token_command,
};
use support::*;

/// A first-boot script with the things that would break a careless here-document: quotes,
/// `$` expansions, backslashes, lines equal to the other here-documents' delimiters.
const FIRST_BOOT: &str = r#"#!/bin/sh
set -eu
# the zone's first-boot script (a stand-in)
ca="$(cat <<'ORC_CA_END'
-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUe '$HOME' `id` \ "quoted"
-----END CERTIFICATE-----
ORC_CA_END
)"
cat > /dev/null <<'NOTE'
ORC_SSH_KEYS_END
ORC_UNIT_EOF
ORC_JOIN_TOKEN_END
NOTE
printf '%s\n' "$ca" > /etc/orc/ca.pem
exec orc agent
"#;

fn params() -> BootstrapParams {
    BootstrapParams {
        join_token: Secret::new(TOKEN),
        first_boot: FIRST_BOOT.into(),
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
    let p = params();
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

    let unterminated = BootstrapParams {
        first_boot: "#!/bin/sh\necho last line".into(),
        ..p.clone()
    };
    unterminated.validate().unwrap();
    let body = script::post_install_body(&unterminated);
    assert!(
        body.contains("echo last line\nORC_FIRST_BOOT_END\n"),
        "a script without a final newline still ends its here-document: {body}"
    );
    syntax_ok("dash", &body).unwrap_or_else(|e| panic!("{e}\n{body}"));
}

#[test]
fn hostile_parameters_are_refused_before_any_script_is_made() {
    let good = params();
    good.validate().unwrap();
    let cases: Vec<(&str, BootstrapParams)> = vec![
        (
            "first_boot",
            BootstrapParams {
                first_boot: "echo no interpreter line\n".into(),
                ..good.clone()
            },
        ),
        (
            "first_boot",
            BootstrapParams {
                first_boot: "#!/bin/sh\necho ok\nORC_FIRST_BOOT_END\nrm -rf /\n".into(),
                ..good.clone()
            },
        ),
        (
            "first_boot",
            BootstrapParams {
                first_boot: "#!/bin/sh\nORC_BODY_EOF\nrm -rf /\n".into(),
                ..good.clone()
            },
        ),
        (
            "first_boot",
            BootstrapParams {
                first_boot: "#!/bin/sh\necho a\0b\n".into(),
                ..good.clone()
            },
        ),
        (
            "first_boot",
            BootstrapParams {
                first_boot: format!("#!/bin/sh\n{}", "#".repeat(256 * 1024)),
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
    ];
    for (field, p) in cases {
        let err = p.validate().expect_err(field);
        assert_eq!(err.field, field, "{err}");
        let shown = err.to_string();
        for content in ["lines", "rm -rf", "no interpreter", "echo"] {
            assert!(
                !shown.contains(content),
                "the error shows the value: {shown}"
            );
        }
    }
}

#[test]
fn the_install_runs_with_raid1_over_nvme_and_leaves_the_token_only_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Nvme);
    let p = params();

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
    let first_boot = FIRST_BOOT_PATH.trim_start_matches('/');
    assert_eq!(
        std::fs::read_to_string(rescue.target.join(first_boot)).unwrap(),
        FIRST_BOOT,
        "the first-boot script arrives byte for byte"
    );
    assert_eq!(rescue.mode(first_boot), 0o700);
    assert_eq!(rescue.mode("var/lib/orc"), 0o700);
    let unit_path = format!("etc/systemd/system/{FIRST_BOOT_UNIT}");
    let unit = std::fs::read_to_string(rescue.target.join(&unit_path)).unwrap();
    for line in [
        "Type=oneshot",
        "ConditionPathExists=/var/lib/orc/first-boot.sh",
        "ExecStart=/bin/sh /var/lib/orc/first-boot.sh",
        "ExecStopPost=/bin/rm -f /var/lib/orc/first-boot.sh",
        "After=network-online.target",
        "WantedBy=multi-user.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing: {unit}");
    }
    assert_eq!(rescue.mode(&unit_path), 0o644);
    let wants = rescue
        .target
        .join("etc/systemd/system/multi-user.target.wants");
    assert_eq!(
        std::fs::read_link(wants.join(FIRST_BOOT_UNIT))
            .unwrap()
            .to_str(),
        Some(format!("../{FIRST_BOOT_UNIT}").as_str()),
        "the unit is enabled"
    );
    let mut wanted: Vec<_> = std::fs::read_dir(&wants)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    wanted.sort();
    assert_eq!(wanted, [FIRST_BOOT_UNIT], "no other unit is enabled");
    assert!(
        !rescue.target.join("usr").exists(),
        "nothing is downloaded or installed besides the first-boot script"
    );

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
    assert_eq!(
        argv.lines()
            .filter(|l| l.ends_with("/installimage"))
            .count(),
        1,
        "installimage ran once: {argv}"
    );
    assert!(!argv.contains(TOKEN), "the token is in an argv: {argv}");
    let holders = RescueBox::files_containing(dir.path(), TOKEN);
    assert_eq!(holders, [rescue.target.join("etc/orc/join-token")]);
}

#[test]
fn sata_disks_are_used_when_there_is_no_nvme() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Sata);
    let stored = run(&["-c", &token_command(&rescue.layout)], TOKEN.as_bytes());
    assert!(stored.status.success());
    let script = install_script(
        &params(),
        &rescue.layout,
        "Debian-1205-bookworm-amd64-base.tar.gz",
    );
    let installed = run(&["-s"], script.as_bytes());
    assert!(
        installed.status.success(),
        "install failed: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let conf = std::fs::read_to_string(rescue.record.join("install.conf")).unwrap();
    assert!(
        conf.contains("DRIVE1 /dev/sda\nDRIVE2 /dev/sdb\nSWRAID 1\nSWRAIDLEVEL 1\n"),
        "{conf}"
    );
    assert!(!conf.contains("nvme"), "{conf}");
    let work = std::path::Path::new(&rescue.layout.work_dir);
    assert!(
        !work.join("join-token").exists() && !work.join("post-install.sh").exists(),
        "the rescue copies of the token are removed"
    );
}

#[test]
fn a_failed_installimage_still_removes_the_rescue_copies_of_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Nvme);
    let stored = run(&["-c", &token_command(&rescue.layout)], TOKEN.as_bytes());
    assert!(stored.status.success());
    std::fs::write(&rescue.layout.installimage, "#!/bin/sh\nexit 7\n").unwrap();
    let script = install_script(&params(), &rescue.layout, "x.tar.gz");
    let installed = run(&["-s"], script.as_bytes());
    assert_eq!(
        installed.status.code(),
        Some(7),
        "installimage's failure is the install's"
    );
    let work = std::path::Path::new(&rescue.layout.work_dir);
    assert!(
        !work.join("join-token").exists() && !work.join("post-install.sh").exists(),
        "a failed install still removes the rescue copies of the token"
    );
    assert_eq!(
        RescueBox::files_containing(dir.path(), TOKEN),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn an_install_without_a_stored_token_stops_before_installimage() {
    let dir = tempfile::tempdir().unwrap();
    let rescue = RescueBox::new(dir.path(), Disks::Nvme);
    let script = install_script(&params(), &rescue.layout, "x.tar.gz");
    let out = run(&["-s"], script.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        rescue.argv_log().is_empty(),
        "installimage ran without a token"
    );
}
