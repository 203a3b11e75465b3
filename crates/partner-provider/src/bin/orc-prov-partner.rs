//! `orc-prov-partner`: the partner provider's command line (see `orc_partner_provider::cli`).

fn main() -> anyhow::Result<()> {
    orc_partner_provider::cli::main_from(std::env::args_os())
}
