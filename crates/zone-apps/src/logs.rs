//! Log lines of app slots: level parsing, the bounded in-memory ring per slot, and the
//! append-only file per slot under the data dir.
//!
//! Invariants: a ring never holds more than its capacity (the oldest lines go first); every
//! line gets a sequence number unique within the zone process, so lines of several slots
//! merge in a stable order; the value of every sensitive param of the slot is replaced by
//! `<redacted>` before a line is kept, in memory or on disk.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use orc_common::time::format_time;
use serde::{Deserialize, Serialize};

use orc_zone_model::{NodeId, Timestamp};

/// Severity of a log line, least severe first (so `a >= b` means "at least as severe").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    /// Every level, least severe first.
    pub const ALL: [Level; 5] = [
        Level::Trace,
        Level::Debug,
        Level::Info,
        Level::Warn,
        Level::Error,
    ];

    /// The word `tracing` prints for this level (`INFO`).
    pub fn as_upper(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }

    /// The lower-case word used by the API and CLI (`info`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    fn from_upper(word: &str) -> Option<Level> {
        match word {
            "TRACE" => Some(Level::Trace),
            "DEBUG" => Some(Level::Debug),
            "INFO" => Some(Level::Info),
            "WARN" => Some(Level::Warn),
            "ERROR" => Some(Level::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A level word that is not one of `error`, `warn`, `info`, `debug`, `trace`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a log level (expected error, warn, info, debug or trace)")]
pub struct InvalidLevel {
    pub value: String,
}

impl FromStr for Level {
    type Err = InvalidLevel;

    /// Accepts the level words in any case; `warning` is read as `warn`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "trace" => Ok(Level::Trace),
            "debug" => Ok(Level::Debug),
            "info" => Ok(Level::Info),
            "warn" | "warning" => Ok(Level::Warn),
            "error" => Ok(Level::Error),
            _ => Err(InvalidLevel {
                value: s.to_string(),
            }),
        }
    }
}

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    /// The app's standard output.
    Stdout,
    /// The app's standard error.
    Stderr,
    /// The zone's supervisor: starts, exits, restarts, replacements.
    Supervisor,
}

impl LogSource {
    /// The word shown in files and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            LogSource::Stdout => "stdout",
            LogSource::Stderr => "stderr",
            LogSource::Supervisor => "supervisor",
        }
    }
}

/// One line of a slot's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// Unique within the zone process and increasing: merges slots in a stable order.
    pub seq: u64,
    /// When the zone read the line.
    pub at: Timestamp,
    pub slot: u32,
    /// The node the slot belonged to when the line was written.
    pub node_id: NodeId,
    pub source: LogSource,
    pub level: Level,
    /// The line without its trailing newline and without terminal colour codes.
    pub text: String,
}

/// Longest line kept; longer lines are cut and marked with `…`.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Removes ANSI escape sequences (`ESC [ … letter`), which `tracing` adds on a terminal.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The level of a line as `tracing`'s default format writes it: the level word first, or
/// right after a leading timestamp (`2026-11-29T18:23:51.123Z  WARN target: …`). Any other
/// line is `info`.
pub fn parse_level(line: &str) -> Level {
    split_level(line).0
}

/// The line's level and its text without the timestamp and level that `tracing` put in
/// front: the zone stamps every line with its own time and keeps the level apart, so a
/// line shows each only once. A line without a level word in front is `info` and is kept
/// whole.
pub fn split_level(line: &str) -> (Level, &str) {
    let rest = line.trim_start();
    let (first, after_first) = next_word(rest);
    if let Some(level) = Level::from_upper(first.trim_end_matches(':')) {
        return (level, after_first);
    }
    let looks_like_time = first.starts_with(|c: char| c.is_ascii_digit())
        && (first.contains(':') || first.contains('T'));
    if looks_like_time {
        let (second, after_second) = next_word(after_first);
        if let Some(level) = Level::from_upper(second.trim_end_matches(':')) {
            return (level, after_second);
        }
    }
    (Level::Info, line)
}

/// The first word of `text` and what follows it, without the spaces between.
fn next_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(end) => (&text[..end], text[end..].trim_start()),
        None => (text, ""),
    }
}

/// Replaces every occurrence of each secret in `line` with `<redacted>`.
pub fn redact(line: &str, secrets: &[String]) -> String {
    let mut out = line.to_string();
    for secret in secrets {
        if !secret.is_empty() && out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "<redacted>");
        }
    }
    out
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_LINE_BYTES {
        let mut end = MAX_LINE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// Size at which a slot's log file is moved aside to `<name>.1` and a new one started.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
}

impl LogFile {
    fn open(path: &Path) -> std::io::Result<LogFile> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Some(file),
            size,
        })
    }

    fn append(&mut self, line: &LogLine) {
        let text = format!(
            "{} {:5} {} {}: {}\n",
            format_time(line.at),
            line.level.as_upper(),
            line.node_id,
            line.source.as_str(),
            line.text
        );
        if self.size + text.len() as u64 > MAX_FILE_BYTES {
            self.file = None;
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            if std::fs::rename(&self.path, &old).is_ok()
                && let Ok(fresh) = LogFile::open(&self.path)
            {
                *self = fresh;
            }
        }
        if let Some(file) = self.file.as_mut()
            && file.write_all(text.as_bytes()).is_ok()
        {
            self.size += text.len() as u64;
        }
    }
}

