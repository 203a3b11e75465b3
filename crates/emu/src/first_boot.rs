//! A server's user data as a cloud's first boot reads it: the subset of cloud-init that orc's
//! providers write and that a materialised server runs inside its namespaces.
//!
//! [`FirstBoot::parse`] turns user data into what the first boot does, in cloud-init's
//! order: files are written (`write_files`), the default user's SSH keys installed
//! (`ssh_authorized_keys`), then the user scripts run: each `#!` part in the order given,
//! then `runcmd` (cloud-init keeps `part-NNN` scripts and `runcmd` in one directory and runs
//! it in name order). Handled forms:
//!
//! - a single part: `#cloud-config` YAML, a `#!` script, or nothing;
//! - `multipart/mixed` MIME with `text/cloud-config` and `text/x-shellscript` parts, each
//!   optionally `Content-Transfer-Encoding: base64`;
//! - in a cloud-config: `ssh_authorized_keys`, `write_files` (`path`, `content`,
//!   `encoding` `text/plain` or `b64`/`base64`, `permissions` as an octal string or
//!   number, `append`), `runcmd` (shell strings or argv lists) and `disable_root`.
//!
//! What a cloud would skip with a warning (another part type, another cloud-config key, a
//! file's `owner`) is skipped and listed in [`FirstBoot::skipped`], so the console log can
//! say so; what a cloud would fail on (YAML that does not parse, a `write_files` entry
//! without a path) is an error naming the part and the field.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use yaml_rust2::{Yaml, YamlLoader};

/// What a server's first boot does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirstBoot {
    /// Files to write, in order.
    pub files: Vec<WriteFile>,
    /// `authorized_keys` lines for the image's default user, without repeats.
    pub ssh_keys: Vec<String>,
    /// `disable_root: false` was said (root may log in with the keys).
    pub root_login: bool,
    /// What runs, in order.
    pub run: Vec<Step>,
    /// What was skipped, as the console log says it (`part 2: text/x-unknown is not run`).
    pub skipped: Vec<String>,
}

/// A file the first boot writes.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteFile {
    /// An absolute path.
    pub path: String,
    pub content: Vec<u8>,
    /// Mode bits (`0o644` unless given).
    pub permissions: u32,
    /// Append to the file rather than replace it.
    pub append: bool,
}

impl std::fmt::Debug for WriteFile {
    // The content may be a secret (a join token): only its size is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteFile")
            .field("path", &self.path)
            .field("bytes", &self.content.len())
            .field("permissions", &format_args!("{:o}", self.permissions))
            .field("append", &self.append)
            .finish()
    }
}

/// One thing the first boot runs.
#[derive(Clone, PartialEq, Eq)]
pub enum Step {
    /// A `#!` script part: its interpreter line decides what runs it.
    Script { part: usize, body: String },
    /// A `runcmd` entry given as text: run with `sh -c`.
    Shell(String),
    /// A `runcmd` entry given as a list: run as it is, without a shell.
    Argv(Vec<String>),
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Script { part, body } => write!(f, "Script(part {part}, {} bytes)", body.len()),
            Step::Shell(_) => f.write_str("Shell(..)"),
            Step::Argv(argv) => write!(f, "Argv({:?}, ..)", argv.first()),
        }
    }
}

/// User data the first boot cannot use, naming the part (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FirstBootError {
    #[error("the user data is not UTF-8 text")]
    NotText,
    #[error("the multipart user data {0}")]
    Multipart(String),
    #[error("part {part}: {problem}")]
    Part { part: usize, problem: String },
}

fn part_error(part: usize, problem: impl Into<String>) -> FirstBootError {
    FirstBootError::Part {
        part,
        problem: problem.into(),
    }
}

impl FirstBoot {
    /// What the first boot does with `data`.
    pub fn parse(data: &[u8]) -> Result<FirstBoot, FirstBootError> {
        let text = std::str::from_utf8(data).map_err(|_| FirstBootError::NotText)?;
        let mut boot = FirstBoot::default();
        let mut runcmd = Vec::new();
        if let Some(boundary) = multipart_boundary(text) {
            for (i, part) in split_parts(text, &boundary)?.into_iter().enumerate() {
                boot.part(i + 1, &part, &mut runcmd)?;
            }
        } else {
            boot.body(1, text, &mut runcmd)?;
        }
        boot.run.extend(runcmd);
        Ok(boot)
    }

