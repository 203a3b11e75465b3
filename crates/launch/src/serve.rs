//! `orc zone serve`: one zone controller on this machine, configured from its arguments and
//! the environment, until Ctrl-C.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use orc_client::outln;

use crate::args::ZoneArgs;

/// Arguments of `orc zone serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where the zone keeps its files [default: $ORC_DATA_DIR, else ~/.local/share/orc].
    #[arg(long, env = "ORC_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// A file holding the PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB) to keep the
    /// store in instead of SQLite in the data dir [default: $ORC_DATABASE_URL].
    #[arg(long, env = "ORC_DATABASE_URL_FILE", value_name = "PATH")]
    pub database_url_file: Option<PathBuf>,
    /// Refused: the URL carries a password, and every user can read a command line.
    #[arg(long, hide = true)]
    pub database_url: Option<String>,
    /// The sealing key's file [default: <data dir>/sealing-key, made on first start]. Every
    /// controller of one store needs the same key.
    #[arg(long, env = "ORC_SEALING_KEY_FILE", value_name = "PATH")]
    pub sealing_key_file: Option<PathBuf>,
    /// The URL nodes' agents dial (`https://zone.example.net:7400`): the gRPC endpoint as
    /// the nodes' network reaches it [default: the --grpc address].
    #[arg(long, env = "ORC_AGENT_URL", value_name = "URL")]
    pub agent_url: Option<String>,
    /// A deployed node whose agent has not joined this long after it runs is replaced (`0`
    /// never replaces one).
    #[arg(long, default_value = "10m", value_parser = orc_client::commands::agent::parse_ttl)]
    pub join_grace: std::time::Duration,
    #[command(flatten)]
    pub zone: ZoneArgs,
}

/// `orc zone serve`: runs the zone until Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::init_tracing();
    let data_dir = args
        .data_dir
        .unwrap_or_else(orc_zone_api_types::data_dir::default_data_dir);
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
            orc_client::commands::read_secret_file(path)
                .with_context(|| format!("cannot read the database URL from {}", path.display()))?,
        ),
        None => std::env::var("ORC_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty()),
    };
    config.sealing_key_file = args.sealing_key_file;
    args.zone.configure(&mut config)?;
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
    let token_file = zone
        .data_dir()
        .join(orc_zone_api_types::data_dir::ADMIN_TOKEN_FILE);
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
