//! `POST /_emu/robot/servers`: adds a dedicated server to an account, for tests and demos
//! that need more servers than the seed has. A control route like the others under
//! `/_emu/`: no credentials. Body `{"account": NAME, "server": {…}}` with the server in the
//! seed's shape (`seed/hetzner-robot.json`, `_reset_types` and `_operating_status`
//! included). Answers `201 {"server"}`, `409 SERVER_NUMBER_TAKEN` when the account already
//! has that number, `400 INVALID_INPUT` for a body of another shape.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::Robot;
use super::http::{Reply, RobotError, json};
use super::world::{SeedServer, Server};

#[derive(Deserialize)]
struct AddServer {
    account: String,
    server: SeedServer,
}

/// `POST /_emu/robot/servers`.
pub(crate) async fn add_server(State(r): State<Arc<Robot>>, body: Bytes) -> Reply {
    let add: AddServer = serde_json::from_slice(&body).map_err(|e| {
        RobotError::new(
            StatusCode::BAD_REQUEST,
            "INVALID_INPUT",
            format!("body is not {{\"account\", \"server\"}}: {e}"),
        )
    })?;
    let number = add.server.server_number;
    let summary = r.world(&add.account, |w| {
        if w.servers.iter().any(|s| s.seed.server_number == number) {
            return Err(RobotError::new(
                StatusCode::CONFLICT,
                "SERVER_NUMBER_TAKEN",
                format!("server {number} exists"),
            ));
        }
        let server = Server::from_seed(&add.server);
        let summary = server.summary();
        w.servers.push(server);
        w.servers.sort_by_key(|s| s.seed.server_number);
        Ok(summary)
    })?;
    json(StatusCode::CREATED, json!({"server": summary}))
}
