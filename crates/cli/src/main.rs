//! `orc`: runs a zone (`orc zone serve`, `orc up`) and talks to a zone's API (`orc pools`,
//! `orc pool create`, `orc quote`, …). A thin layer: argument parsing here, calls in
//! [`commands`] (one module per resource), HTTP in [`client`], tables in [`table`]. See
//! `docs/cli.md`.

#[macro_use]
mod output;
mod client;
mod commands;
mod table;
mod up;

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

/// orc: a small cloud platform.
#[derive(Debug, Parser)]
#[command(name = "orc", version, about)]
struct Cli {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(subcommand)]
    command: Command,
}

/// How to reach a zone.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Zone connection (every command)")]
pub struct ConnArgs {
    /// The zone's API URL [default: <data dir>/zone-url, else https://127.0.0.1:7070].
    #[arg(long, global = true, env = "ORC_URL")]
    pub url: Option<String>,
    /// A file holding the API token [default: $ORC_TOKEN, else <data dir>/admin-token].
    #[arg(long, global = true, env = "ORC_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Refused: every user of the machine can read a command line.
    #[arg(long, global = true, hide = true)]
    pub token: Option<String>,
    /// The zone's CA certificate to trust [default: <data dir>/ca.pem]; `orc zone ca` on
    /// the zone's machine prints it.
    #[arg(long, global = true, env = "ORC_CA_FILE", value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start everything on this machine: zone, emulated clouds and the partner provider.
    #[command(after_help = "Example: orc up")]
    Up(up::UpArgs),
    /// Run a zone controller.
    Zone {
        #[command(subcommand)]
        command: ZoneCommand,
    },
    /// List pools of a project (all visible projects if none given).
    #[command(after_help = "Example: orc pools acme/web")]
    Pools {
        /// ORG/PROJECT
        project: Option<String>,
    },
    /// The zone's app registry: publish, list, show and delete `org/name:tag` packages.
    App {
        #[command(subcommand)]
        command: AppCommand,
    },
    /// Show, create, resize, reconfigure or delete a pool.
    Pool {
        #[command(subcommand)]
        command: PoolCommand,
    },
    /// List the nodes of a pool: state, site, private address, the site's gateway, price.
    #[command(after_help = "Example: orc nodes acme/web/db --all")]
    Nodes {
        /// ORG/PROJECT/POOL (ORG/POOL means the org's project of the same name)
        pool: String,
        /// Include ended nodes.
        #[arg(long)]
        all: bool,
    },
    /// Run a command on a node through its agent (no shell; output streamed), exiting with
    /// the command's exit code.
    #[command(after_help = "Example: orc exec n-7 --project acme/web -- ip -4 addr")]
    Exec {
        /// The node (`n-…`, as `orc nodes` shows it).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
        /// Kill the command after this long (1s to 1h).
        #[arg(long, default_value = "10m", value_parser = commands::agent::parse_ttl)]
        timeout: std::time::Duration,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        argv: Vec<String>,
    },
    /// A node's join tokens.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Run the node agent: join the zone with a join token, then keep its stream open.
    #[command(
        after_help = "Example: orc agent --zone https://zone.example.net:7400 --node n-7 \\\n    --join-token-file /etc/orc/join-token"
    )]
    Agent(commands::agent::AgentArgs),
    /// List the providers a project may use (default: your own project).
    #[command(after_help = "Example: orc providers acme/web")]
    Providers {
        /// ORG/PROJECT
        project: Option<String>,
    },
    /// List a provider's sites with their addresses, nodes and gateways (the provider's own
    /// project counts every tenant's nodes; another project its own).
    #[command(after_help = "Example: orc sites partner --project acme/web")]
    Sites {
        /// PROVIDER seen from the project [default: partner], or ORG/PROJECT/PROVIDER
        provider: Option<String>,
        /// ORG/PROJECT to look from [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Change a provider's scope or pricing.
    Provider {
        #[command(subcommand)]
        command: ProviderCommand,
    },
    /// Ask a provider what a node would cost, and where.
    #[command(
        after_help = "Example: orc quote acme/web --provider partner --class eu-central --cpu 2 \
                      --mem 4 --os debian-12"
    )]
    Quote(commands::quote::QuoteArgs),
    /// A project's WireGuard mesh: its members' state, and this machine on it as a
    /// workstation.
    Mesh {
        #[command(subcommand)]
        command: MeshCommand,
    },
    /// Show a project's events, newest last (the newest --limit of them).
    #[command(after_help = "Example: orc events acme/web --pool db --since 1h")]
    Events {
        /// ORG/PROJECT
        project: String,
        /// Only this pool's events.
        #[arg(long)]
        pool: Option<String>,
        /// The newest this many (1–1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Only those of the last DURATION: 30s, 10m, 2h, 1d.
        #[arg(long, value_name = "DURATION", value_parser = commands::events::parse_since)]
        since: Option<std::time::Duration>,
        /// Keep printing new events as they happen (Ctrl-C stops).
        #[arg(long)]
        follow: bool,
    },
    /// Who the token is, its default project, and its roles.
    #[command(after_help = "Example: orc whoami")]
    Whoami,
    /// Orgs: list, create, delete.
    Org {
        #[command(subcommand)]
        command: commands::tenancy::OrgCommand,
    },
    /// Projects: list, create, delete.
    Project {
        #[command(subcommand)]
        command: commands::tenancy::ProjectCommand,
    },
    /// Users: list, create, delete.
    User {
        #[command(subcommand)]
        command: commands::tenancy::UserCommand,
    },
    /// Roles in orgs and projects: list, add, remove.
    Member {
        #[command(subcommand)]
        command: commands::tenancy::MemberCommand,
    },
    /// API tokens: list, create, revoke.
    Token {
        #[command(subcommand)]
        command: commands::tenancy::TokenCommand,
    },
    /// Show a project's usage (invoice lines) for a month.
    #[command(after_help = "Example: orc usage acme/web --month 2026-11")]
    Usage {
        /// ORG/PROJECT
        project: String,
        /// YYYY-MM (default: this month, UTC).
        #[arg(long)]
        month: Option<String>,
    },
    /// Where a pool's endpoints are reached: each http endpoint's address at the access
    /// edge (any slot, and each slot), and for zone operators where each slot listens.
    #[command(after_help = "Example: orc endpoints sys/sys/partner")]
    Endpoints {
        /// ORG/PROJECT/POOL (ORG/POOL means the org's project of the same name)
        pool: String,
    },
    /// Show the kept logs of an app pool's slots.
    #[command(after_help = "Example: orc logs acme/web/api --slot 0 --level debug | head")]
    Logs {
        /// ORG/PROJECT/POOL (ORG/POOL means the org's project of the same name)
        pool: String,
        /// Only this slot.
        #[arg(long)]
        slot: Option<u32>,
        /// Least severe level shown: error, warn, info, debug or trace.
        #[arg(long, default_value = "info")]
        level: String,
    },
}

