//! The pathname Unix sockets bound on this host (`/proc/net/unix`), for the
//! view to mask those under read-only rules: Landlock ABI 7 has no right for
//! `connect(2)` on a pathname socket, and a read-only mount does not stop
//! one, so a socket a rule merely lets tools read (a session bus, an agent, a
//! container runtime's) would otherwise be reachable.
//!
//! `/proc/net/unix` lists the sockets of the server's network namespace. A
//! name is kept only if it is absolute and, looked up now, is a socket: a
//! name with a newline cannot make the view mask anything but a socket.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

/// Every absolute path that names a bound Unix socket now (sorted, unique).
pub(crate) fn bound() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read("/proc/net/unix") else {
        return Vec::new();
    };
    let mut out = parse(&text);
    out.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()));
    out
}

/// The absolute paths in the text of `/proc/net/unix` (its eighth column,
/// the rest of the line), sorted and unique.
fn parse(text: &[u8]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = text
        .split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            // Num RefCount Protocol Flags Type St Inode Path: seven fields,
            // then the name, which may hold spaces.
            let mut rest = line;
            for _ in 0..7 {
                let start = rest.iter().position(|&b| b != b' ')?;
                rest = &rest[start..];
                let end = rest.iter().position(|&b| b == b' ')?;
                rest = &rest[end..];
            }
            let name = &rest[rest.iter().position(|&b| b != b' ')?..];
            name.starts_with(b"/")
                .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(name)))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_rest_of_the_line_and_only_absolute_ones_count() {
        let text = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
00000000c3b4c92d: 00000003 00000000 00000000 0001 03 130594\n\
00000000c9d4fc71: 00000002 00000000 00010000 0001 01 130595 /tmp/mfd/s.sock\n\
00000000c9d4fc72: 00000002 00000000 00010000 0001 01 130596 @abstract\n\
00000000c9d4fc73: 00000002 00000000 00010000 0001 01 130597 /run/a b.sock\n\
00000000c9d4fc74: 00000002 00000000 00010000 0001 01 130598 relative.sock\n";
        assert_eq!(
            parse(text),
            vec![
                PathBuf::from("/run/a b.sock"),
                PathBuf::from("/tmp/mfd/s.sock")
            ]
        );
    }

    #[test]
    fn a_socket_bound_here_is_found() {
        let t = tempfile::tempdir().unwrap();
        let p = std::fs::canonicalize(t.path()).unwrap().join("x.sock");
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert!(bound().contains(&p));
    }
}
