//! Vultr instances as machines.
//!
//! Idempotency: Vultr has neither idempotency keys nor unique names, so every instance
//! carries the tags [`KEY_TAG_PREFIX`]`<node id>` and [`MANAGED_TAG`]. `create` looks the
//! key up first, and creates of one key are serialized within the process (the serving
//! replica is the only one that deploys). Should two instances of one key exist anyway
//! (two replicas deploying during a failover), `get` and `create` answer the earliest
//! (creation time, then id), and `delete` removes every one.
//!
//! Offers come from `GET /plans` (every page) and `GET /regions/{id}/availability` per
//! region asked: one offer per shared-CPU plan (`vc2`, `vhf`, `vhp`, `voc`) and region the
//! plan lists, hourly in USD, available when the region's live stock holds the plan. GPU
//! and metal queries get nothing, and IPv6-only plans are left out.
//!
//! Power maps on → `start`; off and graceful-off → `halt` (Vultr has no ACPI shutdown);
//! reset, cycle and graceful-restart → `reboot`. Reinstall is `reinstall`, which keeps the
//! installed OS: another image is refused as a configuration error. A sold-out plan
//! (400 "not available") is Capacity, a 404 is absent, a 429 is RateLimited, 401/403 is
//! Config, anything else keeps Vultr's status and message.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use orc_cloud::vultr::{
    CreateInstance, Instance, InstanceFilter, InstanceSource, InstanceStatus, Plan, PowerStatus,
    ServerStatus,
};
use orc_cloud::{ClientOptions, Secret, VultrClient, VultrConfig, VultrOsId, VultrRegionId};
use orc_common::Architecture;
use orc_provider_sdk::machine::{
    CatalogEntry, Machine, MachineCatalog, MachineError, MachineKey, MachineOffer, MachineProvider,
    MachineSpec, MachineState, OfferQuery, PowerAction,
};
use orc_provider_sdk::secret::SecretRef;

use crate::config::{Account, REGIONS};

/// Region availability reads in flight at once during an offers read.
const REGION_READS_AT_ONCE: usize = 4;
/// Prefix of the tag holding the zone's node id (the idempotency key).
pub const KEY_TAG_PREFIX: &str = "orc.dev/idempotency-key=";
/// Tag marking instances this provider manages.
pub const MANAGED_TAG: &str = "orc.dev/managed=true";

/// Images offered as operating systems: (id, title, Vultr OS id).
pub const IMAGES: [(&str, &str, u64); 8] = [
    ("alma-10", "AlmaLinux 10", 2593),
    ("alma-9", "AlmaLinux 9", 1868),
    ("debian-12", "Debian 12", 2136),
    ("debian-13", "Debian 13", 2625),
    ("rocky-10", "Rocky Linux 10", 2594),
    ("rocky-9", "Rocky Linux 9", 1869),
    ("ubuntu-22.04", "Ubuntu 22.04", 1743),
    ("ubuntu-24.04", "Ubuntu 24.04", 2284),
];

/// Plan kinds offered (shared and dedicated CPU virtual machines).
const PLAN_KINDS: [&str; 4] = ["vc2", "vhf", "vhp", "voc"];

/// How the provider talks to the API.
#[derive(Debug, Clone)]
pub struct VultrOptions {
    /// API base URL (the real API or an emulator's `http://ADDR/v2`).
    pub base_url: String,
    pub client: ClientOptions,
    /// How long create waits for the instance's addresses.
    pub ready_deadline: Duration,
    /// How often a new instance is read while it installs.
    pub ready_poll: Duration,
}

impl Default for VultrOptions {
    fn default() -> Self {
        VultrOptions {
            base_url: orc_cloud::vultr::VULTR_DEFAULT_URL.to_string(),
            client: ClientOptions::default(),
            ready_deadline: Duration::from_secs(300),
            ready_poll: Duration::from_secs(3),
        }
    }
}

/// One Vultr account's instances.
///
/// The API key is resolved before every operation; a changed key gets a new client (and
/// with it fresh request counters).
#[derive(Debug, Clone)]
pub struct VultrMachines {
    api_key: SecretRef,
    region: String,
    options: VultrOptions,
    client: Arc<Mutex<Option<(Secret, VultrClient)>>>,
}

