//! Keeps a [`Fabric`] in step with an emulator's servers.
//!
//! An emulator says, after every request, which servers exist and what they should be
//! ([`ServerWant`]: public address, private networks, powered on or off, boot generation and
//! user data); a background task makes the fabric match, one change at a time, outside the
//! emulator's locks (namespace work takes milliseconds per command, requests must not wait
//! for it). What a server does, as a cloud's machine would:
//!
//! - **first boot** (a new server, or a rebuild: the boot generation moved on): its user data
//!   runs as cloud-init would run it ([`FirstBoot`]): files written, scripts and `runcmd` in
//!   order, everything in the server's console log;
//! - **power off**: every process in it stops;
//! - **power on** again: what an init system would start again starts — the node agent, when
//!   the bootstrap left its settings in `/etc/orc/agent.env`;
//! - **delete**: the namespace and everything in it go.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use tokio::sync::watch;

use crate::first_boot::{FirstBoot, Step};
use crate::netns::Fabric;

/// What an emulator wants of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerWant {
    /// Unique in the fabric (`h42` for Hetzner server 42).
    pub key: String,
    pub public_ipv4: Option<Ipv4Addr>,
    /// (network key, address, prefix length).
    pub private: Vec<(String, Ipv4Addr, u8)>,
    pub powered_on: bool,
    /// Cloud servers: 1 at creation, one more at every rebuild, and a new generation boots
    /// for the first time. Dedicated servers: one more at every reset.
    pub boot: u64,
    pub user_data: Option<Arc<str>>,
    /// A cloud server's first boot runs cloud-init on its user data; a dedicated server has
    /// none and boots what is installed.
    pub cloud_init: bool,
    /// This boot goes into the rescue system, whose sshd lets in these `authorized_keys`
    /// lines (dedicated servers).
    pub rescue: Option<Vec<String>>,
}

/// What an emulator wants of one private network that routes like a cloud's: a router at
/// its gateway address with the network's route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkWant {
    pub key: String,
    pub router: Ipv4Addr,
    pub prefix: u8,
    /// (destination CIDR, next hop).
    pub routes: Vec<(String, Ipv4Addr)>,
}

/// Everything an emulator wants of the fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wants {
    pub servers: Vec<ServerWant>,
    pub networks: Vec<NetworkWant>,
}

#[derive(Debug, Default)]
struct Known {
    booted: u64,
    on: bool,
    networks: BTreeSet<String>,
}

/// The background task keeping one emulator's servers materialised.
pub struct Materialiser {
    fabric: Arc<Fabric>,
    wants: watch::Sender<Arc<Wants>>,
}

impl std::fmt::Debug for Materialiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Materialiser")
            .field("fabric", &self.fabric)
            .finish_non_exhaustive()
    }
}

/// The console-log lines and the script of a first boot.
pub fn first_boot_script(user_data: &str) -> (Vec<String>, String) {
    let mut notes = Vec::new();
    let boot = match FirstBoot::parse(user_data.as_bytes()) {
        Ok(boot) => boot,
        Err(e) => {
            notes.push(format!("cloud-init: the user data cannot be used: {e}"));
            return (notes, String::new());
        }
    };
    notes.extend(
        boot.skipped
            .iter()
            .map(|s| format!("cloud-init: skipped {s}")),
    );
    if !boot.ssh_keys.is_empty() {
        notes.push(format!(
            "cloud-init: {} SSH key(s) for the default user (no SSH in this server)",
            boot.ssh_keys.len()
        ));
    }
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut s = String::from("mkdir -p /run/orc-boot\n");
    for file in &boot.files {
        let path = sh_quote(&file.path);
        let redirect = if file.append { ">>" } else { ">" };
        s.push_str(&format!(
            "mkdir -p \"$(dirname {path})\"\necho {} | base64 -d {redirect} {path}\nchmod {:o} {path}\n",
            b64(&file.content),
            file.permissions
        ));
    }
    for (n, step) in boot.run.iter().enumerate() {
        match step {
            Step::Script { part, body } => {
                let file = format!("/run/orc-boot/part-{part:03}");
                s.push_str(&format!(
                    "echo {} | base64 -d > {file}\nchmod 0700 {file}\necho \"cloud-init: running part {part}\"\n{file} || echo \"cloud-init: part {part} failed with $?\"\n",
                    b64(body.as_bytes())
                ));
            }
            Step::Shell(command) => {
                s.push_str(&format!(
                    "echo \"cloud-init: runcmd {}\"\nsh -c {} || echo \"cloud-init: runcmd {} failed with $?\"\n",
                    n + 1,
                    sh_quote(command),
                    n + 1
                ));
            }
            Step::Argv(argv) => {
                let line: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
                s.push_str(&format!(
                    "echo \"cloud-init: runcmd {}\"\n{} || echo \"cloud-init: runcmd {} failed with $?\"\n",
                    n + 1,
                    line.join(" "),
                    n + 1
                ));
            }
        }
    }
    s.push_str("echo \"cloud-init: finished\"\n");
    (notes, s)
}

