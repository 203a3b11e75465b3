//! Which user an app slot's processes run as, and where their runtime files live then.
//!
//! When the zone runs as root, a slot's process runs as a uid and gid of its pool's own
//! ([`RunAs::Auto`]): it cannot read the zone's data dir (store, sealing key, CA key, other
//! pools' files) nor signal or trace another pool's processes. The ids come from the range
//! systemd keeps for dynamic users ([`DYNAMIC_IDS`]) and need no `/etc/passwd` entry: the
//! kernel does not care whether a uid has a name. Supplementary groups are cleared: the
//! standard library calls `setgroups(0)` when a command is given a uid and no groups.
//!
//! Such a process cannot enter the data dir (mode 0700), so its runtime dir moves under a
//! root of its own ([`DEFAULT_RUNTIME_ROOT`], root-owned, mode 0711: anyone may pass through,
//! nobody may list it), one dir per slot, mode 0700 and owned by the slot's uid, its files
//! 0600. The process's working dir is that runtime dir. The registry binaries its pool runs
//! are copied under the same root, into a dir of the pool's own ([`pool_bin_dir`]) that only
//! the pool's gid may enter (see [`crate::blobs`]).
//!
//! A pool's uid is its pool dir in the zone's data dir (pool ids are counters, so the same
//! id exists in every zone of a host) hashed with FNV-1a into the range; when another pool
//! of this process holds that uid, the next free one is taken, so live pools of one zone
//! never share a uid. Choices are not coordinated with other zone processes on the host (a
//! collision is 1 in 4336 per pair of pools) nor with systemd, whose dynamic users draw from
//! the same range.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::DirBuilder;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde::{Deserialize, Serialize};

use orc_zone_model::PoolId;

/// Which user the processes of an app slot run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RunAs {
    /// A uid and gid of the slot's pool's own when the zone's effective uid is 0; the zone's
    /// own user otherwise (an unprivileged zone cannot switch users).
    #[default]
    Auto,
    /// Always the zone's own user, with the runtime dir in the data dir.
    ZoneUser,
    /// Always this uid and gid, for every pool (tests; hosts whose operator manages users).
    Uid { uid: u32, gid: u32 },
}

/// The range systemd keeps for dynamic users (`DynamicUser=`), 4336 ids.
pub const DYNAMIC_IDS: std::ops::RangeInclusive<u32> = 61184..=65519;

/// Where runtime dirs of slots that do not run as the zone's user go by default.
pub const DEFAULT_RUNTIME_ROOT: &str = "/run/orc-apps";

/// A uid and its gid (the same number, as systemd does for dynamic users).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Who a slot's processes run as; decided once, when the slot starts.
#[derive(Debug, Clone)]
pub(crate) enum SlotUser {
    /// The zone's own user; the runtime dir is the one in the data dir.
    Zone,
    /// An unprivileged identity, with the runtime dir `runtime_dir` under the runtime root.
    /// The slot holds its pool's lease on the identity while it lives.
    Dropped {
        identity: Arc<Identity>,
        runtime_dir: PathBuf,
    },
}

impl SlotUser {
    /// The user of slot `slot` of `pool`, whose runtime dir in the data dir is
    /// `data_runtime_dir` (`<data dir>/apps/<pool id>/slot-<n>/run`): the pool's identity
    /// ([`pool_identity`]) when it has one, else the zone's user.
    pub fn for_slot(
        identity: Option<Arc<Identity>>,
        runtime_root: &Path,
        data_runtime_dir: &Path,
        pool: &PoolId,
        slot: u32,
    ) -> SlotUser {
        let pool_dir = data_runtime_dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(data_runtime_dir);
        let Some(identity) = identity else {
            return SlotUser::Zone;
        };
        SlotUser::Dropped {
            identity,
            runtime_dir: runtime_root
                .join(format!("{pool}-slot-{slot}-{:08x}", zone_tag(pool_dir))),
        }
    }
}

/// The identity the slots of the pool whose dir in the data dir is `pool_dir`
/// (`<data dir>/apps/<pool id>`) run as under `run_as`, leased while the returned value
/// lives; `None` when they run as the zone's user.
pub(crate) fn pool_identity(run_as: RunAs, pool_dir: &Path) -> Option<Arc<Identity>> {
    match run_as {
        RunAs::ZoneUser => None,
        RunAs::Auto if !rustix::process::geteuid().is_root() => None,
        RunAs::Auto => Some(lease_pool_identity(pool_dir)),
        RunAs::Uid { uid, gid } => Some(Arc::new(Identity { uid, gid })),
    }
}

/// The dir under `runtime_root` that holds the copies of the binaries the slots of `pool`
/// (whose dir in the data dir is `pool_dir`) run: `<runtime root>/bin/<pool>-<zone>`.
pub(crate) fn pool_bin_dir(runtime_root: &Path, pool: &PoolId, pool_dir: &Path) -> PathBuf {
    runtime_root
        .join("bin")
        .join(format!("{pool}-{:08x}", zone_tag(pool_dir)))
}

/// A zone's apps dir (the parent of `pool_dir`) hashed, so two zones of one host, whose pool
/// ids are the same counters, keep their dirs under the runtime root apart.
fn zone_tag(pool_dir: &Path) -> u32 {
    fnv1a(pool_dir.parent().unwrap_or(pool_dir)) as u32
}

/// Pools' identities held by live slots of this process, by pool dir.
static POOL_IDENTITIES: Mutex<BTreeMap<PathBuf, Weak<Identity>>> = Mutex::new(BTreeMap::new());

