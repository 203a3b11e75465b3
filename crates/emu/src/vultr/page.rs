//! Vultr's cursor pagination.
//!
//! A list is a sequence of `(key, item)` in display order. `per_page` defaults to 100 and
//! is capped at 500. Cursors are base64 of `next__<key>` (the page starts at the item with
//! that key) or `prev__<key>` (the page ends just before it), the format observed on the
//! real API. `meta.links.next` and `meta.links.prev` are always present and `""` at either
//! end. When the list is sorted by key, a cursor whose item has since been deleted still
//! resolves to the first key after it; in a list kept in catalogue order an unknown key is
//! a 400.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::http::{Params, VultrError};

/// Default page size.
pub(crate) const DEFAULT_PER_PAGE: usize = 100;
/// Largest page size; larger requests are served this many.
pub(crate) const MAX_PER_PAGE: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    Next(String),
    Prev(String),
}

/// How the list is ordered, which decides how a cursor with a vanished key resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Ascending by key.
    ByKey,
    /// Catalogue order.
    Listed,
}

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    /// Items in the whole (filtered) list.
    pub total: usize,
    pub next: String,
    pub prev: String,
}

impl<T> Page<T> {
    /// `{"total","links":{"next","prev"}}`.
    pub fn meta(&self) -> Value {
        json!({"total": self.total, "links": {"next": self.next, "prev": self.prev}})
    }

    /// `/v2/regions` reports as total the page plus one lookahead item while more follow,
    /// and 0 past the end (observed on the real API).
    pub fn with_lookahead_total(mut self) -> Self {
        self.total = if self.items.is_empty() {
            0
        } else {
            self.items.len() + usize::from(!self.next.is_empty())
        };
        self
    }
}

fn encode(prefix: &str, key: &str) -> String {
    STANDARD.encode(format!("{prefix}__{key}"))
}

fn decode(cursor: &str) -> Result<Cursor, VultrError> {
    let invalid = || VultrError::bad_request("Invalid cursor.");
    let bytes = STANDARD.decode(cursor.trim()).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    if let Some(key) = text.strip_prefix("next__") {
        Ok(Cursor::Next(key.to_string()))
    } else if let Some(key) = text.strip_prefix("prev__") {
        Ok(Cursor::Prev(key.to_string()))
    } else {
        Err(invalid())
    }
}

/// `per_page` from the query: absent → 100, above 500 → 500, not a positive integer → 400.
pub(crate) fn per_page(params: &Params) -> Result<usize, VultrError> {
    match params.get("per_page") {
        None => Ok(DEFAULT_PER_PAGE),
        Some(raw) => match raw.trim().parse::<usize>() {
            Ok(0) | Err(_) => Err(VultrError::bad_request(format!(
                "Invalid per_page value {raw:?}: must be an integer from 1 to {MAX_PER_PAGE}."
            ))),
            Ok(n) => Ok(n.min(MAX_PER_PAGE)),
        },
    }
}

/// Cuts the page the query asks for out of `items`.
pub(crate) fn paginate<T>(
    items: Vec<(String, T)>,
    params: &Params,
    order: Order,
) -> Result<Page<T>, VultrError> {
    let per_page = per_page(params)?;
    let cursor = params.get("cursor").map(decode).transpose()?;
    let locate = |key: &str| -> Result<usize, VultrError> {
        match items.iter().position(|(k, _)| k == key) {
            Some(i) => Ok(i),
            None => match order {
                Order::ByKey => Ok(items.partition_point(|(k, _)| k.as_str() < key)),
                Order::Listed => Err(VultrError::bad_request("Invalid cursor.")),
            },
        }
    };
    let (start, end) = match cursor {
        None => (0, per_page.min(items.len())),
        Some(Cursor::Next(key)) => {
            let start = locate(&key)?;
            (start, (start + per_page).min(items.len()))
        }
        Some(Cursor::Prev(key)) => {
            let end = locate(&key)?;
            (end.saturating_sub(per_page), end)
        }
    };
    let total = items.len();
    let next = items
        .get(end)
        .map(|(k, _)| encode("next", k))
        .unwrap_or_default();
    let prev = if start > 0 {
        items
            .get(start)
            .map(|(k, _)| encode("prev", k))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let page = items
        .into_iter()
        .skip(start)
        .take(end - start)
        .map(|(_, v)| v)
        .collect();
    Ok(Page {
        items: page,
        total,
        next,
        prev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn list(n: usize) -> Vec<(String, usize)> {
        (0..n).map(|i| (format!("k{i:03}"), i)).collect()
    }

    #[test]
    fn cursor_format_matches_the_observed_one() {
        assert_eq!(encode("next", "WAW"), "bmV4dF9fV0FX");
        assert_eq!(
            decode("bmV4dF9fdmNnLWExMDAtM2MtMzBnLTIwdnJhbQ==").unwrap(),
            Cursor::Next("vcg-a100-3c-30g-20vram".into())
        );
    }

    #[test]
    fn walks_forward_and_back() {
        let first = paginate(list(7), &params(&[("per_page", "3")]), Order::ByKey).unwrap();
        assert_eq!(first.items, vec![0, 1, 2]);
        assert_eq!(first.prev, "");
        let second = paginate(
            list(7),
            &params(&[("per_page", "3"), ("cursor", &first.next)]),
            Order::ByKey,
        )
        .unwrap();
        assert_eq!(second.items, vec![3, 4, 5]);
        let back = paginate(
            list(7),
            &params(&[("per_page", "3"), ("cursor", &second.prev)]),
            Order::ByKey,
        )
        .unwrap();
        assert_eq!(back.items, vec![0, 1, 2]);
        let last = paginate(
            list(7),
            &params(&[("per_page", "3"), ("cursor", &second.next)]),
            Order::ByKey,
        )
        .unwrap();
        assert_eq!(last.items, vec![6]);
        assert_eq!(last.next, "");
        assert_eq!(last.total, 7);
    }

    #[test]
    fn vanished_key_resumes_after_it_in_sorted_lists_only() {
        let cursor = encode("next", "k0035");
        let p = params(&[("per_page", "2"), ("cursor", &cursor)]);
        assert_eq!(
            paginate(list(7), &p, Order::ByKey).unwrap().items,
            vec![4, 5]
        );
        assert!(paginate(list(7), &p, Order::Listed).is_err());
    }

    #[test]
    fn per_page_is_capped_and_validated() {
        assert_eq!(per_page(&params(&[("per_page", "9999")])).unwrap(), 500);
        assert!(per_page(&params(&[("per_page", "0")])).is_err());
        assert!(per_page(&params(&[("per_page", "x")])).is_err());
        assert!(decode("bm9wZQ==").is_err());
    }
}
