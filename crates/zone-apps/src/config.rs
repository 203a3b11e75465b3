//! Configuration of the `core` provider: which binary each app name runs, and the
//! supervisor's timings.
//!
//! The zone's package registry (`org/name:tag` packages with linux amd64 and arm64
//! binaries) is not built yet. Until it is, an app is found by its name alone in
//! [`AppsConfig::apps`], or, for the zone's own apps ([`BUILTIN_APPS`]), next to the running
//! `orc` executable, as `cargo build` leaves them. Only org `sys` may run apps for now: a
//! package naming another org is refused, and so is a pool outside org `sys`.
//!
//! [`AppsConfig::run_as`] says which user slots run as (see [`RunAs`]): by default a user of
//! each pool's own when the zone runs as root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::policy::RestartPolicy;
use super::run_as::{DEFAULT_RUNTIME_ROOT, RunAs};

/// An app the zone ships, found next to the `orc` executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinApp {
    pub name: &'static str,
    pub args: &'static [&'static str],
    /// The params the app declares sensitive.
    pub sensitive_params: &'static [&'static str],
}

/// Apps the zone ships. The partner's sensitive params are its cloud keys.
pub const BUILTIN_APPS: &[BuiltinApp] = &[BuiltinApp {
    name: "orc-prov-partner",
    args: &["serve"],
    sensitive_params: &["hetzner_api_token", "vultr_api_key"],
}];

/// How to run one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppBinary {
    /// The executable.
    pub path: PathBuf,
    /// Arguments before any the zone adds (none yet).
    pub args: Vec<String>,
    /// Extra environment for every slot of the app (e.g. `ORC_HETZNER_ENDPOINT` pointing at
    /// an emulator). Set by the zone's operator, so not secret; never a tenant's param.
    pub env: BTreeMap<String, String>,
    /// The params the app declares sensitive (its keys): the zone refuses them as plain
    /// params, which would be shown to viewers and placed in the process environment.
    pub sensitive_params: BTreeSet<String>,
}

/// The supervisor's timings and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppsOptions {
    /// Restart backoff of a slot whose process exits.
    pub restart: RestartPolicy,
    /// How long a replaced slot must stay up before the next slot of its pool is replaced.
    pub settle: Duration,
    /// How long a process has after SIGTERM before it gets SIGKILL.
    pub stop_grace: Duration,
    /// How often the supervisor compares running slots with the store (adopting running
    /// nodes after a restart, stopping slots of ended nodes, rolling replacements).
    pub poll_interval: Duration,
    /// Lines kept in memory per slot.
    pub log_lines: usize,
}

impl Default for AppsOptions {
    fn default() -> Self {
        AppsOptions {
            restart: RestartPolicy::default(),
            settle: Duration::from_secs(10),
            stop_grace: Duration::from_secs(10),
            poll_interval: Duration::from_secs(1),
            log_lines: 2000,
        }
    }
}

/// Configuration of the `core` provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppsConfig {
    /// Apps by name (`orc-prov-partner`). Takes precedence over the built-in search.
    pub apps: BTreeMap<String, AppBinary>,
    /// Look for [`BUILTIN_APPS`] next to the current executable when not in `apps`.
    pub search_next_to_exe: bool,
    pub options: AppsOptions,
    /// Which user slots run as; [`RunAs::Auto`] (a user of the pool's own when the zone runs
    /// as root) by default.
    pub run_as: RunAs,
    /// Where the runtime dirs of slots that do not run as the zone's user go, since they
    /// cannot enter the data dir: one dir per slot, owned by the slot's uid. Created mode
    /// 0711 and owned by the zone's user. [`DEFAULT_RUNTIME_ROOT`] by default.
    pub runtime_root: PathBuf,
}

impl Default for AppsConfig {
    fn default() -> Self {
        AppsConfig {
            apps: BTreeMap::new(),
            search_next_to_exe: true,
            options: AppsOptions::default(),
            run_as: RunAs::default(),
            runtime_root: PathBuf::from(DEFAULT_RUNTIME_ROOT),
        }
    }
}

/// Why a package cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Not of the form `[org/]name[:tag]`.
    #[error("app package {package:?} is not of the form org/name:tag")]
    BadPackage { package: String },
    /// The package belongs to an org other than `sys`.
    #[error("app package {package:?}: only packages of org sys can run on this zone yet")]
    NotSys { package: String },
    /// No binary for the name.
    #[error("app {name:?} is not installed on this zone")]
    NotInstalled { name: String },
}

