//! What every view of the page shares (navigation, standby banner, footer, style sheet),
//! inside the frame of all of orc's pages ([`orc_common::html`]), and the small formatting
//! helpers the views use for times, money and lists.
//!
//! Every link is relative: the access edge passes paths through unchanged, and the page is
//! reached under several host names (the pool's and each slot's).

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use orc_common::html::Shell;
use rust_decimal::Decimal;

use super::model::{PageRole, PageState};
use crate::ids::Timestamp;

/// The page's style sheet: the shared rules, then the page's own (the reader's light or dark
/// scheme, a wide column, the banner, the state colours and the footer). The content security
/// policy allows exactly this text, by its hash.
pub const STYLE: &str = orc_common::style_sheet!(
    ":root{color-scheme:light dark}\
body{margin:0 auto;max-width:78rem;padding:0 1rem 2rem}\
header{border-bottom:1px solid #8886;margin-bottom:1rem}\
header p{margin:.75rem 0 0}\
nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:.25rem 1.25rem;padding:0;margin:.5rem 0}\
nav a[aria-current=page]{font-weight:700;text-decoration:none}\
table{margin:.5rem 0 1.25rem}\
th,td{border-bottom:1px solid #8886}\
thead th{border-bottom-width:2px}\
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
.banner{border:2px solid #a66a00;border-radius:.3rem;padding:.5rem 1rem;margin:1rem 0}\
.warn{color:#8a4b00;font-weight:600}\
.bad,.error{color:#b00020}\
.good{color:#1b6e20}\
@media (prefers-color-scheme:dark){.warn{color:#ffb74d}.bad,.error{color:#ff8a80}.good{color:#81c784}}\
form{margin:1rem 0}\
textarea{min-height:9rem}\
.error{margin:.2rem 0}\
button{display:block;margin-top:1rem;padding:.3rem 1rem}\
pre{white-space:pre-wrap;background:#8881;padding:.5rem}\
footer{border-top:1px solid #8886;margin-top:2rem;padding-top:.5rem;font-size:.9rem}"
);

/// The six views, in navigation order: (path relative to the page's root, title).
pub const VIEWS: [(&str, &str); 6] = [
    ("./", "Overview"),
    ("config", "Config"),
    ("children", "Children"),
    ("quote", "Quote preview"),
    ("addresses", "Pool addresses"),
    ("validate", "Validate"),
];

/// One view's page in the pages' shared frame ([`Shell`]): navigation, the standby banner
/// where the replica is not serving, and `body`; the footer says which replica made it.
pub fn page(state: &PageState, current: &str, body: Markup) -> String {
    let partner = &state.config.partner_id;
    let title_suffix = format!("partner {partner} · orc");
    Shell {
        title: current,
        title_suffix: &title_suffix,
        style: STYLE,
        scripts: &[],
        header: Some(html! {
            p { "Partner " strong { (partner) } " · " code { (state.replica.resource_uri) } " · read-only" }
            nav aria-label="Views" {
                ul {
                    @for (href, title) in VIEWS {
                        li {
                            a href=(href) aria-current=[(title == current).then_some("page")] { (title) }
                        }
                    }
                }
            }
        }),
        main: html! {
            @if !state.role.reads_clouds() {
                (standby_banner(state))
            }
            h1 { (current) }
            (body)
        },
        footer: Some(html! {
            "Replica " (state.replica.host) ", process " (state.replica.pid) ", slot "
            (state.replica.slot) " · version " (state.replica.version)
            " · page made " (when(state.now))
            ". This page changes nothing; params change only through the partner pool's form."
        }),
    }
    .render()
}

/// The banner of a replica that reads no cloud account.
fn standby_banner(state: &PageState) -> Markup {
    let slot = state.replica.slot;
    html! {
        div.banner role="note" aria-label="Standing by" {
            p {
                strong { "Standing by: this replica reads no cloud account until it is handed work." }
                " It shows the config, the catalogs it has and the quote preview; what needs the cloud accounts is shown by the serving replica."
            }
            p {
                "Open the other slot, " code { "sys--partner-<slot>" } " under the same zone (this one is slot " (slot) ")."
            }
        }
    }
}

/// A standalone page with no navigation: refusals and the closed page.
pub fn bare_page(title: &str, body: Markup) -> String {
    Shell {
        title,
        title_suffix: "partner admin · orc",
        style: STYLE,
        scripts: &[],
        header: None,
        main: html! {
            h1 { (title) }
            (body)
        },
        footer: None,
    }
    .render()
}

/// A time as `2027-01-15 08:00:00 UTC`.
pub fn when(at: Timestamp) -> String {
    DateTime::<Utc>::from_timestamp_millis(at.millis()).map_or_else(
        || format!("unix time {at}"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// A time and how long before `now` it was: `2027-01-15 08:00:00 UTC (4 min ago)`.
pub fn when_ago(at: Timestamp, now: Timestamp) -> String {
    let secs = now.since(at).as_secs();
    let ago = match secs {
        0..60 => format!("{secs} s ago"),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86400),
    };
    format!("{} ({ago})", when(at))
}

/// An amount as shown: at most four decimals, no trailing zeros.
pub fn amount(value: Decimal) -> String {
    value.round_dp(4).normalize().to_string()
}

/// Items joined by `, `, or `fallback` when there are none.
pub fn list_or<I, T>(items: I, fallback: &str) -> String
where
    I: IntoIterator<Item = T>,
    T: std::fmt::Display,
{
    let joined: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    if joined.is_empty() {
        fallback.to_string()
    } else {
        joined.join(", ")
    }
}

/// Whether the page's role lets it show cloud-account data; the notice when it does not.
pub fn needs_serving(role: PageRole, what: &str) -> Option<Markup> {
    (!role.reads_clouds()).then(|| {
        html! {
            p { (what) " needs the cloud accounts, so it is shown by the serving replica." }
        }
    })
}
