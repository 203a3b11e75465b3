//! Logs: `orc logs`, the kept log lines of an app pool's slots, one line each.

use anyhow::Context;
use orc_zone_api_types::views::LogLineView;

use orc_common::time::format_time;
use orc_zone_model::Timestamp;

use super::{client, object_path, print_json, project_url};
use crate::ConnArgs;
use crate::client::segment;

/// `orc logs POOL [--slot N] [--level L]`.
pub async fn show(
    conn: &ConnArgs,
    pool: &str,
    slot: Option<u32>,
    level: &str,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let mut url = format!(
        "{}/pools/{}/logs?level={}",
        project_url(&org, &project),
        segment(&name),
        segment(level)
    );
    if let Some(slot) = slot {
        url.push_str(&format!("&slot={slot}"));
    }
    let lines: Vec<LogLineView> = client
        .get(&url)
        .await
        .with_context(|| format!("reading the logs of {org}/{project}/{name}"))?;
    if conn.json {
        return print_json(&lines);
    }
    for line in &lines {
        outln!("{}", log_line_text(line));
    }
    Ok(())
}

/// One log line for people: UTC time, slot, level, message.
fn log_line_text(line: &LogLineView) -> String {
    format!(
        "{} slot {} {:<5} {}",
        format_time(Timestamp(line.at)),
        line.slot,
        line.level.to_uppercase(),
        orc_common::text::printable(&line.message)
    )
}

#[cfg(test)]
mod golden {
    use super::*;
    use crate::commands::check_golden;

    #[test]
    fn log_lines() {
        let line = |at: i64, slot: u32, level: &str, message: &str| LogLineView {
            at,
            slot,
            level: level.into(),
            message: message.into(),
        };
        let text: String = [
            line(1_795_975_200_123, 0, "info", "replica 0 serves"),
            line(1_795_975_201_000, 1, "debug", "replica 1 waits"),
            line(1_795_975_202_500, 0, "warn", "catalog read slow"),
        ]
        .iter()
        .map(|l| log_line_text(l) + "\n")
        .collect();
        check_golden("logs", &text);
    }
}
