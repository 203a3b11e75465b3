//! `orc app`: the zone's app registry. `push` publishes `org/name:tag` (each platform's
//! binary, sent only when the registry does not hold it yet, then the manifest); `list`,
//! `show` and `delete` read and remove tags.
//!
//! Scripts give the token in `ORC_REGISTRY_TOKEN` (a value, never an argument); it takes
//! the place of the usual token for these commands when no `--token-file` is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use orc_zone_api_types::views::{
    BlobView, PushPackage, PushedView, RegistryAppDetail, RegistryAppView,
};
use orc_zone_model::registry::{AppManifest, Digest, PackageRef, Platform};
use sha2::{Digest as _, Sha256};

use super::{client, print_json};
use crate::ConnArgs;
use crate::client::{CallError, Client, segment};
use crate::table::Table;

/// The variable scripts put the registry token in.
pub const REGISTRY_TOKEN_VAR: &str = "ORC_REGISTRY_TOKEN";

/// The client, acting with `ORC_REGISTRY_TOKEN` when it is set and no token file is named.
fn registry_client(conn: &ConnArgs) -> anyhow::Result<Client> {
    let client = client(conn)?;
    match std::env::var(REGISTRY_TOKEN_VAR) {
        Ok(token) if conn.token_file.is_none() && !token.trim().is_empty() => {
            Ok(client.with_token(token.trim().to_string()))
        }
        _ => Ok(client),
    }
}

/// One `--binary PLATFORM=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryArg {
    pub platform: Platform,
    pub path: PathBuf,
}

impl std::str::FromStr for BinaryArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (platform, path) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not PLATFORM=PATH (linux/amd64=target/orc-app)"))?;
        let platform = platform.parse::<Platform>().map_err(|e| e.to_string())?;
        if path.is_empty() {
            return Err(format!("{s:?} names no file after '='"));
        }
        Ok(BinaryArg {
            platform,
            path: PathBuf::from(path),
        })
    }
}

fn reference(text: &str) -> anyhow::Result<PackageRef> {
    text.parse::<PackageRef>()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// `orc registry push ORG/NAME:TAG --binary PLATFORM=PATH… [--manifest FILE]`.
pub async fn push(
    conn: &ConnArgs,
    package: &str,
    binaries: &[BinaryArg],
    manifest: Option<&Path>,
) -> anyhow::Result<()> {
    let reference = reference(package)?;
    let manifest = match manifest {
        Some(path) => {
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read the manifest {}", path.display()))?;
            AppManifest::from_json(&text)
                .with_context(|| format!("the manifest {}", path.display()))?
        }
        None => AppManifest::bare(reference.name.as_str(), &reference.tag),
    };
    let client = registry_client(conn)?;
    let pushed = publish(&client, &reference, binaries, manifest, &|line| {
        outln!("{line}")
    })
    .await?;
    if conn.json {
        return print_json(&pushed);
    }
    match &pushed.moved_from {
        Some(before) => outln!(
            "published {} as {} (the tag named {before} before)",
            pushed.tag.package,
            pushed.tag.digest
        ),
        None => outln!("published {} as {}", pushed.tag.package, pushed.tag.digest),
    }
    Ok(())
}

/// Publishes `reference` through `client`: sends each binary the registry lacks, then the
/// manifest, and returns what the registry did. `progress` gets one line per binary.
pub async fn publish(
    client: &Client,
    reference: &PackageRef,
    binaries: &[BinaryArg],
    manifest: AppManifest,
    progress: &dyn Fn(String),
) -> anyhow::Result<PushedView> {
    if binaries.is_empty() {
        bail!("give at least one --binary PLATFORM=PATH (linux/amd64 or linux/arm64)");
    }
    let mut seen = BTreeMap::new();
    for b in binaries {
        if let Some(other) = seen.insert(b.platform, &b.path) {
            bail!(
                "--binary names {} twice ({} and {})",
                b.platform,
                other.display(),
                b.path.display()
            );
        }
    }
    if manifest.name != reference.name.as_str() {
        bail!(
            "the manifest is for app {:?}, but it would be pushed as {}",
            manifest.name,
            reference.name
        );
    }
    let org = segment(reference.org.as_str());
    let mut digests = BTreeMap::new();
    for b in binaries {
        let (bytes, digest) = read_binary(&b.path)?;
        let blob_url = format!(
            "/api/orgs/{org}/registry/blobs/{}",
            segment(digest.as_str())
        );
        let held: Result<BlobView, CallError> = client.get(&blob_url).await;
        match held {
            Ok(_) => progress(format!(
                "{}: {} ({}) is in the registry already",
                b.platform,
                digest,
                size_words(bytes.len() as u64)
            )),
            Err(CallError::Api { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => {
                progress(format!(
                    "{}: sending {} ({}, {})",
                    b.platform,
                    b.path.display(),
                    size_words(bytes.len() as u64),
                    digest
                ));
                let _: BlobView = client
                    .put_bytes(&blob_url, bytes)
                    .await
                    .with_context(|| format!("sending the {} binary", b.platform))?;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("asking the registry of org {} for {digest}", reference.org)
                });
            }
        }
        digests.insert(b.platform.to_string(), digest.to_string());
    }
    let body = PushPackage {
        manifest,
        binaries: digests,
    };
    let url = format!(
        "/api/orgs/{org}/apps/{}/tags/{}",
        segment(reference.name.as_str()),
        segment(&reference.tag)
    );
    client
        .put(&url, &body)
        .await
        .with_context(|| format!("publishing {reference}"))
}

/// The file's bytes and SHA-256, or an error naming the file.
fn read_binary(path: &Path) -> anyhow::Result<(Vec<u8>, Digest)> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the binary {}", path.display()))?;
    if bytes.is_empty() {
        bail!("the binary {} is empty", path.display());
    }
    let digest = Digest::from_sha256(Sha256::digest(&bytes).into());
    Ok((bytes, digest))
}

