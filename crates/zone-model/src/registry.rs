//! The zone's app registry: `org/name:tag` packages of an app's manifest and one binary per
//! platform, each binary named by its SHA-256.
//!
//! A package is content-addressed: its [`PackageDocument`] (the manifest and the digest and
//! size of each platform's binary) is serialised once, and the SHA-256 of those bytes is the
//! package's [`Digest`]. A tag points at a digest; pushing the tag again moves it. A pool on
//! `core` records the digest its tag named when it was created or last reconfigured, so
//! what it runs changes only when its owner says so.
//!
//! Everything here is pure: parsing, validation and digests of bytes the caller holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::model::{Name, OrgId, Timestamp};

/// A platform an app binary runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Platform {
    #[serde(rename = "linux/amd64")]
    LinuxAmd64,
    #[serde(rename = "linux/arm64")]
    LinuxArm64,
}

impl Platform {
    /// Every platform the registry takes.
    pub const ALL: [Platform; 2] = [Platform::LinuxAmd64, Platform::LinuxArm64];

    /// `linux/amd64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::LinuxAmd64 => "linux/amd64",
            Platform::LinuxArm64 => "linux/arm64",
        }
    }

    /// The platform of the machine this code was built for, if the registry knows it.
    pub fn host() -> Option<Platform> {
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            Some(Platform::LinuxAmd64)
        } else if cfg!(all(target_os = "linux", target_arch = "aarch64")) {
            Some(Platform::LinuxArm64)
        } else {
            None
        }
    }

    /// `linux-amd64`, for file names.
    pub fn file_suffix(self) -> &'static str {
        match self {
            Platform::LinuxAmd64 => "linux-amd64",
            Platform::LinuxArm64 => "linux-arm64",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Platform {
    type Err = RegistryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Platform::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| RegistryError::Platform {
                platform: s.to_string(),
            })
    }
}

/// A SHA-256 digest, written `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_sha256(Sha256::digest(bytes).into())
    }

    /// The digest whose SHA-256 is `hash`.
    pub fn from_sha256(hash: [u8; 32]) -> Digest {
        let mut text = String::with_capacity(7 + 64);
        text.push_str("sha256:");
        for byte in hash {
            text.push_str(&format!("{byte:02x}"));
        }
        Digest(text)
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, for people.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = RegistryError;

    /// `sha256:<64 hex>`, or the 64 hex digits alone; upper case is read as lower.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s);
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Digest(format!("sha256:{}", hex.to_ascii_lowercase())))
        } else {
            Err(RegistryError::Digest {
                digest: s.chars().take(80).collect(),
            })
        }
    }
}

impl TryFrom<String> for Digest {
    type Error = RegistryError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

/// A package reference `org/name:tag` (the tag `default` when left out).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageRef {
    pub org: Name,
    pub name: Name,
    pub tag: String,
}

/// The tag a reference without one means.
pub const DEFAULT_TAG: &str = "default";

impl PackageRef {
    /// `org/name`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.org, self.name)
    }
}

impl fmt::Display for PackageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.org, self.name, self.tag)
    }
}

/// Whether `tag` is 1–64 of letters, digits, `.`, `-` and `_`, starting with a letter or
/// digit.
pub fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 64
        && tag.as_bytes()[0].is_ascii_alphanumeric()
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

impl FromStr for PackageRef {
    type Err = RegistryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| RegistryError::Reference {
            reference: s.chars().take(200).collect(),
            why: why.to_string(),
        };
        let (org, rest) = s
            .split_once('/')
            .ok_or_else(|| bad("it names no org (org/name:tag)"))?;
        let (name, tag) = rest.split_once(':').unwrap_or((rest, DEFAULT_TAG));
        let org: Name = org
            .parse()
            .map_err(|e| bad(&format!("the org is not a name: {e}")))?;
        let name: Name = name
            .parse()
            .map_err(|e| bad(&format!("the app's name is not a name: {e}")))?;
        if !valid_tag(tag) {
            return Err(bad(
                "the tag must be 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit",
            ));
        }
        Ok(PackageRef {
            org,
            name,
            tag: tag.to_string(),
        })
    }
}

/// What an app says about itself: how it is started, its params and its endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppManifest {
    /// The app's name; must be the name it is pushed as.
    pub name: String,
    /// The app's own version words (`0.4.1`); shown, never compared.
    pub version: String,
    /// One line saying what the app is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Arguments every slot's process gets (`["serve"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The params the app reads, in the order a form shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<ManifestParam>,
    /// The endpoints every slot serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<ManifestEndpoint>,
}

/// One param an app reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestParam {
    pub name: String,
    /// What it does, in a sentence or two.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub help: String,
    /// What an empty or missing param means (words for people; the app applies it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The app does not start without it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// A key or password: written only, never shown, delivered as a file of mode 0600.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: bool,
    /// JSON text, delivered as a file.
    #[serde(default, skip_serializing_if = "is_false")]
    pub json: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One endpoint an app serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEndpoint {
    pub name: String,
    /// `http` or `tcp`.
    pub protocol: String,
    pub port: u16,
}