/// What the init system of an installed system does at a boot: the one-shot first-boot
/// unit an installer left (a dedicated server's), else the node agent, when a bootstrap
/// installed it.
const REBOOT_SCRIPT: &str = r#"first=/var/lib/orc/first-boot.sh
if [ -f "$first" ] && [ -e /etc/systemd/system/multi-user.target.wants/orc-first-boot.service ]; then
  echo "init: starting orc-first-boot.service"
  sh "$first" || echo "init: orc-first-boot.service failed with $?"
  rm -f "$first"
elif [ -f /etc/orc/agent.env ]; then
  set -a
  . /etc/orc/agent.env
  set +a
  echo "init: starting orc agent"
  nohup /usr/local/bin/orc agent >>/var/log/orc-agent.log 2>&1 </dev/null &
fi
"#;

/// The image files the emulated rescue system offers installimage.
pub const RESCUE_IMAGES: [&str; 2] = [
    "Ubuntu-2404-noble-amd64-base.tar.gz",
    "Debian-1208-bookworm-amd64-base.tar.gz",
];

/// Where Hetzner's rescue system keeps installimage and its images.
const RESCUE_NFS: &str = "/root/.oldroot/nfs";

/// installimage of the emulated rescue system, automatic mode only: it checks its config
/// and image, gives the system a new disk (the server's private paths emptied), keeps the
/// config in `/var/log/installimage.conf` and runs the post-install script.
const INSTALLIMAGE: &str = r#"#!/bin/sh
set -eu
conf='' post='' auto=''
while [ $# -gt 0 ]; do
  case "$1" in
    -a) auto=1 ;;
    -c) conf=$2; shift ;;
    -x) post=$2; shift ;;
    *) echo "installimage: option $1 is not emulated" >&2; exit 64 ;;
  esac
  shift
done
[ -n "$auto" ] || { echo "installimage: only the automatic mode (-a) is emulated" >&2; exit 64; }
[ -f "$conf" ] || { echo "installimage: no config file (-c)" >&2; exit 64; }
grep -q '^DRIVE1 /dev/' "$conf" || { echo "installimage: the config names no DRIVE1" >&2; exit 65; }
image=$(sed -n 's/^IMAGE //p' "$conf")
[ -f "$image" ] || { echo "installimage: image $image does not exist" >&2; exit 65; }
echo "installimage: installing $image onto$(sed -n 's/^DRIVE[0-9]* / /p' "$conf" | tr -d '\n')"
for d in /etc/orc /etc/systemd/system /var/lib/orc; do
  find "$d" -mindepth 1 -delete
done
cp "$conf" /var/log/installimage.conf
if [ -n "$post" ]; then
  echo "installimage: running the post-install script"
  sh "$post"
fi
echo "installimage: done"
"#;

/// The rescue system's boot: root's authorized keys, a host key, installimage and its
/// images, then sshd on port 22 in the foreground.
pub fn rescue_script(keys: &[String]) -> String {
    let mut s = String::from("set -e\necho \"rescue: booting the rescue system\"\n");
    s.push_str(&format!(
        "mkdir -p {RESCUE_NFS}/install {RESCUE_NFS}/images\n"
    ));
    s.push_str(&format!(
        "cat > {RESCUE_NFS}/install/installimage <<'ORC_INSTALLIMAGE'\n{INSTALLIMAGE}ORC_INSTALLIMAGE\nchmod 0755 {RESCUE_NFS}/install/installimage\n"
    ));
    for image in RESCUE_IMAGES {
        s.push_str(&format!(": > {RESCUE_NFS}/images/{image}\n"));
    }
    s.push_str(&sshd_script("/run/orc-rescue", keys, "rescue"));
    s
}

/// Where a static host keeps its sshd's host key and config.
pub const HOST_SSHD_DIR: &str = "/run/orc-host";

