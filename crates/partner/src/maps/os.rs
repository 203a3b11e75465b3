//! The OS map: router OS ids tenants pick, each with a title and, per cloud, a selector that
//! finds the image in that cloud's live catalog.
//!
//! A selector names the cloud's own image family plus exactly one of `id` (an exact image id;
//! on Hetzner the image name is accepted too) or `version` (a whole word of the image title).
//! Among several images that match, the plainest wins: fewest words in the title, then the
//! shortest title, then the smallest id, so "Windows 2022 Standard x64" beats "Windows Core
//! 2022 Standard x64". An OS without a selector for a cloud never routes there.
//!
//! The built-in selectors were checked against the seed catalogs of both clouds. Where the
//! seed catalogs carry no image yet (Ubuntu 26.04 on both clouds), the built-in map keeps the
//! selector the real cloud will need once it publishes the image.

use std::collections::BTreeMap;

use orc_common::Architecture;
use serde_json::{Map, Value};

use super::{MapError, MapProblem, Problems, check_name, check_title, excerpt, parse_json};
use crate::catalog::Image;
use crate::ids::{Cloud, OsId};

/// The built-in OS map.
pub const BUILTIN_OS_MAP: &str = r#"{
  "ubuntu-22.04": {
    "title": "Ubuntu 22.04 LTS",
    "vultr": { "family": "ubuntu", "version": "22.04" },
    "hetzner": { "family": "ubuntu", "version": "22.04" }
  },
  "ubuntu-24.04": {
    "title": "Ubuntu 24.04 LTS",
    "vultr": { "family": "ubuntu", "version": "24.04" },
    "hetzner": { "family": "ubuntu", "version": "24.04" }
  },
  "ubuntu-26.04": {
    "title": "Ubuntu 26.04 LTS",
    "vultr": { "family": "ubuntu", "version": "26.04" },
    "hetzner": { "family": "ubuntu", "version": "26.04" }
  },
  "debian-12": {
    "title": "Debian 12",
    "hetzner": { "family": "debian", "version": "12" }
  },
  "debian-13": {
    "title": "Debian 13",
    "vultr": { "family": "debian", "version": "13" },
    "hetzner": { "family": "debian", "version": "13" }
  },
  "alma-9": {
    "title": "AlmaLinux 9",
    "vultr": { "family": "almalinux", "version": "9" },
    "hetzner": { "family": "alma", "version": "9" }
  },
  "alma-10": {
    "title": "AlmaLinux 10",
    "vultr": { "family": "almalinux", "version": "10" },
    "hetzner": { "family": "alma", "version": "10" }
  },
  "rocky-9": {
    "title": "Rocky Linux 9",
    "vultr": { "family": "rockylinux", "version": "9" },
    "hetzner": { "family": "rocky", "version": "9" }
  },
  "rocky-10": {
    "title": "Rocky Linux 10",
    "vultr": { "family": "rockylinux", "version": "10" },
    "hetzner": { "family": "rocky", "version": "10" }
  },
  "windows-2022": {
    "title": "Windows Server 2022",
    "vultr": { "family": "windows", "id": "501" }
  },
  "windows-2025": {
    "title": "Windows Server 2025",
    "vultr": { "family": "windows", "id": "2514" }
  }
}"#;

/// The title of the image every site gateway boots, whatever the OS map says.
pub const GATEWAY_OS_TITLE: &str = "Ubuntu 24.04 LTS";

/// The image a site gateway boots on `cloud`: Ubuntu 24.04, chosen by a built-in selector so
/// that an operator's OS map can neither break nor change gateways.
pub fn gateway_image_selector(cloud: Cloud) -> ImageSelector {
    let family = match cloud {
        Cloud::Hetzner | Cloud::Vultr => "ubuntu",
    };
    ImageSelector {
        family: family.to_string(),
        pick: ImagePick::Version("24.04".to_string()),
    }
}

/// How a selector picks among a family's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImagePick {
    /// An exact image id (or, on Hetzner, image name).
    Id(String),
    /// A whole word that must appear in the image title.
    Version(String),
}

/// One cloud's selector for one OS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSelector {
    pub family: String,
    pub pick: ImagePick,
}

impl ImageSelector {
    /// The image this selector picks from `images` for `arch`, if any.
    pub fn resolve<'a>(&self, images: &'a [Image], arch: Architecture) -> Option<&'a Image> {
        let mut best: Option<(&Image, (usize, usize))> = None;
        for image in images {
            if image.arch != arch || image.family != self.family {
                continue;
            }
            let hit = match &self.pick {
                ImagePick::Id(id) => {
                    image.id.as_str() == id.as_str() || image.name.as_deref() == Some(id.as_str())
                }
                ImagePick::Version(version) => title_words(&image.title).any(|w| w == version),
            };
            if !hit {
                continue;
            }
            let key = (title_words(&image.title).count(), image.title.len());
            let better = match &best {
                None => true,
                Some((held, held_key)) => {
                    (key, &image.title, image.id.as_str())
                        < (*held_key, &held.title, held.id.as_str())
                }
            };
            if better {
                best = Some((image, key));
            }
        }
        best.map(|(image, _)| image)
    }

    fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("family".to_string(), Value::String(self.family.clone()));
        match &self.pick {
            ImagePick::Id(id) => out.insert("id".to_string(), Value::String(id.clone())),
            ImagePick::Version(v) => out.insert("version".to_string(), Value::String(v.clone())),
        };
        Value::Object(out)
    }
}

