//! The operator's hosts as a [`MachineProvider`]: free hosts are offered, a create claims
//! one over SSH, install joins it with the zone's bootstrap (the token on stdin), and a
//! delete stops its agent, removes what the bootstrap left and frees it.
//!
//! State: the claims on the hosts themselves ([`script::CLAIM_PATH`]). A listing of every
//! host's claim is read over SSH (all hosts at once) and reused for
//! [`DEFAULT_LISTING_TTL`] by offers, get and list; creates and deletes read afresh. A host
//! that does not answer keeps the claim last read from it; while a host has never answered
//! since the provider started, its claim is unknown, the host is not offered, and the
//! inventory is not reported (an incomplete one would make the zone take the nodes on it
//! for lost).
//!
//! Power: a host is the operator's, so orc restarts it (reset, cycle, graceful restart:
//! `reboot` over SSH) but never powers it off, since nothing could power it on again.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use orc_common::Secret;
use orc_common::{Money, Period};
use orc_provider_sdk::ProgressSink;
use orc_provider_sdk::machine::{
    CatalogEntry, Install, Machine, MachineCatalog, MachineError, MachineKey, MachineOffer,
    MachineProvider, MachineSpec, MachineState, OfferQuery, PowerAction,
};
use orc_ssh::{RusshExecutor, SshError, SshExecutor, SshOutput, SshTarget};

use crate::config::{DEFAULT_OS, Host, StaticAccount};
use crate::script;

/// How long a listing of the claims serves offers, get and list.
pub const DEFAULT_LISTING_TTL: Duration = Duration::from_secs(30);

/// How the provider reaches its hosts.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Connect and authentication timeout of one attempt.
    pub connect_timeout: Duration,
    /// Longest run of one remote command (the bootstrap downloads the agent).
    pub command_timeout: Duration,
    /// How long a listing of the claims is reused.
    pub listing_ttl: Duration,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            connect_timeout: Duration::from_secs(10),
            command_timeout: Duration::from_secs(600),
            listing_ttl: DEFAULT_LISTING_TTL,
        }
    }
}

/// What a host's claim file says, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Never read since the provider started (the host has not answered).
    Unknown,
    Free,
    /// Held by a node of ours.
    Ours(MachineKey),
    /// Held under a key this provider cannot use (another tool wrote the file).
    Foreign(String),
}

impl Claim {
    fn from_file(text: &str) -> Claim {
        let text = text.trim();
        if text.is_empty() {
            Claim::Free
        } else if script::usable_key(text)
            && let Some(key) = MachineKey::new(text)
        {
            Claim::Ours(key)
        } else {
            Claim::Foreign(text.chars().take(80).collect())
        }
    }
}

/// One host and its claim, as [`StaticMachines::hosts`] reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostStatus {
    pub name: String,
    pub claim: Claim,
    /// Why the last read failed, when it did.
    pub unreachable: Option<String>,
}

#[derive(Debug, Default)]
struct Listing {
    read_at: Option<Instant>,
    claims: BTreeMap<String, Claim>,
    unreachable: BTreeMap<String, String>,
}

/// The operator's hosts.
#[derive(Debug)]
pub struct StaticMachines<S = RusshExecutor> {
    account: StaticAccount,
    options: SshOptions,
    ssh: S,
    /// Claims and releases run one at a time within a process.
    changes: tokio::sync::Mutex<()>,
    listing: Mutex<Listing>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Recent,
    Fresh,
}

fn config_error(problem: impl Into<String>) -> MachineError {
    MachineError::Config {
        problem: problem.into(),
    }
}

fn ssh_failed(host: &Host, error: &SshError) -> MachineError {
    MachineError::Provider {
        status: None,
        code: None,
        message: format!("host {}: {error}", host.name),
    }
}

fn step_failed(host: &Host, step: &str, output: &SshOutput) -> MachineError {
    MachineError::Provider {
        status: None,
        code: output.exit_status.map(|s| format!("exit {s}")),
        message: format!(
            "host {}: {step} failed: {}",
            host.name,
            output.stderr_tail()
        ),
    }
}

impl StaticMachines<RusshExecutor> {
    /// The hosts of `account`, reached with the real SSH client.
    pub fn new(account: StaticAccount, options: SshOptions) -> Self {
        StaticMachines::with_executor(account, options, RusshExecutor)
    }
}

impl<S: SshExecutor + Clone> StaticMachines<S> {
    /// The hosts of `account`, reached through `ssh`.
    pub fn with_executor(account: StaticAccount, options: SshOptions, ssh: S) -> Self {
        let claims = account
            .hosts
            .iter()
            .map(|h| (h.name.clone(), Claim::Unknown))
            .collect();
        StaticMachines {
            account,
            options,
            ssh,
            changes: tokio::sync::Mutex::new(()),
            listing: Mutex::new(Listing {
                read_at: None,
                claims,
                unreachable: BTreeMap::new(),
            }),
        }
    }

