//! The seccomp program of a confined run: what Landlock does not cover.
//!
//! One classic-BPF program, made of parts that each refuse some calls with
//! their own errno (seccompiler gives one action per filter; the parts are
//! chained by turning every "allow" of a part into a jump to the next one, so
//! the child installs a single program):
//!
//! - **x32** (x86_64): every x32 system call (`nr & 0x4000_0000`) is `ENOSYS`.
//!   x32 calls pass the x86_64 architecture check and have numbers of their
//!   own for some calls (`sendmsg`, ...); no part below has to list them.
//! - **network** (`EACCES`), one of:
//!   - `enabled: false`: `socket(2)`/`socketpair(2)` for every family except
//!     `AF_UNIX`, and `io_uring_setup(2)` (io_uring creates sockets without
//!     `socket(2)`).
//!   - a non-empty `connect_tcp` or `bind_tcp` (Landlock checks `connect(2)` and
//!     `bind(2)` of TCP sockets only): an `AF_INET`/`AF_INET6` socket must be
//!     `SOCK_STREAM` with protocol 0 or `IPPROTO_TCP` (so no MPTCP, SCTP or raw
//!     socket) or `SOCK_DGRAM` (UDP is not what the TCP lists restrict);
//!     `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (a connect that skips
//!     `connect(2)`); `io_uring_setup(2)`.
//! - **files and IPC** (`EPERM`), always: a mode with `S_ISUID` or `S_ISGID` in
//!   `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`,
//!   `mknod`, `mknodat` (no set-user-ID or set-group-ID file, CONTRACT section
//!   12); `shmget`, `semget`, `msgget` and `mq_open` (System V IPC objects and
//!   POSIX message queues outlive the run and are seen by everyone).
//! - **unreadable arguments** (`ENOSYS`), always: `openat2(2)` (its mode is in
//!   a struct a filter cannot read; C libraries fall back to `openat`) and
//!   `io_uring_setup(2)` (io_uring opens files with any mode without `open`).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::ConfineError;
use crate::rules::NetworkRules;

/// Bit set on x32 system call numbers (same audit architecture as x86_64).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `fchmodat2(2)` (Linux 6.6): the same number on every supported architecture.
const SYS_FCHMODAT2: i64 = 452;

/// `MSG_FASTOPEN`.
const MSG_FASTOPEN: u64 = 0x2000_0000;

