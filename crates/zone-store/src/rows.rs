//! Reading typed values out of `AnyRow`s. A value that does not parse is reported as
//! [`StoreError::Corrupt`] naming `table.column`, never as a panic.

use std::fmt::Display;
use std::str::FromStr;

use rust_decimal::Decimal;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::StoreError;
use orc_zone_model::Timestamp;

fn column_name(column: &'static str) -> &'static str {
    column.rsplit_once('.').map_or(column, |(_, name)| name)
}

fn corrupt(column: &str, reason: impl Display) -> StoreError {
    StoreError::Corrupt {
        column: column.to_string(),
        reason: reason.to_string(),
    }
}

/// A TEXT column holding a token's SHA-256 as 64 hex digits.
pub(crate) fn token_hash(
    row: &AnyRow,
    column: &'static str,
) -> Result<orc_zone_model::TokenHash, StoreError> {
    orc_zone_model::TokenHash::from_hex(&text(row, column)?).ok_or_else(|| StoreError::Corrupt {
        column: column.to_string(),
        reason: "not 64 hex digits".to_string(),
    })
}

/// A TEXT column (`table.column`).
pub(crate) fn text(row: &AnyRow, column: &'static str) -> Result<String, StoreError> {
    row.try_get::<String, _>(column_name(column))
        .map_err(|e| corrupt(column, e))
}

/// A nullable TEXT column.
pub(crate) fn opt_text(row: &AnyRow, column: &'static str) -> Result<Option<String>, StoreError> {
    row.try_get::<Option<String>, _>(column_name(column))
        .map_err(|e| corrupt(column, e))
}

/// A BIGINT column.
pub(crate) fn int(row: &AnyRow, column: &'static str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(column_name(column))
        .map_err(|e| corrupt(column, e))
}

/// A nullable BIGINT column.
pub(crate) fn opt_int(row: &AnyRow, column: &'static str) -> Result<Option<i64>, StoreError> {
    row.try_get::<Option<i64>, _>(column_name(column))
        .map_err(|e| corrupt(column, e))
}

/// A BIGINT column holding an unsigned 32-bit count.
pub(crate) fn uint32(row: &AnyRow, column: &'static str) -> Result<u32, StoreError> {
    let value = int(row, column)?;
    u32::try_from(value).map_err(|_| corrupt(column, format!("{value} is out of range")))
}

/// A BIGINT column holding an unsigned 64-bit count.
pub(crate) fn uint64(row: &AnyRow, column: &'static str) -> Result<u64, StoreError> {
    let value = int(row, column)?;
    u64::try_from(value).map_err(|_| corrupt(column, format!("{value} is negative")))
}

/// A BIGINT 0/1 flag.
pub(crate) fn flag(row: &AnyRow, column: &'static str) -> Result<bool, StoreError> {
    match int(row, column)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(corrupt(column, format!("{other} is not 0 or 1"))),
    }
}

/// A time column (milliseconds).
pub(crate) fn time(row: &AnyRow, column: &'static str) -> Result<Timestamp, StoreError> {
    int(row, column).map(Timestamp)
}

/// A nullable time column.
pub(crate) fn opt_time(
    row: &AnyRow,
    column: &'static str,
) -> Result<Option<Timestamp>, StoreError> {
    Ok(opt_int(row, column)?.map(Timestamp))
}

/// A TEXT column parsed with `FromStr` (ids, names, enum words, currencies).
pub(crate) fn parsed<T>(row: &AnyRow, column: &'static str) -> Result<T, StoreError>
where
    T: FromStr,
    T::Err: Display,
{
    let raw = text(row, column)?;
    raw.parse().map_err(|e| corrupt(column, e))
}

/// A nullable TEXT column parsed with `FromStr`.
pub(crate) fn opt_parsed<T>(row: &AnyRow, column: &'static str) -> Result<Option<T>, StoreError>
where
    T: FromStr,
    T::Err: Display,
{
    match opt_text(row, column)? {
        Some(raw) => raw.parse().map(Some).map_err(|e| corrupt(column, e)),
        None => Ok(None),
    }
}

/// A decimal TEXT column, read with its stored scale.
pub(crate) fn decimal(row: &AnyRow, column: &'static str) -> Result<Decimal, StoreError> {
    parsed(row, column)
}

/// A JSON TEXT column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    column: &'static str,
) -> Result<T, StoreError> {
    let raw = text(row, column)?;
    serde_json::from_str(&raw).map_err(|e| corrupt(column, e))
}

/// Encodes a value as JSON text for a column. Only called on types whose serialization
/// cannot fail (maps with string keys, vectors of plain structs).
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// Converts an unsigned count to a BIGINT bind value.
pub(crate) fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