/// The log of one slot of one pool: a bounded ring and a file. Shared by the tasks that
/// read the slot's output; survives process restarts and replacements of the slot.
#[derive(Debug)]
pub struct SlotLog {
    slot: u32,
    capacity: usize,
    ring: Mutex<VecDeque<LogLine>>,
    file: Mutex<Option<LogFile>>,
}

impl SlotLog {
    /// A log keeping `capacity` lines in memory and appending to the file at `path` (created
    /// with mode 0600). A file that cannot be opened leaves only the ring.
    pub fn new(slot: u32, capacity: usize, path: Option<&Path>) -> SlotLog {
        let file = path.and_then(|p| match LogFile::open(p) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(path = %p.display(), %error, "cannot open app log file");
                None
            }
        });
        SlotLog {
            slot,
            capacity: capacity.max(1),
            ring: Mutex::new(VecDeque::new()),
            file: Mutex::new(file),
        }
    }

    /// Keeps a line read from the app (or written by the supervisor). Its level is parsed
    /// from the text for app output; supervisor lines carry their own.
    pub fn push(
        &self,
        node_id: &NodeId,
        source: LogSource,
        level: Option<Level>,
        raw: &str,
        secrets: &[String],
    ) {
        let plain = strip_ansi(raw.trim_end_matches(['\n', '\r']));
        let (level, text) = match level {
            Some(level) => (level, plain.as_str()),
            None => split_level(&plain),
        };
        let text = cut(redact(text, secrets));
        let line = LogLine {
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            at: Timestamp::now(),
            slot: self.slot,
            node_id: node_id.clone(),
            source,
            level,
            text,
        };
        if let Ok(mut file) = self.file.lock()
            && let Some(file) = file.as_mut()
        {
            file.append(&line);
        }
        if let Ok(mut ring) = self.ring.lock() {
            if ring.len() == self.capacity {
                ring.pop_front();
            }
            ring.push_back(line);
        }
    }

    /// The kept lines at or above `min_level`, oldest first.
    pub fn lines(&self, min_level: Level) -> Vec<LogLine> {
        match self.ring.lock() {
            Ok(ring) => ring
                .iter()
                .filter(|l| l.level >= min_level)
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_tracing_default_format() {
        assert_eq!(
            parse_level("2026-11-29T18:23:51.123456Z  WARN orc: slow"),
            Level::Warn
        );
        assert_eq!(parse_level("ERROR boom"), Level::Error);
        assert_eq!(parse_level("DEBUG: detail"), Level::Debug);
        assert_eq!(
            parse_level(&strip_ansi(
                "\u{1b}[2m2026-11-29T18:23:51Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m x"
            )),
            Level::Error
        );
        assert_eq!(parse_level("plain words"), Level::Info);
        assert_eq!(parse_level("error lower case is not a level"), Level::Info);
        assert_eq!(parse_level(""), Level::Info);
        assert_eq!("Warning".parse::<Level>(), Ok(Level::Warn));
        assert!("loud".parse::<Level>().is_err());
        assert!(Level::Error > Level::Warn && Level::Debug > Level::Trace);
    }

    #[test]
    fn ring_is_bounded_and_redacts() {
        let log = SlotLog::new(3, 2, None);
        let node = NodeId::from_counter(9);
        let secrets = vec!["s3cr3t-value".to_string()];
        log.push(&node, LogSource::Stdout, None, "INFO one", &secrets);
        log.push(
            &node,
            LogSource::Stderr,
            None,
            "WARN key=s3cr3t-value\n",
            &secrets,
        );
        log.push(&node, LogSource::Stdout, None, "DEBUG three", &secrets);
        let all = log.lines(Level::Trace);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].text, "key=<redacted>");
        assert_eq!(all[0].slot, 3);
        assert!(all[0].seq < all[1].seq);
        let warn = log.lines(Level::Warn);
        assert_eq!(warn.len(), 1);
        assert_eq!(warn[0].level, Level::Warn);
    }

    #[test]
    fn a_line_keeps_one_time_and_one_level() {
        let line = "2026-11-29T18:23:51.123456Z  WARN orc_partner_provider::live: slow read";
        assert_eq!(
            split_level(line),
            (Level::Warn, "orc_partner_provider::live: slow read")
        );
        assert_eq!(split_level("ERROR: boom"), (Level::Error, "boom"));
        assert_eq!(split_level("plain words"), (Level::Info, "plain words"));
        assert_eq!(
            split_level("2026-11-29 started"),
            (Level::Info, "2026-11-29 started"),
            "a time without a level is the app's own text"
        );
        let log = SlotLog::new(0, 4, None);
        let node = NodeId::from_counter(1);
        log.push(&node, LogSource::Stderr, None, line, &[]);
        log.push(
            &node,
            LogSource::Supervisor,
            Some(Level::Info),
            "INFO stays",
            &[],
        );
        let kept = log.lines(Level::Trace);
        assert_eq!(kept[0].text, "orc_partner_provider::live: slow read");
        assert_eq!(kept[0].level, Level::Warn);
        assert_eq!(
            kept[1].text, "INFO stays",
            "a line with its level given is kept whole"
        );
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let text = cut("é".repeat(MAX_LINE_BYTES));
        assert!(text.len() <= MAX_LINE_BYTES + '…'.len_utf8());
        assert!(text.ends_with('…'));
    }
}
