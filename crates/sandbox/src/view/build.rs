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
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
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
    /// The roots of the copy-on-write caches, opened inside the view.
    pub(crate) roots: Vec<(PathBuf, OwnedFd)>,
    /// The binds and holes that wanted the id maps and did not get them whole.
    pub(crate) not_id_mapped: Vec<(PathBuf, IdMapped)>,
    /// The mount targets of the plan that are not mount points of the view
    /// (a step skipped because its path went away or was swapped for a
    /// link meanwhile): the view keeps them pending, and its refresh tries
    /// them again.
    pub(crate) pending: Vec<PathBuf>,
}

/// The tools' id maps for the detached clones a build or a refresh makes,
/// and what did not take them whole.
pub(crate) struct Mapper<'a> {
    tools: Option<&'a ToolNamespace>,
    pub(crate) not_id_mapped: Vec<(PathBuf, IdMapped)>,
}

impl<'a> Mapper<'a> {
    /// Maps with `tools` (none: nothing is mapped).
    pub(crate) fn new(tools: Option<&'a ToolNamespace>) -> Mapper<'a> {
        Mapper {
            tools,
            not_id_mapped: Vec::new(),
        }
    }

    /// The host id the tools' root is, when a bind that `wants` the id maps
    /// gets them.
    fn host_root(&self, wants: bool) -> Option<u32> {
        self.tools.filter(|_| wants).map(ToolNamespace::base)
    }

    /// The id maps on the clone `fd` of `path` when it `wants` them.
    fn map(&mut self, fd: BorrowedFd<'_>, wants: bool, path: &Path) {
        if let (true, Some(t)) = (wants, self.tools) {
            match id_map(fd, t.fd()) {
                IdMapped::Whole => {}
                other => self.not_id_mapped.push((path.to_path_buf(), other)),
            }
        }
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

pub(crate) fn step<'a>(
    step: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> ViewError + 'a {
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

/// The build proper, on the thread that leaves the server's namespace.
pub(crate) fn build_here(plan: &Plan, tools: Option<&ToolNamespace>) -> Result<Built, ViewError> {
    let mut mapper = Mapper::new(tools);
    let root = Path::new("/");
    sys::unshare_mounts().map_err(step("unshare", root))?;
    sys::make_slave().map_err(step("make / a slave mount", root))?;
    let ns = sys::own_mount_namespace().map_err(step("open the namespace", root))?;
    let old_root = sys::open_root().map_err(step("open the old root", root))?;
    // 1. Clones of every bind and hole, while the host's tree is here (a
    //    clone keeps each mount's flags: a host read-only mount stays so).
    let mut clones: Vec<(&Bind, OwnedFd)> = Vec::new();
    for b in &plan.binds {
        if let Some(fd) = source(b, &mut mapper)? {
            clones.push((b, fd));
        }
    }
    let hole_clones = plan
        .covers
        .iter()
        .map(|c| clone_holes(c, &mut mapper))
        .collect::<Result<Vec<_>, _>>()?;
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
    // 3. The rule paths, outermost first; 4. pins (before the covers, which
    //    go on top); 5. read-only binds and masks, outermost first.
    for (b, fd) in &clones {
        attach_bind(b, fd.as_fd())?;
    }
    for d in &plan.pins {
        pin(d)?;
    }
    let empty = empty_file()?;
    for (c, holes) in plan.covers.iter().zip(hole_clones) {
        cover(c, holes, empty.as_fd())?;
    }
    let roots = cow_roots(&plan.binds)?;
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
    let pending = unmounted(plan)?;
    Ok(Built {
        ns,
        workspace,
        roots,
        not_id_mapped: mapper.not_id_mapped,
        pending,
    })
}

/// The binds, pins and covers of `plan` that are not mount points of this
/// thread's namespace (the view, once built): verified, not assumed.
fn unmounted(plan: &Plan) -> Result<Vec<PathBuf>, ViewError> {
    let root = Path::new("/");
    let targets: Vec<&Path> = plan
        .binds
        .iter()
        .map(|b| b.path.as_path())
        .filter(|p| *p != root)
        .chain(plan.pins.iter().map(PathBuf::as_path))
        .chain(plan.covers.iter().map(Cover::path))
        .collect();
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let mounted = super::live::mount_points().map_err(step("read the view's mount table", root))?;
    Ok(targets
        .into_iter()
        .filter(|p| !mounted.contains(*p))
        .map(Path::to_path_buf)
        .collect())
}

/// The roots of the copy-on-write binds among `binds`, opened where this
/// thread is (in the view): their Landlock rules are made from these, since
/// an overlay's files are not the host's.
pub(crate) fn cow_roots(binds: &[Bind]) -> Result<Vec<(PathBuf, OwnedFd)>, ViewError> {
    binds
        .iter()
        .filter(|b| b.layer.is_some())
        .map(|b| {
            sys::open_path(&rel(&b.path))
                .map(|fd| (b.path.clone(), fd))
                .map_err(step("open a cache in the view", &b.path))
        })
        .collect()
}

/// What the bind `b` attaches, made while the host's tree is reachable: a
/// clone of its path, or for a copy-on-write cache an overlay over it (its
/// layer's `upper` and `work` made first, owner-only). `None` when the path
/// went away meanwhile.
pub(crate) fn source(b: &Bind, mapper: &mut Mapper<'_>) -> Result<Option<OwnedFd>, ViewError> {
    let Some(layer) = &b.layer else {
        return match sys::clone_tree(&b.path, true) {
            Ok(fd) => {
                mapper.map(fd.as_fd(), b.id_map, &b.path);
                Ok(Some(fd))
            }
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(step("clone a rule path", &b.path)(e)),
        };
    };
    let lower = match sys::clone_tree(&b.path, false) {
        Ok(fd) => fd,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(step("clone a cache", &b.path)(e)),
    };
    let meta = std::fs::metadata(&b.path).map_err(step("look at a cache", &b.path))?;
    for d in ["upper", "work"] {
        let at = layer.join(d);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&at)
            .map_err(step("make a cache layer", &at))?;
    }
    // The overlay's root shows the upper layer's mode and owner: the
    // cache's mode, and its owner as the tools see it (where a root
    // server's tools run in their own user namespace, the host id their
    // root is, which is what the id-mapped lower layer shows too).
    let upper = layer.join("upper");
    let (uid, gid) = match mapper.host_root(b.id_map) {
        Some(id) => (id, id),
        None => (meta.uid(), meta.gid()),
    };
    std::fs::set_permissions(
        &upper,
        std::fs::Permissions::from_mode(meta.mode() & 0o7777),
    )
    .and_then(|()| std::os::unix::fs::chown(&upper, Some(uid), Some(gid)))
    .map_err(step("make a cache layer", &upper))?;
    let layers = sys::clone_tree(layer, false).map_err(step("clone a cache layer", layer))?;
    // Overlayfs takes id-mapped layers, not id maps of its own; its upper
    // layer and work directory are written with the server's credentials,
    // so only the lower layer is mapped.
    mapper.map(lower.as_fd(), b.id_map, &b.path);
    let open = |name: &str| {
        sys::open_dir_at(layers.as_fd(), Path::new(name)).map_err(step("open a cache layer", layer))
    };
    let (up, work) = (open("upper")?, open("work")?);
    let userxattr = toolsrv_base::effective_uid() != 0;
    sys::detached_overlay(lower.as_fd(), up.as_fd(), work.as_fd(), userxattr)
        .map(Some)
        .map_err(step("mount a cache copy-on-write", &b.path))
}

/// Attaches the clone `fd` of the bind `b` at its path (relative to the
/// working directory, the view's root), read-only unless it is writable.
pub(crate) fn attach_bind(b: &Bind, fd: std::os::fd::BorrowedFd<'_>) -> Result<(), ViewError> {
    let at = rel(&b.path);
    sys::attach(fd, &at).map_err(step("bind a rule path", &b.path))?;
    if !b.writable {
        sys::make_read_only(&at, true).map_err(step("make a rule read-only", &b.path))?;
    }
    Ok(())
}

/// Pins the directory `d` (binds it onto itself): skipped when it changed
/// under us (logged).
pub(crate) fn pin(d: &Path) -> Result<(), ViewError> {
    let at = rel(d);
    match sys::clone_tree(&at, true).and_then(|fd| sys::attach(fd.as_fd(), &at)) {
        Ok(()) => Ok(()),
        Err(e) if changed_under_us(&e, d) => {
            tracing::warn!(path = %d.display(), error = %e, "filesystem view: a directory to pin changed while the view was built; skipped");
            Ok(())
        }
        Err(e) => Err(step("pin a directory", d)(e)),
    }
}

/// Makes the cover `c` (with the clones of its holes), the empty file of
/// file masks being `empty`: skipped when its path went away or became a
/// symbolic link (logged; the mounts are verified afterwards).
pub(crate) fn cover(
    c: &Cover,
    holes: Vec<(Hole, OwnedFd)>,
    empty: std::os::fd::BorrowedFd<'_>,
) -> Result<(), ViewError> {
    let at = rel(c.path());
    let r = match c {
        Cover::ReadOnly(_) => bind_read_only(&at),
        Cover::HideFile(_) => {
            sys::clone_at(empty, Path::new("empty")).and_then(|fd| sys::attach(fd.as_fd(), &at))
        }
        Cover::HideDir(p, _) => hide_dir(p, holes),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e) if gone(&e) => Ok(()),
        Err(e) if changed_under_us(&e, c.path()) => {
            tracing::warn!(path = %c.path().display(), error = %e, "filesystem view: a protected path is (or became) a symbolic link, which a mount cannot cover; skipped");
            Ok(())
        }
        Err(e) => Err(step("protect", c.path())(e)),
    }
}

/// The clones of `c`'s holes (rule paths inside a hidden directory), made
/// while the host's tree is reachable.
pub(crate) fn clone_holes(
    c: &Cover,
    mapper: &mut Mapper<'_>,
) -> Result<Vec<(Hole, OwnedFd)>, ViewError> {
    let mut v = Vec::new();
    if let Cover::HideDir(_, holes) = c {
        for h in holes {
            match sys::clone_tree(&h.path, true) {
                Ok(fd) => {
                    mapper.map(fd.as_fd(), h.id_map, &h.path);
                    v.push((h.clone(), fd))
                }
                Err(e) if gone(&e) => {}
                Err(e) => return Err(step("clone a rule inside a hidden path", &h.path)(e)),
            }
        }
    }
    Ok(v)
}

/// Makes one skeleton entry in the root tmpfs `root` (its parents exist).
pub(crate) fn place(root: std::os::fd::BorrowedFd<'_>, s: &Skel) -> io::Result<()> {
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
pub(crate) fn empty_file() -> Result<OwnedFd, ViewError> {
    let root = Path::new("empty");
    let fs = sys::detached_tmpfs().map_err(step("make a tmpfs", root))?;
    sys::create_at(fs.as_fd(), root, 0o444).map_err(step("make the empty file", root))?;
    sys::seal(fs.as_fd()).map_err(step("seal the tmpfs", root))?;
    Ok(fs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open::FileId;
    use crate::view::protected::{Entry, Kind, ProtectedSet, Shape};

    /// Issue 34, item 2: a cover the build had to skip (its path became a
    /// symbolic link between the plan and the mounts, as a tool can make
    /// it) is reported pending, not taken for done; the rest of the view
    /// is built. Here the plan is made while the path is a file, then the
    /// file is swapped for a link to a host file before the build. Before
    /// the fix, the build cloned the path following the link, resolved
    /// against the host's root: the host file was bound into the view.
    #[test]
    fn a_cover_the_build_could_not_make_is_pending_not_done() {
        let t = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(t.path()).unwrap();
        std::fs::write(d.join("secret"), "x").unwrap();
        std::fs::write(d.join("other"), "y").unwrap();
        let set = ProtectedSet {
            entries: ["other", "secret"]
                .iter()
                .map(|n| Entry {
                    path: d.join(n),
                    kind: Kind::ReadOnly,
                    shape: Shape::File,
                    id: Some(FileId { dev: 1, ino: 1 }),
                })
                .collect(),
            ..ProtectedSet::default()
        };
        let rules = crate::view::RulePaths {
            writable: vec![d.clone()],
            readable: vec![PathBuf::from("/proc")],
            ..Default::default()
        };
        let plan = Plan::new(&set, &rules, &[], None, &d);
        assert!(plan.covers.iter().any(|c| c.path() == d.join("secret")));
        std::fs::remove_file(d.join("secret")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.join("secret")).unwrap();
        let built = build(&plan, None).expect("the build");
        // In the view, `secret` is the link (dangling there), never the
        // host file it names, bound through it.
        let ns = built.ns.try_clone().unwrap();
        let link = d.join("secret");
        let shown = std::thread::spawn(move || {
            sys::unshare_fs().unwrap();
            sys::enter_mount_namespace(ns.as_fd()).unwrap();
            std::fs::read_to_string(&link).ok()
        })
        .join()
        .unwrap();
        let host = std::fs::read_to_string("/etc/hostname").ok();
        assert!(
            shown.is_none() || shown != host,
            "the host's /etc/hostname was bound into the view through the link"
        );
        assert_eq!(built.pending, vec![d.join("secret")]);
    }

    /// The CI failure of stop 42: `empty_file` failed "seal the tmpfs" with
    /// `EBUSY` while other tests forked. The file was made by an open for
    /// writing; a child forked in that moment held the descriptor until it
    /// exec'd, so the mount had a writer when it was sealed. Here a thread
    /// forks children that hold what they inherit for a millisecond, while
    /// the empty file is made and sealed again and again.
    #[test]
    fn the_empty_file_seals_while_another_thread_forks() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let forking = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut forks = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // Safety: the child calls only async-signal-safe
                    // functions (nanosleep, _exit).
                    let pid = unsafe { libc::fork() };
                    if pid == 0 {
                        let t = libc::timespec {
                            tv_sec: 0,
                            tv_nsec: 1_000_000,
                        };
                        // Safety: `t` is a valid timespec.
                        unsafe {
                            libc::nanosleep(&t, std::ptr::null_mut());
                            libc::_exit(0);
                        }
                    }
                    assert!(pid > 0, "fork: {}", io::Error::last_os_error());
                    // Safety: `pid` is our child.
                    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                    forks += 1;
                }
                forks
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let mut made = 0;
        let result = loop {
            if made == 2000 || std::time::Instant::now() > deadline {
                break Ok(());
            }
            if let Err(e) = empty_file() {
                break Err(e);
            }
            made += 1;
        };
        stop.store(true, Ordering::Relaxed);
        let forks = forking.join().unwrap();
        assert!(forks > 0, "the other thread never forked");
        result.unwrap_or_else(|e| panic!("after {made} seals and {forks} forks: {e}"));
    }
}
