//! `/v2/ssh-keys`: SSH public keys an instance can be created with.
//!
//! A key must look like an OpenSSH public key line (`<type> <base64 blob> [comment]`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::Vultr;
use super::http::{Body, Id, Params, Reply, VultrError, json, no_content};
use super::page::{Order, paginate};
use super::wire::{self, SshKeyBody, given};
use super::world::SshKey;

type Shared = State<Arc<Vultr>>;

const KEY_TYPES: [&str; 7] = [
    "ssh-rsa",
    "ssh-ed25519",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
];

fn not_found() -> VultrError {
    VultrError::not_found("Invalid ssh key")
}

/// Checks an OpenSSH public key line and returns it trimmed.
pub(crate) fn check_public_key(raw: &str) -> Result<String, VultrError> {
    let line = raw.trim();
    let mut parts = line.split_whitespace();
    let valid = match (parts.next(), parts.next()) {
        (Some(kind), Some(blob)) => {
            KEY_TYPES.contains(&kind) && STANDARD.decode(blob).is_ok_and(|b| b.len() > 8)
        }
        _ => false,
    };
    if valid {
        Ok(line.to_string())
    } else {
        Err(VultrError::bad_request(
            "Invalid SSH key: expected an OpenSSH public key such as \"ssh-ed25519 AAAA… comment\".",
        ))
    }
}

/// `GET /v2/ssh-keys`.
pub(crate) async fn list(State(v): Shared, headers: HeaderMap, params: Params) -> Reply {
    let account = v.account(&headers)?;
    let items = v.world(&account, |w, _| {
        w.ssh_keys
            .values()
            .map(|k| (k.id.clone(), wire::ssh_key(k)))
            .collect()
    });
    let page = paginate(items, &params, Order::ByKey)?;
    json(
        StatusCode::OK,
        json!({"ssh_keys": page.items, "meta": page.meta()}),
    )
}

/// `POST /v2/ssh-keys {name, ssh_key}` → 201.
pub(crate) async fn create(
    State(v): Shared,
    headers: HeaderMap,
    Body(b): Body<SshKeyBody>,
) -> Reply {
    let account = v.account(&headers)?;
    let name = given(&b.name)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: name."))?
        .to_string();
    let key = given(&b.ssh_key)
        .ok_or_else(|| VultrError::bad_request("Missing required parameter: ssh_key."))?;
    let key = check_public_key(key)?;
    let now = v.core.now();
    let body = v.world(&account, |w, alloc| {
        let k = SshKey {
            id: alloc.uuid(),
            name,
            ssh_key: key,
            created: now,
        };
        let body = wire::ssh_key(&k);
        w.ssh_keys.insert(k.id.clone(), k);
        body
    });
    json(StatusCode::CREATED, json!({"ssh_key": body}))
}

/// `GET /v2/ssh-keys/{id}`.
pub(crate) async fn get_one(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    let body = v.world(&account, |w, _| {
        w.ssh_keys.get(&id).map(wire::ssh_key).ok_or_else(not_found)
    })?;
    json(StatusCode::OK, json!({"ssh_key": body}))
}

/// `PATCH /v2/ssh-keys/{id} {name?, ssh_key?}` → 204.
pub(crate) async fn update(
    State(v): Shared,
    headers: HeaderMap,
    Id(id): Id<String>,
    Body(b): Body<SshKeyBody>,
) -> Reply {
    let account = v.account(&headers)?;
    let key = given(&b.ssh_key).map(check_public_key).transpose()?;
    v.world(&account, |w, _| {
        let k = w.ssh_keys.get_mut(&id).ok_or_else(not_found)?;
        if let Some(name) = given(&b.name) {
            k.name = name.to_string();
        }
        if let Some(key) = key {
            k.ssh_key = key;
        }
        Ok::<_, VultrError>(())
    })?;
    no_content()
}

/// `DELETE /v2/ssh-keys/{id}` → 204.
pub(crate) async fn delete(State(v): Shared, headers: HeaderMap, Id(id): Id<String>) -> Reply {
    let account = v.account(&headers)?;
    v.world(&account, |w, _| {
        w.ssh_keys.remove(&id).map(|_| ()).ok_or_else(not_found)
    })?;
    no_content()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_openssh_lines_only() {
        let ok =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvXGWm0fHqu9y6gHjIQoPbVnB0jl+2/0A1+CEJ1x6bp ops";
        assert!(check_public_key(ok).is_ok());
        assert!(check_public_key("ssh-ed25519").is_err());
        assert!(check_public_key("hello world").is_err());
        assert!(check_public_key("ssh-rsa not!base64").is_err());
    }
}
