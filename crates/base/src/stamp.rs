//! One version of a file, as a stat sees it.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What a stat says about one file, enough to notice any change to it: its
/// identity (device, inode), size, modification and status-change times (to
/// the nanosecond) and mode. Two stamps differ when the file was replaced,
/// written, or had its mode or owner changed in between.
///
/// Used wherever a file is re-read only when it changed: the catalog's tool
/// files, the registry's loaded tools and the policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl FileStamp {
    /// A stamp no stat gives (device and inode 0): for a file that could
    /// not be looked at, so that the next look that succeeds differs.
    pub const UNKNOWN: FileStamp = FileStamp {
        dev: 0,
        ino: 0,
        size: 0,
        mtime: (0, 0),
        ctime: (0, 0),
        mode: 0,
    };

    /// The stamp of a file whose metadata is at hand.
    pub fn of(m: &Metadata) -> FileStamp {
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            mode: m.mode(),
        }
    }

    /// The stamp of `path` now, following symbolic links (`None` when it
    /// cannot be stat'ed).
    pub fn of_path(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path).ok().map(|m| FileStamp::of(&m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_write_a_chmod_and_a_replacement_each_change_the_stamp() {
        let dir = std::env::temp_dir().join(format!("toolsrv-base-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let f = dir.join("f");
        std::fs::write(&f, "one").expect("write");
        let first = FileStamp::of_path(&f).expect("stamp");
        assert_eq!(FileStamp::of_path(&f), Some(first), "nothing changed");

        std::fs::write(&f, "two!").expect("rewrite");
        let written = FileStamp::of_path(&f).expect("stamp");
        assert_ne!(written, first);

        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let chmodded = FileStamp::of_path(&f).expect("stamp");
        assert_ne!(chmodded, written);

        let g = dir.join("g");
        std::fs::write(&g, "two!").expect("write g");
        std::fs::rename(&g, &f).expect("replace");
        assert_ne!(FileStamp::of_path(&f).expect("stamp"), chmodded);

        std::fs::remove_dir_all(&dir).expect("clean up");
        assert_eq!(FileStamp::of_path(&f), None);
    }
}
