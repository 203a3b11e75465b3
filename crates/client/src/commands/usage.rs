//! Usage: `orc usage`, a project's invoice lines and totals for a month. Lines of nodes
//! still running count their hours up to now ("so far").

use orc_zone_api_types::views::UsageView;

use super::{client, print_json, project_path, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

pub(super) fn usage_text(usage: &UsageView) -> String {
    let mut t = Table::new(&["POOL", "DESCRIPTION", "NODE", "HOURS", "RATE", "AMOUNT"]);
    for line in &usage.lines {
        let hours = super::money::hours(&line.hours);
        t.row(vec![
            line.pool
                .clone()
                .or_else(|| line.pool_id.as_ref().map(|id| format!("{id} (deleted)")))
                .unwrap_or_else(|| "-".to_string()),
            line.description.clone(),
            line.node_id.clone().unwrap_or_else(|| "-".to_string()),
            if line.accruing {
                format!("{hours} so far")
            } else {
                hours
            },
            super::money::price(&line.rate),
            format!(
                "{} {}",
                super::money::amount(&line.amount, &line.rate.currency),
                line.rate.currency
            ),
        ]);
    }
    let mut out = format!("Usage of {}\n", usage.month);
    if usage.lines.is_empty() {
        out.push_str(
            "No usage: no node of this project ran priced this month. Nodes on a provider \
             without a pricing strategy accrue nothing (`orc providers` shows MARKUP none; \
             its owner sets one with `orc provider pricing`).\n",
        );
        return out;
    }
    out.push_str(&t.render());
    for (currency, total) in &usage.totals {
        out.push_str(&format!(
            "total: {} {currency}\n",
            super::money::amount(total, currency)
        ));
    }
    out
}

/// `orc usage ORG/PROJECT [--month YYYY-MM]`.
pub async fn show(conn: &ConnArgs, project: &str, month: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_path(project)?;
    let mut url = format!("{}/usage", project_url(&org, &project));
    if let Some(month) = month {
        url.push_str(&format!("?month={}", segment(month)));
    }
    let view: UsageView = client.get(&url).await?;
    if conn.json {
        return print_json(&view);
    }
    out!("{}", usage_text(&view));
    Ok(())
}
