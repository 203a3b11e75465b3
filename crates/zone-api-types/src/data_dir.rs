//! The zone's data dir as the clients on its machine read it: where it is, the files a
//! running zone leaves there for them (its URL, the admin token, the CA they pin), and how
//! both sides write a private file in it.
//!
//! The one part of this crate that touches the file system: the zone writes these files and
//! `orc` reads them, so their names and their mode are one contract kept in one place.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// File in the data dir holding the admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// File in the data dir holding the API's URL.
pub const ZONE_URL_FILE: &str = "zone-url";
/// File in the data dir holding the CA certificate clients pin.
pub const CA_CERT_FILE: &str = "ca.pem";

/// The data dir used when none is given: `$ORC_DATA_DIR`, else `$XDG_DATA_HOME/orc`, else
/// `$HOME/.local/share/orc`, else `./.orc`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ORC_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("orc");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/orc");
    }
    PathBuf::from(".orc")
}

/// Opens `path` for writing, creating it 0600 if it is missing (and emptying it when
/// `truncate`).
pub fn open_private(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Writes `text` and a newline to `path`, 0600, replacing it in one rename so a reader (the
/// CLI reading `admin-token`) sees the old content or the new, never half of it.
pub fn write_private_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("new");
    let mut file = open_private(&tmp, true)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    writeln!(file, "{text}")?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_replaced_whole_and_readable_by_its_owner_only() {
        let dir = std::env::temp_dir().join(format!("orc-data-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(ADMIN_TOKEN_FILE);
        std::fs::write(&path, "old\n").unwrap();
        write_private_file(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert!(!path.with_extension("new").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
