//! `orc-cloud-emu`: the Hetzner Cloud, Vultr and Hetzner Robot emulators as one process.

use std::net::SocketAddr;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use orc_emu::{Account, Accounts, ClockMode, EmuConfig, Timings, hetzner};

const CONTROL_HELP: &str = "\
Each emulator also serves a control API at http://ADDR/_emu/ (no credentials):
  GET    /_emu/state                 settings in force
  POST   /_emu/sold-out              {\"plan\":\"cx23\",\"location\":\"fsn1\",\"sold_out\":true}
  POST   /_emu/locations             {\"location\":\"fsn1\",\"disabled\":true}
  POST   /_emu/faults                {\"path\":\"/v1/servers\",\"method\":\"POST\",\"status\":503,\"count\":2}
  DELETE /_emu/faults                remove injected errors
  POST   /_emu/latency               {\"ms\":250}
  POST   /_emu/fail-next-action      {\"count\":1}
  POST   /_emu/rate-limit            {\"limit\":3600,\"remaining\":0,\"per_seconds\":3600}
  GET    /_emu/clock                 {\"mode\",\"now\"}
  POST   /_emu/clock                 {\"mode\":\"auto\"|\"explicit\"}
  POST   /_emu/clock/advance         {\"seconds\":30}
  GET    /_emu/requests              request log, oldest first
  GET    /_emu/counters              requests per operation
  POST   /_emu/reset                 forget all resources and faults
See docs/emulators.md for details.";

/// Emulators of the Hetzner Cloud, Vultr and Hetzner Robot APIs, in memory.
///
/// Hetzner Cloud is served under http://ADDR/v1 (bearer SECRET), Vultr under
/// http://ADDR/v2 (bearer SECRET), Robot at http://ADDR/ (basic auth NAME / SECRET).
/// With none of --hetzner, --vultr, --robot given, all three start on
/// 127.0.0.1:4010, :4011 and :4012.
#[derive(Debug, Parser)]
#[command(name = "orc-cloud-emu", version, after_long_help = CONTROL_HELP)]
struct Args {
    /// Address for the Hetzner Cloud API emulator.
    #[arg(long, value_name = "ADDR")]
    hetzner: Option<SocketAddr>,
    /// Address for the Vultr API emulator.
    #[arg(long, value_name = "ADDR")]
    vultr: Option<SocketAddr>,
    /// Address for the Hetzner Robot webservice emulator.
    #[arg(long, value_name = "ADDR")]
    robot: Option<SocketAddr>,
    /// An account, NAME:SECRET; repeat for several. Default: demo:demo-token.
    #[arg(long = "account", value_name = "NAME:SECRET")]
    accounts: Vec<Account>,
    /// Whether emulated time runs by itself or only when advanced through the control API.
    #[arg(long, value_enum, default_value_t = ClockArg::Auto)]
    clock: ClockArg,
    /// How long creates and power actions take in emulated time.
    #[arg(long, value_enum, default_value_t = TimingsArg::Realistic)]
    timings: TimingsArg,
    /// Hetzner: leave out the `datacenter` field that older clients require.
    #[arg(long)]
    hetzner_no_datacenter: bool,
    /// Materialised mode (root): every Hetzner Cloud and Vultr server becomes a network namespace on
    /// an emulated internet (198.18.0.0/15) and runs its user data; see
    /// docs/emulators/materialised.md.
    #[arg(long)]
    netns: bool,
    /// Materialised mode: bind this `orc` binary read-only at /usr/local/bin/orc in every
    /// server.
    #[arg(long, value_name = "PATH", requires = "netns")]
    netns_orc: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ClockArg {
    Auto,
    Explicit,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TimingsArg {
    Realistic,
    Instant,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    let none = args.hetzner.is_none() && args.vultr.is_none() && args.robot.is_none();
    let local = |port| Some(SocketAddr::from(([127, 0, 0, 1], port)));
    let fabric = if args.netns {
        let fabric =
            orc_emu::netns::Fabric::create(args.netns_orc.clone()).context("materialised mode")?;
        println!(
            "materialised   servers reach this host at {}; echo host {}",
            fabric.host_address(),
            fabric.echo_address()
        );
        Some(std::sync::Arc::new(fabric))
    } else {
        None
    };
    let hetzner_options = hetzner::Options {
        emit_datacenter: !args.hetzner_no_datacenter,
        ..Default::default()
    };
    let config = EmuConfig {
        hetzner: if none { local(4010) } else { args.hetzner },
        vultr: if none { local(4011) } else { args.vultr },
        robot: if none { local(4012) } else { args.robot },
        accounts: Accounts::new(args.accounts),
        clock_mode: match args.clock {
            ClockArg::Auto => ClockMode::Auto,
            ClockArg::Explicit => ClockMode::Explicit,
        },
        timings: match args.timings {
            TimingsArg::Realistic => Timings::realistic(),
            TimingsArg::Instant => Timings::instant(),
        },
        hetzner_options,
        fabric: fabric.clone(),
    };
    let accounts: Vec<String> = config.accounts.iter().map(|a| a.name.clone()).collect();
    let running = config.start().await.context("starting the emulators")?;
    if let Some(url) = running.hetzner_url() {
        println!("hetzner cloud  {url}");
    }
    if let Some(url) = running.vultr_url() {
        println!("vultr          {url}");
    }
    if let Some(url) = running.robot_url() {
        println!("hetzner robot  {url}");
    }
    println!("accounts       {}", accounts.join(", "));
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    drop(running);
    // The last holder of the fabric removes every namespace it made.
    drop(fabric);
    Ok(())
}
