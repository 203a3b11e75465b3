//! The console's forms read into the API's request bodies, purely. A form that cannot be
//! read gives its problems under the names of the fields at fault (the same names the API
//! gives in its errors: `size`, `shape.cpu`, `os`, `params.regions`), so the page shows each
//! next to its field and nothing is sent.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{FieldErrors, ParamField, WizardInput, is_json};
use crate::registry::ManifestParam;
use orc_zone_api_types::views::{
    CatalogView, CreatePool, QuoteRequest, ReconfigurePool, ShapeView,
};

/// The most nodes a pool takes from a console form. Larger pools are rare enough, and a
/// typo of an extra zero costly enough, that they go through the API or `orc` on purpose.
pub const MAX_CONSOLE_SIZE: u32 = 1000;

/// A urlencoded form body as (name, value) pairs, in order.
pub fn pairs(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(body).unwrap_or_default()
}

/// The first value of `name` in `pairs`.
pub fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn number(errors: &mut FieldErrors, field: &str, what: &str, text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() {
        errors.insert(field.to_string(), format!("Give the {what}."));
        return None;
    }
    match text.parse::<u32>() {
        Ok(n) => Some(n),
        Err(_) => {
            errors.insert(
                field.to_string(),
                format!("The {what} must be a whole number, not {text:?}."),
            );
            None
        }
    }
}

/// The pool size of a console form: `min` to [`MAX_CONSOLE_SIZE`].
pub fn size(errors: &mut FieldErrors, text: &str, min: u32) -> Option<u32> {
    let n = number(errors, "size", "number of nodes", text)?;
    if n < min || n > MAX_CONSOLE_SIZE {
        errors.insert(
            "size".to_string(),
            format!("A pool here takes {min} to {MAX_CONSOLE_SIZE} nodes, not {n}."),
        );
        return None;
    }
    Some(n)
}

/// The shape the wizard was given.
fn shape(errors: &mut FieldErrors, input: &WizardInput) -> Option<ShapeView> {
    let cpu = number(errors, "shape.cpu", "number of vCPUs", &input.cpu);
    let mem = number(errors, "shape.mem", "memory in GiB", &input.mem);
    let mut disks = Vec::new();
    for part in input
        .disks
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match part.parse::<u32>() {
            Ok(d) if d > 0 => disks.push(d),
            _ => {
                errors.insert(
                    "shape.disks".to_string(),
                    format!("Each extra disk is a size in GiB, such as 100; {part:?} is not one."),
                );
            }
        }
    }
    if cpu == Some(0) {
        errors.insert("shape.cpu".into(), "A node has at least 1 vCPU.".into());
    }
    if mem == Some(0) {
        errors.insert("shape.mem".into(), "A node has at least 1 GiB.".into());
    }
    Some(ShapeView {
        cpu: cpu.filter(|c| *c > 0)?,
        mem: mem.filter(|m| *m > 0)?,
        arch: None,
        disks,
    })
}

/// The class and OS, checked against the provider's catalog when it reported one.
fn class_and_os(errors: &mut FieldErrors, input: &WizardInput, catalog: Option<&CatalogView>) {
    if input.provider.trim().is_empty() {
        errors.insert("provider".into(), "Choose a provider.".into());
    }
    if input.class.trim().is_empty() {
        errors.insert("class".into(), "Choose a region class.".into());
    } else if let Some(c) = catalog
        && !c.classes.iter().any(|k| k.id == input.class)
    {
        errors.insert(
            "class".into(),
            format!("The provider offers no region class {:?}.", input.class),
        );
    }
    if input.os.trim().is_empty() {
        errors.insert("os".into(), "Choose an operating system.".into());
    } else if let Some(c) = catalog
        && !c.os.iter().any(|o| o.id == input.os)
    {
        errors.insert(
            "os".into(),
            format!(
                "The provider offers no operating system {:?}; choose one of its list.",
                input.os
            ),
        );
    }
}

/// The quote the wizard asks for, or the problems of what it was given.
pub fn quote_request(
    input: &WizardInput,
    catalog: Option<&CatalogView>,
) -> Result<QuoteRequest, FieldErrors> {
    let mut errors = FieldErrors::new();
    class_and_os(&mut errors, input, catalog);
    let shape = shape(&mut errors, input);
    match shape {
        Some(shape) if errors.is_empty() => Ok(QuoteRequest {
            provider: input.provider.trim().to_string(),
            shape,
            class: input.class.trim().to_string(),
            os: input.os.trim().to_string(),
            public: input.is_public(),
            placement: placement(input),
        }),
        _ => Err(errors),
    }
}

