use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use proptest::prelude::*;

use crate::config::{BACKBONE_INTERFACE, ForwardPort, MESH_INTERFACE, MeshConfig};
use crate::key::PublicKey;
use crate::plan::{
    Member, MemberKind, PoolAddress, Project, Site, SiteRef, World, disjoint_sites, forward_port,
    plan, plan_workstation,
};
use crate::workstation::wg_quick;

fn key(n: u8) -> PublicKey {
    PublicKey([n; 32])
}

fn ip(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

fn net(text: &str) -> Ipv4Net {
    text.parse().unwrap()
}

const EU: (&str, &str) = ("partner", "eu-central-a");
const US: (&str, &str) = ("partner", "us-east-a");

fn at((provider, site): (&str, &str)) -> SiteRef {
    SiteRef::new(provider, site)
}

fn node(
    id: &str,
    project: &str,
    site: Option<(&str, &str)>,
    underlay: &str,
    mesh: &str,
    k: u8,
) -> Member {
    Member {
        id: id.into(),
        name: id.into(),
        kind: MemberKind::Node {
            project: project.into(),
            pool: format!("acme/{project}/pool"),
        },
        site: site.map(at),
        underlay: Some(ip(underlay)),
        mesh_address: Some(ip(mesh)),
        key: Some(key(k)),
    }
}

fn gateway(id: &str, site: (&str, &str), underlay: &str, k: u8) -> Member {
    Member {
        id: id.into(),
        name: id.into(),
        kind: MemberKind::Gateway,
        site: Some(at(site)),
        underlay: Some(ip(underlay)),
        mesh_address: None,
        key: Some(key(k)),
    }
}

/// Two partner sites with gateways, a one-cloud node with a public address, a workstation,
/// and a second project with one node at the first site.
fn world() -> World {
    World {
        range: Default::default(),
        workloads: None,
        projects: vec![
            Project {
                id: "web".into(),
                org: "acme".into(),
                name: "web".into(),
                prefix: net("10.88.0.0/24"),
            },
            Project {
                id: "other".into(),
                org: "acme".into(),
                name: "other".into(),
                prefix: net("10.88.1.0/24"),
            },
        ],
        sites: vec![
            Site {
                at: at(EU),
                prefix: net("10.128.0.0/24"),
                stable_ipv4: Some(ip("198.18.1.10")),
            },
            Site {
                at: at(US),
                prefix: net("10.128.1.0/24"),
                stable_ipv4: Some(ip("198.18.2.10")),
            },
        ],
        members: vec![
            gateway("gw-eu", EU, "10.128.0.1", 101),
            gateway("gw-us", US, "10.128.1.1", 102),
            node("n-eu", "web", Some(EU), "10.128.0.11", "10.88.0.2", 1),
            node("n-us", "web", Some(US), "10.128.1.12", "10.88.0.3", 2),
            node("n-hz", "web", None, "198.18.3.5", "10.88.0.4", 3),
            Member {
                id: "ws-1".into(),
                name: "ws-1".into(),
                kind: MemberKind::Workstation {
                    project: "web".into(),
                },
                site: None,
                underlay: None,
                mesh_address: Some(ip("10.88.0.5")),
                key: Some(key(4)),
            },
            node("n-other", "other", Some(EU), "10.128.0.13", "10.88.1.2", 5),
        ],
        pool_addresses: vec![PoolAddress {
            pool: "acme/web/pool".into(),
            at: at(EU),
            address: ip("198.18.1.20"),
            ports: vec![ForwardPort {
                protocol: "tcp".into(),
                port: 80,
            }],
        }],
    }
}

/// `(peer key byte, endpoint, keepalive)` of `config`'s interface `name`.
fn peers(config: &MeshConfig, name: &str) -> Vec<(u8, Option<String>, Option<u16>)> {
    config
        .interface(name)
        .expect("the interface")
        .peers
        .iter()
        .map(|p| {
            (
                p.public_key.0[0],
                p.endpoint.map(|e| e.to_string()),
                p.keepalive,
            )
        })
        .collect()
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

#[test]
fn a_site_node_reaches_the_backbone_directly_and_everything_else_through_nat() {
    let plans = plan(&world());
    let eu = &plans["n-eu"];
    let mesh = eu.interface(MESH_INTERFACE).unwrap();
    assert_eq!(mesh.address, Some(net("10.88.0.2/24")));
    assert_eq!(mesh.listen_port, 51820);
    assert_eq!(
        peers(eu, MESH_INTERFACE),
        [
            (2, some("10.128.1.12:51820"), None),
            (3, some("198.18.3.5:51820"), Some(25)),
            (4, None, None),
        ],
        "the other site over the backbone, the public node through NAT with keep-alives, \
         the workstation dials in; no peer of another project"
    );
    let allowed = &mesh.peers.to_vec()[0].allowed_ips;
    assert_eq!(allowed, &[net("10.88.0.3/32")]);
    let names: Vec<&str> = eu.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "n-eu.web.acme.internal",
            "n-hz.web.acme.internal",
            "n-us.web.acme.internal"
        ]
    );
    assert!(eu.gateway.is_none() && eu.routes.is_empty());
}

