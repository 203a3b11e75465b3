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

use std::collections::BTreeMap;
#[cfg(test)]
use std::collections::BTreeSet;
use std::io::IsTerminal as _;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use orc_emu::{Account, Accounts, ClockMode, EmuConfig, RunningEmulators, Timings};
use orc_zone::apps::AppsConfig;
#[cfg(test)]
use orc_zone::model::Endpoint;
use orc_zone::model::{AppSpec, Name, NodeState, Pool, SensitiveParams};
use orc_zone::store::Store;
use orc_zone_api_types::views::{
    AppTagView, ChangeScope, CreatePool, PoolView, ProviderView, ReconfigurePool, SetPricing,
    ShapeView,
};
use orc_zone_model::registry::{AppManifest, PackageRef, Platform};

use crate::client::{CallError, Client, segment};
use crate::commands::app::{BinaryArg, publish};
use orc_zone::zone::{Zone, ZoneConfig};
use tokio::signal::unix::{SignalKind, signal};

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
const EMULATOR_TOKEN: &str = "orc-up-emulator-token";
/// A second key of the same emulated account, for trying a key rotation.
pub const EMULATOR_ROTATED_TOKEN: &str = "orc-up-emulator-token-2";

/// Arguments of `orc up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the zone keeps its files [default: $ORC_DATA_DIR, else ~/.local/share/orc].
    #[arg(long, env = "ORC_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where the HTTP API listens.
    #[arg(long, default_value = orc_zone::zone::DEFAULT_HTTP_ADDR)]
    pub http: SocketAddr,
    /// Where providers dial in (gRPC).
    #[arg(long, default_value = orc_zone::zone::DEFAULT_GRPC_ADDR)]
    pub grpc: SocketAddr,
    #[command(flatten)]
    pub tls: crate::TlsArgs,
    #[command(flatten)]
    pub listen: crate::ListenArgs,
    #[command(flatten)]
    pub edge: crate::EdgeArgs,
    #[command(flatten)]
    pub mesh: crate::MeshArgs,
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

