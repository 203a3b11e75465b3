//! Events: the `orc events` table of a project's events, oldest first.

use orc_zone_api_types::views::EventView;

use orc_zone_apps::logs::format_time;
use orc_zone_model::Timestamp;

use super::{client, print_json, project_path, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

fn events_table(events: &[EventView]) -> String {
    let mut t = Table::new(&["TIME", "KIND", "NODE", "WORDS"]);
    for e in events {
        t.row(vec![
            format_time(Timestamp(e.at)),
            e.kind.clone(),
            e.node_id.clone().unwrap_or_else(|| "-".to_string()),
            e.words.clone(),
        ]);
    }
    t.render()
}

/// `orc events ORG/PROJECT [--pool P] [--limit N]`.
pub async fn list(
    conn: &ConnArgs,
    project: &str,
    pool: Option<&str>,
    limit: u32,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_path(project)?;
    let mut url = format!("{}/events?limit={limit}", project_url(&org, &project));
    if let Some(pool) = pool {
        url.push_str(&format!("&pool={}", segment(pool)));
    }
    let list: Vec<EventView> = client.get(&url).await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("No events.");
        return Ok(());
    }
    print!("{}", events_table(&list));
    Ok(())
}

#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone_api_types::views::{MoneyView, UsageLineView, UsageView};

    use crate::commands::check_golden;
    use crate::commands::usage::usage_text;

    #[test]
    fn events_and_usage() {
        let event = EventView {
            id: "e-00000000000q".into(),
            at: 1_795_975_200_000,
            kind: "node.parked".into(),
            words: "no capacity in Europe Central right now".into(),
            provider_id: None,
            pool_id: Some("pl-000000000009".into()),
            node_id: Some("n-00000000000n".into()),
        };
        let usage = UsageView {
            month: "2026-11".into(),
            lines: vec![UsageLineView {
                id: "ul-00000000000r".into(),
                month: "2026-11".into(),
                pool_id: Some("pl-000000000009".into()),
                node_id: Some("n-00000000000k".into()),
                description: "2 vCPU · 4 GiB · eu-central".into(),
                hours: "12".into(),
                rate: MoneyView {
                    amount: "0.0079".into(),
                    currency: "USD".into(),
                    period: "hour".into(),
                },
                amount: "0.0948".into(),
            }],
            totals: [("USD".to_string(), "0.0948".to_string())].into(),
        };
        check_golden(
            "events-usage",
            &format!("{}\n{}", events_table(&[event]), usage_text(&usage)),
        );
    }
}