#[test]
fn with_a_workload_range_nodes_route_their_replicas_subnets_over_the_mesh() {
    let mut w = world();
    w.workloads = Some(crate::WorkloadRange::default());
    let plans = plan(&w);
    let eu = &plans["n-eu"];
    let mesh = eu.interface(MESH_INTERFACE).unwrap();
    let allowed: Vec<(String, Vec<Ipv4Net>)> = mesh
        .peers
        .to_vec()
        .iter()
        .map(|p| (p.name.clone(), p.allowed_ips.clone()))
        .collect();
    assert_eq!(
        allowed,
        [
            (
                "n-us".to_string(),
                vec![net("10.88.0.3/32"), net("10.96.3.0/24")]
            ),
            (
                "n-hz".to_string(),
                vec![net("10.88.0.4/32"), net("10.96.4.0/24")]
            ),
            ("ws-1".to_string(), vec![net("10.88.0.5/32")]),
        ],
        "a node's subnet follows its mesh address; a workstation runs no replicas"
    );
    let routes: Vec<(Ipv4Net, &str)> = eu
        .routes
        .iter()
        .map(|r| (r.destination, r.interface.as_str()))
        .collect();
    assert_eq!(routes, [(net("10.96.0.0/16"), MESH_INTERFACE)]);
    let ws = plan_workstation(&w, "ws-1").expect("the workstation's plan");
    assert_eq!(ws.routes.len(), 1, "a workstation reaches replicas too");
    // The other project's node has the same subnet numbers but none of these peers.
    let other = &plans["n-other"];
    assert!(
        other
            .interface(MESH_INTERFACE)
            .unwrap()
            .peers
            .to_vec()
            .iter()
            .all(|p| !p.allowed_ips.contains(&net("10.96.3.0/24"))),
        "no route into another project"
    );
    assert!(plans["gw-eu"].interface(MESH_INTERFACE).is_none());
}

#[test]
fn a_public_node_reaches_site_nodes_on_their_gateways_forward_ports() {
    let plans = plan(&world());
    assert_eq!(
        peers(&plans["n-hz"], MESH_INTERFACE),
        [
            (1, some("198.18.1.10:52011"), None),
            (2, some("198.18.2.10:52012"), None),
            (4, None, None),
        ]
    );
    assert_eq!(
        forward_port(net("10.128.0.0/24"), ip("10.128.0.11")),
        Some(52011)
    );
    assert_eq!(forward_port(net("10.128.0.0/24"), ip("10.128.1.11")), None);
}

