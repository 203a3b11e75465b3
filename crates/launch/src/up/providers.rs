//! The providers `orc up` runs: the partner's app spec and admin page, the standalone
//! providers over the emulators, and `--netns` mode's static hosts.

use std::collections::BTreeMap;

use orc_zone::model::{AppSpec, SensitiveParams};

use super::secrets::Secrets;
use super::{EMULATOR_ACCOUNT, EMULATOR_TOKEN, PARTNER_PACKAGE, PARTNER_POOL};

/// Where the standalone providers' emulators are.
#[derive(Debug)]
pub(super) struct StandaloneUrls {
    pub(super) hetzner: String,
    pub(super) vultr: String,
    pub(super) robot: String,
    /// Whether the Robot provider installs its servers at deploy (`"install": "deploy"`).
    pub(super) robot_installs: bool,
}

/// A standalone provider `orc up` runs: pool `sys/sys/<name>` on `core`, one slot.
#[derive(Debug, Clone)]
pub(super) struct Standalone {
    /// The provider's (and its pool's) name.
    pub(super) name: &'static str,
    /// Its binary, also its app name.
    pub(super) binary: &'static str,
    /// The argument under which `orc` embeds it.
    pub(super) embedded_arg: &'static str,
    pub(super) app: AppSpec,
}

pub(super) fn standalone_providers(
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
pub(super) fn static_provider(
    secrets: &Secrets,
    hosts: &orc_emu::static_hosts::StaticHosts,
) -> Standalone {
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
