//! Providers: the `orc providers` and `orc sites` tables, `orc provider show`, and
//! `orc provider change-scope` and `orc provider pricing`.

use orc_zone_api_types::views::{ChangeScope, ProviderView, SetPricing, SiteView};

use super::{client, object_path, print_json, project_path, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

fn providers_table(providers: &[ProviderView]) -> String {
    let mut t = Table::new(&[
        "PROVIDER", "PROJECT", "SCOPE", "PRICING", "SERVING", "STANDBY", "RESOURCE",
    ]);
    for p in providers {
        let serving = p.replicas.iter().filter(|r| r.role == "serving").count();
        let standby = p.replicas.len() - serving;
        // `core` has no replicas to count: it is the zone itself.
        let (serving, standby) = if p.builtin {
            ("built in".to_string(), "-".to_string())
        } else {
            (serving.to_string(), standby.to_string())
        };
        t.row(vec![
            p.name.clone(),
            p.project.clone(),
            p.scope.clone(),
            p.pricing.words(),
            serving,
            standby,
            p.resource_uri.clone(),
        ]);
    }
    t.render()
}

/// `orc providers [ORG/PROJECT]` (default: the caller's own project).
pub async fn list(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = match project {
        Some(path) => project_path(path)?,
        None => super::default_project(&client).await?,
    };
    let list: Vec<ProviderView> = client
        .get(&format!("{}/providers", project_url(&org, &project)))
        .await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        outln!("No providers visible to {org}/{project}.");
        return Ok(());
    }
    out!("{}", providers_table(&list));
    Ok(())
}

/// What `orc provider show` prints: the provider, then each class with what a tenant may
/// ask for, then its OS ids.
pub(crate) fn provider_text(p: &ProviderView) -> String {
    let mut out = format!(
        "provider:  {}\nproject:   {} ({} scope)\npricing:   {}\nreplicas:  {}\n",
        p.name,
        p.project,
        p.scope,
        p.pricing.words(),
        p.replicas_words(),
    );
    let Some(catalog) = &p.catalog else {
        out.push_str("No catalog yet: no replica has connected and reported one.\n");
        return out;
    };
    let mut t = Table::new(&["CLASS", "TITLE", "NOW", "OFFERS"]);
    for class in &catalog.classes {
        let offers: Vec<String> = class
            .offerings
            .iter()
            .map(|o| {
                let mut shape = format!("{} vCPU · {} GiB", o.cpu, o.mem);
                if o.arch != "x86_64" {
                    shape.push_str(&format!(" · {}", o.arch));
                }
                match &o.plan {
                    Some(plan) => format!("{plan} ({shape})"),
                    None => shape,
                }
            })
            .collect();
        t.row(vec![
            class.id.clone(),
            class.title.clone(),
            if class.can_place { "can place" } else { "full" }.to_string(),
            if offers.is_empty() {
                "-".to_string()
            } else {
                offers.join(", ")
            },
        ]);
    }
    out.push('\n');
    out.push_str(&t.render());
    let mut os = Table::new(&["OS", "TITLE"]);
    for o in &catalog.os {
        os.row(vec![o.id.clone(), o.title.clone()]);
    }
    out.push('\n');
    out.push_str(&os.render());
    if catalog.public_ipv4_offered > 0 {
        out.push_str(&format!(
            "\npublic IPv4 addresses offered: {}\n",
            catalog.public_ipv4_offered
        ));
    }
    out
}

/// `orc provider show PROVIDER [--project ORG/PROJECT]`.
pub async fn show(conn: &ConnArgs, provider: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = match project {
        Some(path) => project_path(path)?,
        None => super::default_project(&client).await?,
    };
    let view: ProviderView = client
        .get(&format!(
            "{}/providers/{}",
            project_url(&org, &project),
            segment(provider)
        ))
        .await?;
    if conn.json {
        return print_json(&view);
    }
    out!("{}", provider_text(&view));
    Ok(())
}

