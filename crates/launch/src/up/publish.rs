//! The apps `orc up` publishes to the zone's registry and runs as pools of `sys/sys`: their
//! manifests, their pools (found, created or reconfigured), and the partner's scope and price.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use orc_zone::model::{AppSpec, Name};
use orc_zone_api_types::views::{
    AppTagView, ChangeScope, CreatePool, PoolView, ProviderView, ReconfigurePool, SetPricing,
    ShapeView,
};
use orc_zone_model::registry::{AppManifest, PackageRef, Platform};

use orc_client::client::{CallError, Client, segment};
use orc_client::commands::registry::{BinaryArg, publish};
use orc_zone::zone::Zone;

use super::PARTNER_POOL;

/// An app `orc up` publishes to the zone's registry and runs as pool `sys/sys/<pool>`.
#[derive(Debug, Clone)]
pub(super) struct Published {
    pub(super) pool: &'static str,
    pub(super) size: u32,
    /// The binary for this host's platform.
    pub(super) path: PathBuf,
    /// The manifest, with the arguments `path` runs with.
    pub(super) manifest: AppManifest,
    /// The package, the params and the sensitive params of its pool.
    pub(super) app: AppSpec,
}

impl Published {
    /// Publishes the binary and the manifest as the pool's package (the registry keeps a
    /// binary it holds already without sending it again), versioned `<version>+local`. A tag
    /// an operator pushed (its version is not `+local`) is kept: the pool runs what was
    /// pushed, and this returns `false`.
    pub(super) async fn publish(&self, client: &Client) -> anyhow::Result<bool> {
        let reference: PackageRef = self
            .app
            .package
            .parse()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(tag) = tagged(client, &reference).await?
            && !tag.version.ends_with(LOCAL_VERSION)
        {
            tracing::info!(package = %reference, version = %tag.version, "keeping the pushed package");
            return Ok(false);
        }
        let mut manifest = self.manifest.clone();
        manifest.version = format!("{}{LOCAL_VERSION}", manifest.version);
        let platform = Platform::host()
            .context("this machine's platform is neither linux/amd64 nor linux/arm64")?;
        let binary = BinaryArg {
            platform,
            path: self.path.clone(),
        };
        publish(client, &reference, &[binary], manifest, &|line| {
            tracing::info!("{line}");
        })
        .await?;
        Ok(true)
    }
}

/// What the version of a package `orc up` published from local binaries ends with.
pub const LOCAL_VERSION: &str = "+local";

/// The partner's manifest, as `scripts/package-partner-provider.sh` publishes it.
pub fn partner_manifest() -> AppManifest {
    AppManifest::from_json(include_bytes!("../../../partner-provider/orc-app.json"))
        .expect("the partner's manifest parses (a test checks it)")
}

/// The manifest of a standalone provider's binary.
pub(super) fn standalone_manifest(binary: &str) -> anyhow::Result<AppManifest> {
    let text: &[u8] = match binary {
        "orc-prov-hetzner" => include_bytes!("../../../prov-hetzner/orc-app.json"),
        "orc-prov-vultr" => include_bytes!("../../../prov-vultr/orc-app.json"),
        "orc-prov-robot" => include_bytes!("../../../prov-robot/orc-app.json"),
        "orc-prov-static" => include_bytes!("../../../prov-static/orc-app.json"),
        other => bail!("no manifest for {other}"),
    };
    AppManifest::from_json(text).with_context(|| format!("the manifest of {binary}"))
}

/// `manifest`, with the arguments the binary `orc up` publishes runs with (`orc` itself
/// embeds every provider under a subcommand of its own).
pub(super) fn manifest_running(mut manifest: AppManifest, args: Vec<String>) -> AppManifest {
    manifest.args = args;
    manifest
}

/// A client of the zone's API with its admin token, trusting its CA.
pub(super) fn zone_client(zone: &Zone) -> anyhow::Result<Client> {
    let ca = match zone.ca_file() {
        Some(path) => Some(orc_tls::PinnedCa::from_file(&path)?),
        None => None,
    };
    Client::new(
        &zone.url(),
        Some(zone.admin_token().expose().to_string()),
        ca.as_ref(),
    )
}

pub(super) fn name(text: &str) -> anyhow::Result<Name> {
    text.parse()
        .with_context(|| format!("{text:?} is not a valid name"))
}

