//! The seccomp program of a confined run: what Landlock does not cover.
//!
//! One classic-BPF program, written here rather than with seccompiler:
//! attaching a filter costs the spawn its size in time, because the kernel
//! runs the program once per system call number when it is attached, to
//! cache the calls it always allows. seccompiler tests the listed calls one
//! after the other (170 instructions and ~115 µs per attach for the rules
//! below); here the call number is found by a binary search and each call
//! has one small body (~70 instructions, see `docs/spawn-and-confinement.md`).
//!
//! What is refused:
//!
//! - **x32** (x86_64): every x32 system call (`nr & 0x4000_0000`) is `ENOSYS`.
//!   x32 calls pass the x86_64 architecture check and have numbers of their
//!   own for some calls (`sendmsg`, ...). A foreign architecture (i386 on
//!   x86_64) kills the process.
//! - **network** (`EACCES`), one of:
//!   - `enabled: false`: `socket(2)`/`socketpair(2)` for every family except
//!     `AF_UNIX`, and `io_uring_setup(2)` (io_uring creates sockets without
//!     `socket(2)`).
//!   - a non-empty `connect_tcp` or `bind_tcp` (Landlock checks `connect(2)` and
//!     `bind(2)` of TCP sockets only): an `AF_INET`/`AF_INET6` socket must be
//!     `SOCK_STREAM` with protocol 0 or `IPPROTO_TCP` (so no MPTCP or SCTP) or
//!     `SOCK_DGRAM` (UDP is not what the TCP lists restrict);
//!     `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (a connect that skips
//!     `connect(2)`); `io_uring_setup(2)`.
//! - **files and IPC** (`EPERM`), always: a mode with `S_ISUID` or `S_ISGID` in
//!   `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`,
//!   `mknod`, `mknodat` (no set-user-ID or set-group-ID file, docs/protocol.md section
//!   12); `shmget`, `semget`, `msgget` and `mq_open` (System V IPC objects and
//!   POSIX message queues outlive the run and are seen by everyone).
//! - **unreadable arguments** (`ENOSYS`), always: `openat2(2)` (its mode is in
//!   a struct a filter cannot read; C libraries fall back to `openat`) and
//!   `io_uring_setup(2)` (io_uring opens files with any mode without `open`),
//!   unless the network rules refuse it with `EACCES` already.
//! - **kernel keyrings** (`EPERM`, as container runtimes do), unless the
//!   policy allows them (`advanced.keyrings`): `add_key(2)`, `request_key(2)`
//!   and every `keyctl(2)` but one, `keyctl(KEYCTL_JOIN_SESSION_KEYRING,
//!   NULL)`, which only gives the caller a new, empty session keyring of its
//!   own: the child makes that call before `execve` (whether the filter is
//!   already on its thread or not), so no run shares a session keyring with
//!   the server or the human. Keyrings are not namespaced: a key a tool adds
//!   to the user keyring is the human's, and one it reads may be a ticket.
//! - **`AF_VSOCK`** (`EACCES`), always: `socket(2)` of the virtual-machine
//!   socket family, which reaches the hypervisor and the other guests and
//!   which no Landlock rule covers.

use std::collections::BTreeMap;

use crate::rules::NetworkRules;

/// Why the program could not be assembled (a bug, never a policy's fault).
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// A conditional jump would be longer than classic BPF allows (255).
    #[error("a jump of {0} instructions is too long")]
    JumpTooFar(usize),
    /// The program is longer than the kernel accepts (4096 instructions).
    #[error("the program has {0} instructions")]
    TooLong(usize),
}

/// `fchmodat2(2)` (Linux 6.6): the same number on every supported architecture.
const SYS_FCHMODAT2: u32 = 452;
/// `MSG_FASTOPEN`.
const MSG_FASTOPEN: u32 = 0x2000_0000;
/// `KEYCTL_JOIN_SESSION_KEYRING` (`linux/keyctl.h`).
pub(crate) const KEYCTL_JOIN_SESSION_KEYRING: u32 = 1;
/// The set-user-ID and set-group-ID mode bits.
const SET_ID_BITS: libc::mode_t = libc::S_ISUID | libc::S_ISGID;

/// `AUDIT_ARCH_*` of this architecture (`linux/audit.h`).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;
/// Bit set on x32 system call numbers (same audit architecture as x86_64).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Classic BPF opcodes (`linux/bpf_common.h`).
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;
/// `seccomp` return values.
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// Offsets in `struct seccomp_data`: `nr`, `arch`, and the low 32 bits of
/// argument `i` (every supported architecture is little-endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg(i: u32) -> u32 {
    16 + 8 * i
}
/// The high 32 bits of argument `i` (a pointer's, for instance).
const fn arg_high(i: u32) -> u32 {
    arg(i) + 4
}

