//! The `orc-prov-static` binary: see [`orc_prov_static::cli`].

fn main() -> anyhow::Result<()> {
    orc_prov_static::cli::main_from(std::env::args_os())
}
