//! Hetzner Robot webservice client (dedicated servers).
//!
//! Robot differs from the cloud APIs: HTTP basic auth with a webservice user, no version
//! prefix, form-encoded request bodies (arrays as repeated `name[]=`), every object wrapped
//! in a one-key envelope, rate limits per endpoint per hour reported as `403
//! RATE_LIMIT_EXCEEDED`, and an empty key list reported as `404 NOT_FOUND`.

mod types;

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;

pub use types::*;

use crate::counters::RequestCounters;
use crate::error::{CloudApi, CloudError};
use crate::ids::{RobotKeyFingerprint, RobotServerNumber};
use crate::ratelimit::{AccountLimiter, RateQuota};
use crate::secret::Secret;
use crate::transport::{Auth, Call, ClientOptions, Transport, absent_as_none};

/// The public Robot endpoint.
pub const ROBOT_DEFAULT_URL: &str = "https://robot-ws.your-server.de";

/// How to reach one Robot account.
#[derive(Debug, Clone)]
pub struct RobotConfig {
    /// `https://robot-ws.your-server.de` or an emulator's `http://ADDR`.
    pub base_url: String,
    /// The webservice user (often `#ws+…`).
    pub user: String,
    pub password: Secret,
    pub options: ClientOptions,
    /// Client-side budget per endpoint.
    pub quota: RateQuota,
}

impl RobotConfig {
    /// The public endpoint with default options.
    pub fn new(user: impl Into<String>, password: impl Into<Secret>) -> Self {
        RobotConfig {
            base_url: ROBOT_DEFAULT_URL.to_string(),
            user: user.into(),
            password: password.into(),
            options: ClientOptions::default(),
            quota: RateQuota::ROBOT,
        }
    }

    /// Another endpoint (an emulator, a proxy).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }
}

/// A Robot client for one account. Clones share the rate limits and counters.
#[derive(Debug, Clone)]
pub struct RobotClient {
    transport: Arc<Transport>,
}

#[derive(Deserialize)]
struct ServerEnvelope {
    server: RobotServer,
}

#[derive(Deserialize)]
struct ResetOptionsEnvelope {
    reset: ResetOptions,
}

#[derive(Deserialize)]
struct ResetDoneEnvelope {
    reset: ResetDone,
}

#[derive(Deserialize)]
struct RescueEnvelope {
    rescue: Rescue,
}

#[derive(Deserialize)]
struct KeyEnvelope {
    key: RobotKey,
}

#[derive(Deserialize)]
struct RdnsEnvelope {
    rdns: Rdns,
}

impl RobotClient {
    /// Builds a client; fails only on an unusable base URL.
    pub fn new(config: RobotConfig) -> Result<Self, CloudError> {
        let transport = Transport::new(
            CloudApi::Robot,
            &config.base_url,
            Auth::Basic {
                user: config.user,
                password: config.password,
            },
            AccountLimiter::per_endpoint(config.quota),
            config.options,
        )?;
        Ok(RobotClient {
            transport: Arc::new(transport),
        })
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.transport.base_url()
    }

    /// Requests sent so far, per operation (shared by clones).
    pub fn counters(&self) -> &RequestCounters {
        self.transport.counters()
    }

