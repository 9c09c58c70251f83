//! Building a view, on a dedicated short-lived thread that leaves the
//! server's namespace (`unshare(CLONE_FS | CLONE_NEWNS)`): a new root from
//! the [`Plan`] (an empty tmpfs holding the skeleton, the rule paths bound
//! into it from the host, the covers on top), entered with `pivot_root`,
//! the host's tree then detached. The thread keeps nothing but two
//! descriptors: the namespace and the workspace opened inside it.
//!
//! Nothing is created on the host: the skeleton exists only in the view.
//!
//! With the tools' user namespace (a root server's, `crate::identity::tools`)
//! the binds and holes marked `id_map` get its id maps on their detached
//! clones, before they are attached ([`id_map`]).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::plan::{Bind, Cover, Hole, Plan, Skel};
use super::sys;
use super::{IdMapped, ViewError};
use crate::identity::ToolNamespace;
use crate::workdir::WorkDir;

/// What the build thread hands back.
pub(crate) struct Built {
    /// `/proc/thread-self/ns/mnt` of the view.
    pub(crate) ns: OwnedFd,
    /// The workspace, opened inside the view.
    pub(crate) workspace: WorkDir,
    /// The binds and holes that wanted the id maps and did not get them whole.
    pub(crate) not_id_mapped: Vec<(PathBuf, IdMapped)>,
}

/// Builds the view of `plan` on a new thread and waits for it; `tools`:
/// the tools' user namespace, whose id maps the binds marked for them get.
pub(crate) fn build(plan: &Plan, tools: Option<Arc<ToolNamespace>>) -> Result<Built, ViewError> {
    let plan = plan.clone();
    std::thread::Builder::new()
        .name("toolsrv-view".into())
        .spawn(move || build_here(&plan, tools.as_deref()))
        .map_err(|e| ViewError::Step {
            step: "thread",
            path: PathBuf::new(),
            source: e,
        })?
        .join()
        .map_err(|_| ViewError::Step {
            step: "thread",
            path: PathBuf::new(),
            source: io::Error::other("the build thread panicked"),
        })?
}

fn step<'a>(step: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ViewError + 'a {
    move |source| ViewError::Step {
        step,
        path: path.to_path_buf(),
        source,
    }
}

/// Whether `e` says the path went away meanwhile (nothing left to protect;
/// the rescan notices).
fn gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOENT)
}

/// Whether `e` says that `p`, inside a writable bind, stopped being what the
/// plan saw (a tool removed it, or replaced it with a symbolic link, which a
/// mount cannot go over). Such a step is skipped: there is nothing at `p` to
/// pin or cover any more, and the next rescan plans the view again from what
/// is there (a link's target is protected where it lies).
fn changed_under_us(e: &io::Error, p: &Path) -> bool {
    gone(e)
        || (matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ENOTDIR | libc::ELOOP)
        ) && std::fs::symlink_metadata(p).map_or(true, |m| m.file_type().is_symlink()))
}

/// `p` as seen from the new root, which is the working directory while the
/// view is assembled: relative (`/usr` is `usr`, `/` is `.`).
fn rel(p: &Path) -> PathBuf {
    let r = p.strip_prefix("/").unwrap_or(p);
    if r.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        r.to_path_buf()
    }
}

/// The tools' id maps on the detached clone `fd`: on the whole tree, else
/// on its own mount only (a mount of another file system beneath it takes
/// none: that one stays plain), else none (a plain bind: the file system
/// takes no id maps, e.g. NFS, or the mount has id maps already).
pub(crate) fn id_map(fd: BorrowedFd<'_>, userns: BorrowedFd<'_>) -> IdMapped {
    match sys::set_id_map(fd, userns, true) {
        Ok(()) => IdMapped::Whole,
        Err(whole) => match sys::set_id_map(fd, userns, false) {
            Ok(()) => IdMapped::TopOnly(whole.to_string()),
            Err(e) => IdMapped::No(e.to_string()),
        },
    }
}