/// The set-user-ID and set-group-ID mode bits.
const SET_ID_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// Classic BPF opcodes (`linux/bpf_common.h`) for the few instructions written
/// here rather than by seccompiler: `BPF_LD | BPF_W | BPF_ABS`, `BPF_JMP |
/// BPF_JA`, `BPF_JMP | BPF_JSET | BPF_K`, `BPF_RET | BPF_K`.
#[cfg(target_arch = "x86_64")]
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
const BPF_RET_K: u16 = 0x06;
/// `SECCOMP_RET_ALLOW`, `SECCOMP_RET_ERRNO`.
const RET_ALLOW: u32 = 0x7fff_0000;
#[cfg(target_arch = "x86_64")]
const RET_ERRNO: u32 = 0x0005_0000;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// The whole program for `net`.
pub(crate) fn program(net: &NetworkRules) -> Result<Vec<libc::sock_filter>, ConfineError> {
    let mut parts = Vec::new();
    #[cfg(target_arch = "x86_64")]
    parts.push(x32_part());
    if !net.enabled {
        parts.push(compile(no_network_rules()?, libc::EACCES)?);
    } else if !net.bind_tcp.is_empty() || !net.connect_tcp.is_empty() {
        parts.push(compile(tcp_only_rules()?, libc::EACCES)?);
    }
    parts.push(compile(files_and_ipc_rules()?, libc::EPERM)?);
    parts.push(compile(unreadable_rules(), libc::ENOSYS)?);
    Ok(chain(parts))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, ConfineError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(ConfineError::Seccomp)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, ConfineError> {
    SeccompRule::new(conds).map_err(ConfineError::Seccomp)
}

/// `enabled: false`: no socket but `AF_UNIX`, no io_uring.
fn no_network_rules() -> Result<Rules, ConfineError> {
    let not_unix = || -> Result<Vec<SeccompRule>, ConfineError> {
        Ok(vec![rule(vec![cond(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?])
    };
    let mut rules = Rules::new();
    rules.insert(libc::SYS_socket, not_unix()?);
    rules.insert(libc::SYS_socketpair, not_unix()?);
    // An empty rule list matches unconditionally.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    Ok(rules)
}

/// TCP port lists: IP sockets only as plain TCP or datagrams, no Fast Open
/// sends, no io_uring.
fn tcp_only_rules() -> Result<Rules, ConfineError> {
    let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u64;
    let type_mask = !flags & 0xffff_ffff;
    let mut socket = Vec::new();
    for domain in [libc::AF_INET, libc::AF_INET6] {
        let is_domain = || cond(0, SeccompCmpOp::Eq, domain as u64);
        // Neither a stream nor a datagram socket, whatever flags it carries.
        let mut other_type = vec![is_domain()?];
        for kind in [libc::SOCK_STREAM, libc::SOCK_DGRAM] {
            for f in [0, libc::SOCK_NONBLOCK, libc::SOCK_CLOEXEC, flags as i32] {
                other_type.push(cond(1, SeccompCmpOp::Ne, (kind | f) as u64)?);
            }
        }
        socket.push(rule(other_type)?);
        // A stream socket of another protocol than TCP (MPTCP, SCTP).
        socket.push(rule(vec![
            is_domain()?,
            cond(
                1,
                SeccompCmpOp::MaskedEq(type_mask),
                libc::SOCK_STREAM as u64,
            )?,
            cond(2, SeccompCmpOp::Ne, 0)?,
            cond(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
    }
    let fast_open = |arg: u8| -> Result<Vec<SeccompRule>, ConfineError> {
        Ok(vec![rule(vec![cond(
            arg,
            SeccompCmpOp::MaskedEq(MSG_FASTOPEN),
            MSG_FASTOPEN,
        )?])?])
    };
    let mut rules = Rules::new();
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_sendto, fast_open(3)?);
    rules.insert(libc::SYS_sendmsg, fast_open(2)?);
    rules.insert(libc::SYS_sendmmsg, fast_open(3)?);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    Ok(rules)
}

/// No set-id mode, no System V IPC object, no POSIX message queue.
fn files_and_ipc_rules() -> Result<Rules, ConfineError> {
    let set_id = |arg: u8| -> Result<Vec<SeccompRule>, ConfineError> {
        SET_ID_BITS
            .iter()
            .map(|&bit| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)?]))
            .collect()
    };
    let mut rules = Rules::new();
    // (system call, index of its mode argument)
    let mut moded: Vec<(i64, u8)> = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    moded.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    for (nr, arg) in moded {
        rules.insert(nr, set_id(arg)?);
    }
    for nr in [
        libc::SYS_shmget,
        libc::SYS_semget,
        libc::SYS_msgget,
        libc::SYS_mq_open,
    ] {
        rules.insert(nr, Vec::new());
    }
    Ok(rules)
}

/// Calls whose arguments a filter cannot read.
fn unreadable_rules() -> Rules {
    let mut rules = Rules::new();
    rules.insert(libc::SYS_openat2, Vec::new());
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    rules
}

/// Compiles one part: `errno` for what `rules` match, allow for the rest.
fn compile(rules: Rules, errno: i32) -> Result<Vec<libc::sock_filter>, ConfineError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(ConfineError::Seccomp)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
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

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// `ENOSYS` for every x32 system call.
#[cfg(target_arch = "x86_64")]
fn x32_part() -> Vec<libc::sock_filter> {
    vec![
        // A = seccomp_data.nr
        insn(BPF_LD_W_ABS, 0, 0, 0),
        insn(BPF_JMP_JSET_K, 0, 1, X32_SYSCALL_BIT),
        insn(BPF_RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
        insn(BPF_RET_K, 0, 0, RET_ALLOW),
    ]
}

/// One program running `parts` in order: the first that does not allow a
/// call decides; a call every part allows is allowed. Each "allow" of a part
/// but the last becomes a jump to the start of the next part (instructions
/// are replaced one for one, so the jumps inside a part keep their targets).
fn chain(parts: Vec<Vec<libc::sock_filter>>) -> Vec<libc::sock_filter> {
    let count = parts.len();
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for (i, mut part) in parts.into_iter().enumerate() {
        if i + 1 < count {
            let len = part.len();
            for (at, ins) in part.iter_mut().enumerate() {
                if ins.code == BPF_RET_K && ins.k == RET_ALLOW {
                    // Skip the rest of this part: land on the next one's first.
                    *ins = insn(BPF_JMP_JA, 0, 0, (len - at - 1) as u32);
                }
            }
        }
        out.extend(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chained_program_ends_every_path_in_a_return() {
        let net = NetworkRules {
            enabled: true,
            bind_tcp: vec![80],
            connect_tcp: vec![443],
        };
        let p = program(&net).expect("program");
        assert!(p.len() < 4096, "{} instructions", p.len());
        // No "allow" is left but in the last part, and every jump lands inside.
        for (at, ins) in p.iter().enumerate() {
            if ins.code == BPF_JMP_JA {
                assert!(at + 1 + (ins.k as usize) < p.len());
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(BPF_RET_K));
    }
}
