//! Images in the zone's registry, as the OCI distribution API names them: repository names,
//! manifests and what they refer to, tags and upload ids. Pure; the HTTP side is the zone's.
//!
//! A repository is `<org>/<name>`: the org owns it and its blobs, `<name>` is a DNS label.
//! A manifest is kept as the blob its digest names; what it refers to (an image manifest's
//! config and layers, an index's manifests) is recorded with it, so the blobs an org holds
//! are the ones its manifests name, and the sweep keeps exactly those.

use serde::Deserialize;

use crate::Name;
use crate::registry::Digest;

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The manifest media types the registry keeps.
pub const MANIFEST_TYPES: [&str; 4] = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// The largest manifest the registry takes: 4 MiB, as other registries.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// A repository in the zone's registry: `<org>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Repository {
    /// The org that owns it.
    pub org: Name,
    /// Its name in the org.
    pub name: Name,
}

impl std::fmt::Display for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.org, self.name)
    }
}

impl Repository {
    /// Parses `<org>/<name>`; the error says what is wrong in words.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((org, name)) = text.split_once('/') else {
            return Err(format!(
                "repository {text:?} must be ORG/NAME: the org that owns it, then its name"
            ));
        };
        if name.contains('/') {
            return Err(format!(
                "repository {text:?} must be ORG/NAME, one name under the org (no deeper path)"
            ));
        }
        let org: Name = org
            .parse()
            .map_err(|e| format!("the org of repository {text:?}: {e}"))?;
        let name: Name = name
            .parse()
            .map_err(|e| format!("the name of repository {text:?}: {e}"))?;
        Ok(Self { org, name })
    }
}

/// What a manifest refers to: blobs (config and layers) and, for an index, manifests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Blobs with their declared sizes.
    pub blobs: Vec<(Digest, u64)>,
    /// Manifests an index lists, with their declared sizes.
    pub manifests: Vec<(Digest, u64)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: Option<String>,
    digest: String,
    size: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    schema_version: Option<i64>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

/// A manifest parsed for what the registry needs: its media type and references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Its media type.
    pub media_type: String,
    /// What it refers to.
    pub references: References,
}

impl Manifest {
    /// Whether it is an index (or a Docker manifest list).
    pub fn is_index(&self) -> bool {
        self.media_type == OCI_INDEX || self.media_type == DOCKER_LIST
    }

    /// Parses a manifest sent with `content_type` (the request's `Content-Type`; the body's
    /// own `mediaType` when that is absent or generic). The error says what is wrong.
    pub fn parse(content_type: Option<&str>, bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(format!(
                "the manifest is {} bytes; the registry takes at most {MAX_MANIFEST_BYTES}",
                bytes.len()
            ));
        }
        let document: Document = serde_json::from_slice(bytes)
            .map_err(|e| format!("the manifest is not a JSON manifest: {e}"))?;
        if document.schema_version != Some(2) {
            return Err("the manifest's schemaVersion must be 2".to_string());
        }
        let declared = content_type
            .map(|t| t.split(';').next().unwrap_or(t).trim())
            .filter(|t| MANIFEST_TYPES.contains(t));
        let media_type = match (declared, document.media_type.as_deref()) {
            (Some(header), Some(body)) if header != body => {
                return Err(format!(
                    "the manifest says it is {body} but was sent as {header}"
                ));
            }
            (Some(header), _) => header.to_string(),
            (None, Some(body)) if MANIFEST_TYPES.contains(&body) => body.to_string(),
            (None, Some(body)) => {
                return Err(format!("manifests of type {body} are not kept here"));
            }
            (None, None) if document.manifests.is_some() => OCI_INDEX.to_string(),
            (None, None) if document.config.is_some() => OCI_MANIFEST.to_string(),
            (None, None) => {
                return Err("the manifest names neither a config nor manifests".to_string());
            }
        };
        let descriptor = |d: &Descriptor, what: &str| -> Result<(Digest, u64), String> {
            let digest: Digest = d
                .digest
                .parse()
                .map_err(|e| format!("{what} digest {:?}: {e}", d.digest))?;
            let size =
                u64::try_from(d.size).map_err(|_| format!("{what} size {} is negative", d.size))?;
            let _ = &d.media_type;
            Ok((digest, size))
        };
        let mut references = References::default();
        let index = media_type == OCI_INDEX || media_type == DOCKER_LIST;
        if index {
            let manifests = document
                .manifests
                .as_ref()
                .ok_or("an index must list its manifests")?;
            for m in manifests {
                references
                    .manifests
                    .push(descriptor(m, "a listed manifest's")?);
            }
        } else {
            let config = document
                .config
                .as_ref()
                .ok_or("an image manifest must name its config")?;
            references.blobs.push(descriptor(config, "the config's")?);
            for layer in document.layers.iter().flatten() {
                references.blobs.push(descriptor(layer, "a layer's")?);
            }
        }
        Ok(Self {
            media_type,
            references,
        })
    }
}

