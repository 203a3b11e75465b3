//! `orc node label|cordon|uncordon|drain|ingress|placement`: what placement knows of a
//! node, and whether it accepts public ingress.

use orc_zone_api_types::views::{NodePlacementView, SetNodeLabel};

use super::{client, print_json, project_of, project_url};
use crate::ConnArgs;
use crate::client::segment;

fn node_url(org: &str, project: &str, node: &str) -> String {
    format!("{}/nodes/{}", project_url(org, project), segment(node))
}

fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "-".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The view in words.
pub(crate) fn placement_text(view: &NodePlacementView) -> String {
    let mut out = format!(
        "Node {}{}\n  labels: {}\n  set by the zone: {}\n  ingress: {}\n",
        view.node,
        if view.draining {
            " (draining: takes no new replicas; what runs there moves to other nodes)"
        } else if view.cordoned {
            " (cordoned: takes no new replicas)"
        } else {
            ""
        },
        labels_text(&view.labels),
        labels_text(&view.zone_labels),
        if view.ingress {
            "accepts public ingress (its proxy serves the project's domains and public ports)"
        } else {
            "none"
        }
    );
    for line in &view.moving {
        out.push_str(&format!("  moving {line}\n"));
    }
    for line in &view.kept {
        out.push_str(&format!("  kept {line}\n"));
    }
    orc_common::text::printable(&out).into_owned()
}

async fn show(conn: &ConnArgs, view: &NodePlacementView) -> anyhow::Result<()> {
    if conn.json {
        return print_json(view);
    }
    out!("{}", placement_text(view));
    Ok(())
}

/// `orc node placement NODE`.
pub async fn placement(conn: &ConnArgs, node: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let view: NodePlacementView = client
        .get(&format!("{}/placement", node_url(&org, &project, node)))
        .await?;
    show(conn, &view).await
}

/// `orc node label NODE KEY=VALUE… [--remove KEY…]`.
pub async fn label(
    conn: &ConnArgs,
    node: &str,
    set: &[String],
    remove: &[String],
    project: Option<&str>,
) -> anyhow::Result<()> {
    if set.is_empty() && remove.is_empty() {
        anyhow::bail!("name at least one KEY=VALUE to set or one --remove KEY");
    }
    let pairs: Vec<(&str, &str)> = set
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .ok_or_else(|| anyhow::anyhow!("{pair:?} is not KEY=VALUE"))
        })
        .collect::<anyhow::Result<_>>()?;
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let base = node_url(&org, &project, node);
    let mut last = None;
    for (key, value) in pairs {
        let view: NodePlacementView = client
            .put(
                &format!("{base}/labels/{}", segment(key)),
                &SetNodeLabel {
                    value: value.to_string(),
                },
            )
            .await?;
        last = Some(view);
    }
    for key in remove {
        let view: NodePlacementView = client
            .delete(&format!("{base}/labels/{}", segment(key)))
            .await?;
        last = Some(view);
    }
    match last {
        Some(view) => show(conn, &view).await,
        None => Ok(()),
    }
}

/// `orc node cordon|uncordon|drain NODE`.
pub async fn act(
    conn: &ConnArgs,
    node: &str,
    verb: &str,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let view: NodePlacementView = client
        .post(
            &format!("{}/{verb}", node_url(&org, &project, node)),
            &serde_json::json!({}),
        )
        .await?;
    show(conn, &view).await
}