#[derive(Debug, Subcommand)]
enum AppCommand {
    /// Publish an app as ORG/NAME:TAG: each platform's binary (sent only when the registry
    /// lacks it) and the manifest. Pushing a tag again moves it. The token may come from
    /// ORC_REGISTRY_TOKEN.
    #[command(
        after_help = "Example: orc app push sys/orc-prov-partner:default \\\n    --binary linux/amd64=target/release/orc-prov-partner \\\n    --manifest crates/partner-provider/orc-app.json"
    )]
    Push {
        /// ORG/NAME:TAG (the tag `default` when left out)
        package: String,
        /// PLATFORM=PATH, once per platform (linux/amd64, linux/arm64)
        #[arg(long = "binary", value_name = "PLATFORM=PATH", required = true)]
        binaries: Vec<commands::app::BinaryArg>,
        /// The app's manifest (JSON: name, version, args, params, endpoints); without one,
        /// the app declares nothing and its version is the tag.
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
    },
    /// List the apps of an org's registry with their tags.
    #[command(after_help = "Example: orc app list sys")]
    List {
        /// ORG [default: the token's project's org]
        org: Option<String>,
    },
    /// Show an app's packages: tags, version, binaries, params, endpoints and the pools
    /// that run each.
    #[command(after_help = "Example: orc app show sys/orc-prov-partner")]
    Show {
        /// ORG/NAME
        app: String,
    },
    /// Delete a tag. Packages that no tag names and no pool runs go with their binaries.
    #[command(after_help = "Example: orc app delete sys/orc-prov-partner:previous")]
    Delete {
        /// ORG/NAME:TAG
        package: String,
    },
}

