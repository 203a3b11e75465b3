//! Running commands on a machine over SSH: the [`SshExecutor`] trait, the real client on
//! `russh` ([`RusshExecutor`]) and a scripted double for tests ([`ScriptedSsh`]). The Robot
//! provider drives rescue systems with it, the static provider the operator's hosts.
//!
//! A command is a fixed string; anything secret travels as the command's **stdin**, never
//! in the command line, so it cannot show in the remote process list or in the remote
//! shell's history. The private key is read from its secret reference by the caller for
//! each connection and is never printed ([`SshTarget`]'s `Debug` redacts it).
//!
//! Host keys: [`SshTarget::host_key_sha256`] pins the server's key by its SHA-256
//! fingerprint ([`fingerprint_of`] makes one from an OpenSSH public key line). A host the
//! operator lists is always pinned; a rescue system makes a new host key on every boot, so
//! there is nothing to pin across its boots unless Robot lists the key, and a command sent
//! to it must not depend on the server being the right one beyond what the authorized key
//! already proves to the server.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orc_common::Secret;
use russh::ChannelMsg;
use russh::client::{self, Handle};
use russh::keys::{HashAlg, PrivateKeyWithHashAlg, PublicKeyOrCertificate, decode_secret_key};

/// Where and as whom to run a command.
#[derive(Clone)]
pub struct SshTarget {
    /// Host name or address.
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The private key, OpenSSH text.
    pub private_key: Secret,
    /// The server's host key SHA-256 fingerprints (`SHA256:…` as OpenSSH prints them);
    /// empty accepts any host key.
    pub host_key_sha256: Vec<String>,
    /// How long connecting and authenticating may take.
    pub connect_timeout: Duration,
    /// How long one command may run, connection included.
    pub command_timeout: Duration,
}

impl fmt::Debug for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("private_key", &"<redacted>")
            .field("host_key_sha256", &self.host_key_sha256)
            .finish()
    }
}

/// What a finished command left behind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SshOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The exit status; `None` when the server sent none (killed by a signal).
    pub exit_status: Option<u32>,
}

impl SshOutput {
    /// True when the command exited with status 0.
    pub fn success(&self) -> bool {
        self.exit_status == Some(0)
    }

    /// Stdout as text, lossily, without the trailing line break.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .trim_end_matches(['\n', '\r'])
            .to_string()
    }

    /// The last line of stderr, lossily, for error messages.
    pub fn stderr_tail(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        text.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string()
    }
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// No TCP connection, or the SSH handshake failed or timed out.
    #[error("cannot connect to {host}:{port}: {reason}")]
    Connect {
        host: String,
        port: u16,
        reason: String,
    },
    /// The server refused the key.
    #[error("{host}:{port} refused the key for user {user}")]
    Auth {
        host: String,
        port: u16,
        user: String,
    },
    /// The private key text could not be read.
    #[error("the SSH private key cannot be read: {reason}")]
    Key { reason: String },
    /// The session broke while the command ran.
    #[error("the SSH session to {host} failed: {reason}")]
    Session { host: String, reason: String },
    /// The command did not finish in time; the session was closed.
    #[error("the command on {host} did not finish within {limit:?}")]
    Timeout { host: String, limit: Duration },
}

impl SshError {
    /// True when the server could not be reached at all (it may still be booting).
    pub fn is_unreachable(&self) -> bool {
        match self {
            SshError::Connect { .. } => true,
            SshError::Auth { .. }
            | SshError::Key { .. }
            | SshError::Session { .. }
            | SshError::Timeout { .. } => false,
        }
    }
}

/// Runs one command on a server: `command` is the remote command line (no secrets in it),
/// `stdin` is written to the command's standard input, then closed.
pub trait SshExecutor: Send + Sync + 'static {
    fn run(
        &self,
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> impl Future<Output = Result<SshOutput, SshError>> + Send;
}

/// The real SSH client: one connection per command, public-key authentication.
#[derive(Debug, Clone, Default)]
pub struct RusshExecutor;