impl Up {
    /// Starts the emulators, the zone and the partner pool, reporting each step.
    pub async fn start(args: &UpArgs, report: &dyn Fn(&str)) -> anyhow::Result<Up> {
        let data_dir = args
            .data_dir
            .clone()
            .unwrap_or_else(orc_zone::zone::default_data_dir);
        check_data_dir(&data_dir)?;
        let (partner, partner_args) = partner_binary(args.partner_bin.as_deref())?;
        for (what, addr) in [
            ("the zone API", args.http),
            ("the provider endpoint", args.grpc),
            ("the Hetzner Cloud emulator", args.hetzner_emu),
            ("the Vultr emulator", args.vultr_emu),
            ("the Robot emulator", args.robot_emu),
        ] {
            check_port(what, addr)?;
        }
        if !args.edge.no_edge && !args.tls.plain {
            check_port("the access edge", args.edge.edge)?;
        }

        let fabric = if args.netns {
            report("building the emulated internet (network namespaces)");
            let binary = std::env::current_exe().context("cannot find this orc binary")?;
            let fabric = orc_emu::netns::Fabric::create(Some(binary))
                .context("--netns (materialised emulators)")?;
            Some(std::sync::Arc::new(fabric))
        } else {
            None
        };

        report("starting the cloud emulators");
        let emulators = EmuConfig {
            hetzner: Some(args.hetzner_emu),
            vultr: Some(args.vultr_emu),
            robot: Some(args.robot_emu),
            accounts: Accounts::new(vec![
                Account {
                    name: EMULATOR_ACCOUNT.to_string(),
                    secret: EMULATOR_TOKEN.to_string(),
                },
                // A second key of the same account, so a key rotation can be tried.
                Account {
                    name: EMULATOR_ACCOUNT.to_string(),
                    secret: EMULATOR_ROTATED_TOKEN.to_string(),
                },
            ]),
            clock_mode: ClockMode::Auto,
            timings: Timings::realistic(),
            hetzner_options: Default::default(),
            fabric: fabric.clone(),
        }
        .start()
        .await
        .context("cannot start the cloud emulators")?;
        let (Some(hetzner_url), Some(vultr_url), Some(robot_url)) = (
            emulators.hetzner_url(),
            emulators.vultr_url(),
            emulators.robot_url(),
        ) else {
            bail!("the cloud emulators started without their URLs");
        };

        report("preparing the emulated accounts");
        let secrets = Secrets::prepare(&data_dir)?;
        let rescue_fingerprint = secrets
            .register_rescue_key(&robot_url)
            .await
            .context("cannot store the rescue key in the Robot emulator")?;
        let static_hosts = match &fabric {
            Some(fabric) => {
                report("starting the static hosts (namespaces with sshd)");
                let (fabric, public) = (fabric.clone(), secrets.static_public.clone());
                let hosts = tokio::task::spawn_blocking(move || {
                    orc_emu::static_hosts::StaticHosts::start(fabric, &STATIC_HOSTS, &[public])
                })
                .await
                .context("the static hosts' start was cancelled")?
                .context("cannot start the static hosts")?;
                Some(hosts)
            }
            None => None,
        };
        let mut standalone = standalone_providers(
            &secrets,
            &StandaloneUrls {
                hetzner: hetzner_url.clone(),
                vultr: vultr_url.clone(),
                robot: robot_url,
                // Without --netns a Robot server is a record only, with nothing to SSH into:
                // its deploys claim it and leave the install to the operator.
                robot_installs: fabric.is_some(),
            },
            &rescue_fingerprint,
        );
        if let Some(hosts) = &static_hosts {
            standalone.push(static_provider(&secrets, hosts));
        }

        report("starting the zone");
        let mut apps = AppsConfig::default();
        // Where the partner finds the emulated clouds: the operator's environment for its
        // slots, not a param of its package.
        apps.env.insert(
            PARTNER_APP.to_string(),
            BTreeMap::from([
                ("ORC_HETZNER_ENDPOINT".to_string(), hetzner_url),
                ("ORC_VULTR_ENDPOINT".to_string(), vultr_url),
                // Sites open and close on screen within seconds, not a minute.
                (
                    "ORC_INVENTORY_SECS".to_string(),
                    UP_INVENTORY_SECS.to_string(),
                ),
            ]),
        );
        let mut published = vec![Published {
            pool: PARTNER_POOL,
            size: PARTNER_REPLICAS,
            path: partner,
            manifest: manifest_running(partner_manifest(), partner_args),
            app: AppSpec {
                digest: None,
                ..partner_app("")
            },
        }];
        for provider in &standalone {
            let (path, args) = provider_binary(
                provider.binary,
                provider.embedded_arg,
                args.providers_bin.as_deref(),
            )?;
            published.push(Published {
                pool: provider.name,
                size: 1,
                path,
                manifest: manifest_running(standalone_manifest(provider.binary)?, args),
                app: provider.app.clone(),
            });
        }
        let mut config = ZoneConfig::new(&data_dir);
        config.http_addr = args.http;
        config.grpc_addr = args.grpc;
        config.tls = args.tls.config();
        config.limits = args.listen.limits();
        config.edge = args.edge.config()?;
        config.web_url = args.edge.web_url.clone();
        config.mesh = args.mesh.options()?;
        // The emulators' inventory is complete and read every few seconds: a node missing
        // from it is gone, and its slot need not wait the minutes a real cloud's may.
        config.reconcile.lost_replace_after = UP_LOST_REPLACE_AFTER;
        config.apps = apps;
        config.agent_binary = std::env::current_exe().ok();
        if let Some(fabric) = &fabric {
            // Nodes reach the zone through the fabric's uplink, at the host's end of it; a
            // node whose agent does not join is replaced, as on a real cloud.
            config.grpc_addr = SocketAddr::from((fabric.host_address(), args.grpc.port()));
            config.reconcile.join_grace = Some(Duration::from_secs(600));
            config.mesh.reserved.push((
                "the emulated internet".to_string(),
                orc_emu::netns::PUBLIC_RANGE
                    .parse()
                    .expect("the emulated internet is a CIDR"),
            ));
        }
        let mut zone_config = config.clone();
        let zone = Zone::start(config)
            .await
            .with_context(|| format!("cannot start the zone in {}", data_dir.display()))?;
        zone_config.http_addr = zone.http_addr();
        zone_config.grpc_addr = zone.grpc_addr();
        if let (Some(edge), Some(addr)) = (zone_config.edge.as_mut(), zone.edge_addr()) {
            edge.addr = addr;
        }

        // From here on, as an operator would: through the zone's API with the admin token.
        let client = match zone_client(&zone) {
            Ok(client) => client,
            Err(error) => {
                zone.shutdown().await;
                return Err(error);
            }
        };
        // The partner's params name the zone's web URL (its access_keys_url).
        published[0].app = partner_app(zone.web_url());
        let mut pool = None;
        let mut pool_created = false;
        for app in &published {
            let done = async {
                report(&format!("publishing {}", app.app.package));
                if !app.publish(&client).await? {
                    report(&format!("keeping the pushed {}", app.app.package));
                }
                report(&format!("creating pool sys/sys/{}", app.pool));
                ensure_app_pool(&client, app).await
            }
            .await;
            match done {
                Ok((view, created)) if app.pool == PARTNER_POOL => {
                    pool_created = created;
                    pool = Some(view);
                }
                Ok(_) => {}
                Err(error) => {
                    zone.shutdown().await;
                    return Err(error);
                }
            }
        }
        let sys: Name = "sys".parse().expect("sys is a name");
        let pool = match pool {
            Some(view) => zone
                .store()
                .pool_by_path(&sys, &sys, &name(&view.name)?)
                .await
                .context("cannot read pool sys/sys/partner back")?,
            None => bail!("pool sys/sys/partner was not made"),
        };

        Ok(Up {
            zone,
            client,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            data_dir,
            pool,
            pool_created,
            partner_running: 0,
            partner_registered: false,
            partner_priced: false,
            standalone: standalone.iter().map(|p| p.name).collect(),
        })
    }

