//! Builders of protocol messages, with the defaults every test used to write out.

use orc_common::{Architecture, Shape};
use orc_proto::{
    Bootstrap, ClassId, Deploy, NodeId, OsId, PoolPath, Purpose, Quote, QuoteToken, SiteName,
};

/// The OS most tests ask for.
pub const OS: &str = "ubuntu-24.04";

/// An x86 shape with no extra disks.
pub fn shape(vcpus: u32, memory_gib: u32) -> Shape {
    Shape {
        vcpus,
        memory_gib,
        arch: Architecture::X86_64,
        disks_gib: Vec::new(),
    }
}

/// A tenant quote for `node` in `class` at `vcpus`/`memory_gib`, OS [`OS`], pool `p-1`.
pub fn quote(node: &str, class: &str, vcpus: u32, memory_gib: u32) -> Quote {
    quote_in("p-1", node, class, vcpus, memory_gib)
}

/// [`quote`] for a node of `pool` (`acme/web/api`), where the pool's path shows in what
/// the provider makes.
pub fn quote_in(pool: &str, node: &str, class: &str, vcpus: u32, memory_gib: u32) -> Quote {
    Quote {
        pool: PoolPath::new(pool).expect("a test gives a pool"),
        node_id: NodeId::new(node).expect("a test gives a node id"),
        purpose: Purpose::Tenant,
        shape: shape(vcpus, memory_gib),
        class: ClassId::new(class).expect("a test gives a class"),
        os: OsId::new(OS).expect("non-empty"),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    }
}

/// [`quote_in`] for a node of a public pool, which wants an address of its own.
pub fn public_quote(pool: &str, node: &str, class: &str, vcpus: u32, memory_gib: u32) -> Quote {
    Quote {
        public: true,
        ..quote_in(pool, node, class, vcpus, memory_gib)
    }
}

/// A quote for the gateway `node` of `site`, as the zone asks for one: a 1 vCPU, 1 GiB
/// machine of the system pool `sys/sys/gw-<site>`, OS `gateway`, pinned to `site`.
pub fn gateway_quote(node: &str, class: &str, site: &str) -> Quote {
    Quote {
        purpose: Purpose::Gateway,
        os: OsId::new("gateway").expect("non-empty"),
        pinned_site: Some(SiteName::new(site).expect("a test gives a site")),
        ..quote_in(&format!("sys/sys/gw-{site}"), node, class, 1, 1)
    }
}

/// A deploy of `node` with `token`, OS [`OS`], no keys and no bootstrap.
pub fn deploy(node: &str, token: QuoteToken) -> Deploy {
    Deploy {
        node_id: NodeId::new(node).expect("a test gives a node id"),
        quote_token: token,
        os: OsId::new(OS).expect("non-empty"),
        ssh_keys: Vec::new(),
        bootstrap: Bootstrap::default(),
    }
}