/// The identity of the pool whose dir is `pool_dir`: the one its live slots hold, else its
/// hashed uid or the next one no live pool holds. When all 4336 are held, pools share.
fn lease_pool_identity(pool_dir: &Path) -> Arc<Identity> {
    let mut held = POOL_IDENTITIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    held.retain(|_, identity| identity.strong_count() > 0);
    if let Some(identity) = held.get(pool_dir).and_then(Weak::upgrade) {
        return identity;
    }
    let taken: BTreeSet<u32> = held
        .values()
        .filter_map(Weak::upgrade)
        .map(|i| i.uid)
        .collect();
    let uid = free_uid(fnv1a(pool_dir), &taken);
    let identity = Arc::new(Identity { uid, gid: uid });
    held.insert(pool_dir.to_path_buf(), Arc::downgrade(&identity));
    identity
}

/// The uid `hash` falls on in [`DYNAMIC_IDS`], or the next one (wrapping) not in `taken`.
fn free_uid(hash: u64, taken: &BTreeSet<u32>) -> u32 {
    let first = *DYNAMIC_IDS.start();
    let count = DYNAMIC_IDS.end() - first + 1;
    let start = (hash % u64::from(count)) as u32;
    let nth = |i: u32| first + (start + i) % count;
    (0..count)
        .map(nth)
        .find(|uid| !taken.contains(uid))
        .unwrap_or(nth(0))
}

/// FNV-1a, 64 bits: stable across Rust releases and platforms, unlike `DefaultHasher`, so a
/// pool keeps its uid from one zone version to the next.
fn fnv1a(path: &Path) -> u64 {
    path.as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The outermost part of `binary`'s path that `identity` may not pass or run (a dir without
/// search permission, or the file without execute permission) by its mode bits; `None` when
/// it may run it. ACLs and security modules are not consulted: what they deny fails at spawn
/// with its own error. A path that cannot be inspected (a missing binary, a bare name looked
/// up in `PATH`) counts as reachable, so the spawn reports what is wrong.
pub(crate) fn unreachable_part(binary: &Path, identity: Identity) -> Option<PathBuf> {
    let path = std::fs::canonicalize(binary).ok()?;
    let mut parts: Vec<&Path> = path.ancestors().collect();
    parts.reverse();
    parts
        .into_iter()
        .find(|part| {
            std::fs::metadata(part)
                .is_ok_and(|meta| !may_execute(meta.mode(), meta.uid(), meta.gid(), identity))
        })
        .map(Path::to_path_buf)
}

/// Whether `who` (with no supplementary groups) has the execute (search) bit of a file of
/// `mode` owned by `owner`:`group`. As in the kernel, the owner's bits alone count for the
/// owner, the group's alone for the group.
fn may_execute(mode: u32, owner: u32, group: u32, who: Identity) -> bool {
    let bit = if owner == who.uid {
        0o100
    } else if group == who.gid {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

/// Creates the runtime root `root` (and its missing parents) mode 0711, and refuses one that
/// is not a directory of the zone's user: whoever owns it could swap slots' dirs.
pub(crate) fn prepare_root(root: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o711).create(root)?;
    let meta = std::fs::symlink_metadata(root)?;
    let zone_uid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != zone_uid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the runtime root must be a directory owned by uid {zone_uid} (it is owned by uid {})",
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHO: Identity = Identity {
        uid: 61200,
        gid: 61200,
    };

    #[test]
    fn execute_bits_of_owner_group_or_others_count() {
        assert!(may_execute(0o755, 0, 0, WHO));
        assert!(may_execute(0o711, 0, 0, WHO));
        assert!(!may_execute(0o750, 0, 0, WHO));
        assert!(!may_execute(0o700, 0, 0, WHO));
        assert!(may_execute(0o710, 0, WHO.gid, WHO));
        assert!(may_execute(0o700, WHO.uid, 0, WHO));
        // The owner's bits alone count for the owner, even when others may.
        assert!(!may_execute(0o071, WHO.uid, 0, WHO));
    }

    #[test]
    fn pool_uids_are_stable_in_the_range_and_move_on_collision() {
        let first = *DYNAMIC_IDS.start();
        let last = *DYNAMIC_IDS.end();
        let none = BTreeSet::new();
        let uid = free_uid(fnv1a(Path::new("/var/lib/orc/apps/pl-000000000001")), &none);
        assert!(DYNAMIC_IDS.contains(&uid));
        assert_eq!(
            uid,
            free_uid(fnv1a(Path::new("/var/lib/orc/apps/pl-000000000001")), &none)
        );
        let count = u64::from(last - first + 1);
        let at_last = count - 1;
        assert_eq!(free_uid(at_last, &none), last);
        assert_eq!(free_uid(at_last, &BTreeSet::from([last])), first);
        assert_eq!(free_uid(at_last, &BTreeSet::from([last, first])), first + 1);
        let all: BTreeSet<u32> = DYNAMIC_IDS.collect();
        assert_eq!(free_uid(at_last, &all), last, "all held: pools share");
    }

    #[test]
    fn live_pools_never_share_a_uid_and_keep_theirs() {
        let dir = Path::new("/nonexistent/lease-test/apps");
        // Enough pools that some hash onto the same uid (birthday bound: about 80).
        let leases: Vec<Arc<Identity>> = (0..400)
            .map(|i| lease_pool_identity(&dir.join(format!("pl-{i:012}"))))
            .collect();
        let uids: BTreeSet<u32> = leases.iter().map(|i| i.uid).collect();
        assert_eq!(uids.len(), leases.len());
        let again = lease_pool_identity(&dir.join("pl-000000000007"));
        assert!(Arc::ptr_eq(&again, &leases[7]), "a pool keeps its lease");
        assert!(leases.iter().all(|i| i.uid == i.gid));
    }
}