    /// The host list.
    pub fn account(&self) -> &StaticAccount {
        &self.account
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Listing> {
        self.listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn host(&self, name: &str) -> Option<&Host> {
        self.account.hosts.iter().find(|h| h.name == name)
    }

    fn target(&self, host: &Host) -> Result<SshTarget, MachineError> {
        let private_key = self
            .account
            .ssh_key
            .resolve()
            .map_err(|e| config_error(format!("ssh_key: {e}")))?;
        Ok(SshTarget {
            host: host.address.clone(),
            port: host.port,
            user: host.user.clone(),
            private_key,
            host_key_sha256: vec![host.host_key_sha256.clone()],
            connect_timeout: self.options.connect_timeout,
            command_timeout: self.options.command_timeout,
        })
    }

    /// Runs `command` as root on `host`.
    async fn run(&self, host: &Host, command: &str, stdin: &[u8]) -> Result<SshOutput, SshError> {
        let target = match self.target(host) {
            Ok(target) => target,
            Err(e) => {
                return Err(SshError::Key {
                    reason: e.to_string(),
                });
            }
        };
        self.ssh
            .run(&target, &script::as_root(&host.user, command), stdin)
            .await
    }

    /// Every host's claim, read now or (for `Recent`) reused when young enough.
    async fn claims(&self, read: Read) -> Result<BTreeMap<String, Claim>, MachineError> {
        if read == Read::Recent {
            let listing = self.lock();
            if listing
                .read_at
                .is_some_and(|at| at.elapsed() < self.options.listing_ttl)
            {
                return Ok(listing.claims.clone());
            }
        }
        // Every host at once: a host that does not answer costs its connect timeout once.
        let target_of = |host: &Host| self.target(host);
        let mut reads = tokio::task::JoinSet::new();
        for host in &self.account.hosts {
            let target = target_of(host)?;
            let (ssh, name) = (self.ssh.clone(), host.name.clone());
            let command = script::as_root(&host.user, &script::read_claim());
            reads.spawn(async move { (name, ssh.run(&target, &command, &[]).await) });
        }
        let mut answers = Vec::new();
        while let Some(joined) = reads.join_next().await {
            if let Ok(answer) = joined {
                answers.push(answer);
            }
        }
        let mut listing = self.lock();
        for (name, answer) in answers {
            match answer {
                Ok(output) if output.success() => {
                    listing
                        .claims
                        .insert(name.clone(), Claim::from_file(&output.stdout_text()));
                    listing.unreachable.remove(&name);
                }
                Ok(output) => {
                    let why = format!("reading the claim failed: {}", output.stderr_tail());
                    tracing::warn!(host = %name, "{why}");
                    listing.unreachable.insert(name, why);
                }
                Err(e) => {
                    tracing::warn!(host = %name, error = %e, "a static host did not answer");
                    listing.unreachable.insert(name, e.to_string());
                }
            }
        }
        listing.read_at = Some(Instant::now());
        Ok(listing.claims.clone())
    }

    fn set_claim(&self, host: &str, claim: Claim) {
        let mut listing = self.lock();
        listing.claims.insert(host.to_string(), claim);
    }

    /// Every host with its claim and whether it answered, read now.
    pub async fn hosts(&self) -> Result<Vec<HostStatus>, MachineError> {
        let claims = self.claims(Read::Fresh).await?;
        let listing = self.lock();
        Ok(self
            .account
            .hosts
            .iter()
            .map(|h| HostStatus {
                name: h.name.clone(),
                claim: claims.get(&h.name).cloned().unwrap_or(Claim::Unknown),
                unreachable: listing.unreachable.get(&h.name).cloned(),
            })
            .collect())
    }

    fn machine(&self, key: MachineKey, host: &Host) -> Machine {
        let addresses: Vec<IpAddr> = host.address.parse().into_iter().collect();
        Machine {
            key,
            instance_ref: host.name.clone(),
            name: host.name.clone(),
            location: host.location.clone(),
            plan: host.plan.clone(),
            state: MachineState::Running,
            addresses,
        }
    }

    fn held_by<'a>(
        &'a self,
        claims: &BTreeMap<String, Claim>,
        key: &MachineKey,
    ) -> Option<&'a Host> {
        self.account
            .hosts
            .iter()
            .find(|h| claims.get(&h.name) == Some(&Claim::Ours(key.clone())))
    }