/// What is checked for one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Always refused with this errno.
    Errno(i32),
    /// `EPERM` when argument `0` (a mode) has a set-id bit.
    SetIdMode(u32),
    /// `EACCES` unless the family is `AF_UNIX`.
    UnixOnly,
    /// `EACCES` for an IP socket that is neither plain TCP nor a datagram socket.
    TcpOrDatagram,
    /// `EACCES` for an IP socket that is not plain TCP.
    TcpOnly,
    /// `EACCES` when argument `0` (send flags) has `MSG_FASTOPEN`.
    NoFastOpen(u32),
    /// `EACCES` for an `AF_VSOCK` socket.
    NoVsock,
    /// `EPERM` unless the call is `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`.
    JoinNewSessionOnly,
}

/// What each listed system call gets, for `net` and `keyrings`.
fn bodies(net: &NetworkRules, keyrings: bool) -> BTreeMap<u32, Body> {
    let mut b = BTreeMap::new();
    let nr = |n: libc::c_long| n as u32;
    let mut moded = vec![
        (nr(libc::SYS_fchmod), 1),
        (nr(libc::SYS_fchmodat), 2),
        (SYS_FCHMODAT2, 2),
        (nr(libc::SYS_openat), 3),
        (nr(libc::SYS_mknodat), 2),
    ];
    #[cfg(target_arch = "x86_64")]
    moded.extend([
        (nr(libc::SYS_chmod), 1),
        (nr(libc::SYS_open), 2),
        (nr(libc::SYS_creat), 1),
        (nr(libc::SYS_mknod), 1),
    ]);
    for (n, a) in moded {
        b.insert(n, Body::SetIdMode(a));
    }
    for n in [
        libc::SYS_shmget,
        libc::SYS_semget,
        libc::SYS_msgget,
        libc::SYS_mq_open,
    ] {
        b.insert(nr(n), Body::Errno(libc::EPERM));
    }
    b.insert(nr(libc::SYS_openat2), Body::Errno(libc::ENOSYS));
    b.insert(nr(libc::SYS_io_uring_setup), Body::Errno(libc::ENOSYS));
    if !keyrings {
        b.insert(nr(libc::SYS_add_key), Body::Errno(libc::EPERM));
        b.insert(nr(libc::SYS_request_key), Body::Errno(libc::EPERM));
        b.insert(nr(libc::SYS_keyctl), Body::JoinNewSessionOnly);
    }
    b.insert(nr(libc::SYS_socket), Body::NoVsock);
    if !net.enabled {
        b.insert(nr(libc::SYS_socket), Body::UnixOnly);
        b.insert(nr(libc::SYS_socketpair), Body::UnixOnly);
        b.insert(nr(libc::SYS_io_uring_setup), Body::Errno(libc::EACCES));
    } else if net.stream_only || !net.bind_tcp.is_empty() || !net.connect_tcp.is_empty() {
        let ip = if net.stream_only {
            Body::TcpOnly
        } else {
            Body::TcpOrDatagram
        };
        b.insert(nr(libc::SYS_socket), ip);
        b.insert(nr(libc::SYS_sendto), Body::NoFastOpen(3));
        b.insert(nr(libc::SYS_sendmsg), Body::NoFastOpen(2));
        b.insert(nr(libc::SYS_sendmmsg), Body::NoFastOpen(3));
        b.insert(nr(libc::SYS_io_uring_setup), Body::Errno(libc::EACCES));
    }
    b
}

