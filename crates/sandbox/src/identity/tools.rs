//! The user namespace a root server's confined tools run in (issue 33 item
//! 5; docs/containment.md, "Identity"): tool ids `0..65535` mapped to a
//! host range no one uses, made once at startup by a helper child whose maps
//! the server writes, its `ns/user` kept open.
//!
//! A tool of a root server then holds no capability over host files (its
//! capabilities are those of its namespace, which no host file's owner is
//! mapped into) and is not uid 0 on the host: ordinary permission checks hide
//! what only root or another user may read. Its writable rules are bound
//! through id-mapped mounts of the same namespace (`view`), so the files it
//! makes there are root's on the host, as before, and it may write files of
//! any owner in `0..65535` there.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use super::sys;

/// How many ids are mapped (tool uids and gids `0..COUNT`).
pub(crate) const COUNT: u32 = 65_536;

/// The first host id tried for tool id 0: `0x78000000`. systemd's table of
/// uid ranges (systemd.io/UIDS-GIDS) leaves 1879048192–2147483647 unused:
/// above the container ranges systemd-nspawn and nsresourced allocate from
/// (524288–1879048191) and below the 32-bit sign boundary; newer systemd
/// puts its foreign range (mountfsd) at 2147352576. shadow's `useradd`
/// hands out subordinate ids from 100000 to 600100000 (`SUB_UID_MIN`,
/// `SUB_UID_MAX`), LXD and Incus from 1000000 to 1001000000. The middle of
/// the unused range keeps clear of both ends.
pub(crate) const FIRST_BASE: u32 = 0x7800_0000;
/// The last base tried: ranges stay below systemd's foreign range.
const LAST_BASE: u32 = 0x7FFD_0000;

/// The files whose ids a tool range must not overlap.
const ID_FILES: [(&str, IdFile); 4] = [
    ("/etc/subuid", IdFile::Subordinate),
    ("/etc/subgid", IdFile::Subordinate),
    ("/etc/passwd", IdFile::Database),
    ("/etc/group", IdFile::Database),
];

#[derive(Debug, Clone, Copy)]
enum IdFile {
    /// `name:first:count` lines.
    Subordinate,
    /// `name:x:id:...` lines.
    Database,
}

/// The id ranges `text` (a file of `kind`) allocates.
fn ranges(text: &str, kind: IdFile) -> Vec<(u64, u64)> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            match kind {
                IdFile::Subordinate => {
                    let first: u64 = f.get(1)?.trim().parse().ok()?;
                    let count: u64 = f.get(2)?.trim().parse().ok()?;
                    Some((first, first + count))
                }
                IdFile::Database => {
                    let id: u64 = f.get(2)?.trim().parse().ok()?;
                    Some((id, id + 1))
                }
            }
        })
        .collect()
}

/// The first base from [`FIRST_BASE`] on (in steps of [`COUNT`]) whose
/// range meets none of `taken`; `None` when every candidate does.
fn first_free(taken: &[(u64, u64)]) -> Option<u32> {
    let mut base = FIRST_BASE;
    while base <= LAST_BASE {
        let (lo, hi) = (u64::from(base), u64::from(base) + u64::from(COUNT));
        if !taken.iter().any(|&(a, b)| a < hi && lo < b) {
            return Some(base);
        }
        base += COUNT;
    }
    None
}

/// The host range for tool ids: the first free one from `FIRST_BASE`
/// given the subordinate ranges (`/etc/subuid`, `/etc/subgid`) and the ids
/// of the user and group databases (`/etc/passwd`, `/etc/group`; files
/// that do not exist allocate nothing). Deterministic, so every root server
/// of a host picks the same range. The same base serves uids and gids.
pub fn choose_base() -> Result<u32, String> {
    let mut taken = Vec::new();
    for (path, kind) in ID_FILES {
        match std::fs::read_to_string(path) {
            Ok(text) => taken.extend(ranges(&text, kind)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {path}: {e}")),
        }
    }
    first_free(&taken).ok_or_else(|| {
        format!(
            "no range of {COUNT} ids from {FIRST_BASE} to {} is free of /etc/subuid, /etc/subgid, /etc/passwd and /etc/group",
            LAST_BASE + (COUNT - 1)
        )
    })
}

/// The tools' user namespace: tool uid and gid `n` are host `base + n`.
#[derive(Debug)]
pub struct ToolNamespace {
    ns: OwnedFd,
    base: u32,
}

impl ToolNamespace {
    /// Makes the namespace, mapping `0..COUNT` to `base..base + COUNT` (uids
    /// and gids): a helper child enters a new user namespace, this process
    /// writes its maps (as a privileged writer it needs no `setgroups`
    /// `deny`: tools may drop their supplementary groups) and opens its
    /// `ns/user`; the helper then exits. Works in a multithreaded process
    /// (the helper is a fork that makes raw calls only).
    pub fn create(base: u32) -> std::io::Result<ToolNamespace> {
        let line = format!("0 {base} {COUNT}\n");
        let ns = sys::user_namespace_with_maps(line.as_bytes(), line.as_bytes())?;
        Ok(ToolNamespace { ns, base })
    }

    /// The namespace (`setns` in the child, `MOUNT_ATTR_IDMAP` of a bind).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.ns.as_fd()
    }

    /// The host uid (and gid) of tool id 0.
    pub(crate) fn base(&self) -> u32 {
        self.base
    }

    /// How many ids are mapped.
    pub(crate) fn count(&self) -> u32 {
        COUNT
    }
}

static IN_FORCE: OnceLock<Arc<ToolNamespace>> = OnceLock::new();

/// Puts `ns` in force for this process: the filesystem views built from now
/// on bind their writable rules through its id maps, and the confined runs
/// that enter such a view join it. Once per process; `false` when one is in
/// force already.
pub fn put_in_force(ns: Arc<ToolNamespace>) -> bool {
    IN_FORCE.set(ns).is_ok()
}

/// The tools' user namespace in force, if any (see [`put_in_force`]).
pub fn in_force() -> Option<&'static Arc<ToolNamespace>> {
    IN_FORCE.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_avoids_subordinate_ranges_and_database_ids() {
        assert_eq!(first_free(&[]), Some(FIRST_BASE));
        let sub = ranges(
            "# comment\nalice:100000:65536\nbob:2013265920:10\nbad line\n",
            IdFile::Subordinate,
        );
        assert_eq!(
            sub,
            vec![(100_000, 165_536), (2_013_265_920, 2_013_265_930)]
        );
        assert_eq!(first_free(&sub), Some(FIRST_BASE + COUNT));
        let db = ranges(
            "root:x:0:0::/root:/bin/sh\nodd:x:2013331456:1::/:/bin/sh\n",
            IdFile::Database,
        );
        let mut all = sub;
        all.extend(db);
        assert_eq!(first_free(&all), Some(FIRST_BASE + 2 * COUNT));
        assert_eq!(first_free(&[(0, u64::from(u32::MAX))]), None);
    }
}
