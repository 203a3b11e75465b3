//! The `orc-prov-partner` command line: operator commands over the partner's pure core, and
//! the provider process itself. The `orc-prov-partner` binary is a thin wrapper over
//! [`main_from`]; `orc` embeds the same entry point (`orc prov-partner …`) so that `orc up`
//! runs the partner even where only `orc` was built.
//!
//! - `validate`: check drafts of `regions`, `os_map`, `gateway` and `ptr_domain` with the
//!   partner's own parsers and print them normalised, or every error.
//! - `quote`: explain a quote with the params of this process's environment, against the
//!   live catalogs of the keyed clouds (read once, `ORC_<CLOUD>_ENDPOINT` honoured) or,
//!   with `--seed-dir`, against catalog snapshots read from seed files, offline.
//! - `bench-quote`: time the quote engine over the full seed catalogs and the built-in maps;
//!   the last line is `ns_per_quote N`.
//! - `serve --zone URL`: run the partner provider against a zone, and its admin page on
//!   `ORC_HTTP_ADMIN_ADDR` when the zone gives the slot one.
//!
//! A thin shell: parsing, quoting and rendering live in `orc-partner`; reading clouds and
//! the provider protocol in this crate's other modules.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clients::CloudClients;
use crate::env::ProcessEnv;
use crate::live::LiveCatalogs;
use crate::{PartnerOptions, PartnerProvider, ReplicaInfo};
use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use orc_common::{Architecture, Shape};
use orc_partner::catalog::Catalogs;
use orc_partner::ids::{ClassId, NodeId, OsId, PoolPath, SiteName, Timestamp};
use orc_partner::params::{Config, MapSource, load_config};
use orc_partner::quote::{Purpose, QuoteRequest, quote};
use orc_partner::validate::{Drafts, validate_drafts};
use orc_partner::{QuoteState, explain, seed};
use orc_provider_sdk::process::{self, ZoneArgs};
use orc_provider_sdk::{RunnerOptions, run_provider};

const DEFAULT_SEED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../emu/seed");

#[derive(Debug, Parser)]
#[command(name = "orc-prov-partner", version, about = "The orc partner provider")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check map drafts and print them normalised (exit 1 on any error).
    Validate {
        /// A `regions` draft: a file, or `-` for stdin.
        #[arg(long)]
        regions: Option<PathBuf>,
        /// An `os_map` draft: a file, or `-` for stdin.
        #[arg(long)]
        os_map: Option<PathBuf>,
        /// A `gateway` draft: a file, or `-` for stdin.
        #[arg(long)]
        gateway: Option<PathBuf>,
        /// A `ptr_domain` draft (the value itself).
        #[arg(long)]
        ptr_domain: Option<String>,
        /// Resolve drafts against the catalogs in this seed directory (warnings only).
        #[arg(long)]
        seed_dir: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Explain a quote with this environment's params against the live catalogs (or seeds).
    Quote {
        /// Region class id.
        #[arg(long)]
        class: String,
        /// vCPUs.
        #[arg(long)]
        cpu: u32,
        /// Memory in GiB.
        #[arg(long)]
        mem: u32,
        /// Architecture: x86_64 or arm64.
        #[arg(long, default_value = "x86_64")]
        arch: String,
        /// An extra disk in GiB (repeatable).
        #[arg(long = "disk")]
        disks: Vec<u32>,
        /// OS id.
        #[arg(long, default_value = "ubuntu-24.04")]
        os: String,
        /// Only this site may serve.
        #[arg(long, visible_alias = "pin")]
        site: Option<String>,
        /// Quote a site gateway instead of a tenant node.
        #[arg(long)]
        gateway: bool,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
        /// Quote offline against vultr-catalog.json and hetzner-cloud-catalog.json in this
        /// directory instead of reading the clouds.
        #[arg(long)]
        seed_dir: Option<PathBuf>,
    },
    /// Run the partner provider: dial the zone and answer its requests.
    Serve {
        #[command(flatten)]
        zone: ZoneArgs,
        /// Seconds between two catalog reads while serving.
        #[arg(long, default_value_t = 600)]
        refresh_secs: u64,
        /// Seconds between two inventory passes while serving (sites, nodes, reverse DNS).
        #[arg(long, env = "ORC_INVENTORY_SECS", default_value_t = 60)]
        inventory_secs: u64,
    },
    /// Time the quote engine; the last line is `ns_per_quote N`.
    BenchQuote {
        /// Directory holding vultr-catalog.json and hetzner-cloud-catalog.json.
        #[arg(long, default_value = DEFAULT_SEED_DIR)]
        seed_dir: PathBuf,
        /// Quotes to time.
        #[arg(long, default_value_t = 200_000)]
        iterations: u32,
    },
}

