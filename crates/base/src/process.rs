//! A process named so that a reused pid is never taken for it: its pid and
//! its start time (`/proc/<pid>/stat`, field 22: clock ticks after boot).
//! Two processes never share both.

use std::io;

/// Sends `sig` to process `pid` (a negative `pid` addresses a process
/// group; a `pid` of 0 or -1 is refused with `EINVAL`, since kill(2) would
/// take it for "my group" or "every process"). A process that is gone is
/// `ESRCH`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    if pid == 0 || pid == -1 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    crate::sys::kill(pid, sig)
}

/// Whether process `pid` exists (it may be a zombie, or another user's:
/// `EPERM` counts as alive).
pub fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match crate::sys::kill(pid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// A process: pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// Its pid (in this process's PID namespace).
    pub pid: i32,
    /// When it started, in clock ticks after boot.
    pub start: u64,
}

/// What `/proc/<pid>/stat` says of a process that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its parent's pid (0 when the parent lies outside this PID namespace).
    pub ppid: i32,
    /// When it started, in clock ticks after boot.
    pub start: u64,
}

/// The [`Stat`] of `pid`. Fails when the process is gone or `/proc` cannot
/// be read or parsed (the error names the pid).
pub fn stat(pid: i32) -> io::Result<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat cannot be parsed"),
        )
    })
}

/// Parses the fields after the command name, which is in parentheses and may
/// itself hold spaces and parentheses: everything after the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // Field 3 is the state; 4 the parent; 22 the start time.
    let ppid = fields.nth(1)?.parse().ok()?;
    let start = fields.nth(17)?.parse().ok()?;
    Some(Stat { ppid, start })
}

impl ProcessId {
    /// This process.
    pub fn current() -> io::Result<ProcessId> {
        let pid = i32::try_from(std::process::id())
            .map_err(|_| io::Error::other("this process's pid does not fit an i32"))?;
        ProcessId::of(pid)
    }

    /// The process `pid` is now.
    pub fn of(pid: i32) -> io::Result<ProcessId> {
        Ok(ProcessId {
            pid,
            start: stat(pid)?.start,
        })
    }

    /// Whether this process still runs (its pid names a process that started
    /// when it did). A zombie still counts: it is gone once reaped. What
    /// cannot be told counts as gone; see [`ProcessId::status`].
    pub fn alive(&self) -> bool {
        self.status().unwrap_or(false)
    }

    /// [`ProcessId::alive`], with an error when it cannot be told (`/proc`
    /// unreadable, out of descriptors) rather than the process being gone.
    pub fn status(&self) -> io::Result<bool> {
        if self.pid <= 0 {
            return Ok(false);
        }
        match stat(self.pid) {
            Ok(s) => Ok(s.start == self.start),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The `<pid>-<start>` form ([`std::fmt::Display`]) read back; `None`
    /// for anything else.
    pub fn parse(text: &str) -> Option<ProcessId> {
        let (pid, start) = text.split_once('-')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(pid) || !digits(start) {
            return None;
        }
        Some(ProcessId {
            pid: pid.parse().ok().filter(|p| *p > 0)?,
            start: start.parse().ok()?,
        })
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.pid, self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_refuses_the_pids_that_mean_many_processes_and_alive_sees_a_reaped_child_gone() {
        for pid in [0, -1] {
            let e = kill(pid, 0).expect_err("refused");
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "pid {pid}");
        }
        let me = i32::try_from(std::process::id()).expect("pid fits");
        assert!(alive(me));
        kill(me, 0).expect("signal 0 to myself");
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = i32::try_from(child.id()).expect("pid fits");
        child.wait().expect("reap");
        assert!(!alive(pid), "a reaped child is gone");
        assert_eq!(
            kill(pid, 0).map_err(|e| e.raw_os_error()),
            Err(Some(libc::ESRCH))
        );
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let line = "42 (a b) c)) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                ppid: 7,
                start: 123456
            })
        );
        assert_eq!(parse_stat("42 (x) S"), None);
    }

    #[test]
    fn this_process_is_alive_and_its_form_reads_back() {
        let me = ProcessId::current().expect("current");
        assert!(me.alive());
        assert_eq!(ProcessId::parse(&me.to_string()), Some(me));
        let other = ProcessId {
            start: me.start + 1,
            ..me
        };
        assert!(!other.alive(), "another start time is another process");
        for bad in ["", "1", "-1", "1-", "a-1", "1-b", "0-5", "1-2-3", "+1-2"] {
            assert_eq!(ProcessId::parse(bad), None, "{bad:?}");
        }
    }
}
