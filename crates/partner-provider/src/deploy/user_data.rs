//! A node's first-boot user data: the zone's bootstrap, the SSH keys to install for root and
//! the network set-up of the node's role, rendered by provider-sdk's one cloud-init builder
//! ([`orc_provider_sdk::cloud_init::UserData`]).
//!
//! Invariants: Windows images get the bootstrap only (cloud-init's keys and commands do not
//! apply to them); the commands are idempotent (`|| true`, `-C … ||`), so a reboot that runs
//! them again changes nothing.

use orc_partner::params::Config;
use orc_provider_sdk::cloud_init::UserData;

use crate::naming::Prefix;
use crate::sites::NetworkBoot;

/// What the first boot sets up besides the bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boot {
    /// No network set-up (Windows images, or a test).
    Plain,
    /// A tenant node: default route through the site gateway.
    Node(NetworkBoot),
    /// A site gateway: forwarding and masquerading for the site's prefix, holding the fixed
    /// private address (on clouds without a route table it adds it itself).
    Gateway { prefix: Prefix, claim_address: bool },
}

impl Boot {
    /// The shell commands of this set-up, in order.
    fn commands(self) -> Vec<String> {
        let mut commands = Vec::new();
        match self {
            Boot::Plain => {}
            Boot::Node(net) => {
                commands.push(format!(
                    "ip route replace default via {} || true",
                    net.default_via
                ));
            }
            Boot::Gateway {
                prefix,
                claim_address,
            } => {
                if claim_address {
                    let [a, b, c, _] = prefix.network().octets();
                    commands.push(format!(
                        "dev=$(ip -o -4 addr show | awk '$4 ~ /^{a}\\.{b}\\.{c}\\./ {{print $2; exit}}'); [ -n \"$dev\" ] && ip addr add {}/{} dev \"$dev\" || true",
                        prefix.gateway(),
                        prefix.bits()
                    ));
                }
                commands.push("sysctl -w net.ipv4.ip_forward=1".to_string());
                // Until the gateway's agent sets up the site's NAT: egress of the site's
                // nodes (to fetch and start their agents), never toward another site, which
                // the backbone reaches without NAT.
                let sites = crate::naming::SITE_RANGE;
                commands.push(format!(
                    "iptables -t nat -C POSTROUTING -s {prefix} ! -d {sites} -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s {prefix} ! -d {sites} -j MASQUERADE"
                ));
            }
        }
        commands
    }
}

/// The node's user data: the zone's bootstrap payload, plus a cloud-config that installs
/// the deploy's SSH keys and the `ssh_keys` param for root (Linux images: `linux`) and the
/// network set-up of `boot`. With both, a MIME multipart document carries the two parts.
/// `Err` names what is wrong.
pub fn user_data(
    bootstrap: &[u8],
    deploy_keys: &[String],
    config: &Config,
    linux: bool,
    boot: Boot,
) -> Result<Option<String>, &'static str> {
    let data = UserData::new(bootstrap).map_err(|_| "the bootstrap is not UTF-8")?;
    let mut keys: Vec<String> = deploy_keys.to_vec();
    for key in &config.ssh_keys {
        keys.push(
            key.to_openssh()
                .map_err(|_| "an ssh_keys entry cannot be written")?,
        );
    }
    if !linux {
        return Ok(data.render());
    }
    let data = boot
        .commands()
        .into_iter()
        .fold(data.ssh_keys(keys).keep_root_login(), UserData::run);
    Ok(data.render())
}

#[cfg(test)]
mod tests {
    use orc_partner::params::{MapSource, load_config};

    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkxbq0XPwVbYb2oZfhIfxXvqqxVGbAIbR2l4vXQdQ5Y ops";

    fn config() -> Config {
        load_config(
            &MapSource::new()
                .param("partner_id", "zone-1")
                .param("vultr_api_key", "k")
                .param("vultr_owner_tag", "t"),
        )
        .unwrap()
    }

    #[test]
    fn user_data_carries_the_bootstrap_and_the_keys() {
        let cfg = config();
        assert_eq!(user_data(b"", &[], &cfg, true, Boot::Plain), Ok(None));
        assert_eq!(
            user_data(b"#!/bin/sh\ntrue\n", &[], &cfg, true, Boot::Plain),
            Ok(Some("#!/bin/sh\ntrue\n".to_string()))
        );
        let keys_only = user_data(b"", &[KEY.to_string()], &cfg, true, Boot::Plain)
            .unwrap()
            .unwrap();
        assert_eq!(
            keys_only,
            format!("#cloud-config\ndisable_root: false\nssh_authorized_keys:\n  - \"{KEY}\"\n")
        );
        let both = user_data(
            b"#!/bin/sh\ntrue\n",
            &[KEY.to_string()],
            &cfg,
            true,
            Boot::Plain,
        )
        .unwrap()
        .unwrap();
        assert!(
            both.starts_with(
                "Content-Type: multipart/mixed; boundary=\"==orc-user-data==\"\nMIME-Version: 1.0\n"
            ),
            "{both}"
        );
        assert!(both.contains("Content-Type: text/x-shellscript"), "{both}");
        assert!(
            both.contains(KEY) && both.contains("#!/bin/sh\ntrue\n"),
            "{both}"
        );
        assert!(both.ends_with("\n--==orc-user-data==--\n"), "{both}");
        assert!(user_data(&[0xff, 0xfe], &[], &cfg, true, Boot::Plain).is_err());
        let windows = user_data(b"", &[KEY.to_string()], &cfg, false, Boot::Plain).unwrap();
        assert_eq!(windows, None, "no cloud-config keys on a Windows image");
    }

    #[test]
    fn user_data_routes_nodes_through_the_gateway_and_sets_the_gateway_up() {
        let cfg = config();
        let prefix = Prefix::new(3).unwrap();
        let node = user_data(
            b"",
            &[],
            &cfg,
            true,
            Boot::Node(NetworkBoot {
                prefix,
                default_via: prefix.router(),
            }),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            node,
            "#cloud-config\nruncmd:\n  - [sh, -c, \"ip route replace default via 10.128.3.1 || true\"]\n"
        );
        let gateway = user_data(
            b"",
            &[],
            &cfg,
            true,
            Boot::Gateway {
                prefix,
                claim_address: true,
            },
        )
        .unwrap()
        .unwrap();
        assert!(gateway.contains("ip addr add 10.128.3.254/24"), "{gateway}");
        assert!(gateway.contains("net.ipv4.ip_forward=1"), "{gateway}");
        assert!(
            gateway.contains("-s 10.128.3.0/24 ! -d 10.128.0.0/10 -j MASQUERADE"),
            "{gateway}"
        );
    }
}