/// Finds pool `sys/sys/<pool>` through the API, or requests it on `core` with its size,
/// running its package with its params. A pool that exists keeps its size; it is
/// reconfigured (a rolling replacement) when the package's tag now names another digest or
/// its params differ. Returns the pool and whether it was created.
pub(super) async fn ensure_app_pool(
    client: &Client,
    app: &Published,
) -> anyhow::Result<(PoolView, bool)> {
    let pools = "/api/orgs/sys/projects/sys/pools";
    let url = format!("{pools}/{}", segment(app.pool));
    let existing: Result<PoolView, CallError> = client.get(&url).await;
    match existing {
        Ok(view) => {
            let digest = tagged_digest(client, &app.app.package).await?;
            let current = view.app.as_ref();
            let sensitive: Vec<String> = app.app.sensitive.0.keys().cloned().collect();
            let same = current.is_some_and(|a| {
                a.package == app.app.package
                    && a.digest == digest
                    && a.params == app.app.params
                    && a.sensitive_params == sensitive
            });
            if same {
                return Ok((view, false));
            }
            let body = ReconfigurePool {
                params: app.app.params.clone(),
                sensitive_params: Some(app.app.sensitive.0.clone()),
                sensitive_params_update: None,
                generation: Some(view.generation),
            };
            let view: PoolView = client
                .post(&format!("{url}/reconfigure"), &body)
                .await
                .with_context(|| format!("cannot reconfigure pool sys/sys/{}", app.pool))?;
            Ok((view, false))
        }
        Err(CallError::Api { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => {
            let body = CreatePool {
                name: app.pool.to_string(),
                provider: orc_zone_model::CORE_PROVIDER_NAME.to_string(),
                size: app.size,
                shape: ShapeView {
                    cpu: 1,
                    mem: 1,
                    arch: None,
                    disks: Vec::new(),
                },
                class: orc_zone::model::CORE_LOCAL_SITE.to_string(),
                os: "none".to_string(),
                public: false,
                endpoints: Vec::new(),
                app: Some(app.app.package.clone()),
                params: app.app.params.clone(),
                sensitive_params: app.app.sensitive.0.clone(),
                placement: BTreeMap::new(),
                ssh_keys: Vec::new(),
            };
            let view: PoolView = client
                .post(pools, &body)
                .await
                .with_context(|| format!("cannot create pool sys/sys/{}", app.pool))?;
            Ok((view, true))
        }
        Err(error) => Err(error).with_context(|| format!("cannot read pool sys/sys/{}", app.pool)),
    }
}

/// The digest `package`'s tag names in the registry.
pub(super) async fn tagged_digest(
    client: &Client,
    package: &str,
) -> anyhow::Result<Option<String>> {
    let reference: PackageRef = package.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(tagged(client, &reference).await?.map(|t| t.digest))
}

/// The registry's tag `reference`, if there is one.
pub(super) async fn tagged(
    client: &Client,
    reference: &PackageRef,
) -> anyhow::Result<Option<AppTagView>> {
    let apps: Vec<orc_zone_api_types::views::RegistryAppView> = client
        .get(&format!(
            "/api/orgs/{}/apps",
            segment(reference.org.as_str())
        ))
        .await
        .context("cannot list the registry")?;
    Ok(apps
        .into_iter()
        .flat_map(|a| a.tags)
        .find(|t| t.package == reference.to_string()))
}

/// Steps 3 and 4 of deploying the partner: its provider widened to zone scope, so every
/// project may deploy from it, and given a markup of 0 when it has no strategy, so its nodes
/// carry prices (a strategy an operator set is kept).
pub(super) async fn widen_and_price_partner(client: &Client) -> anyhow::Result<()> {
    let url = format!("/api/orgs/sys/projects/sys/providers/{PARTNER_POOL}");
    let provider: ProviderView = client
        .get(&url)
        .await
        .context("cannot read the partner's provider")?;
    if provider.scope != "zone" {
        let _: ProviderView = client
            .post(
                &format!("{url}/change-scope"),
                &ChangeScope {
                    scope: "zone".to_string(),
                },
            )
            .await
            .context("cannot widen the partner's provider to zone scope")?;
    }
    if provider.pricing.markup.is_none() {
        let _: ProviderView = client
            .put(
                &format!("{url}/pricing"),
                &SetPricing {
                    markup: Some("0".to_string()),
                },
            )
            .await
            .context("cannot set the partner's markup")?;
    }
    Ok(())
}