#[derive(Debug, Subcommand)]
enum MeshCommand {
    /// Every member of a project's mesh: its address, whether its agent applied the zone's
    /// latest config, how many of its peers answered within the last 3 minutes, bytes each
    /// way.
    #[command(after_help = "Example: orc mesh status acme/web")]
    Status {
        /// ORG/PROJECT [default: the token's project].
        project: Option<String>,
    },
    /// Put this machine on a project's mesh: makes a WireGuard key here, registers its public
    /// half and writes a wg-quick file (0600) with the private one.
    #[command(
        after_help = "Example: orc mesh connect acme/web --name laptop --output acme.conf\n  \
                      then: sudo wg-quick up ./acme.conf"
    )]
    Connect {
        /// ORG/PROJECT [default: the token's project].
        project: Option<String>,
        /// The workstation's name on the mesh [default: this machine's host name].
        #[arg(long)]
        name: Option<String>,
        /// The wg-quick file to write (its name, less .conf, becomes the interface name).
        #[arg(long, value_name = "PATH", default_value = commands::mesh::DEFAULT_OUTPUT)]
        output: PathBuf,
        /// Replace --output if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Take a workstation off a project's mesh (its peers drop it within seconds).
    #[command(after_help = "Example: orc mesh disconnect acme/web --name laptop")]
    Disconnect {
        /// ORG/PROJECT [default: the token's project].
        project: Option<String>,
        /// The workstation's name [default: this machine's host name].
        #[arg(long)]
        name: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum NodeCommand {
    /// Mint, list or revoke a node's join tokens.
    Join {
        #[command(subcommand)]
        command: JoinCommand,
    },
}

#[derive(Debug, Subcommand)]
enum JoinCommand {
    /// Mint a join token for a node (revoking its earlier live ones); prints the token alone
    /// on stdout, or writes it to --output.
    #[command(after_help = "Example: orc node join create n-7 --ttl 30m --output join-token")]
    Create {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
        /// How long the token admits the node (1m to 24h).
        #[arg(long, default_value = "1h", value_parser = commands::agent::parse_ttl)]
        ttl: std::time::Duration,
        /// Admit only the machine with this DMI product_uuid.
        #[arg(long, value_name = "UUID")]
        product_uuid: Option<String>,
        /// Write the token to this file (0600) instead of stdout.
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// List a node's join tokens (never their secrets).
    #[command(after_help = "Example: orc node join list n-7")]
    List {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Revoke one of a node's join tokens.
    #[command(after_help = "Example: orc node join revoke n-7 j-12")]
    Revoke {
        /// The node (`n-…`).
        node: String,
        /// The token (`j-…`).
        token: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ZoneCommand {
    /// Run the zone controller until Ctrl-C.
    #[command(after_help = "Example: orc zone serve --tls-name zone.example.net")]
    Serve(ServeArgs),
    /// Print the zone's CA certificate (PEM, on stdout) and its fingerprint (on stderr), for
    /// clients on other machines to pin with --ca-file.
    #[command(after_help = "Example: orc zone ca > zone-ca.pem")]
    Ca {
        /// The zone's data dir [default: $ORC_DATA_DIR, else ~/.local/share/orc].
        #[arg(long, env = "ORC_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Replace the admin token in <data dir>/admin-token with a new one (valid 365 days)
    /// and revoke the old one, through the running zone's API.
    #[command(after_help = "Example: orc zone rotate-admin-token")]
    RotateAdminToken {
        /// The zone's data dir [default: $ORC_DATA_DIR, else ~/.local/share/orc].
        #[arg(long, env = "ORC_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// The access edge's signing keys still published in the zone's JWKS (operators).
    #[command(after_help = "Example: orc zone access-keys")]
    AccessKeys,
    /// Make a new key sign the access edge's assertions; the one it replaces stays
    /// published for the overlap, so assertions it signed and apps' cached keys keep
    /// checking (operators).
    #[command(after_help = "Example: orc zone rotate-access-key --overlap 2h")]
    RotateAccessKey {
        /// How long the replaced key stays published (0s to 168h).
        #[arg(long, default_value = "1h", value_parser = commands::agent::parse_ttl)]
        overlap: std::time::Duration,
    },
}

/// The zone's mesh range, shared by `orc zone serve` and `orc up`.
#[derive(Debug, Clone, Args)]
pub struct MeshArgs {
    /// The range the zone gives each project's mesh a prefix from. It must not overlap the
    /// sites' networks, nor any network the nodes or the people on the mesh use.
    #[arg(long, value_name = "CIDR", default_value = orc_mesh::range::DEFAULT_RANGE)]
    pub mesh_range: ipnet::Ipv4Net,
    /// The prefix length of each project's mesh (24: 253 nodes and workstations).
    #[arg(long, value_name = "LEN", default_value_t = orc_mesh::range::DEFAULT_PROJECT_PREFIX_LEN)]
    pub mesh_project_prefix: u8,
}

impl MeshArgs {
    /// The zone's mesh options for these arguments; the partner's site range is reserved,
    /// since this zone runs the partner.
    pub fn options(&self) -> anyhow::Result<orc_zone::mesh::MeshOptions> {
        let range = orc_mesh::MeshRange::new(self.mesh_range, self.mesh_project_prefix)
            .with_context(|| {
                format!(
                    "--mesh-range {} --mesh-project-prefix {}",
                    self.mesh_range, self.mesh_project_prefix
                )
            })?;
        let site_range = orc_partner_provider::naming::SITE_RANGE
            .parse()
            .expect("the partner's site range is a CIDR");
        Ok(orc_zone::mesh::MeshOptions {
            range,
            reserved: vec![("the partner's site range".to_string(), site_range)],
            ..Default::default()
        })
    }
}

/// TLS of the zone's listeners, shared by `orc zone serve` and `orc up`.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve plain HTTP and h2c instead of TLS: allowed only when both addresses are loopback.
    #[arg(long)]
    pub plain: bool,
    /// A DNS name or address the server certificate also carries (repeatable): the names
    /// clients on other machines dial.
    #[arg(long = "tls-name", value_name = "NAME")]
    pub tls_names: Vec<String>,
}

impl TlsArgs {
    /// The zone's TLS config for these arguments.
    pub fn config(&self) -> orc_zone::zone::TlsConfig {
        orc_zone::zone::TlsConfig {
            plain: self.plain,
            names: self.tls_names.clone(),
            ..Default::default()
        }
    }
}

/// Limits of the zone's listeners, shared by `orc zone serve` and `orc up`.
#[derive(Debug, Clone, Args)]
pub struct ListenArgs {
    /// Connections one address (an IPv6 /64) may hold open on each listener; more are
    /// closed at once. Behind a proxy or load balancer that connects from one address,
    /// raise it to 1024 [default: a quarter of the listener's 1,024].
    #[arg(long, value_name = "N")]
    pub max_connections_per_source: Option<std::num::NonZeroUsize>,
}

impl ListenArgs {
    /// The zone's listener limits for these arguments.
    pub fn limits(&self) -> orc_zone::zone::ListenLimits {
        orc_zone::zone::ListenLimits {
            max_connections_per_source: self.max_connections_per_source.map(|n| n.get()),
            ..Default::default()
        }
    }
}

/// The access edge's arguments (`orc up`, `orc zone serve`).
#[derive(Debug, Clone, Args)]
pub struct EdgeArgs {
    /// Where the access edge listens (HTTPS): pools' http endpoints and the sign-in page.
    #[arg(long, value_name = "ADDR", default_value = orc_web::edge::DEFAULT_EDGE_ADDR)]
    pub edge: SocketAddr,
    /// The zone domain: the edge's pages are at https://DOMAIN, an org's endpoints at
    /// <project>--<pool>.<org>.DOMAIN.
    #[arg(long, value_name = "DOMAIN", default_value = orc_web::edge::DEFAULT_DOMAIN)]
    pub edge_domain: String,
    /// The port the edge's URLs carry, when a load balancer in front listens on another
    /// [default: the --edge port].
    #[arg(long, value_name = "PORT")]
    pub edge_public_port: Option<u16>,
    /// Run no access edge.
    #[arg(long, conflicts_with_all = ["edge", "edge_domain", "edge_public_port"])]
    pub no_edge: bool,
    /// The zone's web URL as people and apps reach it (https://zone.example.net:7070): the
    /// issuer of the edge's assertions; apps' access_keys_url is it with
    /// /.well-known/orc-access/jwks.json [default: the API's own URL].
    #[arg(long, env = "ORC_WEB_URL", value_name = "URL")]
    pub web_url: Option<String>,
}

impl EdgeArgs {
    /// The zone's edge config for these arguments; `None` for `--no-edge`.
    pub fn config(&self) -> anyhow::Result<Option<orc_web::edge::EdgeConfig>> {
        if let Some(url) = &self.web_url
            && orc_access::KeysUrl::parse(url).is_err()
        {
            anyhow::bail!("--web-url {url:?} must be an https:// URL with a host");
        }
        if self.no_edge {
            return Ok(None);
        }
        let domain = self.edge_domain.trim_end_matches('.').to_ascii_lowercase();
        let valid = !domain.is_empty()
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            });
        if !valid {
            anyhow::bail!(
                "--edge-domain {:?} is not a DNS name (labels of letters, digits and -)",
                self.edge_domain
            );
        }
        Ok(Some(orc_web::edge::EdgeConfig {
            addr: self.edge,
            domain,
            public_port: self.edge_public_port,
            ..Default::default()
        }))
    }
}

/// Arguments of `orc zone serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Where the zone keeps its files [default: $ORC_DATA_DIR, else ~/.local/share/orc].
    #[arg(long, env = "ORC_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// A file holding the PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB) to keep the
    /// store in instead of SQLite in the data dir [default: $ORC_DATABASE_URL].
    #[arg(long, env = "ORC_DATABASE_URL_FILE", value_name = "PATH")]
    database_url_file: Option<PathBuf>,
    /// Refused: the URL carries a password, and every user can read a command line.
    #[arg(long, hide = true)]
    database_url: Option<String>,
    /// The sealing key's file [default: <data dir>/sealing-key, made on first start]. Every
    /// controller of one store needs the same key.
    #[arg(long, env = "ORC_SEALING_KEY_FILE", value_name = "PATH")]
    sealing_key_file: Option<PathBuf>,
    /// Where the HTTP API listens.
    #[arg(long, default_value = orc_zone::zone::DEFAULT_HTTP_ADDR)]
    http: SocketAddr,
    /// Where providers dial in (gRPC).
    #[arg(long, default_value = orc_zone::zone::DEFAULT_GRPC_ADDR)]
    grpc: SocketAddr,
    /// The URL nodes' agents dial (`https://zone.example.net:7400`): the gRPC endpoint as
    /// the nodes' network reaches it [default: the --grpc address].
    #[arg(long, env = "ORC_AGENT_URL", value_name = "URL")]
    agent_url: Option<String>,
    /// A deployed node whose agent has not joined this long after it runs is replaced (`0`
    /// never replaces one).
    #[arg(long, default_value = "10m", value_parser = commands::agent::parse_ttl)]
    join_grace: std::time::Duration,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    edge: EdgeArgs,
    #[command(flatten)]
    mesh: MeshArgs,
}

#[derive(Debug, Subcommand)]
enum PoolCommand {
    /// A pool: its spec, app and params (sensitive values never), address and nodes.
    #[command(after_help = "Example: orc pool show acme/web/db")]
    Show {
        /// ORG/PROJECT/POOL
        pool: String,
    },
    /// Create a pool.
    #[command(
        after_help = "Example: orc pool create acme/web/db --provider partner --class eu-central \
                      --cpu 2 --mem 4 --os debian-12 --size 2 --wait"
    )]
    Create(commands::pools::CreatePoolArgs),
    /// Set a pool's size.
    #[command(after_help = "Example: orc pool resize acme/web/db 3")]
    Resize {
        /// ORG/PROJECT/POOL
        pool: String,
        /// New number of nodes.
        size: u32,
    },
    /// Delete a pool (its nodes are destroyed first).
    #[command(after_help = "Example: orc pool delete acme/web/db --wait")]
    Delete {
        /// ORG/PROJECT/POOL
        pool: String,
        /// Wait until the pool and its nodes are gone, printing each change.
        #[arg(long)]
        wait: bool,
        /// With --wait: seconds to wait at most.
        #[arg(long, default_value_t = 600, requires = "wait")]
        timeout: u64,
    },
    /// Change an app pool's params (its slots are replaced one at a time).
    #[command(after_help = "Example: orc pool reconfigure acme/web/api --param replicas=3")]
    Reconfigure(commands::pools::ReconfigureArgs),
}

#[derive(Debug, Subcommand)]
enum ProviderCommand {
    /// What a provider offers: its classes with the shapes (or plans) a tenant may ask
    /// for, its OS ids, and its replicas.
    #[command(after_help = "Example: orc provider show partner --project acme/web")]
    Show {
        /// PROVIDER (a name the project sees, as `orc providers` lists it)
        provider: String,
        /// ORG/PROJECT to look from (default: the caller's own project).
        #[arg(long)]
        project: Option<String>,
    },
    /// Make a provider visible to every project (zone) or its own only (project).
    #[command(after_help = "Example: orc provider change-scope sys/sys/partner zone")]
    ChangeScope {
        /// ORG/PROJECT/PROVIDER (the project it registered in)
        provider: String,
        /// zone or project
        scope: String,
    },
    /// Set a provider's markup (0 allowed), or remove its strategy with --none.
    #[command(after_help = "Example: orc provider pricing sys/sys/partner --markup 0.15")]
    Pricing {
        /// ORG/PROJECT/PROVIDER (the project it registered in)
        provider: String,
        /// Markup as a decimal (0.15 = 15 %).
        #[arg(
            long,
            conflicts_with = "none",
            required_unless_present = "none",
            allow_negative_numbers = true
        )]
        markup: Option<String>,
        /// No strategy: new nodes are unpriced.
        #[arg(long)]
        none: bool,
        /// Confirm a markup over 1 (more than 100 %).
        #[arg(long)]
        yes: bool,
    },
}

