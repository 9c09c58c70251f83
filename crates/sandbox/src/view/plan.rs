//! The mount plan of a view: from the policy's rule paths and the protected
//! set to the list of mounts to make, in order (docs/sandbox-policy.md, "The
//! filesystem view").
//!
//! A view starts from an empty root: a small tmpfs holding only the
//! directories, mount points and symbolic links that lead to the rule paths
//! (the *skeleton*). Each rule path is bound into it from the host,
//! read-only or writable as its rule says ([`Bind`]); what no rule names does
//! not exist for a tool. Protected paths inside the binds are then masked or
//! bound read-only ([`Cover`]), as are the Unix sockets found under read-only
//! binds.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::protected::{Entry, Kind, ProtectedSet};
use crate::policy::{PathContext, Policy};

/// A symbolic link on the way to a rule path (`/lib64 -> usr/lib64` on a
/// merged-`/usr` system): recreated in the skeleton so that the names
/// programs use (`/lib64/ld-linux-x86-64.so.2`, `/bin/sh`) resolve.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link {
    /// Where the link is (its parent canonical, its own name kept).
    pub(crate) path: PathBuf,
    /// What it says, as written.
    pub(crate) target: PathBuf,
}

/// The rule paths of a policy, resolved with `{CWD}` as the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulePaths {
    /// `rw` and `rwx` paths (canonical, existing).
    pub writable: Vec<PathBuf>,
    /// `ro` and `rox` paths.
    pub readable: Vec<PathBuf>,
    /// The symbolic links met on the way to them, as the policy names them.
    pub links: Vec<Link>,
    /// The writable paths that are package caches (`caches::CACHES`): bound
    /// copy-on-write where the server has a layer directory.
    pub cow: Vec<PathBuf>,
}

impl RulePaths {
    fn names(&self, p: &Path) -> bool {
        self.writable.iter().chain(&self.readable).any(|r| r == p)
    }
}

/// A rule path bound into the view from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The path (the same inside the view as on the host).
    pub path: PathBuf,
    /// Writable (`rw`, `rwx`), else read-only.
    pub writable: bool,
    /// A directory (else a file: its mount point is an empty file).
    pub dir: bool,
    /// What it is on the host (device, inode): a rule path removed and made
    /// again is a new bind.
    pub(crate) id: (u64, u64),
    /// Copy-on-write: an overlay whose lower layer is the host's directory
    /// and whose upper layer (and work directory) are made under this
    /// directory of the server's own state.
    pub layer: Option<PathBuf>,
    /// Bound through the tools' id maps where a root server's tools run in
    /// a user namespace of their own: a writable rule (but a device node
    /// anyone may read and write), a tools directory, or a read-only rule
    /// naming a path others may not read.
    pub(crate) id_map: bool,
}

/// Whether a read-only rule path with metadata `m` needs the tools' id maps
/// to be read by a tool that is neither its owner nor in its group (a root
/// server's tool in its own user namespace): a file others may not read (or,
/// being a program, not run), a directory they may not list or enter.
pub(crate) fn needs_id_map(m: &std::fs::Metadata) -> bool {
    let mode = m.mode();
    if m.is_dir() {
        mode & 0o005 != 0o005
    } else {
        mode & 0o004 == 0 || (mode & 0o111 != 0 && mode & 0o001 == 0)
    }
}

/// Whether a writable rule path with metadata `m` needs the tools' id maps:
/// always (the files a tool makes in it are root's on the host, and it may
/// write what any owner in the mapped range owns), but for a device node
/// that others may read and write (`/dev/null`): a device makes nothing,
/// its mode alone decides who opens it, and `devtmpfs` takes no id maps.
pub(crate) fn writable_needs_id_map(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let device = m.file_type().is_char_device() || m.file_type().is_block_device();
    !device || m.mode() & 0o006 != 0o006
}

/// One entry of the skeleton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Skel {
    /// A directory, with the mode, owner and group of the host's.
    Dir {
        /// Its path.
        path: PathBuf,
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
    },
    /// An empty file: the mount point of a file bind.
    File(PathBuf),
    /// A symbolic link.
    Link(Link),
}

