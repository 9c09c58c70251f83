//! The two changes a new network namespace needs, made by hand: loopback
//! up (`SIOCSIFFLAGS`), and one route that makes every address local to it
//! (`RTM_NEWROUTE`: `local default dev lo`, the table `local`). Two fixed
//! messages do not call for a netlink library (docs/decisions.md).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `lo`'s index in a new network namespace: always the first device.
const LOOPBACK_INDEX: u32 = 1;

/// Brings `lo` up.
pub(super) fn loopback_up() -> io::Result<()> {
    // Safety: no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a descriptor just made, owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // Safety: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // Safety: `req` is a valid ifreq naming `lo`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: SIOCGIFFLAGS filled the flags member of the union.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // Safety: as above.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Adds `local default dev lo` for `family` (`AF_INET` or `AF_INET6`) and
/// waits for the kernel's answer.
pub(super) fn route_all_to_loopback(family: u8) -> io::Result<()> {
    // Safety: no pointers.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a descriptor just made, owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let msg = new_route(family);
    // Safety: `msg` is readable for its length; the kernel is the default
    // destination of an unbound netlink socket.
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut reply = [0u8; 512];
    // Safety: `reply` is writable for its length.
    let got = unsafe { libc::recv(sock.as_raw_fd(), reply.as_mut_ptr().cast(), reply.len(), 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    ack_error(&reply[..got as usize])
}

/// `RTM_NEWROUTE`: family, no destination bits, table local, scope host,
/// type local, output device `lo`, asking for an acknowledgement.
fn new_route(family: u8) -> Vec<u8> {
    const HEADER: usize = 16;
    const RTMSG: usize = 12;
    const ATTR: usize = 8;
    let len = HEADER + RTMSG + ATTR;
    let flags = libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWROUTE.to_ne_bytes());
    m.extend_from_slice(&(flags as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
    m.extend_from_slice(&[
        family,
        0, // dst_len
        0, // src_len
        0, // tos
        libc::RT_TABLE_LOCAL,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_HOST,
        libc::RTN_LOCAL,
    ]);
    m.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    m.extend_from_slice(&(ATTR as u16).to_ne_bytes());
    m.extend_from_slice(&libc::RTA_OIF.to_ne_bytes());
    m.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    m
}

/// The error an `NLMSG_ERROR` acknowledgement carries (0: done).
fn ack_error(reply: &[u8]) -> io::Result<()> {
    let field = |at: usize| -> Option<[u8; 4]> { reply.get(at..at + 4)?.try_into().ok() };
    let kind = reply
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(u16::from_ne_bytes);
    if kind != Some(libc::NLMSG_ERROR as u16) {
        return Err(io::Error::other("netlink: no acknowledgement"));
    }
    match field(16).map(i32::from_ne_bytes) {
        Some(0) => Ok(()),
        Some(e) => Err(io::Error::from_raw_os_error(-e)),
        None => Err(io::Error::other("netlink: a short acknowledgement")),
    }
}
