//! The filesystem access sets of the four rule kinds, as docs/tools.md defines them.

use std::os::fd::BorrowedFd;

use landlock::{Access, AccessFs, BitFlags, ABI};

/// Access rights for each rule kind at one ABI.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AccessSets {
    /// Every filesystem right of the ABI: anything not granted is denied.
    pub(crate) handled: BitFlags<AccessFs>,
    /// Read files, list directories.
    pub(crate) ro: BitFlags<AccessFs>,
    /// `ro` + execute.
    pub(crate) rox: BitFlags<AccessFs>,
    /// `ro` + every write right of the ABI.
    pub(crate) rw: BitFlags<AccessFs>,
    /// `rw` + execute.
    pub(crate) rwx: BitFlags<AccessFs>,
    /// List directories only.
    pub(crate) list: BitFlags<AccessFs>,
    /// The rights that apply to a non-directory (a rule on a regular file).
    pub(crate) file_only: BitFlags<AccessFs>,
}

impl AccessSets {
    /// The sets for `abi`. `ro` is ReadFile|ReadDir on purpose: `AccessFs::from_read`
    /// would include Execute.
    pub(crate) fn for_abi(abi: ABI) -> AccessSets {
        let handled = AccessFs::from_all(abi);
        let ro = (AccessFs::ReadFile | AccessFs::ReadDir) & handled;
        let rox = ro | (handled & AccessFs::Execute);
        let rw = ro | AccessFs::from_write(abi);
        let rwx = rw | (handled & AccessFs::Execute);
        AccessSets {
            handled,
            ro,
            rox,
            rw,
            rwx,
            list: BitFlags::from(AccessFs::ReadDir) & handled,
            file_only: AccessFs::from_file(abi),
        }
    }
}

/// Whether the opened rule path is a directory.
pub(crate) fn is_dir(fd: BorrowedFd<'_>) -> std::io::Result<bool> {
    Ok(crate::open::identify(fd)?.1 == libc::S_IFDIR)
}