impl Skel {
    /// The path it makes.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Skel::Dir { path, .. } | Skel::File(path) => path,
            Skel::Link(l) => &l.path,
        }
    }
}

/// A rule path inside a hidden directory, shown through the mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hole {
    /// Its path.
    pub(crate) path: PathBuf,
    /// Whether it is a directory.
    pub(crate) dir: bool,
    /// Whether its rule is writable (else it is bound read-only).
    pub(crate) writable: bool,
    /// As [`Bind::id_map`].
    pub(crate) id_map: bool,
}

/// One mount over a protected path inside a bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cover {
    /// An empty read-only tmpfs over a directory, with holes for rules
    /// that name something inside it.
    HideDir(PathBuf, Vec<Hole>),
    /// An empty read-only file over a file or socket.
    HideFile(PathBuf),
    /// The path bound read-only over itself.
    ReadOnly(PathBuf),
}

impl Cover {
    /// The path covered.
    pub fn path(&self) -> &Path {
        match self {
            Cover::HideDir(p, _) | Cover::HideFile(p) | Cover::ReadOnly(p) => p,
        }
    }
}

/// Everything a view build does, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The workspace (`--cwd`): opened inside the view.
    pub(crate) workspace: PathBuf,
    /// What the root tmpfs holds, parents first.
    pub(crate) skeleton: Vec<Skel>,
    /// The rule paths bound from the host, outermost first. A rule path
    /// inside a bind that already gives it as much is not bound again.
    pub binds: Vec<Bind>,
    /// Directories between a writable bind and a protected path, bound onto
    /// themselves (outermost first), so that renaming one fails (`EBUSY`)
    /// and no protected path can be moved away.
    pub pins: Vec<PathBuf>,
    /// The protections, outermost first.
    pub covers: Vec<Cover>,
    /// Protected paths a writable rule names inside a writable bind: granted
    /// writable, and pinned so that they stay where they are.
    pub(crate) stay: Vec<PathBuf>,
    /// Missing protected paths a tool could create (their nearest existing
    /// ancestor lies in a writable bind): nothing exists in the view to
    /// stop it, so the server watches for them.
    pub creatable: Vec<PathBuf>,
}

/// The least mode of a skeleton directory.
const SKELETON_MODE: u32 = 0o755;

/// The `/proc` every view shows (read-only; Landlock still decides what a
/// tool may read there): programs find themselves through `/proc/self/exe`,
/// which no Landlock right governs.
pub(crate) const PROC: &str = "/proc";

