//! A project's mesh: `orc mesh status` (every member, whether its agent applied the zone's
//! latest config, how many of its peers answered lately), and `orc mesh connect` /
//! `disconnect`, which put this machine on the mesh as a workstation.
//!
//! `connect` makes the workstation's WireGuard key here and sends only its public half; the
//! private key goes into the `wg-quick` file it writes (0600) and nowhere else. It refuses to
//! overwrite a file unless told to, before it asks the zone for anything, and it takes the
//! workstation off the mesh again when the file cannot be written, so a failed connect leaves
//! no member behind.

use std::net::SocketAddrV4;
use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;
use orc_mesh::config::{Interface, MESH_INTERFACE, MESH_PORT, Peer};
use orc_zone_api_types::views::{
    ConnectWorkstation, ConnectedWorkstation, MeshMemberView, MeshView, WorkstationView,
};

use super::{client, print_json, project_of, project_url};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::Table;

/// The file `orc mesh connect` writes when no `--output` is named. `wg-quick` names the
/// interface after the file, so this one comes up as `orc-mesh`.
pub const DEFAULT_OUTPUT: &str = "orc-mesh.conf";

/// The workstation name to use when none is given: this machine's host name, as a name the
/// zone takes (lower case; other characters become `-`).
pub fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name_of_host(host.trim())
}

fn name_of_host(host: &str) -> String {
    let first = host.split('.').next().unwrap_or_default();
    let mut name = orc_common::text::dns_label(first);
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "ws-");
        name.truncate(63);
    }
    if name == "ws-" || name.is_empty() {
        return "workstation".to_string();
    }
    name
}

