//! `/server`: the account's dedicated servers, and renaming one.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::http::{Form, Reply, RobotError, Segment, json};
use super::{Login, Robot};

/// Longest server name accepted.
const MAX_NAME: usize = 100;

/// `GET /server` → `[{"server":{…}}, …]`, `[]` for an account without servers.
pub(crate) async fn list(State(r): State<Arc<Robot>>, Login(account): Login) -> Reply {
    let list: Vec<Value> = r.world(&account, |w| {
        w.servers
            .iter()
            .map(|s| json!({"server": s.summary()}))
            .collect()
    });
    json(StatusCode::OK, json!(list))
}

/// `GET /server/{number or IPv4}` → `{"server":{…}}` with the feature flags.
pub(crate) async fn get_one(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
) -> Reply {
    let body = r.world(&account, |w| {
        w.server_mut(&id)
            .map(|s| s.detail())
            .ok_or_else(RobotError::server_not_found)
    })?;
    json(StatusCode::OK, json!({"server": body}))
}

/// `POST /server/{id}` `server_name=…` → `{"server":{…}}`.
pub(crate) async fn rename(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
    form: Form,
) -> Reply {
    let body = r.world(&account, |w| {
        let server = w.server_mut(&id).ok_or_else(RobotError::server_not_found)?;
        let name = form
            .0
            .iter()
            .rev()
            .find(|(k, _)| k == "server_name")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| RobotError::invalid_input(&["server_name"], &[]))?;
        if name.chars().count() > MAX_NAME {
            return Err(RobotError::invalid_input(&[], &["server_name"]));
        }
        server.name = name;
        Ok(server.detail())
    })?;
    json(StatusCode::OK, json!({"server": body}))
}
