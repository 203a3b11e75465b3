//! `orc up`: the all-in-one development zone on one machine.

/// Arguments of `orc up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the zone keeps its files.
    #[arg(long, env = "ORC_DATA_DIR")]
    pub data_dir: Option<std::path::PathBuf>,
}

/// Runs `orc up`.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("orc up is not available yet")
}
