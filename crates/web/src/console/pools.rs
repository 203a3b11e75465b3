//! A project's pools: the list, a pool and its nodes, resizing and deleting, the request
//! wizard, an app pool's params and its one-off runs.

use super::*;

pub(super) async fn pools_page(cx: &Cx<'_>, current: Current) -> PageResult {
    let pools: Vec<PoolView> = cx
        .api
        .get(&format!("{}/pools", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        StatusCode::OK,
        views::pools(&frame, &current, &PoolsPage { pools }),
    ))
}

pub(super) async fn pool_view(
    cx: &Cx<'_>,
    current: &Current,
    pool: &str,
) -> Result<PoolView, Response> {
    cx.api
        .get(&format!("{}/pools/{}", api_project(current), seg(pool)))
        .await
        .map_err(|e| cx.refused(&e))
}

/// A pool's view and nodes, as the live updates read them too.
pub(super) async fn pool_and_nodes(
    api: &ApiAs,
    current: &Current,
    pool: &str,
) -> Result<(PoolView, Vec<NodeView>), ApiRefusal> {
    let base = format!("{}/pools/{}", api_project(current), seg(pool));
    let view: PoolView = api.get(&base).await?;
    let nodes: Vec<NodeView> = api.get(&format!("{base}/nodes")).await?;
    Ok((view, nodes))
}

pub(super) async fn pool_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    resize_to: Option<String>,
    errors: FieldErrors,
    notice: Option<String>,
) -> PageResult {
    let (view, nodes) = pool_and_nodes(&cx.api, &current, pool)
        .await
        .map_err(|e| cx.refused(&e))?;
    let events: Vec<EventView> = cx
        .api
        .get(&format!(
            "{}/events?pool={}&limit=50&newest=true",
            api_project(&current),
            seg(pool)
        ))
        .await
        .unwrap_or_default();
    let endpoints: Option<PoolEndpointsView> = if view.endpoints.is_empty() {
        None
    } else {
        cx.api
            .get(&format!(
                "{}/pools/{}/endpoints",
                api_project(&current),
                seg(pool)
            ))
            .await
            .ok()
    };
    let log_level = cx
        .query_value("level")
        .filter(|l| matches!(l.as_str(), "error" | "warn" | "info" | "debug" | "trace"))
        .unwrap_or_else(|| "info".to_string());
    let logs: Option<Vec<orc_zone_api_types::views::LogLineView>> = if view.app.is_some() {
        cx.api
            .get(&format!(
                "{}/pools/{}/logs?level={log_level}",
                api_project(&current),
                seg(pool)
            ))
            .await
            .ok()
            .map(|mut lines: Vec<orc_zone_api_types::views::LogLineView>| {
                let keep = lines.len().saturating_sub(LOG_LINES_SHOWN);
                lines.drain(..keep);
                lines
            })
    } else {
        None
    };
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    let page = PoolPage {
        logs,
        log_level,
        resize_to: resize_to.unwrap_or_else(|| view.size.to_string()),
        pool: view,
        nodes,
        events,
        endpoints,
        errors,
        notice,
    };
    Ok(html(status, views::pool(&frame, &current, &page)))
}

