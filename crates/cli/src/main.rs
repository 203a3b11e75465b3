//! `orc`: runs a zone (`orc zone serve`, `orc up`) and talks to a zone's API (`orc pools`,
//! `orc pool create`, `orc quote`, …). This file is the command line and nothing else: what
//! talks to a zone is `orc-client` (one module per resource), what starts something on this
//! machine is `orc-launch`. See `docs/cli.md`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use orc_client::{ConnArgs, commands};
use orc_launch::up;

/// orc: a small cloud platform.
#[derive(Debug, Parser)]
#[command(name = "orc", version, about)]
struct Cli {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(subcommand)]
    command: Command,
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
    /// A project's applications, from `orch.pkl` files: write, check and deploy them.
    App {
        #[command(subcommand)]
        command: AppCommand,
    },
    /// The zone's app registry: publish, list, show and delete `org/name:tag` packages.
    Registry {
        #[command(subcommand)]
        command: RegistryCommand,
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
    Agent(orc_launch::agent::AgentArgs),
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
    /// A project's secrets, which its apps read by name: set, list, delete. Values are
    /// read from stdin or the terminal, never from the command line, and never shown again.
    Secret {
        #[command(subcommand)]
        command: SecretCommand,
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
    /// Write a starter app file that `orc app check` passes: one HTTP service.
    #[command(
        after_help = "Example: orc app init --name web --image acme/web:1 --replicas 3 --port 8080 --health /healthz"
    )]
    Init {
        /// The app's name, also its service's.
        #[arg(long, default_value = "web")]
        name: String,
        /// The image: ORG/NAME:TAG in the zone's registry, or a full reference
        /// [default: a placeholder to edit]
        #[arg(long)]
        image: Option<String>,
        /// How many replicas.
        #[arg(long, default_value_t = 2)]
        replicas: u32,
        /// The port the image's HTTP server listens on.
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// The path that answers when a replica is ready.
        #[arg(long, default_value = "/healthz", conflicts_with = "no_health")]
        health: String,
        /// Check readiness with a TCP connection instead of an HTTP path.
        #[arg(long)]
        no_health: bool,
        /// Make the service the project's plain-HTTP catch-all on port 80 of its ingress
        /// nodes.
        #[arg(long)]
        public: bool,
        /// A public name served on the project's ingress nodes (repeat for more): HTTPS
        /// with a certificate for it, plain HTTP until then.
        #[arg(long = "domain", value_name = "NAME")]
        domains: Vec<String>,
        /// Where to write.
        #[arg(long, default_value = orc_client::commands::app::DEFAULT_FILE)]
        file: PathBuf,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Evaluate and check an app file without deploying it; every problem names the file,
    /// line and field. With --json, print the checked app as the zone receives it.
    #[command(after_help = "Example: orc app check orch.pkl")]
    Check {
        /// The app file [default: orch.pkl]
        file: Option<PathBuf>,
    },
    /// Print the schema app files amend (`modulepath:/orc/App.pkl`), every setting with its
    /// type, default and meaning.
    #[command(after_help = "Example: orc app schema > orc/App.pkl")]
    Schema,
    /// Show what deploying an app file would change against what runs: the fields, the
    /// images resolved to digests, and what could not be placed now.
    #[command(after_help = "Example: orc app plan orch.pkl --project acme/web")]
    Plan {
        /// The app file [default: orch.pkl]
        file: Option<PathBuf>,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Deploy an app file: a new revision with every image resolved to its digest (the same
    /// resolved app again changes nothing). With --wait, until it is HEALTHY.
    #[command(after_help = "Example: orc app deploy orch.pkl --wait")]
    Deploy {
        /// The app file [default: orch.pkl]
        file: Option<PathBuf>,
        /// Wait until the revision is HEALTHY, saying how many replicas are ready; fail
        /// when it is blocked or failed, or after --timeout.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "10m", value_parser = commands::agent::parse_ttl)]
        timeout: std::time::Duration,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// List the project's apps with their revision, state and ready replicas.
    #[command(name = "list", after_help = "Example: orc app list --project acme/web")]
    List {
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Show an app: its revision, state (and why when blocked), images and replicas.
    #[command(after_help = "Example: orc app status shop")]
    Status {
        /// The app's name.
        app: String,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// List an app's revisions, newest first, with their deployments' states.
    #[command(after_help = "Example: orc app history shop")]
    History {
        /// The app's name.
        app: String,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Show what changed from one revision of an app to another.
    #[command(after_help = "Example: orc app diff shop 3 4")]
    Diff {
        /// The app's name.
        app: String,
        /// The earlier revision.
        from: u64,
        /// The later revision.
        to: u64,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Deploy an earlier revision again: a new revision with its app and image digests.
    #[command(after_help = "Example: orc app rollback shop 3 --wait")]
    Rollback {
        /// The app's name.
        app: String,
        /// The revision to deploy again.
        revision: u64,
        /// Wait until the new revision is HEALTHY, as `orc app deploy --wait` does.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "10m", value_parser = commands::agent::parse_ttl)]
        timeout: std::time::Duration,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Remove an app: its replicas stop; local volumes' data stays on their nodes.
    #[command(after_help = "Example: orc app remove shop")]
    Remove {
        /// The app's name.
        app: String,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Print the output of an app's replicas, each line named by its replica (`web[0] |`
    /// for stdout, `web[0] !` for stderr).
    #[command(after_help = "Example: orc app logs shop web --follow")]
    Logs {
        /// The app's name.
        app: String,
        /// Only this service or worker [default: every one].
        workload: Option<String>,
        /// Go on printing what the replicas write (until Ctrl-C, or an hour).
        #[arg(long, short = 'f')]
        follow: bool,
        /// How much of the end of each replica's stdout and stderr, in bytes (0: all the
        /// node keeps).
        #[arg(long, default_value_t = 16384)]
        tail: u64,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
    },
    /// Run a command inside a replica of an app (the first ready one, or --slot), with its
    /// environment, without a shell; exit with the command's exit code.
    #[command(after_help = "Example: orc app exec shop web -- cat /etc/resolv.conf")]
    Exec {
        /// The app's name.
        app: String,
        /// The service or worker.
        workload: String,
        /// The replica's slot, as `orc app status` shows it.
        #[arg(long)]
        slot: Option<u32>,
        /// Kill the command after this long (1s to 1h).
        #[arg(long, default_value = "10m", value_parser = commands::agent::parse_ttl)]
        timeout: std::time::Duration,
        /// ORG/PROJECT [default: the token's project]
        #[arg(long)]
        project: Option<String>,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        argv: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum RegistryCommand {
    /// Publish an app as ORG/NAME:TAG: each platform's binary (sent only when the registry
    /// lacks it) and the manifest. Pushing a tag again moves it. The token may come from
    /// ORC_REGISTRY_TOKEN.
    #[command(
        after_help = "Example: orc registry push sys/orc-prov-partner:default \\\n    --binary linux/amd64=target/release/orc-prov-partner \\\n    --manifest crates/partner-provider/orc-app.json"
    )]
    Push {
        /// ORG/NAME:TAG (the tag `default` when left out)
        package: String,
        /// PLATFORM=PATH, once per platform (linux/amd64, linux/arm64)
        #[arg(long = "binary", value_name = "PLATFORM=PATH", required = true)]
        binaries: Vec<commands::registry::BinaryArg>,
        /// The app's manifest (JSON: name, version, args, params, endpoints); without one,
        /// the app declares nothing and its version is the tag.
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
    },
    /// List the apps of an org's registry with their tags.
    #[command(after_help = "Example: orc registry list sys")]
    List {
        /// ORG [default: the token's project's org]
        org: Option<String>,
    },
    /// Show an app's packages: tags, version, binaries, params, endpoints and the pools
    /// that run each.
    #[command(after_help = "Example: orc registry show sys/orc-prov-partner")]
    Show {
        /// ORG/NAME
        app: String,
    },
    /// Delete a tag. Packages that no tag names and no pool runs go with their binaries.
    #[command(after_help = "Example: orc registry delete sys/orc-prov-partner:previous")]
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
enum SecretCommand {
    /// Set a secret: asked on the terminal without echo, or all of stdin when it is a pipe
    /// or a file (less one trailing newline). Setting a name again replaces its value and
    /// counts its version up.
    #[command(
        after_help = "Example: orc secret set db-password --project acme/web\n  \
                      or: orc secret set tls.key --project acme/web < tls.key"
    )]
    Set {
        /// The secret's name: 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter
        /// or digit.
        name: String,
        /// ORG/PROJECT [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// List a project's secrets: name, version, when and by whom each was last set (never a
    /// value).
    #[command(after_help = "Example: orc secret list --project acme/web")]
    List {
        /// ORG/PROJECT [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Delete a secret.
    #[command(after_help = "Example: orc secret delete db-password --project acme/web")]
    Delete {
        /// The secret's name.
        name: String,
        /// ORG/PROJECT [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum NodeCommand {
    /// Mint, list or revoke a node's join tokens.
    Join {
        #[command(subcommand)]
        command: JoinCommand,
    },
    /// Show a node's labels (the zone's and the ones given it) and whether it is cordoned.
    #[command(after_help = "Example: orc node placement n-7 --project acme/web")]
    Placement {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Give a node labels that services' `constraints` match, or take them away; the `orc.`
    /// prefix is the zone's.
    #[command(after_help = "Example: orc node label n-7 tier=front disk=ssd --remove old")]
    Label {
        /// The node (`n-…`).
        node: String,
        /// KEY=VALUE to set.
        labels: Vec<String>,
        /// A label to take away (repeatable).
        #[arg(long, value_name = "KEY")]
        remove: Vec<String>,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Cordon a node: it keeps what it runs and takes no new replicas.
    #[command(after_help = "Example: orc node cordon n-7")]
    Cordon {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Lift a node's cordon.
    #[command(after_help = "Example: orc node uncordon n-7")]
    Uncordon {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Drain a node for maintenance: cordon it and move every replica that may move; one
    /// with a local volume stays, and is named.
    #[command(after_help = "Example: orc node drain n-7")]
    Drain {
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Whether a node accepts public ingress: its agent's proxy serves the project's
    /// domains (HTTPS), its plain-HTTP catch-all and its public TCP ports. The first node
    /// of a project to join accepts it by itself.
    #[command(after_help = "Example: orc node ingress enable n-7")]
    Ingress {
        /// `enable` or `disable`.
        #[arg(value_parser = ["enable", "disable"])]
        action: String,
        /// The node (`n-…`).
        node: String,
        /// ORG/PROJECT the node is in [default: the token's project].
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
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
    Serve(orc_launch::serve::ServeArgs),
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

fn main() -> ExitCode {
    if let Some(code) = orc_launch::embedded::run_embedded(std::env::args_os()) {
        return code;
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
        } => orc_launch::serve::serve(args).await,
        Command::Zone {
            command: ZoneCommand::Ca { data_dir },
        } => commands::zone::print_ca(data_dir),
        Command::Zone {
            command: ZoneCommand::AccessKeys,
        } => commands::zone::access_keys(&conn).await,
        Command::Zone {
            command: ZoneCommand::RotateAccessKey { overlap },
        } => commands::zone::rotate_access_key(&conn, overlap).await,
        Command::Zone {
            command: ZoneCommand::RotateAdminToken { data_dir },
        } => commands::zone::rotate_admin_token(&conn, data_dir).await,
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
        Command::Node {
            command: NodeCommand::Placement { node, project },
        } => commands::placement::placement(&conn, &node, project.as_deref()).await,
        Command::Node {
            command:
                NodeCommand::Label {
                    node,
                    labels,
                    remove,
                    project,
                },
        } => commands::placement::label(&conn, &node, &labels, &remove, project.as_deref()).await,
        Command::Node {
            command: NodeCommand::Cordon { node, project },
        } => commands::placement::act(&conn, &node, "cordon", project.as_deref()).await,
        Command::Node {
            command: NodeCommand::Uncordon { node, project },
        } => commands::placement::act(&conn, &node, "uncordon", project.as_deref()).await,
        Command::Node {
            command: NodeCommand::Drain { node, project },
        } => commands::placement::act(&conn, &node, "drain", project.as_deref()).await,
        Command::Node {
            command:
                NodeCommand::Ingress {
                    action,
                    node,
                    project,
                },
        } => {
            let verb = format!("ingress/{action}");
            commands::placement::act(&conn, &node, &verb, project.as_deref()).await
        }
        Command::Agent(args) => {
            orc_launch::init_tracing();
            orc_launch::agent::run_agent(args).await
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
        Command::Secret { command } => match command {
            SecretCommand::Set { name, project } => {
                commands::secret::set(&conn, &name, project.as_deref()).await
            }
            SecretCommand::List { project } => {
                commands::secret::list(&conn, project.as_deref()).await
            }
            SecretCommand::Delete { name, project } => {
                commands::secret::delete(&conn, &name, project.as_deref()).await
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
            AppCommand::Init {
                name,
                image,
                replicas,
                port,
                health,
                no_health,
                public,
                domains,
                file,
                force,
            } => commands::app::init(&commands::app::InitArgs {
                file,
                name,
                image,
                replicas,
                port,
                health: (!no_health).then_some(health),
                domains,
                public,
                force,
            }),
            AppCommand::Check { file } => commands::app::check(file.as_deref(), conn.json),
            AppCommand::Schema => {
                commands::app::schema();
                Ok(())
            }
            AppCommand::Plan { file, project } => {
                commands::app::plan(&conn, file.as_deref(), project.as_deref()).await
            }
            AppCommand::Deploy {
                file,
                project,
                wait,
                timeout,
            } => {
                commands::app::deploy(
                    &conn,
                    file.as_deref(),
                    project.as_deref(),
                    wait.then_some(timeout),
                )
                .await
            }
            AppCommand::List { project } => commands::app::list(&conn, project.as_deref()).await,
            AppCommand::Status { app, project } => {
                commands::app::status(&conn, &app, project.as_deref()).await
            }
            AppCommand::History { app, project } => {
                commands::app::history(&conn, &app, project.as_deref()).await
            }
            AppCommand::Diff {
                app,
                from,
                to,
                project,
            } => commands::app::diff(&conn, &app, from, to, project.as_deref()).await,
            AppCommand::Rollback {
                app,
                revision,
                wait,
                timeout,
                project,
            } => {
                commands::app::rollback(
                    &conn,
                    &app,
                    revision,
                    project.as_deref(),
                    wait.then_some(timeout),
                )
                .await
            }
            AppCommand::Remove { app, project } => {
                commands::app::remove(&conn, &app, project.as_deref()).await
            }
            AppCommand::Logs {
                app,
                workload,
                follow,
                tail,
                project,
            } => {
                commands::app::logs(
                    &conn,
                    &app,
                    workload.as_deref(),
                    project.as_deref(),
                    follow,
                    tail,
                )
                .await
            }
            AppCommand::Exec {
                app,
                workload,
                slot,
                timeout,
                project,
                argv,
            } => {
                commands::app::exec(
                    &conn,
                    &app,
                    &workload,
                    slot,
                    project.as_deref(),
                    argv,
                    timeout,
                )
                .await
            }
        },
        Command::Registry { command } => match command {
            RegistryCommand::Push {
                package,
                binaries,
                manifest,
            } => commands::registry::push(&conn, &package, &binaries, manifest.as_deref()).await,
            RegistryCommand::List { org } => commands::registry::list(&conn, org.as_deref()).await,
            RegistryCommand::Show { app } => commands::registry::show(&conn, &app).await,
            RegistryCommand::Delete { package } => {
                commands::registry::delete(&conn, &package).await
            }
        },
    }
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
