//! Choosing the mechanism at startup: cgroups where the server may write
//! beneath its own cgroup, else a PID namespace per run (with a user namespace
//! for an unprivileged server), else the process group only.

use super::hierarchy::Cgroups;
use super::{Containment, Mechanism, FORCE_ENV};
use crate::identity::IdMaps;

impl Containment {
    /// Detects the mechanism, makes this server's instance groups and removes
    /// those of dead servers. Never fails: the weakest outcome is
    /// [`Mechanism::None`], which [`Containment::summary`] says.
    ///
    /// `force` is the value of [`FORCE_ENV`], if set (the caller reads it: the
    /// server scrubs `TOOLSRV_*` from its environment at startup).
    pub fn start(force: Option<&str>) -> Containment {
        let force = force.unwrap_or_default();
        let mut notes = Vec::new();
        match force {
            "" | "auto" | "cgroup" => {
                if let Some(cg) = Cgroups::start(&mut notes) {
                    let summary = cg.describe();
                    return Containment {
                        mechanism: Mechanism::Cgroup,
                        cgroups: Some(cg),
                        summary,
                        notes,
                        own_ids: None,
                    };
                }
                if force == "cgroup" {
                    notes.push(format!("{FORCE_ENV}=cgroup, but no cgroup is writable"));
                }
                Containment::namespaces(!crate::identity::may_create_namespaces(), notes)
            }
            "pidns" => Containment::namespaces(false, notes),
            "userns" => Containment::namespaces(true, notes),
            "none" => Containment {
                mechanism: Mechanism::None,
                cgroups: None,
                summary: format!("none ({FORCE_ENV}=none)"),
                notes,
                own_ids: None,
            },
            other => {
                notes.push(format!(
                    "{FORCE_ENV}={other:?} is not one of auto, cgroup, pidns, userns, none: detecting"
                ));
                Containment::namespaces(!crate::identity::may_create_namespaces(), notes)
            }
        }
    }

    pub(super) fn namespaces(user: bool, notes: Vec<String>) -> Containment {
        let summary = if user {
            "a PID namespace and a user namespace per run (mapping the server's uid and gid to themselves); processes limit as RLIMIT_NPROC (per user), no memory limit, cpu as RLIMIT_CPU per process"
        } else {
            "a PID namespace per run; no cgroup limits (processes as RLIMIT_NPROC, which binds no root process; no memory limit; cpu as RLIMIT_CPU per process)"
        };
        Containment {
            mechanism: Mechanism::PidNamespace { user },
            cgroups: None,
            summary: summary.to_string(),
            notes,
            own_ids: user.then(IdMaps::current),
        }
    }
}
