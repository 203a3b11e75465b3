//! Builders of protocol messages, with the defaults every test used to write out.

use orc_common::{Architecture, Shape};
use orc_proto::{Bootstrap, ClassId, Deploy, NodeId, OsId, PoolPath, Purpose, Quote, QuoteToken};

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
    Quote {
        pool: PoolPath::new("p-1").expect("non-empty"),
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