type KeyLocks = Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>;

/// Creates of one key in this process, one at a time.
fn key_lock(key: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<KeyLocks> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    locks.retain(|_, lock| Arc::strong_count(lock) > 1);
    locks.entry(key.to_string()).or_default().clone()
}

fn key_tag(key: &MachineKey) -> String {
    format!("{KEY_TAG_PREFIX}{key}")
}

impl VultrMachines {
    /// A provider for `account`; touches no network.
    pub fn new(account: &Account, options: VultrOptions) -> Self {
        VultrMachines {
            api_key: account.api_key.clone(),
            region: account.region.clone(),
            options,
            client: Arc::new(Mutex::new(None)),
        }
    }

    /// The account's home region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The client for the key as it is now.
    pub fn client(&self) -> Result<VultrClient, MachineError> {
        let key = self.api_key.resolve().map_err(|e| MachineError::Config {
            problem: e.to_string(),
        })?;

        let mut slot = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((current, client)) = slot.as_ref()
            && *current == key
        {
            return Ok(client.clone());
        }
        let config = VultrConfig {
            options: self.options.client,
            ..VultrConfig::new(key.clone()).with_base_url(self.options.base_url.clone())
        };
        let client = VultrClient::new(config).map_err(|e| e.fault())?;
        *slot = Some((key, client.clone()));
        Ok(client)
    }

    /// Every managed instance of `key`, earliest first.
    async fn instances_of(
        &self,
        client: &VultrClient,
        key: &MachineKey,
    ) -> Result<Vec<Instance>, MachineError> {
        let mut found: Vec<Instance> = client
            .list_instances(&InstanceFilter {
                tag: Some(key_tag(key)),
                ..InstanceFilter::default()
            })
            .await
            .map_err(|e| e.fault())?
            .into_iter()
            .filter(|i| i.tags.iter().any(|t| t == MANAGED_TAG))
            .collect();
        found.sort_by(|a, b| (a.date_created, a.id.as_str()).cmp(&(b.date_created, b.id.as_str())));
        Ok(found)
    }

    async fn find_or_absent(
        &self,
        client: &VultrClient,
        key: &MachineKey,
    ) -> Result<Instance, MachineError> {
        self.instances_of(client, key)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| MachineError::NotFound {
                what: format!("the machine of {key}"),
            })
    }

    /// Reads an instance until it has its public address, or the deadline passes.
    async fn until_addressed(
        &self,
        client: &VultrClient,
        mut instance: Instance,
    ) -> Result<Instance, MachineError> {
        let deadline = tokio::time::Instant::now() + self.options.ready_deadline;
        while !has_address(&instance) {
            if tokio::time::Instant::now() + self.options.ready_poll > deadline {
                return Err(MachineError::Provider {
                    status: None,
                    code: None,
                    message: format!(
                        "instance {} got no address before the deadline",
                        instance.id
                    ),
                });
            }
            tokio::time::sleep(self.options.ready_poll).await;
            instance = client
                .get_instance(&instance.id)
                .await
                .map_err(|e| e.fault())?
                .ok_or_else(|| MachineError::NotFound {
                    what: format!("instance {}", instance.id),
                })?;
        }
        Ok(instance)
    }
}

fn has_address(instance: &Instance) -> bool {
    instance.status == InstanceStatus::Active
        && instance
            .main_ip
            .parse::<IpAddr>()
            .is_ok_and(|ip| !ip.is_unspecified())
}

/// Offers of `plans` in `regions`, given each region's available plan ids.
pub fn offers_of(
    plans: &[Plan],
    availability: &BTreeMap<String, Vec<String>>,
    query: &OfferQuery,
) -> Vec<MachineOffer> {
    if query.gpu || query.metal {
        return Vec::new();
    }
    let mut offers = Vec::new();
    for plan in plans {
        if !PLAN_KINDS.contains(&plan.kind.as_str()) || plan.id.as_str().ends_with("-v6") {
            continue;
        }
        let Some(hourly) = plan.hourly() else {
            continue;
        };
        for region in &plan.locations {
            let Some(in_stock) = availability.get(region.as_str()) else {
                continue;
            };
            offers.push(MachineOffer {
                plan: plan.id.as_str().to_string(),
                location: region.as_str().to_string(),
                vcpus: plan.vcpu_count,
                memory_mib: plan.ram,
                arch: Architecture::X86_64,
                disk_gb: plan.disk,
                hourly,
                monthly: Some(plan.monthly()),
                available: in_stock.iter().any(|p| p == plan.id.as_str()),
            });
        }
    }
    offers.sort_by(|a, b| (&a.location, &a.plan).cmp(&(&b.location, &b.plan)));
    offers
}

