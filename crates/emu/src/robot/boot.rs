//! `/reset` (power and reset buttons) and `/boot` (boot configurations, the rescue system).
//!
//! Power model: a server is on or off. `sw` and `hw` reboot a running server (a server
//! that is off stays off); `power` presses the power button, which boots a server that is
//! off and shuts down one that is on; `power_long` holds it, leaving the server off;
//! `man` asks a technician, boots the server, and keeps a manual reset pending for
//! `Timings::create` of emulated time (a second `man` meanwhile is 409). Every boot uses
//! up an activated rescue system and records it: `GET /boot/{n}/rescue` then shows
//! `active: false`, and every `/boot/{n}…` answer carries the emulator's own header
//! `X-Emu-Booted-Into-Rescue: true` (`false` otherwise) until the next boot without rescue
//! or `power_long`. The body keeps Robot's exact shape. A failure token makes the next reset 500
//! `RESET_FAILED` with no effect.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use chrono::TimeDelta;
use rand::Rng;
use rand::distr::Alphanumeric;
use serde_json::{Value, json};

use super::http::{Form, Reply, RobotError, Segment};
use super::world::{Rescue, SEED, Server};
use super::{Login, Robot};

/// The emulator's header telling whether the last boot went into the rescue system.
pub const BOOTED_INTO_RESCUE: &str = "x-emu-booted-into-rescue";

/// A 200 JSON answer about a server's boot configuration, with [`BOOTED_INTO_RESCUE`].
fn boot_answer(body: Value, booted: bool) -> Reply {
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response.headers_mut().insert(
        BOOTED_INTO_RESCUE,
        HeaderValue::from_static(if booted { "true" } else { "false" }),
    );
    Ok(response)
}

fn json(status: StatusCode, body: Value) -> Reply {
    Ok((status, Json(body)).into_response())
}

fn operating_status(s: &Server) -> &str {
    if s.seed.operating_status == "not supported" {
        "not supported"
    } else if s.powered {
        "running"
    } else {
        "stopped"
    }
}

fn reset_menu(s: &Server) -> Value {
    let mut m = s.head();
    m.insert("type".into(), json!(s.seed.reset_types));
    m.insert("operating_status".into(), json!(operating_status(s)));
    Value::Object(m)
}

/// `GET /reset` → `[{"reset":{…}}]` of servers that can be reset.
pub(crate) async fn list_resets(State(r): State<Arc<Robot>>, Login(account): Login) -> Reply {
    let list: Vec<Value> = r.world(&account, |w| {
        w.servers
            .iter()
            .filter(|s| s.seed.reset)
            .map(|s| json!({"reset": reset_menu(s)}))
            .collect()
    });
    if list.is_empty() {
        return Err(RobotError::new(
            StatusCode::NOT_FOUND,
            "RESET_NOT_AVAILABLE",
            "No server with reset option found",
        ));
    }
    json(StatusCode::OK, json!(list))
}

fn resettable<'a>(w: &'a mut super::world::World, id: &str) -> Result<&'a mut Server, RobotError> {
    let server = w.server_mut(id).ok_or_else(RobotError::server_not_found)?;
    if !server.seed.reset {
        return Err(RobotError::new(
            StatusCode::NOT_FOUND,
            "RESET_NOT_AVAILABLE",
            "The server has no reset option",
        ));
    }
    Ok(server)
}

/// `GET /reset/{id}`.
pub(crate) async fn get_reset(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
) -> Reply {
    let body = r.world(&account, |w| resettable(w, &id).map(|s| reset_menu(s)))?;
    json(StatusCode::OK, json!({"reset": body}))
}

/// `POST /reset/{id}` `type=sw|hw|man|power|power_long`.
pub(crate) async fn reset(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
    form: Form,
) -> Reply {
    let now = r.core.now();
    let manual = TimeDelta::from_std(r.core.timings.create).unwrap_or(TimeDelta::MAX);
    let body = r.world(&account, |w| {
        let server = resettable(w, &id)?;
        let kind = form
            .get("type")
            .ok_or_else(|| RobotError::invalid_input(&["type"], &[]))?
            .to_string();
        let action = match ResetKind::parse(&kind) {
            Some(action) if server.seed.reset_types.contains(&kind) => action,
            Some(_) | None => return Err(RobotError::invalid_input(&[], &["type"])),
        };
        let manual_pending = server.manual_until.is_some_and(|t| t > now);
        if action == ResetKind::Man && manual_pending {
            return Err(RobotError::new(
                StatusCode::CONFLICT,
                "RESET_MANUAL_ACTIVE",
                "There is already a running manual reset",
            ));
        }
        if r.core.faults().take_action_failure() {
            return Err(RobotError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "RESET_FAILED",
                "Resetting failed due to an internal error",
            ));
        }
        match action {
            ResetKind::Sw | ResetKind::Hw => {
                if server.powered {
                    server.boot();
                }
            }
            ResetKind::Power => {
                if server.powered {
                    server.powered = false;
                    server.booted_rescue = false;
                } else {
                    server.boot();
                }
            }
            ResetKind::PowerLong => {
                server.powered = false;
                server.booted_rescue = false;
            }
            ResetKind::Man => {
                server.manual_until = now.checked_add_signed(manual);
                server.boot();
            }
        }
        let mut m = server.head();
        m.insert("type".into(), json!(kind));
        Ok(Value::Object(m))
    })?;
    json(StatusCode::OK, json!({"reset": body}))
}

/// The reset types Robot knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResetKind {
    Sw,
    Hw,
    Power,
    PowerLong,
    Man,
}

impl ResetKind {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "sw" => Some(ResetKind::Sw),
            "hw" => Some(ResetKind::Hw),
            "power" => Some(ResetKind::Power),
            "power_long" => Some(ResetKind::PowerLong),
            "man" => Some(ResetKind::Man),
            _ => None,
        }
    }
}