    /// Waits up to `wait` for the partner's slots to run and its provider to register,
    /// reporting progress; what it saw shows in [`Up::summary`].
    pub async fn wait_for_partner(&mut self, wait: Duration, report: &dyn Fn(&str)) {
        let store = self.zone.store().clone();
        let deadline = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < deadline {
            self.partner_running = running_nodes(&store, &self.pool).await;
            self.partner_registered = store.provider_by_resource(PARTNER_RESOURCE).await.is_ok();
            report(&format!(
                "waiting for the partner ({}/{} slots running, {})",
                self.partner_running,
                self.pool.size,
                if self.partner_registered {
                    "registered"
                } else {
                    "not registered yet"
                }
            ));
            if self.partner_registered && !self.partner_priced {
                match widen_and_price_partner(&self.client).await {
                    Ok(()) => self.partner_priced = true,
                    Err(error) => {
                        tracing::warn!(error = %format!("{error:#}"), "cannot widen the partner or set its markup yet")
                    }
                }
            }
            if self.partner_running >= self.pool.size as usize
                && self.partner_registered
                && self.partner_priced
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// What `orc up` prints once everything is up. A new admin token is shown only when the
    /// text goes `to_terminal`: printed into a log or a pipe it would outlive the session.
    pub fn summary(&self, to_terminal: bool) -> String {
        let mut text = String::new();
        let url = self.zone.url();
        text.push_str(&format!("zone      {url}\n"));
        text.push_str(&format!("data dir  {}\n", self.data_dir.display()));
        match self.zone.ca_file() {
            Some(ca) => text.push_str(&format!("CA        {} (clients pin it)\n", ca.display())),
            None => text.push_str("TLS       off (--plain, loopback only)\n"),
        }
        match self.zone.edge_url() {
            Some(edge) => text.push_str(&format!(
                "edge      {edge}/ (sign in with the token; the partner's admin page is \
                 {})\n",
                partner_admin_url(edge)
            )),
            None => text.push_str("edge      off\n"),
        }
        if self.zone.admin_token_is_new() && to_terminal {
            text.push_str(&format!(
                "token     {}   (shown once; kept in {})\n",
                self.zone.admin_token().expose(),
                self.data_dir
                    .join(orc_zone::zone::ADMIN_TOKEN_FILE)
                    .display()
            ));
        } else {
            text.push_str(&format!(
                "token     in {}\n",
                self.data_dir
                    .join(orc_zone::zone::ADMIN_TOKEN_FILE)
                    .display()
            ));
        }
        if let Some(fabric) = &self.fabric {
            text.push_str(&format!(
                "netns     servers are namespaces {}-* on {}/{}; they reach the zone at {}, the echo host is {}\n",
                fabric.plan().prefix(),
                fabric.plan().public_net().0,
                fabric.plan().public_net().1,
                fabric.host_address(),
                fabric.echo_address()
            ));
        }
        if let Some(hosts) = &self.static_hosts {
            let list: Vec<String> = hosts
                .hosts()
                .iter()
                .map(|h| format!("{} {}", h.name, h.address))
                .collect();
            text.push_str(&format!(
                "static    hosts {} (namespaces with sshd; location {STATIC_LOCATION}, plan {STATIC_PLAN})\n",
                list.join(", ")
            ));
        }
        if let Some(h) = &self.emulators.hetzner {
            text.push_str(&format!("hetzner   {} (emulated)\n", h.root_url()));
        }
        if let Some(v) = &self.emulators.vultr {
            text.push_str(&format!("vultr     {} (emulated)\n", v.root_url()));
        }
        if let Some(r) = &self.emulators.robot {
            text.push_str(&format!("robot     {} (emulated)\n", r.root_url()));
        }
        text.push_str(&format!(
            "partner   pool sys/sys/partner on core, {}/{PARTNER_REPLICAS} slots running{}; \
             provider {}\n",
            self.partner_running,
            if self.pool_created { " (created)" } else { "" },
            match (self.partner_registered, self.partner_priced) {
                (true, true) => "registered, zone scope, priced (a markup strategy is set)",
                (true, false) => "registered",
                (false, _) => "not registered yet",
            }
        ));
        if self.partner_running < PARTNER_REPLICAS as usize || !self.partner_registered {
            text.push_str("          still starting: see `orc logs sys/partner`\n");
        }
        text.push_str(&format!(
            "one-cloud {} (pools sys/sys/<name> on core, one slot each; secrets in {})\n",
            self.standalone.join(", "),
            self.data_dir.join("secrets").display()
        ));
        let data = shell_word(&self.data_dir.to_string_lossy());
        text.push_str(&format!(
            "\nIn another terminal (the CLI finds this zone through ORC_DATA_DIR):\n\
             \x20 export ORC_DATA_DIR={data}\n\
             \x20 orc providers\n\
             \x20 orc logs sys/partner --level debug\n\
             \x20 orc endpoints sys/sys/partner\n\
             \x20 orc quote sys/sys --provider partner --class eu-central --cpu 2 --mem 4 --os ubuntu-24.04\n\
             \x20 orc pool create sys/sys/web --provider partner --class eu-central --cpu 2 --mem 4 --os ubuntu-24.04 --size 2 --wait\n\
             \x20 orc nodes sys/sys/web\n\
             \x20 orc sites\n\
             \x20 orc pool create sys/sys/api --provider hetzner --location fsn1 --plan cx23 --cpu 2 --mem 4 --os ubuntu-24.04 --size 1 --wait\n\
             \x20 orc pool resize sys/sys/web 0\n\
             \nCtrl-C stops everything; `orc up` again resumes. `kill -HUP {pid}` restarts the zone alone.\n",
            pid = std::process::id()
        ));
        text
    }

    /// Stops the zone (its app slots with it) and starts it again on the same data dir and
    /// ports, as an operator restarts a zone: the emulators, their servers and the static
    /// hosts stay, the providers come back as the zone's app slots, and the nodes' agents
    /// dial again by themselves (`kill -HUP` on `orc up`).
    pub async fn restart_zone(self) -> anyhow::Result<Up> {
        let Up {
            zone,
            client: _,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            data_dir: dir,
            pool,
            pool_created,
            partner_running,
            partner_registered,
            partner_priced,
            standalone,
        } = self;
        zone.shutdown().await;
        let zone = Zone::start(zone_config.clone())
            .await
            .with_context(|| format!("cannot start the zone in {}", dir.display()))?;
        let client = zone_client(&zone)?;
        Ok(Up {
            zone,
            client,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            data_dir: dir,
            pool,
            pool_created,
            partner_running,
            partner_registered,
            partner_priced,
            standalone,
        })
    }

    /// Stops the zone (its app slots first) and the emulators.
    pub async fn shutdown(self) {
        self.zone.shutdown().await;
        drop(self.emulators);
        if let Some(hosts) = self.static_hosts {
            tokio::task::spawn_blocking(move || drop(hosts)).await.ok();
        }
        if let Some(fabric) = self.fabric {
            // The emulators' tasks hold it too; they let go as their runtime winds down.
            tokio::task::spawn_blocking(move || drop(fabric)).await.ok();
        }
    }
}

fn shell_word(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn check_data_dir(dir: &Path) -> anyhow::Result<()> {
    // Created private (0700); one that other users can read is refused, naming the fix.
    orc_zone::zone::prepare_data_dir(dir)?;
    let probe = dir.join(".orc-up-probe");
    std::fs::write(&probe, b"")
        .with_context(|| format!("the data dir {} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn check_port(what: &str, addr: SocketAddr) -> anyhow::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    TcpListener::bind(addr).map(drop).with_context(|| {
        format!(
            "{what} cannot listen on {addr}: the port is in use (another `orc up`?) or not \
             allowed; pick another with the matching --option of `orc up`"
        )
    })
}

/// How to run the partner: `--partner-bin`, else `orc-prov-partner` next to `orc`, else `orc`
/// itself, which embeds the partner (`orc prov-partner serve`).
pub(crate) fn partner_binary(given: Option<&Path>) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let serve = || vec!["serve".to_string()];
    if let Some(path) = given {
        if path.is_file() {
            return Ok((path.to_path_buf(), serve()));
        }
        bail!("the partner binary {} does not exist", path.display());
    }
    if let Some(path) = next_to_exe(PARTNER_APP) {
        return Ok((path, serve()));
    }
    let orc = std::env::current_exe().context("cannot find the running orc executable")?;
    Ok((
        orc,
        vec![crate::EMBEDDED_PARTNER.to_string(), "serve".to_string()],
    ))
}

/// How to run a standalone provider: `--providers-bin BIN` (as `BIN prov-<name> serve`), else
/// `orc-prov-<name>` next to `orc`, else `orc` itself, which embeds it.
pub(crate) fn provider_binary(
    binary: &str,
    embedded_arg: &str,
    given: Option<&Path>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let embedded = || vec![embedded_arg.to_string(), "serve".to_string()];
    if let Some(path) = given {
        if path.is_file() {
            return Ok((path.to_path_buf(), embedded()));
        }
        bail!("the providers binary {} does not exist", path.display());
    }
    if let Some(path) = next_to_exe(binary) {
        return Ok((path, vec!["serve".to_string()]));
    }
    let orc = std::env::current_exe().context("cannot find the running orc executable")?;
    Ok((orc, embedded()))
}

/// `name` in the directory of the running executable, or in its parent when that is a test
/// binary's `target/*/deps`, as `cargo build` leaves them.
fn next_to_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent().filter(|_| dir.ends_with("deps"))]
        .into_iter()
        .flatten()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// An app `orc up` publishes to the zone's registry and runs as pool `sys/sys/<pool>`.
#[derive(Debug, Clone)]
struct Published {
    pool: &'static str,
    size: u32,
    /// The binary for this host's platform.
    path: PathBuf,
    /// The manifest, with the arguments `path` runs with.
    manifest: AppManifest,
    /// The package, the params and the sensitive params of its pool.
    app: AppSpec,
}

impl Published {
    /// Publishes the binary and the manifest as the pool's package (the registry keeps a
    /// binary it holds already without sending it again), versioned `<version>+local`. A tag
    /// an operator pushed (its version is not `+local`) is kept: the pool runs what was
    /// pushed, and this returns `false`.
    async fn publish(&self, client: &Client) -> anyhow::Result<bool> {
        let reference: PackageRef = self
            .app
            .package
            .parse()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(tag) = tagged(client, &reference).await?
            && !tag.version.ends_with(LOCAL_VERSION)
        {
            tracing::info!(package = %reference, version = %tag.version, "keeping the pushed package");
            return Ok(false);
        }
        let mut manifest = self.manifest.clone();
        manifest.version = format!("{}{LOCAL_VERSION}", manifest.version);
        let platform = Platform::host()
            .context("this machine's platform is neither linux/amd64 nor linux/arm64")?;
        let binary = BinaryArg {
            platform,
            path: self.path.clone(),
        };
        publish(client, &reference, &[binary], manifest, &|line| {
            tracing::info!("{line}");
        })
        .await?;
        Ok(true)
    }
}

/// What the version of a package `orc up` published from local binaries ends with.
pub const LOCAL_VERSION: &str = "+local";

/// The partner's manifest, as `scripts/package-partner-provider.sh` publishes it.
pub fn partner_manifest() -> AppManifest {
    AppManifest::from_json(include_bytes!("../../partner-provider/orc-app.json"))
        .expect("the partner's manifest parses (a test checks it)")
}

/// The manifest of a standalone provider's binary.
fn standalone_manifest(binary: &str) -> anyhow::Result<AppManifest> {
    let text: &[u8] = match binary {
        "orc-prov-hetzner" => include_bytes!("../../prov-hetzner/orc-app.json"),
        "orc-prov-vultr" => include_bytes!("../../prov-vultr/orc-app.json"),
        "orc-prov-robot" => include_bytes!("../../prov-robot/orc-app.json"),
        "orc-prov-static" => include_bytes!("../../prov-static/orc-app.json"),
        other => bail!("no manifest for {other}"),
    };
    AppManifest::from_json(text).with_context(|| format!("the manifest of {binary}"))
}

/// `manifest`, with the arguments the binary `orc up` publishes runs with (`orc` itself
/// embeds every provider under a subcommand of its own).
fn manifest_running(mut manifest: AppManifest, args: Vec<String>) -> AppManifest {
    manifest.args = args;
    manifest
}

/// A client of the zone's API with its admin token, trusting its CA.
fn zone_client(zone: &Zone) -> anyhow::Result<Client> {
    let ca = match zone.ca_file() {
        Some(path) => Some(orc_tls::PinnedCa::from_file(&path)?),
        None => None,
    };
    Client::new(
        &zone.url(),
        Some(zone.admin_token().expose().to_string()),
        ca.as_ref(),
    )
}

/// The emulated accounts' secrets, in `<data dir>/secrets/` (directory 0700, files 0600).
#[derive(Debug)]
struct Secrets {
    /// The Robot rescue key's private half, made on the first `orc up`.
    rescue_key_file: PathBuf,
    /// Its public half, as stored in Robot.
    rescue_public: String,
    /// The key that lets the static provider into `--netns` mode's static hosts.
    static_key_file: PathBuf,
    static_public: String,
}

impl Secrets {
    fn prepare(data_dir: &Path) -> anyhow::Result<Secrets> {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let dir = data_dir.join("secrets");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
        let write = |path: &Path, text: &str| -> anyhow::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            file.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))
        };
        // An SSH key pair, made once: its private file and its public line.
        let pair = |name: &str, comment: &str| -> anyhow::Result<(PathBuf, String)> {
            let private_file = dir.join(name);
            let public_file = dir.join(format!("{name}.pub"));
            let public = match std::fs::read_to_string(&public_file) {
                Ok(public) if private_file.is_file() => public.trim().to_string(),
                _ => {
                    let key = orc_prov_robot::rescue_key::generate(comment)?;
                    write(&private_file, &key.private_openssh)?;
                    write(&public_file, &format!("{}\n", key.public_openssh))?;
                    key.public_openssh
                }
            };
            Ok((private_file, public))
        };
        let (rescue_key_file, rescue_public) = pair("robot-rescue-key", "orc-up-rescue")?;
        let (static_key_file, static_public) = pair("static-ssh-key", "orc-up-static")?;
        Ok(Secrets {
            rescue_key_file,
            rescue_public,
            static_key_file,
            static_public,
        })
    }

    /// Stores the rescue key's public half in the (fresh) Robot emulator; returns the
    /// fingerprint Robot names it by.
    async fn register_rescue_key(&self, robot_url: &str) -> anyhow::Result<String> {
        let client = orc_cloud::RobotClient::new(
            orc_cloud::RobotConfig::new(EMULATOR_ACCOUNT, EMULATOR_TOKEN).with_base_url(robot_url),
        )?;
        let key = client
            .create_key("orc-up-rescue", &self.rescue_public)
            .await?;
        Ok(key.fingerprint.to_string())
    }
}

