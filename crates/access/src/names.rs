//! The access edge's host names. A pool's http endpoint is reached at
//! `<project>--<pool>[-<endpoint>][-<slot>].<org>.<zone domain>`: the endpoint part only
//! when the pool has more than one http endpoint, the slot part to open one replica.
//!
//! Names may hold `-` (and even `--`), so a label is read against what the org holds:
//! every reading that names a real project, pool, endpoint and slot counts. A label that is
//! exactly one pool's own label means that pool (a pool named `web-1` is not slot 1 of pool
//! `web`); a label that reads two ways otherwise is refused, naming both readings, so the
//! operator renames a pool.

use std::fmt;

/// Where an edge name leads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EdgeName {
    pub project: String,
    pub pool: String,
    /// Named only when the pool has several http endpoints.
    pub endpoint: Option<String>,
    /// One replica; `None`: any of them.
    pub slot: Option<u32>,
}

impl EdgeName {
    /// The first label of the host name.
    pub fn label(&self) -> String {
        let mut label = format!("{}--{}", self.project, self.pool);
        if let Some(endpoint) = &self.endpoint {
            label.push('-');
            label.push_str(endpoint);
        }
        if let Some(slot) = self.slot {
            label.push_str(&format!("-{slot}"));
        }
        label
    }

    /// The whole host name in org `org` of a zone at `domain` (`orc.localhost`).
    pub fn host(&self, org: &str, domain: &str) -> String {
        format!("{}.{org}.{domain}", self.label())
    }
}

/// A pool as the edge sees it: its name and its http endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgePool {
    pub project: String,
    pub pool: String,
    /// Its http endpoints, by name.
    pub endpoints: Vec<String>,
    /// How many slots it has.
    pub slots: u32,
}

/// Why a host name leads nowhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{host} is not a name under this zone's domain {domain}")]
    OutsideZone { host: String, domain: String },
    #[error("{host} is not <project>--<pool>[-<endpoint>][-<slot>].<org>.{domain}")]
    Malformed { host: String, domain: String },
    #[error("no http endpoint of org {org} is called {label}")]
    Unknown { org: String, label: String },
    #[error("{label} could be {}; rename one of the pools", readings.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" or "))]
    Ambiguous {
        label: String,
        readings: Vec<Reading>,
    },
    #[error("pool {project}/{pool} has several http endpoints ({}); name one: {project}--{pool}-<endpoint>", endpoints.join(", "))]
    EndpointNeeded {
        project: String,
        pool: String,
        endpoints: Vec<String>,
    },
}

/// One reading of a label, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading(pub EdgeName);

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.0;
        write!(f, "pool {}/{}", n.project, n.pool)?;
        if let Some(endpoint) = &n.endpoint {
            write!(f, " endpoint {endpoint}")?;
        }
        if let Some(slot) = n.slot {
            write!(f, " slot {slot}")?;
        }
        Ok(())
    }
}

/// The org and first label of `host` under `domain` (a port and letter case are ignored).
pub fn split_host(host: &str, domain: &str) -> Result<(String, String), NameError> {
    let host = host
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let outside = || NameError::OutsideZone {
        host: host.clone(),
        domain: domain.clone(),
    };
    let rest = host
        .strip_suffix(&domain)
        .and_then(|r| r.strip_suffix('.'))
        .ok_or_else(outside)?;
    match rest.split('.').collect::<Vec<_>>()[..] {
        [label, org] if !label.is_empty() && !org.is_empty() => {
            Ok((org.to_string(), label.to_string()))
        }
        _ => Err(NameError::Malformed {
            host: host.clone(),
            domain,
        }),
    }
}

