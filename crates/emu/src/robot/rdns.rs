//! `/rdns/{ip}`: reverse DNS entries of the account's server addresses (an IPv4 of a
//! server, or any address in one of its IPv6 /64 subnets).
//!
//! `PUT` creates (409 `RDNS_ALREADY_EXISTS` when one exists), `POST` creates or updates,
//! `DELETE` removes; an address of no server of the account is 404 `IP_NOT_FOUND`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::http::{Form, Reply, RobotError, Segment, json};
use super::world::World;
use super::{Login, Robot};

fn ip_not_found() -> RobotError {
    RobotError::new(StatusCode::NOT_FOUND, "IP_NOT_FOUND", "IP not found")
}

fn rdns_not_found() -> RobotError {
    RobotError::new(
        StatusCode::NOT_FOUND,
        "RDNS_NOT_FOUND",
        "RDNS entry not found",
    )
}

/// The address in the path, if it belongs to one of the account's servers.
fn owned_ip(w: &World, raw: &str) -> Result<IpAddr, RobotError> {
    let ip: IpAddr = raw.parse().map_err(|_| ip_not_found())?;
    if w.servers.iter().any(|s| s.owns_ip(ip)) {
        Ok(ip)
    } else {
        Err(ip_not_found())
    }
}

fn rdns_json(ip: IpAddr, ptr: &str) -> Value {
    json!({"rdns": {"ip": ip.to_string(), "ptr": ptr}})
}

fn ptr(form: &Form) -> Result<String, RobotError> {
    form.get("ptr")
        .map(str::to_string)
        .ok_or_else(|| RobotError::invalid_input(&["ptr"], &[]))
}

/// `GET /rdns/{ip}`.
pub(crate) async fn get_one(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(raw): Segment,
) -> Reply {
    let body = r.world(&account, |w| {
        let ip = owned_ip(w, &raw)?;
        w.rdns
            .get(&ip)
            .map(|p| rdns_json(ip, p))
            .ok_or_else(rdns_not_found)
    })?;
    json(StatusCode::OK, body)
}

/// `PUT /rdns/{ip}` `ptr=…` → 201; 409 when an entry exists.
pub(crate) async fn create(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(raw): Segment,
    form: Form,
) -> Reply {
    let body = r.world(&account, |w| {
        let ip = owned_ip(w, &raw)?;
        let name = ptr(&form)?;
        if w.rdns.contains_key(&ip) {
            return Err(RobotError::new(
                StatusCode::CONFLICT,
                "RDNS_ALREADY_EXISTS",
                "The RDNS entry already exists",
            ));
        }
        let body = rdns_json(ip, &name);
        w.rdns.insert(ip, name);
        Ok(body)
    })?;
    json(StatusCode::CREATED, body)
}

/// `POST /rdns/{ip}` `ptr=…` → 200, creating or updating.
pub(crate) async fn upsert(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(raw): Segment,
    form: Form,
) -> Reply {
    let body = r.world(&account, |w| {
        let ip = owned_ip(w, &raw)?;
        let name = ptr(&form)?;
        let body = rdns_json(ip, &name);
        w.rdns.insert(ip, name);
        Ok::<_, RobotError>(body)
    })?;
    json(StatusCode::OK, body)
}

/// `DELETE /rdns/{ip}` → 200 with an empty body.
pub(crate) async fn delete(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(raw): Segment,
) -> Reply {
    r.world(&account, |w| {
        let ip = owned_ip(w, &raw)?;
        w.rdns.remove(&ip).ok_or_else(rdns_not_found)
    })?;
    Ok(StatusCode::OK.into_response())
}