/// The machine a managed instance is, or `None` without the provider's tags.
pub fn machine_of(instance: &Instance) -> Option<Machine> {
    if !instance.tags.iter().any(|t| t == MANAGED_TAG) {
        return None;
    }
    let key = instance
        .tags
        .iter()
        .find_map(|t| t.strip_prefix(KEY_TAG_PREFIX))
        .and_then(MachineKey::new)?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for ip in [&instance.main_ip, &instance.v6_main_ip] {
        if let Ok(ip) = ip.parse::<IpAddr>()
            && !ip.is_unspecified()
        {
            addresses.push(ip);
        }
    }
    let state = match (
        instance.status,
        instance.power_status,
        instance.server_status,
    ) {
        (InstanceStatus::Active, PowerStatus::Running, ServerStatus::Ok) => MachineState::Running,
        (InstanceStatus::Active | InstanceStatus::Suspended, PowerStatus::Stopped, _) => {
            MachineState::Stopped
        }
        (InstanceStatus::Suspended, PowerStatus::Running | PowerStatus::Unknown, _) => {
            MachineState::Stopped
        }
        (
            InstanceStatus::Pending
            | InstanceStatus::Active
            | InstanceStatus::Resizing
            | InstanceStatus::Unknown,
            _,
            _,
        ) => MachineState::Provisioning,
    };
    Some(Machine {
        key,
        instance_ref: instance.id.as_str().to_string(),
        name: instance.label.clone(),
        location: instance.region.as_str().to_string(),
        plan: instance.plan.as_str().to_string(),
        state,
        addresses,
    })
}

fn unmanaged(instance: &Instance) -> MachineError {
    MachineError::Provider {
        status: None,
        code: None,
        message: format!("instance {} lacks the provider's tags", instance.id),
    }
}

fn os_id(image: &str) -> Result<u64, MachineError> {
    IMAGES
        .iter()
        .find(|(id, _, _)| *id == image)
        .map(|(_, _, os)| *os)
        .ok_or_else(|| MachineError::Config {
            problem: format!("image {image:?} is not offered by this provider"),
        })
}

impl MachineProvider for VultrMachines {
    fn catalog(&self) -> MachineCatalog {
        MachineCatalog {
            locations: REGIONS
                .iter()
                .map(|(id, title)| CatalogEntry {
                    id: id.to_string(),
                    title: title.to_string(),
                })
                .collect(),
            images: IMAGES
                .iter()
                .map(|(id, title, _)| CatalogEntry {
                    id: id.to_string(),
                    title: title.to_string(),
                })
                .collect(),
        }
    }

