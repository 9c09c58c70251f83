//! The variables that force a host mechanism (`TOOLSRV_CONTAINMENT`,
//! `TOOLSRV_USERNS`, `TOOLSRV_VIEW`, `TOOLSRV_TOOLS_PIDNS`,
//! `TOOLSRV_NETWORK`), read in one
//! place: the server reads them once at start-up (before it wipes every
//! `TOOLSRV_*` variable) and `toolsrv doctor` from its own environment, so
//! both decide from the same values the same way ([`crate::Facts::host`]).

/// The forcing variables' values, as set (`None`: unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forces {
    /// `TOOLSRV_CONTAINMENT`: `auto`, `cgroup`, `pidns`, `userns` or `none`.
    pub containment: Option<String>,
    /// `TOOLSRV_USERNS`: the identity mode (`own`, `per-run`, `root`).
    pub userns: Option<String>,
    /// `TOOLSRV_VIEW`: `off` (or `0`, `false`, `none`) forces the
    /// Landlock-only fallback.
    pub view: Option<String>,
    /// `TOOLSRV_TOOLS_PIDNS`: `off` keeps confined runs out of a tools PID
    /// namespace.
    pub tools_pidns: Option<String>,
    /// `TOOLSRV_NETWORK`: `fallback` gives runs under `network.domains` no
    /// network namespace of their own.
    pub network: Option<String>,
}

impl Forces {
    /// The values in this process's environment now.
    pub fn from_env() -> Forces {
        let var = |name: &str| std::env::var(name).ok();
        Forces {
            containment: var(crate::contain::FORCE_ENV),
            userns: var(crate::identity::FORCE_ENV),
            view: var(crate::view::FORCE_ENV),
            tools_pidns: var(toolsrv_watch::FORCE_ENV),
            network: var(crate::netns::FORCE_ENV),
        }
    }

    /// Whether `TOOLSRV_TOOLS_PIDNS` turns the tools PID namespace off.
    pub fn tools_pidns_off(&self) -> bool {
        self.tools_pidns
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case("off"))
    }
}
