//! The commands the static provider runs on a host over SSH. Each is fixed text; the only
//! value placed in one is a machine key, which [`usable_key`] limits to characters that
//! cannot leave its single quotes. The join token and the zone's first-boot script travel
//! as stdin.
//!
//! A host is claimed by a file, [`CLAIM_PATH`], holding the key of the node that has it:
//! created with `set -C` (noclobber), so of two providers racing for a host one wins and
//! the other reads the winner's key back. Nothing else marks a host; a provider that
//! restarts reads the claims again.

/// The file that says which node holds a host.
pub const CLAIM_PATH: &str = "/var/lib/orc/claim";

/// Where the zone's bootstrap records the agent's process id when it starts the agent
/// without systemd.
pub const AGENT_PID_PATH: &str = "/run/orc-agent.pid";

/// The longest machine key placed in a claim.
pub const MAX_KEY_LEN: usize = 200;

/// True when `key` can be placed in a command: ASCII letters, digits, `.`, `_`, `:`, `-`.
pub fn usable_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// Runs `command` as root: as it is for root, through `sudo -n` (no password prompt) for
/// anyone else. Stdin reaches the command either way.
pub fn as_root(user: &str, command: &str) -> String {
    if user == "root" {
        command.to_string()
    } else {
        format!("sudo -n sh -c '{}'", command.replace('\'', "'\\''"))
    }
}

/// Prints the claim (empty when the host is free).
pub fn read_claim() -> String {
    format!("cat {CLAIM_PATH} 2>/dev/null || true")
}

/// Claims the host for `key` unless it is claimed, then prints the claim: `key` when this
/// claim (or an earlier one for the same key) holds, another key when someone else has it.
pub fn claim(key: &str) -> String {
    debug_assert!(usable_key(key));
    format!(
        "mkdir -p /var/lib/orc && chmod 0755 /var/lib/orc && \
         (set -C; echo '{key}' > {CLAIM_PATH}) 2>/dev/null; cat {CLAIM_PATH}"
    )
}

/// Prints the host's SMBIOS product UUID, or nothing where it has none.
pub fn product_uuid() -> &'static str {
    "cat /sys/class/dmi/id/product_uuid 2>/dev/null || true"
}

/// Writes stdin to the join token file, 0600 in a 0700 directory, when `key` holds the host.
pub fn write_token(key: &str) -> String {
    debug_assert!(usable_key(key));
    format!(
        "{}umask 077 && mkdir -p /etc/orc && chmod 0700 /etc/orc && \
         cat > {} && echo stored",
        ours_or_exit(key),
        orc_proto::bootstrap::JOIN_TOKEN_PATH
    )
}

/// Runs the script on stdin (the zone's bootstrap without its token) when `key` holds the
/// host. The bootstrap starts the agent and returns.
pub fn run_first_boot(key: &str) -> String {
    debug_assert!(usable_key(key));
    format!("{}sh -s", ours_or_exit(key))
}

/// Stops the agent of `key`'s node and removes what the bootstrap left (the agent's state,
/// its settings, its unit, the token if it was never used), then the claim. Prints
/// `released`; exits 3 without touching anything when the host holds another claim.
pub fn release(key: &str) -> String {
    debug_assert!(usable_key(key));
    format!(
        "{ours}\
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ] && [ -f /etc/systemd/system/orc-agent.service ]; then
  systemctl disable --now orc-agent.service >/dev/null 2>&1 || true
  rm -f /etc/systemd/system/orc-agent.service
  systemctl daemon-reload || true
fi
if [ -f {AGENT_PID_PATH} ]; then
  pid=$(cat {AGENT_PID_PATH})
  if [ -r \"/proc/$pid/cmdline\" ] && tr '\\000' ' ' < \"/proc/$pid/cmdline\" | grep -q ' agent'; then
    kill \"$pid\" 2>/dev/null || true
    n=0
    while [ -d \"/proc/$pid\" ] && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
    kill -9 \"$pid\" 2>/dev/null || true
  fi
  rm -f {AGENT_PID_PATH}
fi
rm -rf /etc/orc /var/lib/orc/agent /var/log/orc-agent.log
rm -f {CLAIM_PATH}
echo released
",
        ours = ours_or_exit(key)
    )
}

/// A prefix that exits 3 unless the claim on the host is `key`'s.
fn ours_or_exit(key: &str) -> String {
    format!(
        "[ \"$(cat {CLAIM_PATH} 2>/dev/null)\" = '{key}' ] || \
         {{ echo 'this host is not claimed by {key}' >&2; exit 3; }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_could_leave_their_quotes_are_unusable() {
        assert!(usable_key("node_01HZY8-a:b.c"));
        for bad in ["", "a'b", "a b", "a;b", "a$b", "a\nb", &"k".repeat(201)] {
            assert!(!usable_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn commands_for_another_user_go_through_sudo_with_their_quotes_intact() {
        assert_eq!(as_root("root", "cat /x"), "cat /x");
        assert_eq!(
            as_root("ops", "echo 'a' > /x"),
            "sudo -n sh -c 'echo '\\''a'\\'' > /x'"
        );
    }

    #[test]
    fn every_command_that_changes_a_host_checks_the_claim_first() {
        for command in [write_token("n1"), run_first_boot("n1"), release("n1")] {
            assert!(
                command.starts_with("[ \"$(cat /var/lib/orc/claim 2>/dev/null)\" = 'n1' ]"),
                "{command}"
            );
        }
        assert!(write_token("n1").contains("umask 077"));
        assert!(claim("n1").contains("set -C"));
    }
}
