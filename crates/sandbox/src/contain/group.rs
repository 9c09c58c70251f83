//! One cgroup directory (in the unified hierarchy or a v1 one) and the files of
//! it a run uses, opened once and kept: a pooled group costs no path lookup
//! per run.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::sys;

/// A cgroup directory this server made.
pub(crate) struct Group {
    path: PathBuf,
    /// The directory itself (for `CLONE_INTO_CGROUP`).
    dir: File,
    /// Files opened so far, by name.
    files: Vec<(&'static str, File)>,
}

impl Group {
    /// Makes the directory `path` (it must not exist) and opens it.
    pub(crate) fn create(path: PathBuf) -> io::Result<Group> {
        std::fs::create_dir(&path).map_err(|e| named(&path, "mkdir", e))?;
        Group::open(path)
    }

    /// Opens the existing directory `path`.
    pub(crate) fn open(path: PathBuf) -> io::Result<Group> {
        let dir = File::open(&path).map_err(|e| named(&path, "open", e))?;
        Ok(Group {
            path,
            dir,
            files: Vec::new(),
        })
    }

    /// The directory's descriptor.
    pub(crate) fn dir_fd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }

    /// Whether the kernel offers the control file `name` here.
    pub(crate) fn offers(&self, name: &str) -> bool {
        self.path.join(name).exists()
    }

    /// The control file `name`, opened for reading and writing where the
    /// kernel allows it (read-only files are opened read-only), and kept.
    pub(crate) fn file(&mut self, name: &'static str) -> io::Result<&File> {
        if let Some(i) = self.files.iter().position(|(n, _)| *n == name) {
            return Ok(&self.files[i].1);
        }
        let p = self.path.join(name);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .or_else(|_| File::open(&p))
            .map_err(|e| named(&p, "open", e))?;
        self.files.push((name, f));
        Ok(&self.files[self.files.len() - 1].1)
    }

    /// The raw descriptor of control file `name` (opened if needed).
    pub(crate) fn fd(&mut self, name: &'static str) -> io::Result<RawFd> {
        Ok(self.file(name)?.as_raw_fd())
    }

    /// Writes `value` to control file `name` in one `pwrite`.
    pub(crate) fn write(&mut self, name: &'static str, value: &str) -> io::Result<()> {
        let n = self
            .file(name)?
            .write_at(value.as_bytes(), 0)
            .map_err(|e| named(&self.path.join(name), &format!("write {value:?} to"), e))?;
        if n != value.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write to {}", self.path.join(name).display()),
            ));
        }
        Ok(())
    }

    /// Reads control file `name` whole (they are small).
    pub(crate) fn read(&mut self, name: &'static str) -> io::Result<String> {
        let f = self.file(name)?;
        let mut buf = vec![0u8; 4096];
        let mut len = 0;
        loop {
            if len == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = f.read_at(&mut buf[len..], len as u64)?;
            if n == 0 {
                break;
            }
            len += n;
        }
        buf.truncate(len);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// The value of `key` in a flat-keyed file (`populated 0`, `max 3`).
    ///
    /// These files are a few lines long: one `pread` into a page-sized
    /// buffer gets all of a text shorter than the buffer (the kernel
    /// generates it whole, `seq_file`), so only a full buffer is read on
    /// with [`Group::read`]. (That saves the second `pread`, which returns 0,
    /// at each run's end.)
    pub(crate) fn keyed(&mut self, name: &'static str, key: &str) -> io::Result<u64> {
        let mut buf = [0u8; 4096];
        let n = self.file(name)?.read_at(&mut buf, 0)?;
        if n < buf.len() {
            let text = String::from_utf8_lossy(&buf[..n]);
            return Ok(keyed_value(&text, key).unwrap_or(0));
        }
        let text = self.read(name)?;
        Ok(keyed_value(&text, key).unwrap_or(0))
    }

    /// The processes in the group now.
    pub(crate) fn pids(&mut self) -> io::Result<Vec<i32>> {
        Ok(self
            .read("cgroup.procs")?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// SIGKILL every process listed in the group; how many were listed.
    ///
    /// For hierarchies without `cgroup.kill` (v1, or v2 before Linux 5.14).
    /// The caller repeats until the group is empty: a process forked between
    /// the listing and the kill is found by the next listing, and the
    /// `pids` limit bounds how many there can be.
    pub(crate) fn kill_listed(&mut self) -> io::Result<usize> {
        let pids = self.pids()?;
        for &pid in &pids {
            sys::kill(pid, libc::SIGKILL);
        }
        Ok(pids.len())
    }

    /// Removes the directory (it must hold no process and no child group).
    pub(crate) fn remove(self) -> io::Result<()> {
        let Group { path, dir, files } = self;
        drop(files);
        drop(dir);
        std::fs::remove_dir(&path)
    }
}

/// `e` with what was done to which path (a cgroup error names its file).
fn named(path: &std::path::Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

/// The value of `key` in the text of a flat-keyed cgroup file.
pub(crate) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::keyed_value;

    #[test]
    fn keyed_files_are_read_by_key() {
        let t = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed_value(t, "oom_kill"), Some(3));
        assert_eq!(keyed_value(t, "oom"), None);
        assert_eq!(keyed_value("max 7\n", "max"), Some(7));
    }
}
