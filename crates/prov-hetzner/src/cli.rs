//! `orc-prov-hetzner`: serve one Hetzner Cloud project to a zone, list its offers, check
//! its account, or record the API traffic of a fixed scenario.
//!
//! `serve` reads what the zone's app runner hands a provider process: `ORC_ZONE_ENDPOINT`,
//! `ORC_ZONE_TOKEN_FILE` and `ORC_ZONE_PROJECT`, `ORC_SLOT`, and the params
//! `ORC_PARAM_ACCOUNT` or `ORC_PARAM_ACCOUNT_FILE` (the account JSON), `ORC_PARAM_API_URL`
//! (default the real API) and `ORC_PARAM_NAME` (default `hetzner`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use orc_cloud::{HttpExchange, RecordingExchange};
use orc_provider_sdk::machine::{AdapterOptions, MachineAdapter, MachineProvider, OfferQuery};
use orc_provider_sdk::process::{self, OfferFormat, ZoneArgs};
use orc_provider_sdk::{RunnerOptions, run_provider};

use crate::config::Account;
use crate::machines::{HetznerMachines, HetznerOptions};
use crate::recording;

/// The variable naming the API base URL.
pub const API_URL_VAR: &str = "ORC_PARAM_API_URL";
/// The variable naming the provider.
pub const NAME_VAR: &str = "ORC_PARAM_NAME";
/// The provider name when none is given.
pub const DEFAULT_NAME: &str = "hetzner";

#[derive(Debug, Parser)]
#[command(
    name = "orc-prov-hetzner",
    version,
    about = "The orc Hetzner Cloud provider"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dial the zone and serve the account's machines.
    Serve {
        #[command(flatten)]
        zone: ZoneArgs,
        /// Seconds between reads of the offers.
        #[arg(long, default_value_t = 300)]
        refresh_secs: u64,
    },
    /// List the plans, prices and availability the account would offer.
    Offers {
        /// Only this location (default: every location).
        #[arg(long)]
        location: Option<String>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check the account: parse it, resolve its token and, unless --offline, ask the API.
    Validate {
        #[arg(long)]
        offline: bool,
    },
    /// Run the fixed record-and-replay scenario against the API and write its traffic.
    Record {
        /// NDJSON file to write.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Runs the command line with `args` (the first is the program name).
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::parse_from(args).command {
        Command::Serve { zone, refresh_secs } => {
            let access = zone.access()?;
            serve(&zone.zone, zone.slot, access, refresh_secs)
        }
        Command::Offers { location, json } => {
            let machines = machines_from_env(None)?;
            let query = OfferQuery {
                location,
                ..OfferQuery::default()
            };
            let offers = process::runtime()?
                .block_on(machines.offers(&query))
                .context("reading the offers")?;
            let format = if json {
                OfferFormat::JsonLines
            } else {
                OfferFormat::Table
            };
            process::write_offers(&mut std::io::stdout().lock(), &offers, format)
                .context("writing the offers")
        }
        Command::Validate { offline } => {
            let account = Account::from_env()?;
            account
                .token
                .resolve()
                .with_context(|| format!("the account's token {}", account.token))?;
            println!(
                "account: location {}, token from {}",
                account.location, account.token
            );
            if !offline {
                let machines = machines_from_env(None)?;
                let listed = process::runtime()?
                    .block_on(machines.list())
                    .context("listing the managed servers")?;
                println!(
                    "api: {} answers; {} managed servers",
                    api_url(),
                    listed.len()
                );
            }
            Ok(())
        }
        Command::Record { out } => {
            let exchange = RecordingExchange::create(
                Arc::new(HttpExchange::new(&api_url(), Default::default())?),
                &out,
            )
            .with_context(|| format!("creating {}", out.display()))?;
            let machines = machines_from_env(Some(Arc::new(exchange)))?;
            let outcome = process::runtime()?.block_on(recording::scenario(&machines))?;
            println!("{outcome:?}");
            println!("recorded into {}", out.display());
            Ok(())
        }
    }
}

fn api_url() -> String {
    process::env_or(API_URL_VAR, orc_cloud::hetzner::HETZNER_DEFAULT_URL)
}

fn machines_from_env(
    exchange: Option<Arc<dyn orc_cloud::Exchange>>,
) -> anyhow::Result<HetznerMachines> {
    let account = Account::from_env()?;
    let options = HetznerOptions {
        base_url: api_url(),
        exchange,
        ..HetznerOptions::default()
    };
    Ok(HetznerMachines::new(&account, options)?)
}

fn serve(
    zone: &str,
    slot: u32,
    access: process::ZoneAccess,
    refresh_secs: u64,
) -> anyhow::Result<()> {
    process::init_stderr_tracing();
    let machines = machines_from_env(None)?;
    let name = process::env_or(NAME_VAR, DEFAULT_NAME);
    let adapter = MachineAdapter::new(
        machines,
        process::one_cloud_hello(&name, slot, env!("CARGO_PKG_VERSION"))?,
        AdapterOptions {
            refresh_interval: Duration::from_secs(refresh_secs.max(1)),
            ..AdapterOptions::default()
        },
    );
    tracing::info!(zone, provider = %name, "The Hetzner provider dials the zone");
    let options = RunnerOptions {
        credentials: access.credentials,
        zone_ca: access.ca,
        ..RunnerOptions::default()
    };
    process::runtime()?.block_on(run_provider(zone, Arc::new(adapter), options))?;
    Ok(())
}