impl AppManifest {
    /// Reads a manifest from JSON, naming what does not parse.
    pub fn from_json(text: &[u8]) -> Result<AppManifest, RegistryError> {
        serde_json::from_slice(text).map_err(|e| RegistryError::Manifest { why: e.to_string() })
    }

    /// A manifest that says only the app's name and version.
    pub fn bare(name: &str, version: &str) -> AppManifest {
        AppManifest {
            name: name.to_string(),
            version: version.to_string(),
            description: String::new(),
            args: Vec::new(),
            params: Vec::new(),
            endpoints: Vec::new(),
        }
    }

    /// Checks the manifest of an app pushed as `name`; the error names the first field that
    /// is wrong.
    pub fn validate(&self, name: &Name) -> Result<(), RegistryError> {
        let bad = |field: String, why: String| Err(RegistryError::ManifestField { field, why });
        if self.name != name.as_str() {
            return bad(
                "name".into(),
                format!(
                    "the manifest is for app {:?}, but it is pushed as {name}",
                    self.name
                ),
            );
        }
        if self.version.is_empty() || self.version.len() > 64 {
            return bad("version".into(), "must be 1 to 64 characters".into());
        }
        if self.description.len() > 300 {
            return bad(
                "description".into(),
                "must be at most 300 characters".into(),
            );
        }
        if self.args.len() > 32 || self.args.iter().any(|a| a.len() > 256 || a.contains('\0')) {
            return bad(
                "args".into(),
                "at most 32 arguments of at most 256 bytes, without NUL".into(),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, p) in self.params.iter().enumerate() {
            if !valid_param_name(&p.name) {
                return bad(
                    format!("params[{i}].name"),
                    format!(
                        "{:?} is not a param name (1 to 64 of a-z, 0-9 and _, starting with a letter)",
                        p.name
                    ),
                );
            }
            if !seen.insert(p.name.as_str()) {
                return bad(
                    format!("params[{i}].name"),
                    format!("param {} is declared twice", p.name),
                );
            }
            if p.sensitive && p.default.is_some() {
                return bad(
                    format!("params[{i}].default"),
                    format!(
                        "param {} is sensitive, so it has no default to show",
                        p.name
                    ),
                );
            }
            if p.help.len() > 2000 {
                return bad(
                    format!("params[{i}].help"),
                    "must be at most 2000 characters".into(),
                );
            }
        }
        let mut seen = BTreeSet::new();
        for (i, e) in self.endpoints.iter().enumerate() {
            if e.name.parse::<Name>().is_err() || !seen.insert(e.name.as_str()) {
                return bad(
                    format!("endpoints[{i}].name"),
                    format!("{:?} must be a unique DNS label", e.name),
                );
            }
            if !matches!(e.protocol.as_str(), "http" | "tcp") {
                return bad(
                    format!("endpoints[{i}].protocol"),
                    format!("{:?} is not one of http, tcp", e.protocol),
                );
            }
            if e.port == 0 {
                return bad(format!("endpoints[{i}].port"), "must be 1 to 65535".into());
            }
        }
        Ok(())
    }

    /// The params the app declares sensitive.
    pub fn sensitive_params(&self) -> BTreeSet<String> {
        self.params
            .iter()
            .filter(|p| p.sensitive)
            .map(|p| p.name.clone())
            .collect()
    }

    /// The names of the params the app does not start without.
    pub fn required_names(&self) -> Vec<&str> {
        self.params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name.as_str())
            .collect()
    }

    /// The param named `name`.
    pub fn param(&self, name: &str) -> Option<&ManifestParam> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// Whether `name` is 1–64 of `a-z`, `0-9` and `_`, starting with a letter.
pub fn valid_param_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// One platform's binary in a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinaryRef {
    pub digest: Digest,
    pub size: u64,
}

/// What a package is: its manifest and its binaries. Its digest is the SHA-256 of
/// [`PackageDocument::to_bytes`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageDocument {
    pub manifest: AppManifest,
    pub binaries: BTreeMap<Platform, BinaryRef>,
}

impl PackageDocument {
    /// The bytes the digest is taken of (compact JSON, maps in key order).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a package document always serialises")
    }

    /// The package's digest.
    pub fn digest(&self) -> Digest {
        Digest::of(&self.to_bytes())
    }

    /// Reads a document the store kept.
    pub fn from_bytes(bytes: &[u8]) -> Result<PackageDocument, RegistryError> {
        serde_json::from_slice(bytes).map_err(|e| RegistryError::Manifest { why: e.to_string() })
    }

    /// Checks a document pushed as `name`: a valid manifest and at least one binary, one of
    /// them for `host` (the platform the zone runs its apps on) when that is known.
    pub fn validate(&self, name: &Name, host: Option<Platform>) -> Result<(), RegistryError> {
        self.manifest.validate(name)?;
        if self.binaries.is_empty() {
            return Err(RegistryError::NoBinary);
        }
        if let Some(host) = host
            && !self.binaries.contains_key(&host)
        {
            return Err(RegistryError::MissingPlatform {
                platform: host,
                given: self.binaries.keys().copied().collect(),
            });
        }
        Ok(())
    }
}

