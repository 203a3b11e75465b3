//! `orc-prov-vultr`: serve one Vultr account to a zone, list its offers, or check its
//! account.
//!
//! `serve` reads what the zone's app runner hands a provider process: `ORC_ZONE_ENDPOINT`,
//! `ORC_ZONE_TOKEN_FILE` and `ORC_ZONE_PROJECT`, `ORC_SLOT`, and the params
//! `ORC_PARAM_ACCOUNT` or `ORC_PARAM_ACCOUNT_FILE` (the account JSON), `ORC_PARAM_API_URL`
//! (default the real API) and `ORC_PARAM_NAME` (default `vultr`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use orc_proto::{ProviderName, Replica, ResourceUri};
use orc_provider_sdk::machine::{
    AdapterOptions, MachineAdapter, MachineOffer, MachineProvider, OfferQuery,
};
use orc_provider_sdk::{HelloInfo, RunnerOptions, ZoneCredentials, run_provider};

use crate::config::Account;
use crate::machines::{VultrMachines, VultrOptions};

/// The variable naming the API base URL.
pub const API_URL_VAR: &str = "ORC_PARAM_API_URL";
/// The variable naming the provider.
pub const NAME_VAR: &str = "ORC_PARAM_NAME";
/// The provider name when none is given.
pub const DEFAULT_NAME: &str = "vultr";

#[derive(Debug, Parser)]
#[command(name = "orc-prov-vultr", version, about = "The orc Vultr provider")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dial the zone and serve the account's machines.
    Serve {
        /// The zone's provider endpoint (`http://HOST:PORT`).
        #[arg(long, env = "ORC_ZONE_ENDPOINT")]
        zone: String,
        /// Replica slot within the provider's app.
        #[arg(long, env = "ORC_SLOT", default_value_t = 0)]
        slot: u32,
        /// File with the zone token.
        #[arg(long, env = "ORC_ZONE_TOKEN_FILE", requires = "project")]
        token_file: Option<PathBuf>,
        /// The project the zone token belongs to.
        #[arg(long, env = "ORC_ZONE_PROJECT", requires = "token_file")]
        project: Option<String>,
        /// Seconds between reads of the offers.
        #[arg(long, default_value_t = 300)]
        refresh_secs: u64,
    },
    /// List the plans, prices and availability the account would offer.
    Offers {
        /// This region (default: the account's region; each region costs one request).
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
}

/// Runs the command line with `args` (the first is the program name).
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::parse_from(args).command {
        Command::Serve {
            zone,
            slot,
            token_file,
            project,
            refresh_secs,
        } => {
            let credentials = zone_credentials(token_file.as_deref(), project.as_deref())?;
            serve(&zone, slot, credentials, refresh_secs)
        }
        Command::Offers { location, json } => {
            let machines = machines_from_env()?;
            let query = OfferQuery {
                location: Some(location.unwrap_or_else(|| machines.region().to_string())),
                ..OfferQuery::default()
            };
            let offers = runtime()?
                .block_on(machines.offers(&query))
                .context("reading the offers")?;
            print_offers(&offers, json)
        }
        Command::Validate { offline } => {
            let account = Account::from_env()?;
            account
                .api_key
                .resolve()
                .with_context(|| format!("the account's API key {}", account.api_key))?;
            println!(
                "account: region {}, API key from {}",
                account.region, account.api_key
            );
            if !offline {
                let machines = machines_from_env()?;
                let listed = runtime()?
                    .block_on(machines.list())
                    .context("listing the managed instances")?;
                println!(
                    "api: {} answers; {} managed instances",
                    api_url(),
                    listed.len()
                );
            }
            Ok(())
        }
    }
}

fn api_url() -> String {
    std::env::var(API_URL_VAR)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| orc_cloud::vultr::VULTR_DEFAULT_URL.to_string())
}

fn machines_from_env() -> anyhow::Result<VultrMachines> {
    let account = Account::from_env()?;
    let options = VultrOptions {
        base_url: api_url(),
        ..VultrOptions::default()
    };
    Ok(VultrMachines::new(&account, options))
}

fn print_offers(offers: &[MachineOffer], json: bool) -> anyhow::Result<()> {
    if json {
        for o in offers {
            let line = serde_json::json!({
                "location": o.location,
                "plan": o.plan,
                "vcpus": o.vcpus,
                "memory_mib": o.memory_mib,
                "arch": o.arch.to_string(),
                "disk_gb": o.disk_gb,
                "hourly": o.hourly.amount.to_string(),
                "currency": o.hourly.currency.as_str(),
                "available": o.available,
            });
            println!("{line}");
        }
        return Ok(());
    }
    println!(
        "{:<8} {:<8} {:>5} {:>8} {:<7} {:>6} {:>12}  available",
        "location", "plan", "vcpu", "mem_gib", "arch", "disk", "hourly"
    );
    for o in offers {
        let memory = rust_decimal::Decimal::from(o.memory_mib) / rust_decimal::Decimal::from(1024);
        println!(
            "{:<8} {:<8} {:>5} {:>8} {:<7} {:>6} {:>8} {}  {}",
            o.location,
            o.plan,
            o.vcpus,
            memory.normalize(),
            o.arch.to_string(),
            o.disk_gb,
            o.hourly.amount,
            o.hourly.currency.as_str(),
            if o.available { "yes" } else { "no" }
        );
    }
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// Reads the zone credentials: the token from its file (never logged), the project as given.
fn zone_credentials(
    token_file: Option<&Path>,
    project: Option<&str>,
) -> anyhow::Result<Option<ZoneCredentials>> {
    let (Some(token_file), Some(project)) = (token_file, project) else {
        return Ok(None);
    };
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("reading the zone token file {}", token_file.display()))?;
    let credentials = ZoneCredentials::new(token.trim(), project)
        .with_context(|| format!("zone token file {}", token_file.display()))?;
    Ok(Some(credentials))
}

/// What the provider says in hello: its name, `urn:orc:provider:<name>`, and this replica.
pub fn hello(name: &str, slot: u32) -> anyhow::Result<HelloInfo> {
    Ok(HelloInfo {
        provider: ProviderName::new(name).context("the provider name is empty")?,
        resource_uri: ResourceUri::new(format!("urn:orc:provider:{name}"))
            .context("the resource URI is empty")?,
        replica: Replica {
            host: host_name(),
            pid: std::process::id(),
            slot,
        },
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

fn serve(
    zone: &str,
    slot: u32,
    credentials: Option<ZoneCredentials>,
    refresh_secs: u64,
) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let machines = machines_from_env()?;
    let name = std::env::var(NAME_VAR)
        .ok()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_NAME.to_string());
    let adapter = MachineAdapter::new(
        machines,
        hello(&name, slot)?,
        AdapterOptions {
            refresh_interval: Duration::from_secs(refresh_secs.max(1)),
            ..AdapterOptions::default()
        },
    );
    tracing::info!(zone, provider = %name, "The Vultr provider dials the zone");
    let options = RunnerOptions {
        credentials,
        ..RunnerOptions::default()
    };
    runtime()?.block_on(run_provider(zone, Arc::new(adapter), options))?;
    Ok(())
}
