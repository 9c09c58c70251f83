//! The identity tools run under (docs/policy-format.md, "Protected paths"): a server run by an ordinary
//! user runs tools whose uid and gid are its own, whatever namespaces it uses.
//!
//! A server that is not root enters a user namespace of its own at startup,
//! while it is still single-threaded ([`Identity::establish`]): `unshare(
//! CLONE_NEWUSER)`, `deny` to `/proc/self/setgroups`, then `uid_map`
//! `"U U 1"` and `gid_map` `"G G 1"`. Its ids stay what they were, and it
//! holds every capability over the namespaces it creates from then on: a PID
//! namespace per run needs no user namespace per run (tools keep the server's
//! uid, files they make are owned by it), and a mount namespace can be made
//! for the filesystem view. A tool holds none of these capabilities: `execve`
//! by a uid that is not the namespace's root clears them, and confined runs
//! drop them before (`confine::caps`).
//!
//! Where the host refuses (user namespaces disabled or restricted, e.g.
//! Ubuntu's AppArmor default) or where mapping would be unsafe, the server
//! stays where it is ([`Mode::PerRun`]): a run that gets a user namespace
//! from the containment maps the server's ids in it itself ([`IdMaps`],
//! written by the child before anything of the tool runs).
//!
//! A root server runs its confined tools as uid 0 of a user namespace of
//! their own ([`tools`]), mapped to host ids no one uses: they hold no
//! capability over host files and are not root on the host, and their
//! writable rules are bound through id-mapped mounts (`crate::view`).
//!
//! docs/containment.md ("Identity") lists what changes for a server in its
//! own user namespace, and for the tools of a root server.

mod sys;
pub(crate) mod tools;

use std::fmt;
use std::sync::Arc;

pub use tools::ToolNamespace;

/// Environment variable that chooses the mode: `own` (the default: enter a
/// user namespace of the server's own where possible; on a root server, run
/// the confined tools in the tools' user namespace) or `per-run` (stay out
/// of one; runs that get a user namespace map the ids themselves); `root`
/// keeps a root server's tools root (the behaviour before issue 33, for
/// comparison and tests).
pub const FORCE_ENV: &str = "TOOLSRV_USERNS";

/// Why a server that is not root stays out of a user namespace of its own
/// because of `force` (the value of [`FORCE_ENV`]): `per-run`, or a value
/// that is not one of `own`, `auto`, `per-run`. The one reading of it for an
/// unprivileged server, for [`Identity::establish`] and [`probe`].
fn stays_out(force: Option<&str>) -> Option<String> {
    match force.unwrap_or_default() {
        "" | "own" | "auto" => None,
        "per-run" => Some(format!("{FORCE_ENV}=per-run")),
        other => Some(format!(
            "{FORCE_ENV}={other:?} is not one of own, per-run: staying out of a user namespace"
        )),
    }
}

/// How tools get the server's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The server runs as root: no user namespace; tools run as root (with the
    /// capabilities of `confine::caps::KEEP` when confined).
    Root,
    /// The server runs as root, and its confined tools run as uid 0 of the
    /// tools' user namespace ([`ToolNamespace`]): unprivileged host ids.
    RootToolNamespace,
    /// The server entered its own user namespace at startup, mapping its uid
    /// and gid to themselves.
    OwnNamespace,
    /// The server stays in the namespace it was started in; a run that gets
    /// a user namespace maps the server's uid and gid in it.
    PerRun,
}

