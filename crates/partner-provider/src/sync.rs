//! The one way this crate takes a standard mutex: a lock poisoned by a panicking holder is
//! taken anyway, because every value behind one is valid after any completed step.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, also when a panicking holder poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
