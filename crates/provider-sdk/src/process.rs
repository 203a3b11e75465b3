//! Process glue every provider command line needs around [`run_provider`](crate::run_provider).
//!
//! A provider binary is a thin shell: it parses its arguments, builds its
//! [`Provider`](crate::Provider) and hands it to the runner. What surrounds that is the same in every
//! provider process and lives here once: the async runtime, the host name a replica reports,
//! the arguments of `serve` that say how to reach the zone ([`ZoneArgs`]) and the zone
//! credentials the app runner hands over (`ORC_ZONE_TOKEN_FILE` and `ORC_ZONE_PROJECT`), logging to stderr, the hello of a provider that serves one cloud
//! account, string params with a default, and the listing of machine offers for operators.
//!
//! Invariants: the zone token is read from its file and goes straight into
//! [`ZoneCredentials`]; no error, log line or `Debug` output here carries it, and errors name
//! the file or variable instead. Nothing here writes to stdout except [`write_offers`], and
//! only into the writer it is given.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use orc_proto::{EmptyId, ProviderName, Replica, ResourceUri};

use crate::machine::MachineOffer;
use crate::provider::HelloInfo;
use crate::transport::{InvalidCredentials, ZoneCredentials};

/// Worker threads of a provider process's runtime: providers mostly wait on the network.
const WORKER_THREADS: usize = 2;

/// The host name reported when neither `HOSTNAME` nor `/etc/hostname` gives one.
const UNKNOWN_HOST: &str = "unknown-host";

/// The log filter used when `RUST_LOG` is unset or invalid.
const DEFAULT_LOG_FILTER: &str = "info";

