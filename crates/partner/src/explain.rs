//! The operator's view of a quote: a deterministic plain-text table of every candidate, and
//! the JSON form of the whole outcome (`orc-prov-partner quote --json`).
//!
//! This is operator detail: it names clouds, locations, plans and images freely. Nothing here
//! may reach a tenant; tenant words come only from [`crate::words`].

use std::fmt::Write as _;

use crate::quote::{CandidatePrice, Decision, Purpose, QuoteOutcome, Verdict};

/// The outcome as pretty JSON.
pub fn to_json(outcome: &QuoteOutcome) -> String {
    serde_json::to_string_pretty(outcome).unwrap_or_default()
}

fn account_cell(price: &Option<CandidatePrice>) -> String {
    price
        .as_ref()
        .map_or("-".to_string(), |p| p.account_monthly.to_string())
}

fn rate_cell(price: &Option<CandidatePrice>) -> String {
    match price {
        None => "-".to_string(),
        Some(p) => match p.exchange_rate {
            Some(rate) => rate.normalize().to_string(),
            None => "none".to_string(),
        },
    }
}

fn usd_cell(price: &Option<CandidatePrice>) -> String {
    match price {
        None => "-".to_string(),
        Some(p) => match &p.usd_monthly {
            Some(m) => m.amount.round_dp(4).normalize().to_string(),
            None => format!("unpriced (no rate for {})", p.account_monthly.currency),
        },
    }
}

/// Renders the outcome as a table for operators.
pub fn render_table(outcome: &QuoteOutcome) -> String {
    let mut out = String::new();
    let purpose = match outcome.purpose {
        Purpose::Tenant => "tenant node",
        Purpose::Gateway => "site gateway",
    };
    let title = outcome
        .class_title
        .as_deref()
        .map_or("not in the region map".to_string(), |t| format!("{t:?}"));
    let (shape, os) = match outcome.purpose {
        Purpose::Tenant => (outcome.shape.to_string(), format!("os {}", outcome.os)),
        Purpose::Gateway => (
            format!("at least {}", outcome.shape),
            format!("gateway image ({})", crate::maps::GATEWAY_OS_TITLE),
        ),
    };
    let _ = writeln!(
        out,
        "quote for {purpose} {}: {shape}, {os}, class {} ({title})",
        outcome.node, outcome.class
    );
    if let Some(pin) = &outcome.pinned_site {
        let _ = writeln!(out, "pinned to site {pin}");
    }
    let header = [
        "#",
        "site",
        "cloud",
        "location",
        "plan",
        "image",
        "account/month",
        "rate",
        "USD/month",
        "verdict",
    ];
    let mut rows: Vec<[String; 10]> = Vec::new();
    for c in &outcome.candidates {
        let verdict = match &c.verdict {
            Verdict::Winner => "WINNER".to_string(),
            Verdict::Eligible => "eligible, ranked lower".to_string(),
            Verdict::Excluded { exclusion } => {
                format!(
                    "excluded ({}): {}",
                    exclusion.category(),
                    exclusion.detail(c.cloud)
                )
            }
        };
        rows.push([
            (c.order + 1).to_string(),
            c.site.to_string(),
            c.cloud.to_string(),
            c.location.to_string(),
            c.plan.as_ref().map_or("-".to_string(), ToString::to_string),
            c.image
                .as_ref()
                .map_or("-".to_string(), |i| format!("{} {}", i.id, i.title)),
            account_cell(&c.price),
            rate_cell(&c.price),
            usd_cell(&c.price),
            verdict,
        ]);
    }
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let pad = w - cell.chars().count();
                l.push_str(cell);
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&header.map(ToString::to_string)));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
    match &outcome.decision {
        Decision::Offer(offer) => {
            let usd = offer
                .price
                .usd_monthly
                .as_ref()
                .map_or("unpriced".to_string(), |m| {
                    format!("{} USD/month", m.amount.round_dp(4).normalize())
                });
            let _ = writeln!(
                out,
                "offer: site {} ({}:{}, plan {}, image {}) at {usd}; tenant sees {:?}",
                offer.site,
                offer.cloud,
                offer.location,
                offer.plan,
                offer.image.id,
                offer.tenant_line
            );
        }
        Decision::Refusal(refusal) => {
            let _ = writeln!(
                out,
                "refusal: {}; tenant sees {:?}",
                refusal.kind.as_str(),
                refusal.words
            );
        }
    }
    out
}
