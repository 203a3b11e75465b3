//! `orc agent`: the node agent, from its arguments and the environment, until SIGTERM or
//! Ctrl-C.

use std::path::PathBuf;

/// What `orc agent` was asked.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The zone's agent endpoint (`https://HOST:7400`); needed for the first join.
    #[arg(long = "zone", env = "ORC_AGENT_ZONE", value_name = "URL")]
    pub zone: Option<String>,
    /// The node this agent runs on (`n-…`); needed for the first join.
    #[arg(long, env = "ORC_AGENT_NODE", value_name = "NODE")]
    pub node: Option<String>,
    /// The join token's file, deleted once the token was used.
    #[arg(long, env = "ORC_AGENT_JOIN_TOKEN_FILE", value_name = "PATH",
        default_value = orc_agent::DEFAULT_TOKEN_FILE)]
    pub join_token_file: PathBuf,
    /// Where the agent keeps its key, certificate and applied config.
    #[arg(long, env = "ORC_AGENT_STATE_DIR", value_name = "DIR",
        default_value = orc_agent::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Where the machine's DMI product_uuid is read.
    #[arg(long, env = "ORC_AGENT_PRODUCT_UUID_FILE", value_name = "PATH",
        default_value = orc_agent::facts::PRODUCT_UUID_FILE)]
    pub product_uuid_file: PathBuf,
    /// Leave the mesh alone: no WireGuard key, interfaces, routes or gateway NAT (for a
    /// machine whose network someone else runs).
    #[arg(long, env = "ORC_AGENT_NO_MESH")]
    pub no_mesh: bool,
    /// Run no apps: the zone's workloads are refused and no containerd is started.
    #[arg(long, env = "ORC_AGENT_NO_APPS")]
    pub no_apps: bool,
    /// The containerd binary the agent starts for the apps it runs.
    #[arg(
        long,
        env = "ORC_AGENT_CONTAINERD",
        value_name = "PATH",
        default_value = "containerd"
    )]
    pub containerd: String,
    /// Run no ingress proxy, even when the zone makes the node an ingress node.
    #[arg(long, env = "ORC_AGENT_NO_INGRESS")]
    pub no_ingress: bool,
    /// Where the ingress proxy serves plain HTTP (ACME challenges, redirects to HTTPS, the
    /// catch-all) while the node accepts public ingress.
    #[arg(
        long,
        env = "ORC_AGENT_INGRESS_HTTP",
        value_name = "ADDR",
        default_value = "0.0.0.0:80"
    )]
    pub ingress_http: std::net::SocketAddr,
    /// Where the ingress proxy serves HTTPS; public TCP ports open on the same address.
    #[arg(
        long,
        env = "ORC_AGENT_INGRESS_HTTPS",
        value_name = "ADDR",
        default_value = "0.0.0.0:443"
    )]
    pub ingress_https: std::net::SocketAddr,
}

/// `orc agent`: runs until SIGTERM or Ctrl-C.
pub async fn run_agent(args: AgentArgs) -> anyhow::Result<()> {
    let options = orc_agent::AgentOptions {
        endpoint: args.zone,
        node_id: args.node,
        token_file: args.join_token_file,
        state_dir: args.state_dir,
        product_uuid_file: args.product_uuid_file,
        mesh: !args.no_mesh,
        apps: !args.no_apps,
        containerd: args.containerd.clone(),
        ingress: (!args.no_ingress).then_some(orc_agent::ingress::IngressListen {
            http: args.ingress_http,
            https: args.ingress_https,
        }),
        ..orc_agent::AgentOptions::default()
    };
    orc_agent::run(options, crate::shutdown_signal()).await?;
    Ok(())
}
