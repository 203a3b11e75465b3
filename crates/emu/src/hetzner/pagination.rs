//! Query strings, sorting and page-based pagination of list endpoints.
//!
//! `page` defaults to 1, `per_page` to 25 and is clamped to 50. Every list answer carries
//! `meta.pagination` with all six fields filled and a `Link` header with the `prev`, `next`
//! and `last` relations that apply (a single page still sends `last`).

use std::cmp::Ordering;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::labels::{Selector, parse_selector};
use super::{ApiError, ApiResult, json_response};

const DEFAULT_PER_PAGE: u64 = 25;
const MAX_PER_PAGE: u64 = 50;

/// A list request's query parameters (repeated keys kept in order) and where it was sent.
#[derive(Debug, Clone)]
pub(crate) struct ListQuery {
    pairs: Vec<(String, String)>,
    path: String,
    host: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let raw = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw)
            .map_err(|e| ApiError::bad_query(format!("invalid query string: {e}")))?;
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
            .to_string();
        Ok(ListQuery {
            pairs,
            path: parts.uri.path().to_string(),
            host,
        })
    }
}

/// One sort criterion: a field and whether it is descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortBy {
    pub field: String,
    pub desc: bool,
}

/// A value a list can be sorted by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SortValue {
    Int(u64),
    Text(String),
    Time(DateTime<Utc>),
}

impl ListQuery {
    /// The first value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeatable `key`; comma-separated values count as several.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// Every value of `key`, each checked against the allowed values.
    pub fn all_of(&self, key: &str, allowed: &[&str]) -> Result<Vec<String>, ApiError> {
        self.all(key)
            .into_iter()
            .map(|v| {
                if allowed.contains(&v) {
                    Ok(v.to_string())
                } else {
                    Err(ApiError::bad_query(format!(
                        "invalid value '{v}' for parameter '{key}', allowed: {}",
                        allowed.join(", ")
                    )))
                }
            })
            .collect()
    }

    /// A boolean parameter.
    pub fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true" | "1") => Ok(Some(true)),
            Some("false" | "0") => Ok(Some(false)),
            Some(v) => Err(ApiError::bad_query(format!(
                "invalid value '{v}' for parameter '{key}', expected true or false"
            ))),
        }
    }

    /// The `label_selector`, parsed.
    pub fn selector(&self) -> Result<Option<Selector>, ApiError> {
        self.get("label_selector")
            .map(|s| {
                parse_selector(s).map_err(|e| {
                    ApiError::bad_query(format!("invalid label_selector: {e}"))
                        .with_details(json!({"fields": [{"name": "label_selector", "messages": [e.to_string()]}]}))
                })
            })
            .transpose()
    }

    /// The `sort` criteria; each field must be one of `fields`.
    pub fn sort(&self, fields: &[&str]) -> Result<Vec<SortBy>, ApiError> {
        self.all("sort")
            .into_iter()
            .map(|s| {
                let (field, desc) = match s.split_once(':') {
                    None => (s, false),
                    Some((f, "asc")) => (f, false),
                    Some((f, "desc")) => (f, true),
                    Some(_) => return Err(ApiError::bad_query(format!("invalid sort '{s}'"))),
                };
                if fields.contains(&field) {
                    Ok(SortBy {
                        field: field.to_string(),
                        desc,
                    })
                } else {
                    Err(ApiError::bad_query(format!(
                        "invalid sort field '{field}', allowed: {}",
                        fields.join(", ")
                    )))
                }
            })
            .collect()
    }

    fn number(&self, key: &str, default: u64) -> Result<u64, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(ApiError::bad_query(format!(
                    "invalid value '{v}' for parameter '{key}', expected an integer >= 1"
                ))),
            },
        }
    }

    /// `(page, per_page)` after defaults and clamping.
    pub fn page(&self) -> Result<(u64, u64), ApiError> {
        let page = self.number("page", 1)?;
        let per_page = self.number("per_page", DEFAULT_PER_PAGE)?.min(MAX_PER_PAGE);
        Ok((page, per_page))
    }

    fn link(&self, page: u64, per_page: u64) -> String {
        let mut pairs: Vec<(&str, String)> = self
            .pairs
            .iter()
            .filter(|(k, _)| k != "page" && k != "per_page")
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        pairs.push(("page", page.to_string()));
        pairs.push(("per_page", per_page.to_string()));
        let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
        format!("http://{}{}?{}", self.host, self.path, query)
    }
}

/// What every list of named resources takes from its query: the label selector and the
/// sort criteria.
#[derive(Debug)]
pub(crate) struct Listing {
    pub selector: Option<Selector>,
    pub sorts: Vec<SortBy>,
}

impl Listing {
    /// `label_selector`, then `sort` (each field one of `sort_fields`), checked in that order.
    pub fn parse(q: &ListQuery, sort_fields: &[&str]) -> Result<Listing, ApiError> {
        Ok(Listing {
            selector: q.selector()?,
            sorts: q.sort(sort_fields)?,
        })
    }
}

/// Sorts `items` by the criteria, then by `id` ascending as the tie-break.
pub(crate) fn sort_items<T>(
    items: &mut [T],
    sorts: &[SortBy],
    key: impl Fn(&T, &str) -> SortValue,
) {
    items.sort_by(|a, b| {
        for s in sorts {
            let ord = key(a, &s.field).cmp(&key(b, &s.field));
            let ord = if s.desc { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        key(a, "id").cmp(&key(b, "id"))
    });
}

/// One page of `items` under `key`, with `meta.pagination` and the `Link` header.
pub(crate) fn page_of(q: &ListQuery, key: &str, items: Vec<Value>) -> ApiResult {
    page_with(q, key, items, serde_json::Map::new())
}

/// Like [`page_of`], with extra top-level fields (e.g. `recommendation`).
pub(crate) fn page_with(
    q: &ListQuery,
    key: &str,
    items: Vec<Value>,
    extra: serde_json::Map<String, Value>,
) -> ApiResult {
    let (page, per_page) = q.page()?;
    let total = items.len() as u64;
    let last = total.div_ceil(per_page).max(1);
    let start = (page - 1).saturating_mul(per_page);
    let chunk: Vec<Value> = items
        .into_iter()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .take(per_page as usize)
        .collect();
    let prev = (page > 1).then(|| (page - 1).min(last));
    let next = (page < last).then_some(page + 1);
    let mut body = serde_json::Map::new();
    body.insert(key.to_string(), Value::Array(chunk));
    body.extend(extra);
    body.insert(
        "meta".into(),
        json!({"pagination": {
            "page": page,
            "per_page": per_page,
            "previous_page": prev,
            "next_page": next,
            "last_page": last,
            "total_entries": total,
        }}),
    );
    let mut links = Vec::new();
    if let Some(p) = prev {
        links.push(format!("<{}>; rel=\"prev\"", q.link(p, per_page)));
    }
    if let Some(n) = next {
        links.push(format!("<{}>; rel=\"next\"", q.link(n, per_page)));
    }
    links.push(format!("<{}>; rel=\"last\"", q.link(last, per_page)));
    let mut response: Response = json_response(StatusCode::OK, &Value::Object(body));
    if let Ok(v) = HeaderValue::from_str(&links.join(", ")) {
        response.headers_mut().insert(header::LINK, v);
    }
    Ok(response)
}