fn title_words(title: &str) -> impl Iterator<Item = &str> {
    title
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
        .filter(|w| !w.is_empty())
}

/// One OS of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsEntry {
    pub title: String,
    pub selectors: BTreeMap<Cloud, ImageSelector>,
}

/// A validated OS map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsMap {
    entries: BTreeMap<OsId, OsEntry>,
}

impl OsMap {
    /// The built-in map.
    pub fn builtin() -> OsMap {
        // The built-in text is checked by a test; an error here cannot reach an operator.
        OsMap::parse(BUILTIN_OS_MAP).unwrap_or_else(|_| OsMap {
            entries: BTreeMap::new(),
        })
    }

    /// Parses and checks the JSON text of the `os_map` param.
    pub fn parse(text: &str) -> Result<OsMap, Vec<MapError>> {
        let value = parse_json(text)?;
        let mut problems = Problems::default();
        let Some(object) = value.as_object() else {
            problems.push("$", MapProblem::WrongType { expected: "object" });
            return Err(problems.0);
        };
        if object.is_empty() {
            problems.push("$", MapProblem::Empty);
        }
        let mut entries = BTreeMap::new();
        for (os_id, entry) in object {
            if let Err(problem) = check_name(os_id, true) {
                problems.push(
                    "$",
                    MapProblem::BadName {
                        value: excerpt(os_id),
                        problem,
                    },
                );
                continue;
            }
            let parsed = parse_entry(&mut problems, os_id, entry);
            // check_name refused an empty id above.
            if let Ok(id) = OsId::new(os_id.clone()) {
                entries.insert(id, parsed);
            }
        }
        problems.finish(OsMap { entries })
    }

    /// Every OS in id order.
    pub fn entries(&self) -> impl Iterator<Item = (&OsId, &OsEntry)> {
        self.entries.iter()
    }

    /// One OS by id.
    pub fn get(&self, id: &str) -> Option<&OsEntry> {
        self.entries.get(id)
    }

    /// The normalised JSON form: pretty, keys sorted, every `id` written as a string.
    pub fn to_normalised_json(&self) -> String {
        let mut out = Map::new();
        for (id, entry) in &self.entries {
            let mut e = Map::new();
            e.insert("title".to_string(), Value::String(entry.title.clone()));
            for (cloud, selector) in &entry.selectors {
                e.insert(cloud.to_string(), selector.to_value());
            }
            out.insert(id.to_string(), Value::Object(e));
        }
        serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default()
    }
}

fn parse_entry(problems: &mut Problems, os_id: &str, value: &Value) -> OsEntry {
    let mut entry = OsEntry {
        title: String::new(),
        selectors: BTreeMap::new(),
    };
    let Some(object) = value.as_object() else {
        problems.push(os_id, MapProblem::WrongType { expected: "object" });
        return entry;
    };
    for (key, v) in object {
        if key == "title" {
            continue;
        }
        let at = format!("{os_id}.{}", excerpt(key));
        match Cloud::parse(key) {
            Some(cloud) => {
                if let Some(selector) = parse_selector(problems, &at, v) {
                    entry.selectors.insert(cloud, selector);
                }
            }
            None => problems.push(
                at,
                MapProblem::UnknownField {
                    known: "title, vultr, hetzner",
                },
            ),
        }
    }
    entry.title = check_title(problems, &format!("{os_id}.title"), object.get("title"));
    let has_cloud_key = object.keys().any(|k| Cloud::parse(k).is_some());
    if !has_cloud_key {
        problems.push(os_id, MapProblem::NoSelector);
    }
    entry
}

