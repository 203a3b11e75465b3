//! One HTTP client per keyed cloud, built from the partner's config.
//!
//! Building a client touches no network. `ORC_HETZNER_ENDPOINT` is the Hetzner API base
//! (`…/v1`) as given; `ORC_VULTR_ENDPOINT` is the Vultr API root, to which `/v2` is added
//! unless the URL already ends in it.

use orc_cloud::{CloudError, HetznerClient, HetznerConfig, VultrClient, VultrConfig};
use orc_partner::ids::Cloud;
use orc_partner::params::Config;

/// The clients of the clouds that hold a key; a cloud without a key has none.
#[derive(Debug, Clone, Default)]
pub struct CloudClients {
    pub hetzner: Option<HetznerClient>,
    pub vultr: Option<VultrClient>,
}

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the {cloud} client cannot be built")]
pub struct ClientError {
    pub cloud: Cloud,
    #[source]
    pub source: CloudError,
}

/// The Vultr base URL for an endpoint: the endpoint with `/v2` added unless present.
pub fn vultr_base_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v2") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v2")
    }
}

impl CloudClients {
    /// Clients for every keyed cloud of `config`.
    pub fn from_config(config: &Config) -> Result<CloudClients, ClientError> {
        let mut clients = CloudClients::default();
        for cloud in Cloud::ALL {
            let Some(cc) = config.cloud(cloud) else {
                continue;
            };
            let Some(key) = &cc.key else {
                continue;
            };
            match cloud {
                Cloud::Hetzner => {
                    let base = cc.endpoint.as_str().trim_end_matches('/').to_string();
                    let client = HetznerClient::new(
                        HetznerConfig::new(key.expose().to_string()).with_base_url(base),
                    )
                    .map_err(|source| ClientError { cloud, source })?;
                    clients.hetzner = Some(client);
                }
                Cloud::Vultr => {
                    let client = VultrClient::new(
                        VultrConfig::new(key.expose().to_string())
                            .with_base_url(vultr_base_url(cc.endpoint.as_str())),
                    )
                    .map_err(|source| ClientError { cloud, source })?;
                    clients.vultr = Some(client);
                }
            }
        }
        Ok(clients)
    }

    /// The keyed clouds, in cloud order.
    pub fn keyed(&self) -> Vec<Cloud> {
        let mut clouds = Vec::new();
        if self.hetzner.is_some() {
            clouds.push(Cloud::Hetzner);
        }
        if self.vultr.is_some() {
            clouds.push(Cloud::Vultr);
        }
        clouds
    }

    /// Requests sent so far per operation, both clouds together.
    pub fn request_counts(&self) -> std::collections::BTreeMap<String, u64> {
        let mut counts = std::collections::BTreeMap::new();
        if let Some(h) = &self.hetzner {
            counts.extend(h.request_counts());
        }
        if let Some(v) = &self.vultr {
            counts.extend(v.request_counts());
        }
        counts.retain(|_, n| *n > 0);
        counts
    }

    /// Forgets the request counts of both clients.
    pub fn reset_counts(&self) {
        if let Some(h) = &self.hetzner {
            h.counters().reset();
        }
        if let Some(v) = &self.vultr {
            v.counters().reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vultr_endpoint_gets_its_version_once() {
        assert_eq!(
            vultr_base_url("https://api.vultr.com/"),
            "https://api.vultr.com/v2"
        );
        assert_eq!(
            vultr_base_url("http://127.0.0.1:9/v2"),
            "http://127.0.0.1:9/v2"
        );
    }
}