fn bytes_text(bytes: Option<u64>) -> String {
    let Some(bytes) = bytes else {
        return "-".to_string();
    };
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn generations_text(m: &MeshMemberView) -> String {
    match (m.applied_generation, m.desired_generation) {
        (Some(applied), Some(desired)) => format!("{applied}/{desired}"),
        _ => "-".to_string(),
    }
}

fn peers_text(m: &MeshMemberView) -> String {
    match m.peers_up {
        Some(up) => format!("{up}/{}", m.peers),
        None => format!("?/{}", m.peers),
    }
}

pub(crate) fn status_table(mesh: &MeshView) -> String {
    let mut t = Table::new(&[
        "NAME", "KIND", "ADDRESS", "POOL", "SITE", "STATE", "CONFIG", "PEERS UP", "RX", "TX",
        "REPORTED",
    ]);
    for m in &mesh.members {
        t.row(vec![
            m.name.clone(),
            m.kind.clone(),
            m.address.clone(),
            m.pool.clone().unwrap_or_else(|| "-".into()),
            m.site.clone().unwrap_or_else(|| "-".into()),
            m.state.clone(),
            generations_text(m),
            peers_text(m),
            bytes_text(m.rx_bytes),
            bytes_text(m.tx_bytes),
            m.reported_at.map_or("-".to_string(), |at| {
                orc_common::time::format_time(orc_common::Timestamp(at))
            }),
        ]);
    }
    let mut text = format!(
        "Mesh {} of {}/{} (peers count as up after a handshake within {} s)\n\n",
        mesh.prefix.as_deref().unwrap_or("(no prefix yet)"),
        mesh.org,
        mesh.project,
        mesh.handshake_window_seconds
    );
    if mesh.members.is_empty() {
        text.push_str("No members: a node joins once its agent attaches.\n");
    } else {
        text.push_str(&t.render());
        text.push_str(&by_site(mesh));
    }
    text
}

/// One line per site (and one for nodes at none): nodes, how many are in step, peers up.
fn by_site(mesh: &MeshView) -> String {
    #[derive(Default)]
    struct Site {
        nodes: u32,
        in_step: u32,
        up: u32,
        peers: u32,
    }
    let mut sites: std::collections::BTreeMap<&str, Site> = std::collections::BTreeMap::new();
    for m in mesh.members.iter().filter(|m| m.kind == "node") {
        let site = sites.entry(m.site.as_deref().unwrap_or("")).or_default();
        site.nodes += 1;
        site.in_step += u32::from(m.state == "in step");
        site.up += m.peers_up.unwrap_or(0);
        site.peers += m.peers;
    }
    if sites.is_empty() {
        return String::new();
    }
    let mut t = Table::new(&["SITE", "NODES", "IN STEP", "PEERS UP"]);
    for (name, site) in &sites {
        t.row(vec![
            if name.is_empty() { "(none)" } else { name }.to_string(),
            site.nodes.to_string(),
            site.in_step.to_string(),
            format!("{}/{}", site.up, site.peers),
        ]);
    }
    format!("\n{}", t.render())
}

/// `orc mesh status [ORG/PROJECT]`.
pub async fn status(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let mesh: MeshView = client
        .get(&format!("{}/mesh", project_url(&org, &project)))
        .await?;
    if conn.json {
        return print_json(&mesh);
    }
    out!("{}", status_table(&mesh));
    Ok(())
}

/// The `wg-quick` file of a connected workstation with its private key `private_key`.
pub(crate) fn wg_quick_file(
    connected: &ConnectedWorkstation,
    path: &str,
    private_key: &str,
) -> anyhow::Result<String> {
    let mut peers = Vec::new();
    for p in &connected.peers {
        let endpoint = match &p.endpoint {
            Some(e) => Some(
                e.parse::<SocketAddrV4>()
                    .with_context(|| format!("the zone sent peer {} endpoint {e:?}", p.name))?,
            ),
            None => None,
        };
        peers.push(Peer {
            name: p.name.clone(),
            public_key: p
                .public_key
                .parse()
                .with_context(|| format!("the zone sent peer {} a bad key", p.name))?,
            endpoint,
            allowed_ips: p
                .allowed_ips
                .iter()
                .map(|a| a.parse())
                .collect::<Result<_, _>>()
                .with_context(|| format!("the zone sent peer {} bad allowed IPs", p.name))?,
            keepalive: p.keepalive_seconds,
        });
    }
    let config = orc_mesh::MeshConfig {
        interfaces: vec![Interface {
            name: MESH_INTERFACE.to_string(),
            address: Some(
                connected
                    .interface_address
                    .parse()
                    .context("the zone sent a bad interface address")?,
            ),
            listen_port: MESH_PORT,
            peers: peers.into(),
        }],
        ..Default::default()
    };
    let body = orc_mesh::workstation::wg_quick(&config, private_key)
        .context("the zone sent no mesh interface")?;
    Ok(format!(
        "# Workstation {} on the mesh of {path} (orc mesh connect).\n\
         # Holds its private key: keep it to yourself. Bring it up with wg-quick up.\n{body}",
        connected.workstation.name
    ))
}

/// `orc mesh connect [ORG/PROJECT]`: makes a key, registers the workstation, writes the
/// `wg-quick` file.
pub async fn connect(
    conn: &ConnArgs,
    project: Option<&str>,
    name: Option<String>,
    output: &Path,
    force: bool,
) -> anyhow::Result<()> {
    if !force && output.exists() {
        anyhow::bail!(
            "{} exists; choose another --output or pass --force to replace it",
            output.display()
        );
    }
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let path = format!("{org}/{project}");
    let name = name.unwrap_or_else(default_name);
    let private = orc_wg::generate_private_key().context("no random source for the key")?;
    let public = orc_wg::public_key(&private);
    let engine = base64::engine::general_purpose::STANDARD;
    let body = ConnectWorkstation {
        name: name.clone(),
        public_key: engine.encode(public),
    };
    let url = format!("{}/mesh/workstations", project_url(&org, &project));
    let connected: ConnectedWorkstation = client.post(&url, &body).await?;
    let written = wg_quick_file(&connected, &path, &engine.encode(private)).and_then(|text| {
        orc_zone_api_types::data_dir::write_private_file(output, text.trim_end())
            .with_context(|| format!("cannot write {}", output.display()))
    });
    if let Err(e) = written {
        let undo = client
            .delete::<WorkstationView>(&format!("{url}/{}", segment(&name)))
            .await;
        return Err(match undo {
            Ok(_) => e.context(format!("workstation {name} was taken off the mesh again")),
            Err(undo) => e.context(format!(
                "and workstation {name} could not be taken off the mesh ({undo}); run orc mesh \
                 disconnect {path} --name {name}"
            )),
        });
    }
    if conn.json {
        print_json(&connected)?;
    }
    let shown = if output.is_absolute() || output.starts_with(".") {
        output.display().to_string()
    } else {
        format!("./{}", output.display())
    };
    eprintln!(
        "Connected workstation {name} to the mesh of {path} at {} ({} peers); wrote {} (0600).\n\
         Bring it up: sudo wg-quick up {shown}",
        connected.interface_address,
        connected.peers.len(),
        output.display(),
    );
    Ok(())
}

/// `orc mesh disconnect [ORG/PROJECT]`.
pub async fn disconnect(
    conn: &ConnArgs,
    project: Option<&str>,
    name: Option<String>,
) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project) = project_of(&client, project).await?;
    let name = name.unwrap_or_else(default_name);
    let gone: WorkstationView = client
        .delete(&format!(
            "{}/mesh/workstations/{}",
            project_url(&org, &project),
            segment(&name)
        ))
        .await?;
    if conn.json {
        return print_json(&gone);
    }
    outln!(
        "Disconnected workstation {} ({}) from the mesh of {org}/{project}.",
        gone.name,
        gone.address
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_zone_api_types::views::MeshPeerView;

    use crate::commands::check_golden;

    #[test]
    fn host_names_become_workstation_names() {
        assert_eq!(name_of_host("Alice-Laptop.local"), "alice-laptop");
        assert_eq!(name_of_host("build_box-"), "build-box");
        assert_eq!(name_of_host("7th"), "ws-7th");
        assert_eq!(name_of_host(""), "workstation");
        assert_eq!(name_of_host(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(bytes_text(None), "-");
        assert_eq!(bytes_text(Some(512)), "512 B");
        assert_eq!(bytes_text(Some(1536)), "1.5 KiB");
        assert_eq!(bytes_text(Some(3 << 30)), "3.0 GiB");
    }

    fn member(name: &str, kind: &str) -> MeshMemberView {
        MeshMemberView {
            id: name.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            address: "10.88.0.2".into(),
            pool: None,
            site: None,
            state: "idle".into(),
            desired_generation: None,
            applied_generation: None,
            apply_error: None,
            peers: 0,
            peers_up: None,
            rx_bytes: None,
            tx_bytes: None,
            reported_at: None,
        }
    }

    #[test]
    fn mesh_status_golden() {
        let mut ready = member("n-00000000000k", "node");
        ready.pool = Some("db".into());
        ready.site = Some("eu-central-a".into());
        ready.state = "in step".into();
        (ready.desired_generation, ready.applied_generation) = (Some(4), Some(4));
        (ready.peers, ready.peers_up) = (2, Some(2));
        (ready.rx_bytes, ready.tx_bytes) = (Some(1_234_567), Some(890));
        ready.reported_at = Some(1_767_225_600_000);
        let mut applying = member("n-00000000000m", "node");
        applying.address = "10.88.0.3".into();
        applying.pool = Some("db".into());
        applying.state = "applying".into();
        (applying.desired_generation, applying.applied_generation) = (Some(5), Some(4));
        applying.peers = 2;
        let mut laptop = member("laptop", "workstation");
        laptop.address = "10.88.0.4".into();
        laptop.state = "connected".into();
        (laptop.peers, laptop.peers_up) = (2, Some(1));
        let mesh = MeshView {
            org: "acme".into(),
            project: "web".into(),
            prefix: Some("10.88.0.0/24".into()),
            handshake_window_seconds: 180,
            members: vec![ready, applying, laptop],
        };
        check_golden("mesh-status", &status_table(&mesh));
    }

    #[test]
    fn the_wg_quick_file_holds_the_key_the_address_and_every_peer() {
        let connected = ConnectedWorkstation {
            workstation: WorkstationView {
                id: "ws-p-1-laptop".into(),
                name: "laptop".into(),
                address: "10.88.0.4".into(),
                public_key: orc_mesh::PublicKey([9; 32]).to_string(),
                created_at: 0,
            },
            interface_address: "10.88.0.4/24".into(),
            peers: vec![MeshPeerView {
                name: "n-00000000000k".into(),
                public_key: orc_mesh::PublicKey([1; 32]).to_string(),
                endpoint: Some("198.18.1.10:52011".into()),
                allowed_ips: vec!["10.88.0.2/32".into()],
                keepalive_seconds: Some(25),
            }],
        };
        let text = wg_quick_file(&connected, "acme/web", "PRIVATE").unwrap();
        assert!(
            text.contains(
                "[Interface]\nPrivateKey = PRIVATE\nAddress = 10.88.0.4/24\nMTU = 1340\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Endpoint = 198.18.1.10:52011\nAllowedIPs = 10.88.0.2/32\nPersistentKeepalive = 25"
            ),
            "{text}"
        );
        let mut bad = connected.clone();
        bad.peers[0].endpoint = Some("nowhere".into());
        let err = wg_quick_file(&bad, "acme/web", "PRIVATE").unwrap_err();
        assert!(format!("{err:#}").contains("n-00000000000k"), "{err:#}");
    }
}
