//! The Robot account as a [`MachineProvider`]: servers the account already has are offered,
//! claimed by name, powered through resets, and (with an [`SshExecutor`]) identified and
//! bootstrapped from the rescue system.
//!
//! Claims: a server is this provider's when its Robot name is [`CLAIM_PREFIX`] followed by
//! the idempotency key (`orc-node_01…`); a server with an empty name is free; a server
//! with any other name belongs to someone else and is never offered, claimed or touched.
//! Claims are made one at a time within a process (a mutex), and every claim is read back
//! so that a rename that raced with another tool is noticed. Robot keeps no other state of
//! ours: a restarted provider finds its servers by name.
//!
//! Reads: offers, get and list reuse a server listing for [`DEFAULT_LISTING_TTL`], because
//! Robot's hourly budget for `/server` is smaller than what the zone's inventory and the
//! offers refresh would spend; claims and every action on a server read Robot afresh, and
//! every change made here drops the kept listing.
//!
//! Classes: the location part of a server's datacenter (`FSN1-DC14` → `fsn1`); the plan is
//! the Robot product (`AX52`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use orc_cloud::robot::{ResetType, RobotServer};
use orc_cloud::{CloudError, RateQuota, RobotClient, RobotConfig, RobotServerNumber};
use orc_common::Secret;
use orc_common::{Currency, Money, Period};
use orc_provider_sdk::machine::{
    CatalogEntry, Install, Machine, MachineCatalog, MachineError, MachineKey, MachineOffer,
    MachineProvider, MachineSpec, MachineState, OfferQuery, PowerAction,
};
use orc_provider_sdk::provider::ProgressSink;
use rust_decimal::Decimal;

use crate::config::RobotAccount;
use crate::products::ProductTable;
use crate::script::{self, BootstrapParams, RescueLayout};
use crate::ssh::{RusshExecutor, SshError, SshExecutor, SshOutput, SshTarget};

/// Where Hetzner keeps dedicated servers: the catalog's classes, sorted by id.
pub const ROBOT_LOCATIONS: [(&str, &str); 3] = [
    ("fsn1", "Falkenstein (dedicated servers)"),
    ("hel1", "Helsinki (dedicated servers)"),
    ("nbg1", "Nuremberg (dedicated servers)"),
];

/// The prefix of every Robot server name this provider gives.
pub const CLAIM_PREFIX: &str = "orc-";

/// Longest idempotency key: Robot names hold 100 characters, the prefix takes four.
pub const MAX_KEY_LEN: usize = 96;

/// The Robot server name that claims a server for `key`, or `None` when the key cannot be
/// part of a name (longer than [`MAX_KEY_LEN`], or characters other than ASCII letters,
/// digits, `.`, `_`, `:` and `-`).
pub fn claim_name(key: &MachineKey) -> Option<String> {
    let text = key.as_str();
    let usable = text.len() <= MAX_KEY_LEN
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    usable.then(|| format!("{CLAIM_PREFIX}{text}"))
}

/// The key of a server name this provider gave, or `None` for any other name.
pub fn key_of(name: &str) -> Option<MachineKey> {
    name.strip_prefix(CLAIM_PREFIX).and_then(MachineKey::new)
}

/// The location of a Robot datacenter: `FSN1-DC14` → `fsn1`.
pub fn location_of(dc: &str) -> String {
    dc.split('-')
        .next()
        .unwrap_or(dc)
        .trim()
        .to_ascii_lowercase()
}

/// Who a server belongs to, seen from this provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Empty name, not cancelled: may be claimed.
    Free,
    /// Named by this provider for this key.
    Claimed(MachineKey),
    /// Named by someone else, or cancelled.
    Foreign,
}

/// Classifies a server.
pub fn ownership(server: &RobotServer) -> Ownership {
    if server.cancelled {
        return Ownership::Foreign;
    }
    if server.server_name.is_empty() {
        return Ownership::Free;
    }
    match key_of(&server.server_name) {
        Some(key) => Ownership::Claimed(key),
        None => Ownership::Foreign,
    }
}

