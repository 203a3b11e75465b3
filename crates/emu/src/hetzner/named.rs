//! Resources with a name unique within the account and a label map: servers, primary and
//! floating IPs, networks, SSH keys and volumes. Creating one checks the name is free;
//! `PUT` renames and relabels (labels replace the whole map).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::ApiError;
use super::world::{FloatingIp, Network, PrimaryIp, Server, SshKey, Volume};

pub(crate) type Labels = BTreeMap<String, String>;

pub(crate) trait Named {
    /// The message of the 409 when the name is taken.
    const TAKEN: &'static str;

    fn id(&self) -> u64;
    fn name(&self) -> &str;
    fn rename(&mut self, name: String);
    fn relabel(&mut self, labels: Labels);

    /// `details` of the 409: which field clashed.
    fn taken_details() -> Value {
        json!({"fields": [{"name": "name"}]})
    }
}

/// Refuses `name` when a resource other than `except` already carries it.
pub(crate) fn ensure_name_free<T: Named>(
    items: &BTreeMap<u64, T>,
    name: &str,
    except: Option<u64>,
) -> Result<(), ApiError> {
    let taken = items
        .values()
        .any(|r| Some(r.id()) != except && r.name() == name);
    if taken {
        Err(ApiError::uniqueness(T::TAKEN, T::taken_details()))
    } else {
        Ok(())
    }
}

/// Applies a `PUT` body's name and labels to resource `id` and returns it for the fields only
/// its kind has. `None` when there is no such resource.
pub(crate) fn rename_and_relabel<T: Named>(
    items: &mut BTreeMap<u64, T>,
    id: u64,
    name: Option<String>,
    labels: Option<Labels>,
) -> Result<Option<&mut T>, ApiError> {
    if let Some(name) = &name {
        ensure_name_free(items, name, Some(id))?;
    }
    let Some(item) = items.get_mut(&id) else {
        return Ok(None);
    };
    if let Some(name) = name {
        item.rename(name);
    }
    if let Some(labels) = labels {
        item.relabel(labels);
    }
    Ok(Some(item))
}

macro_rules! named {
    ($ty:ty, $taken:literal) => {
        named!($ty, $taken, json!({"fields": [{"name": "name"}]}));
    };
    ($ty:ty, $taken:literal, $details:expr) => {
        impl Named for $ty {
            const TAKEN: &'static str = $taken;
            fn id(&self) -> u64 {
                self.id
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn rename(&mut self, name: String) {
                self.name = name;
            }
            fn relabel(&mut self, labels: Labels) {
                self.labels = labels;
            }
            fn taken_details() -> Value {
                $details
            }
        }
    };
}

// The live API answers a taken server name with empty details.
named!(Server, "server name is already used", json!({}));
named!(PrimaryIp, "primary IP name is already used");
named!(FloatingIp, "floating IP name is already used");
named!(Network, "network name is already used");
named!(SshKey, "SSH key with the same name already exists");
named!(Volume, "volume name is already used");
