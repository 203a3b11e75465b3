//! The one cloud-init builder of orc's providers: a node's user data.
//!
//! A node's user data is the zone's bootstrap payload (a script or a cloud-config), plus a
//! cloud-config of the provider's own with the SSH keys to install for root and commands
//! to run at first boot. With both, a MIME multipart document carries the two parts, which
//! cloud-init runs in order: the provider's cloud-config first, then the bootstrap.
//!
//! Everything written into the cloud-config is quoted as a YAML double-quoted scalar, so
//! a key comment or a command cannot break out of its line.

/// The boundary between the parts of a multipart user data.
const BOUNDARY: &str = "==orc-user-data==";

/// The bootstrap payload cannot be carried as user data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    #[error("the bootstrap is not UTF-8")]
    BootstrapNotText,
}

/// A node's user data, built up and then rendered once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserData {
    bootstrap: String,
    ssh_keys: Vec<String>,
    keep_root_login: bool,
    commands: Vec<String>,
}

impl UserData {
    /// User data that runs `bootstrap` (may be empty).
    pub fn new(bootstrap: &[u8]) -> Result<UserData, UserDataError> {
        let bootstrap =
            std::str::from_utf8(bootstrap).map_err(|_| UserDataError::BootstrapNotText)?;
        Ok(UserData {
            bootstrap: bootstrap.to_string(),
            ..UserData::default()
        })
    }

    /// Installs `keys` for root (blank entries and repeats are dropped, order is kept).
    pub fn ssh_keys<I, S>(mut self, keys: I) -> UserData
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for key in keys {
            let key = key.as_ref().trim();
            if !key.is_empty() && !self.ssh_keys.iter().any(|k| k == key) {
                self.ssh_keys.push(key.to_string());
            }
        }
        self
    }

    /// Says `disable_root: false` with the keys, for images whose cloud-init would
    /// otherwise refuse root logins with them.
    pub fn keep_root_login(mut self) -> UserData {
        self.keep_root_login = true;
        self
    }

    /// Runs `command` with `sh -c` at first boot, after the commands added before it.
    pub fn run(mut self, command: impl Into<String>) -> UserData {
        self.commands.push(command.into());
        self
    }

    /// The provider's own cloud-config, when it has anything to say.
    fn cloud_config(&self) -> Option<String> {
        if self.ssh_keys.is_empty() && self.commands.is_empty() {
            return None;
        }
        let mut text = "#cloud-config\n".to_string();
        if !self.ssh_keys.is_empty() {
            if self.keep_root_login {
                text.push_str("disable_root: false\n");
            }
            text.push_str("ssh_authorized_keys:\n");
            for key in &self.ssh_keys {
                text.push_str(&format!("  - {}\n", quoted(key)));
            }
        }
        if !self.commands.is_empty() {
            text.push_str("runcmd:\n");
            for command in &self.commands {
                text.push_str(&format!("  - [sh, -c, {}]\n", quoted(command)));
            }
        }
        Some(text)
    }

    /// The user data text, or `None` when there is nothing to send.
    pub fn render(&self) -> Option<String> {
        match (self.bootstrap.is_empty(), self.cloud_config()) {
            (true, None) => None,
            (true, Some(cc)) => Some(cc),
            (false, None) => Some(self.bootstrap.clone()),
            (false, Some(cc)) => {
                let kind = if self.bootstrap.starts_with("#cloud-config") {
                    "text/cloud-config"
                } else {
                    "text/x-shellscript"
                };
                Some(format!(
                    "Content-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\nMIME-Version: 1.0\n\n--{BOUNDARY}\nContent-Type: text/cloud-config; charset=\"utf-8\"\n\n{cc}\n--{BOUNDARY}\nContent-Type: {kind}; charset=\"utf-8\"\n\n{}\n--{BOUNDARY}--\n",
                    self.bootstrap
                ))
            }
        }
    }
}

