//! The seccomp filter every confined run shares, attached once to the thread
//! that spawns tools instead of once per run.
//!
//! A seccomp filter belongs to a thread and is inherited by whatever that
//! thread clones. Attaching the shared program (set-id modes, System V IPC,
//! `openat2`/`io_uring_setup`: no network part) to each spawning thread once
//! makes every confined child start with it at no cost; attaching it in each
//! child cost ~55–75 µs per run (the kernel checks and JIT-compiles the program
//! at every attach). A run whose policy needs the network part (`enabled:
//! false`, TCP port lists) still attaches its own program on top.
//!
//! Such a thread must not start unconfined tools (`--yolo`, approved bypass):
//! they would inherit the filter. [`thread_is_confined`] tells the caller.

use std::cell::Cell;
use std::io;
use std::sync::OnceLock;

use crate::rules::NetworkRules;

thread_local! {
    static CONFINED: Cell<bool> = const { Cell::new(false) };
}

/// The shared program, assembled once.
fn shared_program() -> Result<&'static [libc::sock_filter], io::Error> {
    static PROGRAM: OnceLock<Result<Vec<libc::sock_filter>, String>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            super::seccomp::program(&shared_network(), false).map_err(|e| e.to_string())
        })
        .as_deref()
        .map_err(|e| io::Error::other(e.clone()))
}

/// The network rules whose program is the shared one: network on, no port lists.
pub(crate) fn shared_network() -> NetworkRules {
    NetworkRules {
        enabled: true,
        bind_tcp: Vec::new(),
        connect_tcp: Vec::new(),
        stream_only: false,
    }
}

/// Whether this thread carries the shared filter (so its children do).
pub fn thread_is_confined() -> bool {
    CONFINED.with(Cell::get)
}

/// Attaches the shared filter to this thread, once. Without CAP_SYS_ADMIN the
/// kernel asks for `no_new_privs` first, which is set on this thread too (what
/// it starts is confined anyway).
pub fn confine_this_thread() -> Result<(), io::Error> {
    if thread_is_confined() {
        return Ok(());
    }
    let program = shared_program()?;
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: program.as_ptr().cast_mut(),
    };
    let attach = || super::sys::set_seccomp_filter(&fprog);
    match attach() {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            super::sys::set_no_new_privs()?;
            attach()?;
        }
        Err(e) => return Err(e),
    }
    CONFINED.with(|c| c.set(true));
    Ok(())
}