/// Where the standalone providers' emulators are.
#[derive(Debug)]
struct StandaloneUrls {
    hetzner: String,
    vultr: String,
    robot: String,
    /// Whether the Robot provider installs its servers at deploy (`"install": "deploy"`).
    robot_installs: bool,
}

/// A standalone provider `orc up` runs: pool `sys/sys/<name>` on `core`, one slot.
#[derive(Debug, Clone)]
struct Standalone {
    /// The provider's (and its pool's) name.
    name: &'static str,
    /// Its binary, also its app name.
    binary: &'static str,
    /// The argument under which `orc` embeds it.
    embedded_arg: &'static str,
    app: AppSpec,
}

fn standalone_providers(
    secrets: &Secrets,
    urls: &StandaloneUrls,
    rescue_fingerprint: &str,
) -> Vec<Standalone> {
    // The accounts name their secrets by reference: `param://…`, sensitive params the zone
    // keeps sealed and hands each slot as files in its own runtime dir (a slot cannot read
    // the data dir, where `secrets/` is).
    let token = "param://emulator_token".to_string();
    let rescue_key = std::fs::read_to_string(&secrets.rescue_key_file).unwrap_or_default();
    let app = |binary: &str, name: &str, api_url: &str, account: serde_json::Value| {
        let mut sensitive =
            BTreeMap::from([("emulator_token".to_string(), EMULATOR_TOKEN.to_string())]);
        if binary == "orc-prov-robot" {
            sensitive.insert("rescue_key".to_string(), rescue_key.clone());
        }
        AppSpec {
            package: format!("sys/{binary}:default"),
            digest: None,
            params: BTreeMap::from([
                ("name".to_string(), name.to_string()),
                ("api_url".to_string(), api_url.to_string()),
                ("account".to_string(), account.to_string()),
            ]),
            sensitive: SensitiveParams(sensitive),
        }
    };
    vec![
        Standalone {
            name: "hetzner",
            binary: "orc-prov-hetzner",
            embedded_arg: "prov-hetzner",
            app: app(
                "orc-prov-hetzner",
                "hetzner",
                &urls.hetzner,
                serde_json::json!({"token": token, "location": "fsn1"}),
            ),
        },
        Standalone {
            name: "vultr",
            binary: "orc-prov-vultr",
            embedded_arg: "prov-vultr",
            app: app(
                "orc-prov-vultr",
                "vultr",
                &urls.vultr,
                serde_json::json!({"api_key": token, "region": "fra"}),
            ),
        },
        Standalone {
            name: "robot",
            binary: "orc-prov-robot",
            embedded_arg: "prov-robot",
            app: app(
                "orc-prov-robot",
                "robot",
                &urls.robot,
                serde_json::json!({
                    "user": EMULATOR_ACCOUNT,
                    "password": token,
                    "rescue_key_fingerprint": rescue_fingerprint,
                    "rescue_key": "param://rescue_key",
                    "install": if urls.robot_installs { "deploy" } else { "operator" },
                }),
            ),
        },
    ]
}

