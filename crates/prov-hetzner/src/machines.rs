//! Hetzner Cloud servers as machines.
//!
//! Idempotency: the API has no idempotency keys, so every server carries the labels
//! [`KEY_LABEL`]`=<node id>` and [`MANAGED_LABEL`]`=true`. `create` looks the key up first;
//! when two creates race, Hetzner's unique server names let one win and the loser (a
//! `uniqueness_error`) answers the winner's server.
//!
//! Offers come from `GET /server_types` (every page): one offer per type and location the
//! type lists, with the gross hourly EUR price of that location; deprecated types and
//! deprecated type-locations are skipped, and GPU or metal queries get nothing (Hetzner
//! Cloud has neither). Availability is the type-location's `available` flag.
//!
//! Power maps on → `poweron`, off → `poweroff`, graceful-off → `shutdown`, reset and cycle
//! → `reset`, graceful-restart → `reboot`; reinstall is `rebuild`. A 404 is absent (`get`
//! answers `None`; delete and power fail with NotFound), a 429 is RateLimited with the wait
//! from `RateLimit-Reset`, and anything else keeps Hetzner's status and error code.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use orc_cloud::hetzner::{CreateServer, ImageRef, Server, ServerFilter, ServerStatus, ServerType};
use orc_cloud::{
    ClientOptions, Exchange, HetznerClient, HetznerConfig, Secret, TokenSource, TransportHooks,
};
use orc_common::{Currency, Money, Period};
use orc_provider_sdk::machine::{
    CatalogEntry, Machine, MachineCatalog, MachineError, MachineKey, MachineOffer, MachineProvider,
    MachineSpec, MachineState, OfferQuery, PowerAction,
};
use orc_provider_sdk::secret::SecretRef;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::config::{Account, HetznerLocation};

/// Label holding the zone's node id (the idempotency key).
pub const KEY_LABEL: &str = "orc.dev/idempotency-key";
/// Label marking servers this provider manages.
pub const MANAGED_LABEL: &str = "orc.dev/managed";

/// Images offered as operating systems, with titles.
pub const IMAGES: [(&str, &str); 10] = [
    ("alma-10", "AlmaLinux 10"),
    ("alma-9", "AlmaLinux 9"),
    ("centos-stream-10", "CentOS Stream 10"),
    ("debian-12", "Debian 12"),
    ("debian-13", "Debian 13"),
    ("fedora-42", "Fedora 42"),
    ("rocky-10", "Rocky Linux 10"),
    ("rocky-9", "Rocky Linux 9"),
    ("ubuntu-22.04", "Ubuntu 22.04"),
    ("ubuntu-24.04", "Ubuntu 24.04"),
];

/// How the provider talks to the API.
#[derive(Clone)]
pub struct HetznerOptions {
    /// API base URL (the real API or an emulator's `http://ADDR/v1`).
    pub base_url: String,
    pub client: ClientOptions,
    /// How long create and delete wait for Hetzner's actions.
    pub action_deadline: Duration,
    /// How often actions are polled.
    pub action_poll: Duration,
    /// Replaces HTTP (record or replay).
    pub exchange: Option<Arc<dyn Exchange>>,
}

impl std::fmt::Debug for HetznerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HetznerOptions")
            .field("base_url", &self.base_url)
            .field("client", &self.client)
            .field("action_deadline", &self.action_deadline)
            .field("action_poll", &self.action_poll)
            .field("exchange", &self.exchange.as_ref().map(|_| "hook"))
            .finish()
    }
}

impl Default for HetznerOptions {
    fn default() -> Self {
        HetznerOptions {
            base_url: orc_cloud::hetzner::HETZNER_DEFAULT_URL.to_string(),
            client: ClientOptions::default(),
            action_deadline: Duration::from_secs(300),
            action_poll: Duration::from_secs(1),
            exchange: None,
        }
    }
}

/// One Hetzner Cloud project's servers.
#[derive(Debug, Clone)]
pub struct HetznerMachines {
    client: HetznerClient,
    location: HetznerLocation,
    options: HetznerOptions,
}

struct ResolvedToken(SecretRef);

impl TokenSource for ResolvedToken {
    fn token(&self) -> Result<Secret, String> {
        self.0.resolve().map_err(|e| e.to_string())
    }
}