fn size_words(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// `orc registry list [ORG]`.
pub async fn list(conn: &ConnArgs, org: Option<&str>) -> anyhow::Result<()> {
    let client = registry_client(conn)?;
    let org = match org {
        Some(org) => org.to_string(),
        None => super::default_project(&client).await?.0,
    };
    let apps: Vec<RegistryAppView> = client
        .get(&format!("/api/orgs/{}/apps", segment(&org)))
        .await
        .with_context(|| format!("listing the apps of org {org}"))?;
    if conn.json {
        return print_json(&apps);
    }
    out!("{}", apps_table(&org, &apps));
    Ok(())
}

fn apps_table(org: &str, apps: &[RegistryAppView]) -> String {
    if apps.is_empty() {
        return format!("The registry of org {org} holds no app yet (orc registry push).\n");
    }
    let mut t = Table::new(&["PACKAGE", "VERSION", "DIGEST", "PLATFORMS"]);
    for app in apps {
        for tag in &app.tags {
            t.row(vec![
                tag.package.clone(),
                tag.version.clone(),
                short(&tag.digest),
                tag.platforms.join(", "),
            ]);
        }
    }
    t.render()
}

fn short(digest: &str) -> String {
    digest
        .parse::<Digest>()
        .map(|d| format!("sha256:{}", d.short()))
        .unwrap_or_else(|_| digest.to_string())
}

/// `orc registry show ORG/NAME`.
pub async fn show(conn: &ConnArgs, app: &str) -> anyhow::Result<()> {
    let (org, name) = match app.split_once('/') {
        Some((org, name)) if !org.is_empty() && !name.is_empty() && !name.contains(['/', ':']) => {
            (org, name)
        }
        _ => bail!("{app:?} is not ORG/NAME"),
    };
    let client = registry_client(conn)?;
    let detail: RegistryAppDetail = client
        .get(&format!(
            "/api/orgs/{}/apps/{}",
            segment(org),
            segment(name)
        ))
        .await
        .with_context(|| format!("reading app {org}/{name}"))?;
    if conn.json {
        return print_json(&detail);
    }
    out!("{}", app_detail(&detail));
    Ok(())
}

fn app_detail(detail: &RegistryAppDetail) -> String {
    let mut out = String::new();
    for (i, p) in detail.packages.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let tags = if p.tags.is_empty() {
            "untagged".to_string()
        } else {
            p.tags
                .iter()
                .map(|t| format!("{}:{t}", detail.repository))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!("{}  {tags}\n", p.digest));
        let mut t: Vec<(&str, String)> = vec![("version", p.manifest.version.clone())];
        if !p.manifest.description.is_empty() {
            t.push(("about", p.manifest.description.clone()));
        }
        if !p.manifest.args.is_empty() {
            t.push(("args", p.manifest.args.join(" ")));
        }
        for (platform, blob) in &p.binaries {
            t.push((
                platform.as_str(),
                format!("{} ({})", short(&blob.digest), size_words(blob.size)),
            ));
        }
        let params: Vec<String> = p
            .manifest
            .params
            .iter()
            .map(|param| {
                let mut words = param.name.clone();
                if param.required {
                    words.push_str(" (required)");
                }
                if param.sensitive {
                    words.push_str(" (sensitive)");
                }
                if param.json {
                    words.push_str(" (JSON)");
                }
                words
            })
            .collect();
        if !params.is_empty() {
            t.push(("params", params.join(", ")));
        }
        for e in &p.manifest.endpoints {
            t.push((
                "endpoint",
                format!("{} ({}, port {})", e.name, e.protocol, e.port),
            ));
        }
        if !p.pools.is_empty() {
            t.push(("run by", p.pools.join(", ")));
        }
        out.push_str(&crate::table::fields(&t));
    }
    out
}

