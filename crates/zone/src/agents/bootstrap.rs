//! The bootstrap a node is deployed with: a POSIX `sh` script that writes the node's join
//! token, the zone's CA and the agent's settings under `/etc/orc` (0600, in a 0700 dir),
//! installs the `orc` binary the zone serves after checking its SHA-256, and starts
//! `orc agent` (a systemd unit where systemd runs, else in the background with its log in
//! `/var/log/orc-agent.log` and its process id in `/run/orc-agent.pid`).
//!
//! The token travels only here: in the user data of one machine, which the agent deletes
//! once it joined. It is never passed on a command line; the script reads nothing from its
//! arguments, and every value in it is either fixed text the zone made (ids, URLs, digests,
//! PEM) or quoted in a here-document whose delimiter cannot occur in it.

use orc_zone_model::{JoinTokenSecret, JoinTtl, NodeId};

/// The agent binary as the zone serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBinary {
    /// Where nodes download it (`https://zone:7070/api/agent/orc`).
    pub url: String,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

/// What every node's bootstrap carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBootstrap {
    /// The agent endpoint nodes dial (`https://zone:7400`).
    pub endpoint: String,
    /// The zone's CA, which the agent also pins by the token's fingerprint.
    pub ca_pem: String,
    pub ca_fingerprint: String,
    /// The binary to install; `None` when the machine image brings `orc` itself.
    pub binary: Option<AgentBinary>,
    /// How long a node's token admits it.
    pub ttl: JoinTtl,
}

/// Whether `text` may sit in a single-quoted here-document ended by `delimiter`.
fn heredoc_safe(text: &str, delimiter: &str) -> bool {
    !text.lines().any(|line| line.trim() == delimiter)
}