/// The build proper, on the thread that leaves the server's namespace.
pub(crate) fn build_here(plan: &Plan, tools: Option<&ToolNamespace>) -> Result<Built, ViewError> {
    let mut not_id_mapped = Vec::new();
    let mut map = |fd: BorrowedFd<'_>, wants: bool, path: &Path| {
        if let (true, Some(t)) = (wants, tools) {
            match id_map(fd, t.fd()) {
                IdMapped::Whole => {}
                other => not_id_mapped.push((path.to_path_buf(), other)),
            }
        }
    };
    let root = Path::new("/");
    sys::unshare_mounts().map_err(step("unshare", root))?;
    sys::make_slave().map_err(step("make / a slave mount", root))?;
    let ns = sys::own_mount_namespace().map_err(step("open the namespace", root))?;
    let old_root = sys::open_root().map_err(step("open the old root", root))?;
    // 1. Clones of every bind and hole, while the host's tree is here (a
    //    clone keeps each mount's flags: a host read-only mount stays so).
    let mut clones: Vec<(&Bind, OwnedFd)> = Vec::new();
    for b in &plan.binds {
        match sys::clone_tree(&b.path, true) {
            Ok(fd) => {
                map(fd.as_fd(), b.id_map, &b.path);
                clones.push((b, fd))
            }
            Err(e) if gone(&e) => {}
            Err(e) => return Err(step("clone a rule path", &b.path)(e)),
        }
    }
    let mut hole_clones: Vec<Vec<(Hole, OwnedFd)>> = Vec::new();
    for c in &plan.covers {
        let mut v = Vec::new();
        if let Cover::HideDir(_, holes) = c {
            for h in holes {
                match sys::clone_tree(&h.path, true) {
                    Ok(fd) => {
                        map(fd.as_fd(), h.id_map, &h.path);
                        v.push((h.clone(), fd))
                    }
                    Err(e) if gone(&e) => {}
                    Err(e) => return Err(step("clone a rule inside a hidden path", &h.path)(e)),
                }
            }
        }
        hole_clones.push(v);
    }
    // 2. The new root: a rule on `/` itself, else a tmpfs with the skeleton.
    let new_root = match clones.iter().position(|(b, _)| b.path == root) {
        Some(i) => {
            let (b, fd) = clones.remove(i);
            if !b.writable {
                sys::make_tree_read_only(fd.as_fd())
                    .map_err(step("make a rule read-only", root))?;
            }
            fd
        }
        None => {
            let fs = sys::detached_root().map_err(step("make the root tmpfs", root))?;
            for s in &plan.skeleton {
                place(fs.as_fd(), s).map_err(step("make the skeleton", s.path()))?;
            }
            sys::seal(fs.as_fd()).map_err(step("seal the root tmpfs", root))?;
            fs
        }
    };
    sys::attach(new_root.as_fd(), root).map_err(step("attach the new root", root))?;
    sys::fchdir(new_root.as_fd()).map_err(step("enter the new root", root))?;
    // 3. The rule paths, outermost first.
    for (b, fd) in &clones {
        let at = rel(&b.path);
        sys::attach(fd.as_fd(), &at).map_err(step("bind a rule path", &b.path))?;
        if !b.writable {
            sys::make_read_only(&at, true).map_err(step("make a rule read-only", &b.path))?;
        }
    }
    // 4. Pins (before the covers, which go on top).
    for d in &plan.pins {
        let at = rel(d);
        match sys::clone_tree(&at, true).and_then(|fd| sys::attach(fd.as_fd(), &at)) {
            Ok(()) => {}
            Err(e) if changed_under_us(&e, d) => {
                tracing::warn!(path = %d.display(), error = %e, "filesystem view: a directory to pin changed while the view was built; skipped")
            }
            Err(e) => return Err(step("pin a directory", d)(e)),
        }
    }
    // 5. Read-only binds and masks, outermost first.
    let empty = empty_file()?;
    for (c, holes) in plan.covers.iter().zip(hole_clones) {
        let at = rel(c.path());
        let r = match c {
            Cover::ReadOnly(_) => bind_read_only(&at),
            Cover::HideFile(_) => sys::clone_at(empty.as_fd(), Path::new("empty"))
                .and_then(|fd| sys::attach(fd.as_fd(), &at)),
            Cover::HideDir(p, _) => hide_dir(p, holes),
        };
        match r {
            Ok(()) => {}
            Err(e) if gone(&e) => {}
            Err(e) if changed_under_us(&e, c.path()) => {
                tracing::warn!(path = %c.path().display(), error = %e, "filesystem view: a protected path is (or became) a symbolic link, which a mount cannot cover; skipped")
            }
            Err(e) => return Err(step("protect", c.path())(e)),
        }
    }
    // 6. Into the new root; the host's tree goes.
    sys::pivot_to_cwd().map_err(step("pivot_root", root))?;
    sys::fchdir(old_root.as_fd()).map_err(step("enter the old root", root))?;
    sys::detach_cwd().map_err(step("detach the old root", root))?;
    drop(old_root);
    sys::chdir_root().map_err(step("enter the view's root", root))?;
    let workspace = WorkDir::open(&plan.workspace).map_err(|e| ViewError::Step {
        step: "open the workspace in the view",
        path: plan.workspace.clone(),
        source: io::Error::other(e.to_string()),
    })?;
    Ok(Built {
        ns,
        workspace,
        not_id_mapped,
    })
}

