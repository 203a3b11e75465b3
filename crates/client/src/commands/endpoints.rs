//! `orc endpoints POOL`: where a pool's endpoints are reached: each http endpoint's name at
//! the access edge (any slot, then each slot) and, for zone operators, where each slot
//! listens.

use anyhow::Context;
use orc_zone_api_types::views::PoolEndpointsView;

use super::{client, object_path, print_json, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

/// `orc endpoints POOL`.
pub async fn show(conn: &ConnArgs, pool: &str) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let url = format!(
        "{}/pools/{}/endpoints",
        project_url(&org, &project),
        segment(&name)
    );
    let view: PoolEndpointsView = client
        .get(&url)
        .await
        .with_context(|| format!("reading the endpoints of {org}/{project}/{name}"))?;
    if conn.json {
        return print_json(&view);
    }
    out!("{}", endpoints_table(&view));
    Ok(())
}

/// The table people read: one line per endpoint, then one per slot of each http endpoint.
fn endpoints_table(view: &PoolEndpointsView) -> String {
    if view.endpoints.is_empty() {
        return format!("Pool {} declares no endpoint.\n", view.pool);
    }
    let mut t = Table::new(&["ENDPOINT", "PROTOCOL", "SLOT", "URL", "ADDRESS"]);
    for e in &view.endpoints {
        let url = match (&e.url, e.protocol.as_str()) {
            (Some(url), _) => url.clone(),
            (None, "http") => "- (the zone runs no edge)".to_string(),
            (None, _) => format!("- (port {} on each node)", e.port),
        };
        t.row(vec![
            e.name.clone(),
            e.protocol.clone(),
            "any".to_string(),
            url,
            String::new(),
        ]);
        for s in &e.slots {
            t.row(vec![
                e.name.clone(),
                e.protocol.clone(),
                s.slot.to_string(),
                s.url.clone().unwrap_or_else(|| "-".to_string()),
                s.address.clone().unwrap_or_default(),
            ]);
        }
    }
    t.render()
}

#[cfg(test)]
mod golden {
    use super::*;
    use crate::commands::check_golden;
    use orc_zone_api_types::views::{EndpointAccessView, SlotEndpointView};

    #[test]
    fn endpoints() {
        let slot = |slot: u32, address: Option<&str>| SlotEndpointView {
            slot,
            url: Some(format!(
                "https://sys--partner-{slot}.sys.orc.localhost:7443/"
            )),
            address: address.map(str::to_string),
        };
        let view = PoolEndpointsView {
            pool: "sys/sys/partner".into(),
            endpoints: vec![
                EndpointAccessView {
                    name: "admin".into(),
                    protocol: "http".into(),
                    port: 8080,
                    url: Some("https://sys--partner.sys.orc.localhost:7443/".into()),
                    slots: vec![slot(0, Some("127.0.0.1:41234")), slot(1, None)],
                },
                EndpointAccessView {
                    name: "metrics".into(),
                    protocol: "tcp".into(),
                    port: 9100,
                    url: None,
                    slots: vec![],
                },
            ],
        };
        check_golden("endpoints", &endpoints_table(&view));
    }
}
