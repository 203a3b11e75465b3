//! The partner's cloud accounts: one `CloudOps` per keyed cloud, built from the
//! partner's config.
//!
//! Building them touches no network. `ORC_HETZNER_ENDPOINT` is the Hetzner API base
//! (`…/v1`) as given; `ORC_VULTR_ENDPOINT` is the Vultr API root, to which `/v2` is added
//! unless the URL already ends in it.

use std::collections::BTreeMap;

use orc_cloud::CloudError;
use orc_partner::ids::Cloud;
use orc_partner::params::Config;

use crate::clouds::{self, CloudOps};

/// The accounts of the clouds that hold a key; a cloud without a key has none.
#[derive(Debug, Default)]
pub struct CloudClients {
    clouds: BTreeMap<Cloud, Box<dyn CloudOps>>,
}

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the {cloud} client cannot be built")]
pub struct ClientError {
    pub cloud: Cloud,
    #[source]
    pub source: CloudError,
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
            let ops =
                clouds::connect(cloud, cc, key).map_err(|source| ClientError { cloud, source })?;
            clients.clouds.insert(cloud, ops);
        }
        Ok(clients)
    }

    /// The account of `cloud`, when it is keyed.
    pub(crate) fn get(&self, cloud: Cloud) -> Option<&dyn CloudOps> {
        self.clouds.get(&cloud).map(|ops| &**ops)
    }

    /// The account an instance or resource reference (`<cloud>:<id>`) belongs to, with the
    /// id.
    pub(crate) fn for_ref<'a>(&self, reference: &'a str) -> Option<(&dyn CloudOps, &'a str)> {
        let (cloud, id) = clouds::split_ref(reference)?;
        Some((self.get(cloud)?, id))
    }

    /// The keyed clouds, in cloud order.
    pub fn keyed(&self) -> Vec<Cloud> {
        self.clouds.keys().copied().collect()
    }

    /// Requests sent so far per operation, every cloud together.
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for ops in self.clouds.values() {
            counts.extend(ops.request_counts());
        }
        counts.retain(|_, n| *n > 0);
        counts
    }

    /// Forgets the request counts of every client.
    pub fn reset_counts(&self) {
        for ops in self.clouds.values() {
            ops.reset_counts();
        }
    }
}
