//! The fixed scenario whose API traffic is recorded against the emulator and replayed in
//! tests with no server: offers of one location, create, create again (idempotent), list,
//! a graceful restart, a reinstall, delete, and a lookup that finds nothing.

use orc_provider_sdk::machine::{
    MachineError, MachineKey, MachineProvider, MachineSpec, OfferQuery, PowerAction,
};

use crate::machines::HetznerMachines;

/// The key of the scenario's machine.
pub const SCENARIO_KEY: &str = "replay-node-1";

/// What the scenario observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioOutcome {
    /// Offers read for `fsn1`.
    pub offers: usize,
    /// The created machine's server id.
    pub instance_ref: String,
    /// The second create answered the same server.
    pub idempotent: bool,
    /// Managed machines listed after the create.
    pub listed: usize,
    /// The lookup after delete found nothing.
    pub gone: bool,
}

/// Runs the scenario once, request after request.
pub async fn scenario(machines: &HetznerMachines) -> Result<ScenarioOutcome, MachineError> {
    let offers = machines
        .offers(&OfferQuery {
            location: Some("fsn1".into()),
            ..OfferQuery::default()
        })
        .await?;
    let key = MachineKey::new(SCENARIO_KEY).ok_or(MachineError::Config {
        problem: "empty scenario key".into(),
    })?;
    let spec = MachineSpec {
        idempotency_key: key.clone(),
        name: SCENARIO_KEY.into(),
        location: "fsn1".into(),
        plan: "cx23".into(),
        image: "ubuntu-24.04".into(),
        ssh_keys: Vec::new(),
        user_data: None,
    };
    let first = machines.create(&spec).await?;
    let second = machines.create(&spec).await?;
    let listed = machines.list().await?.len();
    machines.power(&key, PowerAction::GracefulRestart).await?;
    machines.reinstall(&key, "debian-12").await?;
    machines.delete(&key).await?;
    let gone = machines.get(&key).await?.is_none();
    Ok(ScenarioOutcome {
        offers: offers.len(),
        idempotent: first.instance_ref == second.instance_ref,
        instance_ref: first.instance_ref,
        listed,
        gone,
    })
}
