//! What a pool request must be before it is taken: shapes, SSH keys, params, packages,
//! endpoints, placement, sizes, and a class and OS the provider's catalog offers.

use super::*;

/// The pool's SSH keys, normalised, each checked and named by its place in the list when it
/// is not a public key; a key given twice is kept once.
pub(in crate::api) fn parse_ssh_keys(lines: &[String]) -> ApiResult<Vec<String>> {
    use orc_zone_model::ssh::{SSH_KEYS_MAX, SshPublicKey};
    if lines.len() > SSH_KEYS_MAX {
        return Err(ApiError::invalid(
            "ssh_keys",
            format!(
                "ssh_keys holds {} keys; a pool takes at most {SSH_KEYS_MAX}",
                lines.len()
            ),
        ));
    }
    let mut keys: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let key = SshPublicKey::parse(line).map_err(|e| {
            ApiError::invalid(
                format!("ssh_keys[{i}]"),
                format!("ssh_keys[{i}] is not an OpenSSH public key: it {e}"),
            )
        })?;
        let line = key.line();
        if !keys.contains(&line) {
            keys.push(line);
        }
    }
    Ok(keys)
}

/// Checks a requested shape, naming the field at fault.
pub(in crate::api) fn parse_shape(shape: &ShapeView) -> ApiResult<Shape> {
    if !(1..=1024).contains(&shape.cpu) {
        return Err(ApiError::invalid(
            "shape.cpu",
            format!("shape.cpu must be 1 to 1024 vCPUs, not {}", shape.cpu),
        ));
    }
    if !(1..=16_384).contains(&shape.mem) {
        return Err(ApiError::invalid(
            "shape.mem",
            format!("shape.mem must be 1 to 16384 GiB, not {}", shape.mem),
        ));
    }
    let arch = match shape.arch.as_deref() {
        None | Some("x86_64") => Architecture::X86_64,
        Some("arm64") => Architecture::Arm64,
        Some(other) => {
            return Err(ApiError::invalid(
                "shape.arch",
                format!("shape.arch {} is not one of x86_64, arm64", quoted(other)),
            ));
        }
    };
    for (i, disk) in shape.disks.iter().enumerate() {
        if !(1..=65_536).contains(disk) {
            return Err(ApiError::invalid(
                format!("shape.disks[{i}]"),
                format!("a disk must be 1 to 65536 GiB, not {disk}"),
            ));
        }
    }
    if shape.disks.len() > 16 {
        return Err(ApiError::invalid("shape.disks", "at most 16 extra disks"));
    }
    Ok(Shape {
        vcpus: shape.cpu,
        memory_gib: shape.mem,
        arch,
        disks_gib: shape.disks.clone(),
    })
}