/// What `label` names among the `pools` of org `org`.
pub fn resolve(org: &str, label: &str, pools: &[EdgePool]) -> Result<EdgeName, NameError> {
    // A pool's own label means that pool, whatever else it could read as; two pools with
    // the same own label (`a`/`b--c` and `a--b`/`c`) are refused.
    let own: Vec<&EdgePool> = pools
        .iter()
        .filter(|p| label == format!("{}--{}", p.project, p.pool))
        .collect();
    match own[..] {
        [pool] if pool.endpoints.len() > 1 => {
            return Err(NameError::EndpointNeeded {
                project: pool.project.clone(),
                pool: pool.pool.clone(),
                endpoints: pool.endpoints.clone(),
            });
        }
        [pool] => {
            return Ok(EdgeName {
                project: pool.project.clone(),
                pool: pool.pool.clone(),
                endpoint: None,
                slot: None,
            });
        }
        [] => {}
        _ => {
            return Err(NameError::Ambiguous {
                label: label.to_string(),
                readings: own
                    .iter()
                    .map(|p| {
                        Reading(EdgeName {
                            project: p.project.clone(),
                            pool: p.pool.clone(),
                            endpoint: None,
                            slot: None,
                        })
                    })
                    .collect(),
            });
        }
    }
    let mut readings = Vec::new();
    for pool in pools {
        let prefix = format!("{}--{}", pool.project, pool.pool);
        let several = pool.endpoints.len() > 1;
        let name = |endpoint: Option<&str>, slot: Option<u32>| EdgeName {
            project: pool.project.clone(),
            pool: pool.pool.clone(),
            endpoint: endpoint.map(str::to_string),
            slot,
        };
        let Some(rest) = label
            .strip_prefix(prefix.as_str())
            .and_then(|r| r.strip_prefix('-'))
        else {
            continue;
        };
        let slot_of = |text: &str| {
            text.parse::<u32>()
                .ok()
                .filter(|s| *s < pool.slots && (text == "0" || !text.starts_with('0')))
        };
        if several {
            for endpoint in &pool.endpoints {
                if rest == endpoint {
                    readings.push(name(Some(endpoint), None));
                } else if let Some(slot) = rest
                    .strip_prefix(endpoint.as_str())
                    .and_then(|r| r.strip_prefix('-'))
                    .and_then(slot_of)
                {
                    readings.push(name(Some(endpoint), Some(slot)));
                }
            }
        } else if let Some(slot) = slot_of(rest) {
            readings.push(name(None, Some(slot)));
        }
    }
    match readings.len() {
        0 => Err(NameError::Unknown {
            org: org.to_string(),
            label: label.to_string(),
        }),
        1 => Ok(readings.remove(0)),
        _ => {
            readings.sort();
            Err(NameError::Ambiguous {
                label: label.to_string(),
                readings: readings.into_iter().map(Reading).collect(),
            })
        }
    }
}