fn sites_table(sites: &[SiteView]) -> String {
    let mut t = Table::new(&["SITE", "IPV4", "PRIVATE", "NODES", "GATEWAY", "STATUS"]);
    for s in sites {
        t.row(vec![
            s.site.clone(),
            s.public_ipv4.clone().unwrap_or_else(|| "-".to_string()),
            s.private_prefix.clone().unwrap_or_else(|| "-".to_string()),
            s.tenant_nodes.to_string(),
            s.gateway.clone().unwrap_or_else(|| "-".to_string()),
            s.status.clone(),
        ]);
    }
    t.render()
}

/// `orc sites [PROVIDER] [--project ORG/PROJECT]`: PROVIDER is a name seen from the
/// project (default `partner` in the caller's default project) or `ORG/PROJECT/PROVIDER`.
pub async fn sites(
    conn: &ConnArgs,
    provider: Option<&str>,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let provider = provider.unwrap_or("partner");
    // A full name `ORG/PROJECT/PROVIDER` goes whole, so it means the provider registered
    // there even where a provider of the operator has the same bare name.
    let (org, project, name) = if provider.contains('/') {
        if project.is_some() {
            anyhow::bail!(
                "{provider:?} names its project already; give --project with a provider name only"
            );
        }
        let (org, project, name) = object_path(provider, "PROVIDER")?;
        let full = format!("{org}/{project}/{name}");
        (org, project, full)
    } else {
        let (org, project) = match project {
            Some(path) => project_path(path)?,
            None => super::default_project(&client).await?,
        };
        (org, project, provider.to_string())
    };
    let list: Vec<SiteView> = client
        .get(&format!(
            "{}/providers/{}/sites",
            project_url(&org, &project),
            segment(&name)
        ))
        .await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        let shown = if name.contains('/') {
            name.clone()
        } else {
            format!("{org}/{project}/{name}")
        };
        outln!("Provider {shown} has no open site.");
        return Ok(());
    }
    out!("{}", sites_table(&list));
    Ok(())
}

/// `orc provider change-scope ORG/PROJECT/PROVIDER zone|project`.
pub async fn change_scope(conn: &ConnArgs, provider: &str, scope: &str) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(provider, "PROVIDER")?;
    let view: ProviderView = client
        .post(
            &format!(
                "{}/providers/{}/change-scope",
                project_url(&org, &project),
                segment(&format!("{org}/{project}/{name}"))
            ),
            &ChangeScope {
                scope: scope.to_string(),
            },
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    let whom = match view.scope.as_str() {
        "zone" => "every project of the zone".to_string(),
        _ => format!("project {} only", view.project),
    };
    outln!(
        "Provider {} now has scope {}: visible to {whom}.",
        view.name,
        view.scope
    );
    Ok(())
}