/// A static host's boot: root's authorized keys, a host key made once (its public half at
/// `HOST_SSHD_DIR/host_key.pub`), then sshd on port 22 in the foreground.
pub fn host_script(keys: &[String]) -> String {
    let mut s = String::from("set -e\necho \"host: booting\"\n");
    s.push_str(&sshd_script(HOST_SSHD_DIR, keys, "host"));
    s
}

/// Root's `authorized_keys`, a host key under `dir` unless one is there, and sshd on port
/// 22 in the foreground, logging to the console as `who`.
fn sshd_script(dir: &str, keys: &[String], who: &str) -> String {
    let mut s = format!("mkdir -p /run/sshd {dir} /root/.ssh\nchmod 0700 /root/.ssh {dir}\n");
    s.push_str("cat > /root/.ssh/authorized_keys <<'ORC_ROOT_KEYS'\n");
    for key in keys
        .iter()
        .filter(|k| !k.contains('\n') && !k.starts_with("ORC_"))
    {
        s.push_str(key);
        s.push('\n');
    }
    s.push_str("ORC_ROOT_KEYS\nchmod 0600 /root/.ssh/authorized_keys\n");
    s.push_str(&format!(
        "[ -f {dir}/host_key ] || ssh-keygen -q -t ed25519 -N '' -C {who} -f {dir}/host_key\n"
    ));
    s.push_str(&format!(
        "cat > {dir}/sshd_config <<'ORC_SSHD'\nPort 22\nHostKey {dir}/host_key\n\
         AuthorizedKeysFile /root/.ssh/authorized_keys\nPermitRootLogin prohibit-password\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
         PidFile {dir}/sshd.pid\nORC_SSHD\n"
    ));
    s.push_str(&format!(
        "echo \"{who}: sshd on port 22\"\nexec {} -D -e -f {dir}/sshd_config\n",
        crate::netns::SSHD
    ));
    s
}

/// `text` in single quotes for `sh`.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

impl Materialiser {
    /// Starts keeping `fabric` in step with the wants sent to it.
    pub fn spawn(fabric: Arc<Fabric>) -> Arc<Materialiser> {
        let (wants, mut rx) = watch::channel(Arc::new(Wants::default()));
        let known = Arc::new(Mutex::new(BTreeMap::<String, Known>::new()));
        let task_fabric = fabric.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let wants = rx.borrow_and_update().clone();
                let (fabric, known) = (task_fabric.clone(), known.clone());
                let done = tokio::task::spawn_blocking(move || {
                    let mut known = known.lock().unwrap_or_else(PoisonError::into_inner);
                    reconcile(&fabric, &mut known, &wants);
                })
                .await;
                if let Err(e) = done {
                    tracing::warn!(error = %e, "materialising servers failed");
                }
            }
        });
        Arc::new(Materialiser { fabric, wants })
    }

    /// The fabric it keeps.
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }

    /// What the emulator's servers and networks should be now (replaces what was said
    /// before).
    pub fn want(&self, wants: Wants) {
        self.wants.send_if_modified(|current| {
            if **current == wants {
                false
            } else {
                *current = Arc::new(wants);
                true
            }
        });
    }
}