impl HetznerMachines {
    /// A provider for `account`; touches no network. Fails only on an unusable base URL.
    pub fn new(account: &Account, options: HetznerOptions) -> Result<Self, MachineError> {
        let hooks = TransportHooks {
            token: Some(Arc::new(ResolvedToken(account.token.clone()))),
            exchange: options.exchange.clone(),
        };
        let config = HetznerConfig {
            options: options.client,
            ..HetznerConfig::new("").with_base_url(options.base_url.clone())
        };
        let client = HetznerClient::with_hooks(config, hooks).map_err(|e| e.fault())?;
        Ok(HetznerMachines {
            client,
            location: account.location,
            options,
        })
    }

    /// The API client (its counters measure what each operation costs).
    pub fn client(&self) -> &HetznerClient {
        &self.client
    }

    /// The account's home location.
    pub fn location(&self) -> HetznerLocation {
        self.location
    }

    async fn find(&self, key: &MachineKey) -> Result<Option<Server>, MachineError> {
        let servers = self
            .client
            .list_servers(&ServerFilter {
                label_selector: Some(format!("{KEY_LABEL}={key},{MANAGED_LABEL}=true")),
                ..ServerFilter::default()
            })
            .await
            .map_err(|e| e.fault())?;
        Ok(servers.into_iter().min_by_key(|s| s.id))
    }

    async fn find_or_absent(&self, key: &MachineKey) -> Result<Server, MachineError> {
        self.find(key).await?.ok_or_else(|| MachineError::NotFound {
            what: format!("the machine of {key}"),
        })
    }

    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.options.action_deadline
    }
}

/// Offers of the server types: one per (type, location), deprecated ones skipped.
pub fn offers_of(types: &[ServerType], query: &OfferQuery) -> Vec<MachineOffer> {
    if query.gpu || query.metal {
        return Vec::new();
    }
    let mut offers = Vec::new();
    for t in types {
        if t.deprecated || t.deprecation.is_some() {
            continue;
        }
        let memory_mib = (t.memory * Decimal::from(1024))
            .round()
            .to_u64()
            .unwrap_or(0);
        for place in &t.locations {
            if place.deprecation.is_some() {
                continue;
            }
            if query.location.as_ref().is_some_and(|l| l != &place.name) {
                continue;
            }
            let Some(price) = t.prices.iter().find(|p| p.location == place.name) else {
                continue;
            };
            offers.push(MachineOffer {
                plan: t.name.clone(),
                location: place.name.clone(),
                vcpus: t.cores,
                memory_mib,
                arch: t.architecture.into(),
                disk_gb: t.disk,
                hourly: Money::new(price.price_hourly.gross, Currency::EUR, Period::Hour),
                monthly: Some(Money::new(
                    price.price_monthly.gross,
                    Currency::EUR,
                    Period::Month,
                )),
                available: place.available,
            });
        }
    }
    offers.sort_by(|a, b| (&a.location, &a.plan).cmp(&(&b.location, &b.plan)));
    offers
}

/// The machine a managed server is, or `None` for a server without the key label.
pub fn machine_of(server: &Server) -> Option<Machine> {
    if server.labels.get(MANAGED_LABEL).map(String::as_str) != Some("true") {
        return None;
    }
    let key = MachineKey::new(server.labels.get(KEY_LABEL)?.clone())?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    if let Some(v4) = &server.public_net.ipv4
        && let Ok(ip) = v4.ip.parse()
    {
        addresses.push(ip);
    }
    if let Some(v6) = &server.public_net.ipv6
        && let Some(network) = v6.ip.split('/').next()
        && let Ok(IpAddr::V6(net)) = network.parse::<IpAddr>()
    {
        let host = u128::from(net) | 1;
        addresses.push(IpAddr::V6(host.into()));
    }
    Some(Machine {
        key,
        instance_ref: server.id.to_string(),
        name: server.name.clone(),
        location: server.location.name.clone(),
        plan: server.server_type.name.clone(),
        state: match server.status {
            ServerStatus::Running => MachineState::Running,
            ServerStatus::Off | ServerStatus::Stopping => MachineState::Stopped,
            ServerStatus::Deleting => MachineState::Deleting,
            ServerStatus::Initializing
            | ServerStatus::Starting
            | ServerStatus::Migrating
            | ServerStatus::Rebuilding
            | ServerStatus::Unknown => MachineState::Provisioning,
        },
        addresses,
    })
}

fn unmanaged(server: &Server) -> MachineError {
    MachineError::Provider {
        status: None,
        code: None,
        message: format!("server {} lacks the provider's labels", server.id),
    }
}

/// True when `key` can be a Hetzner label value: at most 63 characters, letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn is_label_value(key: &str) -> bool {
    let bytes = key.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