/// The first argument under which `orc` runs the embedded partner provider, so that
/// `orc up` works where only `orc` was built: `orc prov-partner serve …` is
/// `orc-prov-partner serve …`.
pub const EMBEDDED_PARTNER: &str = "prov-partner";

/// A provider process `orc` embeds: `orc ARG …` runs `BINARY …`.
#[derive(Debug)]
pub struct Embedded {
    /// The first argument of `orc` that selects it (`prov-hetzner`).
    pub arg: &'static str,
    /// The binary it stands for (`orc-prov-hetzner`), also its app name.
    pub binary: &'static str,
    main_from: fn(Vec<std::ffi::OsString>) -> anyhow::Result<()>,
}

/// Every provider `orc` embeds, so that `orc up` and `orc zone serve` work where only `orc`
/// was built.
pub const EMBEDDED: [Embedded; 5] = [
    Embedded {
        arg: EMBEDDED_PARTNER,
        binary: "orc-prov-partner",
        main_from: orc_partner_provider::cli::main_from::<_, std::ffi::OsString>,
    },
    Embedded {
        arg: "prov-hetzner",
        binary: "orc-prov-hetzner",
        main_from: orc_prov_hetzner::cli::main_from::<_, std::ffi::OsString>,
    },
    Embedded {
        arg: "prov-vultr",
        binary: "orc-prov-vultr",
        main_from: orc_prov_vultr::cli::main_from::<_, std::ffi::OsString>,
    },
    Embedded {
        arg: "prov-robot",
        binary: "orc-prov-robot",
        main_from: orc_prov_robot::cli::main_from::<_, std::ffi::OsString>,
    },
    Embedded {
        arg: "prov-static",
        binary: "orc-prov-static",
        main_from: orc_prov_static::cli::main_from::<_, std::ffi::OsString>,
    },
];

