//! Events: an append-only log of what happened, scoped to the objects it concerns.

use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::rows::{opt_parsed, opt_time, parsed, text, time, uint32};
use super::{Store, StoreResult};
use orc_zone_model::{Event, EventId, EventScope, Timestamp};

const EVENT_COLUMNS: &str =
    "id, at, org_id, project_id, provider_id, pool_id, node_id, kind, words, repeats, last_at";

fn event_from(row: &AnyRow) -> StoreResult<Event> {
    Ok(Event {
        id: parsed(row, "events.id")?,
        at: time(row, "events.at")?,
        scope: EventScope {
            org_id: opt_parsed(row, "events.org_id")?,
            project_id: opt_parsed(row, "events.project_id")?,
            provider_id: opt_parsed(row, "events.provider_id")?,
            pool_id: opt_parsed(row, "events.pool_id")?,
            node_id: opt_parsed(row, "events.node_id")?,
        },
        kind: text(row, "events.kind")?,
        words: text(row, "events.words")?,
        repeats: uint32(row, "events.repeats")?,
        last_at: opt_time(row, "events.last_at")?,
    })
}

impl Store {
    /// Appends an event.
    pub async fn record_event(
        &self,
        scope: &EventScope,
        kind: &str,
        words: &str,
        at: Timestamp,
    ) -> StoreResult<Event> {
        let id = EventId::from_counter(self.allocate_ids(1).await?);
        sqlx::query(
            "INSERT INTO events (id, at, org_id, project_id, provider_id, pool_id, node_id, \
             kind, words) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(id.as_str())
        .bind(at.millis())
        .bind(scope.org_id.as_ref().map(|i| i.as_str()))
        .bind(scope.project_id.as_ref().map(|i| i.as_str()))
        .bind(scope.provider_id.as_ref().map(|i| i.as_str()))
        .bind(scope.pool_id.as_ref().map(|i| i.as_str()))
        .bind(scope.node_id.as_ref().map(|i| i.as_str()))
        .bind(kind)
        .bind(words)
        .execute(self.pool())
        .await
        .op("record event")?;
        Ok(Event {
            id,
            at,
            scope: scope.clone(),
            kind: kind.to_string(),
            words: words.to_string(),
            repeats: 1,
            last_at: None,
        })
    }

    /// Appends an event, unless the newest event of exactly its scope has the same kind and
    /// words: that one then counts one more repeat and its last time becomes `at`. A
    /// condition that every report repeats so reads as one event.
    pub async fn record_repeatable_event(
        &self,
        scope: &EventScope,
        kind: &str,
        words: &str,
        at: Timestamp,
    ) -> StoreResult<Event> {
        let newest = self.list_newest_events(scope, 1).await?;
        match newest.into_iter().next() {
            Some(last) if last.scope == *scope => {
                self.repeat_or_record(last, scope, kind, words, at).await
            }
            _ => self.record_event(scope, kind, words, at).await,
        }
    }

    /// Appends an event about a node, unless the node's newest event has the same kind and
    /// words: that one then counts one more repeat and its last time becomes `at`. A node
    /// parked and retried every minute so reads as one event, not a screenful.
    pub async fn record_node_event(
        &self,
        scope: &EventScope,
        kind: &str,
        words: &str,
        at: Timestamp,
    ) -> StoreResult<Event> {
        let Some(node) = &scope.node_id else {
            return self.record_event(scope, kind, words, at).await;
        };
        let of_node = EventScope {
            node_id: Some(node.clone()),
            ..EventScope::default()
        };
        match self
            .list_newest_events(&of_node, 1)
            .await?
            .into_iter()
            .next()
        {
            Some(last) => self.repeat_or_record(last, scope, kind, words, at).await,
            None => self.record_event(scope, kind, words, at).await,
        }
    }

    /// Counts one more repeat of `last` when it has `kind` and `words`, else appends a new
    /// event.
    async fn repeat_or_record(
        &self,
        last: Event,
        scope: &EventScope,
        kind: &str,
        words: &str,
        at: Timestamp,
    ) -> StoreResult<Event> {
        if last.kind != kind || last.words != words {
            return self.record_event(scope, kind, words, at).await;
        }
        sqlx::query("UPDATE events SET repeats = repeats + 1, last_at = $2 WHERE id = $1")
            .bind(last.id.as_str())
            .bind(at.millis())
            .execute(self.pool())
            .await
            .op("count a repeated event")?;
        Ok(Event {
            repeats: last.repeats.saturating_add(1),
            last_at: Some(at),
            ..last
        })
    }

    /// Events matching every id set in `filter` (an empty filter matches all), oldest
    /// first, after the event `after` if given, at most `limit`.
    pub async fn list_events(
        &self,
        filter: &EventScope,
        after: Option<&EventId>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.query_events(filter, after, limit, false).await
    }

    /// The newest `limit` events matching `filter`, oldest of them first.
    pub async fn list_newest_events(
        &self,
        filter: &EventScope,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let mut events = self.query_events(filter, None, limit, true).await?;
        events.reverse();
        Ok(events)
    }

    async fn query_events(
        &self,
        filter: &EventScope,
        after: Option<&EventId>,
        limit: u32,
        newest: bool,
    ) -> StoreResult<Vec<Event>> {
        let mut conditions = Vec::new();
        let mut values: Vec<&str> = Vec::new();
        let wanted = [
            ("org_id", filter.org_id.as_ref().map(|i| i.as_str())),
            ("project_id", filter.project_id.as_ref().map(|i| i.as_str())),
            (
                "provider_id",
                filter.provider_id.as_ref().map(|i| i.as_str()),
            ),
            ("pool_id", filter.pool_id.as_ref().map(|i| i.as_str())),
            ("node_id", filter.node_id.as_ref().map(|i| i.as_str())),
            ("id >", after.map(|i| i.as_str())),
        ];
        for (column, value) in wanted {
            if let Some(value) = value {
                values.push(value);
                let op = if column.ends_with('>') { "" } else { " =" };
                conditions.push(format!("{column}{op} ${}", values.len()));
            }
        }
        let filter_sql = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events{filter_sql} ORDER BY id{} LIMIT ${}",
            if newest { " DESC" } else { "" },
            values.len() + 1
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in values {
            query = query.bind(value);
        }
        query
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .op("list events")?
            .iter()
            .map(event_from)
            .collect()
    }
}
