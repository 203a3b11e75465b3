//! Generates the `orc.provider.v1` messages and the `ProviderHub` client and server.
//! Needs `protoc` on the PATH (Debian package `protobuf-compiler`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/orc/provider/v1/provider.proto"], &["proto"])?;
    Ok(())
}