impl MachineProvider for HetznerMachines {
    fn catalog(&self) -> MachineCatalog {
        MachineCatalog {
            locations: {
                let mut locations: Vec<CatalogEntry> = HetznerLocation::ALL
                    .into_iter()
                    .map(|l| CatalogEntry {
                        id: l.as_str().to_string(),
                        title: l.title().to_string(),
                    })
                    .collect();
                locations.sort();
                locations
            },
            images: IMAGES
                .iter()
                .map(|(id, title)| CatalogEntry {
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
        let types = self
            .client
            .list_server_types()
            .await
            .map_err(|e| e.fault())?;
        Ok(offers_of(&types, query))
    }

    async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
        if !is_label_value(spec.idempotency_key.as_str()) {
            return Err(MachineError::Config {
                problem: format!(
                    "the key {} cannot be a Hetzner label value (at most 63 letters, digits, '-', '_' or '.')",
                    spec.idempotency_key
                ),
            });
        }
        if let Some(server) = self.find(&spec.idempotency_key).await? {
            return machine_of(&server).ok_or_else(|| unmanaged(&server));
        }
        let mut request = CreateServer::new(
            spec.name.clone(),
            spec.plan.clone(),
            ImageRef::Name(spec.image.clone()),
        );
        request.location = Some(spec.location.clone());
        request.user_data = spec.user_data.clone();
        request.labels.insert(
            KEY_LABEL.to_string(),
            spec.idempotency_key.as_str().to_string(),
        );
        request
            .labels
            .insert(MANAGED_LABEL.to_string(), "true".to_string());
        let created = match self.client.create_server(&request).await {
            Ok(created) => created,
            Err(e) => {
                let error = MachineError::from(e.fault());
                if let MachineError::Conflict { .. } = error
                    && let Some(winner) = self.find(&spec.idempotency_key).await?
                {
                    tracing::debug!(key = %spec.idempotency_key, "a concurrent create won; answering its server");
                    return machine_of(&winner).ok_or_else(|| unmanaged(&winner));
                }
                return Err(error);
            }
        };
        let actions = created.action_ids();
        self.client
            .wait_for_actions(&actions, self.options.action_poll, self.deadline())
            .await
            .map_err(|e| e.fault())?;
        let server = self
            .client
            .get_server(created.server.id)
            .await
            .map_err(|e| e.fault())?
            .unwrap_or(created.server);
        machine_of(&server).ok_or_else(|| unmanaged(&server))
    }

    async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
        match self.find(key).await? {
            Some(server) => Ok(machine_of(&server)),
            None => Ok(None),
        }
    }

    async fn list(&self) -> Result<Vec<Machine>, MachineError> {
        let servers = self
            .client
            .list_servers(&ServerFilter {
                label_selector: Some(format!("{MANAGED_LABEL}=true,{KEY_LABEL}")),
                ..ServerFilter::default()
            })
            .await
            .map_err(|e| e.fault())?;
        let mut machines: Vec<Machine> = servers.iter().filter_map(machine_of).collect();
        machines.sort_by(|a, b| (&a.key, &a.instance_ref).cmp(&(&b.key, &b.instance_ref)));
        Ok(machines)
    }

    async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
        let server = self.find_or_absent(key).await?;
        let action = self
            .client
            .delete_server(server.id)
            .await
            .map_err(|e| e.fault())?;
        self.client
            .wait_for_actions(&[action.id], self.options.action_poll, self.deadline())
            .await
            .map_err(|e| e.fault())?;
        Ok(())
    }

    async fn power(&self, key: &MachineKey, action: PowerAction) -> Result<(), MachineError> {
        let id = self.find_or_absent(key).await?.id;
        let client = &self.client;
        let started = match action {
            PowerAction::On => client.poweron_server(id).await,
            PowerAction::Off => client.poweroff_server(id).await,
            PowerAction::GracefulOff => client.shutdown_server(id).await,
            PowerAction::Reset | PowerAction::Cycle => client.reset_server(id).await,
            PowerAction::GracefulRestart => client.reboot_server(id).await,
        };
        started.map_err(|e| e.fault())?;
        Ok(())
    }

    async fn reinstall(&self, key: &MachineKey, image: &str) -> Result<(), MachineError> {
        let id = self.find_or_absent(key).await?.id;
        self.client
            .rebuild_server(id, &ImageRef::Name(image.to_string()), None)
            .await
            .map_err(|e| e.fault())?;
        Ok(())
    }
}
