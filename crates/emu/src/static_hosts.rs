//! Hosts an operator would list for the static provider, as servers of a [`Fabric`]: each is
//! a namespace on the emulated internet with a public address of the fabric's slice and its
//! own sshd (root logs in with the keys given), so the static provider reaches them over
//! SSH as it would real machines. They are no cloud's: nothing creates or deletes them but
//! [`StaticHosts::start`] and its drop.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::materialise::{HOST_SSHD_DIR, host_script, product_uuid};
use crate::netns::{Fabric, NetnsError};

/// Where in the fabric's public slice static hosts take their addresses (the clouds' servers
/// take theirs below).
pub const STATIC_OFFSET: u32 = 4000;

/// How long a host's sshd may take to answer.
const START_WAIT: Duration = Duration::from_secs(20);

/// One static host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticHost {
    /// The operator's name of the host (`static-1`).
    pub name: String,
    /// Its server key in the fabric.
    pub key: String,
    pub address: Ipv4Addr,
    /// Its sshd's public host key, an OpenSSH line.
    pub host_key: String,
}

/// Static hosts in a fabric; removed on drop.
pub struct StaticHosts {
    fabric: Arc<Fabric>,
    hosts: Vec<StaticHost>,
}

impl std::fmt::Debug for StaticHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticHosts")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl StaticHosts {
    /// Starts one host per name, letting root in with `authorized_keys`, and waits until
    /// every sshd answers.
    pub fn start(
        fabric: Arc<Fabric>,
        names: &[&str],
        authorized_keys: &[String],
    ) -> Result<StaticHosts, NetnsError> {
        let mut hosts = StaticHosts {
            fabric,
            hosts: Vec::new(),
        };
        for (i, name) in names.iter().enumerate() {
            let n = u32::try_from(i).unwrap_or(u32::MAX);
            let address = hosts
                .fabric
                .plan()
                .public(STATIC_OFFSET + n)
                .ok_or(NetnsError::NoSlot)?;
            let key = format!("st{}", i + 1);
            hosts
                .fabric
                .add_server(&key, Some(address), &product_uuid(&key))?;
            hosts.hosts.push(StaticHost {
                name: (*name).to_string(),
                key: key.clone(),
                address,
                host_key: String::new(),
            });
            let mut sshd = hosts
                .fabric
                .run_script(&key, &host_script(authorized_keys))?;
            std::thread::spawn(move || {
                let _ = sshd.wait();
            });
        }
        let started = Instant::now();
        for host in &mut hosts.hosts {
            host.host_key = wait_for_sshd(&hosts.fabric, host, started)?;
        }
        Ok(hosts)
    }

    /// The hosts, in the order of their names.
    pub fn hosts(&self) -> &[StaticHost] {
        &self.hosts
    }

    /// The fabric they are in.
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }
}

/// Waits until `host`'s sshd takes connections; returns its public host key.
fn wait_for_sshd(
    fabric: &Fabric,
    host: &StaticHost,
    started: Instant,
) -> Result<String, NetnsError> {
    let path = format!("{HOST_SSHD_DIR}/host_key.pub");
    loop {
        let key = fabric
            .exec(&host.key, &["cat", &path])
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|key| !key.is_empty());
        let answers = TcpStream::connect_timeout(
            &SocketAddr::from((host.address, 22)),
            Duration::from_millis(300),
        )
        .is_ok();
        if let (Some(key), true) = (key, answers) {
            return Ok(key);
        }
        if started.elapsed() > START_WAIT {
            return Err(NetnsError::Command {
                command: format!("sshd of static host {}", host.name),
                stderr: format!(
                    "did not answer on {}:22 within {START_WAIT:?}; its console: {}",
                    host.address,
                    fabric.console(&host.key).unwrap_or_default().trim()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for StaticHosts {
    fn drop(&mut self) {
        for host in &self.hosts {
            if let Err(e) = self.fabric.remove_server(&host.key) {
                tracing::warn!(host = host.name, error = %e, "a static host was not removed");
            }
        }
    }
}