/// The placement a one-cloud provider's plan asks for; empty when none is chosen.
fn placement(input: &WizardInput) -> BTreeMap<String, String> {
    let plan = input.plan.trim();
    if plan.is_empty() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("plan".to_string(), plan.to_string())])
    }
}

/// The pool the wizard requests, or the problems of what it was given.
pub fn create_pool(
    input: &WizardInput,
    catalog: Option<&CatalogView>,
) -> Result<CreatePool, FieldErrors> {
    let quote = quote_request(input, catalog);
    let mut errors = quote.as_ref().err().cloned().unwrap_or_default();
    let size = size(&mut errors, &input.size, 1);
    if input.name.trim().is_empty() {
        errors.insert("name".into(), "Name the pool.".into());
    }
    match (quote, size) {
        (Ok(q), Some(size)) if errors.is_empty() => Ok(CreatePool {
            name: input.name.trim().to_string(),
            provider: q.provider,
            size,
            shape: q.shape,
            class: q.class,
            os: q.os,
            public: q.public,
            endpoints: Vec::new(),
            app: None,
            params: BTreeMap::new(),
            sensitive_params: BTreeMap::new(),
            placement: q.placement,
            ssh_keys: Vec::new(),
        }),
        _ => Err(errors),
    }
}

/// The pool form's fields for an app's params with no manifest to describe them: plain ones
/// with their values, sensitive ones by name only.
pub fn param_fields(params: &BTreeMap<String, String>, sensitive: &[String]) -> Vec<ParamField> {
    let mut fields: Vec<ParamField> = params
        .iter()
        .map(|(name, value)| ParamField::undescribed(name, value, false, true))
        .collect();
    for name in sensitive {
        fields.push(ParamField::undescribed(name, "", true, true));
    }
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    fields
}

/// The pool form's fields as the app's manifest declares its params, in its order, with
/// the values a pool holds (plain ones shown, sensitive ones only as set); a param the pool
/// holds that the manifest does not name comes after, undescribed.
pub fn manifest_fields(
    declared: &[ManifestParam],
    params: &BTreeMap<String, String>,
    sensitive: &[String],
) -> Vec<ParamField> {
    let mut fields: Vec<ParamField> = declared
        .iter()
        .map(|p| ParamField {
            name: p.name.clone(),
            value: if p.sensitive {
                String::new()
            } else {
                params.get(&p.name).cloned().unwrap_or_default()
            },
            json: p.json,
            sensitive: p.sensitive,
            set: sensitive.contains(&p.name) || (!p.sensitive && params.contains_key(&p.name)),
            help: p.help.clone(),
            default: p.default.clone(),
            required: p.required,
        })
        .collect();
    let known: BTreeSet<String> = declared.iter().map(|p| p.name.clone()).collect();
    for (name, value) in params.iter().filter(|(n, _)| !known.contains(*n)) {
        fields.push(ParamField::undescribed(name, value, false, true));
    }
    for name in sensitive.iter().filter(|n| !known.contains(*n)) {
        fields.push(ParamField::undescribed(name, "", true, true));
    }
    fields
}

/// What the pool form gives: the new params, the sensitive ones typed anew (the rest keep
/// their values), the generation it was made from, and the fields as typed for a second
/// showing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamsForm {
    pub params: BTreeMap<String, String>,
    pub sensitive: BTreeMap<String, String>,
    pub generation: Option<u64>,
    pub fields: Vec<ParamField>,
}

/// Reads the pool form against the fields it showed: a JSON param must parse; a new param
/// needs a name; a sensitive value is never kept in the fields shown again.
pub fn reconfigure(
    shown: &[ParamField],
    pairs: &[(String, String)],
) -> Result<ParamsForm, (Vec<ParamField>, FieldErrors)> {
    let mut errors = FieldErrors::new();
    let mut params = BTreeMap::new();
    let mut sensitive = BTreeMap::new();
    let mut fields = Vec::new();
    for field in shown {
        let key = format!("params.{}", field.name);
        let typed = value(pairs, &key).unwrap_or("").to_string();
        if field.sensitive {
            if !typed.is_empty() {
                sensitive.insert(field.name.clone(), typed);
            }
            fields.push(field.clone());
            continue;
        }
        if typed.trim().is_empty() {
            // Empty: the app's default applies.
            fields.push(ParamField {
                value: typed,
                ..field.clone()
            });
            continue;
        }
        if field.json
            && let Err(e) = serde_json::from_str::<serde_json::Value>(&typed)
        {
            errors.insert(
                key.clone(),
                format!(
                    "{} is a JSON param and this does not parse: {e}.",
                    field.name
                ),
            );
        }
        params.insert(field.name.clone(), typed.clone());
        fields.push(ParamField {
            value: typed,
            ..field.clone()
        });
    }
    let new_name = value(pairs, "new_name").unwrap_or("").trim().to_string();
    let new_value = value(pairs, "new_value").unwrap_or("").to_string();
    if !new_name.is_empty() {
        let known: BTreeSet<&str> = shown.iter().map(|f| f.name.as_str()).collect();
        if known.contains(new_name.as_str()) {
            errors.insert(
                "new_name".into(),
                format!("{new_name} is already a param; change it above."),
            );
        } else if value(pairs, "new_kind") == Some("sensitive") {
            sensitive.insert(new_name, new_value);
        } else {
            if is_json(&new_value)
                && let Err(e) = serde_json::from_str::<serde_json::Value>(&new_value)
            {
                errors.insert(
                    "new_value".into(),
                    format!("This looks like JSON and does not parse: {e}."),
                );
            }
            params.insert(new_name, new_value);
        }
    } else if !new_value.is_empty() {
        errors.insert("new_name".into(), "Name the new param.".into());
    }
    let generation = value(pairs, "generation").and_then(|g| g.parse().ok());
    if errors.is_empty() {
        Ok(ParamsForm {
            params,
            sensitive,
            generation,
            fields,
        })
    } else {
        Err((fields, errors))
    }
}