/// The parts of a package reference `org/name:tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRef {
    /// `sys` when the reference names no org.
    pub org: String,
    pub name: String,
    /// `default` when the reference names no tag.
    pub tag: String,
}

/// Parses `[org/]name[:tag]`.
pub fn parse_package(package: &str) -> Result<PackageRef, ResolveError> {
    let bad = || ResolveError::BadPackage {
        package: package.to_string(),
    };
    let (org, rest) = match package.split_once('/') {
        Some((org, rest)) => (org, rest),
        None => ("sys", package),
    };
    let (name, tag) = match rest.split_once(':') {
        Some((name, tag)) => (name, tag),
        None => (rest, "default"),
    };
    let word = |w: &str| {
        !w.is_empty()
            && w.len() <= 64
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if !(word(org) && word(name) && word(tag)) {
        return Err(bad());
    }
    Ok(PackageRef {
        org: org.to_string(),
        name: name.to_string(),
        tag: tag.to_string(),
    })
}

impl AppsConfig {
    /// The params `package` declares sensitive; none when it does not resolve.
    pub fn sensitive_params(&self, package: &str) -> BTreeSet<String> {
        self.resolve(package)
            .map(|app| app.sensitive_params)
            .unwrap_or_default()
    }

    /// The binary a package runs. Its `env` also carries [`AppsConfig::run_as`] and
    /// [`AppsConfig::runtime_root`] for the supervisor, under a name that is not a valid
    /// variable name and never reaches a process.
    pub fn resolve(&self, package: &str) -> Result<AppBinary, ResolveError> {
        let reference = parse_package(package)?;
        if reference.org != "sys" {
            return Err(ResolveError::NotSys {
                package: package.to_string(),
            });
        }
        let found = self.apps.get(&reference.name).cloned().or_else(|| {
            self.search_next_to_exe
                .then(|| builtin_next_to_exe(&reference.name))
                .flatten()
        });
        found.ok_or(ResolveError::NotInstalled {
            name: reference.name,
        })
    }
}

/// A built-in app found in the directory of the running executable (or its parent, when the
/// executable is a test binary in `target/*/deps`).
pub fn builtin_next_to_exe(name: &str) -> Option<AppBinary> {
    let app = BUILTIN_APPS.iter().find(|app| app.name == name)?;
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let candidates = [Some(dir), dir.parent().filter(|_| dir.ends_with("deps"))];
    candidates
        .into_iter()
        .flatten()
        .map(|d: &Path| d.join(name))
        .find(|p| p.is_file())
        .map(|path| AppBinary {
            path,
            args: app.args.iter().map(ToString::to_string).collect(),
            env: BTreeMap::new(),
            sensitive_params: app
                .sensitive_params
                .iter()
                .map(ToString::to_string)
                .collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_references_parse_with_defaults() {
        assert_eq!(
            parse_package("sys/orc-prov-partner:default").unwrap(),
            PackageRef {
                org: "sys".into(),
                name: "orc-prov-partner".into(),
                tag: "default".into()
            }
        );
        assert_eq!(parse_package("web").unwrap().org, "sys");
        assert_eq!(parse_package("web").unwrap().tag, "default");
        assert!(parse_package("a/b/c").is_err());
        assert!(parse_package("sys/:x").is_err());
        assert!(parse_package("sys/a b").is_err());
    }

    #[test]
    fn only_sys_packages_resolve_and_unknown_names_are_named() {
        let mut config = AppsConfig {
            search_next_to_exe: false,
            ..AppsConfig::default()
        };
        config.apps.insert(
            "echo".into(),
            AppBinary {
                path: "/bin/echo".into(),
                args: vec![],
                env: BTreeMap::new(),
                sensitive_params: Default::default(),
            },
        );
        assert_eq!(
            config.resolve("sys/echo:v1").unwrap().path,
            Path::new("/bin/echo")
        );
        assert!(matches!(
            config.resolve("acme/echo:v1"),
            Err(ResolveError::NotSys { .. })
        ));
        assert_eq!(
            config.resolve("sys/nope").unwrap_err().to_string(),
            "app \"nope\" is not installed on this zone"
        );
    }
}
