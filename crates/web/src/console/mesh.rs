//! A project's mesh: its members, and a workstation connected to it.

use super::*;

/// What the mesh page shows besides the mesh.
#[derive(Default)]
pub(super) struct MeshExtras {
    pub(super) connected: Option<orc_zone_api_types::views::ConnectedWorkstation>,
    pub(super) name: String,
    pub(super) public_key: String,
    pub(super) errors: FieldErrors,
    pub(super) status: Option<StatusCode>,
}

pub(super) async fn mesh_page(cx: &Cx<'_>, current: Current, extras: MeshExtras) -> PageResult {
    let mesh: orc_zone_api_types::views::MeshView = cx
        .api
        .get(&format!("{}/mesh", api_project(&current)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let page = model::MeshPage {
        mesh,
        connected: extras.connected,
        name: extras.name,
        public_key: extras.public_key,
        errors: extras.errors,
    };
    let frame = cx.frame(Section::Mesh, Some(current.clone())).await?;
    Ok(html(
        extras.status.unwrap_or(StatusCode::OK),
        views::mesh(&frame, &current, &page),
    ))
}

/// Puts a workstation on the project's mesh with the public key given.
pub(super) async fn connect_workstation(cx: &Cx<'_>, current: Current) -> PageResult {
    let mut extras = MeshExtras {
        name: cx.form("name").trim().to_string(),
        public_key: cx.form("public_key").trim().to_string(),
        ..MeshExtras::default()
    };
    let body = orc_zone_api_types::views::ConnectWorkstation {
        name: extras.name.clone(),
        public_key: extras.public_key.clone(),
    };
    let path = format!("{}/mesh/workstations", api_project(&current));
    match cx.api.send(Method::POST, &path, &body).await {
        Ok(connected) => extras.connected = Some(connected),
        Err(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::NOT_FOUND => {
            return Err(cx.refused(&e));
        }
        Err(e) => {
            extras
                .errors
                .insert(e.field.unwrap_or_else(|| "name".into()), e.message);
            extras.status = Some(e.status);
        }
    }
    mesh_page(cx, current, extras).await
}
