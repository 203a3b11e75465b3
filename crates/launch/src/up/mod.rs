//! `orc up`: the all-in-one development zone on one machine.
//!
//! One process runs everything: the Hetzner Cloud, Vultr and Hetzner Robot emulators (in
//! memory, real-time clock, realistic timings, seed catalogs), the zone on SQLite in the data
//! dir, pool `sys/sys/partner` on provider `core`, whose two slots run the `orc-prov-partner`
//! binary with params pointing at the emulators, and one slot each of the standalone
//! providers `hetzner`, `vultr` and `robot` (pools of the same names in `sys/sys`), whose
//! accounts name the emulators. Ctrl-C stops the slots, the zone and the emulators.
//!
//! The Robot rescue key is made once and kept in `<data dir>/secrets/` (mode 0600). The
//! standalone providers get the emulators' credential and the rescue key as sensitive params
//! (sealed in the store, handed to each slot as files in its own runtime dir) and their
//! accounts refer to them by `param://` references, the way an operator's accounts refer to
//! real secrets.
//!
//! Running it again on the same data dir resumes: the store keeps the zone's state, the admin
//! token is reused, and the partner pool is found rather than created again (its params are
//! brought up to date if they differ). The emulators keep nothing, so instances they held in a
//! previous run are gone.

use std::io::IsTerminal as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use orc_emu::RunningEmulators;
use orc_zone::model::Pool;

use crate::args::ZoneArgs;
use orc_client::client::Client;
use orc_zone::zone::{Zone, ZoneConfig};
use tokio::signal::unix::{SignalKind, signal};

mod binaries;
mod providers;
mod publish;
mod secrets;
mod start;
mod summary;
#[cfg(test)]
mod tests;

/// The partner's app name and the package its pool runs.
pub const PARTNER_APP: &str = "orc-prov-partner";
/// Package of the partner app.
pub const PARTNER_PACKAGE: &str = "sys/orc-prov-partner:default";
/// Name of the partner pool in project `sys/sys`.
pub const PARTNER_POOL: &str = "partner";
/// The shared resource the partner registers for `partner_id` `orc-up`.
pub const PARTNER_RESOURCE: &str = "urn:orc:partner:orc-up";
/// Replicas of the partner: one serving, one standing by.
pub const PARTNER_REPLICAS: u32 = 2;
/// Seconds between the partner's inventory passes in `orc up` (the default is 60).
pub const UP_INVENTORY_SECS: u64 = 5;
/// How long a node of an emulated cloud stays lost before its slot gets a new node.
pub const UP_LOST_REPLACE_AFTER: Duration = Duration::from_secs(20);
/// The emulators' one account. A local tool's credential, not a secret.
const EMULATOR_ACCOUNT: &str = "orc-up";
/// The CA of the emulated ACME server's HTTPS, in the data dir (to fetch the root its
/// certificates chain to from `<management>/roots/0`).
pub const EMULATED_ACME_CA_FILE: &str = "emulated-acme-ca.pem";
const EMULATOR_TOKEN: &str = "orc-up-emulator-token";
/// A second key of the same emulated account, for trying a key rotation.
pub const EMULATOR_ROTATED_TOKEN: &str = "orc-up-emulator-token-2";

/// Arguments of `orc up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the zone keeps its files [default: $ORC_DATA_DIR, else ~/.local/share/orc].
    #[arg(long, env = "ORC_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub zone: ZoneArgs,
    /// Where the Hetzner Cloud emulator listens.
    #[arg(long, default_value = "127.0.0.1:4010")]
    pub hetzner_emu: SocketAddr,
    /// Where the Vultr emulator listens.
    #[arg(long, default_value = "127.0.0.1:4011")]
    pub vultr_emu: SocketAddr,
    /// Where the Hetzner Robot emulator listens.
    #[arg(long, default_value = "127.0.0.1:4012")]
    pub robot_emu: SocketAddr,
    /// The partner binary [default: orc-prov-partner next to this orc].
    #[arg(long)]
    pub partner_bin: Option<PathBuf>,
    /// One binary that serves every standalone provider as `BIN prov-<name> serve`
    /// [default: orc-prov-<name> next to this orc, else orc itself].
    #[arg(long)]
    pub providers_bin: Option<PathBuf>,
    /// Seconds to wait for the partner's replicas before printing the summary anyway.
    #[arg(long, default_value_t = 60)]
    pub partner_wait: u64,
    /// Materialise the emulated clouds (root): every Hetzner Cloud, Vultr and Robot server
    /// becomes a network namespace on an emulated internet (198.18.0.0/15) that boots its
    /// user data or what was installed on it, and two static hosts with sshd join them, so
    /// every node's agent joins the zone for real (docs/emulators/materialised.md).
    #[arg(long)]
    pub netns: bool,
}

/// Runs `orc up` until Ctrl-C.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        // `orc up 2> up.log` keeps plain text; colours are for a terminal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.enable_steady_tick(Duration::from_millis(100));
    let report = |words: &str| spinner.set_message(words.to_string());
    // Registered before anything starts, so Ctrl-C at any point stops what was started
    // instead of killing this process and orphaning the app slots.
    let mut interrupt =
        signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C (SIGINT)")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut up = match Up::start(&args, &report).await {
        Ok(up) => up,
        Err(error) => {
            spinner.finish_and_clear();
            return Err(error);
        }
    };
    let stopped_early = tokio::select! {
        () = up.wait_for_partner(Duration::from_secs(args.partner_wait), &report) => false,
        _ = interrupt.recv() => true,
        _ = terminate.recv() => true,
    };
    spinner.finish_and_clear();
    if !stopped_early {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(up.summary(std::io::stdout().is_terminal()).as_bytes());
        let _ = out.flush();
        drop(out);
        let mut hangup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
        loop {
            tokio::select! {
                _ = interrupt.recv() => break,
                _ = terminate.recv() => break,
                _ = hangup.recv() => {
                    println!("SIGHUP: restarting the zone; emulators, servers and nodes stay");
                    up = match up.restart_zone().await {
                        Ok(up) => up,
                        Err(error) => return Err(error.context("the zone did not come back after SIGHUP")),
                    };
                    println!("zone restarted at {}; the nodes' agents reconnect by themselves", up.zone.url());
                }
            }
        }
    }
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner.set_message("stopping the partner, the zone and the emulators");
    up.shutdown().await;
    spinner.finish_with_message("stopped");
    Ok(())
}

/// A running `orc up`: the zone and the emulators.
#[derive(Debug)]
pub struct Up {
    zone: Zone,
    /// The zone's API, as its operator (the admin token).
    client: Client,
    /// How the zone was started, on the ports it got: a restart listens where its
    /// providers and agents dial.
    zone_config: ZoneConfig,
    emulators: RunningEmulators,
    /// Materialised mode's static hosts (removed on drop, before the fabric).
    static_hosts: Option<orc_emu::static_hosts::StaticHosts>,
    /// Materialised mode's namespaces; dropped last, which removes them.
    fabric: Option<std::sync::Arc<orc_emu::netns::Fabric>>,
    /// The emulated internet's ACME server, when the zone obtains certificates from it.
    acme: Option<orc_emu::netns::AcmeServer>,
    data_dir: PathBuf,
    pool: Pool,
    pool_created: bool,
    partner_running: usize,
    partner_registered: bool,
    /// Whether the partner's provider is at zone scope with a pricing strategy.
    partner_priced: bool,
    /// The standalone providers' names.
    standalone: Vec<&'static str>,
}