/// Whether `tag` is a tag by the distribution spec: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Whether `id` is an upload id the zone hands out: 32 lower-case hex digits.
pub fn valid_upload_id(id: &str) -> bool {
    id.len() == 32 && id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

/// The key the zone signs registry pull grants with: a node pulls the images of its
/// project's org with a grant the zone sends it, `orcpull:v1:<org id>:<node id>:<expiry
/// ms>:<HMAC-SHA256 hex>`, which reads that org's repositories and nothing else until it
/// expires. The key is random per zone process; grants are sent again with every
/// assignment, so a restarted zone's new key reaches every node it assigns to.
pub struct PullKey([u8; 32]);

impl std::fmt::Debug for PullKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PullKey(…)")
    }
}

/// What a valid grant allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullGrant {
    /// The org whose images it reads.
    pub org: crate::OrgId,
    /// The node it was given to.
    pub node: crate::NodeId,
}

const GRANT_PREFIX: &str = "orcpull:v1:";

impl PullKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        Self(rand::random())
    }

    fn mac(&self, payload: &str) -> String {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        mac.update(payload.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A grant for `node` to read `org`'s images until `expires`.
    pub fn grant(
        &self,
        org: &crate::OrgId,
        node: &crate::NodeId,
        expires: crate::Timestamp,
    ) -> String {
        let payload = format!("{GRANT_PREFIX}{org}:{node}:{}", expires.millis());
        let mac = self.mac(&payload);
        format!("{payload}:{mac}")
    }

    /// Whether `token` looks like a grant at all (so it is checked here, not as an API
    /// token).
    pub fn is_grant(token: &str) -> bool {
        token.starts_with(GRANT_PREFIX)
    }

    /// What `token` allows at `now`; `None` for a forged, altered or expired grant.
    pub fn check(&self, token: &str, now: crate::Timestamp) -> Option<PullGrant> {
        let (payload, mac) = token.rsplit_once(':')?;
        let expected = self.mac(payload);
        // Compare in constant time.
        if expected.len() != mac.len()
            || expected
                .bytes()
                .zip(mac.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                != 0
        {
            return None;
        }
        let rest = payload.strip_prefix(GRANT_PREFIX)?;
        let mut parts = rest.split(':');
        let (org, node, expires) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || expires.parse::<i64>().ok()? < now.millis() {
            return None;
        }
        Some(PullGrant {
            org: org.parse().ok()?,
            node: node.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_grant_reads_one_org_until_it_expires_and_cannot_be_altered() {
        let key = PullKey::generate();
        let org = crate::OrgId::from_counter(7);
        let node: crate::NodeId = "n-000000000009".parse().expect("a node id");
        let grant = key.grant(&org, &node, crate::Timestamp(10_000));
        assert!(PullKey::is_grant(&grant));
        let allowed = key.check(&grant, crate::Timestamp(9_000)).expect("valid");
        assert_eq!((allowed.org, allowed.node), (org.clone(), node.clone()));
        assert!(
            key.check(&grant, crate::Timestamp(10_001)).is_none(),
            "expired"
        );
        let other = crate::OrgId::from_counter(8);
        let forged = grant.replace(org.as_str(), other.as_str());
        assert!(
            key.check(&forged, crate::Timestamp(9_000)).is_none(),
            "altered"
        );
        assert!(
            PullKey::generate()
                .check(&grant, crate::Timestamp(9_000))
                .is_none(),
            "another key"
        );
    }

    fn digest(n: u8) -> String {
        format!("sha256:{}", format!("{n:02x}").repeat(32))
    }

    #[test]
    fn an_image_manifest_names_its_config_and_layers() {
        let body = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}",
               "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{}","size":10}},
               "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{}","size":20}}]}}"#,
            digest(1),
            digest(2)
        );
        let manifest = Manifest::parse(Some(OCI_MANIFEST), body.as_bytes()).expect("parses");
        assert_eq!(manifest.references.blobs.len(), 2);
        assert_eq!(manifest.references.blobs[1].1, 20);
        assert!(!manifest.is_index());
    }

    #[test]
    fn an_index_names_manifests_and_a_type_clash_is_named() {
        let body = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":5}}]}}"#,
            digest(3)
        );
        let manifest = Manifest::parse(None, body.as_bytes()).expect("parses");
        assert!(manifest.is_index());
        assert_eq!(manifest.references.manifests.len(), 1);
        let error = Manifest::parse(Some(OCI_MANIFEST), body.as_bytes()).expect_err("clash");
        assert!(error.contains("says it is"), "{error}");
    }

    #[test]
    fn repositories_are_org_slash_name() {
        assert_eq!(
            Repository::parse("acme/web").expect("valid").to_string(),
            "acme/web"
        );
        assert!(Repository::parse("web").is_err());
        assert!(Repository::parse("acme/team/web").is_err());
        assert!(Repository::parse("Acme/web").is_err());
    }

    #[test]
    fn tags_and_upload_ids() {
        assert!(valid_tag("1.4.2-rc_1"));
        assert!(!valid_tag(".hidden"));
        assert!(!valid_tag(&"a".repeat(129)));
        assert!(valid_upload_id(&"0f".repeat(16)));
        assert!(!valid_upload_id("../../etc/passwd"));
    }
}
