//! The `orc-prov-robot` binary: see [`orc_prov_robot::cli`].

fn main() -> anyhow::Result<()> {
    orc_prov_robot::cli::main_from(std::env::args_os())
}