/// Parses a request's class and OS, once, and checks them against the provider's catalog
/// when one is known. Everything after this carries the typed ids.
pub(in crate::api) fn parse_class_and_os(
    state: &ApiState,
    provider: &Provider,
    class: &str,
    os: &str,
) -> ApiResult<(ClassId, OsId)> {
    let (Some(class_id), true) = (ClassId::new(class).ok(), !class.trim().is_empty()) else {
        return Err(ApiError::invalid("class", "class must name a region class"));
    };
    let (Some(os_id), true) = (OsId::new(os).ok(), !os.trim().is_empty()) else {
        return Err(ApiError::invalid(
            "os",
            "os must name an operating system id",
        ));
    };
    if let Some(catalog) = state.directory.catalog(provider) {
        if !catalog.classes.iter().any(|c| c.id.as_str() == class) {
            let known: BTreeSet<&str> = catalog.classes.iter().map(|c| c.id.as_str()).collect();
            return Err(ApiError::invalid(
                "class",
                format!(
                    "provider {} offers no class {class:?} (it offers: {})",
                    provider.name,
                    known.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if !catalog.os.iter().any(|o| o.id.as_str() == os) {
            let known: BTreeSet<&str> = catalog.os.iter().map(|o| o.id.as_str()).collect();
            return Err(ApiError::invalid(
                "os",
                format!(
                    "provider {} offers no os {os:?} (it offers: {})",
                    provider.name,
                    known.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok((class_id, os_id))
}

pub(in crate::api) fn valid_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

pub(in crate::api) fn check_params(
    field: &str,
    params: &BTreeMap<String, String>,
) -> ApiResult<()> {
    for name in params.keys() {
        if !valid_param_name(name) {
            return Err(ApiError::invalid(
                format!("{field}.{name}"),
                format!(
                    "param name {name:?} must start with a-z and hold only a-z, 0-9 and _ \
                     (at most 64)"
                ),
            ));
        }
    }
    Ok(())
}

/// Placement keys follow the param-name rule; values are short non-empty words.
pub(in crate::api) fn check_placement(placement: &BTreeMap<String, String>) -> ApiResult<()> {
    check_params("placement", placement)?;
    for (key, value) in placement {
        let ok = !value.is_empty()
            && value.len() <= 128
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !ok {
            return Err(ApiError::invalid(
                format!("placement.{key}"),
                format!(
                    "placement value {value:?} must be 1 to 128 of A-Z, a-z, 0-9, '.', '-' and '_'"
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a plain param that the app declares sensitive: plain params are shown to the
/// project's viewers and placed in the app's environment. The message names the param,
/// never its value.
pub(in crate::api) fn check_plain_params(
    package: &str,
    sensitive: &BTreeSet<String>,
    params: &BTreeMap<String, String>,
) -> ApiResult<()> {
    match params.keys().find(|name| sensitive.contains(*name)) {
        Some(name) => Err(ApiError::invalid(
            "params",
            format!(
                "param {name} is sensitive for app {package}: send it in sensitive_params (orc: --sensitive {name}=@FILE), never as a plain param"
            ),
        )),
        None => Ok(()),
    }
}

pub(in crate::api) fn check_package(package: &str) -> ApiResult<()> {
    let ok = package.split_once('/').is_some_and(|(org, rest)| {
        let (name, tag) = rest.split_once(':').unwrap_or((rest, ""));
        org.parse::<crate::model::Name>().is_ok()
            && name.parse::<crate::model::Name>().is_ok()
            && (tag.is_empty()
                || tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "app",
            format!(
                "app {} is not a package reference of the form org/name:tag",
                quoted(package)
            ),
        ))
    }
}

/// The endpoints an app's manifest declares, as a pool's.
pub(in crate::api) fn manifest_endpoints(
    manifest: &orc_zone_model::registry::AppManifest,
) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = manifest
        .endpoints
        .iter()
        .map(|e| Endpoint {
            name: e.name.clone(),
            protocol: e.protocol.clone(),
            port: e.port,
        })
        .collect();
    out.sort();
    out
}

pub(in crate::api) fn parse_endpoints(endpoints: &[EndpointView]) -> ApiResult<Vec<Endpoint>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in endpoints.iter().enumerate() {
        if e.name.parse::<crate::model::Name>().is_err() || !seen.insert(e.name.clone()) {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].name"),
                format!(
                    "endpoint name {} must be a unique DNS label",
                    quoted(&e.name)
                ),
            ));
        }
        if !matches!(e.protocol.as_str(), "http" | "tcp") {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].protocol"),
                format!("protocol {} is not one of http, tcp", quoted(&e.protocol)),
            ));
        }
        if e.port == 0 {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].port"),
                "port must be 1 to 65535",
            ));
        }
        out.push(Endpoint {
            name: e.name.clone(),
            protocol: e.protocol.clone(),
            port: e.port,
        });
    }
    out.sort();
    Ok(out)
}

pub(in crate::api) fn check_size(size: u32) -> ApiResult<()> {
    if size > MAX_POOL_SIZE {
        return Err(ApiError::invalid(
            "size",
            format!("size must be 0 to {MAX_POOL_SIZE}, not {size}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_names() {
        assert!(valid_param_name("partner_id"));
        assert!(!valid_param_name("Partner"));
        assert!(!valid_param_name("1a"));
        assert!(!valid_param_name("a-b"));
    }
}
