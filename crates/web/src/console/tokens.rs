//! The person's API tokens: the list, a new one shown once, revoking one.

use super::*;

pub(super) async fn tokens_page(
    cx: &Cx<'_>,
    created: Option<NewTokenView>,
    errors: FieldErrors,
    notice: Option<String>,
) -> PageResult {
    let user = cx.caller.user.name.to_string();
    let tokens: Vec<TokenView> = cx
        .api
        .get(&format!("/api/users/{}/tokens", seg(&user)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let frame = cx.frame(Section::Tokens, None).await?;
    let page = TokensPage {
        user,
        tokens,
        created: created.map(|c| (c.token, c.value)),
        errors,
        notice,
    };
    Ok(html(status, views::tokens(&frame, &page)))
}

pub(super) async fn create_token(cx: &Cx<'_>) -> PageResult {
    let user = cx.caller.user.name.to_string();
    let body = CreateToken {
        label: cx.form("label").trim().to_string(),
        expires_at: None,
        project: None,
    };
    let mut errors = FieldErrors::new();
    if body.label.is_empty() {
        errors.insert("label".into(), "Label the token.".into());
        return tokens_page(cx, None, errors, None).await;
    }
    let answer: Result<NewTokenView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &format!("/api/users/{}/tokens", seg(&user)),
            &body,
        )
        .await;
    match answer {
        Ok(created) => tokens_page(cx, Some(created), errors, None).await,
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            errors.insert(e.field.unwrap_or_else(|| "label".into()), e.message);
            tokens_page(cx, None, errors, None).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

pub(super) async fn revoke_token(cx: &Cx<'_>, id: &str) -> PageResult {
    let user = cx.caller.user.name.to_string();
    cx.api
        .send_empty(
            Method::DELETE,
            &format!("/api/users/{}/tokens/{}", seg(&user), seg(id)),
        )
        .await
        .map_err(|e| cx.refused(&e))?;
    tokens_page(
        cx,
        None,
        FieldErrors::new(),
        Some(format!("Token {id} is revoked.")),
    )
    .await
}