/// Makes one skeleton entry in the root tmpfs `root` (its parents exist).
fn place(root: std::os::fd::BorrowedFd<'_>, s: &Skel) -> io::Result<()> {
    let at = rel(s.path());
    match s {
        Skel::Dir { mode, uid, gid, .. } => {
            sys::mkdir_at(root, &at, 0o700)?;
            sys::set_mode_owner(root, &at, *mode, *uid, *gid);
            Ok(())
        }
        Skel::File(_) => sys::create_at(root, &at, 0o444),
        Skel::Link(l) => sys::symlink_at(&l.target, root, &at),
    }
}

/// `p` (relative to the new root) bound over itself, read-only (the mounts
/// beneath it keep theirs).
fn bind_read_only(p: &Path) -> io::Result<()> {
    let fd = sys::clone_tree(p, true)?;
    sys::attach(fd.as_fd(), p)?;
    sys::make_read_only(p, false)
}

/// An empty read-only tmpfs over the directory `p`, with `holes` (rules
/// inside it) attached through it.
fn hide_dir(p: &Path, holes: Vec<(Hole, OwnedFd)>) -> io::Result<()> {
    let fs = sys::detached_tmpfs()?;
    for (h, _) in &holes {
        let Ok(rel_hole) = h.path.strip_prefix(p) else {
            continue;
        };
        let mut made = PathBuf::new();
        let comps: Vec<_> = rel_hole.components().collect();
        for (i, c) in comps.iter().enumerate() {
            made.push(c);
            if i + 1 < comps.len() || h.dir {
                sys::mkdir_at(fs.as_fd(), &made, 0o555)?;
            } else {
                sys::create_at(fs.as_fd(), &made, 0o444)?;
            }
        }
    }
    sys::attach(fs.as_fd(), &rel(p))?;
    for (h, fd) in &holes {
        let at = rel(&h.path);
        sys::attach(fd.as_fd(), &at)?;
        if !h.writable {
            sys::make_read_only(&at, false)?;
        }
    }
    sys::seal(fs.as_fd())
}

/// A sealed detached tmpfs holding one empty file `empty` (mode 0444: it
/// reads as empty to every tool, one of a root server's tools in their own
/// user namespace included, which is not its owner).
fn empty_file() -> Result<OwnedFd, ViewError> {
    let root = Path::new("empty");
    let fs = sys::detached_tmpfs().map_err(step("make a tmpfs", root))?;
    sys::create_at(fs.as_fd(), root, 0o444).map_err(step("make the empty file", root))?;
    sys::seal(fs.as_fd()).map_err(step("seal the tmpfs", root))?;
    Ok(fs)
}
