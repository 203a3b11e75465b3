//! Quotes: `orc quote`, which asks a provider what a node would cost and where, and prints
//! its offer or refusal.

use clap::Args;
use orc_zone_api_types::views::QuoteView;

use super::shape::ShapeArgs;
use super::{client, print_json, project_of, project_url};
use crate::ConnArgs;
use crate::table::fields;

/// Arguments of `orc quote`. The shared options are worded for a pool; those whose words
/// differ for a quote are reworded here.
#[derive(Debug, Args)]
#[command(
    mut_arg("provider", |a| a.help("Provider name")),
    mut_arg("class", |a| a.help("Region class; for a provider of one cloud, the cloud location")),
    mut_arg("plan", |a| a.help("Exact plan of a provider of one cloud; sets placement plan=PLAN")),
    mut_arg("cpu", |a| a.help("vCPUs")),
    mut_arg("mem", |a| a.help("Memory, GiB")),
    mut_arg("os", |a| a.help("OS id")),
    mut_arg("public", |a| a.help("Quote for a public pool"))
)]
pub struct QuoteArgs {
    /// ORG/PROJECT asking [default: the token's project].
    pub project: Option<String>,
    #[command(flatten)]
    pub shape: ShapeArgs,
}

/// `orc quote`.
pub async fn quote(conn: &ConnArgs, args: QuoteArgs) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, args.project.as_deref()).await?;
    let request = args.shape.into_quote_request();
    let view: QuoteView = client
        .post(&format!("{}/quote", project_url(&org, &project)), &request)
        .await?;
    if conn.json {
        print_json(&view)?;
    } else {
        out!("{}", quote_text(&view));
    }
    // A refusal is an answer, and still a failure for a script that asked for an offer.
    if view.outcome != "offer" {
        anyhow::bail!(
            "the provider refused the quote ({})",
            view.refusal.as_deref().unwrap_or("refused")
        );
    }
    Ok(())
}

fn quote_text(view: &QuoteView) -> String {
    let mut pairs = vec![
        ("provider", view.provider.clone()),
        ("outcome", view.outcome.clone()),
    ];
    match view.outcome.as_str() {
        "offer" => {
            pairs.push(("site", view.site.clone().unwrap_or_default()));
            pairs.push(("line", view.words.clone()));
            pairs.push((
                "price",
                match &view.price {
                    Some(p) => super::money::price(p),
                    None => "unpriced".to_string(),
                },
            ));
            // Shown only where the zone shows it: to the provider's own project and the
            // operators. A tenant's price already includes it.
            if let Some(markup) = &view.markup {
                pairs.push(("markup", markup.clone()));
            }
        }
        _ => {
            pairs.push(("reason", view.words.clone()));
            pairs.push(("kind", view.refusal.clone().unwrap_or_default()));
        }
    }
    fields(&pairs)
}

#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone_api_types::views::MoneyView;

    use crate::commands::check_golden;

    #[test]
    fn quote_offer_and_refusal() {
        let offer = QuoteView {
            provider: "partner".into(),
            outcome: "offer".into(),
            words: "2 vCPU · 4 GiB · eu-central".into(),
            site: Some("eu-central-a".into()),
            price: Some(MoneyView {
                amount: "0.0115".into(),
                currency: "USD".into(),
                period: "hour".into(),
            }),
            markup: Some("0.15".into()),
            refusal: None,
        };
        let refused = QuoteView {
            provider: "partner".into(),
            outcome: "refused".into(),
            words: "no capacity in Asia South right now".into(),
            site: None,
            price: None,
            markup: None,
            refusal: Some("no_capacity".into()),
        };
        check_golden(
            "quote",
            &format!("{}\n{}", quote_text(&offer), quote_text(&refused)),
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    use super::QuoteArgs;

    #[test]
    fn quote_rewords_only_the_pool_words_of_the_shared_options() {
        let command = QuoteArgs::augment_args(Command::new("quote"));
        let help = |id: &str| {
            command
                .get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(ToString::to_string)
        };
        assert_eq!(help("provider").as_deref(), Some("Provider name"));
        assert_eq!(help("public").as_deref(), Some("Quote for a public pool"));
        assert_eq!(
            help("arch").as_deref(),
            Some("Architecture: x86_64 or arm64")
        );
    }
}