    /// One MIME part: its content type decides, as cloud-init's part handlers do.
    fn part(
        &mut self,
        n: usize,
        part: &Part,
        runcmd: &mut Vec<Step>,
    ) -> Result<(), FirstBootError> {
        let body = match part.encoding.as_deref() {
            None | Some("7bit") | Some("8bit") | Some("binary") => part.body.clone(),
            Some("base64") => {
                let compact: String = part.body.split_whitespace().collect();
                let bytes = STANDARD
                    .decode(compact)
                    .map_err(|_| part_error(n, "its base64 content does not decode"))?;
                String::from_utf8(bytes).map_err(|_| part_error(n, "its content is not UTF-8"))?
            }
            Some(other) => {
                return Err(part_error(
                    n,
                    format!("its transfer encoding {other:?} is not base64 or 7bit"),
                ));
            }
        };
        match part.content_type.as_str() {
            "text/cloud-config" => self.cloud_config(n, &body, runcmd),
            "text/x-shellscript" => {
                self.script(n, body);
                Ok(())
            }
            "text/plain" | "text/x-not-multipart" => self.body(n, &body, runcmd),
            other => {
                self.skipped.push(format!("part {n}: {other} is not run"));
                Ok(())
            }
        }
    }

    /// A part known by its first line (a single-part user data, or a `text/plain` part).
    fn body(&mut self, n: usize, body: &str, runcmd: &mut Vec<Step>) -> Result<(), FirstBootError> {
        let first = body.lines().next().unwrap_or("").trim_end();
        if body.trim().is_empty() {
            Ok(())
        } else if first.starts_with("#cloud-config") {
            self.cloud_config(n, body, runcmd)
        } else if first.starts_with("#!") {
            self.script(n, body.to_string());
            Ok(())
        } else {
            let what: String = first.chars().take(40).collect();
            self.skipped
                .push(format!("part {n}: a part starting {what:?} is not run"));
            Ok(())
        }
    }

    fn script(&mut self, n: usize, body: String) {
        self.run.push(Step::Script { part: n, body });
    }

    fn cloud_config(
        &mut self,
        n: usize,
        text: &str,
        runcmd: &mut Vec<Step>,
    ) -> Result<(), FirstBootError> {
        let docs = YamlLoader::load_from_str(text)
            .map_err(|e| part_error(n, format!("the cloud-config is not YAML: {e}")))?;
        let Some(doc) = docs.into_iter().next() else {
            return Ok(());
        };
        let map = match doc {
            Yaml::Hash(map) => map,
            Yaml::Null => return Ok(()),
            _ => return Err(part_error(n, "the cloud-config is not a mapping")),
        };
        for (key, value) in map {
            let Some(key) = key.as_str().map(str::to_string) else {
                return Err(part_error(n, "the cloud-config has a key that is not text"));
            };
            match key.as_str() {
                "ssh_authorized_keys" => {
                    for (i, line) in list(n, &key, value)?.into_iter().enumerate() {
                        let line = text_of(n, &format!("{key}[{i}]"), line)?;
                        let line = line.trim().to_string();
                        if !line.is_empty() && !self.ssh_keys.contains(&line) {
                            self.ssh_keys.push(line);
                        }
                    }
                }
                "disable_root" => match value {
                    Yaml::Boolean(b) => self.root_login = !b,
                    _ => return Err(part_error(n, "disable_root is not true or false")),
                },
                "write_files" => {
                    for (i, entry) in list(n, &key, value)?.into_iter().enumerate() {
                        self.files.push(write_file(n, i, entry)?);
                    }
                }
                "runcmd" => {
                    for (i, entry) in list(n, &key, value)?.into_iter().enumerate() {
                        runcmd.push(match entry {
                            Yaml::Array(items) => {
                                let mut argv = Vec::new();
                                for (j, item) in items.into_iter().enumerate() {
                                    argv.push(text_of(n, &format!("runcmd[{i}][{j}]"), item)?);
                                }
                                if argv.is_empty() {
                                    return Err(part_error(n, format!("runcmd[{i}] is empty")));
                                }
                                Step::Argv(argv)
                            }
                            other => Step::Shell(text_of(n, &format!("runcmd[{i}]"), other)?),
                        });
                    }
                }
                other => self
                    .skipped
                    .push(format!("part {n}: cloud-config key {other} is not applied")),
            }
        }
        Ok(())
    }
}