/// A YAML double-quoted scalar: quotes and backslashes escaped, control characters blanked.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkxbq0XPwVbYb2oZfhIfxXvqqxVGbAIbR2l4vXQdQ5Y ops@example";

    /// What this builder writes is what a cloud's first boot reads: the emulators' reading
    /// of it (the one materialised servers run) gets back every key, command and script.
    #[test]
    fn a_first_boot_reads_back_what_is_written() {
        use orc_emu::first_boot::{FirstBoot, Step};
        let odd = "ssh-ed25519 AAAA \"odd\\comment\"";
        let text = UserData::new(b"#!/bin/sh\necho boot\n")
            .unwrap()
            .ssh_keys([KEY, odd])
            .keep_root_login()
            .run("ip route replace default via 10.64.3.1 || true")
            .render()
            .unwrap();
        let boot = FirstBoot::parse(text.as_bytes()).unwrap();
        assert_eq!(boot.ssh_keys, [KEY, odd]);
        assert!(boot.root_login);
        assert_eq!(
            boot.run,
            [
                Step::Script {
                    part: 2,
                    body: "#!/bin/sh\necho boot\n".into()
                },
                Step::Argv(vec![
                    "sh".into(),
                    "-c".into(),
                    "ip route replace default via 10.64.3.1 || true".into()
                ]),
            ]
        );
        assert!(boot.skipped.is_empty(), "{:?}", boot.skipped);
        let alone = UserData::new(b"")
            .unwrap()
            .ssh_keys([KEY])
            .render()
            .unwrap();
        assert_eq!(FirstBoot::parse(alone.as_bytes()).unwrap().ssh_keys, [KEY]);
    }

    #[test]
    fn nothing_to_say_is_no_user_data() {
        assert_eq!(UserData::new(b"").unwrap().render(), None);
        assert_eq!(
            UserData::new(b"").unwrap().ssh_keys(["", "  "]).render(),
            None
        );
    }

    #[test]
    fn a_bootstrap_alone_is_sent_as_it_is() {
        let text = UserData::new(b"#!/bin/sh\ntrue\n").unwrap().render();
        assert_eq!(text.as_deref(), Some("#!/bin/sh\ntrue\n"));
    }

    #[test]
    fn keys_and_commands_make_a_quoted_cloud_config() {
        let text = UserData::new(b"")
            .unwrap()
            .ssh_keys([KEY, KEY, "ssh-ed25519 AAAA \"odd\\comment\""])
            .keep_root_login()
            .run("ip route replace default via 10.64.3.1 || true")
            .render()
            .unwrap();
        assert_eq!(
            text,
            format!(
                "#cloud-config\ndisable_root: false\nssh_authorized_keys:\n  - \"{KEY}\"\n  - \"ssh-ed25519 AAAA \\\"odd\\\\comment\\\"\"\nruncmd:\n  - [sh, -c, \"ip route replace default via 10.64.3.1 || true\"]\n"
            )
        );
    }

    #[test]
    fn both_parts_travel_as_multipart_with_the_bootstrap_last() {
        let text = UserData::new(b"#!/bin/sh\necho joined\n")
            .unwrap()
            .ssh_keys([KEY])
            .render()
            .unwrap();
        assert!(text.starts_with("Content-Type: multipart/mixed;"), "{text}");
        let config = text.find("Content-Type: text/cloud-config").unwrap();
        let script = text.find("Content-Type: text/x-shellscript").unwrap();
        assert!(config < script, "{text}");
        assert!(
            text.ends_with("echo joined\n\n--==orc-user-data==--\n"),
            "{text}"
        );
        let nested = UserData::new(b"#cloud-config\nruncmd: []\n")
            .unwrap()
            .run("true")
            .render()
            .unwrap();
        assert_eq!(nested.matches("Content-Type: text/cloud-config").count(), 2);
    }

    #[test]
    fn a_bootstrap_that_is_not_text_is_refused() {
        assert_eq!(
            UserData::new(&[0xff, 0xfe]),
            Err(UserDataError::BootstrapNotText)
        );
    }
}