/// The pool that runs `package` on `core` with the params of `form`, or the problems of the
/// name and size.
pub fn app_pool(
    package: &str,
    name: &str,
    size_text: &str,
    form: &ParamsForm,
) -> Result<CreatePool, FieldErrors> {
    let mut errors = FieldErrors::new();
    let size = size(&mut errors, size_text, 1);
    if name.trim().is_empty() {
        errors.insert("name".into(), "Name the pool.".into());
    }
    if package.trim().is_empty() {
        errors.insert("app".into(), "Choose an app.".into());
    }
    match size {
        Some(size) if errors.is_empty() => Ok(CreatePool {
            name: name.trim().to_string(),
            provider: orc_zone_model::CORE_PROVIDER_NAME.to_string(),
            size,
            shape: ShapeView {
                cpu: 1,
                mem: 1,
                arch: None,
                disks: Vec::new(),
            },
            class: orc_zone_model::CORE_LOCAL_SITE.to_string(),
            os: "none".to_string(),
            public: false,
            endpoints: Vec::new(),
            app: Some(package.to_string()),
            params: form.params.clone(),
            sensitive_params: form.sensitive.clone(),
            placement: BTreeMap::new(),
            ssh_keys: Vec::new(),
        }),
        _ => Err(errors),
    }
}

/// The reconfigure request: plain params as given; of the sensitive ones only those typed
/// anew, which the zone merges over the values it holds (and never shows).
pub fn reconfigure_request(form: &ParamsForm) -> ReconfigurePool {
    ReconfigurePool {
        params: form.params.clone(),
        sensitive_params: None,
        sensitive_params_update: (!form.sensitive.is_empty()).then(|| form.sensitive.clone()),
        generation: form.generation,
    }
}

/// A command line as the words of its argv (split at white space; no shell reads it).
pub fn command(errors: &mut FieldErrors, text: &str) -> Option<Vec<String>> {
    let argv: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    if argv.is_empty() {
        errors.insert(
            "command".into(),
            "Give a command: a program and its arguments, separated by spaces.".into(),
        );
        return None;
    }
    if argv.len() > 256 || text.len() > 8192 {
        errors.insert("command".into(), "The command is too long.".into());
        return None;
    }
    Some(argv)
}

/// A command's timeout in seconds, 1 to 3,600 (60 when left empty).
pub fn exec_timeout(errors: &mut FieldErrors, text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() {
        return Some(60);
    }
    match text.parse::<u32>() {
        Ok(n) if (1..=3600).contains(&n) => Some(n),
        _ => {
            errors.insert(
                "timeout".into(),
                format!("The timeout must be 1 to 3600 seconds, not {text:?}."),
            );
            None
        }
    }
}

