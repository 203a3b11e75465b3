//! SSH keys: create (with fingerprinting and uniqueness of name and fingerprint), list, get,
//! update and delete.
//!
//! The fingerprint is the MD5 of the base64-decoded key blob, as lowercase colon-separated
//! hex. A key is accepted only when its blob decodes and names the same key type as the
//! text before it, so a truncated or mistyped key is refused with `422 invalid_input`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use base64::Engine;
use md5::{Digest, Md5};
use serde_json::{Value, json};

use super::named::{ensure_name_free, rename_and_relabel};
use super::pagination::{ListQuery, SortValue, page_of, sort_items};
use super::wire::{CreateSshKey, Update, check_labels, check_name, required};
use super::world::{SshKey, ts};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, PathId, created, ok};

/// The fingerprint of an OpenSSH public key line, or why it is not one.
pub(crate) fn fingerprint(public_key: &str) -> Result<String, String> {
    let mut parts = public_key.split_whitespace();
    let (Some(kind), Some(data)) = (parts.next(), parts.next()) else {
        return Err("must be 'TYPE BASE64 [COMMENT]'".into());
    };
    let blob = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| "key data is not valid base64".to_string())?;
    let declared = blob
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .and_then(|len| blob.get(4..4usize.checked_add(len)?))
        .ok_or_else(|| "key data is truncated".to_string())?;
    if declared != kind.as_bytes() {
        return Err(format!("key data does not hold a {kind} key"));
    }
    let digest = Md5::digest(&blob);
    Ok(digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":"))
}

fn key_json(k: &SshKey) -> Value {
    json!({
        "id": k.id,
        "name": k.name,
        "fingerprint": k.fingerprint,
        "public_key": k.public_key,
        "labels": k.labels,
        "created": ts(k.created),
    })
}

fn find<'w>(ctx: &'w Ctx<'_>, id: u64) -> Result<&'w SshKey, ApiError> {
    ctx.world
        .ssh_keys
        .get(&id)
        .ok_or_else(|| ApiError::not_found("SSH key", id))
}

pub(crate) async fn create(
    State(hz): Hs,
    account: Account,
    Body(b): Body<CreateSshKey>,
) -> ApiResult {
    let name = required(b.name, "name")?;
    check_name(&name, 255)?;
    check_labels(&b.labels)?;
    let public_key = required(b.public_key, "public_key")?.trim().to_string();
    let fingerprint =
        fingerprint(&public_key).map_err(|e| ApiError::invalid_field("public_key", vec![e]))?;
    hz.with_world(&account, |ctx| {
        ensure_name_free(&ctx.world.ssh_keys, &name, None)?;
        if ctx
            .world
            .ssh_keys
            .values()
            .any(|k| k.fingerprint == fingerprint)
        {
            return Err(ApiError::uniqueness(
                "SSH key with the same fingerprint already exists",
                json!({"fields": [{"name": "public_key"}]}),
            ));
        }
        let id = ctx.ids.ssh_key();
        let key = SshKey {
            id,
            name,
            fingerprint,
            public_key,
            labels: b.labels.unwrap_or_default(),
            created: ctx.now,
        };
        let body = json!({"ssh_key": key_json(&key)});
        ctx.world.ssh_keys.insert(id, key);
        created(body)
    })
}

pub(crate) async fn list(State(hz): Hs, account: Account, q: ListQuery) -> ApiResult {
    let selector = q.selector()?;
    let sorts = q.sort(&["id", "name"])?;
    let name = q.get("name").map(str::to_string);
    let fp = q.get("fingerprint").map(str::to_string);
    hz.with_world(&account, |ctx| {
        let mut keys: Vec<&SshKey> = ctx
            .world
            .ssh_keys
            .values()
            .filter(|k| name.as_deref().is_none_or(|n| k.name == n))
            .filter(|k| fp.as_deref().is_none_or(|f| k.fingerprint == f))
            .filter(|k| selector.as_ref().is_none_or(|s| s.matches(&k.labels)))
            .collect();
        sort_items(&mut keys, &sorts, |k, f| match f {
            "name" => SortValue::Text(k.name.clone()),
            _ => SortValue::Int(k.id),
        });
        page_of(&q, "ssh_keys", keys.iter().map(|k| key_json(k)).collect())
    })
}

pub(crate) async fn get_one(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        ok(json!({"ssh_key": key_json(find(ctx, id)?)}))
    })
}

pub(crate) async fn update(
    State(hz): Hs,
    account: Account,
    PathId(id): PathId,
    Body(b): Body<Update>,
) -> ApiResult {
    check_labels(&b.labels)?;
    if let Some(n) = &b.name {
        check_name(n, 255)?;
    }
    hz.with_world(&account, |ctx| {
        find(ctx, id)?;
        rename_and_relabel(&mut ctx.world.ssh_keys, id, b.name, b.labels)?;
        ok(json!({"ssh_key": key_json(find(ctx, id)?)}))
    })
}

pub(crate) async fn delete(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        find(ctx, id)?;
        ctx.world.ssh_keys.remove(&id);
        Ok(StatusCode::NO_CONTENT.into_response())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hetzner_fingerprint_is_md5_of_the_blob() {
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKXDvO6tPGNwgp2AyT2t9jYm2YGcsBuJZHAVrGTPWbMH orc@test";
        let fp = fingerprint(key).unwrap();
        assert_eq!(fp.len(), 47);
        assert_eq!(fp.split(':').count(), 16);
        let blob = base64::engine::general_purpose::STANDARD
            .decode("AAAAC3NzaC1lZDI1NTE5AAAAIKXDvO6tPGNwgp2AyT2t9jYm2YGcsBuJZHAVrGTPWbMH")
            .unwrap();
        let expected: String = Md5::digest(&blob)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(fp, expected);
        assert!(
            fingerprint(
                "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIKXDvO6tPGNwgp2AyT2t9jYm2YGcsBuJZHAVrGTPWbMH"
            )
            .is_err()
        );
        assert!(fingerprint("ssh-ed25519 not-base64!").is_err());
        assert!(fingerprint("garbage").is_err());
    }
}
