//! `/v2/blocks`: block storage volumes.
//!
//! Two types: `high_perf` (NVMe, 10 to 10 000 GB) and `storage_opt` (HDD, 40 to 40 000
//! GB), each offered only in regions whose options list `block_storage_<type>`. Monthly
//! cost is synthetic: 0.10 USD per GB for `high_perf`, 0.025 USD per GB for
//! `storage_opt`. A volume is `pending` for `Timings::quick`, then `active`; it attaches
//! to one instance of its region at a time and cannot be deleted while attached.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, TimeDelta, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::Vultr;
use super::http::{Body, Id, Params, Reply, VultrError, json, no_content};
use super::page::{Order, paginate};
use super::wire::{self, CreateBlock, InstanceRef, Relabel, given};
use super::world::Block;

type Shared = State<Arc<Vultr>>;

/// A block storage type: per-GB monthly price and size limits.
struct BlockType {
    name: &'static str,
    per_gb: Decimal,
    min_gb: u64,
    max_gb: u64,
}

const TYPES: [BlockType; 2] = [
    BlockType {
        name: "high_perf",
        per_gb: Decimal::from_parts(10, 0, 0, false, 2),
        min_gb: 10,
        max_gb: 10_000,
    },
    BlockType {
        name: "storage_opt",
        per_gb: Decimal::from_parts(25, 0, 0, false, 3),
        min_gb: 40,
        max_gb: 40_000,
    },
];

fn block_type(name: &str) -> Result<&'static BlockType, VultrError> {
    TYPES.iter().find(|t| t.name == name).ok_or_else(|| {
        VultrError::bad_request(format!(
            "Invalid block_type {name:?}: use \"high_perf\" or \"storage_opt\"."
        ))
    })
}

fn check_size(t: &BlockType, size: u64) -> Result<(), VultrError> {
    if (t.min_gb..=t.max_gb).contains(&size) {
        Ok(())
    } else {
        Err(VultrError::bad_request(format!(
            "Invalid size_gb {size}: {} volumes are {} to {} GB.",
            t.name, t.min_gb, t.max_gb
        )))
    }
}

fn not_found() -> VultrError {
    VultrError::not_found("Invalid block storage ID")
}

fn render(v: &Vultr, b: &Block, now: DateTime<Utc>) -> Value {
    let ready = TimeDelta::from_std(v.core.timings.quick)
        .ok()
        .and_then(|d| b.created.checked_add_signed(d));
    let status = if ready.is_some_and(|t| now >= t) {
        "active"
    } else {
        "pending"
    };
    let per_gb = TYPES
        .iter()
        .find(|t| t.name == b.block_type)
        .map_or(Decimal::ZERO, |t| t.per_gb);
    wire::block(b, status, per_gb * Decimal::from(b.size_gb))
}

/// `GET /v2/blocks`.
pub(crate) async fn list(State(v): Shared, headers: HeaderMap, params: Params) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    let items = v.world(&account, |w, _| {
        w.blocks
            .values()
            .map(|b| (b.id.clone(), render(&v, b, now)))
            .collect()
    });
    let page = paginate(items, &params, Order::ByKey)?;
    json(
        StatusCode::OK,
        json!({"blocks": page.items, "meta": page.meta()}),
    )
}

