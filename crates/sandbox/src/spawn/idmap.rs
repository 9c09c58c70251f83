//! The child's own uid and gid maps, in a user namespace made for its run
//! (a server that has no user namespace of its own, `crate::identity`).

use super::sys::{self, Errno};
use crate::identity::IdMaps;

/// Writes `deny` to `/proc/self/setgroups`, then the uid and gid maps of
/// `ids` (the server's ids to themselves): the only maps a process without
/// privileges over its parent namespace may write. Raw calls on prepared
/// bytes only: runs between `clone` and `execve`.
pub(crate) fn map_own_ids(ids: &IdMaps) -> Result<(), Errno> {
    for (_, path, value) in ids.files() {
        // Safety: `files` gives NUL-terminated path literals.
        let fd = unsafe { sys::open_write_only(path.as_ptr().cast()) }?;
        let written = sys::write(fd, value);
        sys::close(fd);
        match written {
            Ok(n) if n == value.len() => {}
            Ok(_) => return Err(libc::EIO),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
