//! Evaluating an app file: Pkl in pure Rust, then the checker, with every problem placed on
//! its file and line.
//!
//! The file amends [`MODULE_URI`](crate::schema::MODULE_URI). orc serves that module from
//! memory, in its untyped form ([`loose_module`]), so a value of the wrong type or shape
//! still evaluates and reaches [`crate::check`], which names the field; [`locate`] finds
//! the field's line in the file's tokens. The file may read other files and environment
//! variables; it may not reach a network or a package.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use pklr::{EvalCapabilities, Evaluator, FetchBudget};

use crate::check::{FieldPath, Problem, check, normalize};
use crate::schema::{loose_module, typed_module};
use crate::spec::AppSpec;

/// The directory part of the module URI as it appears inside a path once the evaluator has
/// joined it to the importing file's directory.
const VIRTUAL_DIR: &str = "modulepath:/orc/";

/// A problem in an app file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file as the user named it.
    pub file: String,
    /// The 1-based line, when orc found it.
    pub line: Option<usize>,
    /// The field and what is wrong with it.
    pub problem: Problem,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.problem),
            None => write!(f, "{}: {}", self.file, self.problem),
        }
    }
}

/// An app file that did not evaluate or check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct AppFileError {
    /// Every problem, in the order of the file.
    pub problems: Vec<Located>,
}

/// Evaluates and checks the app file at `path`.
pub fn load(path: &Path) -> Result<AppSpec, AppFileError> {
    let (value, source) = evaluate(path)?;
    check(&value).map_err(|invalid| place(path, &source, invalid.problems))
}

/// Evaluates the app file at `path` and returns it as `pkl eval -f json` would render it
/// against the typed schema (defaults filled, nulls left out), for comparing with `pkl`.
pub fn load_json(path: &Path) -> Result<serde_json::Value, AppFileError> {
    let (value, source) = evaluate(path)?;
    let (normalized, problems) = normalize(&value);
    if problems.is_empty() {
        Ok(normalized)
    } else {
        Err(place(path, &source, problems))
    }
}

fn evaluate(path: &Path) -> Result<(serde_json::Value, String), AppFileError> {
    let shown = path.display().to_string();
    let whole = |message: String, line: Option<usize>| AppFileError {
        problems: vec![Located {
            file: shown.clone(),
            line,
            problem: Problem {
                field: String::new(),
                message,
            },
        }],
    };
    let source = std::fs::read_to_string(path)
        .map_err(|error| whole(format!("cannot read it: {error}"), None))?;
    let mut evaluator = Evaluator::with_capabilities(Host);
    evaluator.set_allowed_resources(vec!["file:".into(), "env:".into(), "prop:".into()]);
    evaluator.set_offline(true);
    evaluator.set_base_path(path.parent().unwrap_or(Path::new(".")));
    let value = evaluator.eval_file(path).map_err(|error| {
        let (message, line) = describe(&error, &source);
        whole(message, line)
    })?;
    let json = value
        .try_to_json()
        .map_err(|error| whole(describe(&error, &source).0, None))?;
    Ok((json, source))
}

