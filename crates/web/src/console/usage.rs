//! A project's usage for a month, with the month arithmetic of its navigation.

use super::*;

pub(super) async fn usage_page(cx: &Cx<'_>, current: Current) -> PageResult {
    let now = (cx.console.clock)();
    let month = match cx.query_value("month") {
        Some(m) => m,
        None => crate::pricing::month_of(now).to_string(),
    };
    let usage: UsageView = cx
        .api
        .get(&format!(
            "{}/usage?month={}",
            api_project(&current),
            seg(&month)
        ))
        .await
        .map_err(|e| cx.refused(&e))?;
    let parsed: Month = usage
        .month
        .parse()
        .unwrap_or_else(|_| crate::pricing::month_of(now));
    let pools: Vec<PoolView> = cx
        .api
        .get(&format!("{}/pools", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    // Every pool's nodes at once: one API request each, read side by side.
    let mut reads = tokio::task::JoinSet::new();
    for (index, pool) in pools.iter().enumerate() {
        let api = cx.api.clone();
        let path = format!(
            "{}/pools/{}/nodes?include_ended=true",
            api_project(&current),
            seg(&pool.name)
        );
        reads.spawn(async move { (index, api.get::<Vec<NodeView>>(&path).await) });
    }
    let mut by_pool: Vec<Option<Vec<NodeView>>> = vec![None; pools.len()];
    while let Some(read) = reads.join_next().await {
        let Ok((index, nodes)) = read else {
            return Err(plain_problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Try again shortly",
                "The pools' nodes could not be read.",
            ));
        };
        by_pool[index] = Some(nodes.map_err(|e| cx.refused(&e))?);
    }
    let mut unpriced = Vec::new();
    for (pool, nodes) in pools.iter().zip(by_pool) {
        unpriced.extend(unpriced_nodes(
            pool,
            &nodes.unwrap_or_default(),
            &parsed,
            now,
        ));
    }
    let page = usage_model(usage, unpriced, &parsed);
    let frame = cx.frame(Section::Usage, Some(current.clone())).await?;
    Ok(html(StatusCode::OK, views::usage(&frame, &current, &page)))
}

/// The nodes of a pool that ran unpriced in `month`, with their node-hours in it.
pub fn unpriced_nodes(
    pool: &PoolView,
    nodes: &[NodeView],
    month: &Month,
    now: Timestamp,
) -> Vec<UnpricedNode> {
    let (start, end) = month_bounds(month);
    nodes
        .iter()
        .filter(|n| n.price.is_none() && n.site.is_some())
        .filter_map(|n| {
            let from = n.created_at.max(start);
            let until = n.ended_at.unwrap_or(now.millis()).min(end);
            (until > from).then(|| UnpricedNode {
                pool: pool.name.clone(),
                node: n.id.clone(),
                line: views::price_line(pool),
                hours: views::decimal_text(
                    &(rust_decimal::Decimal::from(until - from)
                        / rust_decimal::Decimal::from(3_600_000))
                    .to_string(),
                ),
                running: n.ended_at.is_none() && n.state == orc_zone_model::NodeState::Running,
            })
        })
        .collect()
}

/// The first and last millisecond (exclusive) of a month, UTC.
pub(super) fn month_bounds(month: &Month) -> (i64, i64) {
    use chrono::{Datelike, NaiveDate};
    let text = month.to_string();
    let first =
        NaiveDate::parse_from_str(&format!("{text}-01"), "%Y-%m-%d").unwrap_or(NaiveDate::MIN);
    let next = if first.month() == 12 {
        NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
    }
    .unwrap_or(NaiveDate::MAX);
    let millis = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0)
            .map_or(0, |t| t.and_utc().timestamp_millis())
    };
    (millis(first), millis(next))
}

pub(super) fn shift_month(month: &Month, by: i32) -> String {
    let text = month.to_string();
    let (y, m) = text.split_once('-').unwrap_or(("1970", "01"));
    let index = y.parse::<i32>().unwrap_or(1970) * 12 + m.parse::<i32>().unwrap_or(1) - 1 + by;
    format!(
        "{:04}-{:02}",
        index.div_euclid(12),
        index.rem_euclid(12) + 1
    )
}

/// The usage page's model: the API's lines, the unpriced nodes, node-hours of both.
pub fn usage_model(usage: UsageView, unpriced: Vec<UnpricedNode>, month: &Month) -> UsagePage {
    use std::str::FromStr;
    let mut hours = rust_decimal::Decimal::ZERO;
    for line in &usage.lines {
        if line.description != crate::pricing::PUBLIC_IPV4_LINE {
            hours += rust_decimal::Decimal::from_str(&line.hours).unwrap_or_default();
        }
    }
    for n in &unpriced {
        hours += rust_decimal::Decimal::from_str(&n.hours).unwrap_or_default();
    }
    UsagePage {
        usage,
        unpriced,
        node_hours: views::decimal_text(&hours.to_string()),
        previous: shift_month(month, -1),
        next: shift_month(month, 1),
    }
}