#[test]
fn a_gateway_peers_with_the_other_sites_and_forwards_its_own() {
    let world = world();
    let plans = plan(&world);
    let gw = &plans["gw-eu"];
    assert!(gw.interface(MESH_INTERFACE).is_none());
    let backbone = gw.interface(BACKBONE_INTERFACE).unwrap();
    assert_eq!(backbone.listen_port, 51821);
    assert_eq!(backbone.address, None);
    assert_eq!(
        peers(gw, BACKBONE_INTERFACE),
        [(102, some("198.18.2.10:51821"), Some(25))]
    );
    assert_eq!(
        backbone.peers.to_vec()[0].allowed_ips,
        [net("10.128.1.0/24")]
    );
    assert_eq!(backbone.peers.to_vec()[0].name, "site:partner/us-east-a");
    assert_eq!(gw.routes.len(), 1);
    assert_eq!(gw.routes[0].destination, net("10.128.1.0/24"));

    let role = gw.gateway.as_ref().expect("the site's NAT");
    assert_eq!(role.site, "partner/eu-central-a");
    assert_eq!(role.stable_ipv4, ip("198.18.1.10"));
    assert_eq!(role.no_nat, [net("10.128.0.0/24"), net("10.128.1.0/24")]);
    assert_eq!(role.blocked, [net("10.88.0.0/16")]);
    let forwards: Vec<(u16, String)> = role
        .udp_forwards
        .iter()
        .map(|f| (f.port, f.to.to_string()))
        .collect();
    assert_eq!(
        forwards,
        [
            (52011, "10.128.0.11:51820".to_string()),
            (52013, "10.128.0.13:51820".to_string())
        ],
        "every node of the site, whatever its project"
    );
    assert_eq!(role.pool_forwards.len(), 1);
    let pool = &role.pool_forwards[0];
    assert_eq!(pool.address, ip("198.18.1.20"));
    assert_eq!(
        pool.targets,
        [ip("10.128.0.11"), ip("10.128.1.12")],
        "the pool's nodes the gateway reaches: its site's and the backbone's, not the public one"
    );
    assert!(
        plans["gw-us"]
            .gateway
            .as_ref()
            .unwrap()
            .pool_forwards
            .is_empty()
    );

    // A gateway never holds a project key.
    let text = serde_json::to_string(&plans["gw-eu"]).unwrap();
    for member in world
        .members
        .iter()
        .filter(|m| m.kind != MemberKind::Gateway)
    {
        let key = member.key.unwrap().to_string();
        assert!(
            !text.contains(&key),
            "{} leaked into the gateway",
            member.id
        );
    }
}

#[test]
fn a_workstation_dials_every_node_and_gets_a_wg_quick_file() {
    let world = world();
    let config = plan_workstation(&world, "ws-1").unwrap();
    assert_eq!(
        peers(&config, MESH_INTERFACE),
        [
            (1, some("198.18.1.10:52011"), Some(25)),
            (2, some("198.18.2.10:52012"), Some(25)),
            (3, some("198.18.3.5:51820"), Some(25)),
        ]
    );
    assert!(
        plan_workstation(&world, "n-eu").is_none(),
        "not a workstation"
    );
    assert!(!plan(&world).contains_key("ws-1"), "no agent runs on it");

    let text = wg_quick(&config, "PRIVATE").unwrap();
    assert!(
        text.starts_with("[Interface]\nPrivateKey = PRIVATE\nAddress = 10.88.0.5/24\nMTU = 1340\n")
    );
    assert!(text.contains(&format!(
        "# n-eu\n[Peer]\nPublicKey = {}\nEndpoint = 198.18.1.10:52011\nAllowedIPs = 10.88.0.2/32\nPersistentKeepalive = 25\n",
        key(1)
    )));
    assert_eq!(text.matches("[Peer]").count(), 3);
}

#[test]
fn members_without_keys_or_addresses_are_nobodys_peers() {
    let mut world = world();
    world.members[3].key = None; // n-us
    world.members[4].mesh_address = None; // n-hz
    let plans = plan(&world);
    assert_eq!(peers(&plans["n-eu"], MESH_INTERFACE), [(4, None, None)]);
    assert!(
        plans["n-hz"].is_empty(),
        "no address: nothing to set up yet"
    );
    assert!(
        plans["n-us"].interface(MESH_INTERFACE).is_some(),
        "a node without a reported key still gets its own interface"
    );
    // A gateway whose key is unknown is not peered with.
    world.members[1].key = None;
    let plans = plan(&world);
    assert!(
        plans["gw-eu"]
            .interface(BACKBONE_INTERFACE)
            .unwrap()
            .peers
            .is_empty()
    );
    assert!(plans["gw-eu"].routes.is_empty());
}