/// How long a join token admits its node, in seconds: 60 to 86,400 (3,600 when left empty).
pub fn join_ttl(errors: &mut FieldErrors, text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() {
        return Some(3600);
    }
    match text.parse::<u64>() {
        Ok(n) if (60..=86_400).contains(&n) => Some(n),
        _ => {
            errors.insert(
                "ttl".into(),
                format!("A join token lasts 60 to 86400 seconds, not {text:?}."),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_zone_api_types::views::{ClassView, OsView};

    fn catalog() -> CatalogView {
        CatalogView {
            classes: vec![ClassView {
                id: "eu-central".into(),
                title: "Europe Central".into(),
                can_place: true,
                offerings: Vec::new(),
            }],
            os: vec![OsView {
                id: "ubuntu-24.04".into(),
                title: "Ubuntu 24.04".into(),
            }],
            public_ipv4_offered: 0,
        }
    }

    fn input() -> WizardInput {
        WizardInput {
            provider: "partner".into(),
            class: "eu-central".into(),
            cpu: "2".into(),
            mem: "4".into(),
            disks: "".into(),
            os: "ubuntu-24.04".into(),
            size: "2".into(),
            public: "".into(),
            name: "web".into(),
            plan: "".into(),
            quote: "".into(),
        }
    }

    #[test]
    fn a_chosen_plan_is_the_pools_placement() {
        let pool = create_pool(
            &WizardInput {
                plan: " cx23 ".into(),
                ..input()
            },
            Some(&catalog()),
        )
        .unwrap();
        assert_eq!(
            pool.placement,
            BTreeMap::from([("plan".into(), "cx23".into())])
        );
        assert!(
            create_pool(&input(), Some(&catalog()))
                .unwrap()
                .placement
                .is_empty()
        );
    }

    #[test]
    fn a_command_line_is_words_and_a_timeout_in_range() {
        assert_eq!(
            command(&mut FieldErrors::new(), " ip  -4 addr ").unwrap(),
            ["ip", "-4", "addr"]
        );
        let mut errors = FieldErrors::new();
        assert!(command(&mut errors, "   ").is_none());
        assert!(errors.contains_key("command"));
        let mut errors = FieldErrors::new();
        assert_eq!(exec_timeout(&mut errors, ""), Some(60));
        assert_eq!(exec_timeout(&mut errors, "3600"), Some(3600));
        assert!(errors.is_empty());
        assert_eq!(exec_timeout(&mut errors, "0"), None);
        assert!(errors.contains_key("timeout"));
        let mut errors = FieldErrors::new();
        assert_eq!(join_ttl(&mut errors, ""), Some(3600));
        assert_eq!(join_ttl(&mut errors, "30"), None);
        assert!(errors.contains_key("ttl"));
    }

    #[test]
    fn a_good_wizard_form_is_a_pool_request() {
        let pool = create_pool(&input(), Some(&catalog())).unwrap();
        assert_eq!((pool.size, pool.shape.cpu, pool.shape.mem), (2, 2, 4));
        assert_eq!(pool.os, "ubuntu-24.04");
        assert!(!pool.public);
    }

    #[test]
    fn bad_sizes_an_unknown_os_and_bad_disks_are_named_by_field() {
        for size in ["0", "10000", "-1", "two", ""] {
            let e = create_pool(
                &WizardInput {
                    size: size.into(),
                    ..input()
                },
                Some(&catalog()),
            )
            .unwrap_err();
            assert_eq!(e.keys().collect::<Vec<_>>(), ["size"], "{size}: {e:?}");
        }
        let e = create_pool(
            &WizardInput {
                os: "templeos".into(),
                disks: "100, x".into(),
                cpu: "0".into(),
                ..input()
            },
            Some(&catalog()),
        )
        .unwrap_err();
        assert_eq!(
            e.keys().collect::<Vec<_>>(),
            ["os", "shape.cpu", "shape.disks"]
        );
    }

    #[test]
    fn a_json_param_that_does_not_parse_is_named_and_sensitive_values_are_not_shown_again() {
        let mut params = BTreeMap::new();
        params.insert("regions".to_string(), "{\"a\": 1}".to_string());
        params.insert("partner_id".to_string(), "p1".to_string());
        let shown = param_fields(&params, &["hetzner_token".to_string()]);
        assert!(shown[2].json && !shown[1].json && shown[0].sensitive);
        let typed = vec![
            ("params.regions".to_string(), "{not json".to_string()),
            ("params.partner_id".to_string(), "p2".to_string()),
            ("params.hetzner_token".to_string(), "s3cret".to_string()),
        ];
        let (fields, errors) = reconfigure(&shown, &typed).unwrap_err();
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["params.regions"]);
        assert!(fields.iter().all(|f| f.value != "s3cret"));
        let typed = vec![
            ("params.regions".to_string(), "{\"b\": 2}".to_string()),
            ("params.partner_id".to_string(), "p2".to_string()),
            ("params.hetzner_token".to_string(), "s3cret".to_string()),
            ("generation".to_string(), "4".to_string()),
        ];
        let form = reconfigure(&shown, &typed).unwrap();
        let request = reconfigure_request(&form);
        // Only what was typed: the zone keeps the sensitive params nobody typed anew.
        assert_eq!(request.sensitive_params, None);
        let update = request.sensitive_params_update.unwrap();
        assert_eq!(
            update.into_iter().collect::<Vec<_>>(),
            [("hetzner_token".to_string(), "s3cret".to_string())]
        );
        assert_eq!(request.generation, Some(4));
        assert_eq!(request.params["partner_id"], "p2");
    }
}
