//! The static provider against real hosts: two namespaces of an emulated internet, each with
//! its own sshd and host key (`orc_emu::static_hosts`), reached over real SSH.
//!
//! Checks: claims (one host per node, a retry finds the claim, a full list says so, a
//! claim someone else wrote is left alone), the join (token 0600 from stdin, never in a
//! command; the bootstrap's agent runs), the release (the agent stops, what the bootstrap
//! left goes, the host is offered again), and a host whose key is not the pinned one is not
//! reached.
//!
//! Needs root (network namespaces, sshd); CI runs it as root. Without root it fails with
//! the reason; it never skips.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use orc_common::Secret;
use orc_emu::netns::Fabric;
use orc_emu::static_hosts::StaticHosts;
use orc_prov_static::{Claim, SshOptions, StaticMachines, parse_account};
use orc_provider_sdk::ProgressSink;
use orc_provider_sdk::machine::{
    Install, MachineError, MachineKey, MachineProvider, MachineSpec, OfferQuery,
};
use orc_ssh::{RusshExecutor, SshError, SshExecutor, SshOutput, SshTarget};

const TOKEN: &str = "orcjoin.static-t0ken-that-must-never-leak";

/// Commands sent over SSH, each with its stdin.
type Sent = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// The real executor, recording every command and stdin it sends.
#[derive(Clone, Default)]
struct Recording {
    inner: RusshExecutor,
    sent: Sent,
}