/// The Robot reset that carries out a power action (Robot cannot report power state).
pub fn reset_for(action: PowerAction) -> ResetType {
    match action {
        PowerAction::Reset | PowerAction::Cycle => ResetType::Hw,
        PowerAction::GracefulRestart => ResetType::Sw,
        PowerAction::GracefulOff | PowerAction::On => ResetType::Power,
        PowerAction::Off => ResetType::PowerLong,
    }
}

/// How the provider reaches servers over SSH and how long it waits for the rescue system.
#[derive(Debug, Clone)]
pub struct SshOptions {
    pub port: u16,
    /// Connect here instead of the server's address (a tunnel, a test).
    pub host_override: Option<String>,
    /// How long a rescue boot may take until SSH answers.
    pub rescue_wait: Duration,
    /// Pause between two SSH probes while waiting.
    pub poll_interval: Duration,
    /// Connect and authentication timeout of one attempt.
    pub connect_timeout: Duration,
    /// Longest run of one remote command (installimage takes minutes).
    pub command_timeout: Duration,
    /// Paths on the rescue and installed systems.
    pub layout: RescueLayout,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            port: 22,
            host_override: None,
            rescue_wait: Duration::from_secs(600),
            poll_interval: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(15),
            command_timeout: Duration::from_secs(3600),
            layout: RescueLayout::default(),
        }
    }
}

/// Why identify or bootstrap failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The Robot side failed (no such machine, rate limit, …).
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// SSH failed.
    #[error(transparent)]
    Ssh(#[from] SshError),
    /// A parameter cannot be used.
    #[error(transparent)]
    Param(#[from] script::ParamError),
    /// The rescue system did not answer over SSH in time.
    #[error("the rescue system of server {server} did not answer over SSH within {waited:?}")]
    RescueTimeout {
        server: RobotServerNumber,
        waited: Duration,
    },
    /// A remote step exited with an error.
    #[error("step `{step}` on server {server} failed with status {status:?}: {stderr}")]
    Step {
        step: &'static str,
        server: RobotServerNumber,
        status: Option<u32>,
        stderr: String,
    },
    /// The machine's product UUID is not a UUID.
    #[error("server {server} reported no usable product UUID")]
    BadUuid { server: RobotServerNumber },
}

/// What [`RobotMachines::bootstrap`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapReport {
    pub server: RobotServerNumber,
    /// True when the rescue system already answered (no reset for it).
    pub reused_rescue: bool,
}

/// One Robot account's servers.
#[derive(Debug)]
pub struct RobotMachines {
    account: RobotAccount,
    api_url: String,
    products: ProductTable,
    ssh: SshOptions,
    client: Mutex<Option<(Secret, RobotClient)>>,
    claims: tokio::sync::Mutex<()>,
    listing: Mutex<Option<(Instant, Vec<RobotServer>)>>,
    /// Bumped by every change to a server's name: a listing read while a change was under
    /// way is used but not kept, so no listing older than the change is reused.
    listing_generation: std::sync::atomic::AtomicU64,
    listing_ttl: Duration,
    quota: RateQuota,
}

/// How long a server listing serves offers, get and list by default. Robot refills a
/// client's budget for `/server` at 50 requests an hour; the zone asks for inventory every
/// minute and the adapter refreshes offers every five.
pub const DEFAULT_LISTING_TTL: Duration = Duration::from_secs(90);

/// Whether a read may use a recent listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Offers, get, list: a listing younger than the TTL will do.
    Recent,
    /// Claims and anything that acts on a server: ask Robot now.
    Fresh,
}

fn config_error(problem: impl Into<String>) -> MachineError {
    MachineError::Config {
        problem: problem.into(),
    }
}

fn cloud(error: CloudError) -> MachineError {
    error.fault().into()
}

impl RobotMachines {
    /// A provider for `account` at `api_url` (the public endpoint or an emulator).
    pub fn new(account: RobotAccount, api_url: impl Into<String>, ssh: SshOptions) -> Self {
        let products = account.product_table();
        RobotMachines {
            account,
            api_url: api_url.into(),
            products,
            ssh,
            client: Mutex::new(None),
            claims: tokio::sync::Mutex::new(()),
            listing: Mutex::new(None),
            listing_generation: std::sync::atomic::AtomicU64::new(0),
            listing_ttl: DEFAULT_LISTING_TTL,
            quota: RateQuota::ROBOT,
        }
    }

