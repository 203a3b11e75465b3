//! A workstation's mesh config as a `wg-quick` file. The private key is the workstation's
//! own (made where the file is written); the zone only ever sees its public half.

use std::fmt::Write as _;

use crate::config::{MESH_INTERFACE, MESH_MTU, MeshConfig};

/// The `wg-quick` text of `config` with `private_key` (base64), or `None` when the config
/// has no mesh interface.
pub fn wg_quick(config: &MeshConfig, private_key: &str) -> Option<String> {
    let interface = config.interface(MESH_INTERFACE)?;
    let mut text = String::new();
    let _ = writeln!(text, "[Interface]");
    let _ = writeln!(text, "PrivateKey = {private_key}");
    if let Some(address) = interface.address {
        let _ = writeln!(text, "Address = {address}");
    }
    // Its packets may cross the backbone inside a second WireGuard layer, as a node's do.
    let _ = writeln!(text, "MTU = {MESH_MTU}");
    for peer in interface.peers.iter() {
        let _ = writeln!(text, "\n# {}", peer.name);
        let _ = writeln!(text, "[Peer]");
        let _ = writeln!(text, "PublicKey = {}", peer.public_key);
        if let Some(endpoint) = peer.endpoint {
            let _ = writeln!(text, "Endpoint = {endpoint}");
        }
        let allowed: Vec<String> = peer.allowed_ips.iter().map(ToString::to_string).collect();
        let _ = writeln!(text, "AllowedIPs = {}", allowed.join(", "));
        if let Some(seconds) = peer.keepalive {
            let _ = writeln!(text, "PersistentKeepalive = {seconds}");
        }
    }
    Some(text)
}