/// `POST /v2/blocks {region, size_gb, label, block_type}` → 202 `{"block"}`.
pub(crate) async fn create(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<CreateBlock>,
) -> Reply {
    let account = v.account(&headers)?;
    let region_id = given(&b.region)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: region."))?;
    let region = v
        .catalog
        .region(region_id)
        .ok_or_else(|| VultrError::bad_request("Invalid region chosen."))?;
    let t = block_type(given(&b.block_type).unwrap_or("high_perf"))?;
    let size = b
        .size_gb
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: size_gb."))?;
    check_size(t, size)?;
    let option = format!("block_storage_{}", t.name);
    if !region.options.contains(&option) {
        return Err(VultrError::bad_request(format!(
            "Block storage type {} is not available in the selected region.",
            t.name
        )));
    }
    let now = v.core.now();
    let body = v.world(&account, |w, alloc| {
        let id = alloc.uuid();
        let block = Block {
            mount_id: format!("{}-{}", region.id, &id.replace('-', "")[..14]),
            id,
            region: region.id.clone(),
            size_gb: size,
            label: b.label.clone().unwrap_or_default(),
            block_type: t.name.to_string(),
            created: now,
            attached: None,
        };
        let body = render(&v, &block, now);
        w.blocks.insert(block.id.clone(), block);
        body
    });
    json(StatusCode::ACCEPTED, json!({"block": body}))
}

/// `GET /v2/blocks/{id}`.
pub(crate) async fn get_one(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    let body = v.world(&account, |w, _| {
        w.blocks
            .get(&id)
            .map(|b| render(&v, b, now))
            .ok_or_else(not_found)
    })?;
    json(StatusCode::OK, json!({"block": body}))
}

/// `PATCH /v2/blocks/{id} {label?, size_gb?}` → 204; volumes only grow.
pub(crate) async fn update(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<Relabel>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let block = w.blocks.get_mut(&id).ok_or_else(not_found)?;
        if let Some(size) = b.size_gb {
            if size < block.size_gb {
                return Err(VultrError::bad_request(format!(
                    "Invalid size_gb {size}: a volume can only grow (now {} GB).",
                    block.size_gb
                )));
            }
            check_size(block_type(&block.block_type)?, size)?;
            block.size_gb = size;
        }
        if let Some(label) = &b.label {
            block.label = label.clone();
        }
        Ok(())
    })?;
    no_content()
}

/// `DELETE /v2/blocks/{id}` → 204; refused while attached.
pub(crate) async fn delete(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let block = w.blocks.get(&id).ok_or_else(not_found)?;
        if block.attached.is_some() {
            return Err(VultrError::bad_request(
                "Unable to delete block storage: it is attached to an instance. Detach it first.",
            ));
        }
        w.blocks.remove(&id);
        Ok(())
    })?;
    no_content()
}

/// `POST /v2/blocks/{id}/attach {instance_id, live}` → 204.
pub(crate) async fn attach(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<InstanceRef>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let block = w.blocks.get(&id).ok_or_else(not_found)?;
        let iid = given(&b.instance_id)
            .ok_or_else(|| VultrError::bad_request("Missing required parameter: instance_id."))?;
        let inst = w
            .instances
            .get(iid)
            .ok_or_else(|| VultrError::bad_request(format!("Invalid instance ID: {iid}")))?;
        if block.attached.is_some() {
            return Err(VultrError::bad_request(
                "Block storage is already attached to an instance.",
            ));
        }
        if inst.region != block.region {
            return Err(VultrError::bad_request(
                "The block storage and the instance must be in the same region.",
            ));
        }
        let iid = inst.id.clone();
        if let Some(block) = w.blocks.get_mut(&id) {
            block.attached = Some(iid);
        }
        Ok(())
    })?;
    no_content()
}

/// `POST /v2/blocks/{id}/detach {live}` → 204.
pub(crate) async fn detach(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(_b): Body<InstanceRef>,
) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        let block = w.blocks.get_mut(&id).ok_or_else(not_found)?;
        match block.attached.take() {
            Some(_) => Ok(()),
            None => Err(VultrError::bad_request(
                "Block storage is not attached to an instance.",
            )),
        }
    })?;
    no_content()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_limits() {
        let hp = block_type("high_perf").unwrap();
        assert_eq!(hp.per_gb * Decimal::from(50u64), Decimal::from(5));
        let so = block_type("storage_opt").unwrap();
        assert!(check_size(so, 39).is_err());
        assert!(check_size(so, 40).is_ok());
        assert!(block_type("ssd").is_err());
    }
}