/// What can go wrong while setting a provider process up.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The tokio runtime could not start.
    #[error("starting the async runtime")]
    Runtime(#[source] io::Error),
    /// The zone token file could not be read.
    #[error("reading the zone token file {}", path.display())]
    ReadTokenFile {
        /// The file named by `ORC_ZONE_TOKEN_FILE` or `--token-file`.
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The token in the file, or the project given with it, is not acceptable to the zone.
    #[error("zone token file {}", path.display())]
    InvalidCredentials {
        /// The file the token came from.
        path: PathBuf,
        #[source]
        source: InvalidCredentials,
    },
    /// The zone's CA certificate could not be read.
    #[error(transparent)]
    ZoneCa(#[from] orc_tls::PinError),
    /// The provider's name was empty.
    #[error("the provider name is empty")]
    EmptyProviderName(#[source] EmptyId),
    /// The provider's resource URI was empty.
    #[error("the resource URI is empty")]
    EmptyResourceUri(#[source] EmptyId),
}

/// Builds the multi-threaded tokio runtime a provider process runs in (two workers, I/O
/// and timers enabled).
pub fn runtime() -> Result<tokio::runtime::Runtime, ProcessError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .map_err(ProcessError::Runtime)
}

/// The name of the host this process runs on: `HOSTNAME` when set and not blank, else the
/// trimmed content of `/etc/hostname`, else `unknown-host`.
pub fn host_name() -> String {
    env_value("HOSTNAME")
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| UNKNOWN_HOST.to_string())
}

/// This replica as the zone sees it: [`host_name`], this process's id and `slot`.
pub fn replica(slot: u32) -> Replica {
    Replica {
        host: host_name(),
        pid: std::process::id(),
        slot,
    }
}

/// The value of the environment variable `var`, or `default` when it is unset, not
/// unicode, or blank.
pub fn env_or(var: &str, default: &str) -> String {
    env_value(var).unwrap_or_else(|| default.to_string())
}

fn env_value(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Reads the zone credentials from the token file and project the app runner hands a
/// provider (`ORC_ZONE_TOKEN_FILE`, `ORC_ZONE_PROJECT`).
///
/// Without both there are none: the stream then runs unauthenticated. The token is the
/// file's content with surrounding whitespace trimmed; errors name the file, never its
/// content.
pub fn zone_credentials(
    token_file: Option<&Path>,
    project: Option<&str>,
) -> Result<Option<ZoneCredentials>, ProcessError> {
    let (Some(token_file), Some(project)) = (token_file, project) else {
        return Ok(None);
    };
    let token =
        std::fs::read_to_string(token_file).map_err(|source| ProcessError::ReadTokenFile {
            path: token_file.to_path_buf(),
            source,
        })?;
    let credentials = ZoneCredentials::new(token.trim(), project).map_err(|source| {
        ProcessError::InvalidCredentials {
            path: token_file.to_path_buf(),
            source,
        }
    })?;
    Ok(Some(credentials))
}

/// What a provider shows and trusts when it dials the zone: its credentials and the zone's
/// CA.
#[derive(Debug, Clone, Default)]
pub struct ZoneAccess {
    /// Token and project, when the app runner handed them over.
    pub credentials: Option<ZoneCredentials>,
    /// The zone's CA, for an `https://` endpoint.
    pub ca: Option<orc_tls::PinnedCa>,
}

/// How a provider's `serve` reaches the zone: what the zone's app runner hands a provider
/// process (`ORC_ZONE_ENDPOINT`, `ORC_SLOT`, `ORC_ZONE_TOKEN_FILE`, `ORC_ZONE_PROJECT`,
/// `ORC_ZONE_CA_FILE`), or the same as flags. Every provider's command line takes it with
/// `#[command(flatten)]`.
#[derive(Debug, Clone, clap::Args)]
pub struct ZoneArgs {
    /// The zone's provider endpoint, e.g. https://zone.internal:7400.
    #[arg(long, env = "ORC_ZONE_ENDPOINT")]
    pub zone: String,
    /// This replica's slot in its app pool.
    #[arg(long, env = "ORC_SLOT", default_value_t = 0)]
    pub slot: u32,
    /// File holding the zone API token the stream authenticates with.
    #[arg(long, env = "ORC_ZONE_TOKEN_FILE", requires = "project")]
    pub token_file: Option<PathBuf>,
    /// The project (`<org>/<project>`) the provider registers in.
    #[arg(long, env = "ORC_ZONE_PROJECT", requires = "token_file")]
    pub project: Option<String>,
    /// The zone's CA certificate (its ca.pem), which an https:// endpoint must present
    /// a certificate signed by.
    #[arg(long, env = "ORC_ZONE_CA_FILE")]
    pub zone_ca_file: Option<PathBuf>,
}

impl ZoneArgs {
    /// [`zone_credentials`] and [`zone_ca`] of these arguments together.
    pub fn access(&self) -> Result<ZoneAccess, ProcessError> {
        Ok(ZoneAccess {
            credentials: zone_credentials(self.token_file.as_deref(), self.project.as_deref())?,
            ca: zone_ca(self.zone_ca_file.as_deref())?,
        })
    }
}

/// Reads the zone's CA certificate from the file the app runner hands a provider
/// (`ORC_ZONE_CA_FILE`), if one is named. An `https://` zone endpoint needs it.
pub fn zone_ca(path: Option<&Path>) -> Result<Option<orc_tls::PinnedCa>, ProcessError> {
    path.map(orc_tls::PinnedCa::from_file)
        .transpose()
        .map_err(ProcessError::ZoneCa)
}

/// Installs the process-wide log subscriber: formatted lines on stderr, filtered by
/// `RUST_LOG` (default `info`), coloured only on a terminal. Stdout stays free for command
/// output.
///
/// # Panics
///
/// When a global subscriber is already installed; call it once, at the start of `serve`.
pub fn init_stderr_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(io::stderr)
        // Colours only for a person at a terminal: a slot's log or a file gets plain text.
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .init();
}

/// The hello of a provider serving one cloud account under `name`: resource URI
/// `urn:orc:provider:<name>`, this replica in `slot`, and the binary's `version`.
pub fn one_cloud_hello(name: &str, slot: u32, version: &str) -> Result<HelloInfo, ProcessError> {
    Ok(HelloInfo {
        provider: ProviderName::new(name).map_err(ProcessError::EmptyProviderName)?,
        resource_uri: ResourceUri::new(format!("urn:orc:provider:{name}"))
            .map_err(ProcessError::EmptyResourceUri)?,
        replica: replica(slot),
        version: version.to_string(),
    })
}

/// How [`write_offers`] lays offers out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferFormat {
    /// An aligned table with a header: location, plan, vCPUs, memory in GiB (fractions
    /// kept), arch, disk, hourly amount and currency, `yes`/`no` availability.
    Table,
    /// One JSON object per offer and line, the amount as a decimal string.
    JsonLines,
    /// Tab-separated with a header: plan, location, vCPUs, memory in whole GiB,
    /// `true`/`false` availability, hourly price with its period.
    TabSeparated,
}

/// Writes `offers` to `out` in `format`, in the order given.
pub fn write_offers(
    out: &mut dyn Write,
    offers: &[MachineOffer],
    format: OfferFormat,
) -> io::Result<()> {
    match format {
        OfferFormat::Table => write_table(out, offers),
        OfferFormat::JsonLines => write_json_lines(out, offers),
        OfferFormat::TabSeparated => write_tab_separated(out, offers),
    }
}

fn write_table(out: &mut dyn Write, offers: &[MachineOffer]) -> io::Result<()> {
    writeln!(
        out,
        "{:<8} {:<8} {:>5} {:>8} {:<7} {:>6} {:>12}  available",
        "location", "plan", "vcpu", "mem_gib", "arch", "disk", "hourly"
    )?;
    for o in offers {
        let memory = rust_decimal::Decimal::from(o.memory_mib) / rust_decimal::Decimal::from(1024);
        writeln!(
            out,
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
        )?;
    }
    Ok(())
}

fn write_json_lines(out: &mut dyn Write, offers: &[MachineOffer]) -> io::Result<()> {
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
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn write_tab_separated(out: &mut dyn Write, offers: &[MachineOffer]) -> io::Result<()> {
    writeln!(out, "plan\tlocation\tvcpus\tmemory_gib\tavailable\thourly")?;
    for o in offers {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}",
            o.plan,
            o.location,
            o.vcpus,
            o.memory_mib / 1024,
            o.available,
            o.hourly
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_common::{Architecture, Currency, Money, Period};
    use rust_decimal::Decimal;

    fn offer(plan: &str, memory_mib: u64, amount: Decimal, available: bool) -> MachineOffer {
        MachineOffer {
            plan: plan.to_string(),
            location: "fsn1".to_string(),
            vcpus: 2,
            memory_mib,
            arch: Architecture::X86_64,
            disk_gb: 40,
            hourly: Money {
                amount,
                currency: Currency::EUR,
                period: Period::Hour,
            },
            monthly: None,
            available,
        }
    }

    fn offers() -> Vec<MachineOffer> {
        vec![
            offer("cx23", 4096, Decimal::new(60, 4), true),
            offer("cx11", 512, Decimal::new(50, 4), false),
        ]
    }

    fn written(format: OfferFormat) -> String {
        let mut out = Vec::new();
        write_offers(&mut out, &offers(), format).expect("writing into a Vec");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn table_aligns_columns_and_keeps_memory_fractions() {
        let text = written(OfferFormat::Table);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "location plan      vcpu  mem_gib arch      disk       hourly  available",
                "fsn1     cx23         2        4 x86_64      40   0.0060 EUR  yes",
                "fsn1     cx11         2      0.5 x86_64      40   0.0050 EUR  no",
            ]
        );
    }

    #[test]
    fn json_lines_carry_the_amount_as_a_string() {
        let text = written(OfferFormat::JsonLines);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["plan"], "cx23");
        assert_eq!(lines[0]["hourly"], "0.0060");
        assert_eq!(lines[0]["currency"], "EUR");
        assert_eq!(lines[0]["memory_mib"], 4096);
        assert_eq!(lines[1]["available"], false);
    }

    #[test]
    fn tab_separated_rounds_memory_down_to_whole_gib() {
        let text = written(OfferFormat::TabSeparated);
        assert_eq!(
            text,
            "plan\tlocation\tvcpus\tmemory_gib\tavailable\thourly\n\
             cx23\tfsn1\t2\t4\ttrue\t0.006 EUR/hour\n\
             cx11\tfsn1\t2\t0\tfalse\t0.005 EUR/hour\n"
        );
    }

    #[test]
    fn no_credentials_without_both_file_and_project() {
        let missing = Path::new("/nonexistent/orc-zone-token");
        assert!(zone_credentials(None, None).expect("none").is_none());
        assert!(
            zone_credentials(Some(missing), None)
                .expect("none")
                .is_none()
        );
        assert!(
            zone_credentials(None, Some("acme/web"))
                .expect("none")
                .is_none()
        );
    }

    #[test]
    fn credentials_come_from_the_trimmed_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "orc_zone_secret\n").expect("write token");
        let credentials = zone_credentials(Some(&path), Some("acme/web"))
            .expect("valid credentials")
            .expect("credentials present");
        assert_eq!(
            credentials,
            ZoneCredentials::new("orc_zone_secret", "acme/web").expect("valid")
        );
    }

    #[test]
    fn an_unreadable_token_file_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("absent");
        let err = zone_credentials(Some(&path), Some("acme/web")).expect_err("no file");
        assert!(matches!(err, ProcessError::ReadTokenFile { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("reading the zone token file {}", path.display())
        );
    }

    #[test]
    fn a_bad_token_is_reported_by_file_never_by_content() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "secret-part\u{7}tail").expect("write token");
        let err = zone_credentials(Some(&path), Some("acme/web")).expect_err("bad token");
        assert!(
            matches!(err, ProcessError::InvalidCredentials { .. }),
            "{err:?}"
        );
        let mut chain = format!("{err} {err:?}");
        let mut source = std::error::Error::source(&err);
        while let Some(e) = source {
            chain.push_str(&format!(" {e} {e:?}"));
            source = e.source();
        }
        assert!(chain.contains(&path.display().to_string()), "{chain}");
        assert!(!chain.contains("secret-part"), "{chain}");
    }

    #[test]
    fn one_cloud_hello_names_the_provider_urn() {
        let hello = one_cloud_hello("hetzner-eu", 3, "1.2.3").expect("valid hello");
        assert_eq!(hello.provider.as_str(), "hetzner-eu");
        assert_eq!(hello.resource_uri.as_str(), "urn:orc:provider:hetzner-eu");
        assert_eq!(hello.replica.slot, 3);
        assert_eq!(hello.replica.pid, std::process::id());
        assert!(!hello.replica.host.is_empty());
        assert_eq!(hello.version, "1.2.3");
    }

    #[test]
    fn one_cloud_hello_refuses_an_empty_name() {
        let err = one_cloud_hello("", 0, "1.2.3").expect_err("empty name");
        assert!(matches!(err, ProcessError::EmptyProviderName(_)), "{err:?}");
        assert_eq!(err.to_string(), "the provider name is empty");
    }

    #[test]
    fn env_or_falls_back_when_unset() {
        assert_eq!(
            env_or("ORC_PROCESS_TEST_VARIABLE_NEVER_SET", "fallback"),
            "fallback"
        );
    }
}
