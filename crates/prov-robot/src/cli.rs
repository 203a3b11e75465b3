//! The `orc-prov-robot` command line. The binary is a thin wrapper over [`main_from`]; `orc`
//! can embed the same entry point.
//!
//! - `serve`: dial the zone and serve the account's servers through the SDK's machine
//!   adapter (zone endpoint, token file, project and slot from `ORC_ZONE_ENDPOINT`,
//!   `ORC_ZONE_TOKEN_FILE`, `ORC_ZONE_PROJECT`, `ORC_SLOT`);
//! - `offers`: print what the account offers now (one line per product and location);
//! - `validate`: check the account config and print it normalised, or every problem;
//! - `machine --key K claim|release|power|rescue|identify|bootstrap`: operator actions on
//!   one machine; `bootstrap` reads the join token from a file or stdin, never from argv.
//!
//! The account config comes from `ORC_PARAM_ACCOUNT` (JSON text) or `ORC_PARAM_ACCOUNT_FILE`
//! (a JSON file), the Robot endpoint from `ORC_PARAM_API_URL` (default the public one), the
//! provider's name from `ORC_PARAM_NAME` (default `robot`).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use orc_cloud::RobotServerNumber;
use orc_cloud::robot::ROBOT_DEFAULT_URL;
use orc_common::Secret;
use orc_proto::{ProviderName, ResourceUri};
use orc_provider_sdk::machine::{
    AdapterOptions, MachineAdapter, MachineKey, MachineProvider, OfferQuery, PowerAction,
    hostname_for,
};
use orc_provider_sdk::process::{self, OfferFormat, ZoneArgs};
use orc_provider_sdk::{HelloInfo, RunnerOptions, run_provider};

use crate::config::{RobotAccount, parse_account};
use crate::machines::{RobotMachines, SshOptions, reset_for};
use crate::script::BootstrapParams;
use crate::ssh::RusshExecutor;

#[derive(Debug, Parser)]
#[command(
    name = "orc-prov-robot",
    version,
    about = "The orc Hetzner Robot provider"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct AccountArgs {
    /// The account config as JSON text.
    #[arg(long, env = "ORC_PARAM_ACCOUNT", hide_env_values = true)]
    account: Option<String>,
    /// A file holding the account config as JSON.
    #[arg(long, env = "ORC_PARAM_ACCOUNT_FILE")]
    account_file: Option<PathBuf>,
    /// The Robot webservice endpoint.
    #[arg(long, env = "ORC_PARAM_API_URL", default_value = ROBOT_DEFAULT_URL)]
    api_url: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dial the zone and serve the account's servers.
    Serve {
        #[command(flatten)]
        account: AccountArgs,
        #[command(flatten)]
        zone: ZoneArgs,
        /// The provider's name at the zone.
        #[arg(long, env = "ORC_PARAM_NAME", default_value = "robot")]
        name: String,
    },
    /// Print the account's free servers as offers.
    Offers {
        #[command(flatten)]
        account: AccountArgs,
        /// Only this location (fsn1, nbg1, hel1).
        #[arg(long)]
        location: Option<String>,
        /// GPU servers instead of the others.
        #[arg(long)]
        gpu: bool,
    },
    /// Check the account config and print it normalised (exit 1 on any problem).
    Validate {
        #[command(flatten)]
        account: AccountArgs,
    },
    /// Operator actions on one machine, named by its key (the zone's node id).
    Machine {
        #[command(flatten)]
        account: AccountArgs,
        /// The machine's key.
        #[arg(long)]
        key: String,
        #[command(subcommand)]
        action: MachineAction,
    },
}

#[derive(Debug, Subcommand)]
enum MachineAction {
    /// Claim a given server (by number) for the key.
    Claim {
        #[arg(long)]
        server: u64,
    },
    /// Release the claim: deactivate rescue and clear the server's name.
    Release,
    /// on, off, graceful-off, reset, cycle or graceful-restart.
    Power { action: String },
    /// Activate the rescue system and reset into it.
    Rescue,
    /// Boot rescue unless it answers and print the machine's product UUID.
    Identify,
    /// Install the image, the first-boot script and the join token from the rescue system.
    #[command(
        after_help = "Example: ORC_PARAM_ACCOUNT_FILE=robot.json orc-prov-robot machine --key node-1 \
                      bootstrap --first-boot first-boot.sh --token-file - \
                      --ssh-key ~/.ssh/id_ed25519.pub < join-token"
    )]
    Bootstrap {
        /// File holding the single-use join token (`-`: stdin). Never on the command line.
        #[arg(long)]
        token_file: PathBuf,
        /// The script the installed system runs once, at its first boot (from the zone).
        #[arg(long, value_name = "FILE")]
        first_boot: PathBuf,
        /// An OpenSSH public key file whose keys the installed system's root accepts
        /// (repeatable; blank lines and `#` comments are skipped).
        #[arg(long = "ssh-key", value_name = "FILE")]
        ssh_keys: Vec<PathBuf>,
    },
}