    /// Claims `host` for `key`; `Ok(false)` when someone else holds it.
    async fn claim(&self, host: &Host, key: &MachineKey) -> Result<bool, MachineError> {
        let output = self
            .run(host, &script::claim(key.as_str()), &[])
            .await
            .map_err(|e| ssh_failed(host, &e))?;
        if !output.success() {
            return Err(step_failed(host, "claiming", &output));
        }
        let claim = Claim::from_file(&output.stdout_text());
        let ours = claim == Claim::Ours(key.clone());
        self.set_claim(&host.name, claim);
        Ok(ours)
    }

    /// Joins `machine`'s host with the zone's bootstrap; the work of
    /// [`MachineProvider::install`].
    pub async fn join(
        &self,
        machine: &Machine,
        install: &Install,
        progress: &ProgressSink,
    ) -> Result<(), MachineError> {
        let split = orc_proto::bootstrap::split_token(install.bootstrap.expose()).ok_or_else(
            || config_error("the node's bootstrap carries no join token block, so a static host cannot be joined with it"),
        )?;
        let host = self
            .host(&machine.instance_ref)
            .ok_or_else(|| MachineError::NotFound {
                what: format!("host {}", machine.instance_ref),
            })?;
        let key = machine.key.as_str();
        progress
            .note(format!("joining host {} over SSH", host.name))
            .await;
        let output = self
            .run(host, script::product_uuid(), &[])
            .await
            .map_err(|e| ssh_failed(host, &e))?;
        let uuid = output.stdout_text().trim().to_ascii_lowercase();
        if uuid::Uuid::try_parse(&uuid).is_ok() {
            progress
                .identified(format!("host {} identified", host.name), &uuid)
                .await;
        }
        let token = Secret::new(split.token);
        let output = self
            .run(host, &script::write_token(key), token.expose().as_bytes())
            .await
            .map_err(|e| ssh_failed(host, &e))?;
        if !output.success() {
            return Err(step_failed(host, "storing the join token", &output));
        }
        let output = self
            .run(host, &script::run_first_boot(key), split.script.as_bytes())
            .await
            .map_err(|e| ssh_failed(host, &e))?;
        if !output.success() {
            return Err(step_failed(host, "the bootstrap", &output));
        }
        tracing::info!(host = %host.name, key, "a static host runs the zone's bootstrap");
        progress.note("the host's agent is starting").await;
        Ok(())
    }

    /// Stops `key`'s agent and frees its host; [`MachineError::NotFound`] when no host is
    /// `key`'s.
    pub async fn release(&self, key: &MachineKey) -> Result<String, MachineError> {
        let _one_at_a_time = self.changes.lock().await;
        let claims = self.claims(Read::Fresh).await?;
        let host = self
            .held_by(&claims, key)
            .ok_or_else(|| MachineError::NotFound {
                what: format!("machine {key}"),
            })?;
        let output = self
            .run(host, &script::release(key.as_str()), &[])
            .await
            .map_err(|e| ssh_failed(host, &e))?;
        if !output.success() {
            return Err(step_failed(host, "releasing", &output));
        }
        self.set_claim(&host.name, Claim::Free);
        tracing::info!(host = %host.name, %key, "released a static host");
        Ok(host.name.clone())
    }
}

impl<S: SshExecutor + Clone> MachineProvider for StaticMachines<S> {
    fn catalog(&self) -> MachineCatalog {
        let mut locations: Vec<CatalogEntry> = Vec::new();
        let mut images: Vec<CatalogEntry> = Vec::new();
        for host in &self.account.hosts {
            if !locations.iter().any(|l| l.id == host.location) {
                let title = self
                    .account
                    .location_titles
                    .get(&host.location)
                    .cloned()
                    .unwrap_or_else(|| format!("static hosts at {}", host.location));
                locations.push(CatalogEntry {
                    id: host.location.clone(),
                    title,
                });
            }
            if !images.iter().any(|i| i.id == host.os) {
                let title = if host.os == DEFAULT_OS {
                    "the host's installed system".to_string()
                } else {
                    format!("{} (installed on the host)", host.os)
                };
                images.push(CatalogEntry {
                    id: host.os.clone(),
                    title,
                });
            }
        }
        locations.sort();
        images.sort();
        MachineCatalog { locations, images }
    }

    async fn offers(&self, query: &OfferQuery) -> Result<Vec<MachineOffer>, MachineError> {
        if query.gpu {
            return Ok(Vec::new());
        }
        let claims = self.claims(Read::Recent).await?;
        let mut offers: BTreeMap<(String, String), MachineOffer> = BTreeMap::new();
        for host in &self.account.hosts {
            if query.location.as_ref().is_some_and(|l| l != &host.location) {
                continue;
            }
            let free = claims.get(&host.name) == Some(&Claim::Free);
            let offer = offers
                .entry((host.plan.clone(), host.location.clone()))
                .or_insert_with(|| MachineOffer {
                    plan: host.plan.clone(),
                    location: host.location.clone(),
                    vcpus: host.vcpus,
                    memory_mib: u64::from(host.memory_gib) * 1024,
                    arch: host.arch,
                    disk_gb: u64::from(host.disk_gib) * 1_073_741_824 / 1_000_000_000,
                    hourly: Money::new(host.hourly, self.account.currency, Period::Hour),
                    monthly: None,
                    available: false,
                });
            offer.available |= free;
        }
        Ok(offers.into_values().collect())
    }

