//! The region map: region classes, each an ordered list of neutral sites on cloud locations.
//!
//! Invariants of a parsed [`RegionMap`]: class ids and site names follow [`super::check_name`];
//! every class has a title and at least one site; no site name is also a class id; no site
//! name is used twice; no two sites map to the same cloud location. Site order within a class
//! is kept: it breaks price ties.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{MapError, MapProblem, Problems, check_name, check_title, excerpt, parse_json};
use crate::ids::{ClassId, Cloud, LocationId, SiteName};

/// The built-in region map.
pub const BUILTIN_REGIONS: &str = r#"{
  "us-east": {
    "title": "US East",
    "sites": [{ "us-east-a": "hetzner:ash" }, { "us-east-b": "vultr:ewr" }]
  },
  "us-west": {
    "title": "US West",
    "sites": [{ "us-west-a": "hetzner:hil" }, { "us-west-b": "vultr:sea" }]
  },
  "eu-central": {
    "title": "Europe Central",
    "sites": [
      { "eu-central-a": "hetzner:fsn1" },
      { "eu-central-b": "hetzner:nbg1" },
      { "eu-central-c": "vultr:fra" }
    ]
  },
  "eu-nordic": {
    "title": "Europe Nordic",
    "sites": [{ "eu-nordic-a": "hetzner:hel1" }, { "eu-nordic-b": "vultr:sto" }]
  },
  "ap-southeast": {
    "title": "Asia Southeast",
    "sites": [{ "ap-southeast-a": "hetzner:sin" }, { "ap-southeast-b": "vultr:sgp" }]
  }
}"#;

/// One site: a neutral name on one cloud location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub name: SiteName,
    pub cloud: Cloud,
    pub location: LocationId,
}

/// One region class: its tenant-visible title and its sites in tie-break order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionClass {
    pub title: String,
    pub sites: Vec<Site>,
}

/// A validated region map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionMap {
    classes: BTreeMap<ClassId, RegionClass>,
}

impl RegionMap {
    /// The built-in map.
    pub fn builtin() -> RegionMap {
        // The built-in text is checked by a test; an error here cannot reach an operator.
        RegionMap::parse(BUILTIN_REGIONS).unwrap_or_else(|_| RegionMap {
            classes: BTreeMap::new(),
        })
    }

    /// Parses and checks the JSON text of the `regions` param.
    pub fn parse(text: &str) -> Result<RegionMap, Vec<MapError>> {
        let value = parse_json(text)?;
        Self::from_value(&value)
    }

    fn from_value(value: &Value) -> Result<RegionMap, Vec<MapError>> {
        let mut problems = Problems::default();
        let Some(object) = value.as_object() else {
            problems.push("$", MapProblem::WrongType { expected: "object" });
            return Err(problems.0);
        };
        if object.is_empty() {
            problems.push("$", MapProblem::Empty);
        }
        let mut classes = BTreeMap::new();
        for (class_id, class_value) in object {
            if let Err(problem) = check_name(class_id, false) {
                problems.push(
                    "$",
                    MapProblem::BadName {
                        value: excerpt(class_id),
                        problem,
                    },
                );
                continue;
            }
            let class = parse_class(&mut problems, class_id, class_value);
            // check_name refused an empty id above.
            if let Ok(id) = ClassId::new(class_id.clone()) {
                classes.insert(id, class);
            }
        }
        check_cross_rules(&mut problems, &classes);
        problems.finish(RegionMap { classes })
    }

    /// The classes in id order.
    pub fn classes(&self) -> impl Iterator<Item = (&ClassId, &RegionClass)> {
        self.classes.iter()
    }

    /// One class by id.
    pub fn class(&self, id: &str) -> Option<&RegionClass> {
        self.classes.get(id)
    }

    /// Finds a site by name with its class.
    pub fn site(&self, name: &str) -> Option<(&ClassId, &Site)> {
        self.classes.iter().find_map(|(id, class)| {
            class
                .sites
                .iter()
                .find(|s| s.name.as_str() == name)
                .map(|s| (id, s))
        })
    }

    /// Every site of every class, classes in id order, sites in list order.
    pub fn sites(&self) -> impl Iterator<Item = (&ClassId, &Site)> {
        self.classes
            .iter()
            .flat_map(|(id, class)| class.sites.iter().map(move |s| (id, s)))
    }