fn read_account(args: &AccountArgs) -> anyhow::Result<RobotAccount> {
    let text = match (&args.account, &args.account_file) {
        (Some(_), Some(_)) => {
            bail!("give the account as ORC_PARAM_ACCOUNT or ORC_PARAM_ACCOUNT_FILE, not both")
        }
        (Some(text), None) => text.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the account file {}", path.display()))?,
        (None, None) => bail!("no account config: set ORC_PARAM_ACCOUNT or ORC_PARAM_ACCOUNT_FILE"),
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
        Command::Machine {
            account: args,
            key,
            action,
        } => {
            let account = read_account(&args)?;
            let machines = RobotMachines::new(account, args.api_url, SshOptions::default());
            let key = MachineKey::new(key).context("--key must not be empty")?;
            process::runtime()?.block_on(machine_action(&machines, &key, action))
        }
        Command::Validate { account } => match read_account(&account) {
            Ok(account) => {
                println!("{}", render_account(&account));
                Ok(())
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Offers {
            account: args,
            location,
            gpu,
        } => {
            let account = read_account(&args)?;
            let machines = RobotMachines::new(account, args.api_url, SshOptions::default());
            let query = OfferQuery {
                location,
                gpu,
                metal: true,
            };
            let offers = process::runtime()?
                .block_on(machines.offers(&query))
                .map_err(|e| anyhow::anyhow!("reading Robot offers: {e}"))?;
            process::write_offers(
                &mut std::io::stdout().lock(),
                &offers,
                OfferFormat::TabSeparated,
            )
            .context("writing the offers")
        }
        Command::Serve {
            account: args,
            zone,
            name,
        } => {
            let access = zone.access()?;
            let account = read_account(&args)?;
            serve(account, args.api_url, &zone.zone, &name, zone.slot, access)
        }
    }
}

async fn machine_action(
    machines: &RobotMachines,
    key: &MachineKey,
    action: MachineAction,
) -> anyhow::Result<()> {
    match action {
        MachineAction::Claim { server } => {
            let machine = machines
                .claim_server(key, RobotServerNumber(server))
                .await?;
            println!(
                "claimed server {} as {} ({}, {})",
                machine.instance_ref, machine.name, machine.plan, machine.location
            );
        }
        MachineAction::Release => {
            machines.delete(key).await?;
            println!("released {key}");
        }
        MachineAction::Power { action } => {
            let Some(power) = PowerAction::ALL.into_iter().find(|a| a.as_str() == action) else {
                bail!(
                    "power action {action:?} is not one of on, off, graceful-off, reset, cycle, graceful-restart"
                );
            };
            machines.power(key, power).await?;
            println!(
                "{key}: {power} sent as Robot reset {}",
                reset_for(power).as_str()
            );
        }
        MachineAction::Rescue => {
            machines.rescue(key).await?;
            println!("{key}: rescue activated, resetting into it");
        }
        MachineAction::Identify => {
            println!("{}", machines.identify(key, &RusshExecutor).await?);
        }
        MachineAction::Bootstrap {
            token_file,
            first_boot,
            ssh_keys,
        } => {
            let first_boot = std::fs::read_to_string(&first_boot).with_context(|| {
                format!("reading the first-boot script {}", first_boot.display())
            })?;
            let mut keys = Vec::new();
            for path in &ssh_keys {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the SSH key file {}", path.display()))?;
                keys.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(str::to_string),
                );
            }
            let token = if token_file == Path::new("-") {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("reading the join token from stdin")?;
                text
            } else {
                std::fs::read_to_string(&token_file).with_context(|| {
                    format!("reading the join token file {}", token_file.display())
                })?
            };
            let params = BootstrapParams {
                join_token: Secret::new(token.trim_end_matches(['\n', '\r'])),
                first_boot,
                hostname: hostname_for(key.as_str()),
                ssh_keys: keys,
            };
            let report = machines.bootstrap(key, &params, &RusshExecutor).await?;
            println!(
                "server {} installed (rescue {}), rebooting into it",
                report.server,
                if report.reused_rescue {
                    "reused"
                } else {
                    "booted"
                }
            );
        }
    }
    Ok(())
}

fn render_account(account: &RobotAccount) -> String {
    let mut lines = vec![
        format!("user: {}", account.user),
        format!("password: {}", account.password),
        format!("rescue_key_fingerprint: {}", account.rescue_key_fingerprint),
        format!("rescue_key: {}", account.rescue_key),
        format!("image: {}", account.image),
    ];
    for (name, spec) in account.product_table().iter() {
        lines.push(format!(
            "product {name}: {} vCPU, {} GiB, {} GiB disk, {}{}",
            spec.vcpus,
            spec.memory_gib,
            spec.disk_gib,
            spec.arch,
            spec.gpu
                .as_deref()
                .map(|g| format!(", {g}"))
                .unwrap_or_default()
        ));
    }
    lines.join("\n")
}

/// The hello a Robot provider replica sends.
pub fn hello_for(name: &str, account: &RobotAccount, slot: u32) -> anyhow::Result<HelloInfo> {
    Ok(HelloInfo {
        provider: ProviderName::new(name).context("ORC_PARAM_NAME must not be empty")?,
        resource_uri: ResourceUri::new(format!("urn:orc:robot:{}", account.user))
            .context("resource uri")?,
        replica: process::replica(slot),
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

fn serve(
    account: RobotAccount,
    api_url: String,
    zone: &str,
    name: &str,
    slot: u32,
    access: process::ZoneAccess,
) -> anyhow::Result<()> {
    process::init_stderr_tracing();
    let hello = hello_for(name, &account, slot)?;
    let runtime = process::runtime()?;
    let machines = RobotMachines::new(account, api_url, SshOptions::default());
    tracing::info!(zone, provider = name, "The Robot provider dials the zone");
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
