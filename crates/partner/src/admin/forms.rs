//! The two forms of the page, read from what the browser sent: the Quote preview (a GET
//! query) and the Validate view (a POSTed form). Each field is checked on its own, and a bad
//! field is reported with its name so the view shows the problem next to it; the rest of the
//! form keeps what was typed.

use std::collections::BTreeMap;

use orc_common::{Architecture, Shape};

use crate::ids::{ClassId, NodeId, OsId, PoolPath, SiteName, Timestamp};
use crate::params::Config;
use crate::quote::{Purpose, QuoteRequest};
use crate::validate::Drafts;

/// The most vCPUs a preview asks for.
pub const MAX_CPU: u32 = 512;
/// The most GiB of memory a preview asks for.
pub const MAX_MEM_GIB: u32 = 4096;
/// The most extra disks a preview asks for.
pub const MAX_DISKS: usize = 8;
/// The largest extra disk a preview asks for, in GiB.
pub const MAX_DISK_GIB: u32 = 16_384;
/// The longest text a field keeps (a longer one is cut and refused).
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// The node id and pool every preview quotes for; the preview reserves nothing under them.
pub const PREVIEW_NODE: &str = "admin-preview";
const PREVIEW_POOL: &str = "sys/partner/admin-preview";

/// The Quote preview's fields as typed, and what is wrong with each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviewForm {
    pub class: String,
    pub cpu: String,
    pub mem: String,
    pub arch: String,
    pub os: String,
    /// Empty: any site of the class.
    pub site: String,
    /// Comma-separated GiB sizes; empty: none.
    pub disks: String,
    /// Field name → the problem with it.
    pub errors: BTreeMap<&'static str, String>,
    /// Whether the form was sent (a first visit shows it empty, with defaults).
    pub submitted: bool,
}

impl PreviewForm {
    /// The form as a first visit shows it.
    pub fn blank(config: &Config) -> PreviewForm {
        PreviewForm {
            class: config
                .regions
                .classes()
                .next()
                .map(|(id, _)| id.to_string())
                .unwrap_or_default(),
            cpu: "2".to_string(),
            mem: "4".to_string(),
            arch: "x86_64".to_string(),
            os: if config.os_map.get("ubuntu-24.04").is_some() {
                "ubuntu-24.04".to_string()
            } else {
                config
                    .os_map
                    .entries()
                    .next()
                    .map(|(id, _)| id.to_string())
                    .unwrap_or_default()
            },
            ..PreviewForm::default()
        }
    }

    /// The problem with `field`, if any.
    pub fn error(&self, field: &str) -> Option<&str> {
        self.errors.get(field).map(String::as_str)
    }
}

fn field(query: &BTreeMap<String, String>, name: &str) -> String {
    let value = query.get(name).map_or("", |v| v.trim());
    let mut end = value.len().min(MAX_FIELD_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_string()
}

fn whole(text: &str, max: u32) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from 1 to {max}")),
    }
}

/// Reads the preview form from the query; the request to quote when every field is good.
/// An empty query is a first visit: the blank form and no request.
pub fn read_preview(
    query: &BTreeMap<String, String>,
    config: &Config,
    at: Timestamp,
) -> (PreviewForm, Option<QuoteRequest>) {
    if query.is_empty() {
        return (PreviewForm::blank(config), None);
    }
    let mut form = PreviewForm {
        class: field(query, "class"),
        cpu: field(query, "cpu"),
        mem: field(query, "mem"),
        arch: field(query, "arch"),
        os: field(query, "os"),
        site: field(query, "site"),
        disks: field(query, "disks"),
        errors: BTreeMap::new(),
        submitted: true,
    };
    if form.arch.is_empty() {
        form.arch = "x86_64".to_string();
    }
    let class = match config.regions.class(&form.class) {
        Some(class) => Some(class),
        None => {
            form.errors
                .insert("class", "is not a class of the region map".to_string());
            None
        }
    };
    let cpu = whole(&form.cpu, MAX_CPU).map_err(|e| form.errors.insert("cpu", e));
    let mem = whole(&form.mem, MAX_MEM_GIB).map_err(|e| form.errors.insert("mem", e));
    let arch = match form.arch.as_str() {
        "x86_64" => Some(Architecture::X86_64),
        "arm64" => Some(Architecture::Arm64),
        _ => {
            form.errors
                .insert("arch", "must be x86_64 or arm64".to_string());
            None
        }
    };
    if config.os_map.get(&form.os).is_none() {
        form.errors
            .insert("os", "is not an OS id of the OS map".to_string());
    }
    let site = if form.site.is_empty() {
        None
    } else if let Some(class) = class {
        if class.sites.iter().any(|s| s.name.as_str() == form.site) {
            SiteName::new(form.site.clone()).ok()
        } else {
            form.errors
                .insert("site", format!("is not a site of class {}", form.class));
            None
        }
    } else {
        None
    };
    let mut disks = Vec::new();
    if !form.disks.is_empty() {
        let items: Vec<&str> = form.disks.split(',').map(str::trim).collect();
        if items.len() > MAX_DISKS {
            form.errors
                .insert("disks", format!("at most {MAX_DISKS} disks"));
        } else {
            for item in items {
                match whole(item, MAX_DISK_GIB) {
                    Ok(gib) => disks.push(gib),
                    Err(e) => {
                        form.errors.insert(
                            "disks",
                            format!("each size, separated by commas, {e} (GiB)"),
                        );
                        break;
                    }
                }
            }
        }
    }
    if !form.errors.is_empty() {
        return (form, None);
    }
    let (Ok(cpu), Ok(mem), Some(arch)) = (cpu, mem, arch) else {
        return (form, None);
    };
    let request = (|| {
        Some(QuoteRequest {
            node: NodeId::new(PREVIEW_NODE).ok()?,
            pool: PoolPath::new(PREVIEW_POOL).ok()?,
            purpose: Purpose::Tenant,
            class: ClassId::new(form.class.clone()).ok()?,
            shape: Shape {
                vcpus: cpu,
                memory_gib: mem,
                arch,
                disks_gib: disks,
            },
            os: OsId::new(form.os.clone()).ok()?,
            pinned_site: site,
            public: false,
            at,
        })
    })();
    (form, request)
}

