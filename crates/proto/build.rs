//! Generates the `orc.provider.v1` and `orc.agent.v1` messages, and the `ProviderHub` and
//! `AgentHub` clients and servers.
//!
//! The `.proto` files are parsed by `protox`, a protobuf compiler written in Rust, so a build
//! needs nothing but the Rust toolchain (no `protoc` on the PATH).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const ROOT: &str = "proto";
    const FILES: &[&str] = &[
        "proto/orc/provider/v1/provider.proto",
        "proto/orc/agent/v1/agent.proto",
    ];
    for file in FILES {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(FILES, [ROOT])?;
    tonic_prost_build::configure()
        // A replica's maps in a fixed order, so the same assignment encodes to the same
        // bytes (the zone compares digests to send only changes).
        .btree_map(".orc.agent.v1.Replica")
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