impl Plan {
    /// The plan for `set` under `rules`, with the view's working directory
    /// `workspace`; `shown` (the tools directories) are bound read-only
    /// where no rule binds them, without counting as rules.
    /// `layers` is the server's layer directory for the copy-on-write caches
    /// (`None`: they are bound like any writable rule).
    pub(crate) fn new(
        set: &ProtectedSet,
        rules: &RulePaths,
        shown: &[PathBuf],
        layers: Option<&Path>,
        workspace: &Path,
    ) -> Plan {
        let mut plan = Plan {
            workspace: workspace.to_path_buf(),
            binds: binds(rules, shown, layers),
            ..Plan::default()
        };
        plan.skeleton = skeleton(&plan.binds, &rules.links);
        for e in &set.entries {
            plan.add(e, rules);
        }
        plan.covers.sort_by_key(|c| c.path().components().count());
        // A cover inside a hidden directory is hidden with it.
        // (A set of the hidden directories, looked up by each cover's
        // ancestors: a root server's view covers thousands of root-only
        // files, and comparing every cover with every hidden directory took
        // a fifth of a second.)
        let hidden: HashSet<PathBuf> = plan
            .covers
            .iter()
            .filter_map(|c| match c {
                Cover::HideDir(p, _) => Some(p.clone()),
                _ => None,
            })
            .collect();
        plan.covers
            .retain(|c| !c.path().ancestors().skip(1).any(|a| hidden.contains(a)));
        // A writable rule inside a read-only cover keeps its rights: it gets
        // a bind of its own, made before the cover (whose recursive clone
        // then carries it, writable).
        let mut holes: Vec<Bind> = rules
            .writable
            .iter()
            .filter(|w| {
                plan.covers
                    .iter()
                    .any(|c| matches!(c, Cover::ReadOnly(r) if w.starts_with(r) && *w != r))
                    && !plan.binds.iter().any(|b| b.path == **w)
            })
            .filter_map(|w| {
                let m = std::fs::metadata(w).ok()?;
                Some(Bind {
                    path: w.clone(),
                    writable: true,
                    dir: m.is_dir(),
                    id: (m.dev(), m.ino()),
                    layer: None,
                    id_map: writable_needs_id_map(&m),
                })
            })
            .collect();
        holes.sort_by_key(|b| b.path.components().count());
        plan.binds.extend(holes);
        let mut pins = plan.stay.clone();
        let pinned: Vec<PathBuf> = plan
            .covers
            .iter()
            .map(|c| c.path().to_path_buf())
            .chain(plan.stay.iter().cloned())
            .collect();
        for p in &pinned {
            let Some(root) = plan.bind_of(p).filter(|b| b.writable && b.path != *p) else {
                continue;
            };
            let root = root.clone();
            let mut d = p.parent();
            while let Some(dir) = d {
                if dir == root.path || !dir.starts_with(&root.path) {
                    break;
                }
                pins.push(dir.to_path_buf());
                d = dir.parent();
            }
        }
        pins.sort_by_key(|p| (p.components().count(), p.clone()));
        pins.dedup();
        plan.pins = pins;
        plan
    }

    /// The innermost bind `p` lies in (or is).
    pub fn bind_of(&self, p: &Path) -> Option<&Bind> {
        self.binds
            .iter()
            .filter(|b| p.starts_with(&b.path))
            .max_by_key(|b| b.path.components().count())
    }

    /// Whether `p` exists in the view (it lies in a bind).
    pub(crate) fn shows(&self, p: &Path) -> bool {
        self.bind_of(p).is_some()
    }

    fn add(&mut self, e: &Entry, rules: &RulePaths) {
        let p = &e.path;
        if rules.names(p) {
            // Named by a rule: granted as written, and it stays where it is
            // (the tools directory, the policy): inside a writable bind a
            // read-only rule's path is bound read-only, a writable rule's
            // path is pinned.
            let inside_writable = self.bind_of(p).is_some_and(|b| b.writable && b.path != *p);
            if e.id.is_some() && inside_writable {
                if rules.writable.contains(p) {
                    self.stay.push(p.clone());
                } else {
                    self.covers.push(Cover::ReadOnly(p.clone()));
                }
            }
            return;
        }
        let Some(bind) = self.bind_of(p).cloned() else {
            // Not in the view at all: nothing to protect.
            return;
        };
        if e.id.is_none() {
            if bind.writable {
                self.creatable.push(p.clone());
            }
            return;
        }
        match (e.kind, e.shape) {
            (Kind::Hidden, super::protected::Shape::Dir) => {
                let holes = rules
                    .writable
                    .iter()
                    .map(|r| (r, true))
                    .chain(rules.readable.iter().map(|r| (r, false)))
                    .filter(|(r, _)| r.starts_with(p) && *r != p)
                    .filter_map(|(r, writable)| {
                        let m = std::fs::metadata(r).ok()?;
                        Some(Hole {
                            path: r.clone(),
                            dir: m.is_dir(),
                            writable,
                            id_map: if writable {
                                writable_needs_id_map(&m)
                            } else {
                                needs_id_map(&m)
                            },
                        })
                    })
                    .collect();
                self.covers.push(Cover::HideDir(p.clone(), holes));
            }
            (Kind::Hidden, _) => self.covers.push(Cover::HideFile(p.clone())),
            (Kind::ReadOnly, _) => {
                // In a read-only bind it is read-only already.
                if bind.writable {
                    self.covers.push(Cover::ReadOnly(p.clone()));
                }
            }
        }
    }
}

