//! Where the cgroup hierarchies are mounted and where this process sits in
//! each: `/proc/self/mountinfo` and `/proc/self/cgroup`.

use std::path::{Path, PathBuf};

/// One cgroup hierarchy as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// `None` for the unified (v2) hierarchy; the v1 controllers otherwise
    /// (`pids`, `memory`, ...).
    pub(crate) controllers: Option<Vec<String>>,
    /// The directory of this process's own cgroup in that hierarchy.
    pub(crate) own_dir: PathBuf,
}

impl Hierarchy {
    /// Whether this is a v1 hierarchy carrying `controller`.
    pub(crate) fn has(&self, controller: &str) -> bool {
        self.controllers
            .as_ref()
            .is_some_and(|c| c.iter().any(|x| x == controller))
    }
}

/// A cgroup mount: mount point, the cgroup path at its root, and its
/// controllers (`None`: cgroup2).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    root: String,
    controllers: Option<Vec<String>>,
}

/// The hierarchies this process can find its own cgroup in.
pub(crate) fn hierarchies() -> Vec<Hierarchy> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    resolve(&parse_mounts(&mountinfo), &cgroup)
}

/// Cgroup mounts from the text of a `mountinfo` file.
fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out: Vec<Mount> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let tail: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || tail.len() < 3 {
            continue;
        }
        let controllers = match tail[0] {
            "cgroup2" => None,
            "cgroup" => Some(
                tail[2]
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                    .map(str::to_string)
                    .collect(),
            ),
            _ => continue,
        };
        let mount = Mount {
            point: PathBuf::from(unescape(fields[4])),
            root: unescape(fields[3]),
            controllers,
        };
        // The first mount of a hierarchy wins (later ones are bind mounts).
        if !out.iter().any(|m| m.controllers == mount.controllers) {
            out.push(mount);
        }
    }
    out
}

/// `mountinfo` escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Joins the mounts with this process's lines of `/proc/self/cgroup`.
fn resolve(mounts: &[Mount], cgroup: &str) -> Vec<Hierarchy> {
    let mut out = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let want: Option<Vec<String>> = if ctrls.is_empty() {
            None
        } else {
            Some(ctrls.split(',').map(str::to_string).collect())
        };
        let Some(mount) = mounts.iter().find(|m| match (&m.controllers, &want) {
            (None, None) => true,
            (Some(have), Some(want)) => want.iter().all(|w| have.contains(w)),
            _ => false,
        }) else {
            continue;
        };
        let Some(rel) = beneath(&mount.root, path) else {
            continue;
        };
        out.push(Hierarchy {
            controllers: mount.controllers.clone(),
            own_dir: mount.point.join(rel),
        });
    }
    out
}

/// `path` relative to the mount's `root`, when it lies beneath it.
fn beneath<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    let rel = if root == "/" {
        path
    } else {
        let rest = path.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    let rel = rel.trim_start_matches('/');
    // A path like `/../x` (a cgroup outside our namespace's root) is not ours to use.
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    Some(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
";

    #[test]
    fn a_hybrid_host_has_every_hierarchy() {
        let cg = "8:pids:/\n4:memory:/a/b\n2:cpu,cpuacct:/\n9:name=systemd:/\n0::/user.slice\n";
        let h = resolve(&parse_mounts(HYBRID), cg);
        let v2 = h.iter().find(|h| h.controllers.is_none()).unwrap();
        assert_eq!(
            v2.own_dir,
            PathBuf::from("/sys/fs/cgroup/unified/user.slice")
        );
        let mem = h.iter().find(|h| h.has("memory")).unwrap();
        assert_eq!(mem.own_dir, PathBuf::from("/sys/fs/cgroup/memory/a/b"));
        assert!(h.iter().any(|h| h.has("cpuacct")));
        assert!(h.iter().any(|h| h.has("pids")));
    }

    #[test]
    fn a_namespaced_root_is_stripped_and_escapes_refused() {
        let m = "40 30 0:40 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let h = resolve(&parse_mounts(m), "0::/docker/x/inner\n");
        assert_eq!(h[0].own_dir, PathBuf::from("/sys/fs/cgroup/inner"));
        assert!(resolve(&parse_mounts(m), "0::/other\n").is_empty());
        let m = "40 30 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert!(resolve(&parse_mounts(m), "0::/../x\n").is_empty());
    }

    #[test]
    fn escaped_mount_points_are_unescaped() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/a\04"), r"/a\04");
    }
}
