//! The capabilities a confined tool keeps.
//!
//! Landlock restricts paths, TCP ports, signals and abstract sockets; it does
//! not stop a process that holds capabilities from loading a kernel module,
//! rebooting, loading BPF programs, reconfiguring the network through netlink,
//! creating a device node and reading the raw disk through it, or doing port
//! I/O. A toolsrv running as root would hand all of that to its sandboxed
//! tools. So the child of a confined run sets its capabilities to the
//! server's, intersected with [`KEEP`], right before `execve`; with
//! `no_new_privs` set, `execve` (root's implicit capabilities included) then
//! grants nothing beyond them.
//!
//! [`KEEP`] holds what ordinary file work as root needs and stays inside the
//! Landlock rules: owning and changing modes of files (`tar` extracting as
//! root restores owners), overriding file permission bits, switching user or
//! group, signalling (scoped to the sandbox by Landlock ABI 6+), binding
//! ports below 1024 (the network policy decides which) and `chroot`.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;

/// Capabilities kept (bit numbers, `linux/capability.h`): CHOWN,
/// DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID, NET_BIND_SERVICE,
/// SYS_CHROOT. Everything else is dropped, notably SYS_ADMIN, SYS_MODULE,
/// SYS_BOOT, SYS_RAWIO, SYS_PTRACE, SYS_TIME, SYS_NICE, SYS_RESOURCE,
/// NET_ADMIN, NET_RAW, MKNOD, DAC_READ_SEARCH (`open_by_handle_at`), BPF,
/// PERFMON, SETPCAP, and, against set-id files (issue 14, hole 4):
/// - SETFCAP: writing `security.capability` needs it, and so does mapping
///   uid 0 in a new user namespace (where the tool would have it again);
/// - FSETID: without it the kernel clears the set-user-ID and set-group-ID
///   bits of a file a tool writes to or truncates, so an existing set-id
///   file cannot be given new content (setting the bits is the seccomp
///   filter's part).
pub(crate) const KEEP: &[u32] = &[0, 1, 3, 5, 6, 7, 10, 18];

/// `struct __user_cap_header_struct`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    version: u32,
    pid: i32,
}

/// The header for `capget`/`capset` on the calling thread (copied onto the
/// caller's stack: the kernel writes its preferred version into a header it
/// does not accept).
pub(crate) const HEADER: Header = Header {
    version: VERSION_3,
    pid: 0,
};

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The two words of each set, as `capget`/`capset` exchange them.
pub(crate) type Caps = [CapData; 2];

/// The capabilities of the calling thread.
fn current() -> io::Result<Caps> {
    let mut hdr = HEADER;
    let mut data = Caps::default();
    super::sys::capget(&mut hdr, &mut data)?;
    Ok(data)
}

/// [`KEEP`] as the two words of a set.
fn keep_mask() -> [u32; 2] {
    let mut mask = [0u32; 2];
    for &cap in KEEP {
        mask[(cap / 32) as usize] |= 1 << (cap % 32);
    }
    mask
}

/// `CAP_SETGID` and `CAP_SETUID`.
const SETID: [u32; 2] = [6, 7];

/// What a confined child should set: the current capabilities within
/// [`KEEP`], none inheritable. `None` when that changes nothing (a server
/// that is neither root nor in its own user namespace usually holds no
/// capabilities at all).
pub(crate) fn reduced() -> io::Result<Option<Caps>> {
    reduced_to(keep_mask())
}

/// [`reduced`] without `CAP_SETUID` and `CAP_SETGID`: for the first process
/// of a PID namespace, which must not be able to change its credentials (the
/// kernel clears the parent-death signal on any change of the effective or
/// file-system ids, `setegid(1); setegid(0)` included). Always `Some` when
/// the current set holds either.
pub(crate) fn reduced_without_setid() -> io::Result<Option<Caps>> {
    let mut mask = keep_mask();
    for cap in SETID {
        mask[(cap / 32) as usize] &= !(1 << (cap % 32));
    }
    reduced_to(mask)
}

/// The current capabilities within `mask`, none inheritable; `None` when
/// that changes nothing.
fn reduced_to(mask: [u32; 2]) -> io::Result<Option<Caps>> {
    let now = current()?;
    let mut want = now;
    for (w, m) in want.iter_mut().zip(mask) {
        w.effective &= m;
        w.permitted &= m;
        w.inheritable = 0;
    }
    Ok((want != now).then_some(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_set_is_within_the_current_one_and_drops_the_rest() {
        let now = current().expect("capget");
        let mask = keep_mask();
        assert_eq!(mask[0] & (1 << 21), 0, "SYS_ADMIN is not kept");
        assert_eq!(mask[0] & (1 << 27), 0, "MKNOD is not kept");
        assert_eq!(mask[0] & (1 << 4), 0, "FSETID is not kept");
        assert_eq!(mask[0] & (1 << 31), 0, "SETFCAP is not kept");
        match reduced().expect("reduced") {
            None => {
                for (w, m) in now.iter().zip(mask) {
                    assert_eq!(w.permitted & !m, 0);
                    assert_eq!(w.inheritable, 0);
                }
            }
            Some(want) => {
                for ((w, n), m) in want.iter().zip(now).zip(mask) {
                    assert_eq!(w.permitted, n.permitted & m);
                    assert_eq!(w.effective, n.effective & m);
                    assert_eq!(w.inheritable, 0);
                }
            }
        }
    }
}
