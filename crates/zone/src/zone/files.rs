//! The data dir's files: the dir itself (private to the zone's user), the files in it, and
//! the first operator with the admin token file.

use std::path::Path;

use orc_zone_api_types::data_dir::{ADMIN_TOKEN_FILE, open_private, write_private_file};

use super::config::ZoneError;
use crate::model::{Name, Role, TokenSecret, sys_org_id};
use crate::store::{Store, StoreError};

/// Creates the data dir 0700 when it is missing; refuses one that other users can enter or
/// read.
pub fn prepare_data_dir(dir: &Path) -> Result<(), ZoneError> {
    let io = |source| ZoneError::DataDir {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.exists() {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        match builder.create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).map_err(io)?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(ZoneError::DataDirOpen {
                path: dir.to_path_buf(),
                mode,
            });
        }
    }
    Ok(())
}

/// Makes every regular file directly in `dir` 0600 (SQLite's files, the token, the key, the
/// URL), whoever made it and whatever mode it was given.
pub(super) fn tighten_files(dir: &Path) -> Result<(), ZoneError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ZoneError::DataDir { path, source }
        };
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let path = entry.path();
            // `symlink_metadata`: a link is never followed out of the data dir.
            let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(io(&path))?;
            }
        }
    }
    Ok(())
}

/// Creates `path` empty and 0600 if it does not exist.
pub(super) fn touch_private(path: &Path) -> Result<(), ZoneError> {
    open_private(path, false)
        .map(drop)
        .map_err(|source| ZoneError::DataDir {
            path: path.to_path_buf(),
            source,
        })
}

/// How long the admin token the zone writes lives (the API's maximum).
const ADMIN_TOKEN_DAYS: i64 = 365;
/// A zone starting within this many days of the admin token's expiry writes a new one.
const ADMIN_TOKEN_RENEW_DAYS: i64 = 30;

/// Makes sure user `admin` exists with an owner role in org `sys` and a token in
/// `<data_dir>/admin-token`. Returns the token and whether it was created now.
pub(super) async fn ensure_admin(
    store: &Store,
    data_dir: &Path,
) -> Result<(TokenSecret, bool), ZoneError> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let now = crate::model::Timestamp::now();
    let name: Name = crate::model::ADMIN_USER
        .parse()
        .map_err(|e: crate::model::ModelError| {
            ZoneError::Store(StoreError::Invalid {
                kind: crate::store::Kind::User,
                id: crate::model::ADMIN_USER.to_string(),
                reason: e.to_string(),
            })
        })?;
    let user = match store.user_by_name(&name).await {
        Ok(u) => u,
        Err(StoreError::NotFound { .. }) => {
            let user = store
                .create_user(&name, now)
                .await
                .map_err(ZoneError::Store)?;
            store
                .add_membership(&user.id, &sys_org_id(), None, Role::Owner, now)
                .await
                .map_err(ZoneError::Store)?;
            user
        }
        Err(e) => return Err(ZoneError::Store(e)),
    };
    if let Ok(text) = std::fs::read_to_string(&path) {
        let secret = TokenSecret::from_presented(text.trim().to_string());
        let valid = store
            .authenticate_token(&secret, now)
            .await
            .map_err(ZoneError::Store)?;
        match valid {
            Some(t) if t.user_id == user.id => {
                let renew_after = now.plus_days(ADMIN_TOKEN_RENEW_DAYS);
                if t.expires_at.is_some_and(|at| at <= renew_after) {
                    // Close to expiry: a new one replaces it, and the old one is revoked.
                    let _ = store.revoke_token(&t.id, now).await;
                    tracing::info!(path = %path.display(), "the admin token was close to expiry; writing a new one");
                } else {
                    return Ok((secret, false));
                }
            }
            _ => {
                tracing::warn!(path = %path.display(), "the admin token file holds no valid token; writing a new one");
            }
        }
    }
    let (_, secret) = store
        .create_token(
            &user.id,
            "admin (created at zone start)",
            Some(now.plus_days(ADMIN_TOKEN_DAYS)),
            Some(&crate::model::sys_project_id()),
            now,
        )
        .await
        .map_err(ZoneError::Store)?;
    write_private_file(&path, secret.expose()).map_err(|source| ZoneError::DataDir {
        path: path.clone(),
        source,
    })?;
    Ok((secret, true))
}