fn main() -> ExitCode {
    let first = std::env::args_os().nth(1);
    if let Some(embedded) = EMBEDDED
        .iter()
        .find(|e| first.as_deref() == Some(std::ffi::OsStr::new(e.arg)))
    {
        let args = std::iter::once(embedded.binary.into())
            .chain(std::env::args_os().skip(2))
            .collect();
        return match (embedded.main_from)(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<commands::agent::RemoteExit>().is_some() => {
            let code = e
                .downcast_ref::<commands::agent::RemoteExit>()
                .map_or(1, |r| r.0);
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let conn = cli.conn;
    if conn.token.is_some() {
        anyhow::bail!(
            "--token would put the token on the command line, where every user of this \
             machine can read it; set ORC_TOKEN or give --token-file PATH"
        );
    }
    match cli.command {
        Command::Up(args) => up::run(args).await,
        Command::Zone {
            command: ZoneCommand::Serve(args),
        } => serve(args).await,
        Command::Zone {
            command: ZoneCommand::Ca { data_dir },
        } => print_ca(data_dir),
        Command::Zone {
            command: ZoneCommand::AccessKeys,
        } => commands::zone::access_keys(&conn).await,
        Command::Zone {
            command: ZoneCommand::RotateAccessKey { overlap },
        } => commands::zone::rotate_access_key(&conn, overlap).await,
        Command::Zone {
            command: ZoneCommand::RotateAdminToken { data_dir },
        } => {
            let dir = data_dir.unwrap_or_else(orc_zone::zone::default_data_dir);
            commands::zone::rotate_admin_token(&conn, &dir).await
        }
        Command::Pools { project } => commands::pools::list(&conn, project.as_deref()).await,
        Command::Pool { command } => match command {
            PoolCommand::Show { pool } => commands::pools::show(&conn, &pool).await,
            PoolCommand::Create(args) => commands::pools::create(&conn, args).await,
            PoolCommand::Resize { pool, size } => commands::pools::resize(&conn, &pool, size).await,
            PoolCommand::Delete {
                pool,
                wait,
                timeout,
            } => {
                let wait = wait.then(|| std::time::Duration::from_secs(timeout));
                commands::pools::delete(&conn, &pool, wait).await
            }
            PoolCommand::Reconfigure(args) => commands::pools::reconfigure(&conn, args).await,
        },
        Command::Nodes { pool, all } => commands::nodes::list(&conn, &pool, all).await,
        Command::Exec {
            node,
            project,
            timeout,
            argv,
        } => commands::agent::exec(&conn, &node, project.as_deref(), argv, timeout).await,
        Command::Node {
            command: NodeCommand::Join { command },
        } => match command {
            JoinCommand::Create {
                node,
                project,
                ttl,
                product_uuid,
                output,
            } => {
                commands::agent::join_create(
                    &conn,
                    &node,
                    project.as_deref(),
                    ttl,
                    product_uuid,
                    output.as_deref(),
                )
                .await
            }
            JoinCommand::List { node, project } => {
                commands::agent::join_list(&conn, &node, project.as_deref()).await
            }
            JoinCommand::Revoke {
                node,
                token,
                project,
            } => commands::agent::join_revoke(&conn, &node, &token, project.as_deref()).await,
        },
        Command::Agent(args) => {
            init_tracing();
            commands::agent::run_agent(args).await
        }
        Command::Providers { project } => {
            commands::providers::list(&conn, project.as_deref()).await
        }
        Command::Sites { provider, project } => {
            commands::providers::sites(&conn, provider.as_deref(), project.as_deref()).await
        }
        Command::Provider { command } => match command {
            ProviderCommand::Show { provider, project } => {
                commands::providers::show(&conn, &provider, project.as_deref()).await
            }
            ProviderCommand::ChangeScope { provider, scope } => {
                commands::providers::change_scope(&conn, &provider, &scope).await
            }
            ProviderCommand::Pricing {
                provider,
                markup,
                none,
                yes,
            } => {
                commands::providers::pricing(
                    &conn,
                    &provider,
                    if none { None } else { markup },
                    yes,
                )
                .await
            }
        },
        Command::Quote(args) => commands::quote::quote(&conn, args).await,
        Command::Mesh { command } => match command {
            MeshCommand::Status { project } => {
                commands::mesh::status(&conn, project.as_deref()).await
            }
            MeshCommand::Connect {
                project,
                name,
                output,
                force,
            } => commands::mesh::connect(&conn, project.as_deref(), name, &output, force).await,
            MeshCommand::Disconnect { project, name } => {
                commands::mesh::disconnect(&conn, project.as_deref(), name).await
            }
        },
        Command::Events {
            project,
            pool,
            limit,
            since,
            follow,
        } => {
            let args = commands::events::EventsArgs {
                project: &project,
                pool: pool.as_deref(),
                limit,
                since,
                follow,
            };
            commands::events::list(&conn, args).await
        }
        Command::Whoami => commands::tenancy::whoami(&conn).await,
        Command::Org { command } => commands::tenancy::org(&conn, command).await,
        Command::Project { command } => commands::tenancy::project(&conn, command).await,
        Command::User { command } => commands::tenancy::user(&conn, command).await,
        Command::Member { command } => commands::tenancy::member(&conn, command).await,
        Command::Token { command } => commands::tenancy::token(&conn, command).await,
        Command::Usage { project, month } => {
            commands::usage::show(&conn, &project, month.as_deref()).await
        }
        Command::Logs { pool, slot, level } => {
            commands::logs::show(&conn, &pool, slot, &level).await
        }
        Command::Endpoints { pool } => commands::endpoints::show(&conn, &pool).await,
        Command::App { command } => match command {
            AppCommand::Push {
                package,
                binaries,
                manifest,
            } => commands::app::push(&conn, &package, &binaries, manifest.as_deref()).await,
            AppCommand::List { org } => commands::app::list(&conn, org.as_deref()).await,
            AppCommand::Show { app } => commands::app::show(&conn, &app).await,
            AppCommand::Delete { package } => commands::app::delete(&conn, &package).await,
        },
    }
}

/// `orc zone ca`: the CA certificate on stdout, so `orc zone ca > zone-ca.pem` copies it.
fn print_ca(data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = data_dir.unwrap_or_else(orc_zone::zone::default_data_dir);
    let path = dir.join(orc_zone::zone::CA_CERT_FILE);
    let ca = orc_tls::PinnedCa::from_file(&path).with_context(|| {
        format!(
            "no zone CA in {}: a zone makes it on its first start (unless it runs with --plain)",
            dir.display()
        )
    })?;
    out!("{}", ca.pem());
    eprintln!("fingerprint {}", ca.fingerprint());
    Ok(())
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_tracing();
    let data_dir = args
        .data_dir
        .unwrap_or_else(orc_zone::zone::default_data_dir);
    let mut config = orc_zone::zone::ZoneConfig::new(&data_dir);
    if args.database_url.is_some() {
        anyhow::bail!(
            "--database-url would put the database password on the command line, where every \
             user of this machine can read it; set ORC_DATABASE_URL or give \
             --database-url-file PATH"
        );
    }
    config.database_url = match &args.database_url_file {
        Some(path) => Some(
            commands::read_secret_file(path)
                .with_context(|| format!("cannot read the database URL from {}", path.display()))?,
        ),
        None => std::env::var("ORC_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty()),
    };
    config.sealing_key_file = args.sealing_key_file;
    config.http_addr = args.http;
    config.grpc_addr = args.grpc;
    config.tls = args.tls.config();
    config.limits = args.listen.limits();
    config.edge = args.edge.config()?;
    config.web_url = args.edge.web_url.clone();
    config.mesh = args.mesh.options()?;
    config.agent_url = args.agent_url;
    config.reconcile.join_grace = Some(args.join_grace).filter(|g| !g.is_zero());
    // Nodes install the agent this zone runs as.
    config.agent_binary = std::env::current_exe().ok();
    let zone = orc_zone::zone::Zone::start(config).await?;
    outln!("zone API:    {}", zone.url());
    outln!("providers:   {} (gRPC)", zone.grpc_url());
    match zone.ca_file() {
        Some(ca) => outln!("CA:          {} (clients pin it)", ca.display()),
        None => outln!("TLS:         off (--plain, loopback only)"),
    }
    outln!("data dir:    {}", zone.data_dir().display());
    let token_file = zone.data_dir().join(orc_zone::zone::ADMIN_TOKEN_FILE);
    if zone.admin_token_is_new() && std::io::stdout().is_terminal() {
        outln!(
            "admin token: {} (saved in {}; shown only this once)",
            zone.admin_token().expose(),
            token_file.display()
        );
    } else {
        outln!("admin token: in {}", token_file.display());
    }
    outln!("Ctrl-C stops the zone.");
    tokio::signal::ctrl_c().await?;
    outln!("stopping…");
    zone.shutdown().await;
    Ok(())
}

/// Completes at the first SIGINT (Ctrl-C) or SIGTERM.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handlers the process still ends by the default action.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every command a person runs shows one example of itself in its help.
    #[test]
    fn every_command_has_an_example() {
        fn leaves(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<(String, String)>) {
            let subs: Vec<&clap::Command> = cmd
                .get_subcommands()
                .filter(|c| c.get_name() != "help" && !c.is_hide_set())
                .collect();
            if subs.is_empty() {
                let example = cmd
                    .get_after_help()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                out.push((path.join(" "), example));
            }
            for sub in subs {
                let mut next = path.clone();
                next.push(sub.get_name().to_string());
                leaves(sub, next, out);
            }
        }
        let mut all = Vec::new();
        leaves(&Cli::command(), vec!["orc".to_string()], &mut all);
        assert!(all.len() > 30, "{all:?}");
        let missing: Vec<&String> = all
            .iter()
            .filter(|(path, example)| !example.starts_with(&format!("Example: {path}")))
            .map(|(path, _)| path)
            .collect();
        assert!(
            missing.is_empty(),
            "commands without an example of themselves: {missing:?}"
        );
    }
}