    /// The normalised JSON form: pretty, class ids sorted, site order kept.
    pub fn to_normalised_json(&self) -> String {
        let mut out = Map::new();
        for (id, class) in &self.classes {
            let sites: Vec<Value> = class
                .sites
                .iter()
                .map(|s| {
                    let mut entry = Map::new();
                    entry.insert(
                        s.name.to_string(),
                        Value::String(format!("{}:{}", s.cloud, s.location)),
                    );
                    Value::Object(entry)
                })
                .collect();
            let mut c = Map::new();
            c.insert("title".to_string(), Value::String(class.title.clone()));
            c.insert("sites".to_string(), Value::Array(sites));
            out.insert(id.to_string(), Value::Object(c));
        }
        serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default()
    }
}

fn parse_class(problems: &mut Problems, class_id: &str, value: &Value) -> RegionClass {
    let at = class_id.to_string();
    let mut class = RegionClass {
        title: String::new(),
        sites: Vec::new(),
    };
    let Some(object) = value.as_object() else {
        problems.push(&at, MapProblem::WrongType { expected: "object" });
        return class;
    };
    for key in object.keys() {
        if key != "title" && key != "sites" {
            problems.push(
                format!("{at}.{}", excerpt(key)),
                MapProblem::UnknownField {
                    known: "title, sites",
                },
            );
        }
    }
    class.title = check_title(problems, &format!("{at}.title"), object.get("title"));
    match object.get("sites") {
        None => problems.push(format!("{at}.sites"), MapProblem::Missing),
        Some(Value::Array(entries)) => {
            if entries.is_empty() {
                problems.push(format!("{at}.sites"), MapProblem::Empty);
            }
            for (i, entry) in entries.iter().enumerate() {
                if let Some(site) = parse_site(problems, &format!("{at}.sites[{i}]"), entry) {
                    class.sites.push(site);
                }
            }
        }
        Some(_) => problems.push(
            format!("{at}.sites"),
            MapProblem::WrongType { expected: "array" },
        ),
    }
    class
}

fn parse_site(problems: &mut Problems, at: &str, entry: &Value) -> Option<Site> {
    let Some((name, target)) = entry
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        problems.push(at, MapProblem::SiteEntryShape);
        return None;
    };
    let mut ok = true;
    if let Err(problem) = check_name(name, false) {
        problems.push(
            at,
            MapProblem::BadName {
                value: excerpt(name),
                problem,
            },
        );
        ok = false;
    }
    let Some(target) = target.as_str() else {
        problems.push(
            format!("{at}.{}", excerpt(name)),
            MapProblem::WrongType { expected: "string" },
        );
        return None;
    };
    let parsed = target.split_once(':').and_then(|(cloud, location)| {
        let cloud = Cloud::parse(cloud)?;
        check_name(location, false).ok()?;
        Some((cloud, location))
    });
    let Some((cloud, location)) = parsed else {
        problems.push(
            format!("{at}.{}", excerpt(name)),
            MapProblem::BadTarget(excerpt(target)),
        );
        return None;
    };
    // Both names passed check_name, which refuses empty ones.
    let (Ok(name), Ok(location)) = (SiteName::new(name.clone()), LocationId::new(location)) else {
        return None;
    };
    ok.then_some(Site {
        name,
        cloud,
        location,
    })
}