    /// A snapshot of [`RobotClient::counters`].
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.transport.counters().snapshot()
    }

    async fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T, CloudError> {
        self.transport.json(&call).await
    }

    /// Every dedicated server of the account.
    pub async fn list_servers(&self) -> Result<Vec<RobotServer>, CloudError> {
        let listed: Result<Vec<ServerEnvelope>, _> =
            self.json(Call::get("robot.servers.list", "/server")).await;
        match listed {
            Ok(servers) => Ok(servers.into_iter().map(|s| s.server).collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The server with its capability flags, or `None`.
    pub async fn get_server(
        &self,
        number: RobotServerNumber,
    ) -> Result<Option<RobotServer>, CloudError> {
        let found: Result<ServerEnvelope, _> = self
            .json(Call::get("robot.servers.get", format!("/server/{number}")))
            .await;
        absent_as_none(found.map(|s| s.server))
    }

    /// Renames a server.
    pub async fn set_server_name(
        &self,
        number: RobotServerNumber,
        name: &str,
    ) -> Result<RobotServer, CloudError> {
        let call = Call::new(
            "robot.servers.set_name",
            Method::POST,
            format!("/server/{number}"),
        )
        .form(vec![("server_name".into(), name.into())]);
        let renamed: ServerEnvelope = self.json(call).await?;
        Ok(renamed.server)
    }

    /// The resets a server offers, or `None` when it has none (or does not exist).
    pub async fn reset_options(
        &self,
        number: RobotServerNumber,
    ) -> Result<Option<ResetOptions>, CloudError> {
        let found: Result<ResetOptionsEnvelope, _> = self
            .json(Call::get("robot.reset.options", format!("/reset/{number}")))
            .await;
        absent_as_none(found.map(|r| r.reset))
    }

    /// Resets a server.
    pub async fn reset(
        &self,
        number: RobotServerNumber,
        kind: ResetType,
    ) -> Result<ResetDone, CloudError> {
        let call = Call::new(
            "robot.reset.execute",
            Method::POST,
            format!("/reset/{number}"),
        )
        .form(vec![("type".into(), kind.as_str().into())]);
        let done: ResetDoneEnvelope = self.json(call).await?;
        Ok(done.reset)
    }

    /// The rescue system state, or `None` when the server does not exist.
    pub async fn rescue(&self, number: RobotServerNumber) -> Result<Option<Rescue>, CloudError> {
        let found: Result<RescueEnvelope, _> = self
            .json(Call::get(
                "robot.rescue.get",
                format!("/boot/{number}/rescue"),
            ))
            .await;
        absent_as_none(found.map(|r| r.rescue))
    }

    /// Activates the rescue system for the next boot (follow with a reset); the answer
    /// holds the root password, the only time it is shown.
    pub async fn activate_rescue(
        &self,
        number: RobotServerNumber,
        os: &str,
        keys: &[RobotKeyFingerprint],
    ) -> Result<Rescue, CloudError> {
        let mut form = vec![("os".to_string(), os.to_string())];
        form.extend(
            keys.iter()
                .map(|k| ("authorized_key[]".to_string(), k.to_string())),
        );
        let call = Call::new(
            "robot.rescue.activate",
            Method::POST,
            format!("/boot/{number}/rescue"),
        )
        .form(form);
        let active: RescueEnvelope = self.json(call).await?;
        Ok(active.rescue)
    }

    /// Deactivates the rescue system.
    pub async fn deactivate_rescue(&self, number: RobotServerNumber) -> Result<Rescue, CloudError> {
        let call = Call::new(
            "robot.rescue.deactivate",
            Method::DELETE,
            format!("/boot/{number}/rescue"),
        );
        let inactive: RescueEnvelope = self.json(call).await?;
        Ok(inactive.rescue)
    }

    /// Every stored SSH key (Robot answers 404 when there is none: an empty list here).
    pub async fn list_keys(&self) -> Result<Vec<RobotKey>, CloudError> {
        let listed: Result<Vec<KeyEnvelope>, _> =
            self.json(Call::get("robot.keys.list", "/key")).await;
        match listed {
            Ok(keys) => Ok(keys.into_iter().map(|k| k.key).collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Stores an SSH public key (OpenSSH format).
    pub async fn create_key(&self, name: &str, data: &str) -> Result<RobotKey, CloudError> {
        let call = Call::new("robot.keys.create", Method::POST, "/key").form(vec![
            ("name".into(), name.into()),
            ("data".into(), data.into()),
        ]);
        let created: KeyEnvelope = self.json(call).await?;
        Ok(created.key)
    }

    /// Deletes an SSH key.
    pub async fn delete_key(&self, fingerprint: &RobotKeyFingerprint) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "robot.keys.delete",
                Method::DELETE,
                format!("/key/{fingerprint}"),
            ))
            .await
    }

    /// The reverse DNS entry of `ip`, or `None`.
    pub async fn get_rdns(&self, ip: &str) -> Result<Option<Rdns>, CloudError> {
        let found: Result<RdnsEnvelope, _> = self
            .json(Call::get("robot.rdns.get", format!("/rdns/{ip}")))
            .await;
        absent_as_none(found.map(|r| r.rdns))
    }

    /// Creates the reverse DNS entry of `ip` (`PUT`; fails if one exists).
    pub async fn create_rdns(&self, ip: &str, ptr: &str) -> Result<Rdns, CloudError> {
        let call = Call::new("robot.rdns.create", Method::PUT, format!("/rdns/{ip}"))
            .form(vec![("ptr".into(), ptr.into())]);
        let created: RdnsEnvelope = self.json(call).await?;
        Ok(created.rdns)
    }

    /// Updates the reverse DNS entry of `ip` (`POST`).
    pub async fn update_rdns(&self, ip: &str, ptr: &str) -> Result<Rdns, CloudError> {
        let call = Call::new("robot.rdns.update", Method::POST, format!("/rdns/{ip}"))
            .form(vec![("ptr".into(), ptr.into())]);
        let updated: RdnsEnvelope = self.json(call).await?;
        Ok(updated.rdns)
    }

    /// Deletes the reverse DNS entry of `ip`.
    pub async fn delete_rdns(&self, ip: &str) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "robot.rdns.delete",
                Method::DELETE,
                format!("/rdns/{ip}"),
            ))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_debug_output_has_no_password() {
        let client = RobotClient::new(RobotConfig::new("#ws+demo", "pa55word")).unwrap();
        let debug = format!("{client:?}");
        assert!(!debug.contains("pa55word"), "{debug}");
        assert!(debug.contains("#ws+demo"));
    }
}