/// `orc provider pricing ORG/PROJECT/PROVIDER --markup M | --none`.
pub async fn pricing(
    conn: &ConnArgs,
    provider: &str,
    markup: Option<String>,
    yes: bool,
) -> anyhow::Result<()> {
    // More than doubling a price is rarely meant: `--markup 15` for 15 % would be 1,500 %.
    if let Some(text) = &markup
        && let Ok(value) = text.trim().parse::<rust_decimal::Decimal>()
        && value > rust_decimal::Decimal::ONE
        && !yes
    {
        anyhow::bail!(
            "markup {text} is {}%: more than doubling every price; give 0.15 for 15 %, or add \
             --yes if {text} is meant",
            (value * rust_decimal::Decimal::ONE_HUNDRED).normalize()
        );
    }
    let client = client(conn)?;
    let (org, project, name) = object_path(provider, "PROVIDER")?;
    let view: ProviderView = client
        .put(
            &format!(
                "{}/providers/{}/pricing",
                project_url(&org, &project),
                segment(&format!("{org}/{project}/{name}"))
            ),
            &SetPricing { markup },
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    match &view.pricing.markup {
        Some(m) => outln!(
            "Provider {} now prices new nodes with markup {m}.",
            view.name
        ),
        None => outln!(
            "Provider {} has no pricing strategy: new nodes are unpriced.",
            view.name
        ),
    }
    Ok(())
}

#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone_api_types::views::{
        CatalogView, ClassView, OfferingView, OsView, PricingView, ReplicaView,
    };

    use crate::commands::check_golden;

    #[test]
    fn providers_table_golden() {
        let provider =
            |name: &str, project: &str, scope: &str, markup: Option<&str>| ProviderView {
                id: "pv-000000000005".into(),
                name: name.into(),
                project: project.into(),
                resource_uri: format!("urn:orc:{name}:zone-1"),
                scope: scope.into(),
                pricing: PricingView {
                    priced: markup.is_some(),
                    markup: markup.map(str::to_string),
                },
                builtin: name == "core",
                replicas: Vec::new(),
                catalog: None,
                created_at: 0,
                updated_at: 0,
            };
        let mut partner = provider("partner", "sys/sys", "zone", Some("0.15"));
        partner.replicas = vec![
            ReplicaView {
                host: "zone-1".into(),
                pid: 41,
                slot: 0,
                role: "serving".into(),
                connected_since: 0,
            },
            ReplicaView {
                host: "zone-1".into(),
                pid: 42,
                slot: 1,
                role: "standby".into(),
                connected_since: 0,
            },
        ];
        // Seen from another project: priced, its markup not shown.
        let mut shared = provider("shared", "ops/ops", "zone", None);
        shared.pricing.priced = true;
        check_golden(
            "providers-replicas",
            &providers_table(&[
                provider("core", "sys/sys", "zone", None),
                partner,
                provider("lab", "acme/web", "project", Some("0")),
                shared,
            ]),
        );
    }

    #[test]
    fn provider_show_golden() {
        let offering = |cpu: u32, mem: u32, arch: &str, plan: Option<&str>| OfferingView {
            cpu,
            mem,
            arch: arch.into(),
            plan: plan.map(str::to_string),
        };
        let class = |id: &str, title: &str, can_place: bool, offerings| ClassView {
            id: id.into(),
            title: title.into(),
            can_place,
            offerings,
        };
        let os = |id: &str, title: &str| OsView {
            id: id.into(),
            title: title.into(),
        };
        let partner = ProviderView {
            id: "pv-000000000005".into(),
            name: "partner".into(),
            project: "sys/sys".into(),
            resource_uri: "urn:orc:partner:zone-1".into(),
            scope: "zone".into(),
            pricing: PricingView {
                priced: false,
                markup: None,
            },
            builtin: false,
            replicas: vec![ReplicaView {
                host: String::new(),
                pid: 0,
                slot: 0,
                role: "serving".into(),
                connected_since: 0,
            }],
            catalog: Some(CatalogView {
                classes: vec![
                    class(
                        "eu-central",
                        "Europe Central",
                        true,
                        vec![
                            offering(2, 4, "x86_64", None),
                            offering(2, 4, "arm64", None),
                            offering(4, 8, "x86_64", None),
                        ],
                    ),
                    class("us-east", "US East", false, vec![]),
                ],
                os: vec![
                    os("debian-12", "Debian 12"),
                    os("ubuntu-24.04", "Ubuntu 24.04"),
                ],
                public_ipv4_offered: 4,
            }),
            created_at: 0,
            updated_at: 0,
        };
        let mut hetzner = partner.clone();
        hetzner.name = "hetzner".into();
        hetzner.project = "acme/web".into();
        hetzner.scope = "project".into();
        hetzner.pricing.markup = Some("0.15".into());
        hetzner.catalog = Some(CatalogView {
            classes: vec![class(
                "fsn1",
                "Falkenstein",
                true,
                vec![
                    offering(2, 4, "x86_64", Some("cx23")),
                    offering(4, 8, "x86_64", Some("cx33")),
                ],
            )],
            os: vec![os("ubuntu-24.04", "Ubuntu 24.04")],
            public_ipv4_offered: 0,
        });
        let mut silent = partner.clone();
        silent.name = "lab".into();
        silent.replicas.clear();
        silent.catalog = None;
        check_golden(
            "provider-show",
            &[partner, hetzner, silent]
                .iter()
                .map(provider_text)
                .collect::<Vec<_>>()
                .join("\n---\n"),
        );
    }
}