/// The static hosts `orc up --netns` starts.
pub const STATIC_HOSTS: [&str; 2] = ["static-1", "static-2"];
/// Their location and plan (2 vCPU, 4 GiB each).
pub const STATIC_LOCATION: &str = "lab";
pub const STATIC_PLAN: &str = "lab-2c4g";

/// The static provider over `--netns` mode's static hosts: pool `sys/sys/static`, its SSH
/// key a sensitive param.
fn static_provider(secrets: &Secrets, hosts: &orc_emu::static_hosts::StaticHosts) -> Standalone {
    let list: Vec<serde_json::Value> = hosts
        .hosts()
        .iter()
        .map(|h| {
            serde_json::json!({
                "name": h.name,
                "address": h.address.to_string(),
                "host_key": h.host_key,
                "location": STATIC_LOCATION,
                "plan": STATIC_PLAN,
                "vcpus": 2,
                "memory_gib": 4,
                "hourly": "0.002",
            })
        })
        .collect();
    let config = serde_json::json!({
        "ssh_key": "param://ssh_key",
        "locations": {STATIC_LOCATION: "The emulated lab (orc up --netns)"},
        "hosts": list,
    });
    let key = std::fs::read_to_string(&secrets.static_key_file).unwrap_or_default();
    Standalone {
        name: "static",
        binary: "orc-prov-static",
        embedded_arg: "prov-static",
        app: AppSpec {
            package: "sys/orc-prov-static:default".to_string(),
            digest: None,
            params: BTreeMap::from([
                ("name".to_string(), "static".to_string()),
                ("hosts".to_string(), config.to_string()),
            ]),
            sensitive: SensitiveParams(BTreeMap::from([("ssh_key".to_string(), key)])),
        },
    }
}

