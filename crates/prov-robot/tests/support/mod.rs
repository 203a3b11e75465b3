//! Helpers shared by the Robot provider's integration tests: the Robot emulator, an account
//! whose secrets live in files, and a scratch "rescue system" with an installimage stand-in
//! that records what it was asked.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use orc_cloud::{RobotClient, RobotConfig, RobotServerNumber};
use orc_emu::{EmuConfig, RunningEmulators};
use orc_prov_robot::{RescueLayout, RobotAccount, parse_account};
use orc_testkit::EmuControl;

/// The emulator's Robot login and its seeded key.
pub const ROBOT_USER: &str = "demo";
pub const ROBOT_PASSWORD: &str = "demo-token";
pub const SEED_FINGERPRINT: &str = "56:29:99:a4:5d:ed:ac:95:c1:f5:88:82:90:5d:dd:10";

/// Seeded servers: AX42 `db-1` (FSN1, every reset), EX44 unnamed (HEL1), RX170
/// `build-arm` (FSN1, IPv6 only).
pub const AX42: RobotServerNumber = RobotServerNumber(2001001);
pub const EX44: RobotServerNumber = RobotServerNumber(2001002);
pub const RX170: RobotServerNumber = RobotServerNumber(2001003);

/// A join token nobody could mistake for anything else.
pub const TOKEN: &str = "orcjoin.tok3n-Zq81xV0-must-never-leak";

pub async fn robot_emulator() -> RunningEmulators {
    let mut config = EmuConfig::for_tests();
    config.hetzner = None;
    config.vultr = None;
    config
        .start()
        .await
        .expect("the Robot emulator starts on loopback")
}

pub fn robot_url(emu: &RunningEmulators) -> String {
    emu.robot_url().expect("robot emulator running")
}

/// A direct client of the emulated account, to look behind the provider's back.
pub fn direct(emu: &RunningEmulators) -> RobotClient {
    RobotClient::new(RobotConfig::new(ROBOT_USER, ROBOT_PASSWORD).with_base_url(robot_url(emu)))
        .expect("client")
}

/// The account config with the password and the rescue key in files under `dir`.
pub fn account(dir: &Path, private_key: &str) -> RobotAccount {
    let password = dir.join("robot-password");
    std::fs::write(&password, format!("{ROBOT_PASSWORD}\n")).unwrap();
    let key = dir.join("rescue-key");
    std::fs::write(&key, private_key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let json = serde_json::json!({
        "user": ROBOT_USER,
        "password": format!("file://{}", password.display()),
        "rescue_key_fingerprint": SEED_FINGERPRINT,
        "rescue_key": format!("file://{}", key.display()),
    });
    parse_account(&json.to_string()).expect("the test account is valid")
}

/// `(method, path, status)` of every request the emulator logged, oldest first.
pub async fn request_log(emu: &RunningEmulators) -> Vec<(String, String, u16)> {
    EmuControl::robot(emu)
        .requests()
        .await
        .into_iter()
        .map(|r| (r.method, r.path, r.status))
        .collect()
}

/// A scratch rescue system: work dir, target root, fake `/sys/block`, an installimage
/// stand-in and a record directory.
#[derive(Debug)]
pub struct RescueBox {
    pub root: PathBuf,
    pub layout: RescueLayout,
    pub record: PathBuf,
    pub target: PathBuf,
}

pub enum Disks {
    Nvme,
    Sata,
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl RescueBox {
    pub fn new(root: &Path, disks: Disks) -> RescueBox {
        let dir = |p: &str| {
            let path = root.join(p);
            std::fs::create_dir_all(&path).unwrap();
            path
        };
        let work = root.join("rescue-work");
        let target = dir("target");
        let sys_block = dir("sys-block");
        let bin = dir("bin");
        let images = dir("images");
        let record = dir("record");
        let names: &[&str] = match disks {
            Disks::Nvme => &["nvme0n1", "nvme1n1", "sda"],
            Disks::Sata => &["sda", "sdb"],
        };
        for name in names {
            std::fs::create_dir_all(sys_block.join(name)).unwrap();
        }
        std::fs::create_dir_all(sys_block.join("loop0")).unwrap();
        let uuid = root.join("product_uuid");
        std::fs::write(&uuid, "4C4C4544-0042-4810-8058-B4C04F4E3332\n").unwrap();

        let installimage = bin.join("installimage");
        write_exec(
            &installimage,
            &format!(
                r#"#!/bin/sh
set -eu
rec='{rec}'
printf '%s\n' "$0" "$@" >> "$rec/argv.log"
conf=''
post=''
while [ $# -gt 0 ]; do
  case "$1" in
    -c) conf="$2"; shift 2 ;;
    -x) post="$2"; shift 2 ;;
    *) shift ;;
  esac
done
cp "$conf" "$rec/install.conf"
if sh -n "$post" && dash -n "$post"; then echo ok > "$rec/post-install.syntax"; fi
stat -c '%a' "$post" > "$rec/post-install.mode"
cp "$post" '{target}/post-install'
chmod 0700 '{target}/post-install'
cd '{target}'
sh '{target}/post-install'
"#,
                rec = record.display(),
                target = target.display(),
            ),
        );
        let layout = RescueLayout {
            work_dir: work.display().to_string(),
            target_root: target.display().to_string(),
            sys_block: sys_block.display().to_string(),
            installimage: installimage.display().to_string(),
            image_dir: images.display().to_string(),
            product_uuid: uuid.display().to_string(),
        };
        RescueBox {
            root: root.to_path_buf(),
            layout,
            record,
            target,
        }
    }

    /// Everything the stand-ins recorded as argv, one argument per line.
    pub fn argv_log(&self) -> String {
        std::fs::read_to_string(self.record.join("argv.log")).unwrap_or_default()
    }

    pub fn mode(&self, relative: &str) -> u32 {
        std::fs::metadata(self.target.join(relative))
            .unwrap_or_else(|e| panic!("{relative}: {e}"))
            .permissions()
            .mode()
            & 0o7777
    }

    /// Every file under `dir` whose content contains `needle`.
    pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(path);
                } else if meta.is_file()
                    && std::fs::read(&path)
                        .map(|b| contains(&b, needle.as_bytes()))
                        .unwrap_or(false)
                {
                    found.push(path);
                }
            }
        }
        found.sort();
        found
    }
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}
