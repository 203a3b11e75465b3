//! A project's Resource Providers: their cards, scope and pricing.

use super::*;

pub(super) async fn providers_page(
    cx: &Cx<'_>,
    current: Current,
    errors: BTreeMap<String, FieldErrors>,
    notice: Option<String>,
    status: StatusCode,
) -> PageResult {
    let providers: Vec<ProviderView> = cx
        .api
        .get(&format!("{}/providers", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let mut cards = Vec::new();
    for p in providers {
        let sites: Vec<orc_zone_api_types::views::SiteView> = cx
            .api
            .get(&format!(
                "{}/providers/{}/sites",
                api_project(&current),
                seg(&p.name)
            ))
            .await
            .unwrap_or_default();
        cards.push(ProviderCard {
            home: p.project == current.path(),
            errors: errors.get(&p.name).cloned().unwrap_or_default(),
            sites,
            provider: p,
        });
    }
    let frame = cx.frame(Section::Providers, Some(current.clone())).await?;
    let page = ProvidersPage {
        cards,
        notice,
        operator: cx.caller.is_operator(),
    };
    Ok(html(status, views::providers(&frame, &current, &page)))
}

pub(super) async fn change_provider(
    cx: &Cx<'_>,
    current: Current,
    provider: &str,
    action: &str,
) -> PageResult {
    let base = format!("{}/providers/{}", api_project(&current), seg(provider));
    let (answer, field, notice): (Result<ProviderView, ApiRefusal>, &str, String) = if action
        == "scope"
    {
        let scope = cx.form("scope");
        let body = orc_zone_api_types::views::ChangeScope {
            scope: scope.clone(),
        };
        let shown = if scope == "zone" {
            "Global"
        } else {
            "this project"
        };
        (
            cx.api
                .send(Method::POST, &format!("{base}/change-scope"), &body)
                .await,
            "scope",
            format!("Provider {provider} is now visible to {shown}."),
        )
    } else {
        let markup = cx.form("markup").trim().to_string();
        if markup.is_empty() {
            (
                cx.api.call_delete(&format!("{base}/pricing")).await,
                "markup",
                format!(
                    "Provider {provider} has no pricing strategy now: its new nodes are unpriced."
                ),
            )
        } else {
            let body = SetPricing {
                markup: Some(markup.clone()),
            };
            (
                cx.api
                    .send(Method::PUT, &format!("{base}/pricing"), &body)
                    .await,
                "markup",
                format!(
                    "Provider {provider} now prices with a markup of {markup}, for nodes admitted from now on."
                ),
            )
        }
    };
    match answer {
        Ok(_) => providers_page(cx, current, BTreeMap::new(), Some(notice), StatusCode::OK).await,
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            let mut errors = BTreeMap::new();
            let mut card = FieldErrors::new();
            card.insert(field.to_string(), e.message);
            errors.insert(provider.to_string(), card);
            providers_page(cx, current, errors, None, StatusCode::BAD_REQUEST).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}
