//! Nodes: the `orc nodes` table of a pool's nodes with their state, site, price,
//! addresses and whether they accept public ingress.

use orc_zone_api_types::views::NodeView;

use super::{client, object_path, print_json, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

fn price_text(n: &NodeView) -> String {
    match &n.price {
        Some(p) => super::money::price(p),
        None => "unpriced".to_string(),
    }
}

fn dash(text: Option<&str>) -> String {
    text.filter(|t| !t.is_empty()).unwrap_or("-").to_string()
}

/// Where the provider put the node (`hetzner fsn1 cx22 hetzner:42`); zone operators only.
fn placed_text(n: &NodeView) -> String {
    match &n.placed {
        Some(p) => [&p.cloud, &p.location, &p.plan, &p.instance]
            .into_iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" "),
        None => "-".to_string(),
    }
}

/// The agent's version, marked when its stream is closed.
fn agent_text(n: &NodeView) -> String {
    match &n.agent {
        Some(agent) if agent.connected => agent.version.clone(),
        Some(agent) => format!("{} (away)", agent.version),
        None => "-".to_string(),
    }
}

fn contact_text(n: &NodeView) -> String {
    n.agent.as_ref().map_or("-".to_string(), |agent| {
        orc_common::time::format_time(orc_common::Timestamp(agent.last_contact))
    })
}

pub(crate) fn nodes_table(nodes: &[NodeView]) -> String {
    // The PLACED column is there when the zone showed where nodes went (to its operators).
    let placed = nodes.iter().any(|n| n.placed.is_some());
    let mut head = vec![
        "SLOT",
        "NODE",
        "STATE",
        "SITE",
        "PRIVATE",
        "GATEWAY",
        "PRICE",
        "PUBLIC",
        "INGRESS",
        "AGENT",
        "LAST CONTACT",
    ];
    if placed {
        head.push("PLACED");
    }
    head.push("WORDS");
    let mut t = Table::new(&head);
    for n in nodes {
        let public: Vec<&str> = n
            .addresses
            .iter()
            .filter(|a| Some(*a) != n.private_address.as_ref())
            .map(String::as_str)
            .collect();
        let mut row = vec![
            n.slot.to_string(),
            n.id.clone(),
            n.shown_state().to_string(),
            dash(n.site.as_deref()),
            dash(n.private_address.as_deref()),
            dash(n.gateway.as_deref()),
            price_text(n),
            if public.is_empty() {
                "-".to_string()
            } else {
                public.join(",")
            },
            if n.ingress { "yes" } else { "-" }.to_string(),
            agent_text(n),
            contact_text(n),
        ];
        if placed {
            row.push(placed_text(n));
        }
        row.push(n.words.clone().unwrap_or_default());
        t.row(row);
    }
    t.render()
}

/// `orc nodes ORG/PROJECT/POOL`.
pub async fn list(conn: &ConnArgs, pool: &str, all: bool) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let nodes: Vec<NodeView> = client
        .get(&format!(
            "{}/pools/{}/nodes{}",
            project_url(&org, &project),
            segment(&name),
            if all { "?include_ended=true" } else { "" }
        ))
        .await?;
    if conn.json {
        return print_json(&nodes);
    }
    if nodes.is_empty() {
        outln!("No nodes.");
        return Ok(());
    }
    out!("{}", nodes_table(&nodes));
    Ok(())
}

#[cfg(test)]
pub(crate) mod golden {
    use super::*;
    use orc_zone_api_types::views::{AgentView, MoneyView, PlacedView};

    use crate::commands::check_golden;

    /// A node in `slot` with nothing reported yet, for the tables' golden tests.
    pub(crate) fn node(slot: u32, id: &str, state: &str) -> NodeView {
        NodeView {
            id: id.to_string(),
            slot,
            state: state.parse().unwrap(),
            words: None,
            refusal: None,
            site: None,
            addresses: Vec::new(),
            private_address: None,
            gateway: None,
            price: None,
            markup: None,
            attempts: 0,
            placed: None,
            created_at: 0,
            updated_at: 0,
            ended_at: None,
            agent: None,
            ingress: false,
        }
    }

    #[test]
    fn nodes_table_golden() {
        let mut running = node(0, "n-00000000000k", "running");
        running.site = Some("eu-central-a".into());
        running.addresses = vec!["192.0.2.1".into(), "2001:db8::1".into(), "10.0.1.5".into()];
        running.private_address = Some("10.0.1.5".into());
        running.gateway = Some("10.0.1.2".into());
        running.price = Some(MoneyView {
            amount: "0.0079".into(),
            currency: "USD".into(),
            period: "hour".into(),
        });
        running.markup = Some("0.15".into());
        let mut unpriced = node(1, "n-00000000000m", "running");
        unpriced.site = Some("eu-central-b".into());
        unpriced.addresses = vec!["192.0.2.2".into()];
        let mut parked = node(2, "n-00000000000n", "parked");
        parked.words = Some("no capacity in Europe Central right now".into());
        parked.refusal = Some("no_capacity".into());
        let pending = node(3, "n-00000000000p", "pending");
        let agent = |state: &str, connected: bool| AgentView {
            state: state.parse().unwrap(),
            connected,
            version: "0.1.0".into(),
            last_contact: 1_767_225_600_000,
            joined_at: 1_767_225_590_000,
            hostname: "web-0".into(),
            desired_generation: 1,
            applied_generation: 1,
            apply_error: None,
            cert_not_after: 1_769_817_600_000,
        };
        let mut ready = running.clone();
        ready.agent = Some(agent("ready", true));
        ready.ingress = true;
        let mut away = unpriced.clone();
        away.agent = Some(agent("ready", false));
        let mut joined = node(4, "n-00000000000q", "running");
        joined.agent = Some(agent("joined", true));
        check_golden(
            "nodes",
            &nodes_table(&[ready, away, parked, pending, joined]),
        );
        running.placed = Some(PlacedView {
            cloud: "hetzner".into(),
            location: "fsn1".into(),
            plan: "cx22".into(),
            instance: "hetzner:42".into(),
        });
        check_golden("nodes-operator", &nodes_table(&[running, unpriced]));
    }
}