impl SshExecutor for Recording {
    async fn run(
        &self,
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> Result<SshOutput, SshError> {
        self.sent
            .lock()
            .unwrap()
            .push((command.to_string(), stdin.to_vec()));
        self.inner.run(target, command, stdin).await
    }
}

fn key(text: &str) -> MachineKey {
    MachineKey::new(text).unwrap()
}

fn spec(k: &str) -> MachineSpec {
    MachineSpec {
        idempotency_key: key(k),
        name: k.to_string(),
        location: "lab".into(),
        plan: String::new(),
        image: String::new(),
        ssh_keys: Vec::new(),
        user_data: None,
    }
}

/// The zone's bootstrap, as far as a host sees it: the token block, then an "agent" that
/// runs until stopped, started the way the zone's bootstrap starts one without systemd.
fn bootstrap() -> String {
    format!(
        "#!/bin/sh\nset -eu\numask 077\nmkdir -p /etc/orc /var/lib/orc/agent\n{}\
         stat -c %a /etc/orc/join-token > /var/lib/orc/agent/token-mode\n\
         printf 'while :; do sleep 1; done\\n' > /var/lib/orc/agent/fake-orc\n\
         nohup /bin/sh /var/lib/orc/agent/fake-orc agent >>/var/log/orc-agent.log 2>&1 </dev/null &\n\
         echo $! > /run/orc-agent.pid\n",
        orc_proto::bootstrap::token_block(TOKEN)
    )
}

fn sh_in(hosts: &StaticHosts, host: usize, script: &str) -> String {
    let out = hosts
        .fabric()
        .exec(&hosts.hosts()[host].key, &["sh", "-c", script])
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_are_claimed_joined_and_released_over_real_ssh() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root (network namespaces and sshd); CI runs it as root"
    );
    orc_emu::netns::check_prerequisites().expect("the fabric's prerequisites");
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("id");
    let made = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "orc-static-test",
            "-f",
        ])
        .arg(&key_path)
        .status()
        .unwrap();
    assert!(made.success());
    let public = std::fs::read_to_string(dir.path().join("id.pub")).unwrap();

    let fabric = Arc::new(
        tokio::task::spawn_blocking(|| Fabric::create(None))
            .await
            .unwrap()
            .unwrap(),
    );
    let hosts = {
        let (fabric, public) = (fabric.clone(), public.trim().to_string());
        tokio::task::spawn_blocking(move || {
            StaticHosts::start(fabric, &["lab-1", "lab-2"], &[public])
        })
        .await
        .unwrap()
        .unwrap()
    };
    let list = |pin_of: &dyn Fn(usize) -> String| {
        let entries: Vec<String> = hosts
            .hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                serde_json::json!({
                    "name": h.name, "address": h.address.to_string(), "host_key": pin_of(i),
                    "location": "lab", "plan": "lab-2c4g", "vcpus": 2, "memory_gib": 4,
                    "hourly": "0.01",
                })
                .to_string()
            })
            .collect();
        format!(
            r#"{{"ssh_key":"file://{}","hosts":[{}]}}"#,
            key_path.display(),
            entries.join(",")
        )
    };
    let account = parse_account(&list(&|i| hosts.hosts()[i].host_key.clone())).unwrap();
    let options = SshOptions {
        connect_timeout: Duration::from_secs(5),
        listing_ttl: Duration::ZERO,
        ..SshOptions::default()
    };
    let ssh = Recording::default();
    let machines = StaticMachines::with_executor(account, options.clone(), ssh.clone());

    // Both hosts are offered as one plan, then claimed one per node.
    let offers = machines.offers(&OfferQuery::default()).await.unwrap();
    assert_eq!(offers.len(), 1, "{offers:?}");
    assert!(offers[0].available);
    assert_eq!((offers[0].vcpus, offers[0].memory_mib), (2, 4096));
    let first = machines.create(&spec("node-a")).await.unwrap();
    assert_eq!(first.instance_ref, "lab-1");
    assert_eq!(
        first.addresses,
        [std::net::IpAddr::V4(hosts.hosts()[0].address)]
    );
    let again = machines.create(&spec("node-a")).await.unwrap();
    assert_eq!(again.instance_ref, "lab-1", "a retry finds the claim");
    let second = machines.create(&spec("node-b")).await.unwrap();
    assert_eq!(second.instance_ref, "lab-2");
    let full = machines.create(&spec("node-c")).await.unwrap_err();
    assert!(matches!(full, MachineError::Capacity { .. }), "{full}");
    assert!(!machines.offers(&OfferQuery::default()).await.unwrap()[0].available);
    let listed: Vec<String> = machines
        .list()
        .await
        .unwrap()
        .iter()
        .map(|m| m.key.to_string())
        .collect();
    assert_eq!(listed, ["node-a", "node-b"]);
    assert_eq!(sh_in(&hosts, 0, "cat /var/lib/orc/claim"), "node-a");

    // The join: the token from stdin into a private file, the bootstrap's agent running.
    let install = Install {
        bootstrap: Secret::new(bootstrap()),
        hostname: "node-a".into(),
        ssh_keys: Vec::new(),
    };
    let progress = ProgressSink::discard(orc_proto::NodeId::new("node-a").unwrap());
    machines.install(&first, &install, &progress).await.unwrap();
    assert_eq!(sh_in(&hosts, 0, "cat /etc/orc/join-token"), TOKEN);
    assert_eq!(sh_in(&hosts, 0, "cat /var/lib/orc/agent/token-mode"), "600");
    let pid: u32 = sh_in(&hosts, 0, "cat /run/orc-agent.pid").parse().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    {
        let sent = ssh.sent.lock().unwrap();
        for (command, _) in sent.iter() {
            assert!(!command.contains(TOKEN), "token in a command: {command}");
        }
        let carrying: Vec<_> = sent
            .iter()
            .filter(|(_, stdin)| String::from_utf8_lossy(stdin).contains(TOKEN))
            .collect();
        assert_eq!(carrying.len(), 1, "the token travels once");
        assert_eq!(carrying[0].1, TOKEN.as_bytes(), "and alone");
    }

    // A node's install on a host that another node holds changes nothing there.
    let wrong = orc_provider_sdk::machine::Machine {
        key: key("node-b"),
        ..first.clone()
    };
    let refused = machines.install(&wrong, &install, &progress).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(sh_in(&hosts, 0, "cat /var/lib/orc/claim"), "node-a");

    // The release stops the agent and takes back what the bootstrap left.
    machines.delete(&key("node-a")).await.unwrap();
    let stopped = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(stopped, "the agent {pid} stopped");
    assert_eq!(
        sh_in(
            &hosts,
            0,
            // /etc/orc is a mount point in an emulated host, so its contents are counted.
            "{ find /etc/orc /var/lib/orc/agent /var/log/orc-agent.log -mindepth 0 2>/dev/null \
               | grep -vx /etc/orc; ls /run/orc-agent.pid /var/lib/orc/claim 2>/dev/null; } | wc -l"
        ),
        "0",
        "nothing of the node is left on the host"
    );
    let gone = machines.delete(&key("node-a")).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert!(machines.offers(&OfferQuery::default()).await.unwrap()[0].available);

    // A claim someone else wrote is never taken or touched.
    machines.delete(&key("node-b")).await.unwrap();
    sh_in(&hosts, 1, "echo 'not an orc key!' > /var/lib/orc/claim");
    let statuses = machines.hosts().await.unwrap();
    assert_eq!(statuses[0].claim, Claim::Free);
    assert!(
        matches!(statuses[1].claim, Claim::Foreign(_)),
        "{statuses:?}"
    );
    assert_eq!(
        machines.create(&spec("node-d")).await.unwrap().instance_ref,
        "lab-1"
    );
    let full = machines.create(&spec("node-e")).await.unwrap_err();
    assert!(matches!(full, MachineError::Capacity { .. }), "{full}");
    assert_eq!(
        sh_in(&hosts, 1, "cat /var/lib/orc/claim"),
        "not an orc key!"
    );
    machines.delete(&key("node-d")).await.unwrap();

    // A host that shows another host key is not reached, and the inventory waits for it.
    let swapped = parse_account(&list(&|i| hosts.hosts()[1 - i].host_key.clone())).unwrap();
    let pinned = StaticMachines::with_executor(swapped, options, RusshExecutor);
    let statuses = pinned.hosts().await.unwrap();
    assert!(
        statuses
            .iter()
            .all(|s| s.claim == Claim::Unknown && s.unreachable.is_some()),
        "{statuses:?}"
    );
    let unknown = pinned.list().await.unwrap_err();
    assert!(unknown.to_string().contains("never answered"), "{unknown}");
    assert!(pinned.create(&spec("node-f")).await.is_err());
    assert_eq!(
        sh_in(&hosts, 0, "cat /var/lib/orc/claim 2>/dev/null || echo free"),
        "free"
    );

    drop(hosts);
    tokio::task::spawn_blocking(move || drop(fabric))
        .await
        .unwrap();
}