/// The Validate view's drafts as pasted (empty: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidateForm {
    pub regions: String,
    pub os_map: String,
    pub gateway: String,
    pub ptr_domain: String,
    /// Field name → the problem with the field itself (too long).
    pub errors: BTreeMap<&'static str, String>,
}

impl ValidateForm {
    /// The drafts to check: every field that holds text.
    pub fn drafts(&self) -> Drafts {
        let given = |name: &str, text: &String| {
            (!text.trim().is_empty() && !self.errors.contains_key(name)).then(|| text.clone())
        };
        Drafts {
            regions: given("regions", &self.regions),
            os_map: given("os_map", &self.os_map),
            gateway: given("gateway", &self.gateway),
            ptr_domain: given("ptr_domain", &self.ptr_domain).map(|d| d.trim().to_string()),
        }
    }

    /// Whether any draft was given.
    pub fn is_empty(&self) -> bool {
        [&self.regions, &self.os_map, &self.gateway, &self.ptr_domain]
            .iter()
            .all(|t| t.trim().is_empty())
    }
}

/// Reads the Validate form.
pub fn read_validate(form: &BTreeMap<String, String>) -> ValidateForm {
    let mut out = ValidateForm::default();
    for (name, slot) in [
        ("regions", &mut out.regions),
        ("os_map", &mut out.os_map),
        ("gateway", &mut out.gateway),
        ("ptr_domain", &mut out.ptr_domain),
    ] {
        let text = form.get(name).map_or("", String::as_str);
        if text.len() > MAX_FIELD_BYTES {
            out.errors.insert(
                name,
                format!("is longer than {} KiB", MAX_FIELD_BYTES / 1024),
            );
            let mut end = MAX_FIELD_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            *slot = text[..end].to_string();
        } else {
            *slot = text.to_string();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{MapSource, load_config};

    fn config() -> Config {
        load_config(
            &MapSource::new()
                .param("partner_id", "zone-1")
                .param("vultr_api_key", "k")
                .param("vultr_owner_tag", "t"),
        )
        .unwrap()
    }

    fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_good_query_becomes_a_request_and_bad_fields_are_named() {
        let cfg = config();
        let at = Timestamp::from_unix_secs(1);
        let (form, request) = read_preview(
            &query(&[
                ("class", "eu-central"),
                ("cpu", "2"),
                ("mem", "4"),
                ("os", "ubuntu-24.04"),
                ("site", "eu-central-b"),
                ("disks", "10, 20"),
            ]),
            &cfg,
            at,
        );
        assert!(form.errors.is_empty(), "{:?}", form.errors);
        let request = request.unwrap();
        assert_eq!(request.shape.disks_gib, [10, 20]);
        assert_eq!(request.pinned_site.unwrap().as_str(), "eu-central-b");
        assert_eq!(request.node.as_str(), PREVIEW_NODE);

        let (form, request) = read_preview(
            &query(&[
                ("class", "eu-central"),
                ("cpu", "two"),
                ("mem", "0"),
                ("arch", "sparc"),
                ("os", "plan9"),
                ("site", "us-east-a"),
                ("disks", "10,x"),
            ]),
            &cfg,
            at,
        );
        assert!(request.is_none());
        let fields: Vec<&str> = form.errors.keys().copied().collect();
        assert_eq!(fields, ["arch", "cpu", "disks", "mem", "os", "site"]);
        assert_eq!(form.cpu, "two", "what was typed is kept");
        let (form, request) = read_preview(&BTreeMap::new(), &cfg, at);
        assert!(!form.submitted && request.is_none());
        assert_eq!(form.class, "ap-southeast");
    }

    #[test]
    fn validate_takes_only_the_drafts_given() {
        let form = read_validate(&query(&[
            ("regions", ""),
            ("gateway", "{\"cpu\": 2, \"mem\": 4}"),
            ("ptr_domain", " cloud.example.com "),
        ]));
        let drafts = form.drafts();
        assert!(drafts.regions.is_none() && drafts.os_map.is_none());
        assert_eq!(drafts.ptr_domain.as_deref(), Some("cloud.example.com"));
        let long = read_validate(&query(&[("os_map", &"x".repeat(MAX_FIELD_BYTES + 1))]));
        assert!(long.errors.contains_key("os_map"));
        assert!(long.drafts().os_map.is_none());
    }
}
