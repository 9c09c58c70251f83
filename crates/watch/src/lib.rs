//! Who created what, and what to do with what must not stay: the pieces a
//! server needs to keep a sandboxed tool from leaving things behind in
//! places the kernel cannot make uncreatable (see docs/watch.md).
//!
//! - [`ToolsPidNs`]: the PID namespace every process of every sandboxed run
//!   is born in, whose first process (the *reader*, a small process of this
//!   crate) dies with the server, taking every process of the namespace with
//!   it, reaps the orphans reparented to it, and reads the fanotify group so
//!   that each event's pid is translated into the namespace when it is read.
//! - [`Watcher`]: a fanotify group in FID mode (`FAN_REPORT_DFID_NAME |
//!   FAN_REPORT_FID`), filesystem and directory marks, and decoded
//!   [`Event`]s with their [`Origin`]: exactly [`Origin::Tool`] or
//!   [`Origin::Other`] where the group is privileged and read in the tools
//!   namespace, [`Origin::Unknown`] elsewhere.
//! - [`Quarantine`]: moves an entry out of a user directory into the
//!   server's state, without following links, with a JSON record beside it.
//!
//! The policy (which paths to watch, what to quarantine) is the server's.

mod fid;
mod pidns;
mod proto;
mod quarantine;
mod reader;
mod sys;
mod time;
mod watcher;

pub use pidns::{
    joined_this_thread, leave_for_children, outside_tools_namespace, PidNsError, ToolsPidNs,
};
pub use quarantine::{CopyLimits, EntryKind, How, Quarantine, QuarantineError, Record};
pub use watcher::{Attribution, Event, EventKind, Events, Kinds, Origin, WatchError, Watcher};

/// The environment variable that keeps a server's confined runs out of a
/// tools PID namespace (`off`).
pub const FORCE_ENV: &str = "TOOLSRV_TOOLS_PIDNS";

/// How a server on this host attributes creations (`toolsrv doctor`, the
/// startup log): a stable name and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mechanism {
    /// `tools-pid-namespace`, `unknown` or `none`.
    pub name: &'static str,
    /// How, or why not.
    pub detail: String,
}

/// What a server started now with these settings would get:
/// `per_run_pid_namespaces` when its containment makes a PID namespace per
/// run (which cannot be born inside another namespace the spawning thread
/// joined: the kernel refuses `CLONE_NEWPID` there), `off` when
/// `TOOLSRV_TOOLS_PIDNS=off`. Makes a fanotify group and closes it; changes
/// nothing.
pub fn probe(per_run_pid_namespaces: bool, off: bool) -> Mechanism {
    let privileged = sys::privileged();
    let flags =
        sys::fan::CLOEXEC | sys::fan::REPORT_FID | sys::fan::REPORT_DIR_FID | sys::fan::REPORT_NAME;
    if let Err(e) = sys::fanotify_init(flags) {
        return Mechanism {
            name: "none",
            detail: format!(
                "no fanotify group can be made here ({e}): creations in watched places are not seen"
            ),
        };
    }
    describe(privileged, per_run_pid_namespaces, off)
}

/// The [`Mechanism`] for a server that is `privileged` (CAP_SYS_ADMIN in the
/// initial user namespace) with the settings of [`probe`], once it knows it
/// can make a fanotify group.
pub fn describe(privileged: bool, per_run_pid_namespaces: bool, off: bool) -> Mechanism {
    let unknown = |why: &str| {
        Mechanism {
        name: "unknown",
        detail: format!("{why}: creations are seen, but whether a tool made one is not known (the server decides by policy)"),
    }
    };
    if !privileged {
        unknown("the server is not root: its fanotify group is unprivileged (pid 0 for every process, inode marks only)")
    } else if off {
        unknown("TOOLSRV_TOOLS_PIDNS=off: no tools PID namespace")
    } else if per_run_pid_namespaces {
        unknown("runs are contained by a PID namespace each, which cannot be made inside a tools PID namespace")
    } else {
        Mechanism {
            name: "tools-pid-namespace",
            detail: "every sandboxed run is born in the server's tools PID namespace, whose init reads a privileged fanotify group (filesystem marks, FAN_REPORT_DFID_NAME): an event's pid is visible there exactly when a tool made it".to_string(),
        }
    }
}
