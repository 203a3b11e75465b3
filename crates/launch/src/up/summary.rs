//! What `orc up` prints once everything runs.

use super::providers::{STATIC_LOCATION, STATIC_PLAN, partner_admin_url};
use super::{PARTNER_REPLICAS, Up};

impl Up {
    /// What `orc up` prints once everything is up. A new admin token is shown only when the
    /// text goes `to_terminal`: printed into a log or a pipe it would outlive the session.
    pub fn summary(&self, to_terminal: bool) -> String {
        let mut text = String::new();
        let url = self.zone.url();
        text.push_str(&format!("zone      {url}\n"));
        text.push_str(&format!("data dir  {}\n", self.data_dir.display()));
        match self.zone.ca_file() {
            Some(ca) => text.push_str(&format!("CA        {} (clients pin it)\n", ca.display())),
            None => text.push_str("TLS       off (--plain, loopback only)\n"),
        }
        match self.zone.edge_url() {
            Some(edge) => text.push_str(&format!(
                "edge      {edge}/ (sign in with the token; the partner's admin page is \
                 {})\n",
                partner_admin_url(edge)
            )),
            None => text.push_str("edge      off\n"),
        }
        if self.zone.admin_token_is_new() && to_terminal {
            text.push_str(&format!(
                "token     {}   (shown once; kept in {})\n",
                self.zone.admin_token().expose(),
                self.data_dir
                    .join(orc_zone_api_types::data_dir::ADMIN_TOKEN_FILE)
                    .display()
            ));
        } else {
            text.push_str(&format!(
                "token     in {}\n",
                self.data_dir
                    .join(orc_zone_api_types::data_dir::ADMIN_TOKEN_FILE)
                    .display()
            ));
        }
        if let Some(fabric) = &self.fabric {
            text.push_str(&format!(
                "netns     servers are namespaces {}-* on {}/{}; they reach the zone at {}, the echo host is {}\n",
                fabric.plan().prefix(),
                fabric.plan().public_net().0,
                fabric.plan().public_net().1,
                fabric.host_address(),
                fabric.echo_address()
            ));
        }
        if let Some(acme) = &self.acme {
            text.push_str(&format!(
                "acme      {} (pebble; its HTTPS CA in {}, the issued certificates' root at {}/roots/0); names resolve as told: POST {}/add-a {{\"host\":\"NAME.\",\"addresses\":[\"ADDR\"]}}\n",
                acme.directory,
                self.data_dir.join(super::EMULATED_ACME_CA_FILE).display(),
                acme.management,
                acme.dns_management,
            ));
        }
        if let Some(hosts) = &self.static_hosts {
            let list: Vec<String> = hosts
                .hosts()
                .iter()
                .map(|h| format!("{} {}", h.name, h.address))
                .collect();
            text.push_str(&format!(
                "static    hosts {} (namespaces with sshd; location {STATIC_LOCATION}, plan {STATIC_PLAN})\n",
                list.join(", ")
            ));
        }
        if let Some(h) = &self.emulators.hetzner {
            text.push_str(&format!("hetzner   {} (emulated)\n", h.root_url()));
        }
        if let Some(v) = &self.emulators.vultr {
            text.push_str(&format!("vultr     {} (emulated)\n", v.root_url()));
        }
        if let Some(r) = &self.emulators.robot {
            text.push_str(&format!("robot     {} (emulated)\n", r.root_url()));
        }
        text.push_str(&format!(
            "partner   pool sys/sys/partner on core, {}/{PARTNER_REPLICAS} slots running{}; \
             provider {}\n",
            self.partner_running,
            if self.pool_created { " (created)" } else { "" },
            match (self.partner_registered, self.partner_priced) {
                (true, true) => "registered, zone scope, priced (a markup strategy is set)",
                (true, false) => "registered",
                (false, _) => "not registered yet",
            }
        ));
        if self.partner_running < PARTNER_REPLICAS as usize || !self.partner_registered {
            text.push_str("          still starting: see `orc logs sys/partner`\n");
        }
        text.push_str(&format!(
            "one-cloud {} (pools sys/sys/<name> on core, one slot each; secrets in {})\n",
            self.standalone.join(", "),
            self.data_dir.join("secrets").display()
        ));
        let data = shell_word(&self.data_dir.to_string_lossy());
        text.push_str(&format!(
            "\nIn another terminal (the CLI finds this zone through ORC_DATA_DIR):\n\
             \x20 export ORC_DATA_DIR={data}\n\
             \x20 orc providers\n\
             \x20 orc logs sys/partner --level debug\n\
             \x20 orc endpoints sys/sys/partner\n\
             \x20 orc quote sys/sys --provider partner --class eu-central --cpu 2 --mem 4 --os ubuntu-24.04\n\
             \x20 orc pool create sys/sys/web --provider partner --class eu-central --cpu 2 --mem 4 --os ubuntu-24.04 --size 2 --wait\n\
             \x20 orc nodes sys/sys/web\n\
             \x20 orc sites\n\
             \x20 orc pool create sys/sys/api --provider hetzner --location fsn1 --plan cx23 --cpu 2 --mem 4 --os ubuntu-24.04 --size 1 --wait\n\
             \x20 orc pool resize sys/sys/web 0\n\
             \nCtrl-C stops everything; `orc up` again resumes. `kill -HUP {pid}` restarts the zone alone.\n",
            pid = std::process::id()
        ));
        text
    }
}

pub(super) fn shell_word(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