fn load_catalogs(dir: &Path, at: Timestamp) -> anyhow::Result<Catalogs> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let mut catalogs = Catalogs::new();
    catalogs.replace(seed::vultr(&read("vultr-catalog.json")?, at)?.snapshot);
    catalogs.replace(seed::hetzner(&read("hetzner-cloud-catalog.json")?, at)?.snapshot);
    Ok(catalogs)
}

fn read_draft(path: &Path, stdin_used: &mut bool) -> anyhow::Result<String> {
    if path == Path::new("-") {
        if *stdin_used {
            bail!("only one draft can come from stdin");
        }
        *stdin_used = true;
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    }
}

/// Runs the command line `args` (the first item is the program name, as in `std::env::args_os`).
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::parse_from(args).command {
        Command::Validate {
            regions,
            os_map,
            gateway,
            ptr_domain,
            seed_dir,
            json,
        } => {
            let mut stdin_used = false;
            let mut read = |p: Option<PathBuf>| -> anyhow::Result<Option<String>> {
                p.map(|p| read_draft(&p, &mut stdin_used)).transpose()
            };
            let drafts = Drafts {
                regions: read(regions)?,
                os_map: read(os_map)?,
                gateway: read(gateway)?,
                ptr_domain,
            };
            if drafts.regions.is_none()
                && drafts.os_map.is_none()
                && drafts.gateway.is_none()
                && drafts.ptr_domain.is_none()
            {
                bail!("give at least one of --regions, --os-map, --gateway, --ptr-domain");
            }
            let catalogs = match seed_dir {
                Some(dir) => load_catalogs(&dir, Timestamp::now())?,
                None => Catalogs::new(),
            };
            let report = validate_drafts(&drafts, &catalogs, &BTreeMap::new());
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.render());
            }
            if !report.is_valid() {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Quote {
            class,
            cpu,
            mem,
            arch,
            disks,
            os,
            site,
            gateway,
            json,
            seed_dir,
        } => {
            let config = match load_config(&ProcessEnv) {
                Ok(config) => config,
                Err(errors) => {
                    eprintln!("{errors}");
                    std::process::exit(2);
                }
            };
            let arch = match arch.as_str() {
                "x86_64" => Architecture::X86_64,
                "arm64" => Architecture::Arm64,
                other => bail!("--arch {other:?} must be x86_64 or arm64"),
            };
            let at = Timestamp::now();
            let catalogs = match seed_dir {
                Some(dir) => load_catalogs(&dir, at)?,
                None => read_live_catalogs(&config, at)?,
            };
            let request = QuoteRequest {
                node: NodeId::new("preview")?,
                pool: PoolPath::new("preview")?,
                purpose: if gateway {
                    Purpose::Gateway
                } else {
                    Purpose::Tenant
                },
                class: ClassId::new(class)?,
                shape: Shape {
                    vcpus: cpu,
                    memory_gib: mem,
                    arch,
                    disks_gib: disks,
                },
                os: OsId::new(os)?,
                pinned_site: site.map(SiteName::new).transpose()?,
                public: false,
                at,
            };
            let outcome = quote(&request, &config, &catalogs, &QuoteState::new());
            if json {
                println!("{}", explain::to_json(&outcome));
            } else {
                print!("{}", explain::render_table(&outcome));
            }
            Ok(())
        }
        Command::BenchQuote {
            seed_dir,
            iterations,
        } => bench_quote(&seed_dir, iterations),
        Command::Serve {
            zone,
            refresh_secs,
            inventory_secs,
        } => {
            let access = zone.access()?;
            serve(&zone.zone, refresh_secs, inventory_secs, zone.slot, access)
        }
    }
}

