//! Configuration of the `core` provider: what its operator sets about apps, and the
//! supervisor's timings.
//!
//! Apps come from the zone's registry: a pool names `org/name:tag`, the zone records the
//! digest that tag pointed at, and slots run that package's binary for the host's platform
//! (see [`crate::blobs`]). An operator may also configure an app by name outside the
//! registry ([`AppsConfig::apps`], for development), and set extra environment for an
//! app's slots ([`AppsConfig::env`], e.g. where an emulated cloud is). Only org `sys` may
//! run apps for now: a package naming another org is refused, and so is a pool outside
//! org `sys`.
//!
//! [`AppsConfig::run_as`] says which user slots run as (see [`RunAs`]): by default a user of
//! each pool's own when the zone runs as root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::policy::RestartPolicy;
use super::run_as::{DEFAULT_RUNTIME_ROOT, RunAs};

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
    /// Apps configured by name (`orc-prov-partner`) outside the registry: a pool whose
    /// package is not published runs this binary.
    pub apps: BTreeMap<String, AppBinary>,
    /// Extra environment for every slot of an app, by app name, whether it comes from the
    /// registry or from [`AppsConfig::apps`]. Set by the operator, so not secret.
    pub env: BTreeMap<String, BTreeMap<String, String>>,
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
            env: BTreeMap::new(),
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
    /// Neither published in the registry nor configured by name.
    #[error(
        "app {package} is not published in this zone's registry (orc registry push) nor configured on it"
    )]
    NotInstalled { package: String },
    /// The package has no binary for the platform the zone runs apps on.
    #[error("app {package} has no binary for {platform}, the platform this zone runs apps on")]
    NoPlatform { package: String, platform: String },
    /// The registry's binary cannot run.
    #[error("app {package}: {why}")]
    Binary { package: String, why: String },
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

    /// The binary an app configured by name runs ([`AppsConfig::apps`]), with the
    /// operator's environment for it.
    pub fn resolve(&self, package: &str) -> Result<AppBinary, ResolveError> {
        let reference = parse_package(package)?;
        if reference.org != "sys" {
            return Err(ResolveError::NotSys {
                package: package.to_string(),
            });
        }
        let mut binary =
            self.apps
                .get(&reference.name)
                .cloned()
                .ok_or(ResolveError::NotInstalled {
                    package: package.to_string(),
                })?;
        binary.env.extend(self.env_of(&reference.name));
        Ok(binary)
    }

    /// The operator's extra environment for the slots of app `name`.
    pub fn env_of(&self, name: &str) -> BTreeMap<String, String> {
        self.env.get(name).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

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
        let mut config = AppsConfig::default();
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
            "app sys/nope is not published in this zone's registry (orc registry push) nor configured on it"
        );
    }
}
