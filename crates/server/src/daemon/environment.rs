//! What the daemon takes from its environment, and wipes from it before any
//! tool could read it.

use toolsrv_sandbox::Forces;

/// The variables the daemon reads before the environment is wiped.
pub(super) struct Inherited {
    /// The variables that force a host mechanism (`TOOLSRV_CONTAINMENT`,
    /// `TOOLSRV_USERNS`, `TOOLSRV_VIEW`, `TOOLSRV_TOOLS_PIDNS`).
    pub(super) forces: Forces,
    /// Whether a service manager passed the listening socket.
    pub(super) activated: bool,
}

impl Inherited {
    /// Read the forcing variables and the socket activation, then wipe every
    /// `TOOLSRV_*` variable (the client's secret, a token).
    ///
    /// # Safety
    ///
    /// The process must be single-threaded: nothing else may read or change
    /// the environment meanwhile.
    pub(super) unsafe fn take() -> Inherited {
        let inherited = Inherited {
            forces: Forces::from_env(),
            // Safety: single-threaded (this function's precondition).
            activated: unsafe { take_socket_activation() },
        };
        // Safety: single-threaded (this function's precondition).
        unsafe { scrub() };
        inherited
    }
}

/// Whether a service manager passed the listening socket (systemd socket
/// activation: `LISTEN_PID` is this process and `LISTEN_FDS` at least 1; the
/// socket is descriptor 3). The variables are removed, as the protocol asks,
/// so tools never see them.
///
/// # Safety
///
/// The process must be single-threaded.
unsafe fn take_socket_activation() -> bool {
    let pid_ok = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        == Some(std::process::id());
    let fds = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(0);
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        // Safety: single-threaded (this function's precondition).
        unsafe { std::env::remove_var(name) };
    }
    pid_ok && fds >= 1
}

/// Wipe every `TOOLSRV_*` variable from this process's environment,
/// including the original bytes that `/proc/<pid>/environ` shows, so no tool
/// can read them there even if a policy grants `/proc`.
///
/// # Safety
///
/// The process must be single-threaded.
unsafe fn scrub() {
    const PREFIX: &str = "TOOLSRV_";
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with(PREFIX))
        .collect();
    if names.is_empty() {
        return;
    }
    // Safety: single-threaded (this function's precondition).
    unsafe { crate::sys::blank_environ_values(PREFIX.as_bytes()) };
    for n in names {
        // Safety: single-threaded (this function's precondition).
        unsafe { std::env::remove_var(n) };
    }
}