    async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
        let key = &spec.idempotency_key;
        if !script::usable_key(key.as_str()) {
            return Err(config_error(format!(
                "idempotency key {key:?} cannot be a host's claim (at most {} letters, digits, '.', '_', ':', '-')",
                script::MAX_KEY_LEN
            )));
        }
        let _one_at_a_time = self.changes.lock().await;
        let claims = self.claims(Read::Fresh).await?;
        if let Some(host) = self.held_by(&claims, key) {
            return Ok(self.machine(key.clone(), host));
        }
        let candidates = self.account.hosts.iter().filter(|h| {
            claims.get(&h.name) == Some(&Claim::Free)
                && (spec.location.is_empty() || h.location == spec.location)
                && (spec.plan.is_empty() || h.plan == spec.plan)
                && (spec.image.is_empty() || h.os == spec.image)
        });
        for host in candidates {
            match self.claim(host, key).await {
                Ok(true) => {
                    tracing::info!(host = %host.name, %key, "claimed a static host");
                    return Ok(self.machine(key.clone(), host));
                }
                Ok(false) => tracing::warn!(host = %host.name, "claim lost to another holder"),
                Err(e) => {
                    tracing::warn!(host = %host.name, error = %e, "a host could not be claimed")
                }
            }
        }
        Err(MachineError::Capacity {
            message: format!(
                "no free static host{}{}",
                if spec.plan.is_empty() {
                    String::new()
                } else {
                    format!(" of plan {}", spec.plan)
                },
                if spec.location.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", spec.location)
                }
            ),
        })
    }

    async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
        let claims = self.claims(Read::Recent).await?;
        Ok(self
            .held_by(&claims, key)
            .map(|host| self.machine(key.clone(), host)))
    }

    async fn list(&self) -> Result<Vec<Machine>, MachineError> {
        let claims = self.claims(Read::Recent).await?;
        let unknown: Vec<&str> = claims
            .iter()
            .filter(|(_, c)| **c == Claim::Unknown)
            .map(|(name, _)| name.as_str())
            .collect();
        if !unknown.is_empty() {
            return Err(MachineError::Provider {
                status: None,
                code: None,
                message: format!(
                    "host(s) {} never answered, so which nodes they hold is unknown",
                    unknown.join(", ")
                ),
            });
        }
        let mut machines: Vec<Machine> = self
            .account
            .hosts
            .iter()
            .filter_map(|h| match claims.get(&h.name) {
                Some(Claim::Ours(key)) => Some(self.machine(key.clone(), h)),
                _ => None,
            })
            .collect();
        machines.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(machines)
    }

    async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
        self.release(key).await.map(|_| ())
    }

    async fn power(&self, key: &MachineKey, action: PowerAction) -> Result<(), MachineError> {
        let claims = self.claims(Read::Fresh).await?;
        let host = self
            .held_by(&claims, key)
            .ok_or_else(|| MachineError::NotFound {
                what: format!("machine {key}"),
            })?;
        match action {
            PowerAction::On => Ok(()),
            PowerAction::Off | PowerAction::GracefulOff => Err(config_error(format!(
                "static host {} is not powered off by orc: nothing could power it on again",
                host.name
            ))),
            PowerAction::Reset | PowerAction::Cycle | PowerAction::GracefulRestart => {
                // The session may end before an answer: the host is going down.
                match self
                    .run(host, "nohup sh -c 'sleep 1; reboot' >/dev/null 2>&1 &", &[])
                    .await
                {
                    Ok(output) if !output.success() => Err(step_failed(host, "reboot", &output)),
                    Ok(_) => Ok(()),
                    Err(SshError::Session { .. }) => Ok(()),
                    Err(e) => Err(ssh_failed(host, &e)),
                }
            }
        }
    }

    async fn reinstall(&self, key: &MachineKey, image: &str) -> Result<(), MachineError> {
        Err(config_error(format!(
            "static hosts keep what is installed on them; {key} cannot be reinstalled with {image:?}"
        )))
    }

    async fn install(
        &self,
        machine: &Machine,
        install: &Install,
        progress: &ProgressSink,
    ) -> Result<(), MachineError> {
        self.join(machine, install, progress)
            .await
            .map_err(|error| {
                tracing::warn!(key = %machine.key, %error, "a static host could not be joined");
                error
            })
    }
}