impl Mode {
    /// The stable name of the mode (`toolsrv doctor --json`, the log).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Root => "root",
            Mode::RootToolNamespace => "root-tools-user-namespace",
            Mode::OwnNamespace => "own-user-namespace",
            Mode::PerRun => "per-run-user-namespace",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the server could not enter its own user namespace once it had left
/// the old one: it must not serve (its ids would read as the overflow id).
#[derive(Debug, thiserror::Error)]
#[error("entered a new user namespace but cannot write {file} ({value:?}): {source}")]
pub struct IdentityError {
    /// The `/proc/self` file.
    pub(crate) file: &'static str,
    /// What was written.
    pub(crate) value: String,
    /// Why it failed.
    pub(crate) source: std::io::Error,
}

/// The identity the server established at startup.
#[derive(Debug, Clone)]
pub struct Identity {
    mode: Mode,
    uid: u32,
    gid: u32,
    /// Why the server is not in its own user namespace (for [`Mode::PerRun`]),
    /// or why a root server's tools run as root (for [`Mode::Root`]).
    reason: Option<String>,
    /// A root server's tools' user namespace (for [`Mode::RootToolNamespace`]).
    tools: Option<Arc<ToolNamespace>>,
}

impl Identity {
    /// Establishes the identity: enters the server's own user namespace when
    /// it is not root (unless `force`, the value of [`FORCE_ENV`], says
    /// `per-run`, or the host refuses). Call while the process is
    /// single-threaded (`unshare(CLONE_NEWUSER)` refuses otherwise).
    ///
    /// Fails only when the namespace was entered but its maps could not be
    /// written: the server's ids would then read as the overflow id, which
    /// is also what other users' connections read as.
    pub fn establish(force: Option<&str>) -> Result<Identity, IdentityError> {
        let (ruid, euid, suid) = sys::uids();
        let (rgid, egid, sgid) = sys::gids();
        let mut id = Identity {
            mode: Mode::PerRun,
            uid: euid,
            gid: egid,
            reason: None,
            tools: None,
        };
        if euid == 0 {
            id.mode = Mode::Root;
            match root_tools(force) {
                Ok(ns) => {
                    id.mode = Mode::RootToolNamespace;
                    id.tools = Some(Arc::new(ns));
                }
                Err(why) => id.reason = Some(why),
            }
            return Ok(id);
        }
        if let Some(why) = stays_out(force) {
            id.reason = Some(why);
            return Ok(id);
        }
        if let Some(why) = unmappable(ruid, euid, suid, rgid, egid, sgid) {
            id.reason = Some(why);
            return Ok(id);
        }
        if let Err(e) = sys::unshare(libc::CLONE_NEWUSER) {
            id.reason = Some(format!(
                "unshare(CLONE_NEWUSER): {e}; {}",
                user_namespace_fix()
            ));
            return Ok(id);
        }
        let maps = IdMaps::new(euid, egid);
        for (file, path, value) in maps.files() {
            sys::write_proc(path, value).map_err(|errno| IdentityError {
                file,
                value: String::from_utf8_lossy(value).trim_end().to_string(),
                source: std::io::Error::from_raw_os_error(errno),
            })?;
        }
        id.mode = Mode::OwnNamespace;
        Ok(id)
    }

    /// The mode in use.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The server's (and its tools') uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The server's (and its tools') gid.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// Why the server is not in its own user namespace, when it is not root
    /// and not in one; why a root server's tools run as root.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// A root server's tools' user namespace, when tools run in one.
    pub fn tools(&self) -> Option<&Arc<ToolNamespace>> {
        self.tools.as_ref()
    }

    /// A root server's tools run as root after all (`why`: there is no
    /// filesystem view, through whose id-mapped mounts alone they can write
    /// their rules' files): the tools' namespace is dropped.
    pub fn without_tools_namespace(&mut self, why: String) {
        if self.mode == Mode::RootToolNamespace {
            self.mode = Mode::Root;
            self.tools = None;
            self.reason = Some(why);
        }
    }

    /// One line for the startup log.
    pub fn summary(&self) -> String {
        match self.mode {
            Mode::Root => format!(
                "root: tools run as root (no user namespace: {})",
                self.reason.as_deref().unwrap_or("not tried")
            ),
            Mode::RootToolNamespace => {
                let base = self.tools.as_ref().map_or(0, |t| t.base());
                format!(
                    "root; confined tools run as uid 0 and gid 0 of their own user namespace, host ids {base} and {base} (tool ids 0..{} mapped to {base}..{}), their writable rules bound through id-mapped mounts",
                    tools::COUNT - 1,
                    u64::from(base) + u64::from(tools::COUNT) - 1
                )
            }
            Mode::OwnNamespace => format!(
                "the server's own user namespace (uid {u} and gid {g} mapped to themselves): tools run as uid {u}, gid {g}",
                u = self.uid,
                g = self.gid
            ),
            Mode::PerRun => format!(
                "no user namespace of the server's own ({}): a run that gets a user namespace maps uid {} and gid {} in it",
                self.reason.as_deref().unwrap_or("not tried"),
                self.uid,
                self.gid
            ),
        }
    }
}

/// A root server's tools' user namespace, made as `force` (the value of
/// [`FORCE_ENV`]) asks: `Err` says why its tools run as root instead
/// (`root`, or the namespace cannot be made). The one reading of
/// [`FORCE_ENV`] on a root server, for [`Identity::establish`] and [`probe`].
fn root_tools(force: Option<&str>) -> Result<ToolNamespace, String> {
    if force == Some("root") {
        return Err(format!("{FORCE_ENV}=root"));
    }
    tools::choose_base().and_then(|base| {
        ToolNamespace::create(base)
            .map_err(|e| format!("cannot make the tools' user namespace: {e}"))
    })
}

/// Why the ids cannot be mapped to themselves safely, if they cannot.
fn unmappable(ruid: u32, euid: u32, suid: u32, rgid: u32, egid: u32, sgid: u32) -> Option<String> {
    if ruid != euid || suid != euid || rgid != egid || sgid != egid {
        // Only the effective ids can be mapped by an unprivileged process:
        // the others would read as the overflow id.
        return Some(format!(
            "real, effective and saved ids differ (uids {ruid}/{euid}/{suid}, gids {rgid}/{egid}/{sgid})"
        ));
    }
    let overflow = std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(65534);
    if euid == overflow {
        // Inside the namespace every unmapped uid reads as the overflow uid:
        // other users' connections would carry the server's own uid.
        return Some(format!(
            "the server runs as the overflow uid {overflow}, which every other user's id would read as in a user namespace"
        ));
    }
    None
}

/// What to change on a host that refuses unprivileged user namespaces.
pub(crate) fn user_namespace_fix() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut fixes = Vec::new();
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        fixes.push("sysctl kernel.unprivileged_userns_clone=1");
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        fixes.push("sysctl kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for the toolsrv binary with `userns,`)");
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        fixes.push("sysctl user.max_user_namespaces=15000");
    }
    if fixes.is_empty() {
        "allow unprivileged user namespaces on this host (kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns, user.max_user_namespaces, or the container runtime's seccomp profile)".to_string()
    } else {
        fixes.join("; ")
    }
}

