//! The providers `orc` carries inside itself: `orc prov-hetzner serve …` runs what
//! `orc-prov-hetzner serve …` runs, so `orc up` and a zone's app slots work where only `orc`
//! was built.

use std::ffi::{OsStr, OsString};
use std::process::ExitCode;

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
    main_from: fn(Vec<OsString>) -> anyhow::Result<()>,
}

/// Every provider `orc` embeds, so that `orc up` and `orc zone serve` work where only `orc`
/// was built.
pub const EMBEDDED: [Embedded; 5] = [
    Embedded {
        arg: EMBEDDED_PARTNER,
        binary: "orc-prov-partner",
        main_from: orc_partner_provider::cli::main_from::<_, OsString>,
    },
    Embedded {
        arg: "prov-hetzner",
        binary: "orc-prov-hetzner",
        main_from: orc_prov_hetzner::cli::main_from::<_, OsString>,
    },
    Embedded {
        arg: "prov-vultr",
        binary: "orc-prov-vultr",
        main_from: orc_prov_vultr::cli::main_from::<_, OsString>,
    },
    Embedded {
        arg: "prov-robot",
        binary: "orc-prov-robot",
        main_from: orc_prov_robot::cli::main_from::<_, OsString>,
    },
    Embedded {
        arg: "prov-static",
        binary: "orc-prov-static",
        main_from: orc_prov_static::cli::main_from::<_, OsString>,
    },
];

/// Runs the embedded provider `args` name (`orc prov-hetzner …`), if the first argument
/// names one; `None` when it names none, and the caller goes on as `orc`.
pub fn run_embedded(mut args: impl Iterator<Item = OsString>) -> Option<ExitCode> {
    let _orc = args.next();
    let first = args.next()?;
    let embedded = EMBEDDED
        .iter()
        .find(|e| first.as_os_str() == OsStr::new(e.arg))?;
    let args = std::iter::once(embedded.binary.into())
        .chain(args)
        .collect();
    Some(match (embedded.main_from)(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    })
}