/// The binds of `rules`, outermost first: every rule path, except one that
/// lies in a bind giving it as much already (a read-only rule inside any
/// bind, a writable one inside a writable bind; and, for a path that needs
/// the tools' id maps, a bind that has them). A path named both ways is
/// writable. `/proc` and `shown` are bound read-only unless a rule binds
/// them; `shown` (the tools directories) always with the id maps, so that a
/// tool file only its owner may run still runs. A copy-on-write cache is
/// always bound, as an overlay with its layer under `layers`.
fn binds(rules: &RulePaths, shown: &[PathBuf], layers: Option<&Path>) -> Vec<Bind> {
    // (path, writable, shown), merged per path.
    let mut all: Vec<(PathBuf, bool, bool)> = rules
        .writable
        .iter()
        .map(|p| (p.clone(), true, false))
        .chain(rules.readable.iter().map(|p| (p.clone(), false, false)))
        .chain(shown.iter().map(|p| (p.clone(), false, true)))
        .chain(std::iter::once((PathBuf::from(PROC), false, false)))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1 |= later.1;
            earlier.2 |= later.2;
        }
        same
    });
    // Outermost first; at one path the writable rule first.
    all.sort_by_key(|(p, w, _)| (p.components().count(), !*w, p.clone()));
    let mut out: Vec<Bind> = Vec::new();
    for (path, writable, shown) in all {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let id_map = if writable {
            writable_needs_id_map(&meta)
        } else {
            shown || (path != Path::new(PROC) && needs_id_map(&meta))
        };
        let layer = layers
            .filter(|_| writable && rules.cow.contains(&path))
            .map(|l| super::caches::layer_of(l, &path));
        let inner = out
            .iter()
            .filter(|b| path.starts_with(&b.path))
            .max_by_key(|b| b.path.components().count());
        if let Some(b) = inner {
            if (b.writable || !writable) && (b.id_map || !id_map) && layer.is_none() {
                continue;
            }
        }
        out.push(Bind {
            path,
            writable,
            dir: meta.is_dir(),
            id: (meta.dev(), meta.ino()),
            layer,
            id_map,
        });
    }
    out
}

/// A read-only bind of `path` (canonical, existing), if it exists.
pub(crate) fn read_only_bind(path: &Path) -> Option<Bind> {
    let m = std::fs::metadata(path).ok()?;
    Some(Bind {
        path: path.to_path_buf(),
        writable: false,
        dir: m.is_dir(),
        id: (m.dev(), m.ino()),
        layer: None,
        id_map: needs_id_map(&m),
    })
}

/// The skeleton that leads to `binds`: each bind's missing ancestors as
/// directories (owner as on the host, mode as on the host with at least
/// 0755: they hold nothing but mount points and links, and a tool that is
/// not their owner must get through them, `/root` and a 0700 temporary
/// directory included), its mount point (a directory or an empty file), and
/// the `links` that lie outside every bind. Parents come before their
/// children.
pub(crate) fn skeleton(binds: &[Bind], links: &[Link]) -> Vec<Skel> {
    let mut made: HashSet<PathBuf> = HashSet::new();
    let mut out = Vec::new();
    let inside = |p: &Path| binds.iter().any(|b| p.starts_with(&b.path));
    let dir = |p: &Path, out: &mut Vec<Skel>, made: &mut HashSet<PathBuf>| {
        let chain: Vec<&Path> = p.ancestors().collect();
        for a in chain.into_iter().rev() {
            if a == Path::new("/") || made.contains(a) || inside(a) {
                continue;
            }
            made.insert(a.to_path_buf());
            let (mode, uid, gid) = std::fs::metadata(a)
                .map(|m| (m.mode() & 0o7777 | SKELETON_MODE, m.uid(), m.gid()))
                .unwrap_or((SKELETON_MODE, 0, 0));
            out.push(Skel::Dir {
                path: a.to_path_buf(),
                mode,
                uid,
                gid,
            });
        }
    };
    for b in binds {
        if b.path == Path::new("/") {
            continue;
        }
        let parent = b.path.parent().unwrap_or(Path::new("/"));
        dir(parent, &mut out, &mut made);
        if inside(parent) || made.contains(&b.path) {
            continue;
        }
        made.insert(b.path.clone());
        if b.dir {
            let (mode, uid, gid) = std::fs::metadata(&b.path)
                .map(|m| (m.mode() & 0o7777 | SKELETON_MODE, m.uid(), m.gid()))
                .unwrap_or((SKELETON_MODE, 0, 0));
            out.push(Skel::Dir {
                path: b.path.clone(),
                mode,
                uid,
                gid,
            });
        } else {
            out.push(Skel::File(b.path.clone()));
        }
    }
    let mut links: Vec<&Link> = links.iter().collect();
    links.sort_by_key(|l| l.path.components().count());
    for l in links {
        if inside(&l.path) || made.contains(&l.path) || l.path == Path::new("/") {
            continue;
        }
        let parent = l.path.parent().unwrap_or(Path::new("/"));
        if inside(parent) {
            continue;
        }
        dir(parent, &mut out, &mut made);
        made.insert(l.path.clone());
        out.push(Skel::Link(l.clone()));
    }
    out
}