/// Reads every keyed cloud's catalog once; a cloud that cannot be read is reported on stderr
/// and shows as "no catalog" in the explanation.
fn read_live_catalogs(config: &Config, at: Timestamp) -> anyhow::Result<Catalogs> {
    let clients = CloudClients::from_config(config)?;
    let live = LiveCatalogs::new();
    let failures = process::runtime()?.block_on(live.refresh(&clients, config, at));
    for (cloud, summary) in failures {
        eprintln!("the {cloud} catalog could not be read: {summary}");
    }
    Ok(live.snapshot())
}

fn serve(
    zone: &str,
    refresh_secs: u64,
    inventory_secs: u64,
    slot: u32,
    access: process::ZoneAccess,
) -> anyhow::Result<()> {
    process::init_stderr_tracing();
    let config = match load_config(&ProcessEnv) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            std::process::exit(2);
        }
    };
    let options = PartnerOptions {
        refresh_interval: Duration::from_secs(refresh_secs.max(1)),
        ..PartnerOptions::default()
    };
    let replica = ReplicaInfo {
        host: process::host_name(),
        pid: std::process::id(),
        slot,
    };
    let admin_addr = match crate::env::admin_addr() {
        Ok(addr) => addr,
        Err(e) => {
            tracing::error!(error = %e, "The admin page's address cannot be read; no admin page");
            None
        }
    };
    let provider = PartnerProvider::new(config, options, replica)?;
    let admin_view = provider.admin_view();
    let zone_ca = access.ca.clone();
    tracing::info!(zone, "The partner provider dials the zone");
    let options = RunnerOptions {
        credentials: access.credentials,
        zone_ca: access.ca,
        inventory_interval: Some(Duration::from_secs(inventory_secs.max(1))),
        ..RunnerOptions::default()
    };
    process::runtime()?.block_on(async move {
        let _admin = crate::admin::launch(admin_addr, admin_view, zone_ca.as_ref()).await;
        run_provider(zone, Arc::new(provider), options).await
    })?;
    Ok(())
}

fn bench_quote(seed_dir: &Path, iterations: u32) -> anyhow::Result<()> {
    let source = MapSource::new()
        .param("partner_id", "bench")
        .param("hetzner_api_token", "bench-token")
        .param("hetzner_owner_tag", "orc-partner-hetzner")
        .param("hetzner_exchange_rate", "1.08")
        .param("vultr_api_key", "bench-key")
        .param("vultr_owner_tag", "orc-partner-vultr");
    let config = load_config(&source).map_err(|e| anyhow::anyhow!("{e}"))?;
    let at = Timestamp::from_unix_secs(1_800_000_000);
    let catalogs = load_catalogs(seed_dir, at)?;
    let request = QuoteRequest {
        node: NodeId::new("bench-node")?,
        pool: PoolPath::new("bench-pool")?,
        purpose: Purpose::Tenant,
        class: ClassId::new("eu-central")?,
        shape: Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Architecture::X86_64,
            disks_gib: vec![],
        },
        os: OsId::new("ubuntu-24.04")?,
        pinned_site: None,
        public: false,
        at,
    };
    let state = QuoteState::new();
    let plans: usize = catalogs.iter().map(|s| s.plans.len()).sum();
    let images: usize = catalogs.iter().map(|s| s.images.len()).sum();
    let warm = quote(&request, &config, &catalogs, &state);
    let winner = warm
        .offer()
        .map_or("refusal".to_string(), |o| o.site.to_string());
    println!(
        "catalogs: {plans} plans, {images} images; request: eu-central 2 vCPU · 4 GiB ubuntu-24.04"
    );
    println!("winner: {winner}");
    for _ in 0..iterations.min(10_000) {
        std::hint::black_box(quote(
            std::hint::black_box(&request),
            &config,
            &catalogs,
            &state,
        ));
    }
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(quote(
            std::hint::black_box(&request),
            &config,
            &catalogs,
            &state,
        ));
    }
    let elapsed = start.elapsed();
    let ns = elapsed.as_nanos() / u128::from(iterations.max(1));
    println!("iterations {iterations}");
    println!("ns_per_quote {ns}");
    Ok(())
}