/// `orc registry delete ORG/NAME:TAG`.
pub async fn delete(conn: &ConnArgs, package: &str) -> anyhow::Result<()> {
    if !package.contains(':') {
        bail!("{package:?} names no tag: give ORG/NAME:TAG");
    }
    let reference = reference(package)?;
    let client = registry_client(conn)?;
    let url = format!(
        "/api/orgs/{}/apps/{}/tags/{}",
        segment(reference.org.as_str()),
        segment(reference.name.as_str()),
        segment(&reference.tag)
    );
    let _: serde_json::Value = client
        .delete(&url)
        .await
        .with_context(|| format!("deleting {reference}"))?;
    outln!("deleted {reference}; pools that run it keep their package");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_read_platform_equals_path_and_name_what_is_wrong() {
        let b: BinaryArg = "linux/amd64=target/app".parse().unwrap();
        assert_eq!(b.platform, Platform::LinuxAmd64);
        assert_eq!(b.path, PathBuf::from("target/app"));
        assert!(
            "linux/amd64"
                .parse::<BinaryArg>()
                .unwrap_err()
                .contains("PLATFORM=PATH")
        );
        assert!(
            "windows/x86=a.exe"
                .parse::<BinaryArg>()
                .unwrap_err()
                .contains("not one of linux/amd64, linux/arm64")
        );
        assert!(
            "linux/arm64="
                .parse::<BinaryArg>()
                .unwrap_err()
                .contains("no file")
        );
    }
}

#[cfg(test)]
mod golden {
    use super::*;
    use crate::commands::check_golden;
    use orc_zone_api_types::views::{AppTagView, PackageView};
    use orc_zone_model::registry::{ManifestEndpoint, ManifestParam};

    fn tag(tag: &str, digest: &Digest) -> AppTagView {
        AppTagView {
            package: format!("sys/orc-prov-partner:{tag}"),
            tag: tag.into(),
            digest: digest.to_string(),
            version: "0.1.0".into(),
            platforms: vec!["linux/amd64".into(), "linux/arm64".into()],
            updated_at: 1_767_225_600_000,
        }
    }

    #[test]
    fn registry_list_and_show() {
        let d1 = Digest::of(b"one");
        let d2 = Digest::of(b"two");
        let apps = vec![RegistryAppView {
            repository: "sys/orc-prov-partner".into(),
            name: "orc-prov-partner".into(),
            tags: vec![tag("default", &d2), tag("previous", &d1)],
        }];
        let mut manifest = AppManifest::bare("orc-prov-partner", "0.1.0");
        manifest.description = "Places nodes on the cheapest cloud".into();
        manifest.args = vec!["serve".into()];
        manifest.params = vec![
            ManifestParam {
                name: "partner_id".into(),
                help: String::new(),
                default: None,
                required: true,
                sensitive: false,
                json: false,
            },
            ManifestParam {
                name: "regions".into(),
                help: String::new(),
                default: None,
                required: false,
                sensitive: false,
                json: true,
            },
            ManifestParam {
                name: "vultr_api_key".into(),
                help: String::new(),
                default: None,
                required: false,
                sensitive: true,
                json: false,
            },
        ];
        manifest.endpoints = vec![ManifestEndpoint {
            name: "admin".into(),
            protocol: "http".into(),
            port: 8080,
        }];
        let binaries = BTreeMap::from([(
            "linux/amd64".to_string(),
            BlobView {
                digest: Digest::of(b"binary").to_string(),
                size: 31_457_280,
            },
        )]);
        let detail = RegistryAppDetail {
            repository: "sys/orc-prov-partner".into(),
            name: "orc-prov-partner".into(),
            packages: vec![
                PackageView {
                    digest: d1.to_string(),
                    tags: vec![],
                    manifest: manifest.clone(),
                    binaries: binaries.clone(),
                    pools: vec!["sys/sys/partner".into()],
                    created_at: 1_767_225_600_000,
                },
                PackageView {
                    digest: d2.to_string(),
                    tags: vec!["default".into()],
                    manifest,
                    binaries,
                    pools: vec![],
                    created_at: 1_767_225_700_000,
                },
            ],
        };
        let text = format!(
            "{}\n{}\n{}",
            apps_table("sys", &apps),
            apps_table("acme", &[]),
            app_detail(&detail)
        );
        check_golden("registry_list_and_show", &text);
    }
}
