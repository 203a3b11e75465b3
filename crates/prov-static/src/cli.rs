//! The `orc-prov-static` command line. The binary is a thin wrapper over [`main_from`]; `orc`
//! embeds the same entry point.
//!
//! - `serve`: dial the zone and serve the hosts through the SDK's machine adapter (zone
//!   endpoint, token file, project and slot from `ORC_ZONE_ENDPOINT`, `ORC_ZONE_TOKEN_FILE`,
//!   `ORC_ZONE_PROJECT`, `ORC_SLOT`);
//! - `hosts`: reach every host now and print its claim (or why it did not answer);
//! - `validate`: check the host list and print it normalised, or every problem;
//! - `release --key K`: stop a node's agent and free its host by hand.
//!
//! The host list comes from `ORC_PARAM_HOSTS` (JSON text) or `ORC_PARAM_HOSTS_FILE` (a JSON
//! file), the provider's name from `ORC_PARAM_NAME` (default `static`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use orc_provider_sdk::machine::{AdapterOptions, MachineAdapter, MachineKey};
use orc_provider_sdk::process::{self, ZoneArgs};
use orc_provider_sdk::{RunnerOptions, run_provider};

use crate::config::{StaticAccount, parse_account};
use crate::machines::{Claim, SshOptions, StaticMachines};

#[derive(Debug, Parser)]
#[command(
    name = "orc-prov-static",
    version,
    about = "The orc static provider: hosts the operator lists, joined over SSH"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct HostsArgs {
    /// The host list as JSON text.
    #[arg(long, env = "ORC_PARAM_HOSTS", hide_env_values = true)]
    hosts: Option<String>,
    /// A file holding the host list as JSON.
    #[arg(long, env = "ORC_PARAM_HOSTS_FILE")]
    hosts_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dial the zone and serve the hosts.
    #[command(
        after_help = "Example: ORC_PARAM_HOSTS_FILE=hosts.json orc-prov-static serve --zone https://zone.internal:7400"
    )]
    Serve {
        #[command(flatten)]
        hosts: HostsArgs,
        #[command(flatten)]
        zone: ZoneArgs,
        /// The provider's name at the zone.
        #[arg(long, env = "ORC_PARAM_NAME", default_value = "static")]
        name: String,
    },
    /// Reach every host now and print its claim, or why it did not answer.
    #[command(after_help = "Example: orc-prov-static hosts --hosts-file hosts.json")]
    Hosts {
        #[command(flatten)]
        hosts: HostsArgs,
    },
    /// Check the host list and print it normalised (exit 1 on any problem).
    #[command(after_help = "Example: orc-prov-static validate --hosts-file hosts.json")]
    Validate {
        #[command(flatten)]
        hosts: HostsArgs,
    },
    /// Stop a node's agent and free its host (what the zone does when a pool shrinks).
    #[command(
        after_help = "Example: orc-prov-static release --hosts-file hosts.json --key node_01HZY8"
    )]
    Release {
        #[command(flatten)]
        hosts: HostsArgs,
        /// The node's id, which its host's claim holds.
        #[arg(long)]
        key: String,
    },
}

fn read_hosts(args: &HostsArgs) -> anyhow::Result<StaticAccount> {
    let text = match (&args.hosts, &args.hosts_file) {
        (Some(_), Some(_)) => {
            bail!("give the host list as ORC_PARAM_HOSTS or ORC_PARAM_HOSTS_FILE, not both")
        }
        (Some(text), None) => text.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the host list {}", path.display()))?,
        (None, None) => bail!("no host list: set ORC_PARAM_HOSTS or ORC_PARAM_HOSTS_FILE"),
    };
    Ok(parse_account(&text)?)
}

/// Runs the command line `args` (the first item is the program name).
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::parse_from(args).command {
        Command::Validate { hosts } => match read_hosts(&hosts) {
            Ok(account) => {
                println!("{}", render_account(&account));
                Ok(())
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Hosts { hosts } => {
            let machines = StaticMachines::new(read_hosts(&hosts)?, SshOptions::default());
            let statuses = process::runtime()?
                .block_on(machines.hosts())
                .map_err(|e| anyhow::anyhow!("reading the hosts: {e}"))?;
            for status in statuses {
                let claim = match &status.claim {
                    Claim::Unknown => "unknown".to_string(),
                    Claim::Free => "free".to_string(),
                    Claim::Ours(key) => format!("held by {key}"),
                    Claim::Foreign(text) => format!("claimed by something else ({text})"),
                };
                match &status.unreachable {
                    Some(why) => println!("{}\t{claim}\tdid not answer: {why}", status.name),
                    None => println!("{}\t{claim}", status.name),
                }
            }
            Ok(())
        }
        Command::Release { hosts, key } => {
            let machines = StaticMachines::new(read_hosts(&hosts)?, SshOptions::default());
            let key = MachineKey::new(key).context("--key must not be empty")?;
            let host = process::runtime()?.block_on(machines.release(&key))?;
            println!("released host {host} from {key}");
            Ok(())
        }
        Command::Serve { hosts, zone, name } => {
            let access = zone.access()?;
            let account = read_hosts(&hosts)?;
            serve(account, &zone.zone, &name, zone.slot, access)
        }
    }
}

fn render_account(account: &StaticAccount) -> String {
    let mut lines = vec![
        format!("ssh_key: {}", account.ssh_key),
        format!("currency: {}", account.currency),
    ];
    for host in &account.hosts {
        lines.push(format!(
            "host {}: {}@{}:{} ({}), {} plan {}, {} vCPU, {} GiB, {}, os {}, {} {}/h",
            host.name,
            host.user,
            host.address,
            host.port,
            host.host_key_sha256,
            host.location,
            host.plan,
            host.vcpus,
            host.memory_gib,
            host.arch,
            host.os,
            host.hourly,
            account.currency,
        ));
    }
    lines.join("\n")
}

fn serve(
    account: StaticAccount,
    zone: &str,
    name: &str,
    slot: u32,
    access: process::ZoneAccess,
) -> anyhow::Result<()> {
    process::init_stderr_tracing();
    let hello = process::one_cloud_hello(name, slot, env!("CARGO_PKG_VERSION"))?;
    let runtime = process::runtime()?;
    tracing::info!(
        zone,
        provider = name,
        hosts = account.hosts.len(),
        "The static provider dials the zone"
    );
    let machines = StaticMachines::new(account, SshOptions::default());
    let options = RunnerOptions {
        credentials: access.credentials,
        zone_ca: access.ca,
        ..RunnerOptions::default()
    };
    runtime.block_on(async {
        let adapter = MachineAdapter::new(machines, hello, AdapterOptions::default());
        run_provider(zone, Arc::new(adapter), options).await
    })?;
    Ok(())
}
