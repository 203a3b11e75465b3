//! Events: `orc events`, a project's newest events as a table (oldest of them first, so the
//! latest is at the bottom), optionally only those of the last `--since`, and `--follow` to
//! keep printing new ones as they happen.

use std::time::Duration;

use anyhow::bail;
use orc_zone_api_types::views::EventView;

use orc_common::time::format_time;
use orc_zone_model::Timestamp;

use super::{client, print_json, project_path, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

/// How often `--follow` asks for new events.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

fn row(e: &EventView) -> Vec<String> {
    let words = match (e.repeats, e.last_at) {
        (0 | 1, _) => e.words.clone(),
        (n, Some(last)) => format!(
            "{} ({n} times, last {})",
            e.words,
            format_time(Timestamp(last))
        ),
        (n, None) => format!("{} ({n} times)", e.words),
    };
    vec![
        format_time(Timestamp(e.at)),
        e.kind.clone(),
        e.pool.clone().unwrap_or_else(|| "-".to_string()),
        e.node_id.clone().unwrap_or_else(|| "-".to_string()),
        words,
    ]
}

fn events_table(events: &[EventView]) -> String {
    let mut t = Table::new(&["TIME", "KIND", "POOL", "NODE", "WORDS"]);
    for e in events {
        t.row(row(e));
    }
    t.render()
}

/// `30s`, `10m`, `2h` or `1d`.
pub fn parse_since(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let Ok(number) = number.parse::<u64>() else {
        bail!("--since {text:?} is not a duration such as 30s, 10m, 2h or 1d");
    };
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("--since {text:?} is not a duration such as 30s, 10m, 2h or 1d"),
    };
    Ok(Duration::from_secs(number.saturating_mul(seconds)))
}

/// What `orc events` shows.
#[derive(Debug, Clone)]
pub struct EventsArgs<'a> {
    pub project: &'a str,
    pub pool: Option<&'a str>,
    pub limit: u32,
    pub since: Option<Duration>,
    pub follow: bool,
}

/// `orc events ORG/PROJECT [--pool P] [--limit N] [--since D] [--follow]`.
pub async fn list(conn: &ConnArgs, args: EventsArgs<'_>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_path(args.project)?;
    let mut base = format!("{}/events?limit=", project_url(&org, &project));
    let pool = args
        .pool
        .map(|p| format!("&pool={}", segment(p)))
        .unwrap_or_default();
    base.push_str(&args.limit.to_string());
    let mut list: Vec<EventView> = client.get(&format!("{base}&newest=true{pool}")).await?;
    if let Some(since) = args.since {
        let from = Timestamp::now().millis() - since.as_millis() as i64;
        list.retain(|e| e.at >= from);
    }
    if conn.json {
        print_json(&list)?;
    } else if list.is_empty() && !args.follow {
        outln!("No events.");
    } else if !list.is_empty() {
        out!("{}", events_table(&list));
    }
    if !args.follow {
        return Ok(());
    }
    let mut last = list.last().map(|e| e.id.clone());
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let url = match &last {
            Some(id) => format!(
                "{}/events?limit=1000&after={}{pool}",
                project_url(&org, &project),
                segment(id)
            ),
            None => format!("{base}&newest=true{pool}"),
        };
        let new: Vec<EventView> = client.get(&url).await?;
        for e in &new {
            if conn.json {
                outln!("{}", serde_json::to_string(e)?);
            } else {
                outln!("{}", row(e).join("  "));
            }
        }
        if let Some(e) = new.last() {
            last = Some(e.id.clone());
        }
    }
}

#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone_api_types::views::{MoneyView, UsageLineView, UsageView};

    use crate::commands::check_golden;
    use crate::commands::usage::usage_text;

    #[test]
    fn since_reads_a_duration_and_names_a_bad_one() {
        assert_eq!(parse_since("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_since("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_since("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_since("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(
            parse_since("ten").unwrap_err().to_string(),
            "--since \"ten\" is not a duration such as 30s, 10m, 2h or 1d"
        );
        assert!(parse_since("5y").is_err());
    }

    #[test]
    fn events_and_usage() {
        let event = EventView {
            id: "e-00000000000q".into(),
            at: 1_795_975_200_000,
            kind: "node.parked".into(),
            words: "no capacity in Europe Central right now".into(),
            provider_id: None,
            pool_id: Some("pl-000000000009".into()),
            pool: Some("web".into()),
            node_id: Some("n-00000000000n".into()),
            repeats: 3,
            last_at: Some(1_795_975_320_000),
        };
        let usage = UsageView {
            month: "2026-11".into(),
            lines: vec![
                UsageLineView {
                    id: "ul-00000000000r".into(),
                    month: "2026-11".into(),
                    pool_id: Some("pl-000000000009".into()),
                    pool: Some("web".into()),
                    node_id: Some("n-00000000000k".into()),
                    description: "2 vCPU · 4 GiB · eu-central".into(),
                    hours: "12".into(),
                    rate: MoneyView {
                        amount: "0.0079".into(),
                        currency: "USD".into(),
                        period: "hour".into(),
                    },
                    amount: "0.0948".into(),
                    accruing: false,
                },
                UsageLineView {
                    id: "ul-00000000000s".into(),
                    month: "2026-11".into(),
                    pool_id: Some("pl-00000000000a".into()),
                    pool: None,
                    node_id: Some("n-00000000000m".into()),
                    description: "2 vCPU · 4 GiB · eu-central".into(),
                    hours: "0.2513888888888888888888888889".into(),
                    rate: MoneyView {
                        amount: "0.0079".into(),
                        currency: "USD".into(),
                        period: "hour".into(),
                    },
                    amount: "0.0019859722222222222222222222".into(),
                    accruing: true,
                },
            ],
            totals: [(
                "USD".to_string(),
                "0.0967859722222222222222222222".to_string(),
            )]
            .into(),
        };
        check_golden(
            "events-usage",
            &format!("{}\n{}", events_table(&[event]), usage_text(&usage)),
        );
    }
}
