//! The agent's state dir (`/var/lib/orc/agent` by default), private to the agent:
//! - `node.key` — the node's own P-256 key (0600), made before the first join;
//! - `node.pem` — the node certificate the zone signed, then the zone's CA;
//! - `ca.pem` — the zone's CA, pinned from the join on;
//! - `agent.json` — the node id and the zone's endpoint;
//! - `config.json` — the last config applied, with its generation.
//!
//! Every file is written whole to a temporary name and renamed, so a crash leaves the old
//! content or the new one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use orc_tls::NodeIdentity;
use serde::{Deserialize, Serialize};

/// Why the state dir could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot use {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not what the agent wrote ({reason}); move the state dir away and join again"
    )]
    Corrupt { path: PathBuf, reason: String },
}

/// What the agent keeps about its membership of a zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub node_id: String,
    /// The zone's agent endpoint (`https://zone.internal:7400`).
    pub endpoint: String,
    /// When the node certificate expires, UTC milliseconds.
    pub cert_not_after: i64,
}

/// The config last applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedConfig {
    pub generation: u64,
    pub node_id: String,
    pub pool: String,
    pub slot: u32,
    pub site: String,
    pub provider: String,
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A joined agent's credentials, read from the state dir.
#[derive(Debug)]
pub struct Credentials {
    pub membership: Membership,
    pub identity: NodeIdentity,
    pub chain_pem: String,
    pub ca_pem: String,
}

/// The agent's state dir.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Opens `dir`, creating it 0700 when missing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<StateDir, StateError> {
        let dir = dir.into();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&dir).map_err(|source| StateError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(StateDir { dir })
    }

    /// The dir's path.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> Result<Option<String>, StateError> {
        let path = self.file(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    fn write(&self, name: &str, text: &str) -> Result<(), StateError> {
        let path = self.file(name);
        write_private(&path, text).map_err(|source| StateError::Io { path, source })
    }

    fn corrupt(&self, name: &str, reason: impl ToString) -> StateError {
        StateError::Corrupt {
            path: self.file(name),
            reason: reason.to_string(),
        }
    }

    /// The node's key: the one kept here, or a new one written now.
    pub fn key(&self) -> Result<NodeIdentity, StateError> {
        if let Some(pem) = self.read("node.key")? {
            return NodeIdentity::from_pem(&pem)
                .ok_or_else(|| self.corrupt("node.key", "not a P-256 private key"));
        }
        let identity = NodeIdentity::generate()
            .map_err(|e| self.corrupt("node.key", format!("no key could be made: {e}")))?;
        self.write("node.key", &identity.to_pem())?;
        Ok(identity)
    }

    /// Replaces the node's key (at renewal, once the zone signed the new one).
    pub fn replace_identity(
        &self,
        identity: &NodeIdentity,
        chain_pem: &str,
    ) -> Result<(), StateError> {
        self.write("node.key.new", &identity.to_pem())?;
        self.write("node.pem", chain_pem)?;
        let (from, to) = (self.file("node.key.new"), self.file("node.key"));
        std::fs::rename(&from, &to).map_err(|source| StateError::Io { path: to, source })
    }

    /// Records a join: the certificate, the CA and the membership.
    pub fn save_join(
        &self,
        membership: &Membership,
        chain_pem: &str,
        ca_pem: &str,
    ) -> Result<(), StateError> {
        self.write("node.pem", chain_pem)?;
        self.write("ca.pem", ca_pem)?;
        let json = serde_json::to_string_pretty(membership).unwrap_or_default();
        self.write("agent.json", &json)
    }

    /// The credentials of a joined agent; `None` before the first join.
    pub fn credentials(&self) -> Result<Option<Credentials>, StateError> {
        let Some(json) = self.read("agent.json")? else {
            return Ok(None);
        };
        let membership: Membership =
            serde_json::from_str(&json).map_err(|e| self.corrupt("agent.json", e))?;
        let chain_pem = self
            .read("node.pem")?
            .ok_or_else(|| self.corrupt("node.pem", "missing"))?;
        let ca_pem = self
            .read("ca.pem")?
            .ok_or_else(|| self.corrupt("ca.pem", "missing"))?;
        let identity = self.key()?;
        Ok(Some(Credentials {
            membership,
            identity,
            chain_pem,
            ca_pem,
        }))
    }

    /// The config last applied (generation 0 when none was).
    pub fn applied(&self) -> Result<AppliedConfig, StateError> {
        match self.read("config.json")? {
            None => Ok(AppliedConfig::default()),
            Some(json) => serde_json::from_str(&json).map_err(|e| self.corrupt("config.json", e)),
        }
    }

    /// Applies `config`: written here, where the node's other parts read it.
    pub fn apply(&self, config: &AppliedConfig) -> Result<(), StateError> {
        let json = serde_json::to_string_pretty(config).unwrap_or_default();
        self.write("config.json", &json)
    }
}

/// Writes `contents` to `path` 0600 through a temporary file and a rename.
pub fn write_private(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp)?;
    file.write_all(contents.as_ref())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_is_kept_and_read_back_privately() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("agent")).unwrap();
        assert!(state.credentials().unwrap().is_none());
        let key = state.key().unwrap();
        assert_eq!(state.key().unwrap().public_key(), key.public_key());
        let membership = Membership {
            node_id: "n-1".into(),
            endpoint: "https://127.0.0.1:7400".into(),
            cert_not_after: 5,
        };
        state.save_join(&membership, "CHAIN", "CA").unwrap();
        let credentials = state.credentials().unwrap().unwrap();
        assert_eq!(credentials.membership, membership);
        assert_eq!(credentials.identity.public_key(), key.public_key());
        assert_eq!(
            (credentials.chain_pem.as_str(), credentials.ca_pem.as_str()),
            ("CHAIN", "CA")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for name in ["node.key", "node.pem", "agent.json", "ca.pem"] {
                let mode = std::fs::metadata(state.path().join(name))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "{name}");
            }
            let mode = std::fs::metadata(state.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert_eq!(state.applied().unwrap().generation, 0);
        let config = AppliedConfig {
            generation: 3,
            pool: "web".into(),
            ..AppliedConfig::default()
        };
        state.apply(&config).unwrap();
        assert_eq!(state.applied().unwrap(), config);
        std::fs::write(state.path().join("agent.json"), "{").unwrap();
        let err = state.credentials().unwrap_err();
        assert!(
            err.to_string()
                .contains("agent.json is not what the agent wrote"),
            "{err}"
        );
    }
}