/// Whether the calling thread holds CAP_SYS_ADMIN in its user namespace: it
/// may then create PID and mount namespaces without a user namespace of
/// their own (root, or a server in its own user namespace).
pub(crate) fn may_create_namespaces() -> bool {
    sys::holds_sys_admin()
}

/// The `/proc/self` writes that map a uid and a gid to themselves in a new
/// user namespace, prepared as bytes so that a child between `clone` and
/// `execve` writes them without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdMaps {
    uid_map: [u8; 32],
    uid_len: usize,
    gid_map: [u8; 32],
    gid_len: usize,
}

impl IdMaps {
    /// `/proc/self/setgroups`.
    pub(crate) const SETGROUPS: &'static [u8] = b"/proc/self/setgroups\0";
    /// `/proc/self/uid_map`.
    pub(crate) const UID_MAP: &'static [u8] = b"/proc/self/uid_map\0";
    /// `/proc/self/gid_map`.
    pub(crate) const GID_MAP: &'static [u8] = b"/proc/self/gid_map\0";
    /// What `setgroups` gets (before `gid_map`, as an unprivileged map needs).
    pub(crate) const DENY: &'static [u8] = b"deny";

    /// The maps of `uid` and `gid` to themselves.
    pub(crate) fn new(uid: u32, gid: u32) -> IdMaps {
        let line = |id: u32| {
            let text = format!("{id} {id} 1\n");
            let mut buf = [0u8; 32];
            buf[..text.len()].copy_from_slice(text.as_bytes());
            (buf, text.len())
        };
        let (uid_map, uid_len) = line(uid);
        let (gid_map, gid_len) = line(gid);
        IdMaps {
            uid_map,
            uid_len,
            gid_map,
            gid_len,
        }
    }

    /// The maps of this process's effective uid and gid.
    pub(crate) fn current() -> IdMaps {
        let (_, euid, _) = sys::uids();
        let (_, egid, _) = sys::gids();
        IdMaps::new(euid, egid)
    }

    /// `(name, NUL-terminated path, bytes)` of the three writes, in order.
    pub(crate) fn files(&self) -> [(&'static str, &'static [u8], &[u8]); 3] {
        [
            ("/proc/self/setgroups", Self::SETGROUPS, Self::DENY),
            (
                "/proc/self/uid_map",
                Self::UID_MAP,
                &self.uid_map[..self.uid_len],
            ),
            (
                "/proc/self/gid_map",
                Self::GID_MAP,
                &self.gid_map[..self.gid_len],
            ),
        ]
    }
}

/// What a throwaway process found this host allows an unprivileged server
/// ([`probe`]).
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    /// The identity mode a server started now with the same environment
    /// would use.
    pub(crate) mode: Mode,
    /// Why not [`Mode::OwnNamespace`], for a server that is not root.
    pub(crate) reason: Option<String>,
    /// Whether such a server could make a mount namespace (the filesystem
    /// view): root, or in its own user namespace.
    pub(crate) mount_namespace: Result<(), String>,
    /// For [`Mode::RootToolNamespace`]: the tools' namespace (made by the
    /// probe, as the server would make it).
    pub(crate) tools: Option<Arc<ToolNamespace>>,
}