fn rescue_object(s: &Server, password: Option<&str>) -> Value {
    let mut m = s.head();
    match &s.rescue {
        None => {
            m.insert("os".into(), json!(SEED.rescue_os_choices));
            m.insert("arch".into(), json!(SEED.rescue_arch_choices));
            m.insert("active".into(), json!(false));
            m.insert("password".into(), Value::Null);
            m.insert("authorized_key".into(), json!([]));
        }
        Some(rescue) => {
            m.insert("os".into(), json!(rescue.os));
            m.insert("arch".into(), json!(rescue.arch));
            m.insert("active".into(), json!(true));
            m.insert("password".into(), json!(password));
            let keys: Vec<Value> = rescue
                .keys
                .iter()
                .map(|k| {
                    json!({"key": {"name": k.name, "fingerprint": k.fingerprint,
                                   "type": k.kind, "size": k.size}})
                })
                .collect();
            m.insert("authorized_key".into(), json!(keys));
        }
    }
    m.insert("host_key".into(), json!([]));
    Value::Object(m)
}

fn rescue_server<'a>(
    w: &'a mut super::world::World,
    id: &str,
) -> Result<&'a mut Server, RobotError> {
    let server = w.server_mut(id).ok_or_else(RobotError::server_not_found)?;
    if !server.seed.rescue {
        return Err(RobotError::new(
            StatusCode::NOT_FOUND,
            "BOOT_NOT_AVAILABLE",
            "No boot configuration available for this server",
        ));
    }
    Ok(server)
}

/// `GET /boot/{id}`: every boot configuration; the ones a server lacks are null.
pub(crate) async fn get_boot(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
) -> Reply {
    let body = r.world(&account, |w| {
        let s = w.server_mut(&id).ok_or_else(RobotError::server_not_found)?;
        let inactive = |extra: Value| {
            let mut m = s.head();
            if let Value::Object(e) = extra {
                m.extend(e);
            }
            m.insert("active".into(), json!(false));
            Value::Object(m)
        };
        let linux = inactive(json!({
            "dist": ["Debian 12 base", "Ubuntu 24.04 LTS base", "Rocky Linux 9 base"],
            "arch": [64], "lang": ["en"], "password": null,
            "authorized_key": [], "host_key": [],
        }));
        let vnc = s.seed.vnc.then(|| {
            inactive(json!({"dist": ["Debian 12", "Ubuntu 24.04"], "arch": [64],
                             "lang": ["en_US"], "password": null}))
        });
        let windows = s
            .seed
            .windows
            .then(|| inactive(json!({"dist": ["standard"], "lang": ["en"], "password": null})));
        let body = json!({
            "rescue": s.seed.rescue.then(|| rescue_object(s, None)),
            "linux": linux,
            "vnc": vnc,
            "windows": windows,
            "plesk": Value::Null,
            "cpanel": Value::Null,
        });
        Ok::<_, RobotError>((body, s.booted_rescue))
    })?;
    boot_answer(json!({"boot": body.0}), body.1)
}

/// `GET /boot/{id}/rescue`: the menu when inactive, the values in force when active (the
/// password is never shown again after activation).
pub(crate) async fn get_rescue(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
) -> Reply {
    let (body, booted) = r.world(&account, |w| {
        rescue_server(w, &id).map(|s| (rescue_object(s, None), s.booted_rescue))
    })?;
    boot_answer(json!({"rescue": body}), booted)
}

/// `POST /boot/{id}/rescue` `os=linux[&arch=64][&authorized_key[]=<fingerprint>…]`.
pub(crate) async fn activate_rescue(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
    form: Form,
) -> Reply {
    let body = r.world(&account, |w| {
        let keys = form.list("authorized_key");
        let mut chosen = Vec::new();
        let mut unknown = false;
        for fp in &keys {
            match w.keys.get(fp) {
                Some(k) => chosen.push(k.clone()),
                None => unknown = true,
            }
        }
        let server = rescue_server(w, &id)?;
        if server.rescue.is_some() {
            return Err(RobotError::new(
                StatusCode::CONFLICT,
                "BOOT_ALREADY_ENABLED",
                "A boot option is already active",
            ));
        }
        let os = form
            .get("os")
            .ok_or_else(|| RobotError::invalid_input(&["os"], &[]))?
            .to_string();
        if !SEED.rescue_os_choices.contains(&os) {
            return Err(RobotError::invalid_input(&[], &["os"]));
        }
        let arch = match form.get("arch") {
            None => 64,
            Some(a) => a
                .parse::<u32>()
                .ok()
                .filter(|a| SEED.rescue_arch_choices.contains(a))
                .ok_or_else(|| RobotError::invalid_input(&[], &["arch"]))?,
        };
        if unknown {
            return Err(RobotError::invalid_input(&[], &["authorized_key"]));
        }
        let password: String = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(12)
            .map(char::from)
            .collect();
        server.rescue = Some(Rescue {
            os,
            arch,
            keys: chosen,
        });
        Ok((rescue_object(server, Some(&password)), server.booted_rescue))
    })?;
    boot_answer(json!({"rescue": body.0}), body.1)
}

/// `DELETE /boot/{id}/rescue`: back to the inactive menu.
pub(crate) async fn deactivate_rescue(
    State(r): State<Arc<Robot>>,
    Login(account): Login,
    Segment(id): Segment,
) -> Reply {
    let body = r.world(&account, |w| {
        let server = rescue_server(w, &id)?;
        server.rescue = None;
        Ok::<_, RobotError>((rescue_object(server, None), server.booted_rescue))
    })?;
    boot_answer(json!({"rescue": body.0}), body.1)
}