/// The members whose config differs between two worlds.
fn changed(before: &World, after: &World) -> Vec<String> {
    let (a, b) = (plan(before), plan(after));
    let mut ids: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|id| a.get(*id).map(MeshConfig::digest) != b.get(*id).map(MeshConfig::digest))
        .cloned()
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[test]
fn a_change_touches_only_the_agents_it_concerns() {
    let before = world();

    let mut added = before.clone();
    added.members.push(node(
        "n-other-2",
        "other",
        Some(US),
        "10.128.1.14",
        "10.88.1.3",
        6,
    ));
    assert_eq!(
        changed(&before, &added),
        ["gw-us", "n-other", "n-other-2"],
        "its project's peers and its gateway's forwards; not the other project"
    );

    let mut opened = before.clone();
    opened.sites.push(Site {
        at: SiteRef::new("partner", "ap-south-a"),
        prefix: net("10.128.2.0/24"),
        stable_ipv4: Some(ip("198.18.4.10")),
    });
    opened.members.push(gateway(
        "gw-ap",
        ("partner", "ap-south-a"),
        "10.128.2.1",
        103,
    ));
    assert_eq!(changed(&before, &opened), ["gw-ap", "gw-eu", "gw-us"]);

    let mut closed = before.clone();
    closed.sites.retain(|s| s.at != at(US));
    closed.members.retain(|m| m.id != "gw-us");
    let plans = plan(&closed);
    assert!(
        plans["gw-eu"]
            .interface(BACKBONE_INTERFACE)
            .unwrap()
            .peers
            .is_empty(),
        "a closed site disappears from the other gateways"
    );
    assert!(!plans.contains_key("gw-us"));
}

#[test]
fn a_gateway_without_its_stable_address_forwards_nothing_yet() {
    let mut world = world();
    world.sites[0].stable_ipv4 = None;
    let plans = plan(&world);
    assert!(plans["gw-eu"].gateway.is_none());
    assert!(
        plans["gw-us"]
            .interface(BACKBONE_INTERFACE)
            .unwrap()
            .peers
            .is_empty(),
        "a gateway with no known address is not a backbone peer"
    );
    assert_eq!(
        peers(&plans["n-hz"], MESH_INTERFACE)[..2],
        [(1, None, None), (2, some("198.18.2.10:52012"), None)],
        "a node of that site has no forward port to be reached on yet (it dials out)"
    );
}