/// US dollars per euro for the emulated Hetzner account (an example figure, not a live rate).
pub const DEMO_EUR_RATE: &str = "1.08";

/// The params the partner declares sensitive: its cloud keys, as its manifest says.
#[cfg(test)]
fn partner_sensitive_params() -> BTreeSet<String> {
    partner_manifest().sensitive_params()
}

/// The partner's admin page: its one http endpoint, which the access edge serves as
/// `sys--partner.sys.<domain>`; its manifest declares it.
#[cfg(test)]
fn partner_endpoints() -> Vec<Endpoint> {
    partner_manifest()
        .endpoints
        .into_iter()
        .map(|e| Endpoint {
            name: e.name,
            protocol: e.protocol,
            port: e.port,
        })
        .collect()
}

/// The admin page's URL at an edge whose own URL is `edge` (`https://orc.localhost:7443`).
pub fn partner_admin_url(edge: &str) -> String {
    match edge.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://sys--{PARTNER_POOL}.sys.{rest}/"),
        None => edge.to_string(),
    }
}

/// The partner's app spec for the emulators. `zone_url` is the zone's web URL: an https one
/// opens the admin page to assertions checked against its JWKS; a plain zone keeps it closed.
pub fn partner_app(zone_url: &str) -> AppSpec {
    let mut params = BTreeMap::from([
        ("partner_id".to_string(), "orc-up".to_string()),
        (
            "hetzner_owner_tag".to_string(),
            "orc-up-hetzner".to_string(),
        ),
        ("vultr_owner_tag".to_string(), "orc-up-vultr".to_string()),
        // The emulated Hetzner project bills in euros, like a real one: without a rate its
        // offers would stay unpriced and every node would go to Vultr.
        (
            "hetzner_exchange_rate".to_string(),
            DEMO_EUR_RATE.to_string(),
        ),
    ]);
    if zone_url.starts_with("https://") {
        params.insert(
            "access_keys_url".to_string(),
            format!("{zone_url}{}", orc_access::JWKS_PATH),
        );
    }
    let sensitive = BTreeMap::from([
        ("hetzner_api_token".to_string(), EMULATOR_TOKEN.to_string()),
        ("vultr_api_key".to_string(), EMULATOR_TOKEN.to_string()),
    ]);
    AppSpec {
        package: PARTNER_PACKAGE.to_string(),
        digest: None,
        params,
        sensitive: SensitiveParams(sensitive),
    }
}

fn name(text: &str) -> anyhow::Result<Name> {
    text.parse()
        .with_context(|| format!("{text:?} is not a valid name"))
}

