//! The seccomp filter used when the network is disabled.
//!
//! `socket(2)` and `socketpair(2)` are refused with `EACCES` for every address family
//! except `AF_UNIX`, and `io_uring_setup(2)` is refused with `EACCES` (io_uring can create
//! sockets without going through `socket(2)`). Everything else is allowed.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::ConfineError;

/// Bit set on x32 system call numbers (same audit architecture as x86_64).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// Builds the "no network" filter as a list of classic BPF instructions.
pub(crate) fn no_network_filter() -> Result<Vec<libc::sock_filter>, ConfineError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(ConfineError::Seccomp)?;
    // One rule per syscall: first argument (the domain, an int) != AF_UNIX.
    let not_unix = || -> Result<Vec<SeccompRule>, ConfineError> {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(ConfineError::Seccomp)?;
        Ok(vec![
            SeccompRule::new(vec![cond]).map_err(ConfineError::Seccomp)?
        ])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, not_unix()?);
    rules.insert(libc::SYS_socketpair, not_unix()?);
    // An empty rule list matches unconditionally.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    #[cfg(target_arch = "x86_64")]
    {
        // x32 system calls pass the x86_64 architecture check; refuse them the same way.
        rules.insert(X32_SYSCALL_BIT | libc::SYS_socket, not_unix()?);
        rules.insert(X32_SYSCALL_BIT | libc::SYS_socketpair, not_unix()?);
        rules.insert(X32_SYSCALL_BIT | libc::SYS_io_uring_setup, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(ConfineError::Seccomp)?;
    let program: BpfProgram = filter.try_into().map_err(ConfineError::Seccomp)?;
    Ok(program
        .into_iter()
        .map(|insn| libc::sock_filter {
            code: insn.code,
            jt: insn.jt,
            jf: insn.jf,
            k: insn.k,
        })
        .collect())
}