/// A list value, naming `key` when it is not one.
fn list(n: usize, key: &str, value: Yaml) -> Result<Vec<Yaml>, FirstBootError> {
    match value {
        Yaml::Array(items) => Ok(items),
        Yaml::Null => Ok(Vec::new()),
        _ => Err(part_error(n, format!("{key} is not a list"))),
    }
}

/// A scalar as text (numbers and booleans as YAML writes them), naming `field` otherwise.
fn text_of(n: usize, field: &str, value: Yaml) -> Result<String, FirstBootError> {
    match value {
        Yaml::String(s) | Yaml::Real(s) => Ok(s),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        _ => Err(part_error(n, format!("{field} is not text"))),
    }
}

fn write_file(n: usize, i: usize, entry: Yaml) -> Result<WriteFile, FirstBootError> {
    let field = |name: &str| format!("write_files[{i}].{name}");
    let Yaml::Hash(map) = entry else {
        return Err(part_error(n, format!("write_files[{i}] is not a mapping")));
    };
    let get = |name: &str| map.get(&Yaml::String(name.to_string())).cloned();
    let path = match get("path") {
        Some(v) => text_of(n, &field("path"), v)?,
        None => return Err(part_error(n, format!("{} is missing", field("path")))),
    };
    if !path.starts_with('/') || path.split('/').any(|s| s == "..") {
        return Err(part_error(
            n,
            format!("{} {path:?} is not an absolute path", field("path")),
        ));
    }
    let content = match get("content") {
        Some(v) => text_of(n, &field("content"), v)?,
        None => String::new(),
    };
    let content = match get("encoding") {
        None => content.into_bytes(),
        Some(v) => match text_of(n, &field("encoding"), v)?.as_str() {
            "text/plain" => content.into_bytes(),
            "b64" | "base64" => {
                let compact: String = content.split_whitespace().collect();
                STANDARD.decode(compact).map_err(|_| {
                    part_error(n, format!("{} does not decode as base64", field("content")))
                })?
            }
            other => {
                return Err(part_error(
                    n,
                    format!(
                        "{} {other:?} is not text/plain or b64 (gzip is not supported)",
                        field("encoding")
                    ),
                ));
            }
        },
    };
    let permissions = match get("permissions") {
        None => Some(0o644),
        // YAML reads `0600` as the integer 600 in 1.2 (and 384 in 1.1): both mean octal here
        // only as written, so an integer is read back through its decimal digits.
        Some(Yaml::Integer(i)) => parse_mode(&i.to_string()),
        Some(Yaml::String(s)) => parse_mode(&s),
        Some(_) => None,
    }
    .ok_or_else(|| part_error(n, format!("{} is not an octal mode", field("permissions"))))?;
    let append = match get("append") {
        None => false,
        Some(Yaml::Boolean(b)) => b,
        Some(_) => {
            return Err(part_error(
                n,
                format!("{} is not true or false", field("append")),
            ));
        }
    };
    Ok(WriteFile {
        path,
        content,
        permissions,
        append,
    })
}

/// `"0600"`, `"600"`, `"0o600"` → 0o600; at most `0o7777`.
fn parse_mode(text: &str) -> Option<u32> {
    let digits = text.trim().trim_start_matches("0o");
    let mode = u32::from_str_radix(digits, 8).ok()?;
    (mode <= 0o7777).then_some(mode)
}

/// One MIME part.
#[derive(Debug)]
struct Part {
    content_type: String,
    encoding: Option<String>,
    body: String,
}