/// What a filesystem view takes of a policy (here, beside [`links_along`],
/// rather than in `crate::policy`, which knows nothing of views).
impl Policy {
    /// The symbolic links met on the way to every rule path as the policy
    /// names it (`/lib64 -> usr/lib64`): a filesystem view recreates the
    /// ones outside its binds, so that the names programs use resolve.
    pub fn rule_links(&self, ctx: &PathContext) -> Vec<Link> {
        let fs = &self.filesystem;
        let mut out: Vec<Link> = fs
            .ro
            .iter()
            .chain(&fs.rox)
            .chain(&fs.rw)
            .chain(&fs.rwx)
            .filter_map(|raw| ctx.expand(raw).ok())
            .flat_map(|p| links_along(&p))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The symbolic links met while resolving `path` on the host (each with its
/// path as met: canonical parent, own name), following each as the kernel
/// does (at most 40).
pub fn links_along(path: &Path) -> Vec<Link> {
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = vec![path.to_path_buf()];
    let mut hops = 0;
    while let Some(p) = todo.pop() {
        let mut cur = PathBuf::from("/");
        let comps: Vec<_> = p.components().skip(1).collect();
        for (i, c) in comps.iter().enumerate() {
            match c {
                std::path::Component::ParentDir => {
                    cur.pop();
                    continue;
                }
                std::path::Component::CurDir => continue,
                _ => {}
            }
            let next = cur.join(c);
            match std::fs::read_link(&next) {
                Ok(target) => {
                    hops += 1;
                    if hops > 40 {
                        return out;
                    }
                    out.push(Link {
                        path: next.clone(),
                        target: target.clone(),
                    });
                    let mut rest = if target.is_absolute() {
                        target
                    } else {
                        cur.join(target)
                    };
                    for r in &comps[i + 1..] {
                        rest.push(r);
                    }
                    todo.push(rest);
                    break;
                }
                Err(_) => cur = next,
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open::FileId;
    use crate::view::protected::Shape;

    fn entry(p: &str, kind: Kind, shape: Shape, exists: bool) -> Entry {
        Entry {
            path: PathBuf::from(p),
            kind,
            shape,
            id: exists.then_some(FileId { dev: 1, ino: 1 }),
        }
    }

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        (t, r)
    }

    #[test]
    fn binds_keep_only_what_adds_rights_outermost_first() {
        let (_t, r) = tree();
        for d in ["w/sub", "w/ro", "u/rw", "u/x"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let rules = RulePaths {
            writable: vec![r.join("w"), r.join("w/sub"), r.join("u/rw")],
            readable: vec![r.join("w/ro"), r.join("u"), r.join("u/x")],
            links: Vec::new(),
            cow: Vec::new(),
        };
        let b: Vec<(PathBuf, bool)> = binds(&rules, &[], None)
            .into_iter()
            .map(|b| (b.path, b.writable))
            .collect();
        assert_eq!(
            b,
            vec![
                (PathBuf::from(PROC), false),
                (r.join("w"), true),
                (r.join("u"), false),
                (r.join("u/rw"), true),
            ]
        );
    }

    #[test]
    fn binds_that_need_the_tools_id_maps_are_marked_and_bound_on_their_own() {
        use std::os::unix::fs::PermissionsExt;
        let (_t, r) = tree();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        for d in ["w", "etc", "private", "tools"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        mode(&r.join("private"), 0o700);
        for (f, m) in [("etc/open", 0o644), ("etc/key", 0o600), ("etc/prog", 0o744)] {
            std::fs::write(r.join(f), "").unwrap();
            mode(&r.join(f), m);
        }
        let rules = RulePaths {
            writable: vec![r.join("w"), PathBuf::from("/dev/null")],
            readable: vec![
                r.join("etc"),
                r.join("etc/open"),
                r.join("etc/key"),
                r.join("etc/prog"),
                r.join("private"),
            ],
            links: Vec::new(),
            cow: Vec::new(),
        };
        let b: Vec<(PathBuf, bool, bool)> = binds(&rules, &[r.join("tools"), r.join("etc")], None)
            .into_iter()
            .map(|b| (b.path, b.writable, b.id_map))
            .collect();
        let has = |p: PathBuf, w: bool, m: bool| assert!(b.contains(&(p, w, m)), "{b:?}");
        has(PathBuf::from(PROC), false, false);
        // A device anyone may read and write: no id maps.
        has(PathBuf::from("/dev/null"), true, false);
        has(r.join("w"), true, true);
        // A tools directory, even one named by a rule too.
        has(r.join("tools"), false, true);
        has(r.join("etc"), false, true);
        // A root-only directory named by a rule.
        has(r.join("private"), false, true);
        // Inside the read-only bind of /etc (mapped here as a tools
        // directory too), nothing is bound again.
        assert!(
            !b.iter()
                .any(|(p, _, _)| p.starts_with(r.join("etc")) && *p != r.join("etc")),
            "{b:?}"
        );
        // Without the tools' mapping of /etc: the files others may not read
        // (or run) get binds of their own, with the id maps.
        let b: Vec<(PathBuf, bool, bool)> = binds(&rules, &[], None)
            .into_iter()
            .map(|b| (b.path, b.writable, b.id_map))
            .collect();
        let has = |p: PathBuf, w: bool, m: bool| assert!(b.contains(&(p, w, m)), "{b:?}");
        has(r.join("etc"), false, false);
        has(r.join("etc/key"), false, true);
        has(r.join("etc/prog"), false, true);
        assert!(!b.iter().any(|(p, _, _)| *p == r.join("etc/open")), "{b:?}");
    }

    #[test]
    fn the_skeleton_leads_to_each_bind_and_keeps_links_outside_them() {
        let (_t, r) = tree();
        std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
        std::fs::write(r.join("usr/lib64/ld.so"), "").unwrap();
        std::fs::create_dir_all(r.join("home/u/.cargo")).unwrap();
        std::os::unix::fs::symlink("usr/lib64", r.join("lib64")).unwrap();
        std::fs::write(r.join("home/u/.gitconfig"), "").unwrap();
        let rules = RulePaths {
            writable: Vec::new(),
            readable: vec![
                r.join("usr"),
                r.join("home/u/.cargo"),
                r.join("home/u/.gitconfig"),
            ],
            links: links_along(&r.join("lib64/ld.so")),
            cow: Vec::new(),
        };
        assert_eq!(
            rules.links,
            vec![Link {
                path: r.join("lib64"),
                target: PathBuf::from("usr/lib64"),
            }]
        );
        let plan = Plan::new(&ProtectedSet::default(), &rules, &[], None, &r);
        let paths: Vec<&Path> = plan.skeleton.iter().map(Skel::path).collect();
        assert!(paths.contains(&r.join("usr").as_path()));
        assert!(paths.contains(&r.join("home/u").as_path()));
        assert!(paths.contains(&r.join("lib64").as_path()));
        assert!(plan
            .skeleton
            .contains(&Skel::File(r.join("home/u/.gitconfig"))));
        // Parents before children.
        let home = paths.iter().position(|p| *p == r.join("home")).unwrap();
        let user = paths.iter().position(|p| *p == r.join("home/u")).unwrap();
        assert!(home < user);
    }

    #[test]
    fn covers_only_inside_binds_and_pins_inside_writable_ones() {
        let (_t, r) = tree();
        for d in ["w/.git/hooks", "h/.ssh", "h/.aws", "etc"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let p = |s: &str| r.join(s).display().to_string();
        let set = ProtectedSet {
            entries: vec![
                entry(&p("w/.git/hooks"), Kind::ReadOnly, Shape::Dir, true),
                entry(&p("w/sock"), Kind::Hidden, Shape::File, true),
                entry(&p("h/.ssh"), Kind::Hidden, Shape::Dir, true),
                entry(&p("h/.aws"), Kind::Hidden, Shape::Dir, true),
                entry(&p("etc/shadow"), Kind::Hidden, Shape::File, true),
                entry(&p("etc/ro-in-ro"), Kind::ReadOnly, Shape::File, true),
                entry(&p("w/.mcp.json"), Kind::ReadOnly, Shape::File, false),
                entry(&p("elsewhere/.ssh"), Kind::Hidden, Shape::Dir, true),
            ],
            ..ProtectedSet::default()
        };
        let rules = RulePaths {
            writable: vec![r.join("w"), r.join("h/.aws")],
            readable: vec![r.join("h/.ssh/known_hosts"), r.join("etc")],
            links: Vec::new(),
            cow: Vec::new(),
        };
        let plan = Plan::new(&set, &rules, &[], None, &r.join("w"));
        assert_eq!(plan.pins, vec![r.join("w/.git")]);
        assert!(plan.covers.contains(&Cover::HideFile(r.join("w/sock"))));
        assert!(plan
            .covers
            .contains(&Cover::ReadOnly(r.join("w/.git/hooks"))));
        assert!(plan.covers.contains(&Cover::HideFile(r.join("etc/shadow"))));
        // Named by a rule; outside every bind; read-only in a read-only bind.
        for absent in ["h/.aws", "h/.ssh", "elsewhere/.ssh", "etc/ro-in-ro"] {
            assert!(
                !plan.covers.iter().any(|c| c.path() == r.join(absent)),
                "{absent}: {:?}",
                plan.covers
            );
        }
        assert_eq!(plan.creatable, vec![r.join("w/.mcp.json")]);
    }

    #[test]
    fn covers_inside_a_hidden_directory_go_with_it() {
        let (_t, r) = tree();
        std::fs::create_dir_all(r.join("h")).unwrap();
        let p = |s: &str| r.join(s).display().to_string();
        let set = ProtectedSet {
            entries: vec![
                entry(&p("h/.ssh"), Kind::Hidden, Shape::Dir, true),
                entry(&p("h/.ssh/id_rsa"), Kind::Hidden, Shape::File, true),
                entry(&p("h/.ssh/keys/a"), Kind::Hidden, Shape::File, true),
                entry(&p("h/.sshx"), Kind::Hidden, Shape::File, true),
                entry(&p("h/.ssh2/k"), Kind::Hidden, Shape::File, true),
            ],
            ..ProtectedSet::default()
        };
        let rules = RulePaths {
            writable: vec![r.join("h")],
            ..RulePaths::default()
        };
        let plan = Plan::new(&set, &rules, &[], None, &r.join("h"));
        let paths: Vec<PathBuf> = plan.covers.iter().map(|c| c.path().into()).collect();
        assert_eq!(
            paths,
            [r.join("h/.ssh"), r.join("h/.sshx"), r.join("h/.ssh2/k")]
        );
    }
}
