//! `orc-prov-hetzner`: the Hetzner Cloud provider's command line (see `orc_prov_hetzner::cli`).

fn main() -> anyhow::Result<()> {
    orc_prov_hetzner::cli::main_from(std::env::args_os())
}
