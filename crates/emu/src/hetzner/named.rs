//! Resources with a name unique within the account and a label map: servers, primary and
//! floating IPs, networks, SSH keys and volumes. Creating one checks the name is free;
//! `PUT` renames and relabels (labels replace the whole map).
//!
//! What the six kinds answer alike is written here once, over [`Resource`]: `GET` of one
//! ([`get_one`]), `PUT` ([`update`]), and the list with its `name` filter, label selector,
//! sort and pages ([`list_page`]). Each kind's module says only what is its own: its JSON,
//! its name rule, the fields its `PUT` takes besides name and labels, its list filters.

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::pagination::{ListQuery, Listing, SortValue, page_of, sort_items};
use super::wire::{Update, check_labels};
use super::world::{FloatingIp, Network, PrimaryIp, Server, SshKey, Volume, World};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, Hz, PathId, ok};

pub(crate) type Labels = BTreeMap<String, String>;

pub(crate) trait Named: Sized {
    /// The message of the 409 when the name is taken.
    const TAKEN: &'static str;
    /// The kind as the API's messages name it (`primary IP`).
    const KIND: &'static str;
    /// The key of one resource in an answer (`primary_ip`).
    const ONE: &'static str;
    /// The key of a page of them (`primary_ips`).
    const MANY: &'static str;

    /// The account's resources of this kind, by id.
    fn all(world: &World) -> &BTreeMap<u64, Self>;
    fn all_mut(world: &mut World) -> &mut BTreeMap<u64, Self>;

    fn id(&self) -> u64;
    fn name(&self) -> &str;
    fn labels(&self) -> &Labels;
    fn created(&self) -> DateTime<Utc>;
    fn rename(&mut self, name: String);
    fn relabel(&mut self, labels: Labels);

    /// `details` of the 409: which field clashed.
    fn taken_details() -> Value {
        json!({"fields": [{"name": "name"}]})
    }
}

/// What a kind of named resource shows and accepts as the API serves it.
pub(crate) trait Resource: Named {
    /// The resource as the API shows it.
    fn to_json(&self, ctx: &Ctx<'_>) -> Value;
    /// Refuses a name this kind does not accept.
    fn check_name(name: &str) -> Result<(), ApiError>;
    /// Applies the fields of a `PUT` body other than name and labels.
    fn apply_update(&mut self, _update: &Update) {}
}

/// The resource `id` of kind `T`, or `404 not_found` naming the kind.
pub(crate) fn find<'w, T: Named>(ctx: &'w Ctx<'_>, id: u64) -> Result<&'w T, ApiError> {
    T::all(ctx.world)
        .get(&id)
        .ok_or_else(|| ApiError::not_found(T::KIND, id))
}

/// `GET /{kind}/{id}`.
pub(crate) async fn get_one<T: Resource>(
    State(hz): Hs,
    account: Account,
    PathId(id): PathId,
) -> ApiResult {
    hz.with_world(&account, |ctx| {
        ok(json!({(T::ONE): find::<T>(ctx, id)?.to_json(ctx)}))
    })
}

/// `PUT /{kind}/{id}`: labels and name are checked before the resource is looked up; a
/// taken name is `409`.
pub(crate) async fn update<T: Resource>(
    State(hz): Hs,
    account: Account,
    PathId(id): PathId,
    Body(mut b): Body<Update>,
) -> ApiResult {
    check_labels(&b.labels)?;
    if let Some(n) = &b.name {
        T::check_name(n)?;
    }
    hz.with_world(&account, |ctx| {
        find::<T>(ctx, id)?;
        let (name, labels) = (b.name.take(), b.labels.take());
        if let Some(item) = rename_and_relabel(T::all_mut(ctx.world), id, name, labels)? {
            item.apply_update(&b);
        }
        ok(json!({(T::ONE): find::<T>(ctx, id)?.to_json(ctx)}))
    })
}

/// One page of the account's resources of kind `T` that carry the query's `name` (when it
/// gives one), match `listing`'s label selector and pass `keep`, in `listing`'s order.
pub(crate) fn list_page<T: Resource>(
    hz: &Hz,
    account: &Account,
    q: &ListQuery,
    listing: Listing,
    keep: impl Fn(&T) -> bool,
) -> ApiResult {
    let name = q.get("name");
    hz.with_world(account, |ctx| {
        let ctx: &Ctx<'_> = ctx;
        let mut items: Vec<&T> = T::all(ctx.world)
            .values()
            .filter(|r| name.is_none_or(|n| r.name() == n))
            .filter(|r| {
                listing
                    .selector
                    .as_ref()
                    .is_none_or(|s| s.matches(r.labels()))
            })
            .filter(|r| keep(r))
            .collect();
        sort_items(&mut items, &listing.sorts, |r, field| match field {
            "name" => SortValue::Text(r.name().to_string()),
            "created" => SortValue::Time(r.created()),
            _ => SortValue::Int(r.id()),
        });
        let items = items.iter().map(|r| r.to_json(ctx)).collect();
        page_of(q, T::MANY, items)
    })
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
fn rename_and_relabel<T: Named>(
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

/// `Named` for a kind kept in `World::$all`, called `$kind` in messages and `$one` in
/// answers.
macro_rules! named {
    ($ty:ty, $all:ident, $kind:literal, $one:literal, $taken:literal) => {
        named!($ty, $all, $kind, $one, $taken, json!({"fields": [{"name": "name"}]}));
    };
    ($ty:ty, $all:ident, $kind:literal, $one:literal, $taken:literal, $details:expr) => {
        impl Named for $ty {
            const TAKEN: &'static str = $taken;
            const KIND: &'static str = $kind;
            const ONE: &'static str = $one;
            const MANY: &'static str = stringify!($all);
            fn all(world: &World) -> &BTreeMap<u64, Self> {
                &world.$all
            }
            fn all_mut(world: &mut World) -> &mut BTreeMap<u64, Self> {
                &mut world.$all
            }
            fn id(&self) -> u64 {
                self.id
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn labels(&self) -> &Labels {
                &self.labels
            }
            fn created(&self) -> DateTime<Utc> {
                self.created
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
named!(
    Server,
    servers,
    "server",
    "server",
    "server name is already used",
    json!({})
);
named!(
    PrimaryIp,
    primary_ips,
    "primary IP",
    "primary_ip",
    "primary IP name is already used"
);
named!(
    FloatingIp,
    floating_ips,
    "floating IP",
    "floating_ip",
    "floating IP name is already used"
);
named!(
    Network,
    networks,
    "network",
    "network",
    "network name is already used"
);
named!(
    SshKey,
    ssh_keys,
    "SSH key",
    "ssh_key",
    "SSH key with the same name already exists"
);
named!(
    Volume,
    volumes,
    "volume",
    "volume",
    "volume name is already used"
);