/// Every edge name of `pool`: the pool's own (or one per endpoint when it has several),
/// then one per slot.
pub fn names_of(pool: &EdgePool) -> Vec<EdgeName> {
    let endpoints: Vec<Option<&str>> = if pool.endpoints.len() > 1 {
        pool.endpoints.iter().map(|e| Some(e.as_str())).collect()
    } else {
        vec![None]
    };
    let mut names = Vec::new();
    for endpoint in endpoints {
        let name = |slot| EdgeName {
            project: pool.project.clone(),
            pool: pool.pool.clone(),
            endpoint: endpoint.map(str::to_string),
            slot,
        };
        names.push(name(None));
        names.extend((0..pool.slots).map(|slot| name(Some(slot))));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(project: &str, name: &str, endpoints: &[&str], slots: u32) -> EdgePool {
        EdgePool {
            project: project.into(),
            pool: name.into(),
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
            slots,
        }
    }

    fn to(project: &str, pool: &str, endpoint: Option<&str>, slot: Option<u32>) -> EdgeName {
        EdgeName {
            project: project.into(),
            pool: pool.into(),
            endpoint: endpoint.map(Into::into),
            slot,
        }
    }

    #[test]
    fn hosts_split_into_org_and_label() {
        let split = split_host("sys--partner.sys.orc.localhost:7443", "orc.localhost");
        assert_eq!(split, Ok(("sys".into(), "sys--partner".into())));
        assert_eq!(
            split_host("SYS--Partner.Sys.ORC.localhost.", "orc.localhost"),
            Ok(("sys".into(), "sys--partner".into()))
        );
        assert!(matches!(
            split_host("sys--partner.sys.example.com", "orc.localhost"),
            Err(NameError::OutsideZone { .. })
        ));
        for bad in [
            "orc.localhost",
            "sys.orc.localhost",
            "a.b.sys.orc.localhost",
            "xorc.localhost",
        ] {
            assert!(split_host(bad, "orc.localhost").is_err(), "{bad}");
        }
    }

    #[test]
    fn labels_name_a_pool_an_endpoint_and_a_slot() {
        let pools = [
            pool("sys", "partner", &["admin"], 2),
            pool("web", "shop", &["http", "metrics"], 3),
            pool("web", "api", &[], 1),
        ];
        let r = |label| resolve("acme", label, &pools);
        assert_eq!(r("sys--partner"), Ok(to("sys", "partner", None, None)));
        assert_eq!(r("sys--partner-1"), Ok(to("sys", "partner", None, Some(1))));
        assert_eq!(
            r("web--shop-metrics"),
            Ok(to("web", "shop", Some("metrics"), None))
        );
        assert_eq!(
            r("web--shop-http-2"),
            Ok(to("web", "shop", Some("http"), Some(2)))
        );
        assert_eq!(r("web--api"), Ok(to("web", "api", None, None)));
        let needed = r("web--shop").unwrap_err().to_string();
        assert_eq!(
            needed,
            "pool web/shop has several http endpoints (http, metrics); name one: web--shop-<endpoint>"
        );
        for unknown in [
            "sys--partner-2",
            "sys--partner-01",
            "web--shop-admin",
            "web--nope",
            "sys-partner",
            "sys--partner-admin",
        ] {
            assert!(
                matches!(r(unknown), Err(NameError::Unknown { .. })),
                "{unknown}: {:?}",
                r(unknown)
            );
        }
    }

    #[test]
    fn a_pools_own_label_wins_and_other_double_readings_are_refused() {
        let pools = [
            pool("web", "shop", &[], 3),
            pool("web", "shop-1", &[], 1),
            pool("a", "b--c", &[], 1),
            pool("a--b", "c", &[], 1),
            pool("x", "y", &[], 2),
            pool("x", "y-1", &[], 1),
        ];
        assert_eq!(
            resolve("o", "web--shop-1", &pools),
            Ok(to("web", "shop-1", None, None))
        );
        assert_eq!(
            resolve("o", "web--shop-2", &pools),
            Ok(to("web", "shop", None, Some(2)))
        );
        // "a--b--c" is the own label of pool b--c of project a and of pool c of project
        // a--b; their slots read both ways too. Each is refused, naming both readings.
        let own = resolve("o", "a--b--c", &pools).unwrap_err();
        assert!(
            own.to_string().contains("pool a/b--c or pool a--b/c"),
            "{own}"
        );
        let both = resolve("o", "a--b--c-0", &pools).unwrap_err();
        assert!(matches!(both, NameError::Ambiguous { .. }), "{both}");
        assert!(both.to_string().contains("pool a/b--c slot 0"), "{both}");
        assert!(both.to_string().contains("pool a--b/c slot 0"), "{both}");
    }

    proptest::proptest! {
        /// Every name of every pool leads back to it, unless another pool's own label is
        /// the same text or the reading is refused as ambiguous.
        #[test]
        fn every_name_leads_back_to_its_pool(
            specs in proptest::collection::vec(
                ("[a-c](-?[a-c]){0,2}", "[a-c](-?[a-c1]){0,2}", proptest::collection::btree_set("[a-b]{1,2}", 0..3), 1u32..3),
                1..6,
            )
        ) {
            let mut pools: Vec<EdgePool> = Vec::new();
            for (project, name, endpoints, slots) in specs {
                if pools.iter().any(|p| p.project == project && p.pool == name) {
                    continue;
                }
                pools.push(EdgePool { project, pool: name, endpoints: endpoints.into_iter().collect(), slots });
            }
            let own: Vec<String> = pools.iter().map(|p| format!("{}--{}", p.project, p.pool)).collect();
            for pool in &pools {
                for name in names_of(pool) {
                    let label = name.label();
                    match resolve("o", &label, &pools) {
                        Ok(found) => proptest::prop_assert!(
                            found == name || own.contains(&label),
                            "{label} led to {found:?}, not {name:?}"
                        ),
                        Err(NameError::Ambiguous { readings, .. }) => {
                            proptest::prop_assert!(
                                readings.iter().any(|r| r.0 == name)
                                    || own.iter().filter(|o| **o == label).count() > 1
                            );
                        }
                        Err(NameError::EndpointNeeded { .. }) => {
                            proptest::prop_assert!(own.contains(&label));
                        }
                        Err(other) => proptest::prop_assert!(false, "{label}: {other}"),
                    }
                }
            }
        }
    }
}