fn parse_selector(problems: &mut Problems, at: &str, value: &Value) -> Option<ImageSelector> {
    let Some(object) = value.as_object() else {
        problems.push(at, MapProblem::WrongType { expected: "object" });
        return None;
    };
    let before = problems.0.len();
    for key in object.keys() {
        if !matches!(key.as_str(), "family" | "id" | "version") {
            problems.push(
                format!("{at}.{}", excerpt(key)),
                MapProblem::UnknownField {
                    known: "family, id, version",
                },
            );
        }
    }
    let family = match object.get("family") {
        None => {
            problems.push(format!("{at}.family"), MapProblem::Missing);
            String::new()
        }
        Some(Value::String(f)) => {
            let ok = !f.is_empty()
                && f.len() <= 40
                && f.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
                });
            if !ok {
                problems.push(
                    format!("{at}.family"),
                    MapProblem::BadName {
                        value: excerpt(f),
                        problem: super::NameProblem::BadChar(
                            f.chars().next().unwrap_or(' '),
                            "1 to 40 lowercase letters, digits, dots, dashes and underscores",
                        ),
                    },
                );
            }
            f.clone()
        }
        Some(_) => {
            problems.push(
                format!("{at}.family"),
                MapProblem::WrongType { expected: "string" },
            );
            String::new()
        }
    };
    let word = |problems: &mut Problems, field: &str, v: &Value| -> Option<String> {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_u64() => n.to_string(),
            _ => {
                problems.push(
                    format!("{at}.{field}"),
                    MapProblem::WrongType { expected: "string" },
                );
                return None;
            }
        };
        if text.is_empty() || text.len() > 100 || text.chars().any(char::is_whitespace) {
            problems.push(
                format!("{at}.{field}"),
                MapProblem::NotOneWord(excerpt(&text)),
            );
            return None;
        }
        Some(text)
    };
    let pick = match (object.get("id"), object.get("version")) {
        (Some(id), None) => word(problems, "id", id).map(ImagePick::Id),
        (None, Some(version)) => word(problems, "version", version).map(ImagePick::Version),
        (Some(_), Some(_)) | (None, None) => {
            problems.push(at, MapProblem::SelectorNeedsOne);
            None
        }
    };
    if problems.0.len() != before {
        return None;
    }
    pick.map(|pick| ImageSelector { family, pick })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ImageId;

    fn image(id: &str, family: &str, title: &str) -> Image {
        Image {
            id: ImageId::new(id).unwrap(),
            name: None,
            family: family.to_string(),
            title: title.to_string(),
            arch: Architecture::X86_64,
        }
    }

    #[test]
    fn builtin_map_lists_every_os_of_the_guide() {
        let map = OsMap::parse(BUILTIN_OS_MAP).unwrap();
        let ids: Vec<&str> = map.entries().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "alma-10",
                "alma-9",
                "debian-12",
                "debian-13",
                "rocky-10",
                "rocky-9",
                "ubuntu-22.04",
                "ubuntu-24.04",
                "ubuntu-26.04",
                "windows-2022",
                "windows-2025",
            ]
        );
        for (id, entry) in map.entries() {
            if id.as_str().starts_with("windows") {
                assert_eq!(entry.selectors.keys().collect::<Vec<_>>(), [&Cloud::Vultr]);
            }
        }
        assert_eq!(OsMap::parse(&map.to_normalised_json()).unwrap(), map);
    }

    #[test]
    fn plainest_whole_word_match_wins() {
        let images = [
            image("521", "windows", "Windows Core 2022 Standard x64"),
            image("1765", "windows", "Windows 2022 Datacenter x64"),
            image("501", "windows", "Windows 2022 Standard x64"),
            image("448", "rockylinux", "Rocky Linux x64"),
            image("1869", "rockylinux", "Rocky Linux 9 x64"),
            image("1", "ubuntu", "Ubuntu 24.04.1 LTS x64"),
        ];
        let version = |family: &str, v: &str| ImageSelector {
            family: family.to_string(),
            pick: ImagePick::Version(v.to_string()),
        };
        let pick = |s: ImageSelector| {
            s.resolve(&images, Architecture::X86_64)
                .map(|i| i.id.to_string())
        };
        assert_eq!(pick(version("windows", "2022")).as_deref(), Some("501"));
        assert_eq!(pick(version("rockylinux", "9")).as_deref(), Some("1869"));
        assert_eq!(
            pick(version("ubuntu", "24.04")),
            None,
            "24.04 is not the word 24.04.1"
        );
        assert!(
            version("windows", "2022")
                .resolve(&images, Architecture::Arm64)
                .is_none()
        );
    }

    #[test]
    fn selector_rules_are_enforced() {
        let errors = OsMap::parse(
            r#"{"x": {"title": "X", "vultr": {"family": "a", "id": "1", "version": "2"}},
                "y": {"title": "Y"},
                "Z": {"title": "Z", "vultr": {"family": "a", "id": "1"}},
                "w": {"title": "W", "aws": {}, "hetzner": {"family": "b", "version": "two words"}}}"#,
        )
        .unwrap_err();
        let problems: Vec<&MapProblem> = errors.iter().map(|e| &e.problem).collect();
        assert!(
            matches!(problems[0], MapProblem::BadName { .. }),
            "{problems:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.problem == MapProblem::SelectorNeedsOne)
        );
        assert!(errors.iter().any(|e| e.problem == MapProblem::NoSelector));
        assert!(
            errors
                .iter()
                .any(|e| matches!(e.problem, MapProblem::NotOneWord(_)))
        );
        assert!(errors.iter().any(|e| e.at == "w.aws"));
    }

    #[test]
    fn numeric_ids_are_accepted_and_normalised_to_text() {
        let map =
            OsMap::parse(r#"{"w": {"title": "W", "vultr": {"family": "windows", "id": 501}}}"#)
                .unwrap();
        assert_eq!(
            map.get("w").unwrap().selectors[&Cloud::Vultr].pick,
            ImagePick::Id("501".to_string())
        );
    }
}