/// Text that is safe on a line of its own in the script: printable ASCII without quotes,
/// backslashes or `$`.
fn plain(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\' | '$' | '`'))
}

impl AgentBootstrap {
    /// The bootstrap of `node`, carrying `token`. `None` when a value could break out of
    /// its place in the script (the zone made them all, so this is a bug, not input).
    pub fn script(&self, node: &NodeId, token: &JoinTokenSecret) -> Option<String> {
        let fields = [self.endpoint.as_str(), node.as_str(), token.expose()];
        if !fields.iter().all(|f| plain(f)) || !heredoc_safe(&self.ca_pem, "ORC_CA") {
            return None;
        }
        if let Some(binary) = &self.binary
            && !(plain(&binary.url) && binary.sha256.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return None;
        }
        let mut s = String::new();
        s.push_str("#!/bin/sh\n");
        s.push_str(&format!(
            "# orc bootstrap of node {node}: join the zone at {} and start its agent.\n",
            self.endpoint
        ));
        s.push_str("set -eu\numask 077\n");
        s.push_str(
            "mkdir -p /etc/orc /var/lib/orc/agent\nchmod 0700 /etc/orc /var/lib/orc/agent\n",
        );
        s.push_str("cat > /etc/orc/ca.pem <<'ORC_CA'\n");
        s.push_str(self.ca_pem.trim_end());
        s.push_str("\nORC_CA\n");
        // A provider without user data takes this block out and sends the token alone.
        s.push_str(&orc_proto::bootstrap::token_block(token.expose()));
        s.push_str("cat > /etc/orc/agent.env <<'ORC_ENV'\n");
        s.push_str(&format!(
            "ORC_AGENT_ZONE={}\nORC_AGENT_NODE={node}\n",
            self.endpoint
        ));
        s.push_str("ORC_AGENT_JOIN_TOKEN_FILE=/etc/orc/join-token\nORC_ENV\n");
        match &self.binary {
            Some(binary) => {
                s.push_str("bin=/usr/local/bin/orc\nmkdir -p /usr/local/bin\n");
                s.push_str(&format!("sum={}\n", binary.sha256));
                s.push_str(
                    "if ! { [ -x \"$bin\" ] && echo \"$sum  $bin\" | sha256sum -c --status; }; then\n",
                );
                s.push_str(&format!(
                    "  curl -fsS --retry 30 --retry-delay 2 --retry-all-errors --cacert /etc/orc/ca.pem -o \"$bin.new\" {}\n",
                    binary.url
                ));
                s.push_str("  if ! echo \"$sum  $bin.new\" | sha256sum -c --status; then\n");
                s.push_str(
                    "    echo \"orc bootstrap: the agent binary's SHA-256 is not $sum; not starting it\" >&2\n",
                );
                s.push_str("    rm -f \"$bin.new\"\n    exit 1\n  fi\n");
                s.push_str("  chmod 0755 \"$bin.new\"\n  mv \"$bin.new\" \"$bin\"\nfi\n");
            }
            None => {
                s.push_str("bin=$(command -v orc || true)\n");
                s.push_str("if [ -z \"$bin\" ]; then\n");
                s.push_str(
                    "  echo \"orc bootstrap: no orc binary on this machine and the zone serves none\" >&2\n  exit 1\nfi\n",
                );
            }
        }
        s.push_str("if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then\n");
        s.push_str("  cat > /etc/systemd/system/orc-agent.service <<ORC_UNIT\n");
        s.push_str("[Unit]\nDescription=orc node agent\nAfter=network-online.target\nWants=network-online.target\n\n");
        s.push_str("[Service]\nEnvironmentFile=/etc/orc/agent.env\nExecStart=$bin agent\nRestart=always\nRestartSec=2\n\n");
        s.push_str("[Install]\nWantedBy=multi-user.target\nORC_UNIT\n");
        s.push_str("  systemctl daemon-reload\n  systemctl enable --now orc-agent.service\n");
        s.push_str("else\n");
        s.push_str("  set -a\n  . /etc/orc/agent.env\n  set +a\n");
        s.push_str("  nohup \"$bin\" agent >>/var/log/orc-agent.log 2>&1 </dev/null &\n");
        // What stops the agent again (a static host's release) finds it by this file.
        s.push_str("  echo $! > /run/orc-agent.pid\n");
        s.push_str("fi\n");
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn bootstrap(binary: Option<AgentBinary>) -> AgentBootstrap {
        AgentBootstrap {
            endpoint: "https://10.0.0.1:7400".into(),
            ca_pem: CA.into(),
            ca_fingerprint: format!("sha256:{}", "ab".repeat(32)),
            binary,
            ttl: JoinTtl::default(),
        }
    }

    #[test]
    fn the_script_carries_token_ca_and_settings_and_checks_the_binary() {
        let token = JoinTokenSecret::generate(&format!("sha256:{}", "ab".repeat(32)));
        let node = NodeId::from_counter(9);
        let binary = AgentBinary {
            url: "https://10.0.0.1:7070/api/agent/orc".into(),
            sha256: "cd".repeat(32),
        };
        let script = bootstrap(Some(binary)).script(&node, &token).unwrap();
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(
            script.contains("echo $! > /run/orc-agent.pid\n"),
            "{script}"
        );
        assert!(script.contains(&format!("<<'ORC_TOKEN'\n{}\nORC_TOKEN\n", token.expose())));
        assert!(script.contains(
            "<<'ORC_CA'\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nORC_CA\n"
        ));
        assert!(script.contains(&format!("ORC_AGENT_NODE={node}\n")));
        assert!(script.contains(&format!("sum={}\n", "cd".repeat(32))));
        assert!(script.contains("--cacert /etc/orc/ca.pem"));
        // The token is written by a here-document, never an argument.
        let token_lines = script
            .lines()
            .filter(|l| l.contains(token.expose()))
            .count();
        assert_eq!(token_lines, 1);
        assert!(!script.contains(&format!("agent --join-token {}", token.expose())));
        let without = bootstrap(None).script(&node, &token).unwrap();
        assert!(without.contains("command -v orc"));
        assert!(!without.contains("curl"));

        // A provider without user data takes the token out; the rest carries no trace of it.
        let split = orc_proto::bootstrap::split_token(&script).unwrap();
        assert_eq!(split.token, token.expose());
        assert!(!split.script.contains(token.expose()));
        assert!(!split.script.contains("ORC_TOKEN"));
        assert!(
            split
                .script
                .contains("ORC_AGENT_JOIN_TOKEN_FILE=/etc/orc/join-token\n")
        );
        let block = orc_proto::bootstrap::token_block(token.expose());
        assert_eq!(split.script, script.replace(&block, ""));
    }

    #[test]
    fn the_script_runs_in_sh_and_writes_its_files_privately() {
        // The script's file-writing part runs for real in a scratch root.
        let token = JoinTokenSecret::generate(&format!("sha256:{}", "ab".repeat(32)));
        let script = bootstrap(None)
            .script(&NodeId::from_counter(9), &token)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let files_part: String = script
            .split("bin=$(command -v orc")
            .next()
            .unwrap()
            .replace("/etc/orc", &format!("{root}/etc/orc"))
            .replace("/var/lib/orc", &format!("{root}/var/lib/orc"));
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&files_part)
            .status()
            .unwrap();
        assert!(status.success());
        let written = std::fs::read_to_string(dir.path().join("etc/orc/join-token")).unwrap();
        assert_eq!(written.trim(), token.expose());
        use std::os::unix::fs::PermissionsExt;
        for file in ["etc/orc/join-token", "etc/orc/ca.pem", "etc/orc/agent.env"] {
            let mode = std::fs::metadata(dir.path().join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        let env = std::fs::read_to_string(dir.path().join("etc/orc/agent.env")).unwrap();
        assert!(
            env.contains("ORC_AGENT_ZONE=https://10.0.0.1:7400\n"),
            "{env}"
        );
    }

    #[test]
    fn values_that_could_break_the_script_are_refused() {
        let token = JoinTokenSecret::generate(&format!("sha256:{}", "ab".repeat(32)));
        let mut evil = bootstrap(None);
        evil.endpoint = "https://x:1/$(reboot)".into();
        assert_eq!(evil.script(&NodeId::from_counter(1), &token), None);
        let mut evil = bootstrap(None);
        evil.ca_pem = format!("{CA}ORC_CA\nrm -rf /\n");
        assert_eq!(evil.script(&NodeId::from_counter(1), &token), None);
    }
}
