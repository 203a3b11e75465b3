//! The arguments `orc zone serve` and `orc up` share ([`ZoneArgs`]: where the zone
//! listens, TLS, the listeners' limits, the access edge and the mesh range), each turned into
//! the zone's own config.

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Args;
use orc_zone::zone::ZoneConfig;

/// Where a zone listens and how: what `orc zone serve` and `orc up` both take.
#[derive(Debug, Clone, Args)]
pub struct ZoneArgs {
    /// Where the HTTP API listens.
    #[arg(long, default_value = orc_zone::zone::DEFAULT_HTTP_ADDR)]
    pub http: SocketAddr,
    /// Where providers dial in (gRPC).
    #[arg(long, default_value = orc_zone::zone::DEFAULT_GRPC_ADDR)]
    pub grpc: SocketAddr,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub edge: EdgeArgs,
    #[command(flatten)]
    pub mesh: MeshArgs,
    #[command(flatten)]
    pub acme: AcmeArgs,
}

impl ZoneArgs {
    /// Puts what these arguments say into `config`: the two listeners, their TLS and limits,
    /// the access edge, the web URL and the mesh.
    pub fn configure(&self, config: &mut ZoneConfig) -> anyhow::Result<()> {
        config.http_addr = self.http;
        config.grpc_addr = self.grpc;
        config.tls = self.tls.config();
        config.limits = self.listen.limits();
        config.edge = self.edge.config()?;
        config.web_url = self.edge.web_url.clone();
        config.mesh = self.mesh.options()?;
        config.acme = self.acme.config(config.acme.take())?;
        Ok(())
    }
}

/// Where certificates for apps' domains come from (`orc zone serve`, `orc up`).
#[derive(Debug, Clone, Default, Args)]
pub struct AcmeArgs {
    /// The ACME directory certificates for apps' domains come from [default: Let's
    /// Encrypt for `orc zone serve`; for `orc up --netns` the emulated internet's own ACME
    /// server when pebble is installed, none otherwise].
    #[arg(long, value_name = "URL")]
    pub acme_directory: Option<String>,
    /// An e-mail address for the zone's ACME account (the directory's expiry notices).
    #[arg(long, value_name = "EMAIL")]
    pub acme_email: Option<String>,
    /// CA certificates (PEM) the directory's HTTPS is checked against besides the web's
    /// roots, for a private ACME server.
    #[arg(long, value_name = "FILE")]
    pub acme_ca_file: Option<std::path::PathBuf>,
    /// Obtain no certificates: apps' domains are served over plain HTTP only.
    #[arg(long, conflicts_with_all = ["acme_directory", "acme_email", "acme_ca_file"])]
    pub no_acme: bool,
}

impl AcmeArgs {
    /// The zone's ACME config for these arguments, `default` where they say nothing.
    pub fn config(
        &self,
        default: Option<orc_zone::certificates::AcmeConfig>,
    ) -> anyhow::Result<Option<orc_zone::certificates::AcmeConfig>> {
        if self.no_acme {
            return Ok(None);
        }
        let mut config = match &self.acme_directory {
            Some(url) => {
                let parsed = url::Url::parse(url)
                    .with_context(|| format!("--acme-directory {url:?} is not a URL"))?;
                if parsed.scheme() != "https" || parsed.host_str().is_none() {
                    anyhow::bail!("--acme-directory {url:?} must be an https:// URL with a host");
                }
                Some(orc_zone::certificates::AcmeConfig::new(url))
            }
            None => default,
        };
        if let Some(config) = config.as_mut() {
            if let Some(email) = &self.acme_email {
                if !email.contains('@') || email.chars().any(char::is_whitespace) {
                    anyhow::bail!("--acme-email {email:?} is not an e-mail address");
                }
                config.contact = Some(email.clone());
            }
            if let Some(file) = &self.acme_ca_file {
                let pem = std::fs::read_to_string(file)
                    .with_context(|| format!("--acme-ca-file {}", file.display()))?;
                config.ca_pem = Some(pem);
            }
        }
        Ok(config)
    }
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
    /// The range replicas take their addresses from. Every project uses all of it (projects
    /// never reach each other); it must overlap no other range of the zone's world.
    #[arg(long, value_name = "CIDR", default_value = orc_mesh::range::DEFAULT_WORKLOAD_RANGE)]
    pub workload_range: ipnet::Ipv4Net,
    /// The prefix length of each node's workload subnet (24: 253 replicas per node).
    #[arg(long, value_name = "LEN", default_value_t = orc_mesh::range::DEFAULT_WORKLOAD_PREFIX_LEN)]
    pub workload_prefix: u8,
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
        let workloads = orc_mesh::WorkloadRange::new(self.workload_range, self.workload_prefix)
            .with_context(|| {
                format!(
                    "--workload-range {} --workload-prefix {}",
                    self.workload_range, self.workload_prefix
                )
            })?;
        workloads.fits(&range).with_context(|| {
            format!(
                "--workload-range {} --workload-prefix {} with --mesh-project-prefix {}",
                self.workload_range, self.workload_prefix, self.mesh_project_prefix
            )
        })?;
        let site_range = orc_partner_provider::naming::SITE_RANGE
            .parse()
            .expect("the partner's site range is a CIDR");
        Ok(orc_zone::mesh::MeshOptions {
            range,
            workloads: Some(workloads),
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
