//! The first processes of PID-namespace runs, known by pid *and* start time.
//!
//! Where runs are contained by a PID namespace (no writable cgroup), the
//! namespace lives exactly as long as its first process: SIGKILL to it kills
//! every process of the run, whatever group or session they moved to. That
//! process is the one thing to kill, and it must be the right one: a pid alone
//! may have been reused by the time it is killed, so each is recorded with its
//! start time (`/proc/<pid>/stat`, clock ticks after boot) and killed through
//! a pidfd opened before the start time is compared.
//!
//! The watchdog's table of them lives in a file beside the socket
//! (`<socket>.runs`, mode 0600, a protected path): a server started on the
//! same socket reads what a dead server (and its dead watchdog) left there and
//! kills those survivors before it binds (`take_over_record`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys;

/// How long a server waits at startup for the survivors it killed to be gone.
const SURVIVORS_GONE: Duration = Duration::from_secs(3);

/// The record of a socket: `<socket>.runs`.
pub fn record_path(socket: &Path) -> PathBuf {
    toolsrv_base::Sibling::Runs.of(socket)
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`), if it
/// exists.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the fields
    // after it follow the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // `rest` starts with field 3 (state): field 22 is its 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Sends SIGKILL to `pid` if it is still the process that started at
/// `start`; the pidfd it was sent through, or `None` when that process is
/// gone (or the pid now names another one).
pub(crate) fn kill_if_same(pid: i32, start: u64) -> Option<OwnedFd> {
    if pid <= 1 || start == 0 {
        return None;
    }
    // The pidfd names whichever process holds `pid` now; if that one's start
    // time is `start`, it is the recorded process, and the signal cannot
    // reach another one even if `pid` is reused in between.
    let pidfd = sys::pidfd_open(pid).ok()?;
    if start_time(pid) != Some(start) {
        return None;
    }
    toolsrv_base::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL).ok()?;
    Some(pidfd)
}

/// Bytes of a table of `slots` entries: a pid (`i32`) each, then a start
/// time (`u64`) each.
pub(crate) const fn table_len(slots: usize) -> usize {
    slots * (std::mem::size_of::<i32>() + std::mem::size_of::<u64>())
}

/// Kills the survivors that the record at `path` names (left by a server
/// that died with its watchdog), waits at most 3 s for them to be gone, and
/// puts a fresh, zeroed record of `slots` entries in its place. The new
/// record's file and how many survivors were killed.
///
/// Slot 0 of the pids holds how many slots were ever used, as in the
/// watchdog's table. A record that is not a regular file owned by this user
/// is not read (and is replaced all the same).
pub(crate) fn take_over_record(path: &Path, slots: usize) -> io::Result<(File, usize)> {
    let mut killed = Vec::new();
    if let Some(old) = read_record(path, slots) {
        let (pids, starts) = old.split_at(slots * 4);
        let word = |b: &[u8], i: usize, n: usize| -> u64 {
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&b[i * n..i * n + n]);
            u64::from_le_bytes(w)
        };
        let used = (word(pids, 0, 4) as usize).min(slots - 1);
        for i in 1..=used {
            let pid = word(pids, i, 4) as u32 as i32;
            if let Some(fd) = kill_if_same(pid, word(starts, i, 8)) {
                killed.push(fd);
            }
        }
    }
    let n = killed.len();
    wait_gone(&killed, SURVIVORS_GONE);
    Ok((fresh_record(path, slots)?, n))
}

/// The bytes of the record at `path`, if it is a regular file of this user
/// and of the expected size.
fn read_record(path: &Path, slots: usize) -> Option<Vec<u8>> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    let me = toolsrv_base::effective_uid();
    if !meta.is_file() || meta.uid() != me || meta.len() != table_len(slots) as u64 {
        return None;
    }
    let mut buf = Vec::with_capacity(table_len(slots));
    f.read_to_end(&mut buf).ok()?;
    (buf.len() == table_len(slots)).then_some(buf)
}

/// A new zeroed record of `slots` entries, mode 0600, renamed over `path`.
fn fresh_record(path: &Path, slots: usize) -> io::Result<File> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
    let done = f
        .set_len(table_len(slots) as u64)
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
    }
    Ok(f)
}

/// Waits until every process behind `pidfds` has exited, at most `limit`.
fn wait_gone(pidfds: &[OwnedFd], limit: Duration) {
    let deadline = Instant::now() + limit;
    for fd in pidfds {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            match sys::poll_readable(fd.as_fd(), ms) {
                Ok(false) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(true) | Err(_) => break,
            }
            if left.is_zero() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_of_this_process_is_read_and_stays_the_same() {
        let me = std::process::id() as i32;
        let t = start_time(me).expect("start time of this process");
        assert!(t > 0);
        assert_eq!(start_time(me), Some(t));
        assert_eq!(start_time(-5), None);
    }

    #[test]
    fn a_process_with_another_start_time_is_not_killed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        let start = start_time(pid).expect("start time");
        assert!(kill_if_same(pid, start + 1).is_none());
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "killed the wrong process"
        );
        assert!(kill_if_same(pid, start).is_some());
        let status = child.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
}