/// The program for a confined run under `net`, with the keyrings allowed or
/// not (`keyrings`).
pub(crate) fn program(
    net: &NetworkRules,
    keyrings: bool,
) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut a = Asm::default();
    let allow = a.label();
    let kill = a.label();
    let mut errno_labels: BTreeMap<i32, Label> = BTreeMap::new();
    let bodies = bodies(net, keyrings);
    let mut cases: Vec<(u32, Label)> = Vec::new();
    let mut to_emit: Vec<(Label, Body)> = Vec::new();
    for (&n, &body) in &bodies {
        let l = match body {
            Body::Errno(e) => *errno_labels.entry(e).or_insert_with(|| a.label()),
            other => {
                let l = a.label();
                to_emit.push((l, other));
                l
            }
        };
        cases.push((n, l));
    }
    let mut errno = |a: &mut Asm, e: i32| *errno_labels.entry(e).or_insert_with(|| a.label());
    a.op(LD_W_ABS, ARCH, Next, Next);
    a.op(JEQ_K, AUDIT_ARCH, Next, To(kill));
    a.op(LD_W_ABS, NR, Next, Next);
    #[cfg(target_arch = "x86_64")]
    {
        let enosys = errno(&mut a, libc::ENOSYS);
        a.op(JSET_K, X32_SYSCALL_BIT, To(enosys), Next);
    }
    dispatch(&mut a, &cases, allow);
    let (eacces, eperm) = (errno(&mut a, libc::EACCES), errno(&mut a, libc::EPERM));
    for (l, body) in to_emit {
        a.bind(l);
        match body {
            Body::Errno(_) => {}
            Body::SetIdMode(i) => {
                a.op(LD_W_ABS, arg(i), Next, Next);
                a.op(JSET_K, SET_ID_BITS, To(eperm), To(allow));
            }
            Body::UnixOnly => {
                a.op(LD_W_ABS, arg(0), Next, Next);
                a.op(JEQ_K, libc::AF_UNIX as u32, To(allow), To(eacces));
            }
            Body::TcpOrDatagram | Body::TcpOnly => {
                let datagram = if body == Body::TcpOnly { eacces } else { allow };
                let (ip, stream) = (a.label(), a.label());
                a.op(LD_W_ABS, arg(0), Next, Next);
                a.op(JEQ_K, libc::AF_VSOCK as u32, To(eacces), Next);
                a.op(JEQ_K, libc::AF_INET as u32, To(ip), Next);
                a.op(JEQ_K, libc::AF_INET6 as u32, To(ip), To(allow));
                a.bind(ip);
                a.op(LD_W_ABS, arg(1), Next, Next);
                let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;
                a.op(AND_K, !flags, Next, Next);
                a.op(JEQ_K, libc::SOCK_STREAM as u32, To(stream), Next);
                a.op(JEQ_K, libc::SOCK_DGRAM as u32, To(datagram), To(eacces));
                a.bind(stream);
                a.op(LD_W_ABS, arg(2), Next, Next);
                a.op(JEQ_K, 0, To(allow), Next);
                a.op(JEQ_K, libc::IPPROTO_TCP as u32, To(allow), To(eacces));
            }
            Body::NoFastOpen(i) => {
                a.op(LD_W_ABS, arg(i), Next, Next);
                a.op(JSET_K, MSG_FASTOPEN, To(eacces), To(allow));
            }
            Body::NoVsock => {
                a.op(LD_W_ABS, arg(0), Next, Next);
                a.op(JEQ_K, libc::AF_VSOCK as u32, To(eacces), To(allow));
            }
            Body::JoinNewSessionOnly => {
                // The option is an int (the kernel ignores the high half);
                // the name is a pointer: both halves must be zero.
                a.op(LD_W_ABS, arg(0), Next, Next);
                a.op(JEQ_K, KEYCTL_JOIN_SESSION_KEYRING, Next, To(eperm));
                a.op(LD_W_ABS, arg(1), Next, Next);
                a.op(JEQ_K, 0, Next, To(eperm));
                a.op(LD_W_ABS, arg_high(1), Next, Next);
                a.op(JEQ_K, 0, To(allow), To(eperm));
            }
        }
    }
    a.bind(allow);
    a.op(RET_K, RET_ALLOW, Next, Next);
    a.bind(kill);
    a.op(RET_K, RET_KILL_PROCESS, Next, Next);
    for (e, l) in errno_labels {
        a.bind(l);
        a.op(RET_K, RET_ERRNO | e as u32, Next, Next);
    }
    a.finish()
}

/// Jumps to the label of the call number in `cases` (sorted), or to `allow`:
/// a binary search, so that every number is decided in a few comparisons.
fn dispatch(a: &mut Asm, cases: &[(u32, Label)], allow: Label) {
    if cases.len() <= 3 {
        for &(n, l) in cases {
            a.op(JEQ_K, n, To(l), Next);
        }
        a.op(JEQ_K, 0, To(allow), To(allow));
        return;
    }
    let mid = cases.len() / 2;
    let upper = a.label();
    a.op(JGE_K, cases[mid].0, To(upper), Next);
    dispatch(a, &cases[..mid], allow);
    a.bind(upper);
    dispatch(a, &cases[mid..], allow);
}

/// A place in the program, bound once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Label(usize);

