//! `orc-prov-vultr`: the Vultr provider's command line (see `orc_prov_vultr::cli`).

fn main() -> anyhow::Result<()> {
    orc_prov_vultr::cli::main_from(std::env::args_os())
}