    /// Sets how long a server listing serves offers, get and list (zero: never reused).
    /// Claims, releases, power, rescue and bootstrap always read Robot afresh, and every
    /// change this provider makes drops the kept listing.
    pub fn with_listing_ttl(mut self, ttl: Duration) -> Self {
        self.listing_ttl = ttl;
        self
    }

    /// Spends at most `quota` of the account's budget per endpoint (default
    /// [`RateQuota::ROBOT`], the lowest limit Robot documents). Every client of one account
    /// in a process shares that budget.
    pub fn with_quota(mut self, quota: RateQuota) -> Self {
        self.quota = quota;
        self
    }

    async fn servers(&self, read: Read) -> Result<Vec<RobotServer>, MachineError> {
        if read == Read::Recent {
            let kept = self.listing.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, servers)) = kept.as_ref()
                && at.elapsed() < self.listing_ttl
            {
                return Ok(servers.clone());
            }
        }
        let generation = self.listing_generation.load(Ordering::SeqCst);
        let servers = self.client()?.list_servers().await.map_err(cloud)?;
        let mut kept = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if self.listing_generation.load(Ordering::SeqCst) == generation {
            *kept = Some((Instant::now(), servers.clone()));
        }
        Ok(servers)
    }

    /// Drops the kept listing; called before and after every change to a server's name,
    /// so that a listing read across the change is never kept.
    fn forget_listing(&self) {
        let mut kept = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        self.listing_generation.fetch_add(1, Ordering::SeqCst);
        *kept = None;
    }

    /// The account config.
    pub fn account(&self) -> &RobotAccount {
        &self.account
    }

    /// A client with the password read now; the client (and its rate budget) is kept while
    /// the password stays the same.
    pub fn client(&self) -> Result<RobotClient, MachineError> {
        let password = self
            .account
            .password
            .resolve()
            .map_err(|e| config_error(format!("password: {e}")))?;
        let mut slot = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((known, client)) = slot.as_ref()
            && known == &password
        {
            return Ok(client.clone());
        }
        let mut config = RobotConfig::new(self.account.user.clone(), password.clone())
            .with_base_url(self.api_url.clone());
        config.quota = self.quota;
        let client = RobotClient::new(config).map_err(cloud)?;
        *slot = Some((password, client.clone()));
        Ok(client)
    }

    fn machine(&self, key: MachineKey, server: &RobotServer) -> Machine {
        let addresses = addresses_of(server);
        Machine {
            key,
            instance_ref: server.server_number.to_string(),
            name: server.server_name.clone(),
            location: location_of(&server.dc),
            plan: server.product.clone(),
            state: if server.status == "ready" {
                MachineState::Running
            } else {
                MachineState::Provisioning
            },
            addresses,
        }
    }

    async fn claimed(
        &self,
        key: &MachineKey,
        read: Read,
    ) -> Result<Option<RobotServer>, MachineError> {
        let servers = self.servers(read).await?;
        Ok(servers
            .into_iter()
            .find(|s| ownership(s) == Ownership::Claimed(key.clone())))
    }

    async fn claimed_or_absent(&self, key: &MachineKey) -> Result<RobotServer, MachineError> {
        self.claimed(key, Read::Fresh)
            .await?
            .ok_or_else(|| MachineError::NotFound {
                what: format!("machine {key}"),
            })
    }

    fn offer_of(&self, product: &str, location: &str, available: bool) -> MachineOffer {
        let spec = self.products.spec(product);
        let hourly = spec.hourly_eur.unwrap_or(Decimal::ZERO);
        MachineOffer {
            plan: product.to_string(),
            location: location.to_string(),
            vcpus: spec.vcpus,
            memory_mib: u64::from(spec.memory_gib) * 1024,
            arch: spec.arch,
            disk_gb: u64::from(spec.disk_gib) * 1_073_741_824 / 1_000_000_000,
            hourly: Money::new(hourly, Currency::EUR, Period::Hour),
            monthly: None,
            available,
        }
    }

    /// Claims a given server for `key`: [`MachineError::Conflict`] when someone else named
    /// it (or it is cancelled or claimed for another key), the machine when it is free or
    /// already claimed for `key`.
    pub async fn claim_server(
        &self,
        key: &MachineKey,
        number: RobotServerNumber,
    ) -> Result<Machine, MachineError> {
        let name = claim_name(key).ok_or_else(|| unusable_key(key))?;
        let _one_at_a_time = self.claims.lock().await;
        let client = self.client()?;
        let server = client
            .get_server(number)
            .await
            .map_err(cloud)?
            .ok_or_else(|| MachineError::NotFound {
                what: format!("server {number}"),
            })?;
        match ownership(&server) {
            Ownership::Claimed(owner) if &owner == key => Ok(self.machine(owner, &server)),
            Ownership::Claimed(_) | Ownership::Foreign => Err(MachineError::Conflict {
                message: format!("server {number} is named for another use"),
            }),
            Ownership::Free => self.rename_and_confirm(&client, key, &name, number).await,
        }
    }

    async fn rename_and_confirm(
        &self,
        client: &RobotClient,
        key: &MachineKey,
        name: &str,
        number: RobotServerNumber,
    ) -> Result<Machine, MachineError> {
        self.forget_listing();
        let renamed = client.set_server_name(number, name).await.map_err(cloud);
        self.forget_listing();
        renamed?;
        let server = client
            .get_server(number)
            .await
            .map_err(cloud)?
            .ok_or_else(|| MachineError::NotFound {
                what: format!("server {number}"),
            })?;
        if server.server_name != name {
            return Err(MachineError::Conflict {
                message: format!("server {number} was renamed by someone else while claiming"),
            });
        }
        tracing::info!(server = %number, key = %key, "claimed a Robot server");
        Ok(self.machine(key.clone(), &server))
    }

    /// Activates the Linux rescue system with the account's key, then resets the server
    /// into it. An activation already in force is replaced, so that the key is ours.
    pub async fn rescue(&self, key: &MachineKey) -> Result<(), MachineError> {
        let server = self.claimed_or_absent(key).await?;
        self.boot_rescue(server.server_number).await
    }

    async fn boot_rescue(&self, number: RobotServerNumber) -> Result<(), MachineError> {
        let client = self.client()?;
        let keys = [self.account.rescue_key_fingerprint.clone()];
        match client.activate_rescue(number, "linux", &keys).await {
            Ok(_) => {}
            Err(e) if already_active(&e) => {
                client.deactivate_rescue(number).await.map_err(cloud)?;
                client
                    .activate_rescue(number, "linux", &keys)
                    .await
                    .map_err(cloud)?;
            }
            Err(e) => return Err(cloud(e)),
        }
        client.reset(number, ResetType::Hw).await.map_err(cloud)?;
        tracing::info!(server = %number, "booting the rescue system");
        Ok(())
    }

    async fn ssh_target(&self, server: &RobotServer) -> Result<SshTarget, MachineError> {
        let host = match &self.ssh.host_override {
            Some(host) => host.clone(),
            None => addresses_of(server)
                .first()
                .map(ToString::to_string)
                .ok_or_else(|| MachineError::Provider {
                    status: None,
                    code: None,
                    message: format!("server {} has no address", server.server_number),
                })?,
        };
        let private_key = self
            .account
            .rescue_key
            .resolve()
            .map_err(|e| config_error(format!("rescue_key: {e}")))?;
        Ok(SshTarget {
            host,
            port: self.ssh.port,
            user: "root".into(),
            private_key,
            host_key_sha256: Vec::new(),
            connect_timeout: self.ssh.connect_timeout,
            command_timeout: self.ssh.command_timeout,
        })
    }

    /// True when the server answers over SSH from its rescue system.
    async fn rescue_answers<S: SshExecutor>(
        &self,
        ssh: &S,
        target: &SshTarget,
    ) -> Result<bool, BootstrapError> {
        let probe = script::rescue_probe_command(&self.ssh.layout);
        match ssh.run(target, &probe, &[]).await {
            Ok(output) => Ok(output.success()),
            Err(e) if e.is_unreachable() => Ok(false),
            Err(SshError::Auth { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Step 1 of identify and bootstrap: reuse a rescue system that answers, else boot one
    /// and wait until it answers. True when it was reused.
    async fn ensure_rescue<S: SshExecutor>(
        &self,
        ssh: &S,
        server: &RobotServer,
        target: &SshTarget,
    ) -> Result<bool, BootstrapError> {
        if self.rescue_answers(ssh, target).await? {
            return Ok(true);
        }
        self.boot_rescue(server.server_number).await?;
        let started = Instant::now();
        loop {
            tokio::time::sleep(self.ssh.poll_interval).await;
            if self.rescue_answers(ssh, target).await? {
                return Ok(false);
            }
            if started.elapsed() >= self.ssh.rescue_wait {
                return Err(BootstrapError::RescueTimeout {
                    server: server.server_number,
                    waited: self.ssh.rescue_wait,
                });
            }
        }
    }

    fn checked(
        step: &'static str,
        server: RobotServerNumber,
        output: SshOutput,
    ) -> Result<SshOutput, BootstrapError> {
        if output.success() {
            Ok(output)
        } else {
            Err(BootstrapError::Step {
                step,
                server,
                status: output.exit_status,
                stderr: output.stderr_tail(),
            })
        }
    }

    /// Boots the rescue system unless it already answers and reads the machine's SMBIOS
    /// product UUID, so that a join token can be bound to this machine. The server stays in
    /// the rescue system for [`RobotMachines::bootstrap`].
    pub async fn identify<S: SshExecutor>(
        &self,
        key: &MachineKey,
        ssh: &S,
    ) -> Result<String, BootstrapError> {
        let server = self.claimed_or_absent(key).await?;
        let target = self.ssh_target(&server).await?;
        self.ensure_rescue(ssh, &server, &target).await?;
        let command = script::product_uuid_command(&self.ssh.layout);
        let output = ssh.run(&target, &command, &[]).await?;
        let output = Self::checked("read product uuid", server.server_number, output)?;
        let uuid = output.stdout_text().trim().to_ascii_lowercase();
        if is_uuid(&uuid) {
            Ok(uuid)
        } else {
            Err(BootstrapError::BadUuid {
                server: server.server_number,
            })
        }
    }

    /// Installs the account's image with the first-boot script and the join token, in five
    /// steps: reuse or boot the rescue system; write the token over SSH stdin into a umask 077
    /// file; run installimage (software RAID 1 over the NVMe disks, else the SATA disks)
    /// whose post-install script places the token, the first-boot script and the unit that
    /// runs it once; then deactivate rescue and reset the server into the installed system.
    pub async fn bootstrap<S: SshExecutor>(
        &self,
        key: &MachineKey,
        params: &BootstrapParams,
        ssh: &S,
    ) -> Result<BootstrapReport, BootstrapError> {
        params.validate()?;
        let server = self.claimed_or_absent(key).await?;
        let number = server.server_number;
        let target = self.ssh_target(&server).await?;
        let layout = &self.ssh.layout;

        let reused_rescue = self.ensure_rescue(ssh, &server, &target).await?;
        tracing::info!(server = %number, reused_rescue, "bootstrap: the rescue system answers");

        let output = ssh
            .run(
                &target,
                &script::token_command(layout),
                params.join_token.expose().as_bytes(),
            )
            .await?;
        Self::checked("write join token", number, output)?;
        tracing::info!(server = %number, "bootstrap: join token stored in the rescue system");

        let install = script::install_script(params, layout, &self.account.image);
        let output = ssh.run(&target, "sh -s", install.as_bytes()).await?;
        Self::checked("installimage", number, output)?;
        tracing::info!(server = %number, image = %self.account.image, "bootstrap: installed");

        let client = self.client()?;
        client.deactivate_rescue(number).await.map_err(cloud)?;
        client.reset(number, ResetType::Hw).await.map_err(cloud)?;
        tracing::info!(server = %number, "bootstrap: rebooting into the installed system");
        Ok(BootstrapReport {
            server: number,
            reused_rescue,
        })
    }

    /// What [`MachineProvider::install`] does, with any SSH executor: the zone's bootstrap
    /// is taken apart into its join token and the rest, the machine is identified from its
    /// rescue system and named to the zone (which binds the token to it), and only then is
    /// the image installed with the token. With `"install": "operator"` it does nothing: the
    /// server stays claimed and as it is.
    pub async fn install_with<S: SshExecutor>(
        &self,
        machine: &Machine,
        install: &Install,
        progress: &ProgressSink,
        ssh: &S,
    ) -> Result<(), BootstrapError> {
        if self.account.install == crate::InstallMode::Operator {
            tracing::info!(key = %machine.key, "claimed; the operator installs it (install: operator)");
            progress
                .note("claimed; it stays as it is until the operator installs it with orc-prov-robot bootstrap")
                .await;
            return Ok(());
        }
        let split = orc_proto::bootstrap::split_token(install.bootstrap.expose()).ok_or_else(
            || {
                config_error(
                    "the node's bootstrap carries no join token block, so a Robot server cannot be installed with it",
                )
            },
        )?;
        let key = &machine.key;
        progress
            .note("booting the server's rescue system to identify it")
            .await;
        let uuid = self.identify(key, ssh).await?;
        progress
            .identified("identified the server from its rescue system", &uuid)
            .await;
        let params = BootstrapParams {
            join_token: Secret::new(split.token),
            first_boot: split.script,
            hostname: install.hostname.clone(),
            ssh_keys: install.ssh_keys.clone(),
        };
        progress
            .note(format!("installing {} on the server", self.account.image))
            .await;
        self.bootstrap(key, &params, ssh).await?;
        progress.note("rebooting into the installed system").await;
        Ok(())
    }
}

impl From<BootstrapError> for MachineError {
    fn from(error: BootstrapError) -> Self {
        match error {
            BootstrapError::Machine(e) => e,
            BootstrapError::Param(e) => config_error(e.to_string()),
            other => MachineError::Provider {
                status: None,
                code: None,
                message: other.to_string(),
            },
        }
    }
}

/// A server's public addresses: its IPv4 address, then `::2` of its IPv6 net (the address
/// Hetzner's rescue system and installimage configure).
pub fn addresses_of(server: &RobotServer) -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    if let Some(ip) = server.server_ip.as_deref().and_then(|ip| ip.parse().ok()) {
        addresses.push(IpAddr::V4(ip));
    }
    if let Some(net) = server
        .server_ipv6_net
        .as_deref()
        .and_then(|n| n.parse::<Ipv6Addr>().ok())
    {
        addresses.push(IpAddr::V6(Ipv6Addr::from(u128::from(net) | 2)));
    }
    addresses
}

/// True when Robot refused because the rescue system is already active.
fn already_active(error: &CloudError) -> bool {
    match error {
        CloudError::Provider { status, code, .. } => {
            *status == 409 || code.as_deref() == Some("BOOT_ALREADY_ENABLED")
        }
        CloudError::NotFound { .. }
        | CloudError::RateLimited { .. }
        | CloudError::NoCapacity { .. }
        | CloudError::Transport { .. }
        | CloudError::Decode { .. }
        | CloudError::Protocol { .. }
        | CloudError::ActionFailed { .. }
        | CloudError::Deadline { .. }
        | CloudError::InvalidInput { .. } => false,
    }
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn unusable_key(key: &MachineKey) -> MachineError {
    MachineError::Config {
        problem: format!(
            "idempotency key {key:?} cannot be part of a Robot server name (at most {MAX_KEY_LEN} letters, digits, '.', '_', ':', '-')"
        ),
    }
}

impl MachineProvider for RobotMachines {
    fn catalog(&self) -> MachineCatalog {
        MachineCatalog {
            locations: ROBOT_LOCATIONS
                .iter()
                .map(|(id, title)| CatalogEntry {
                    id: (*id).to_string(),
                    title: (*title).to_string(),
                })
                .collect(),
            images: vec![CatalogEntry {
                id: self.account.image.clone(),
                title: format!("installimage {}", self.account.image),
            }],
        }
    }

    async fn offers(&self, query: &OfferQuery) -> Result<Vec<MachineOffer>, MachineError> {
        let servers = self.servers(Read::Recent).await?;
        let mut groups: BTreeMap<(String, String), bool> = BTreeMap::new();
        for server in &servers {
            if ownership(server) != Ownership::Free {
                continue;
            }
            let location = location_of(&server.dc);
            if query.location.as_ref().is_some_and(|l| l != &location) {
                continue;
            }
            let has_gpu = self.products.spec(&server.product).gpu.is_some();
            if has_gpu != query.gpu {
                continue;
            }
            let ready = server.status == "ready";
            let entry = groups
                .entry((server.product.clone(), location))
                .or_insert(false);
            *entry |= ready;
        }
        Ok(groups
            .into_iter()
            .map(|((product, location), available)| self.offer_of(&product, &location, available))
            .collect())
    }

    async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
        let key = &spec.idempotency_key;
        let name = claim_name(key).ok_or_else(|| unusable_key(key))?;
        let _one_at_a_time = self.claims.lock().await;
        let client = self.client()?;
        let servers = self.servers(Read::Fresh).await?;
        if let Some(server) = servers
            .iter()
            .find(|s| ownership(s) == Ownership::Claimed(key.clone()))
        {
            return Ok(self.machine(key.clone(), server));
        }
        let mut candidates: Vec<&RobotServer> = servers
            .iter()
            .filter(|s| ownership(s) == Ownership::Free && s.status == "ready")
            .filter(|s| spec.plan.is_empty() || s.product == spec.plan)
            .filter(|s| spec.location.is_empty() || location_of(&s.dc) == spec.location)
            .collect();
        candidates.sort_by_key(|s| s.server_number);
        for server in candidates {
            match self
                .rename_and_confirm(&client, key, &name, server.server_number)
                .await
            {
                Ok(machine) => return Ok(machine),
                Err(MachineError::Conflict { message }) => {
                    tracing::warn!(server = %server.server_number, "claim lost: {message}");
                }
                Err(e) => return Err(e),
            }
        }
        Err(MachineError::Capacity {
            message: format!(
                "no free {} server in {}",
                if spec.plan.is_empty() {
                    "Robot"
                } else {
                    &spec.plan
                },
                if spec.location.is_empty() {
                    "any location"
                } else {
                    &spec.location
                }
            ),
        })
    }

    async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
        Ok(self
            .claimed(key, Read::Recent)
            .await?
            .map(|server| self.machine(key.clone(), &server)))
    }

    async fn list(&self) -> Result<Vec<Machine>, MachineError> {
        let servers = self.servers(Read::Recent).await?;
        let mut machines: Vec<Machine> = servers
            .iter()
            .filter_map(|s| match ownership(s) {
                Ownership::Claimed(key) => Some(self.machine(key, s)),
                Ownership::Free | Ownership::Foreign => None,
            })
            .collect();
        machines.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(machines)
    }

    async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
        let server = self.claimed_or_absent(key).await?;
        let client = self.client()?;
        client
            .deactivate_rescue(server.server_number)
            .await
            .map_err(cloud)?;
        self.forget_listing();
        let released = client
            .set_server_name(server.server_number, "")
            .await
            .map_err(cloud);
        self.forget_listing();
        released?;
        tracing::info!(server = %server.server_number, key = %key, "released a Robot server");
        Ok(())
    }

    async fn power(&self, key: &MachineKey, action: PowerAction) -> Result<(), MachineError> {
        let server = self.claimed_or_absent(key).await?;
        self.client()?
            .reset(server.server_number, reset_for(action))
            .await
            .map_err(cloud)?;
        Ok(())
    }

    async fn install(
        &self,
        machine: &Machine,
        install: &Install,
        progress: &ProgressSink,
    ) -> Result<(), MachineError> {
        self.install_with(machine, install, progress, &RusshExecutor)
            .await
            .map_err(|error| {
                tracing::warn!(key = %machine.key, %error, "the Robot server could not be installed");
                MachineError::from(error)
            })
    }

    async fn reinstall(&self, key: &MachineKey, image: &str) -> Result<(), MachineError> {
        self.claimed_or_absent(key).await?;
        Err(config_error(format!(
            "Robot servers are reinstalled by bootstrap (installimage from the rescue system), not with image {image:?}"
        )))
    }
}