/// Where a jump goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    Next,
    To(Label),
}
use Target::{Next, To};

/// A tiny assembler: instructions with symbolic jump targets.
#[derive(Default)]
struct Asm {
    ops: Vec<(u16, u32, Target, Target)>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.ops.len());
    }

    fn op(&mut self, code: u16, k: u32, jt: Target, jf: Target) {
        self.ops.push((code, k, jt, jf));
    }

    fn finish(self) -> Result<Vec<libc::sock_filter>, SeccompError> {
        if self.ops.len() > 4096 {
            return Err(SeccompError::TooLong(self.ops.len()));
        }
        let offset = |at: usize, t: Target| -> Result<u8, SeccompError> {
            let to = match t {
                Next => return Ok(0),
                To(l) => self.labels[l.0].unwrap_or(usize::MAX),
            };
            let d = to
                .checked_sub(at + 1)
                .ok_or(SeccompError::JumpTooFar(usize::MAX))?;
            u8::try_from(d).map_err(|_| SeccompError::JumpTooFar(d))
        };
        self.ops
            .iter()
            .enumerate()
            .map(|(at, &(code, k, jt, jf))| {
                Ok(libc::sock_filter {
                    code,
                    jt: offset(at, jt)?,
                    jf: offset(at, jf)?,
                    k,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `p` on one system call, as the kernel would (only the opcodes used here).
    fn run(p: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 6]) -> u32 {
        run_wide(p, arch, nr, args.map(u64::from))
    }

    /// [`run`] with 64-bit arguments (both halves loadable).
    fn run_wide(p: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let load = |off: u32| match off {
            NR => nr,
            ARCH => arch,
            o => {
                let a = args[((o - 16) / 8) as usize];
                if (o - 16) % 8 == 4 {
                    (a >> 32) as u32
                } else {
                    a as u32
                }
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            let jump = |cond: bool| pc + 1 + usize::from(if cond { i.jt } else { i.jf });
            pc = match i.code {
                LD_W_ABS => {
                    acc = load(i.k);
                    pc + 1
                }
                AND_K => {
                    acc &= i.k;
                    pc + 1
                }
                JEQ_K => jump(acc == i.k),
                JGE_K => jump(acc >= i.k),
                JSET_K => jump(acc & i.k != 0),
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            };
        }
    }

    fn net(enabled: bool, connect: &[u16]) -> NetworkRules {
        NetworkRules {
            enabled,
            bind_tcp: Vec::new(),
            connect_tcp: connect.to_vec(),
            stream_only: false,
        }
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = RET_ERRNO | libc::EACCES as u32;
    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn set_id_modes_ipc_and_unreadable_calls_are_refused_everywhere() {
        for rules in [net(true, &[]), net(true, &[80]), net(false, &[])] {
            let p = program(&rules, false).expect("program");
            let call = |nr: libc::c_long, args: [u32; 6]| run(&p, AUDIT_ARCH, nr as u32, args);
            assert_eq!(call(libc::SYS_fchmodat, [0, 0, 0o4755, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_fchmodat, [0, 0, 0o2755, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_fchmodat, [0, 0, 0o1777, 0, 0, 0]), RET_ALLOW);
            assert_eq!(
                run(&p, AUDIT_ARCH, SYS_FCHMODAT2, [0, 0, 0o6000, 0, 0, 0]),
                EPERM
            );
            assert_eq!(call(libc::SYS_fchmod, [3, 0o4700, 0, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_openat, [0, 0, 0o101, 0o4755, 0, 0]), EPERM);
            assert_eq!(
                call(libc::SYS_openat, [0, 0, 0o101, 0o644, 0, 0]),
                RET_ALLOW
            );
            assert_eq!(call(libc::SYS_mknodat, [0, 0, 0o106755, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_shmget, [0; 6]), EPERM);
            assert_eq!(call(libc::SYS_semget, [0; 6]), EPERM);
            assert_eq!(call(libc::SYS_msgget, [0; 6]), EPERM);
            assert_eq!(call(libc::SYS_mq_open, [0; 6]), EPERM);
            assert_eq!(call(libc::SYS_openat2, [0; 6]), ENOSYS);
            assert_eq!(call(libc::SYS_read, [0; 6]), RET_ALLOW);
            assert_eq!(call(libc::SYS_exit_group, [0; 6]), RET_ALLOW);
            #[cfg(target_arch = "x86_64")]
            {
                assert_eq!(call(libc::SYS_chmod, [0, 0o4755, 0, 0, 0, 0]), EPERM);
                assert_eq!(call(libc::SYS_creat, [0, 0o2755, 0, 0, 0, 0]), EPERM);
                assert_eq!(call(libc::SYS_open, [0, 0o101, 0o4755, 0, 0, 0]), EPERM);
                assert_eq!(call(libc::SYS_mknod, [0, 0o104755, 0, 0, 0, 0]), EPERM);
                let x32 = |n: libc::c_long| (n as u32) | X32_SYSCALL_BIT;
                assert_eq!(run(&p, AUDIT_ARCH, x32(libc::SYS_read), [0; 6]), ENOSYS);
                assert_eq!(
                    run(&p, 0x4000_0003, libc::SYS_read as u32, [0; 6]),
                    RET_KILL_PROCESS
                );
            }
            for nr in 0..500u32 {
                let r = run(&p, AUDIT_ARCH, nr, [0; 6]);
                assert!(
                    r == RET_ALLOW || r & 0xffff_0000 == RET_ERRNO,
                    "{nr}: {r:#x}"
                );
            }
        }
    }

    #[test]
    fn keyrings_are_refused_but_joining_a_new_session_keyring_unless_allowed() {
        let join = KEYCTL_JOIN_SESSION_KEYRING as u64;
        let read = 11u64; // KEYCTL_READ
        for rules in [net(true, &[]), net(true, &[80]), net(false, &[])] {
            let refused = program(&rules, false).expect("program");
            let allowed = program(&rules, true).expect("program");
            let keyctl = |p: &[libc::sock_filter], args: [u64; 6]| {
                run_wide(p, AUDIT_ARCH, libc::SYS_keyctl as u32, args)
            };
            assert_eq!(keyctl(&refused, [join, 0, 0, 0, 0, 0]), RET_ALLOW);
            assert_eq!(
                keyctl(&refused, [join, 0x7f00_1000, 0, 0, 0, 0]),
                EPERM,
                "a name"
            );
            assert_eq!(
                keyctl(&refused, [join, 0x7fff_0000_0000, 0, 0, 0, 0]),
                EPERM,
                "a name at an address whose low half is zero"
            );
            assert_eq!(keyctl(&refused, [read, 0, 0, 0, 0, 0]), EPERM);
            assert_eq!(
                keyctl(&refused, [join | 1 << 32, 0, 0, 0, 0, 0]),
                RET_ALLOW,
                "an int"
            );
            for nr in [libc::SYS_add_key, libc::SYS_request_key] {
                assert_eq!(run(&refused, AUDIT_ARCH, nr as u32, [0; 6]), EPERM);
                assert_eq!(run(&allowed, AUDIT_ARCH, nr as u32, [0; 6]), RET_ALLOW);
            }
            assert_eq!(keyctl(&allowed, [read, 0, 0, 0, 0, 0]), RET_ALLOW);
            assert_eq!(keyctl(&allowed, [join, 0x7f00_1000, 0, 0, 0, 0]), RET_ALLOW);
        }
    }

    #[test]
    fn vsock_sockets_are_refused_under_every_network_rule() {
        let vsock = libc::AF_VSOCK as u32;
        for rules in [net(true, &[]), net(true, &[443]), net(false, &[])] {
            let p = program(&rules, false).expect("program");
            let socket =
                |d: u32, t: u32| run(&p, AUDIT_ARCH, libc::SYS_socket as u32, [d, t, 0, 0, 0, 0]);
            assert_eq!(socket(vsock, libc::SOCK_STREAM as u32), EACCES);
            assert_eq!(socket(vsock, libc::SOCK_DGRAM as u32), EACCES);
            assert_eq!(
                socket(libc::AF_UNIX as u32, libc::SOCK_STREAM as u32),
                RET_ALLOW
            );
        }
        let open = program(&net(true, &[]), false).expect("program");
        let inet = run(
            &open,
            AUDIT_ARCH,
            libc::SYS_socket as u32,
            [libc::AF_INET as u32, libc::SOCK_RAW as u32, 1, 0, 0, 0],
        );
        assert_eq!(
            inet, RET_ALLOW,
            "other families are the network rules' business"
        );
    }

    #[test]
    fn the_network_part_follows_the_rules() {
        let (inet, inet6, unix) = (
            libc::AF_INET as u32,
            libc::AF_INET6 as u32,
            libc::AF_UNIX as u32,
        );
        let (stream, dgram, raw) = (
            libc::SOCK_STREAM as u32,
            libc::SOCK_DGRAM as u32,
            libc::SOCK_RAW as u32,
        );
        let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;
        let socket = |p: &[libc::sock_filter], d: u32, t: u32, proto: u32| {
            run(
                p,
                AUDIT_ARCH,
                libc::SYS_socket as u32,
                [d, t, proto, 0, 0, 0],
            )
        };
        let uring =
            |p: &[libc::sock_filter]| run(p, AUDIT_ARCH, libc::SYS_io_uring_setup as u32, [0; 6]);
        let sendto = |p: &[libc::sock_filter], f: u32| {
            run(p, AUDIT_ARCH, libc::SYS_sendto as u32, [3, 0, 1, f, 0, 0])
        };
        // Network on, no lists: sockets are Landlock's business only.
        let open = program(&net(true, &[]), false).expect("program");
        assert_eq!(socket(&open, inet, stream, 262), RET_ALLOW);
        assert_eq!(sendto(&open, MSG_FASTOPEN), RET_ALLOW);
        assert_eq!(uring(&open), ENOSYS);
        // TCP lists.
        let lists = program(&net(true, &[443]), false).expect("program");
        for d in [inet, inet6] {
            assert_eq!(socket(&lists, d, stream, 0), RET_ALLOW);
            assert_eq!(socket(&lists, d, stream | flags, 6), RET_ALLOW);
            assert_eq!(socket(&lists, d, stream, 262), EACCES, "MPTCP");
            assert_eq!(
                socket(&lists, d, stream | libc::SOCK_CLOEXEC as u32, 132),
                EACCES
            );
            assert_eq!(socket(&lists, d, dgram, 0), RET_ALLOW);
            assert_eq!(socket(&lists, d, dgram | flags, 17), RET_ALLOW);
            assert_eq!(socket(&lists, d, raw, 6), EACCES);
            assert_eq!(socket(&lists, d, libc::SOCK_SEQPACKET as u32, 0), EACCES);
        }
        assert_eq!(socket(&lists, unix, stream, 0), RET_ALLOW);
        assert_eq!(socket(&lists, libc::AF_NETLINK as u32, raw, 0), RET_ALLOW);
        // The fallback of network.domains: plain TCP only, no datagram.
        let mut fallback = net(true, &[3128]);
        fallback.stream_only = true;
        let streams = program(&fallback, false).expect("program");
        for d in [inet, inet6] {
            assert_eq!(socket(&streams, d, stream | flags, 0), RET_ALLOW);
            assert_eq!(socket(&streams, d, stream, 262), EACCES, "MPTCP");
            assert_eq!(socket(&streams, d, dgram, 0), EACCES, "UDP");
            assert_eq!(socket(&streams, d, dgram | flags, 17), EACCES, "UDP");
            assert_eq!(socket(&streams, d, raw, 1), EACCES);
        }
        assert_eq!(socket(&streams, unix, dgram, 0), RET_ALLOW);
        assert_eq!(sendto(&streams, MSG_FASTOPEN), EACCES);
        assert_eq!(
            sendto(&lists, MSG_FASTOPEN | libc::MSG_NOSIGNAL as u32),
            EACCES
        );
        assert_eq!(sendto(&lists, libc::MSG_NOSIGNAL as u32), RET_ALLOW);
        let sendmsg = run(
            &lists,
            AUDIT_ARCH,
            libc::SYS_sendmsg as u32,
            [3, 0, MSG_FASTOPEN, 0, 0, 0],
        );
        assert_eq!(sendmsg, EACCES);
        let sendmmsg = run(
            &lists,
            AUDIT_ARCH,
            libc::SYS_sendmmsg as u32,
            [3, 0, 1, MSG_FASTOPEN, 0, 0],
        );
        assert_eq!(sendmmsg, EACCES);
        assert_eq!(uring(&lists), EACCES);
        // Network off.
        let off = program(&net(false, &[]), false).expect("program");
        assert_eq!(socket(&off, unix, stream, 0), RET_ALLOW);
        assert_eq!(socket(&off, inet, dgram, 0), EACCES);
        assert_eq!(socket(&off, libc::AF_NETLINK as u32, raw, 0), EACCES);
        let pair = run(
            &off,
            AUDIT_ARCH,
            libc::SYS_socketpair as u32,
            [inet, stream, 0, 0, 0, 0],
        );
        assert_eq!(pair, EACCES);
        assert_eq!(uring(&off), EACCES);
        assert!(
            off.len() < 100 && lists.len() < 100,
            "{} {}",
            off.len(),
            lists.len()
        );
    }
}
