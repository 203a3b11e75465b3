//! Helpers shared by the integration tests: emulators on loopback and clients pointed at
//! them. The emulators' control API is `orc_testkit::EmuControl`.

#![allow(dead_code)]

use base64::Engine;
use orc_cloud::{HetznerClient, HetznerConfig, RobotClient, RobotConfig, VultrClient, VultrConfig};
use orc_emu::{EmuConfig, RunningEmulators};

/// The token (Hetzner, Vultr) and password (Robot) of the emulators' default account.
pub const SECRET: &str = "demo-token";
/// The Robot user of the default account.
pub const ROBOT_USER: &str = "demo";

pub async fn start() -> RunningEmulators {
    EmuConfig::for_tests()
        .start()
        .await
        .expect("emulators start on loopback")
}

pub async fn start_with(config: EmuConfig) -> RunningEmulators {
    config.start().await.expect("emulators start on loopback")
}

pub fn hetzner(emu: &RunningEmulators) -> HetznerClient {
    let url = emu.hetzner_url().expect("hetzner emulator running");
    HetznerClient::new(HetznerConfig::new(SECRET).with_base_url(url)).expect("client")
}

pub fn vultr(emu: &RunningEmulators) -> VultrClient {
    vultr_paged(emu, 500)
}

pub fn vultr_paged(emu: &RunningEmulators, per_page: u32) -> VultrClient {
    let url = emu.vultr_url().expect("vultr emulator running");
    let mut config = VultrConfig::new(SECRET).with_base_url(url);
    config.per_page = per_page;
    VultrClient::new(config).expect("client")
}

pub fn robot(emu: &RunningEmulators) -> RobotClient {
    let url = emu.robot_url().expect("robot emulator running");
    RobotClient::new(RobotConfig::new(ROBOT_USER, SECRET).with_base_url(url)).expect("client")
}

/// A syntactically valid, distinct OpenSSH ed25519 public key for each `seed`.
pub fn ssh_public_key(seed: u32) -> String {
    let kind = b"ssh-ed25519";
    let mut blob = Vec::new();
    blob.extend_from_slice(&(kind.len() as u32).to_be_bytes());
    blob.extend_from_slice(kind);
    blob.extend_from_slice(&32u32.to_be_bytes());
    let mut key = [7u8; 32];
    key[..4].copy_from_slice(&seed.to_be_bytes());
    blob.extend_from_slice(&key);
    format!(
        "ssh-ed25519 {} test{seed}@orc",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}