/// A package the registry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPackage {
    pub org_id: OrgId,
    pub name: Name,
    pub digest: Digest,
    pub document: PackageDocument,
    pub created_at: Timestamp,
}

/// A tag and the package it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTag {
    pub org_id: OrgId,
    pub name: Name,
    pub tag: String,
    pub digest: Digest,
    pub updated_at: Timestamp,
}

/// What is wrong with something given to the registry. Each names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("platform {platform:?} is not one of linux/amd64, linux/arm64")]
    Platform { platform: String },
    #[error("{digest:?} is not a digest (sha256: and 64 hex digits)")]
    Digest { digest: String },
    #[error("app reference {reference:?}: {why}")]
    Reference { reference: String, why: String },
    #[error("the manifest does not parse: {why}")]
    Manifest { why: String },
    #[error("the manifest's {field}: {why}")]
    ManifestField { field: String, why: String },
    #[error("a package needs at least one binary")]
    NoBinary,
    #[error(
        "the package has no binary for {platform}, the platform this zone runs apps on (it has: {})",
        platform_list(.given)
    )]
    MissingPlatform {
        platform: Platform,
        given: Vec<Platform>,
    },
}

fn platform_list(platforms: &[Platform]) -> String {
    platforms
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn references_parse_with_the_default_tag_and_name_what_is_wrong() {
        let r: PackageRef = "sys/orc-prov-partner".parse().unwrap();
        assert_eq!(r.to_string(), "sys/orc-prov-partner:default");
        let r: PackageRef = "acme/web:v1.2".parse().unwrap();
        assert_eq!(
            (r.org.as_str(), r.name.as_str(), r.tag.as_str()),
            ("acme", "web", "v1.2")
        );
        let e = "web".parse::<PackageRef>().unwrap_err().to_string();
        assert!(e.contains("names no org"), "{e}");
        let e = "acme/web:".parse::<PackageRef>().unwrap_err().to_string();
        assert!(e.contains("tag"), "{e}");
        let e = "acme/We b".parse::<PackageRef>().unwrap_err().to_string();
        assert!(e.contains("app's name"), "{e}");
    }

    #[test]
    fn digests_read_both_ways_and_refuse_anything_else() {
        let d = Digest::of(b"hello");
        assert_eq!(
            d.as_str(),
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(d.hex().parse::<Digest>().unwrap(), d);
        assert_eq!(d.as_str().to_uppercase()[7..].parse::<Digest>().unwrap(), d);
        assert!("sha256:abc".parse::<Digest>().is_err());
        assert!(
            "md5:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
                .parse::<Digest>()
                .is_err()
        );
    }

    fn document() -> PackageDocument {
        let mut manifest = AppManifest::bare("web", "1.0");
        manifest.params.push(ManifestParam {
            name: "key".into(),
            help: String::new(),
            default: None,
            required: true,
            sensitive: true,
            json: false,
        });
        PackageDocument {
            manifest,
            binaries: [(
                Platform::LinuxAmd64,
                BinaryRef {
                    digest: Digest::of(b"binary"),
                    size: 6,
                },
            )]
            .into(),
        }
    }

    #[test]
    fn a_document_has_one_digest_and_reads_back() {
        let doc = document();
        let again = PackageDocument::from_bytes(&doc.to_bytes()).unwrap();
        assert_eq!(again, doc);
        assert_eq!(again.digest(), doc.digest());
        let mut other = doc.clone();
        other.manifest.version = "1.1".into();
        assert_ne!(other.digest(), doc.digest());
        assert_eq!(doc.manifest.sensitive_params(), ["key".to_string()].into());
    }

    #[test]
    fn validation_names_the_field_the_platform_and_the_name() {
        let doc = document();
        doc.validate(&name("web"), Some(Platform::LinuxAmd64))
            .unwrap();
        let e = doc.validate(&name("api"), None).unwrap_err().to_string();
        assert!(
            e.contains("manifest's name") && e.contains("pushed as api"),
            "{e}"
        );
        let e = doc
            .validate(&name("web"), Some(Platform::LinuxArm64))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "the package has no binary for linux/arm64, the platform this zone runs apps on (it has: linux/amd64)"
        );
        let mut bad = doc.clone();
        bad.manifest.params[0].default = Some("x".into());
        let e = bad.validate(&name("web"), None).unwrap_err().to_string();
        assert!(e.contains("params[0].default"), "{e}");
        let mut bad = doc.clone();
        bad.manifest.params.push(bad.manifest.params[0].clone());
        let e = bad.validate(&name("web"), None).unwrap_err().to_string();
        assert!(e.contains("declared twice"), "{e}");
        let mut bad = doc;
        bad.binaries.clear();
        assert_eq!(
            bad.validate(&name("web"), None),
            Err(RegistryError::NoBinary)
        );
        let e = AppManifest::from_json(br#"{"name": "web", "version": "1", "colour": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        assert!("linux/riscv".parse::<Platform>().is_err());
    }
}