/// Finds pool `sys/sys/<pool>` through the API, or requests it on `core` with its size,
/// running its package with its params. A pool that exists keeps its size; it is
/// reconfigured (a rolling replacement) when the package's tag now names another digest or
/// its params differ. Returns the pool and whether it was created.
async fn ensure_app_pool(client: &Client, app: &Published) -> anyhow::Result<(PoolView, bool)> {
    let pools = "/api/orgs/sys/projects/sys/pools";
    let url = format!("{pools}/{}", segment(app.pool));
    let existing: Result<PoolView, CallError> = client.get(&url).await;
    match existing {
        Ok(view) => {
            let digest = tagged_digest(client, &app.app.package).await?;
            let current = view.app.as_ref();
            let sensitive: Vec<String> = app.app.sensitive.0.keys().cloned().collect();
            let same = current.is_some_and(|a| {
                a.package == app.app.package
                    && a.digest == digest
                    && a.params == app.app.params
                    && a.sensitive_params == sensitive
            });
            if same {
                return Ok((view, false));
            }
            let body = ReconfigurePool {
                params: app.app.params.clone(),
                sensitive_params: Some(app.app.sensitive.0.clone()),
                sensitive_params_update: None,
                generation: Some(view.generation),
            };
            let view: PoolView = client
                .post(&format!("{url}/reconfigure"), &body)
                .await
                .with_context(|| format!("cannot reconfigure pool sys/sys/{}", app.pool))?;
            Ok((view, false))
        }
        Err(CallError::Api { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => {
            let body = CreatePool {
                name: app.pool.to_string(),
                provider: orc_zone_apps::CORE_PROVIDER.to_string(),
                size: app.size,
                shape: ShapeView {
                    cpu: 1,
                    mem: 1,
                    arch: None,
                    disks: Vec::new(),
                },
                class: orc_zone::model::CORE_LOCAL_SITE.to_string(),
                os: "none".to_string(),
                public: false,
                endpoints: Vec::new(),
                app: Some(app.app.package.clone()),
                params: app.app.params.clone(),
                sensitive_params: app.app.sensitive.0.clone(),
                placement: BTreeMap::new(),
                ssh_keys: Vec::new(),
            };
            let view: PoolView = client
                .post(pools, &body)
                .await
                .with_context(|| format!("cannot create pool sys/sys/{}", app.pool))?;
            Ok((view, true))
        }
        Err(error) => Err(error).with_context(|| format!("cannot read pool sys/sys/{}", app.pool)),
    }
}

/// The digest `package`'s tag names in the registry.
async fn tagged_digest(client: &Client, package: &str) -> anyhow::Result<Option<String>> {
    let reference: PackageRef = package.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(tagged(client, &reference).await?.map(|t| t.digest))
}

/// The registry's tag `reference`, if there is one.
async fn tagged(client: &Client, reference: &PackageRef) -> anyhow::Result<Option<AppTagView>> {
    let apps: Vec<orc_zone_api_types::views::RegistryAppView> = client
        .get(&format!(
            "/api/orgs/{}/apps",
            segment(reference.org.as_str())
        ))
        .await
        .context("cannot list the registry")?;
    Ok(apps
        .into_iter()
        .flat_map(|a| a.tags)
        .find(|t| t.package == reference.to_string()))
}

/// Steps 3 and 4 of deploying the partner: its provider widened to zone scope, so every
/// project may deploy from it, and given a markup of 0 when it has no strategy, so its nodes
/// carry prices (a strategy an operator set is kept).
async fn widen_and_price_partner(client: &Client) -> anyhow::Result<()> {
    let url = format!("/api/orgs/sys/projects/sys/providers/{PARTNER_POOL}");
    let provider: ProviderView = client
        .get(&url)
        .await
        .context("cannot read the partner's provider")?;
    if provider.scope != "zone" {
        let _: ProviderView = client
            .post(
                &format!("{url}/change-scope"),
                &ChangeScope {
                    scope: "zone".to_string(),
                },
            )
            .await
            .context("cannot widen the partner's provider to zone scope")?;
    }
    if provider.pricing.markup.is_none() {
        let _: ProviderView = client
            .put(
                &format!("{url}/pricing"),
                &SetPricing {
                    markup: Some("0".to_string()),
                },
            )
            .await
            .context("cannot set the partner's markup")?;
    }
    Ok(())
}

async fn running_nodes(store: &Store, pool: &Pool) -> usize {
    store
        .list_nodes_by_pool(&pool.id, false)
        .await
        .map(|nodes| {
            nodes
                .iter()
                .filter(|n| n.status.state == NodeState::Running)
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_partner_declares_each_cloud_key_sensitive_and_up_sends_them_so() {
        let keys: BTreeSet<String> = orc_partner::ids::Cloud::ALL
            .iter()
            .map(|cloud| cloud.key_param().to_string())
            .collect();
        assert_eq!(partner_sensitive_params(), keys);
        let app = partner_app("https://127.0.0.1:7070");
        assert!(app.params.keys().all(|name| !keys.contains(name)));
        assert_eq!(
            app.params["access_keys_url"],
            "https://127.0.0.1:7070/.well-known/orc-access/jwks.json"
        );
        assert!(
            !partner_app("http://127.0.0.1:7070")
                .params
                .contains_key("access_keys_url"),
            "a plain zone keeps the page closed rather than give the partner an http URL"
        );
        assert_eq!(
            app.sensitive.0.keys().cloned().collect::<BTreeSet<_>>(),
            keys
        );
    }

    #[test]
    fn every_provider_manifest_declares_what_its_binary_reads() {
        let partner = partner_manifest();
        partner.validate(&name(PARTNER_APP).unwrap()).unwrap();
        let declared: Vec<String> = partner.params.iter().map(|p| p.name.clone()).collect();
        assert_eq!(declared, orc_partner::params::all_param_names());
        let json: Vec<&str> = partner
            .params
            .iter()
            .filter(|p| p.json)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(json, ["regions", "os_map", "gateway"]);
        assert_eq!(
            partner.required_names(),
            ["partner_id"],
            "only partner_id is needed whatever the clouds"
        );
        for binary in [
            "orc-prov-hetzner",
            "orc-prov-vultr",
            "orc-prov-robot",
            "orc-prov-static",
        ] {
            let manifest = standalone_manifest(binary).unwrap();
            manifest.validate(&name(binary).unwrap()).unwrap();
            assert!(
                manifest.sensitive_params().is_empty(),
                "{binary} names its secrets by reference"
            );
        }
    }

    fn args(dir: &Path, partner: &Path) -> UpArgs {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        UpArgs {
            data_dir: Some(dir.join("data")),
            http: any,
            grpc: any,
            tls: crate::TlsArgs {
                plain: false,
                tls_names: Vec::new(),
            },
            listen: crate::ListenArgs {
                max_connections_per_source: None,
            },
            edge: crate::EdgeArgs {
                edge: any,
                edge_domain: orc_web::edge::DEFAULT_DOMAIN.to_string(),
                edge_public_port: None,
                no_edge: false,
                web_url: None,
            },
            hetzner_emu: any,
            vultr_emu: any,
            robot_emu: any,
            partner_bin: Some(partner.to_path_buf()),
            providers_bin: Some(partner.to_path_buf()),
            partner_wait: 30,
            netns: false,
            mesh: crate::MeshArgs {
                mesh_range: orc_mesh::range::DEFAULT_RANGE.parse().unwrap(),
                mesh_project_prefix: orc_mesh::range::DEFAULT_PROJECT_PREFIX_LEN,
            },
        }
    }

    /// Waits until the reconcilers have had the core provider start both slots.
    async fn wait_until_running(store: &Store, pool: &Pool) {
        for _ in 0..600 {
            if running_nodes(store, pool).await == PARTNER_REPLICAS as usize {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the partner slots never ran");
    }

    #[tokio::test]
    async fn up_starts_the_zone_with_the_partner_pool_and_resumes_without_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let partner = dir.path().join("fake-partner");
        std::fs::write(&partner, "#!/bin/sh\nexec sleep 600\n").unwrap();
        std::fs::set_permissions(&partner, std::fs::Permissions::from_mode(0o755)).unwrap();
        let steps = std::sync::Mutex::new(Vec::new());
        let report = |w: &str| steps.lock().unwrap().push(w.to_string());

        let up = Up::start(&args(dir.path(), &partner), &report)
            .await
            .unwrap();
        assert!(up.pool_created);
        let token = up.zone.admin_token().expose().to_string();
        let health = orc_testkit::zone::client_of(&up.zone)
            .get(format!("{}/api/orgs", up.zone.url()))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert!(health.status().is_success(), "{}", health.status());
        let summary = up.summary(true);
        assert!(summary.contains(&up.zone.url()), "{summary}");
        assert!(
            summary.contains(&token),
            "a new token is shown once: {summary}"
        );
        let logged = up.summary(false);
        assert!(!logged.contains(&token), "{logged}");
        assert!(logged.contains("token     in "), "{logged}");
        let sys: Name = "sys".parse().unwrap();
        let pool = up
            .zone
            .store()
            .pool_by_path(&sys, &sys, &name(PARTNER_POOL).unwrap())
            .await
            .unwrap();
        assert_eq!(pool.size, PARTNER_REPLICAS);
        let app = pool.spec.app.clone().unwrap();
        let wanted = partner_app(up.zone.web_url());
        assert_eq!(
            (&app.package, &app.params, &app.sensitive),
            (&wanted.package, &wanted.params, &wanted.sensitive)
        );
        assert!(app.digest.is_some(), "the pool runs a published package");
        assert_eq!(pool.spec.endpoints, partner_endpoints());
        wait_until_running(up.zone.store(), &pool).await;
        // Attack: read a secret from another process's command line or environment. No
        // process `orc up` starts carries the admin token, the emulators' credential or the
        // rescue key there (they reach slots as files in their runtime dirs).
        let rescue_key =
            std::fs::read_to_string(dir.path().join("data/secrets/robot-rescue-key")).unwrap();
        let rescue_line = rescue_key.lines().nth(1).unwrap().to_string();
        let pids: Vec<u32> = up
            .zone
            .apps()
            .slots()
            .await
            .iter()
            .filter_map(|slot| slot.pid)
            .collect();
        assert!(pids.len() >= PARTNER_REPLICAS as usize, "{pids:?}");
        for pid in pids {
            for file in ["cmdline", "environ"] {
                let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                for secret in [token.as_str(), EMULATOR_TOKEN, rescue_line.as_str()] {
                    assert!(!text.contains(secret), "/proc/{pid}/{file} holds a secret");
                }
            }
        }
        assert_eq!(
            steps.lock().unwrap()[..11],
            [
                "starting the cloud emulators",
                "preparing the emulated accounts",
                "starting the zone",
                "publishing sys/orc-prov-partner:default",
                "creating pool sys/sys/partner",
                "publishing sys/orc-prov-hetzner:default",
                "creating pool sys/sys/hetzner",
                "publishing sys/orc-prov-vultr:default",
                "creating pool sys/sys/vultr",
                "publishing sys/orc-prov-robot:default",
                "creating pool sys/sys/robot",
            ]
        );
        // The standalone providers' accounts name their secrets by reference only.
        let robot = up
            .zone
            .store()
            .pool_by_path(&sys, &sys, &name("robot").unwrap())
            .await
            .unwrap();
        let account = &robot.spec.app.as_ref().unwrap().params["account"];
        assert!(account.contains("param://"), "{account}");
        assert!(!account.contains(EMULATOR_TOKEN), "{account}");
        assert!(
            account.contains(r#""install":"operator""#),
            "without --netns Robot servers are records only, never SSHed into: {account}"
        );
        let secrets = dir.path().join("data/secrets");
        let mode = std::fs::metadata(secrets.join("robot-rescue-key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let key_before = std::fs::read_to_string(secrets.join("robot-rescue-key.pub")).unwrap();
        // The API's address is part of the partner's params (its access_keys_url): the same
        // address again changes nothing.
        let http = up.zone.http_addr();
        up.shutdown().await;

        let again = Up::start(
            &UpArgs {
                http,
                ..args(dir.path(), &partner)
            },
            &report,
        )
        .await
        .unwrap();
        assert!(!again.pool_created);
        wait_until_running(again.zone.store(), &pool).await;
        let pools = again
            .zone
            .store()
            .list_pools(&orc_zone::model::sys_project_id())
            .await
            .unwrap();
        let partners: Vec<_> = pools
            .iter()
            .filter(|p| p.name.as_str() == PARTNER_POOL)
            .collect();
        assert_eq!(partners.len(), 1);
        assert_eq!(partners[0].id, pool.id);
        assert_eq!(partners[0].generation, pool.generation);
        assert!(
            !again.summary(true).contains(&token),
            "the token is shown only once"
        );
        assert_eq!(
            std::fs::read_to_string(secrets.join("robot-rescue-key.pub")).unwrap(),
            key_before,
            "the rescue key is kept across runs"
        );
        again.shutdown().await;
    }

    #[test]
    fn a_missing_partner_binary_and_a_taken_port_are_named() {
        let error = partner_binary(Some(Path::new("/nonexistent/orc-prov-partner")))
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not exist"), "{error}");
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let error = check_port("the zone API", taken.local_addr().unwrap())
            .unwrap_err()
            .to_string();
        assert!(error.contains("in use"), "{error}");
    }
}