struct HostKeyCheck {
    pins: Vec<String>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        if self.pins.is_empty() {
            return Ok(true);
        }
        let key = match server_public_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            PublicKeyOrCertificate::Certificate(cert) => {
                russh::keys::PublicKey::from(cert.public_key().clone())
            }
        };
        let seen = key.fingerprint(HashAlg::Sha256).to_string();
        Ok(self.pins.iter().any(|pin| pin == &seen))
    }
}

impl RusshExecutor {
    async fn connect(target: &SshTarget) -> Result<Handle<HostKeyCheck>, SshError> {
        let key =
            decode_secret_key(target.private_key.expose(), None).map_err(|e| SshError::Key {
                reason: key_error_words(&e),
            })?;
        let config = Arc::new(client::Config {
            inactivity_timeout: Some(Duration::from_secs(600)),
            ..client::Config::default()
        });
        let connect_error = |reason: String| SshError::Connect {
            host: target.host.clone(),
            port: target.port,
            reason,
        };
        let handler = HostKeyCheck {
            pins: target.host_key_sha256.clone(),
        };
        let addr = (target.host.as_str(), target.port);
        let mut session = tokio::time::timeout(
            target.connect_timeout,
            client::connect(config, addr, handler),
        )
        .await
        .map_err(|_| connect_error("timed out".into()))?
        .map_err(|e| connect_error(e.to_string()))?;
        let hash = session
            .best_supported_rsa_hash()
            .await
            .map_err(|e| connect_error(e.to_string()))?
            .flatten();
        let auth = tokio::time::timeout(
            target.connect_timeout,
            session.authenticate_publickey(
                target.user.clone(),
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            ),
        )
        .await
        .map_err(|_| connect_error("authentication timed out".into()))?
        .map_err(|e| connect_error(e.to_string()))?;
        if !auth.success() {
            return Err(SshError::Auth {
                host: target.host.clone(),
                port: target.port,
                user: target.user.clone(),
            });
        }
        Ok(session)
    }
}

/// The SHA-256 fingerprint (`SHA256:…`, as `ssh-keygen -l` prints it) of an OpenSSH public
/// key line (`ssh-ed25519 AAAA… comment`); a text that already is such a fingerprint is
/// returned as it is.
pub fn fingerprint_of(text: &str) -> Result<String, String> {
    let text = text.trim();
    if let Some(hash) = text.strip_prefix("SHA256:") {
        let base64ish = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
        return if hash.len() == 43 && hash.chars().all(base64ish) {
            Ok(text.to_string())
        } else {
            Err("a SHA256: fingerprint has 43 base64 characters".into())
        };
    }
    let key = russh::keys::PublicKey::from_openssh(text)
        .map_err(|_| "not an OpenSSH public key line nor a SHA256: fingerprint".to_string())?;
    Ok(key.fingerprint(HashAlg::Sha256).to_string())
}

/// Words for a key that cannot be decoded, without any of its text.
fn key_error_words(error: &russh::keys::Error) -> String {
    match error {
        russh::keys::Error::KeyIsEncrypted => "the key is encrypted".into(),
        russh::keys::Error::UnsupportedKeyType { .. } => "the key type is not supported".into(),
        _ => "it is not an OpenSSH private key".into(),
    }
}

impl SshExecutor for RusshExecutor {
    async fn run(
        &self,
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> Result<SshOutput, SshError> {
        tokio::time::timeout(
            target.command_timeout,
            RusshExecutor::run_once(target, command, stdin),
        )
        .await
        .map_err(|_| SshError::Timeout {
            host: target.host.clone(),
            limit: target.command_timeout,
        })?
    }
}

impl RusshExecutor {
    async fn run_once(
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> Result<SshOutput, SshError> {
        let session = RusshExecutor::connect(target).await?;
        let broken = |e: russh::Error| SshError::Session {
            host: target.host.clone(),
            reason: e.to_string(),
        };
        let mut channel = session.channel_open_session().await.map_err(broken)?;
        channel.exec(true, command).await.map_err(broken)?;
        if !stdin.is_empty() {
            channel.data_bytes(stdin.to_vec()).await.map_err(broken)?;
        }
        channel.eof().await.map_err(broken)?;
        let mut output = SshOutput::default();
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => output.stdout.extend_from_slice(&data),
                ChannelMsg::ExtendedData { data, .. } => output.stderr.extend_from_slice(&data),
                ChannelMsg::ExitStatus { exit_status } => output.exit_status = Some(exit_status),
                _ => {}
            }
        }
        if let Err(e) = session
            .disconnect(russh::Disconnect::ByApplication, "", "en")
            .await
        {
            tracing::debug!(host = %target.host, "ssh disconnect: {e}");
        }
        Ok(output)
    }
}

