//! Changing a view that runs are using: the view is one mount namespace
//! shared by every run of its policy, so a protected path that appears or
//! is replaced on the host (a secret file, a new repository's hooks, a shell
//! start-up file an editor saved by rename, whose new dentry the old mount
//! does not cover), a socket bound under a read-only rule, or a rule path
//! created later is added to it in place, for the runs under way too.
//!
//! A short-lived thread clones what must come from the host (new binds and
//! holes) while it is still in the server's namespace, then enters the view
//! (`unshare(CLONE_FS)`, `setns`) and makes the mounts there with the same
//! steps as a build. The view's root tmpfs is made writable only while new
//! mount points are made in it (Landlock grants tools nothing there). What
//! was made is then checked against the view's mount table: a step that was
//! skipped (a path a tool swapped for a link meanwhile) is not recorded as
//! done, and the next refresh tries it again.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::build::{
    attach_bind, clone_holes, cover, cow_roots, empty_file, pin, place, source, step, Mapper,
};
use super::plan::{Bind, Cover, Hole, Skel};
use super::sys;
use super::ViewError;
use crate::identity::ToolNamespace;
use std::sync::Arc;

/// What to add to a view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    /// New skeleton entries (mount points of new binds, their parents).
    pub(crate) skeleton: Vec<Skel>,
    /// New binds, outermost first.
    pub(crate) binds: Vec<Bind>,
    /// New pins.
    pub(crate) pins: Vec<PathBuf>,
    /// New or renewed covers, outermost first.
    pub(crate) covers: Vec<Cover>,
}

impl Delta {
    /// Whether there is nothing to do.
    pub(crate) fn is_empty(&self) -> bool {
        self.skeleton.is_empty()
            && self.binds.is_empty()
            && self.pins.is_empty()
            && self.covers.is_empty()
    }

    /// Every path the delta mounts on (binds, pins, covers).
    fn targets(&self) -> impl Iterator<Item = &Path> {
        self.binds
            .iter()
            .map(|b| b.path.as_path())
            .chain(self.pins.iter().map(PathBuf::as_path))
            .chain(self.covers.iter().map(Cover::path))
    }
}

/// What [`apply`] made.
pub(crate) struct Applied {
    /// The mount targets the view's mount table does not show after it
    /// (skipped or failed steps), which the caller keeps pending.
    pub(crate) pending: Vec<PathBuf>,
    /// The roots of the new copy-on-write binds, opened in the view.
    pub(crate) roots: Vec<(PathBuf, OwnedFd)>,
}

/// Applies `delta` to the view whose namespace is `ns`, on a new thread;
/// `tools` as for a build (the id maps of the binds that want them).
pub(crate) fn apply(
    ns: BorrowedFd<'_>,
    delta: &Delta,
    tools: Option<Arc<ToolNamespace>>,
) -> Result<Applied, ViewError> {
    let ns = ns
        .try_clone_to_owned()
        .map_err(step("duplicate the view's namespace", Path::new("/")))?;
    let delta = delta.clone();
    std::thread::Builder::new()
        .name("toolsrv-view-live".into())
        .spawn(move || apply_here(ns.as_fd(), &delta, tools.as_deref()))
        .map_err(step("thread", Path::new("/")))?
        .join()
        .map_err(|_| ViewError::Step {
            step: "thread",
            path: PathBuf::new(),
            source: io::Error::other("the refresh thread panicked"),
        })?
}

fn apply_here(
    ns: BorrowedFd<'_>,
    delta: &Delta,
    tools: Option<&ToolNamespace>,
) -> Result<Applied, ViewError> {
    let root = Path::new("/");
    let mut mapper = Mapper::new(tools);
    // What comes from the host, while this thread is still in its namespace.
    let mut clones: Vec<(&Bind, OwnedFd)> = Vec::new();
    for b in &delta.binds {
        if let Some(fd) = source(b, &mut mapper)? {
            clones.push((b, fd));
        }
    }
    let holes: Vec<Vec<(Hole, OwnedFd)>> = delta
        .covers
        .iter()
        .map(|c| clone_holes(c, &mut mapper))
        .collect::<Result<_, _>>()?;
    sys::unshare_fs().map_err(step("unshare", root))?;
    sys::enter_mount_namespace(ns).map_err(step("enter the view", root))?;
    if !delta.skeleton.is_empty() {
        let top = sys::open_root().map_err(step("open the view's root", root))?;
        sys::make_writable(root).map_err(step("unseal the view's root", root))?;
        let made: Result<(), ViewError> =
            delta
                .skeleton
                .iter()
                .try_for_each(|s| match place(top.as_fd(), s) {
                    Ok(()) => Ok(()),
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
                    Err(e) => Err(step("make the skeleton", s.path())(e)),
                });
        let sealed = sys::make_read_only(root, false).map_err(step("seal the view's root", root));
        made?;
        sealed?;
    }
    for (b, fd) in &clones {
        attach_bind(b, fd.as_fd())?;
    }
    for d in &delta.pins {
        pin(d)?;
    }
    let empty = empty_file()?;
    for (c, h) in delta.covers.iter().zip(holes) {
        cover(c, h, empty.as_fd())?;
    }
    let roots = cow_roots(&delta.binds)?;
    let mounted = mount_points().map_err(step("read the view's mount table", root))?;
    let pending = delta
        .targets()
        .filter(|p| !mounted.contains(*p))
        .map(Path::to_path_buf)
        .collect();
    for (p, how) in &mapper.not_id_mapped {
        tracing::warn!(path = %p.display(), how = ?how, "filesystem view: a bind added in place without the tools' id maps");
    }
    Ok(Applied { pending, roots })
}

/// The mount points of this thread's mount namespace, as paths from its
/// root (`/proc/thread-self/mountinfo`, fifth field, octal escapes undone).
pub(crate) fn mount_points() -> io::Result<HashSet<PathBuf>> {
    let text = std::fs::read("/proc/thread-self/mountinfo")?;
    Ok(text
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(unescape)
        .collect())
}

/// A mountinfo path with its `\ooo` escapes (space, tab, newline,
/// backslash) decoded.
fn unescape(field: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\'
            && i + 3 < field.len()
            && field[i + 1..i + 4]
                .iter()
                .all(|d| (b'0'..=b'7').contains(d))
        {
            let v = field[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape(br"/a\040b\134c"), PathBuf::from(r"/a b\c"));
        assert_eq!(unescape(b"/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape(br"/end\04"), PathBuf::from(r"/end\04"));
    }
}