pub(super) async fn resize(cx: &Cx<'_>, current: Current, pool: &str) -> PageResult {
    let typed = cx.form("size");
    let mut errors = FieldErrors::new();
    let Some(size) = forms::size(&mut errors, &typed, 0) else {
        return pool_page(cx, current, pool, Some(typed), errors, None).await;
    };
    let path = format!("{}/pools/{}/resize", api_project(&current), seg(pool));
    let answer: Result<PoolView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &path,
            &orc_zone_api_types::views::ResizePool { size },
        )
        .await;
    match answer {
        Ok(_) => Ok(see_other(&format!("{}/pools/{}", current.url(), seg(pool)))),
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            errors.insert(e.field.unwrap_or_else(|| "size".into()), e.message);
            pool_page(cx, current, pool, Some(typed), errors, None).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

pub(super) async fn wizard_page(
    cx: &Cx<'_>,
    current: Current,
    input: WizardInput,
    create: bool,
) -> PageResult {
    let providers: Vec<ProviderView> = cx
        .api
        .get(&format!("{}/providers", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    // Pools on `core` run apps; the wizard requests nodes.
    let providers: Vec<ProviderView> = providers
        .into_iter()
        .filter(|p| p.name != orc_zone_model::CORE_PROVIDER_NAME)
        .collect();
    let mut page = WizardPage {
        providers,
        input,
        errors: FieldErrors::new(),
        quote: None,
        quote_problem: None,
    };
    let catalog = page.chosen().and_then(|p| p.catalog.clone());
    let mut status = StatusCode::OK;
    if create {
        match forms::create_pool(&page.input, catalog.as_ref()) {
            Err(errors) => page.errors = errors,
            Ok(body) => {
                let path = format!("{}/pools", api_project(&current));
                let answer: Result<PoolView, ApiRefusal> =
                    cx.api.send(Method::POST, &path, &body).await;
                match answer {
                    Ok(pool) => {
                        return Ok(see_other(&format!(
                            "{}/pools/{}",
                            current.url(),
                            seg(&pool.name)
                        )));
                    }
                    Err(e)
                        if e.status.is_client_error()
                            && e.status != StatusCode::FORBIDDEN
                            && e.status != StatusCode::NOT_FOUND =>
                    {
                        page.errors
                            .insert(e.field.unwrap_or_else(|| "form".into()), e.message);
                    }
                    Err(e) => return Err(cx.refused(&e)),
                }
            }
        }
        status = StatusCode::BAD_REQUEST;
    } else if page.input.quote == "1" && current.writes() {
        match forms::quote_request(&page.input, catalog.as_ref()) {
            Err(errors) => {
                page.errors = errors;
                status = StatusCode::BAD_REQUEST;
            }
            Ok(body) => {
                let path = format!("{}/quote", api_project(&current));
                let answer: Result<QuoteView, ApiRefusal> =
                    cx.api.send(Method::POST, &path, &body).await;
                match answer {
                    Ok(quote) => page.quote = Some(quote),
                    Err(e) => match e.field {
                        Some(field) => {
                            page.errors.insert(field, e.message);
                            status = StatusCode::BAD_REQUEST;
                        }
                        None => page.quote_problem = Some(e.message),
                    },
                }
                let mut size_errors = FieldErrors::new();
                if forms::size(&mut size_errors, &page.input.size, 1).is_none()
                    || page.input.name.trim().is_empty()
                {
                    // A quote is an answer; what is still missing for the request shows too.
                    page.errors.extend(size_errors);
                    if page.input.name.trim().is_empty() {
                        page.errors
                            .insert("name".into(), "Name the pool to request it.".into());
                    }
                    if page.quote.as_ref().is_some_and(|q| q.outcome == "offer") {
                        page.quote_problem = Some(
                            "Fill in the size and the pool's name, then get the quote again to request it."
                                .into(),
                        );
                        page.quote = page.quote.take().map(|mut q| {
                            q.outcome = "offer-incomplete".into();
                            q
                        });
                    }
                }
            }
        }
    }
    let frame = cx.frame(Section::Request, Some(current.clone())).await?;
    Ok(html(status, views::wizard(&frame, &current, &page)))
}

pub(super) async fn reconfigure_page(
    cx: &Cx<'_>,
    current: Current,
    pool: &str,
    failed: Option<(Vec<model::ParamField>, FieldErrors)>,
) -> PageResult {
    let view = pool_view(cx, &current, pool).await?;
    let Some(app) = &view.app else {
        return Err(cx.refused(&ApiRefusal {
            status: StatusCode::NOT_FOUND,
            message: format!("Pool {} runs no app, so it has no params.", view.path),
            field: None,
        }));
    };
    let (params, errors, status) = match failed {
        Some((fields, errors)) => (fields, errors, StatusCode::BAD_REQUEST),
        None => (
            shown_params(cx, app).await,
            FieldErrors::new(),
            StatusCode::OK,
        ),
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(
        status,
        views::reconfigure(
            &frame,
            &current,
            &ReconfigurePage {
                pool: view,
                params,
                errors,
            },
        ),
    ))
}

pub(super) async fn reconfigure(cx: &Cx<'_>, current: Current, pool: &str) -> PageResult {
    let view = pool_view(cx, &current, pool).await?;
    let Some(app) = &view.app else {
        return Err(not_found(cx).await);
    };
    let shown = shown_params(cx, app).await;
    let form = match forms::reconfigure(&shown, &cx.body) {
        Ok(form) => form,
        Err(failed) => return reconfigure_page(cx, current, pool, Some(failed)).await,
    };
    let body = forms::reconfigure_request(&form);
    let path = format!("{}/pools/{}/reconfigure", api_project(&current), seg(pool));
    let answer: Result<PoolView, ApiRefusal> = cx.api.send(Method::POST, &path, &body).await;
    match answer {
        Ok(_) => Ok(see_other(&format!("{}/pools/{}", current.url(), seg(pool)))),
        Err(e) if e.status == StatusCode::BAD_REQUEST || e.status == StatusCode::CONFLICT => {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "form".into()), e.message);
            reconfigure_page(cx, current, pool, Some((form.fields, errors))).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

/// The manifest of `package` (`org/name:tag`) as the registry holds it for the person, and
/// its package's digest: the package the tag names, or the one with `digest`.
pub(super) async fn manifest_of(
    cx: &Cx<'_>,
    package: &str,
    digest: Option<&str>,
) -> Option<crate::registry::AppManifest> {
    let (org, rest) = package.split_once('/')?;
    let (name, tag) = rest.split_once(':').unwrap_or((rest, "latest"));
    let detail: orc_zone_api_types::views::RegistryAppDetail = cx
        .api
        .get(&format!("/api/orgs/{}/apps/{}", seg(org), seg(name)))
        .await
        .ok()?;
    detail
        .packages
        .into_iter()
        .find(|p| match digest {
            Some(d) => p.digest == d,
            None => p.tags.iter().any(|t| t == tag),
        })
        .map(|p| p.manifest)
}

/// The pool form's fields for an app pool: as its package's manifest declares them, or as
/// the pool holds them when the registry has no manifest for it.
pub(super) async fn shown_params(
    cx: &Cx<'_>,
    app: &orc_zone_api_types::views::AppView,
) -> Vec<model::ParamField> {
    match manifest_of(cx, &app.package, app.digest.as_deref()).await {
        Some(manifest) => {
            forms::manifest_fields(&manifest.params, &app.params, &app.sensitive_params)
        }
        None => forms::param_fields(&app.params, &app.sensitive_params),
    }
}

pub(super) async fn app_pool_page(
    cx: &Cx<'_>,
    current: Current,
    package: String,
    failed: Option<(Vec<model::ParamField>, FieldErrors)>,
) -> PageResult {
    let mut orgs = vec![current.org.clone()];
    if current.org != "sys" {
        orgs.push("sys".to_string());
    }
    let mut packages = Vec::new();
    for org in orgs {
        let apps: Vec<orc_zone_api_types::views::RegistryAppView> = cx
            .api
            .get(&format!("/api/orgs/{}/apps", seg(&org)))
            .await
            .unwrap_or_default();
        for app in apps {
            packages.extend(app.tags.into_iter().map(|t| t.package));
        }
    }
    packages.sort();
    let manifest = if package.is_empty() {
        None
    } else {
        manifest_of(cx, &package, None).await
    };
    let mut errors = FieldErrors::new();
    if !package.is_empty() && manifest.is_none() && failed.is_none() {
        errors.insert(
            "app".into(),
            format!("The registry holds no package {package} that you may run."),
        );
    }
    let (params, status) = match failed {
        Some((fields, failed_errors)) => {
            errors.extend(failed_errors);
            (fields, StatusCode::BAD_REQUEST)
        }
        None => (
            manifest
                .as_ref()
                .map(|m| forms::manifest_fields(&m.params, &BTreeMap::new(), &[]))
                .unwrap_or_default(),
            if errors.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            },
        ),
    };
    let page = model::AppPoolPage {
        packages,
        package: if manifest.is_some() || status == StatusCode::BAD_REQUEST {
            package
        } else {
            String::new()
        },
        description: manifest.map(|m| m.description).unwrap_or_default(),
        params,
        name: cx.form("name"),
        size: {
            let typed = cx.form("size");
            if typed.is_empty() { "1".into() } else { typed }
        },
        errors,
    };
    let frame = cx.frame(Section::Pools, Some(current.clone())).await?;
    Ok(html(status, views::app_pool(&frame, &current, &page)))
}

pub(super) async fn run_app(cx: &Cx<'_>, current: Current) -> PageResult {
    let package = cx.form("package");
    let Some(manifest) = manifest_of(cx, &package, None).await else {
        return app_pool_page(cx, current, package, None).await;
    };
    let shown = forms::manifest_fields(&manifest.params, &BTreeMap::new(), &[]);
    let form = match forms::reconfigure(&shown, &cx.body) {
        Ok(form) => form,
        Err(failed) => return app_pool_page(cx, current, package, Some(failed)).await,
    };
    let body = match forms::app_pool(&package, &cx.form("name"), &cx.form("size"), &form) {
        Ok(body) => body,
        Err(errors) => {
            return app_pool_page(cx, current, package, Some((form.fields, errors))).await;
        }
    };
    let path = format!("{}/pools", api_project(&current));
    let answer: Result<PoolView, ApiRefusal> = cx.api.send(Method::POST, &path, &body).await;
    match answer {
        Ok(pool) => Ok(see_other(&format!(
            "{}/pools/{}",
            current.url(),
            seg(&pool.name)
        ))),
        Err(e)
            if e.status.is_client_error()
                && e.status != StatusCode::FORBIDDEN
                && e.status != StatusCode::NOT_FOUND =>
        {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "app".into()), e.message);
            app_pool_page(cx, current, package, Some((form.fields, errors))).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}
