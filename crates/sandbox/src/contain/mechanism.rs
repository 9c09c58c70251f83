//! Choosing the mechanism at startup: cgroups where the server may write
//! beneath its own cgroup, else a PID namespace per run (with a user namespace
//! for an unprivileged server), else the process group only.

use super::hierarchy::Cgroups;
use super::{Containment, Force, Mechanism, FORCE_ENV};
use crate::identity::IdMaps;

impl Containment {
    /// Detects the mechanism, makes this server's instance groups and removes
    /// those of dead servers. Never fails: the weakest outcome is
    /// [`Mechanism::None`], which [`Containment::summary`] says.
    ///
    /// `force` is the value of [`FORCE_ENV`], if set (the caller reads it: the
    /// server scrubs `TOOLSRV_*` from its environment at startup).
    pub fn start(force: Option<&str>) -> Containment {
        let force = Force::parse(force);
        let mut notes = Vec::new();
        if let Force::Unknown(other) = &force {
            notes.push(format!(
                "{FORCE_ENV}={other:?} is not one of auto, cgroup, pidns, userns, none: detecting"
            ));
        }
        match force {
            Force::Auto | Force::Cgroup | Force::Unknown(_) => {
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
                if force == Force::Cgroup {
                    notes.push(format!("{FORCE_ENV}=cgroup, but no cgroup is writable"));
                }
                Containment::namespaces(!crate::identity::may_create_namespaces(), notes)
            }
            Force::PidNs => Containment::namespaces(false, notes),
            Force::UserNs => Containment::namespaces(true, notes),
            Force::None => Containment {
                mechanism: Mechanism::None,
                cgroups: None,
                summary: format!("none ({FORCE_ENV}=none)"),
                notes,
                own_ids: None,
            },
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

#[cfg(test)]
mod force_tests {
    use super::Force;

    #[test]
    fn the_forcing_values_parse_and_anything_else_is_unknown() {
        assert_eq!(Force::parse(None), Force::Auto);
        assert_eq!(Force::parse(Some("")), Force::Auto);
        assert_eq!(Force::parse(Some("auto")), Force::Auto);
        assert_eq!(Force::parse(Some("cgroup")), Force::Cgroup);
        assert_eq!(Force::parse(Some("pidns")), Force::PidNs);
        assert_eq!(Force::parse(Some("userns")), Force::UserNs);
        assert_eq!(Force::parse(Some("none")), Force::None);
        assert_eq!(
            Force::parse(Some("cgroups")),
            Force::Unknown("cgroups".to_string())
        );
    }
}
