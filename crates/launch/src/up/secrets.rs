//! The emulated accounts' secrets `orc up` keeps in `<data dir>/secrets/`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{EMULATOR_ACCOUNT, EMULATOR_TOKEN};

/// The emulated accounts' secrets, in `<data dir>/secrets/` (directory 0700, files 0600).
#[derive(Debug)]
pub(super) struct Secrets {
    /// The Robot rescue key's private half, made on the first `orc up`.
    pub(super) rescue_key_file: PathBuf,
    /// Its public half, as stored in Robot.
    pub(super) rescue_public: String,
    /// The key that lets the static provider into `--netns` mode's static hosts.
    pub(super) static_key_file: PathBuf,
    pub(super) static_public: String,
}

impl Secrets {
    pub(super) fn prepare(data_dir: &Path) -> anyhow::Result<Secrets> {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let dir = data_dir.join("secrets");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
        let write = |path: &Path, text: &str| -> anyhow::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            file.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))
        };
        // An SSH key pair, made once: its private file and its public line.
        let pair = |name: &str, comment: &str| -> anyhow::Result<(PathBuf, String)> {
            let private_file = dir.join(name);
            let public_file = dir.join(format!("{name}.pub"));
            let public = match std::fs::read_to_string(&public_file) {
                Ok(public) if private_file.is_file() => public.trim().to_string(),
                _ => {
                    let key = orc_prov_robot::rescue_key::generate(comment)?;
                    write(&private_file, &key.private_openssh)?;
                    write(&public_file, &format!("{}\n", key.public_openssh))?;
                    key.public_openssh
                }
            };
            Ok((private_file, public))
        };
        let (rescue_key_file, rescue_public) = pair("robot-rescue-key", "orc-up-rescue")?;
        let (static_key_file, static_public) = pair("static-ssh-key", "orc-up-static")?;
        Ok(Secrets {
            rescue_key_file,
            rescue_public,
            static_key_file,
            static_public,
        })
    }

    /// Stores the rescue key's public half in the (fresh) Robot emulator; returns the
    /// fingerprint Robot names it by.
    pub(super) async fn register_rescue_key(&self, robot_url: &str) -> anyhow::Result<String> {
        let client = orc_cloud::RobotClient::new(
            orc_cloud::RobotConfig::new(EMULATOR_ACCOUNT, EMULATOR_TOKEN).with_base_url(robot_url),
        )?;
        let key = client
            .create_key("orc-up-rescue", &self.rescue_public)
            .await?;
        Ok(key.fingerprint.to_string())
    }
}