/// The boundary, when the user data is a `multipart/mixed` MIME document.
fn multipart_boundary(text: &str) -> Option<String> {
    let (headers, _) = split_headers(text)?;
    let content_type = header(&headers, "content-type")?;
    if !content_type.to_ascii_lowercase().starts_with("multipart/") {
        return None;
    }
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The header block (names lower-cased, values unfolded) and what follows its blank line.
fn split_headers(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let end = text.find("\n\n").map(|i| (i, 2));
    let end_crlf = text.find("\r\n\r\n").map(|i| (i, 4));
    let (at, len) = match (end, end_crlf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in text[..at].lines() {
        let line = line.trim_end_matches('\r');
        if line.starts_with([' ', '\t']) {
            let last = headers.last_mut()?;
            last.1.push(' ');
            last.1.push_str(line.trim());
            continue;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Some((headers, &text[at + len..]))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The parts between `--boundary` lines, up to `--boundary--`.
fn split_parts(text: &str, boundary: &str) -> Result<Vec<Part>, FirstBootError> {
    let open = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut current: Option<String> = None;
    let mut closed = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\r', '\n']);
        if bare == open || bare == format!("{open}--") {
            if let Some(raw) = current.take() {
                parts.push(raw);
            }
            if bare.ends_with("--") {
                closed = true;
                break;
            }
            current = Some(String::new());
        } else if let Some(raw) = current.as_mut() {
            raw.push_str(line);
        }
    }
    if !closed {
        return Err(FirstBootError::Multipart(format!(
            "has no closing --{boundary}-- line"
        )));
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            // The line break before a boundary belongs to the boundary.
            let raw = raw
                .strip_suffix("\r\n")
                .or_else(|| raw.strip_suffix('\n'))
                .unwrap_or(&raw);
            let (headers, body) = split_headers(raw).ok_or_else(|| {
                part_error(i + 1, "has no headers (Content-Type) before its body")
            })?;
            let content_type = header(&headers, "content-type")
                .map(|v| {
                    v.split(';')
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_ascii_lowercase()
                })
                .ok_or_else(|| part_error(i + 1, "has no Content-Type"))?;
            Ok(Part {
                content_type,
                encoding: header(&headers, "content-transfer-encoding")
                    .map(|v| v.trim().to_ascii_lowercase()),
                body: body.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop";

    #[test]
    fn nothing_does_nothing() {
        assert_eq!(FirstBoot::parse(b"").unwrap(), FirstBoot::default());
        assert_eq!(FirstBoot::parse(b"  \n").unwrap(), FirstBoot::default());
    }

    #[test]
    fn a_script_alone_runs() {
        let boot = FirstBoot::parse(b"#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(
            boot.run,
            [Step::Script {
                part: 1,
                body: "#!/bin/sh\necho hi\n".into()
            }]
        );
    }

    #[test]
    fn a_cloud_config_writes_installs_and_runs() {
        let text = format!(
            "#cloud-config\n\
             disable_root: false\n\
             ssh_authorized_keys:\n  - \"{KEY}\"\n  - \"{KEY}\"\n\
             write_files:\n\
             \x20 - path: /etc/orc/zone\n    content: |\n      https://zone\n    permissions: '0600'\n\
             \x20 - path: /etc/orc/blob\n    encoding: b64\n    content: aGk=\n    permissions: 0640\n    append: true\n\
             \x20 - path: /etc/motd\n    owner: root:root\n\
             runcmd:\n  - [sh, -c, \"ip route replace default via 10.64.3.1 || true\"]\n  - echo done\n\
             packages: [curl]\n"
        );
        let boot = FirstBoot::parse(text.as_bytes()).unwrap();
        assert!(boot.root_login);
        assert_eq!(boot.ssh_keys, [KEY]);
        assert_eq!(boot.files.len(), 3);
        assert_eq!(boot.files[0].path, "/etc/orc/zone");
        assert_eq!(boot.files[0].content, b"https://zone\n");
        assert_eq!(boot.files[0].permissions, 0o600);
        assert_eq!(boot.files[1].content, b"hi");
        assert_eq!(boot.files[1].permissions, 0o640);
        assert!(boot.files[1].append);
        assert_eq!(boot.files[2].permissions, 0o644);
        assert_eq!(
            boot.run,
            [
                Step::Argv(vec![
                    "sh".into(),
                    "-c".into(),
                    "ip route replace default via 10.64.3.1 || true".into()
                ]),
                Step::Shell("echo done".into()),
            ]
        );
        assert_eq!(
            boot.skipped,
            ["part 1: cloud-config key packages is not applied"]
        );
    }

    #[test]
    fn multipart_runs_scripts_in_order_then_runcmd() {
        let encoded = STANDARD.encode("#!/bin/sh\necho second\n");
        let text = format!(
            "Content-Type: multipart/mixed; boundary=\"==b==\"\r\nMIME-Version: 1.0\r\n\r\n\
             --==b==\r\nContent-Type: text/cloud-config; charset=\"utf-8\"\r\n\r\n\
             #cloud-config\nssh_authorized_keys:\n  - \"{KEY}\"\nruncmd:\n  - echo last\n\r\n\
             --==b==\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/sh\necho first\n\r\n\
             --==b==\r\nContent-Type: text/x-shellscript\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {encoded}\r\n\
             --==b==\r\nContent-Type: text/x-include-url\r\n\r\nhttps://example.invalid/x\r\n\
             --==b==--\r\n"
        );
        let boot = FirstBoot::parse(text.as_bytes()).unwrap();
        assert_eq!(boot.ssh_keys, [KEY]);
        assert_eq!(
            boot.run,
            [
                Step::Script {
                    part: 2,
                    body: "#!/bin/sh\necho first\n".into()
                },
                Step::Script {
                    part: 3,
                    body: "#!/bin/sh\necho second\n".into()
                },
                Step::Shell("echo last".into()),
            ]
        );
        assert_eq!(boot.skipped, ["part 4: text/x-include-url is not run"]);
    }

    #[test]
    fn what_a_cloud_would_fail_on_is_named() {
        let err = |text: &str| FirstBoot::parse(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            FirstBoot::parse(&[0xff, 0xfe]).unwrap_err().to_string(),
            "the user data is not UTF-8 text"
        );
        assert!(
            err("#cloud-config\nruncmd: [unclosed\n")
                .starts_with("part 1: the cloud-config is not YAML"),
            "{}",
            err("#cloud-config\nruncmd: [unclosed\n")
        );
        assert_eq!(
            err("#cloud-config\nwrite_files:\n  - content: x\n"),
            "part 1: write_files[0].path is missing"
        );
        assert_eq!(
            err("#cloud-config\nwrite_files:\n  - path: etc/x\n"),
            "part 1: write_files[0].path \"etc/x\" is not an absolute path"
        );
        assert_eq!(
            err("#cloud-config\nwrite_files:\n  - path: /x\n    permissions: '0999'\n"),
            "part 1: write_files[0].permissions is not an octal mode"
        );
        assert_eq!(
            err("#cloud-config\nwrite_files:\n  - path: /x\n    encoding: gzip\n    content: x\n"),
            "part 1: write_files[0].encoding \"gzip\" is not text/plain or b64 (gzip is not supported)"
        );
        assert_eq!(
            err("#cloud-config\nruncmd: echo\n"),
            "part 1: runcmd is not a list"
        );
        assert_eq!(
            err(
                "Content-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n"
            ),
            "the multipart user data has no closing --x-- line"
        );
        assert_eq!(
            err("Content-Type: multipart/mixed; boundary=x\n\n--x\n#!/bin/sh\n--x--\n"),
            "part 1: has no headers (Content-Type) before its body"
        );
    }

    #[test]
    fn a_secret_file_is_never_printed() {
        let boot = FirstBoot::parse(
            b"#cloud-config\nwrite_files:\n  - path: /etc/orc/join-token\n    content: orc_join_secret\n",
        )
        .unwrap();
        let shown = format!("{boot:?}");
        assert!(!shown.contains("orc_join_secret"), "{shown}");
        assert!(shown.contains("/etc/orc/join-token"), "{shown}");
    }
}