    async fn offers(&self, query: &OfferQuery) -> Result<Vec<MachineOffer>, MachineError> {
        if query.gpu || query.metal {
            return Ok(Vec::new());
        }
        let client = self.client()?;
        let plans = client.list_plans(None).await.map_err(|e| e.fault())?;
        let regions: Vec<&str> = match &query.location {
            Some(region) => vec![region.as_str()],
            None => REGIONS.iter().map(|(id, _)| *id).collect(),
        };
        // One request per region, a few at a time: a full read is 33 requests, and one after
        // the other they take seconds against the real API.
        let mut reads = tokio::task::JoinSet::new();
        let permits = Arc::new(tokio::sync::Semaphore::new(REGION_READS_AT_ONCE));
        for region in regions {
            let (client, permits) = (client.clone(), Arc::clone(&permits));
            let region = region.to_string();
            reads.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let in_stock = client
                    .region_availability(&VultrRegionId::from(region.as_str()))
                    .await;
                (region, in_stock)
            });
        }
        let mut availability = BTreeMap::new();
        while let Some(read) = reads.join_next().await {
            let Ok((region, in_stock)) = read else {
                return Err(MachineError::Provider {
                    status: None,
                    code: None,
                    message: "a region's availability read stopped unexpectedly".to_string(),
                });
            };
            availability.insert(
                region,
                in_stock
                    .map_err(|e| e.fault())?
                    .iter()
                    .map(|p| p.as_str().to_string())
                    .collect(),
            );
        }
        Ok(offers_of(&plans, &availability, query))
    }

    async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
        let os = os_id(&spec.image)?;
        let client = self.client()?;
        let lock = key_lock(spec.idempotency_key.as_str());
        let _serialized = lock.lock().await;
        if let Some(existing) = self
            .instances_of(&client, &spec.idempotency_key)
            .await?
            .into_iter()
            .next()
        {
            let ready = self.until_addressed(&client, existing).await?;
            return machine_of(&ready).ok_or_else(|| unmanaged(&ready));
        }
        let mut request = CreateInstance::new(
            spec.location.as_str(),
            spec.plan.as_str(),
            InstanceSource::Os(VultrOsId(os)),
        );
        request.label = Some(spec.name.clone());
        request.hostname = Some(spec.name.clone());
        request.tags = vec![key_tag(&spec.idempotency_key), MANAGED_TAG.to_string()];
        request.user_data = spec.user_data.clone();
        let created = client
            .create_instance(&request)
            .await
            .map_err(|e| e.fault())?;
        let earliest = self
            .instances_of(&client, &spec.idempotency_key)
            .await?
            .into_iter()
            .next();
        if let Some(earliest) = earliest
            && earliest.id != created.id
        {
            tracing::info!(key = %spec.idempotency_key, "another create of this key came first; removing the duplicate");
            client
                .delete_instance(&created.id)
                .await
                .map_err(|e| e.fault())?;
            return machine_of(&earliest).ok_or_else(|| unmanaged(&earliest));
        }
        let ready = self.until_addressed(&client, created).await?;
        machine_of(&ready).ok_or_else(|| unmanaged(&ready))
    }

    async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
        let client = self.client()?;
        Ok(self
            .instances_of(&client, key)
            .await?
            .first()
            .and_then(machine_of))
    }

    async fn list(&self) -> Result<Vec<Machine>, MachineError> {
        let client = self.client()?;
        let instances = client
            .list_instances(&InstanceFilter {
                tag: Some(MANAGED_TAG.to_string()),
                ..InstanceFilter::default()
            })
            .await
            .map_err(|e| e.fault())?;
        let mut machines: Vec<Machine> = instances.iter().filter_map(machine_of).collect();
        machines.sort_by(|a, b| (&a.key, &a.instance_ref).cmp(&(&b.key, &b.instance_ref)));
        Ok(machines)
    }

    async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
        let client = self.client()?;
        let instances = self.instances_of(&client, key).await?;
        if instances.is_empty() {
            return Err(MachineError::NotFound {
                what: format!("the machine of {key}"),
            });
        }
        for instance in instances {
            match client.delete_instance(&instance.id).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.fault().into()),
            }
        }
        Ok(())
    }

    async fn power(&self, key: &MachineKey, action: PowerAction) -> Result<(), MachineError> {
        let client = self.client()?;
        let id = self.find_or_absent(&client, key).await?.id;
        let started = match action {
            PowerAction::On => client.start_instance(&id).await,
            PowerAction::Off | PowerAction::GracefulOff => client.halt_instance(&id).await,
            PowerAction::Reset | PowerAction::Cycle | PowerAction::GracefulRestart => {
                client.reboot_instance(&id).await
            }
        };
        started.map_err(|e| e.fault())?;
        Ok(())
    }

    async fn reinstall(&self, key: &MachineKey, image: &str) -> Result<(), MachineError> {
        let wanted = os_id(image)?;
        let client = self.client()?;
        let instance = self.find_or_absent(&client, key).await?;
        if instance.os_id.is_some_and(|os| os.0 != wanted) {
            return Err(MachineError::Config {
                problem: format!(
                    "Vultr reinstalls the installed operating system only; {image} is another one"
                ),
            });
        }
        client
            .reinstall_instance(&instance.id, None)
            .await
            .map_err(|e| e.fault())?;
        Ok(())
    }
}
