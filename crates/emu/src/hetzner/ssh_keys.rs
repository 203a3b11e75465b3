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

use super::named::{Resource, ensure_name_free, find, list_page};
use super::pagination::{ListQuery, Listing};
use super::wire::{CreateSshKey, check_labels, check_name, required};
use super::world::{SshKey, ts};
use super::{Account, ApiError, ApiResult, Body, Ctx, Hs, PathId, created};

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

impl Resource for SshKey {
    fn to_json(&self, _: &Ctx<'_>) -> Value {
        key_json(self)
    }
    fn check_name(name: &str) -> Result<(), ApiError> {
        check_name(name, 255)
    }
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
    let listing = Listing::parse(&q, &["id", "name"])?;
    let fingerprint = q.get("fingerprint");
    list_page(&hz, &account, &q, listing, |k: &SshKey| {
        fingerprint.is_none_or(|f| k.fingerprint == f)
    })
}

pub(crate) async fn delete(State(hz): Hs, account: Account, PathId(id): PathId) -> ApiResult {
    hz.with_world(&account, |ctx| {
        find::<SshKey>(ctx, id)?;
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
