//! Generates clients for the part of containerd's API the runtime uses, from our own
//! wire-compatible `.proto` files (`proto/`), with `protox`: no `protoc` needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const ROOT: &str = "proto";
    const FILES: &[&str] = &[
        "proto/containerd/services/containers/v1/containers.proto",
        "proto/containerd/services/tasks/v1/tasks.proto",
        "proto/containerd/services/version/v1/version.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(FILES, [ROOT])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(descriptors)?;
    Ok(())
}