/// Exit codes of the probe's child.
const PROBE_OK: i32 = 0;
const PROBE_NO_USERNS: i32 = 10;
const PROBE_NO_MAPS: i32 = 11;
const PROBE_NO_MOUNTNS: i32 = 12;

/// Finds out, in a forked throwaway child (the caller may be
/// multi-threaded), what [`Identity::establish`] would do here with `force`
/// and whether a mount namespace could then be made. Changes nothing in the
/// calling process.
pub(crate) fn probe(force: Option<&str>) -> Probe {
    let (ruid, euid, suid) = sys::uids();
    let (rgid, egid, sgid) = sys::gids();
    let root = euid == 0;
    let mut reason = None;
    let try_userns = if root {
        false
    } else if let Some(why) = stays_out(force) {
        reason = Some(why);
        false
    } else if let Some(why) = unmappable(ruid, euid, suid, rgid, egid, sgid) {
        reason = Some(why);
        false
    } else {
        true
    };
    let maps = IdMaps::new(euid, egid);
    let code = sys::in_child(|| {
        if try_userns {
            if sys::unshare(libc::CLONE_NEWUSER).is_err() {
                return PROBE_NO_USERNS;
            }
            for (_, path, value) in maps.files() {
                if sys::write_proc(path, value).is_err() {
                    return PROBE_NO_MAPS;
                }
            }
        }
        if sys::unshare(libc::CLONE_NEWNS).is_err() {
            return PROBE_NO_MOUNTNS;
        }
        PROBE_OK
    });
    let mut tools = None;
    if root {
        match root_tools(force) {
            Ok(ns) => tools = Some(Arc::new(ns)),
            Err(why) => reason = Some(why),
        }
    }
    let mode = if root && tools.is_some() {
        Mode::RootToolNamespace
    } else if root {
        Mode::Root
    } else if try_userns && matches!(code, Some(PROBE_OK) | Some(PROBE_NO_MOUNTNS)) {
        Mode::OwnNamespace
    } else {
        Mode::PerRun
    };
    match code {
        Some(PROBE_NO_USERNS) => {
            reason = Some(format!(
                "unshare(CLONE_NEWUSER) is refused; {}",
                user_namespace_fix()
            ))
        }
        Some(PROBE_NO_MAPS) => {
            reason = Some("the uid and gid maps of a new user namespace cannot be written".into())
        }
        None => reason = Some("the probe process could not run".into()),
        _ => {}
    }
    let mount_namespace = match (mode, code) {
        (Mode::Root | Mode::RootToolNamespace | Mode::OwnNamespace, Some(PROBE_OK)) => Ok(()),
        (Mode::Root | Mode::RootToolNamespace | Mode::OwnNamespace, _) => {
            Err("unshare(CLONE_NEWNS) is refused".to_string())
        }
        (Mode::PerRun, _) => Err(format!(
            "an unprivileged server needs its own user namespace for a mount namespace ({})",
            reason.as_deref().unwrap_or("not available")
        )),
    };
    let mut mode = mode;
    if mode == Mode::RootToolNamespace && mount_namespace.is_err() {
        // Tools can write their rules' files only through the view's
        // id-mapped mounts: without a view they stay root.
        mode = Mode::Root;
        tools = None;
        reason = Some(NO_VIEW.to_string());
    }
    Probe {
        mode,
        reason,
        mount_namespace,
        tools,
    }
}

/// Why a root server's tools run as root where there is no filesystem view.
pub const NO_VIEW: &str = "no filesystem view, through whose id-mapped mounts alone tools in their own user namespace could write their rules' files";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maps_map_each_id_to_itself_once() {
        let m = IdMaps::new(1000, 4_294_967_294);
        let files = m.files();
        assert_eq!(files[0].2, b"deny");
        assert_eq!(files[1].2, b"1000 1000 1\n");
        assert_eq!(files[2].2, b"4294967294 4294967294 1\n");
        for (name, path, _) in files {
            assert_eq!(path.last(), Some(&0), "{name} is NUL-terminated");
            assert_eq!(&path[..path.len() - 1], name.as_bytes());
        }
    }

    #[test]
    fn ids_that_would_read_as_the_overflow_id_are_not_mapped() {
        assert_eq!(unmappable(1000, 1000, 1000, 1000, 1000, 1000), None);
        assert!(unmappable(1000, 0, 0, 1000, 1000, 1000).is_some_and(|w| w.contains("differ")));
        assert!(unmappable(1000, 1000, 1000, 1000, 1001, 1001).is_some());
        let overflow = std::fs::read_to_string("/proc/sys/kernel/overflowuid")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(65534u32);
        assert!(unmappable(overflow, overflow, overflow, 1000, 1000, 1000)
            .is_some_and(|w| w.contains("overflow uid")));
    }
}