fn check_cross_rules(problems: &mut Problems, classes: &BTreeMap<ClassId, RegionClass>) {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut targets: BTreeMap<(Cloud, &str), &str> = BTreeMap::new();
    for (class_id, class) in classes {
        for site in &class.sites {
            let name = site.name.as_str();
            if classes.contains_key(name) {
                problems.push(class_id, MapProblem::SiteIsClass(name.to_string()));
            }
            if let Some(first_class) = names.get(name) {
                problems.push(
                    class_id,
                    MapProblem::DuplicateSite {
                        site: name.to_string(),
                        first_class: first_class.to_string(),
                    },
                );
            } else {
                names.insert(name, class_id.as_str());
            }
            let key = (site.cloud, site.location.as_str());
            if let Some(first_site) = targets.get(&key) {
                problems.push(
                    class_id,
                    MapProblem::DuplicateLocation {
                        target: format!("{}:{}", site.cloud, site.location),
                        first_site: first_site.to_string(),
                    },
                );
            } else {
                targets.insert(key, name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<MapProblem> {
        RegionMap::parse(text)
            .unwrap_err()
            .into_iter()
            .map(|e| e.problem)
            .collect()
    }

    #[test]
    fn builtin_map_is_exactly_the_documented_one() {
        let map = RegionMap::parse(BUILTIN_REGIONS).unwrap();
        let listed: Vec<String> = map
            .sites()
            .map(|(c, s)| format!("{c}/{}={}:{}", s.name, s.cloud, s.location))
            .collect();
        assert_eq!(
            listed,
            [
                "ap-southeast/ap-southeast-a=hetzner:sin",
                "ap-southeast/ap-southeast-b=vultr:sgp",
                "eu-central/eu-central-a=hetzner:fsn1",
                "eu-central/eu-central-b=hetzner:nbg1",
                "eu-central/eu-central-c=vultr:fra",
                "eu-nordic/eu-nordic-a=hetzner:hel1",
                "eu-nordic/eu-nordic-b=vultr:sto",
                "us-east/us-east-a=hetzner:ash",
                "us-east/us-east-b=vultr:ewr",
                "us-west/us-west-a=hetzner:hil",
                "us-west/us-west-b=vultr:sea",
            ]
        );
        assert_eq!(map.class("eu-central").unwrap().title, "Europe Central");
        assert!(map.class("eu-west").is_none());
        assert_eq!(RegionMap::builtin(), map);
    }

    #[test]
    fn normalised_form_round_trips() {
        let map = RegionMap::builtin();
        let text = map.to_normalised_json();
        assert_eq!(RegionMap::parse(&text).unwrap(), map);
        assert!(text.contains("\"eu-central-a\": \"hetzner:fsn1\""));
    }

    #[test]
    fn each_rule_is_enforced() {
        assert!(matches!(
            problems(r#"{"eu": {"title": "E", "sites": [{"eu": "vultr:fra"}]}}"#)[..],
            [MapProblem::SiteIsClass(_)]
        ));
        assert!(matches!(
            problems(
                r#"{"a": {"title": "A", "sites": [{"s1": "vultr:fra"}]},
                    "b": {"title": "B", "sites": [{"s1": "vultr:ams"}]}}"#
            )[..],
            [MapProblem::DuplicateSite { .. }]
        ));
        assert!(matches!(
            problems(
                r#"{"a": {"title": "A", "sites": [{"s1": "vultr:fra"}, {"s2": "vultr:fra"}]}}"#
            )[..],
            [MapProblem::DuplicateLocation { .. }]
        ));
        assert!(matches!(
            problems(r#"{"a": {"title": "A", "sites": [{"s1": "aws:fra"}]}}"#)[..],
            [MapProblem::BadTarget(_)]
        ));
        assert!(matches!(
            problems(r#"{"A": {"title": "A", "sites": [{"s1": "vultr:fra"}]}}"#)[..],
            [MapProblem::BadName { .. }]
        ));
        assert!(matches!(
            problems(r#"{"a": {"title": "", "sites": [], "x": 1}}"#)[..],
            [
                MapProblem::UnknownField { .. },
                MapProblem::Empty,
                MapProblem::Empty
            ]
        ));
        assert!(matches!(
            problems(r#"{"a": {"title": "A", "sites": [{"s1": "vultr:fra", "s2": "vultr:ams"}]}}"#)
                [..],
            [MapProblem::SiteEntryShape]
        ));
        assert!(matches!(
            problems("[1]")[..],
            [MapProblem::WrongType { .. }]
        ));
        assert!(matches!(problems("{")[..], [MapProblem::NotJson(_)]));
    }

    #[test]
    fn every_problem_is_reported_not_only_the_first() {
        let errors = RegionMap::parse(
            r#"{"Bad": {}, "ok": {"title": "T", "sites": [{"x-": "vultr:fra"}, {"y": "nowhere"}]}}"#,
        )
        .unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(text[1].starts_with("ok.sites[0]"), "{text:?}");
    }

    #[test]
    fn the_seed_example_with_an_added_class_is_accepted() {
        let text = BUILTIN_REGIONS.replacen(
            "\"eu-nordic\"",
            "\"eu-west\": {\"title\": \"Europe West\", \"sites\": [{ \"eu-west-a\": \"vultr:ams\" }]},\n  \"eu-nordic\"",
            1,
        );
        let map = RegionMap::parse(&text).unwrap();
        assert_eq!(
            map.class("eu-west").unwrap().sites[0].location.as_str(),
            "ams"
        );
    }
}