fn run_detached(fabric: &Fabric, key: &str, script: &str) {
    match fabric.run_script(key, script) {
        Ok(mut child) => {
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
        Err(e) => tracing::warn!(server = key, error = %e, "a script did not start"),
    }
}

fn reconcile(fabric: &Fabric, known: &mut BTreeMap<String, Known>, all: &Wants) {
    let wants = all.servers.as_slice();
    let wanted: BTreeSet<&str> = wants.iter().map(|w| w.key.as_str()).collect();
    let gone: Vec<String> = known
        .keys()
        .filter(|k| !wanted.contains(k.as_str()))
        .cloned()
        .collect();
    for key in gone {
        known.remove(&key);
        match fabric.remove_server(&key) {
            Ok(()) => tracing::info!(server = key, "materialised server removed"),
            Err(e) => {
                tracing::warn!(server = key, error = %e, "a materialised server was not removed")
            }
        }
    }
    for want in wants {
        if !known.contains_key(&want.key) {
            let uuid = product_uuid(&want.key);
            if let Err(e) = fabric.add_server(&want.key, want.public_ipv4, &uuid) {
                tracing::warn!(server = want.key, error = %e, "a server could not be materialised");
                continue;
            }
            known.insert(want.key.clone(), Known::default());
        }
        let Some(k) = known.get_mut(&want.key) else {
            continue;
        };
        for (network, address, prefix) in &want.private {
            if k.networks.contains(network) {
                continue;
            }
            let attached = fabric
                .add_network(network)
                .and_then(|()| fabric.attach(&want.key, network, *address, *prefix));
            match attached {
                Ok(_) => {
                    k.networks.insert(network.clone());
                }
                Err(e) => tracing::warn!(server = want.key, network, error = %e, "not attached"),
            }
        }
        if want.powered_on {
            if k.booted < want.boot {
                let script = boot_script(fabric, want, k);
                run_detached(fabric, &want.key, &script);
                k.booted = want.boot;
                k.on = true;
            } else if !k.on {
                let _ = fabric.console_line(&want.key, "boot: powered on");
                run_detached(fabric, &want.key, REBOOT_SCRIPT);
                k.on = true;
            }
        } else if k.on {
            let stopped = fabric.stop(&want.key).unwrap_or(0);
            let _ = fabric.console_line(
                &want.key,
                &format!("power: off ({stopped} process(es) stopped)"),
            );
            k.on = false;
        }
    }
    for network in &all.networks {
        let routed = fabric.add_network(&network.key).and_then(|()| {
            fabric.route_network(
                &network.key,
                network.router,
                network.prefix,
                &network.routes,
            )
        });
        if let Err(e) = routed {
            tracing::warn!(network = network.key, error = %e, "a network's routes were not set");
        }
    }
}

/// What a new boot of `want` runs, after stopping what ran before: a cloud server's first
/// boot of a generation (cloud-init on its user data), or a dedicated server's boot into its
/// rescue system or what is installed. Says so in the console log.
fn boot_script(fabric: &Fabric, want: &ServerWant, k: &Known) -> String {
    let say = |line: &str| {
        let _ = fabric.console_line(&want.key, line);
    };
    if !want.cloud_init {
        if k.on {
            let _ = fabric.stop(&want.key);
            say("reset: the server restarts");
        }
        return match &want.rescue {
            Some(keys) => {
                say("boot: the rescue system (PXE)");
                rescue_script(keys)
            }
            None => {
                say("boot: the installed system");
                REBOOT_SCRIPT.to_string()
            }
        };
    }
    if k.booted > 0 {
        let _ = fabric.stop(&want.key);
        say("rebuild: the disk is new");
    }
    say(&format!("boot: first boot of generation {}", want.boot));
    let (notes, script) = first_boot_script(want.user_data.as_deref().unwrap_or(""));
    for note in notes {
        say(&note);
    }
    script
}

/// A stable DMI UUID for a server key.
pub fn product_uuid(key: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut a = std::collections::hash_map::DefaultHasher::new();
    ("orc-emu", key).hash(&mut a);
    let mut b = std::collections::hash_map::DefaultHasher::new();
    (key, "product_uuid").hash(&mut b);
    let (x, y) = (a.finish(), b.finish());
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        x >> 32,
        (x >> 16) & 0xffff,
        x & 0xfff,
        y >> 52,
        y & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_boot_becomes_one_script_in_cloud_init_order() {
        let user_data = "#cloud-config\nwrite_files:\n  - path: /etc/orc/x\n    content: hi\n    permissions: '0600'\nruncmd:\n  - echo one\n  - [echo, two words]\n";
        let (notes, script) = first_boot_script(user_data);
        assert!(notes.is_empty(), "{notes:?}");
        // Into a scratch dir: the script writes and chmods the file it names.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(
                script
                    .replace("/etc/orc/x", &format!("{root}/x"))
                    .replace("/run/orc-boot", &format!("{root}/boot")),
            )
            .output()
            .unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("x")).unwrap(), "hi");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("x"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text,
            "cloud-init: runcmd 1\none\ncloud-init: runcmd 2\ntwo words\ncloud-init: finished\n"
        );
        let (notes, script) = first_boot_script("#cloud-config\nwrite_files: [ {path: \n");
        assert!(script.is_empty());
        assert!(
            notes[0].starts_with("cloud-init: the user data cannot be used"),
            "{notes:?}"
        );
    }

    #[test]
    fn product_uuids_are_stable_and_distinct() {
        assert_eq!(product_uuid("h1"), product_uuid("h1"));
        assert_ne!(product_uuid("h1"), product_uuid("h2"));
        assert_eq!(product_uuid("h1").len(), 36);
    }
}
