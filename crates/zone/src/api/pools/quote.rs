//! Quotes: a tenant's question what a shape would cost and where, and the preview a pool
//! request is checked against before it is stored.

use super::*;

pub(in crate::api) fn proto_id<T>(
    field: &str,
    text: String,
    make: impl FnOnce(String) -> Result<T, orc_proto::EmptyId>,
) -> ApiResult<T> {
    make(text).map_err(|_| ApiError::invalid(field, format!("{field} must not be empty")))
}

/// Asks a provider what a node of this shape would cost, and where (members). Nothing is
/// created: the answer is a preview, like the request wizard's.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/quote", tag = "pools",
    request_body = QuoteRequest,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = QuoteView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub(in crate::api) async fn quote(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<QuoteRequest>,
) -> ApiResult<Json<QuoteView>> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let shape = parse_shape(&body.shape)?;
    let provider = visible_provider(&state, &project_row, "provider", &body.provider)
        .await
        .map_err(|e| ApiError::invalid("provider", e.message))?;
    if provider.is_core() {
        return Err(ApiError::invalid(
            "provider",
            "provider core runs apps on the zone host; its slots are not quoted in advance",
        ));
    }
    let (class, os) = parse_class_and_os(&state, &provider, &body.class, &body.os)?;
    check_placement(&body.placement)?;
    let Some(backends) = &state.backends else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this zone has no provider connections to ask",
        ));
    };
    let request = preview_quote(
        &state,
        format!("{}/{}/quote-preview", org_row.name, project_row.name),
        shape,
        &class,
        &os,
        body.public,
        &body.placement,
    )
    .await?;
    let reply = backends.quote(&provider, request).await?;
    let name = crate::api::providers::provider_full_name(&state, &provider).await?;
    // Prices include the markup; only the provider's own project and the operators see it.
    let sees_markup = provider.project_id == project_row.id || caller.is_operator();
    Ok(Json(quote_view(&provider, &name, reply, sees_markup)))
}

/// A preview quote for a fresh node id of `pool` (`org/project/name`): the provider answers
/// it like any quote but holds nothing for it.
pub(in crate::api) async fn preview_quote(
    state: &ApiState,
    pool: String,
    shape: Shape,
    class: &ClassId,
    os: &OsId,
    public: bool,
    placement: &BTreeMap<String, String>,
) -> ApiResult<orc_proto::Quote> {
    let node = NodeId::from_counter(state.store.allocate_ids(1).await?);
    Ok(orc_proto::Quote {
        pool: proto_id("pool", pool, orc_proto::PoolPath::new)?,
        node_id: node,
        purpose: orc_proto::Purpose::Tenant,
        shape,
        class: class.clone(),
        os: os.clone(),
        pinned_site: None,
        public,
        placement: placement.clone(),
        preview: true,
    })
}

/// How long pool creation waits for the provider's answer to its preview quote.
pub const PLACEABLE_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Refuses a pool that nothing its provider offers can ever place: a preview quote answered
/// `unplaceable` (no site sells the shape, the OS or the plan at all) ends the request with
/// the provider's words, which say what it offers instead. Any other answer, or none within
/// [`PLACEABLE_CHECK_TIMEOUT`] (no replica connected, a busy provider), lets the pool
/// through: a passing lack of capacity parks its nodes and they are retried.
pub(in crate::api) async fn check_placeable(
    state: &ApiState,
    provider: &Provider,
    quote: orc_proto::Quote,
) -> ApiResult<()> {
    let Some(backends) = &state.backends else {
        return Ok(());
    };
    let answer =
        tokio::time::timeout(PLACEABLE_CHECK_TIMEOUT, backends.quote(provider, quote)).await;
    match answer {
        Ok(Ok(orc_proto::QuoteReply::Refused(refusal)))
            if refusal.kind == orc_proto::RefusalKind::Unplaceable =>
        {
            Err(ApiError::new(
                ErrorCode::Unplaceable,
                format!(
                    "provider {} can never place this pool: {}",
                    provider.name, refusal.words
                ),
            ))
        }
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            tracing::debug!(provider = %provider.name, %error, "no placeability check for a new pool");
            Ok(())
        }
        Err(_) => {
            tracing::debug!(provider = %provider.name, "the placeability check of a new pool timed out");
            Ok(())
        }
    }
}

/// The tenant's view of a provider's quote reply, with the provider's pricing strategy;
/// `name` is the provider's full name. The markup is shown only when `sees_markup`.
pub fn quote_view(
    provider: &Provider,
    name: &str,
    reply: orc_proto::QuoteReply,
    sees_markup: bool,
) -> QuoteView {
    match reply {
        orc_proto::QuoteReply::Offer(offer) => {
            let markup = markup_at_admission(provider.pricing);
            let price = tenant_price(offer.price.as_ref(), markup);
            QuoteView {
                provider: name.to_string(),
                outcome: "offer".to_string(),
                words: offer.words,
                site: Some(offer.site.to_string()),
                price: price.as_ref().map(crate::api::views::MoneyView::from),
                markup: markup.filter(|_| sees_markup).map(|m| m.to_string()),
                refusal: None,
            }
        }
        orc_proto::QuoteReply::Refused(refusal) => QuoteView {
            provider: name.to_string(),
            outcome: "refused".to_string(),
            words: refusal.words,
            site: None,
            price: None,
            markup: None,
            refusal: Some(refusal.kind.as_str().to_string()),
        },
    }
}
