//! Nodes: the `orc nodes` table of a pool's nodes with their state, site, price and
//! addresses.

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

fn nodes_table(nodes: &[NodeView]) -> String {
    let mut t = Table::new(&[
        "SLOT",
        "NODE",
        "STATE",
        "SITE",
        "PRICE",
        "ADDRESSES",
        "WORDS",
    ]);
    for n in nodes {
        t.row(vec![
            n.slot.to_string(),
            n.id.clone(),
            n.state.clone(),
            n.site.clone().unwrap_or_else(|| "-".to_string()),
            price_text(n),
            if n.addresses.is_empty() {
                "-".to_string()
            } else {
                n.addresses.join(",")
            },
            n.words.clone().unwrap_or_default(),
        ]);
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
mod golden {
    use super::*;
    use orc_zone_api_types::views::MoneyView;

    use crate::commands::check_golden;

    fn node(slot: u32, id: &str, state: &str) -> NodeView {
        NodeView {
            id: id.to_string(),
            slot,
            state: state.to_string(),
            words: None,
            refusal: None,
            site: None,
            addresses: Vec::new(),
            price: None,
            markup: None,
            attempts: 0,
            created_at: 0,
            updated_at: 0,
            ended_at: None,
        }
    }

    #[test]
    fn nodes_table_golden() {
        let mut running = node(0, "n-00000000000k", "running");
        running.site = Some("eu-central-a".into());
        running.addresses = vec!["192.0.2.1".into(), "2001:db8::1".into()];
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
        check_golden("nodes", &nodes_table(&[running, unpriced, parked, pending]));
    }
}