/// An evaluator error in words, and its line when it has an offset in this file.
fn describe(error: &pklr::Error, source: &str) -> (String, Option<usize>) {
    match error {
        pklr::Error::Lex {
            offset, message, ..
        }
        | pklr::Error::Parse {
            offset, message, ..
        } => (message.clone(), Some(line_of(source, *offset))),
        pklr::Error::Eval(message) => (message.clone(), None),
        pklr::Error::ImportNotFound(what) => (format!("cannot find the module {what}"), None),
        other => (other.to_string(), None),
    }
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn place(path: &Path, source: &str, problems: Vec<Problem>) -> AppFileError {
    let lines = locate(source);
    let mut located: Vec<Located> = problems
        .into_iter()
        .map(|problem| {
            let line = FieldPath::parse(&problem.field).and_then(|field| {
                // The deepest written part of the field: a default that is wrong is on the
                // object that holds it.
                (0..=field.0.len())
                    .rev()
                    .find_map(|n| lines.get(&FieldPath(field.0[..n].to_vec())).copied())
            });
            Located {
                file: path.display().to_string(),
                line,
                problem,
            }
        })
        .collect();
    located.sort_by_key(|l| (l.line.unwrap_or(0), l.problem.field.clone()));
    AppFileError { problems: located }
}

/// The line each field of an app file is written on, found from its tokens: a property
/// (`name =`, `name {`) or an entry (`["key"] =`, `["key"] {`) inside the bodies that
/// enclose it.
pub fn locate(source: &str) -> BTreeMap<FieldPath, usize> {
    use pklr::lexer::TokenKind as T;
    let mut lines = BTreeMap::new();
    let Ok(tokens) = pklr::lexer::lex(source) else {
        return lines;
    };
    // The path of each open body; `None` for a body that is not a field's (a `new { }` in a
    // listing, a lambda).
    let mut stack: Vec<Option<FieldPath>> = vec![Some(FieldPath::root())];
    // The field just named and not yet given its value or body.
    let mut pending: Option<FieldPath> = None;
    let mut listing_index: Vec<usize> = vec![0];
    let kind = |i: usize| tokens.get(i).map(|t| &t.kind);
    let mut i = 0;
    while i < tokens.len() {
        let here = stack.last().cloned().flatten();
        match &tokens[i].kind {
            T::Ident(name) if matches!(kind(i + 1), Some(T::LBrace | T::Equals)) => {
                let after_dot = i > 0 && matches!(kind(i - 1), Some(T::Dot | T::KwNew));
                if !after_dot && let Some(base) = &here {
                    let path = base.property(name);
                    lines
                        .entry(path.clone())
                        .or_insert(line_of(source, tokens[i].offset));
                    pending = Some(path);
                }
            }
            T::LBracket => {
                if let (Some(T::StringLit(key)), Some(T::RBracket)) = (kind(i + 1), kind(i + 2))
                    && matches!(kind(i + 3), Some(T::LBrace | T::Equals))
                    && let Some(base) = &here
                {
                    let path = base.key(key);
                    lines
                        .entry(path.clone())
                        .or_insert(line_of(source, tokens[i].offset));
                    pending = Some(path);
                    i += 3;
                    continue;
                }
            }
            T::StringLit(_) | T::IntLit(_) | T::FloatLit(_) | T::BoolLit(_)
                if pending.is_none() =>
            {
                // An element of a listing body.
                if let (Some(base), Some(index)) = (&here, listing_index.last_mut()) {
                    lines
                        .entry(base.index(*index))
                        .or_insert(line_of(source, tokens[i].offset));
                    *index += 1;
                }
            }
            T::LBrace => {
                stack.push(pending.take());
                listing_index.push(0);
            }
            T::RBrace => {
                if stack.len() > 1 {
                    stack.pop();
                    listing_index.pop();
                }
                pending = None;
            }
            T::Equals | T::KwNew => {}
            T::Ident(_) | T::Dot | T::Lt | T::Gt | T::Comma if pending.is_some() => {
                // `= new Type<…> {`: the body that follows is still the pending field's.
            }
            _ => pending = None,
        }
        i += 1;
    }
    lines
}

/// The host side of evaluation: the real file system and environment, the schema from
/// memory, no network.
#[derive(Debug, Default)]
struct Host;

impl Host {
    fn schema_file(path: &Path) -> Option<String> {
        let text = path.to_string_lossy();
        let at = text.find(VIRTUAL_DIR)?;
        match &text[at + VIRTUAL_DIR.len()..] {
            "App.pkl" => Some(loose_module()),
            "TypedApp.pkl" => Some(typed_module()),
            _ => None,
        }
    }
}

fn io(path: &Path, error: std::io::Error) -> pklr::Error {
    pklr::Error::Io(path.to_path_buf(), error)
}

fn no_network(url: &str) -> pklr::Error {
    pklr::Error::Unsupported(format!(
        "an app file cannot read from a network ({url}); keep what it needs beside it"
    ))
}

impl EvalCapabilities for Host {
    fn read_to_string(&mut self, path: &Path) -> pklr::Result<String> {
        match Self::schema_file(path) {
            Some(text) => Ok(text),
            None => std::fs::read_to_string(path).map_err(|e| io(path, e)),
        }
    }

    fn read_bytes(&mut self, path: &Path) -> pklr::Result<Vec<u8>> {
        match Self::schema_file(path) {
            Some(text) => Ok(text.into_bytes()),
            None => std::fs::read(path).map_err(|e| io(path, e)),
        }
    }

    fn path_exists(&mut self, path: &Path) -> pklr::Result<bool> {
        Ok(Self::schema_file(path).is_some() || path.exists())
    }

    fn canonicalize(&mut self, path: &Path) -> pklr::Result<PathBuf> {
        if Self::schema_file(path).is_some() {
            return Ok(path.to_path_buf());
        }
        std::fs::canonicalize(path).map_err(|e| io(path, e))
    }

    fn create_dir_all(&mut self, path: &Path) -> pklr::Result<()> {
        Err(pklr::Error::Unsupported(format!(
            "an app file cannot create {}",
            path.display()
        )))
    }

    fn write_atomic(&mut self, path: &Path, _bytes: &[u8]) -> pklr::Result<()> {
        Err(pklr::Error::Unsupported(format!(
            "an app file cannot write {}",
            path.display()
        )))
    }

    fn remove_file(&mut self, path: &Path) -> pklr::Result<()> {
        Err(pklr::Error::Unsupported(format!(
            "an app file cannot remove {}",
            path.display()
        )))
    }

    fn read_env(&mut self, name: &str) -> pklr::Result<Option<String>> {
        Ok(std::env::var(name).ok())
    }

    fn fetch_text(&mut self, url: &str) -> pklr::Result<String> {
        Err(no_network(url))
    }

    fn fetch_bytes(&mut self, url: &str) -> pklr::Result<Vec<u8>> {
        Err(no_network(url))
    }

    fn fetch_text_many(
        &mut self,
        urls: &[String],
        _budget: &FetchBudget,
    ) -> Vec<pklr::Result<String>> {
        urls.iter().map(|url| Err(no_network(url))).collect()
    }

    fn fetch_bytes_many(
        &mut self,
        urls: &[String],
        _budget: &FetchBudget,
    ) -> Vec<pklr::Result<Vec<u8>>> {
        urls.iter().map(|url| Err(no_network(url))).collect()
    }

    fn temp_dir(&mut self, prefix: &str) -> pklr::Result<PathBuf> {
        Err(pklr::Error::Unsupported(format!(
            "an app file cannot make a temporary directory ({prefix})"
        )))
    }

    fn glob(&mut self, base: &Path, pattern: &str) -> pklr::Result<Vec<PathBuf>> {
        Err(pklr::Error::Unsupported(format!(
            "an app file cannot list files ({pattern} in {})",
            base.display()
        )))
    }
}
