//! `/key`: SSH keys stored in Robot, identified by their MD5 fingerprint.
//!
//! An account without keys gets 404 `NOT_FOUND` "No keys found" from `GET /key`, as the
//! real service answers, not an empty list.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::http::{Form, Reply, RobotError, Segment, json};
use super::world::{Key, key_json, parse_public_key};
use super::{Login, Robot};

fn key_not_found() -> RobotError {
    RobotError::not_found("Key not found")
}

/// `GET /key`.
pub(crate) async fn list(State(r): State<Arc<Robot>>, Login(account): Login) -> Reply {
    let list: Vec<Value> = r.world(&account, |w| w.keys.values().map(key_json).collect());
    if list.is_empty() {
        return Err(RobotError::not_found("No keys found"));
    }
    json(StatusCode::OK, json!(list))
}

/// `POST /key` `name=…&data=<OpenSSH public key>` → 201.
pub(crate) async fn create(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    form: Form,
) -> Reply {
    let missing: Vec<&str> = ["name", "data"]
        .into_iter()
        .filter(|f| form.get(f).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(RobotError::invalid_input(&missing, &[]));
    }
    let name = form.get("name").unwrap_or_default().to_string();
    let data = form.get("data").unwrap_or_default().trim().to_string();
    let parsed = parse_public_key(&data).map_err(|_| RobotError::invalid_input(&[], &["data"]))?;
    let created_at = r.core.now().format("%Y-%m-%d %H:%M:%S").to_string();
    let body = r.world(&account, |w| {
        if w.keys.contains_key(&parsed.fingerprint) {
            return Err(RobotError::new(
                StatusCode::CONFLICT,
                "KEY_ALREADY_EXISTS",
                "The key already exists",
            ));
        }
        let key = Key {
            name,
            fingerprint: parsed.fingerprint.clone(),
            kind: parsed.kind.to_string(),
            size: parsed.size,
            data,
            created_at,
        };
        let body = key_json(&key);
        w.keys.insert(key.fingerprint.clone(), key);
        Ok(body)
    })?;
    json(StatusCode::CREATED, body)
}

/// `GET /key/{fingerprint}`.
pub(crate) async fn get_one(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(fp): Segment,
) -> Reply {
    let body = r.world(&account, |w| {
        w.keys.get(&fp).map(key_json).ok_or_else(key_not_found)
    })?;
    json(StatusCode::OK, body)
}

/// `POST /key/{fingerprint}` `name=…` → 200 `{"key"}`.
pub(crate) async fn rename(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(fp): Segment,
    form: Form,
) -> Reply {
    let body = r.world(&account, |w| {
        let key = w.keys.get_mut(&fp).ok_or_else(key_not_found)?;
        let name = form
            .get("name")
            .ok_or_else(|| RobotError::invalid_input(&["name"], &[]))?;
        key.name = name.to_string();
        Ok(key_json(key))
    })?;
    json(StatusCode::OK, body)
}

/// `DELETE /key/{fingerprint}` → 200 with an empty body.
pub(crate) async fn delete(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(fp): Segment,
) -> Reply {
    r.world(&account, |w| w.keys.remove(&fp).ok_or_else(key_not_found))?;
    Ok(StatusCode::OK.into_response())
}
