//! Building a view: the placeholders on the host, then, on a dedicated
//! short-lived thread that leaves the server's namespace
//! (`unshare(CLONE_FS | CLONE_NEWNS)`), the mounts of the [`Plan`]; the
//! thread keeps nothing but two descriptors: the namespace and the
//! workspace opened inside it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::plan::{Cover, Hole, Placeholder, Plan};
use super::sys;
use super::ViewError;
use crate::workdir::WorkDir;

/// What the build thread hands back.
pub(crate) struct Built {
    /// `/proc/thread-self/ns/mnt` of the view.
    pub(crate) ns: OwnedFd,
    /// The workspace, opened inside the view.
    pub(crate) workspace: WorkDir,
}

/// Creates the plan's placeholders (owner-only); returns those created.
/// Each is made beneath its nearest existing ancestor, opened without
/// following a symbolic link, one component at a time (`mkdirat`,
/// `O_NOFOLLOW`): a link a tool swapped in meanwhile makes it fail rather
/// than create anything elsewhere.
pub(crate) fn place(plan: &Plan) -> Vec<PathBuf> {
    let mut made = Vec::new();
    for p in &plan.placeholders {
        let (path, file) = match p {
            Placeholder::Dir(path) => (path, false),
            Placeholder::File(path) => (path, true),
        };
        match place_one(path, file) {
            Ok(true) => made.push(path.clone()),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot create the placeholder of a protected path")
            }
        }
    }
    made
}

/// Creates `path` (an empty directory 0700, or with `file` an empty file
/// 0600, its missing parents 0700); `false` when it existed already.
fn place_one(path: &Path, file: bool) -> io::Result<bool> {
    let existing = path
        .ancestors()
        .skip(1)
        .find(|a| a.exists())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    let rest = path
        .strip_prefix(existing)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut dir = crate::open::open_no_symlinks(existing)?;
    let names: Vec<_> = rest.components().collect();
    for (i, c) in names.iter().enumerate() {
        let name = Path::new(c.as_os_str());
        let last = i + 1 == names.len();
        if last && file {
            return match sys::create_new_at(dir.as_fd(), name, 0o600) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            };
        }
        let created = sys::mkdir_at(dir.as_fd(), name, 0o700)?;
        dir = sys::open_dir_at(dir.as_fd(), name)?;
        if last {
            return Ok(created);
        }
    }
    Ok(false)
}

/// Builds the view of `plan` on a new thread and waits for it.
pub(crate) fn build(plan: &Plan) -> Result<Built, ViewError> {
    let plan = plan.clone();
    std::thread::Builder::new()
        .name("toolsrv-view".into())
        .spawn(move || build_here(&plan))
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

/// Whether `e` says that `p`, inside a writable rule, stopped being what the
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

/// The build proper, on the thread that leaves the server's namespace.
fn build_here(plan: &Plan) -> Result<Built, ViewError> {
    let root = Path::new("/");
    sys::unshare_mounts().map_err(step("unshare", root))?;
    sys::make_slave().map_err(step("make / a slave mount", root))?;
    // 1. Clones of what stays writable, before anything is read-only (a
    //    clone keeps each mount's flags: a host read-only mount stays so).
    let mut clones = Vec::new();
    for w in &plan.writable {
        match sys::clone_tree(w, true) {
            Ok(fd) => clones.push((w, fd)),
            Err(e) if gone(&e) => {}
            Err(e) => return Err(step("clone a writable rule", w)(e)),
        }
    }
    let mut hole_clones: Vec<Vec<(Hole, OwnedFd)>> = Vec::new();
    for c in &plan.covers {
        let mut v = Vec::new();
        if let Cover::HideDir(_, holes) = c {
            for h in holes {
                match sys::clone_tree(&h.path, true) {
                    Ok(fd) => v.push((h.clone(), fd)),
                    Err(e) if gone(&e) => {}
                    Err(e) => return Err(step("clone a rule inside a hidden path", &h.path)(e)),
                }
            }
        }
        hole_clones.push(v);
    }
    // 2. Everything read-only.
    sys::make_read_only(root, true).map_err(step("make every mount read-only", root))?;
    // 3. The writable rules again, outermost first.
    for (w, fd) in &clones {
        sys::attach(fd.as_fd(), w).map_err(step("attach a writable rule", w))?;
    }
    // 6. (before the covers, which go on top) Pins.
    for d in &plan.pins {
        match sys::clone_tree(d, true).and_then(|fd| sys::attach(fd.as_fd(), d)) {
            Ok(()) => {}
            Err(e) if changed_under_us(&e, d) => {
                tracing::warn!(path = %d.display(), error = %e, "filesystem view: a directory to pin changed while the view was built; skipped")
            }
            Err(e) => return Err(step("pin a directory", d)(e)),
        }
    }
    // 4, 5. Read-only binds and masks, outermost first.
    let empty = empty_file()?;
    for (c, holes) in plan.covers.iter().zip(hole_clones) {
        let r = match c {
            Cover::ReadOnly(p) => bind_read_only(p),
            Cover::HideFile(p) => sys::clone_at(empty.as_fd(), Path::new("empty"))
                .and_then(|fd| sys::attach(fd.as_fd(), p)),
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
    let ns = sys::own_mount_namespace().map_err(step("open the namespace", root))?;
    let workspace = WorkDir::open(&plan.workspace).map_err(|e| ViewError::Step {
        step: "open the workspace in the view",
        path: plan.workspace.clone(),
        source: io::Error::other(e.to_string()),
    })?;
    Ok(Built { ns, workspace })
}

/// `p` bound over itself, read-only (the mounts beneath it keep theirs).
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
        let Ok(rel) = h.path.strip_prefix(p) else {
            continue;
        };
        let mut made = PathBuf::new();
        let comps: Vec<_> = rel.components().collect();
        for (i, c) in comps.iter().enumerate() {
            made.push(c);
            if i + 1 < comps.len() || h.dir {
                sys::mkdir_at(fs.as_fd(), &made, 0o555)?;
            } else {
                sys::create_at(fs.as_fd(), &made, 0o444)?;
            }
        }
    }
    sys::attach(fs.as_fd(), p)?;
    for (h, fd) in &holes {
        sys::attach(fd.as_fd(), &h.path)?;
        if !h.writable {
            sys::make_read_only(&h.path, false)?;
        }
    }
    sys::seal(fs.as_fd())
}

/// A sealed detached tmpfs holding one empty file `empty` (mode 0400).
fn empty_file() -> Result<OwnedFd, ViewError> {
    let root = Path::new("empty");
    let fs = sys::detached_tmpfs().map_err(step("make a tmpfs", root))?;
    sys::create_at(fs.as_fd(), root, 0o400).map_err(step("make the empty file", root))?;
    sys::seal(fs.as_fd()).map_err(step("seal the tmpfs", root))?;
    Ok(fs)
}