proptest! {
    /// Whatever the order members arrive in, every agent gets the same config; and no
    /// member ever has a peer of another project.
    #[test]
    fn plans_do_not_depend_on_order_and_never_cross_projects(seed in any::<u64>()) {
        let base = world();
        let mut shuffled = base.clone();
        let mut state = seed | 1;
        for i in (1..shuffled.members.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.members.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let digests = |w: &World| -> BTreeMap<String, String> {
            plan(w).into_iter().map(|(id, c)| (id, c.digest())).collect()
        };
        prop_assert_eq!(digests(&base), digests(&shuffled));

        let project_of: BTreeMap<PublicKey, String> = base
            .members
            .iter()
            .filter_map(|m| match &m.kind {
                MemberKind::Node { project, .. } | MemberKind::Workstation { project } => {
                    Some((m.key.unwrap(), project.clone()))
                }
                MemberKind::Gateway => None,
            })
            .collect();
        for member in &base.members {
            if let MemberKind::Node { project, .. } = &member.kind {
                let config = &plan(&base)[&member.id];
                for peer in config.interface(MESH_INTERFACE).unwrap().peers.iter() {
                    prop_assert_eq!(&project_of[&peer.public_key], project);
                }
            }
        }
    }
}

/// `world()` with a subset of its members, chosen by the bits of `mask` (gateways and the
/// first node always stay), and node `n-eu` moved to `10.128.0.21` when `moved`.
fn world_with(mask: u8, moved: bool) -> World {
    let mut w = world();
    let mut bit = 0;
    w.members.retain(|m| {
        if matches!(m.kind, MemberKind::Gateway) || m.id == "n-hz" {
            return true;
        }
        bit += 1;
        mask & (1 << (bit - 1)) != 0
    });
    if moved {
        for m in &mut w.members {
            if m.id == "n-eu" {
                m.underlay = Some(ip("10.128.0.21"));
            }
        }
    }
    w
}

mod changes {
    use super::*;
    use crate::changes::{ChangeCache, MeshChanges};

    #[test]
    fn a_new_member_is_one_peer_and_one_name_for_each_other_node() {
        let before = plan(&world_with(0b0001, false));
        let after = plan(&world_with(0b0011, false));
        let cache = ChangeCache::default();
        let changes = MeshChanges::between_cached(&before["n-eu"], &after["n-eu"], &cache);
        assert_eq!(changes.interfaces.len(), 1);
        let mesh = &changes.interfaces[0];
        let set: Vec<u8> = mesh.peers_set.iter().map(|p| p.public_key.0[0]).collect();
        assert_eq!(set, [2], "only n-us is new to n-eu");
        assert!(mesh.peers_removed.is_empty() && !mesh.removed);
        let names: Vec<&str> = changes.hosts_set.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["n-us.web.acme.internal"]);
        assert!(changes.routes.is_none() && changes.gateway.is_none());
        assert_eq!(changes.apply(&before["n-eu"]).unwrap(), after["n-eu"]);
        // The new member itself gets its whole list: n-eu and n-hz.
        let fresh = MeshChanges::between(&MeshConfig::default(), &after["n-us"]);
        let set: Vec<u8> = fresh.interfaces[0]
            .peers_set
            .iter()
            .map(|p| p.public_key.0[0])
            .collect();
        assert_eq!(set, [1, 3]);
        assert_eq!(fresh.apply(&MeshConfig::default()).unwrap(), after["n-us"]);
    }

    #[test]
    fn a_member_that_moves_is_not_told_about_itself() {
        let before = plan(&world_with(0b1111, false));
        let after = plan(&world_with(0b1111, true));
        let cache = ChangeCache::default();
        // n-eu's own entry changed in the tables it shares: nothing for n-eu itself.
        let own = MeshChanges::between_cached(&before["n-eu"], &after["n-eu"], &cache);
        assert!(own.is_empty(), "{own:?}");
        // n-us reaches n-eu over the backbone at its new address.
        let other = MeshChanges::between_cached(&before["n-us"], &after["n-us"], &cache);
        let set: Vec<String> = other.interfaces[0]
            .peers_set
            .iter()
            .map(|p| p.endpoint.unwrap().to_string())
            .collect();
        assert_eq!(set, ["10.128.0.21:51820"]);
        // The gateway's forward for n-eu moved with it.
        let gw = MeshChanges::between_cached(&before["gw-eu"], &after["gw-eu"], &cache);
        assert!(gw.gateway.is_some() && gw.interfaces.is_empty());
        assert_eq!(gw.apply(&before["gw-eu"]).unwrap(), after["gw-eu"]);
    }

    #[test]
    fn a_removed_interface_is_taken_away() {
        let before = plan(&world())["n-eu"].clone();
        let changes = MeshChanges::between(&before, &MeshConfig::default());
        assert!(changes.interfaces[0].removed);
        assert_eq!(changes.apply(&before).unwrap(), MeshConfig::default());
        let wrong = changes.apply(&MeshConfig::default()).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "the changes remove interface orc-mesh, which the config does not have"
        );
    }

    proptest! {
        /// From any subset of the world to any other, the changes (with a cache shared by
        /// every member, as the zone shares it) turn each member's old config into its new
        /// one, and two equal configs have no changes.
        #[test]
        fn changes_turn_any_config_into_any_other(
            from in any::<u8>(), to in any::<u8>(), moved in any::<bool>()
        ) {
            let before = plan(&world_with(from & 0b1111, false));
            let after = plan(&world_with(to & 0b1111, moved));
            let cache = ChangeCache::default();
            let empty = MeshConfig::default();
            for (id, new) in &after {
                let old = before.get(id).unwrap_or(&empty);
                let changes = MeshChanges::between_cached(old, new, &cache);
                prop_assert_eq!(&changes.apply(old).unwrap(), new, "member {}", id);
                prop_assert_eq!(changes, MeshChanges::between(old, new), "member {}", id);
                prop_assert!(MeshChanges::between(new, new).is_empty());
            }
        }
    }
}

#[test]
fn a_site_overlapping_another_providers_site_is_refused_and_the_first_keeps_its_prefix() {
    let site = |provider: &str, name: &str, prefix: &str| Site {
        at: at((provider, name)),
        prefix: net(prefix),
        stable_ipv4: Some(ip("198.18.0.1")),
    };
    let first = site("pv-000000000003", "eu-central-a", "10.90.1.0/24");
    let own = site("pv-000000000003", "us-east-a", "10.90.2.0/24");
    let copy = site("pv-000000000009", "eu-central-a", "10.90.1.0/24");
    let wider = site("pv-000000000009", "eu-wide", "10.90.0.0/16");
    let apart = site("pv-000000000009", "ap-south-a", "10.91.0.0/24");
    let (kept, refused) = disjoint_sites(vec![
        wider.clone(),
        copy.clone(),
        apart.clone(),
        own.clone(),
        first.clone(),
    ]);
    assert_eq!(kept, vec![first.clone(), own, apart]);
    assert_eq!(
        refused,
        vec![(copy, first.at.clone()), (wider, first.at.clone())]
    );
}