/// One command a [`ScriptedSsh`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenCommand {
    pub host: String,
    pub command: String,
    pub stdin: Vec<u8>,
}

/// How a [`ScriptedSsh`] answers commands that contain a given text.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// Exit with this status and stdout.
    Answer { exit_status: u32, stdout: String },
    /// Fail to connect, as a server that is down.
    Unreachable,
}

/// A test double: answers commands by the first rule whose text the command contains
/// (rules are used once each, in order; `Answer{0, ""}` when none matches) and records
/// every command with its stdin.
#[derive(Debug, Clone, Default)]
pub struct ScriptedSsh {
    inner: Arc<Mutex<ScriptedInner>>,
}

#[derive(Debug, Default)]
struct ScriptedInner {
    rules: VecDeque<(String, Scripted)>,
    seen: Vec<SeenCommand>,
}

impl ScriptedSsh {
    /// A double that answers every command with success and no output.
    pub fn new() -> Self {
        ScriptedSsh::default()
    }

    /// Adds a rule: the next command containing `contains` gets `answer`.
    pub fn on(&self, contains: impl Into<String>, answer: Scripted) -> &Self {
        self.lock().rules.push_back((contains.into(), answer));
        self
    }

    /// Every command seen so far, oldest first.
    pub fn seen(&self) -> Vec<SeenCommand> {
        self.lock().seen.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScriptedInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SshExecutor for ScriptedSsh {
    async fn run(
        &self,
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> Result<SshOutput, SshError> {
        let mut inner = self.lock();
        inner.seen.push(SeenCommand {
            host: target.host.clone(),
            command: command.to_string(),
            stdin: stdin.to_vec(),
        });
        let position = inner
            .rules
            .iter()
            .position(|(contains, _)| command.contains(contains.as_str()));
        let rule = position.and_then(|i| inner.rules.remove(i)).map(|(_, r)| r);
        match rule {
            Some(Scripted::Unreachable) => Err(SshError::Connect {
                host: target.host.clone(),
                port: target.port,
                reason: "connection refused".into(),
            }),
            Some(Scripted::Answer {
                exit_status,
                stdout,
            }) => Ok(SshOutput {
                stdout: stdout.into_bytes(),
                stderr: Vec::new(),
                exit_status: Some(exit_status),
            }),
            None => Ok(SshOutput {
                stdout: Vec::new(),
                stderr: Vec::new(),
                exit_status: Some(0),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fingerprint_of;

    const LINE: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAWQq8X849Y6oTou0gYCXChOwpCFtuBWmQPJXt57r968 test";
    const PRINT: &str = "SHA256:w1aOEg/Gsn1GTuHGqg01inLQf4Ivhbq2VnmVWqldy1w";

    #[test]
    fn a_public_key_line_gives_the_fingerprint_ssh_keygen_prints() {
        assert_eq!(fingerprint_of(LINE).unwrap(), PRINT);
        assert_eq!(fingerprint_of(&format!("  {PRINT}\n")).unwrap(), PRINT);
    }

    #[test]
    fn other_text_is_refused_with_what_was_expected() {
        for bad in ["", "SHA256:short", "ssh-ed25519 not-base64", "MD5:aa:bb"] {
            let err = fingerprint_of(bad).unwrap_err();
            assert!(err.contains("SHA256"), "{bad:?}: {err}");
        }
    }
}
